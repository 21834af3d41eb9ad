"""The planner's tools: atomic, JSON in / JSON out (docs/verifier-model.md, the planner's "Tools").

Each tool has a pydantic input model (its JSON schema goes into the planner prompt) and an
async ``run(input) -> ToolOutput``. A tool only computes; comparing its output with the value
the draft states is the executor's job (``_execute``), so nothing a planner writes can become
the value a claim is judged against.

Tools (only those the :class:`Toolbox` can run are offered to the planner):

``calculate`` {expression}
    exact arithmetic on the arithmetic verifier's own whitelisted parser and evaluator
    (:mod:`verifiers.arithmetic._tokens`, :func:`verifiers.arithmetic._expr.evaluate`); never
    ``eval``.
``sympy_equivalent`` {left, right}
    :func:`verifiers.arithmetic.equivalent` (SymPy + sampled points).
``convert_units`` {value, from_unit, to_unit}
    pint (https://pint.readthedocs.io), the registry the arithmetic verifier already builds.
``run_python`` {setup, code, assertions}
    the sandbox (:mod:`verifiers.sandbox`) with the code verifier's harness
    (:mod:`verifiers.code._harness`): ``setup`` builds constructed inputs (a small DataFrame
    instead of ``read_csv``), ``code`` is the draft's own code, ``assertions`` are boolean
    expressions, judged in the gateway on what the sandbox captured; a run the checked code
    could have written (see the harness's docstring) is marked ``untrusted`` and can fail a
    draft but never pass one. Offered only with a sandbox that can run code.
``check_citation`` {reference}
    the citation verifier (:func:`verifiers.citations.acheck`) on one reference line. Offered
    only when citation sources are configured.
``search_facts`` {claim}
    the fact-search callable the gateway injects (docs/facts.md). Offered only when set.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verifiers.arithmetic._expr import format_value, to_text
from verifiers.planner._text import ExprError, parse_expression, value_of


class _In(BaseModel):
    # The tool input models below carry field descriptions but no class docstrings on purpose:
    # pydantic puts a class docstring into the JSON schema, which goes into every planner prompt.
    model_config = ConfigDict(extra="forbid")


class CalculateIn(_In):
    expression: str = Field(..., description="one arithmetic expression: numbers, + - * / ^ ( ) ! %, sqrt, pi",
                            max_length=2000)


class SympyEquivalentIn(_In):
    left: str = Field(..., description="a formula exactly as the draft writes it", max_length=500)
    right: str = Field(..., description="the formula the draft says it equals, exactly as written", max_length=500)


class ConvertUnitsIn(_In):
    value: float = Field(..., description="the quantity to convert, as stated in the question or draft")
    from_unit: str = Field(..., description="pint unit name, e.g. km, mile, degF, kg", max_length=40)
    to_unit: str = Field(..., description="pint unit name of the draft's result", max_length=40)


class RunPythonIn(_In):
    setup: str = Field("", description="constructed inputs replacing files/network/user input (e.g. a small "
                                       "DataFrame)", max_length=4000)
    code: str = Field(..., description="the draft's own code lines to test, copied exactly", max_length=8000)
    assertions: list[str] = Field(default_factory=list, max_length=10,
                                  description="boolean Python expressions that must hold after the code ran")


class CheckCitationIn(_In):
    reference: str = Field(..., description="one reference exactly as the draft writes it", max_length=1000)


class SearchFactsIn(_In):
    claim: str = Field(..., description="one factual claim of the draft", max_length=500)


@dataclass(slots=True)
class ToolOutput:
    """What a tool returns: ``data`` (JSON-ready, shown as evidence), ``raw`` (the exact value
    for the executor: a Fraction, a Check, a list of records), ``error`` (the tool could not
    run this input: an ``unknown`` step, never a ``fail``)."""

    data: dict[str, Any]
    raw: Any = None
    error: str | None = None


@dataclass(slots=True)
class Tool:
    """One tool: ``name``, ``description`` (for the prompt), ``input_model`` (pydantic),
    ``run`` (async ``(validated input) -> ToolOutput``)."""

    name: str
    description: str
    input_model: type[BaseModel]
    run: Callable[[Any], Awaitable[ToolOutput]]

    def schema(self) -> dict[str, Any]:
        """The input model's JSON schema without titles (built once per model: pydantic's
        schema generation costs ~0.5 ms; treat the returned dict as read-only)."""
        return _schema(self.input_model)


@functools.lru_cache(maxsize=None)
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    s = model.model_json_schema()
    s.pop("title", None)
    for p in s.get("properties", {}).values():
        p.pop("title", None)
    return s


_UNIT_TEXT = re.compile(r"^[A-Za-z°µ_][A-Za-z°µ_ /*^0-9.]{0,39}$")

#: Exceptions of the draft's code that mean "the harness is incomplete or needs the outside
#: world", not "the code is wrong": ``unknown``, never ``fail`` (as in the code verifier).
ENVIRONMENT_ERRORS = frozenset({"NameError", "ImportError", "ModuleNotFoundError", "FileNotFoundError", "OSError",
                                "EOFError", "ConnectionError", "PermissionError", "TimeoutError", "KeyboardInterrupt",
                                "URLError", "HTTPError", "IsADirectoryError", "NotADirectoryError"})


@dataclass
class Toolbox:
    """The tools a plan may call, built from what this gateway can run.

    ``sandbox``: a :class:`verifiers.sandbox.Sandbox` (``run_python`` is offered when it is
    available); ``citation_sources``: a :class:`verifiers.citations.Sources` or its dict
    (``check_citation`` offered when given; None would mean the public APIs, so it is never
    implied); ``search_facts``: ``async (claim: str) -> dict`` (docs/facts.md; expected keys
    ``outcome`` pass|fail|unknown or ``verdict`` supported|refuted|..., plus evidence).
    ``python_timeout_s`` caps one ``run_python`` run.
    """

    sandbox: Any = None
    citation_sources: Any = None
    search_facts: Callable[[str], Awaitable[Mapping[str, Any]]] | None = None
    python_timeout_s: float = 10.0
    _tools: dict[str, Tool] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        t = [Tool("calculate", "Exact arithmetic on one expression; returns its value.", CalculateIn, self._calculate),
             Tool("sympy_equivalent", "Whether two formulas the draft states as equal are equal for all values "
                  "(SymPy plus sampled points).", SympyEquivalentIn, self._sympy),
             Tool("convert_units", "Convert a quantity between units (pint).", ConvertUnitsIn, self._convert)]
        if self.sandbox is not None and _available(self.sandbox):
            t.append(Tool("run_python", "Run the draft's code in a sandbox on constructed inputs, then check "
                          "assertions; reports the exception the code raised, if any.", RunPythonIn, self._python))
        if self.citation_sources is not None:
            t.append(Tool("check_citation", "Look up one reference in bibliographic sources.", CheckCitationIn,
                          self._citation))
        if self.search_facts is not None:
            t.append(Tool("search_facts", "Search sources for evidence on one factual claim.", SearchFactsIn,
                          self._search))
        self._tools = {x.name: x for x in t}

    def names(self) -> list[str]:
        """Names of the tools offered, in prompt order."""
        return list(self._tools)

    def get(self, name: str) -> Tool | None:
        """The tool called ``name``, or None when it is not offered."""
        return self._tools.get(name)

    def describe(self) -> list[dict[str, Any]]:
        """``[{"name", "description", "input_schema"}]`` for the planner prompt."""
        return [{"name": x.name, "description": x.description, "input_schema": x.schema()}
                for x in self._tools.values()]

    # --- tools -------------------------------------------------------------------------------

    async def _calculate(self, inp: CalculateIn) -> ToolOutput:
        try:
            node = parse_expression(inp.expression)
            v = value_of(node)
        except ExprError as exc:
            return ToolOutput({"error": str(exc)}, error=str(exc))
        data = {"expression": to_text(node), "value": format_value(v)}
        if isinstance(v, Fraction) and v.denominator != 1:
            data["exact"] = f"{v.numerator}/{v.denominator}" if v.denominator < 10**12 else None
        return ToolOutput(data, raw=(node, v))

    async def _sympy(self, inp: SympyEquivalentIn) -> ToolOutput:
        from verifiers.arithmetic import equivalent

        c = await asyncio.to_thread(equivalent, inp.left, inp.right)
        data = {"outcome": c.outcome, "note": c.note, "method": c.evidence.get("method"),
                "counterexample": c.evidence.get("counterexample")}
        return ToolOutput(data, raw=c, error=None if c.outcome in ("pass", "fail") else (c.note or "undecided"))

    async def _convert(self, inp: ConvertUnitsIn) -> ToolOutput:
        from verifiers.arithmetic._units import _registry

        if not (_UNIT_TEXT.match(inp.from_unit.strip()) and _UNIT_TEXT.match(inp.to_unit.strip())):
            return ToolOutput({"error": "unit names must be plain unit words"}, error="bad unit name")

        def conv() -> float:
            ureg = _registry()
            q = ureg.Quantity(float(inp.value), ureg.parse_units(inp.from_unit.strip()))
            return float(q.to(ureg.parse_units(inp.to_unit.strip())).magnitude)

        try:
            out = await asyncio.to_thread(conv)
        except Exception as exc:  # pint's error family (undefined unit, dimensionality)
            return ToolOutput({"error": f"{type(exc).__name__}: {exc}"[:200]}, error="cannot convert")
        return ToolOutput({"value": out, "unit": inp.to_unit}, raw=out)

    async def _python(self, inp: RunPythonIn) -> ToolOutput:
        from verifiers.code._harness import build, legacy_records, observe
        from verifiers.sandbox import SandboxUnavailable

        blocks = [{"index": 0, "code": inp.setup or "pass", "watch": [], "watch_want": {}},
                  {"index": 1, "code": inp.code, "watch": [], "watch_want": {}}]
        examples = [{"id": i, "source": a, "want": "", "mode": "value", "block": 1}
                    for i, a in enumerate(inp.assertions)]
        lim = self.sandbox.limits
        lim = lim.with_(timeout_s=min(lim.timeout_s, self.python_timeout_s))
        try:
            program, nonce = build(blocks, examples, step_timeout=max(1.0, min(5.0, lim.timeout_s / 2)))
            res = await self.sandbox.arun(program, limits=lim)
        except SandboxUnavailable as exc:
            return ToolOutput({"error": str(exc)[:200]}, error=f"sandbox unavailable: {exc}"[:200])
        except Exception as exc:  # noqa: BLE001 - an engine hiccup is not the draft's fault
            return ToolOutput({"error": f"{type(exc).__name__}: {exc}"[:200]}, error="sandbox error")
        obs = observe(res.stdout, nonce)
        recs = legacy_records(obs, {}, {})
        data: dict[str, Any] = {"backend": res.backend, "killed_by": res.killed_by, "exit_code": res.exit_code}
        # what the verdict rests on (docs/design.md "A verdict rests on what the checked content
        # cannot write"; verifiers/code/_harness.py): a run whose framing
        # is missing or forged, where the code tried to reach the harness, that ended early or not
        # by itself, can show a failure but never a pass
        untrusted = obs.untrusted()
        if untrusted is None and any(r.get("status") == "exit" for r in recs):
            untrusted = "the program ended itself (sys.exit) before its assertions ran"
        if untrusted is None and (res.killed_by != "none" or res.exit_code != 0):
            untrusted = f"the run did not end normally (exit code {res.exit_code}, {res.killed_by})"
        if untrusted is not None:
            data["untrusted"] = untrusted
        setup = next((r for r in recs if r.get("kind") == "block" and r.get("index") == 0), None)
        main = next((r for r in recs if r.get("kind") == "block" and r.get("index") == 1), None)
        data["setup"] = _block_summary(setup)
        data["code"] = _block_summary(main)
        data["assertions"] = [{"assertion": inp.assertions[r["id"]], "status": r.get("status"),
                               "got": str(r.get("got", ""))[:200],
                               **({"error": (r.get("error") or {}).get("type")} if r.get("error") else {})}
                              for r in recs if r.get("kind") == "example" and isinstance(r.get("id"), int)
                              and 0 <= r["id"] < len(inp.assertions)]
        if res.killed_by != "none" and main is None:
            data["error"] = f"killed by {res.killed_by}"
        return ToolOutput(data, raw=recs)

    async def _citation(self, inp: CheckCitationIn) -> ToolOutput:
        from verifiers.citations import acheck

        checks = await acheck(inp.reference, sources=self.citation_sources)
        if not checks:
            return ToolOutput({"status": "not_a_reference"}, error="no reference recognised")
        c = checks[0]
        return ToolOutput({"status": c.evidence.get("status"), "outcome": c.outcome, "record": c.expected,
                           "note": c.note}, raw=c)

    async def _search(self, inp: SearchFactsIn) -> ToolOutput:
        assert self.search_facts is not None
        out = await self.search_facts(inp.claim)
        data = dict(out) if isinstance(out, Mapping) else {"result": out}
        return ToolOutput(data, raw=data)


def _block_summary(rec: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if rec is None:
        return None
    out = {"status": rec.get("status")}
    err = rec.get("error")
    if isinstance(err, Mapping):
        out["exception"] = {"type": err.get("type"), "message": str(err.get("message", ""))[:300]}
    if rec.get("line") is not None:
        out["line"] = rec.get("line")
    return out


def _available(box: Any) -> bool:
    try:
        return bool(box.available)
    except Exception:  # noqa: BLE001
        return False


__all__ = ["Toolbox", "Tool", "ToolOutput", "ENVIRONMENT_ERRORS", "CalculateIn", "SympyEquivalentIn",
           "ConvertUnitsIn", "RunPythonIn", "CheckCitationIn", "SearchFactsIn"]
