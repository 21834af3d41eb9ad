"""The plan executor and its guard against verification hallucination (docs/verifier-model.md,
the planner's "Executor"; docs/design.md "Asymmetric trust").

Steps run in order; the first ``fail`` stops the plan (short-circuit). Each executed step
becomes one :class:`~verifiers._types.Check` (``verifier="planner"``): ``found`` is the value
the *draft* states (read from the draft text at the claim), ``expected`` the *tool's* result,
``evidence`` the tool, its input and output, the step id and the plan source. A step is
rejected -- ``unknown`` (claim problems) or ``error`` (unknown tool, invalid input), never
``pass`` -- when:

* its ``claim`` does not occur in the draft (after normalising whitespace, Unicode operators
  and thousands separators);
* the tool is not offered;
* its comparison would only restate the plan: a ``calculate`` expression with no operation,
  or one that contains the claimed value itself; numbers in the expression that occur neither
  in the question nor in the draft (nor are conventional constants such as 12 or 365);
  ``sympy_equivalent`` sides that are not both in the claim, or one formula compared with
  itself (unless the claim's own two sides can be compared instead); ``run_python`` code
  lines that are not the draft's own;
* what the tool checks is not the step's ``claim``: a ``search_facts`` claim, a
  ``check_citation`` reference or ``run_python`` code that is other text of the draft than the
  ``claim`` the check is reported on (a plan could otherwise verify a true sentence and report
  the pass on a false one); a ``search_facts`` pass on a part of a sentence is ``unknown`` (the
  rest of the sentence -- an attribution, a qualifier -- was never searched: :func:`_unsearched`).

A step whose compared span is already covered by a rule check that passed or failed (e.g. the
arithmetic verifier checked the same ``17 * 23 = 401``) is merged: it produces no check. A
plan never replaces or narrows a rule check: merging only drops the *step*; every rule check
(an ``unknown`` one too) stays in the report beside the plan's checks.

What a check rests on (``Check.basis``, docs/design.md "Asymmetric trust"): a template step is
built by rules from the question's inputs (``recomputed``). A step of the verifier model's plan
rests on the model (``model``: it can fail the draft, never pass it) unless the tool recomputed
what the draft itself wrote: a ``calculate`` expression that is the draft's own stated
expression right before the value it is compared with, or a ``sympy_equivalent`` of the
claim's own two sides (``recomputed``); a ``check_citation`` verdict keeps the citation
verifier's basis (``record``), a ``search_facts`` verdict the basis the fact search reports
(else ``model``). ``run_python`` and ``convert_units`` steps always rest on the model: it wrote
the constructed inputs, the assertions, the units.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from pydantic import ValidationError

from verifiers import _pyast
from verifiers._types import BASES, Check
from verifiers.arithmetic._expr import format_value
from verifiers.arithmetic._tolerance import judge
from verifiers.planner._text import (ExprError, Stated, find_span, has_operation, literals, normalized, numbers_in,
                                     parse_expression)
from verifiers.planner._tools import ENVIRONMENT_ERRORS, Toolbox
from verifiers.sandbox.runtime import provide_hint

VERIFIER = "planner"


def _module_hint(exc: dict[str, Any] | None, *, name_it: bool = True) -> str:
    """For a ``ModuleNotFoundError`` record: the missing module (``name_it``) and the command
    that provides it (``verifiers.sandbox.runtime.provide_hint``), else ``""``."""
    exc = exc or {}
    m = re.match(r"No module named '([\w.]+)'", str(exc.get("message") or ""))
    if exc.get("type") != "ModuleNotFoundError" or not m:
        return ""
    return (f": no module named '{m.group(1)}'" if name_it else "") + provide_hint(m.group(1))

#: Numbers a calculation may use without the text stating them: counts of the calendar and
#: the clock (12 months, 4 quarters, 365 days, 60 minutes), percent and unit scales.
CONSTANTS = frozenset(Fraction(x) for x in (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 24, 52, 60, 100, 360, 365, 1000,
                                            3600))


@dataclass(slots=True)
class Step:
    """One step to execute (from a model plan or a template). ``bounds``: range of the
    computed value when the draft may have rounded intermediate factors (templates); a stated
    value inside it is ``unknown``, never ``fail``."""

    step_id: Any
    tool: str
    input: dict[str, Any]
    claim: str
    description: str = ""
    expected_check: str = ""
    bounds: tuple[Fraction, Fraction] | None = None
    confidence: float = 0.85
    extra: dict[str, Any] = field(default_factory=dict)
    stated: Stated | None = None  # templates: the draft value the template located

    @property
    def template(self) -> bool:
        return "template" in self.extra

    def to_dict(self) -> dict[str, Any]:
        return {"step_id": self.step_id, "description": self.description, "tool": self.tool, "input": self.input,
                "claim": self.claim, "expected_check": self.expected_check}


class _Rejected(Exception):
    def __init__(self, outcome: str, note: str):
        super().__init__(note)
        self.outcome = outcome
        self.note = note


def _grounded(values: list[Fraction], question: str | None, draft: str) -> list[Fraction]:
    """The values among ``values`` that neither text states (as is, as a percent, or x100)."""
    stated: set[Fraction] = set()
    for text in (question or "", draft):
        for s in numbers_in(text):
            v = abs(s.value)
            stated |= {v, v * 100, v / 100, s.lit.value}
    return [v for v in values if abs(v) not in stated and abs(v) not in CONSTANTS]


_RESULT_BEFORE = re.compile(r"(?:=|≈|~|\bis|\bare|\bwas|\bequals?|\bgives?|\bget|\bmakes?|\btotal(?:s|\s+of)?|"
                            r"\bof|\bto|为|是|得|约|:|：)\s*(?:about|approximately|around|roughly)?\s*[$€£¥]?\s*$", re.I)


def _pick_stated(answer: str, span: tuple[int, int], exclude: set[Fraction]) -> Stated | None:
    """The value the claim states: among the numbers inside the claim's span that are not the
    tool's own inputs, the only one, else the last one right after a result word (``=``,
    "is", "为", "approximately"); None when that is ambiguous."""
    cands = [s for s in numbers_in(answer) if span[0] <= s.span[0] and s.span[1] <= span[1]]
    cands = [s for s in cands if s.value not in exclude and abs(s.value) not in exclude]
    if len(cands) <= 1:
        return cands[0] if cands else None
    marked = [s for s in cands if s.approx or _RESULT_BEFORE.search(answer, max(span[0], s.span[0] - 30), s.span[0])]
    return marked[-1] if marked else None


#: Why a model-plan step rests on the verifier model (``evidence["basis_reason"]``), per tool.
_MODEL_WROTE = {
    "calculate": "the verifier model wrote the expression (not the draft's own stated expression): its result can "
                 "fail the draft, never pass it",
    "convert_units": "the verifier model chose the value and the units: the conversion can fail the draft, never "
                     "pass it",
    "sympy_equivalent": "the verifier model chose which formulas to compare (not the claim's own two sides): the "
                        "comparison can fail the draft, never pass it",
    "run_python": "the verifier model wrote the constructed inputs and the assertions: they can fail the draft, "
                  "never pass it",
    "search_facts": "the fact search's verdict does not say it rests on a passage: it can fail the draft, never pass it",
}


def _own_expression(answer: str, span: tuple[int, int], stated: Stated, expression: str) -> bool:
    """True when ``expression`` is the draft's own stated expression for ``stated``: the claim's
    text right before the stated value, after a result word (``=``, "is", "约为") is taken off,
    ends with the expression (compared as :func:`normalized`, spaces ignored, one pair of outer
    brackets optional, and not the tail of a longer expression). Only then does the tool
    recompute what the draft wrote (basis
    ``recomputed``); otherwise the model chose the inputs (basis ``model``)."""
    before = answer[span[0]:stated.span[0]]
    cur = re.search(r"[$€£¥]\s*$", before)
    if cur:
        before = before[:cur.start()]
    for _ in range(3):
        m = _RESULT_BEFORE.search(before)
        if not m or m.start() == len(before):
            break
        before = before[:m.start()]
    text = normalized(before, drop_space=True)
    expr = normalized(expression, drop_space=True)
    if not expr:
        return False
    forms = {expr}
    if expr.startswith("(") and expr.endswith(")"):
        forms.add(expr[1:-1])
    forms |= {f"({f})" for f in list(forms)}
    # the whole expression, not its tail: "5 - 2 + 1 = 3" is not the draft stating "2 + 1 = 3"
    return any(f and text.endswith(f) and (len(text) == len(f) or text[-len(f) - 1] not in _EXPR_CHARS)
               for f in forms)


_EXPR_CHARS = frozenset("0123456789.+-*/^()[]{}!%√")


_MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.S)


def _claim_sides(claim: str) -> tuple[str, str] | None:
    """The two sides of the equation a claim states (the math segment ``$...$``/``\\(...\\)``
    holding one ``=``, else the claim itself when it holds exactly one ``=``), or None."""
    segments = [next(g for g in m.groups() if g is not None) for m in _MATH_SEGMENT.finditer(claim)]
    for text in [*segments, claim]:
        if text.count("=") == 1 and not re.search(r"[<>!]=|==|=[<>]", text):
            left, right = (t.strip().strip(".,;:。，；").strip() for t in text.split("="))
            if left and right:
                return left, right
    return None


def _covered(rule_checks: list[Check], span: tuple[int, int]) -> Check | None:
    for c in rule_checks:
        if c.outcome in ("pass", "fail") and c.span is not None and c.span[0] <= span[0] and span[1] <= c.span[1]:
            return c
    return None


_FORBIDDEN_NAMES = frozenset({"exec", "eval", "compile", "setattr", "delattr", "globals", "locals", "vars",
                              "builtins", "__builtins__", "importlib", "sys", "monkeypatch", "patch", "mock"})


def _setup_problem(setup: str, assertions: list[str], code: str) -> str | None:
    """Why a ``run_python`` harness is not plain constructed data and checks, or None.

    ``setup`` may import modules, bind names to values and call functions (``df.to_csv(...)``,
    writing an input file); it may not define functions or classes, assign attributes, or touch
    the interpreter (``exec``, ``setattr``, ``sys``, dunder names): the planner -- which reads the
    untrusted draft -- must not be able to patch the code under test into passing. Each
    assertion must be one expression over a name the draft's code binds or uses (an assertion
    about nothing, such as ``True``, only restates the plan)."""
    import ast

    try:
        tree = _pyast.parse(setup or "pass")
        code_tree = _pyast.parse(code)
    except SyntaxError as exc:
        return f"harness does not parse: {exc.msg}"
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Global,
                             ast.Nonlocal, ast.Delete)):
            return "setup may only build data (no functions, classes or deletions)"
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(not isinstance(t, (ast.Name, ast.Tuple)) for t in targets):
                return "setup may only bind names (no attribute or item assignment)"
        if isinstance(node, ast.Name) and (node.id in _FORBIDDEN_NAMES or "__" in node.id):
            return f"setup may not use {node.id!r}"
        if isinstance(node, ast.Attribute) and "__" in node.attr:
            return "setup may not use dunder attributes"
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mods = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                                                   else [])
            if any(m.split(".")[0] in _FORBIDDEN_NAMES or m.split(".")[0] in ("unittest", "os", "ctypes", "gc",
                                                                               "inspect") for m in mods):
                return "setup may not import interpreter or patching modules"
    code_names = {n.id for n in ast.walk(code_tree) if isinstance(n, ast.Name)}
    code_names |= {n.name for n in ast.walk(code_tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for a in assertions:
        try:
            expr = _pyast.parse(a, mode="eval")
        except SyntaxError:
            return "an assertion is not one Python expression"
        names = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
        if any(x in _FORBIDDEN_NAMES or "__" in x for x in names) or any(
                isinstance(n, ast.Attribute) and "__" in n.attr for n in ast.walk(expr)):
            return "an assertion may not touch the interpreter"
        if not names & code_names:
            return "an assertion must be about the draft's code (it names nothing the code binds or uses)"
    return None


def _same_text(a: str, b: str) -> bool:
    """True when one of ``a``, ``b`` contains the other (compared as :func:`normalized`, spaces
    ignored): the text a tool checks and the claim a check reports on are the same text."""
    na, nb = normalized(a, drop_space=True), normalized(b, drop_space=True)
    return bool(na and nb) and (na in nb or nb in na)


def _unsearched(answer: str, span: tuple[int, int]) -> list[str]:
    """The content words and numbers of the sentence(s) of ``answer`` around ``span`` that the
    text at ``span`` leaves out: what a ``search_facts`` step on a part of a sentence did not
    check ("According to a leaked memo, X, more than any rival" searched as "X"). A pass may rest
    only on a search of the whole statement (docs/design.md "Asymmetric trust": the plan chooses what
    to check, it never narrows what a pass covers); ``[]`` when the part is the whole."""
    from verifiers.facts._text import key_set, numbers, sentences

    part = answer[span[0]:span[1]]
    around = [answer[a:b] for a, b in sentences(answer) if a < span[1] and b > span[0]]
    whole = " ".join(around) or part
    have = {q.value for q in numbers(part)}
    out = sorted(key_set(whole) - key_set(part))
    out += [q.text.strip() for q in numbers(whole) if q.value not in have]
    return out


class Executor:
    """Runs steps against a :class:`Toolbox` within a deadline (``loop.time()`` value)."""

    def __init__(self, answer: str, question: str | None, tools: Toolbox, rule_checks: list[Check],
                 plan_source: str, deadline: float) -> None:
        self.answer = answer
        self.question = question
        self.tools = tools
        self.rule_checks = [c for c in rule_checks if isinstance(c, Check)]
        self.plan_source = plan_source
        self.deadline = deadline
        self.log: list[dict[str, Any]] = []

    def _basis(self, step: Step) -> str:
        """What a check of ``step`` rests on before its guard says more (docs/design.md "Asymmetric
        trust"): a template's step is built by rules from the question's inputs
        (``recomputed``); a step of the verifier model's plan has inputs the model wrote
        (``model``: it may fail the draft, never pass it)."""
        return "recomputed" if step.template else "model"

    def _check(self, step: Step, outcome: str, note: str, *, span: tuple[int, int] | None = None,
               expected: Any = None, found: Any = None, output: Any = None, confidence: float = 0.5,
               basis: str | None = None) -> Check:
        ev = {"tool": step.tool, "input": step.input, "output": output, "step_id": step.step_id,
              "plan_source": self.plan_source}
        if step.description:
            ev["description"] = step.description[:300]
        return Check(verifier=VERIFIER, claim=step.claim[:500], outcome=outcome, expected=expected, found=found,  # type: ignore[arg-type]
                     evidence=ev, confidence=confidence, span=span, note=note[:300],
                     basis=basis or self._basis(step))

    async def run(self, steps: list[Step]) -> list[Check]:
        """Execute ``steps`` in order; returns their checks (see module docstring)."""
        checks: list[Check] = []
        loop = asyncio.get_running_loop()
        for i, step in enumerate(steps):
            remaining = self.deadline - loop.time()
            if remaining <= 0:
                for rest in steps[i:]:
                    checks.append(self._check(rest, "unknown", "verification deadline: step not run"))
                    self.log.append({"step_id": rest.step_id, "status": "deadline"})
                break
            try:
                c = await asyncio.wait_for(self._one(step), remaining)
            except asyncio.TimeoutError:
                for rest in steps[i:]:
                    checks.append(self._check(rest, "unknown", "verification deadline: step not finished"))
                    self.log.append({"step_id": rest.step_id, "status": "deadline"})
                break
            except _Rejected as r:
                self.log.append({"step_id": step.step_id, "status": "rejected", "reason": r.note})
                if step.template:
                    continue  # a template that does not apply says nothing
                checks.append(self._check(step, r.outcome, r.note, span=find_span(step.claim, self.answer),
                                          confidence=0.0 if r.outcome == "error" else 0.5))
                continue
            except Exception as exc:  # noqa: BLE001 - a tool bug is one error check, never a crash
                self.log.append({"step_id": step.step_id, "status": "error", "reason": type(exc).__name__})
                checks.append(self._check(step, "error", f"tool failed: {type(exc).__name__}: {exc}", confidence=0.0))
                continue
            if c is None:
                continue  # merged with a rule check (logged by _one)
            self.log.append({"step_id": step.step_id, "status": "checked", "outcome": c.outcome})
            checks.append(c)
            if c.outcome == "fail":
                for rest in steps[i + 1:]:
                    self.log.append({"step_id": rest.step_id, "status": "not_run", "reason": "short-circuit"})
                break
        return checks

    async def _one(self, step: Step) -> Check | None:
        tool = self.tools.get(step.tool)
        if tool is None:
            raise _Rejected("error", f"unknown tool {step.tool!r} (offered: {', '.join(self.tools.names())})")
        span = find_span(step.claim, self.answer)
        if span is None:
            raise _Rejected("unknown", "claim not in draft: the step does not check the draft's own text")
        try:
            inp = tool.input_model.model_validate(step.input)
        except ValidationError as exc:
            raise _Rejected("error", f"invalid input for {step.tool}: {exc.errors()[0]['msg']}") from None
        guard = getattr(self, f"_guard_{step.tool}")
        ctx = guard(step, inp, span)
        cmp_span = ctx.get("cmp_span", span)
        dup = _covered(self.rule_checks, cmp_span)
        if dup is not None:
            self.log.append({"step_id": step.step_id, "status": "merged", "with": dup.verifier,
                             "claim": dup.claim[:200]})
            return None
        inp = ctx.get("input", inp)  # the guard may compare the draft's own formulas instead
        out = await tool.run(inp)
        c = getattr(self, f"_judge_{step.tool}")(step, inp, span, ctx, out)
        if ctx.get("replaced"):
            c.evidence["replaced"] = ctx["replaced"]
            c.evidence["compared"] = inp.model_dump()
        basis = ctx.get("basis") or c.basis
        if basis is not None:
            c.basis = basis
        if c.basis == "model":
            c.evidence["basis_reason"] = ctx.get("basis_reason") or _MODEL_WROTE.get(step.tool, "the verifier model "
                                                                                             "wrote this step")
        return c

    # --- guards: the compared value must come from the draft --------------------------------

    def _guard_calculate(self, step: Step, inp: Any, span: tuple[int, int]) -> dict[str, Any]:
        try:
            node = parse_expression(inp.expression)
        except ExprError as exc:
            raise _Rejected("unknown", f"expression not checkable: {exc}") from None
        if not has_operation(node):
            raise _Rejected("unknown", "restates a value: the expression computes nothing")
        if step.template and step.stated is not None:  # deterministic code located the draft's value
            return {"stated": step.stated, "cmp_span": step.stated.span}
        lits = {lit.value for lit in literals(node)}
        if not [s for s in numbers_in(self.answer) if span[0] <= s.span[0] and s.span[1] <= span[1]]:
            raise _Rejected("unknown", "the claim states no number to compare")
        stated = _pick_stated(self.answer, span, lits)
        if stated is None:
            everything = _pick_stated(self.answer, span, set())
            if everything is not None and (everything.value in lits or abs(everything.value) in lits):
                raise _Rejected("unknown", "restates the claim: the expression contains the value it should check")
            raise _Rejected("unknown", "the claim states no single result to compare (several numbers, none marked)")
        foreign = _grounded(sorted(lits), self.question, self.answer)
        if foreign:
            raise _Rejected("unknown", "input numbers not in the question or draft: " +
                            ", ".join(format_value(v) for v in foreign[:5]))
        if _own_expression(self.answer, span, stated, inp.expression):
            return {"stated": stated, "cmp_span": stated.span, "basis": "recomputed"}
        return {"stated": stated, "cmp_span": stated.span, "basis": "model"}

    def _guard_convert_units(self, step: Step, inp: Any, span: tuple[int, int]) -> dict[str, Any]:
        v = Fraction(str(inp.value))
        in_texts = [s for t in (self.question or "", self.answer) for s in numbers_in(t) if abs(s.value) == abs(v)]
        if not in_texts:
            raise _Rejected("unknown", "the value to convert is in neither the question nor the draft")
        stated = _pick_stated(self.answer, span, {v, abs(v)})
        if stated is None:
            raise _Rejected("unknown", "the claim states no converted value to compare")
        return {"stated": stated, "cmp_span": stated.span, "basis": "model"}

    def _guard_sympy_equivalent(self, step: Step, inp: Any, span: tuple[int, int]) -> dict[str, Any]:
        claim_text = self.answer[span[0]:span[1]]
        claim = normalized(claim_text, drop_space=True)
        for side in (inp.left, inp.right):
            if not side.strip() or normalized(side, drop_space=True) not in claim:
                raise _Rejected("unknown", "both formulas must be the draft's own (copied from the claim)")
        left, right = normalized(inp.left, drop_space=True), normalized(inp.right, drop_space=True)
        own = _claim_sides(claim_text)
        if own is not None:
            sides = {normalized(own[0], drop_space=True), normalized(own[1], drop_space=True)}
            if {left, right} == sides and left != right:
                return {"basis": "recomputed"}  # the claim's own two sides, as the draft states them
            if left == right:
                # a formula compared with itself proves nothing: compare the claim's own two sides
                try:
                    sides_in = type(inp)(left=own[0], right=own[1])
                except ValidationError:
                    raise _Rejected("unknown", "both sides are the same formula: the step proves nothing") from None
                return {"basis": "recomputed", "input": sides_in,
                        "replaced": "the step compared one formula with itself; the claim's own two sides "
                                    "were compared instead"}
        if left == right:
            raise _Rejected("unknown", "both sides are the same formula: the step proves nothing")
        return {"basis": "model"}

    def _guard_run_python(self, step: Step, inp: Any, span: tuple[int, int]) -> dict[str, Any]:
        lines = [ln for ln in inp.code.splitlines() if ln.strip() and not ln.strip().startswith("#")]
        if not lines:
            raise _Rejected("unknown", "no code to run")
        draft = normalized(self.answer, drop_space=True)
        for ln in lines:
            if normalized(ln, drop_space=True) not in draft:
                raise _Rejected("unknown", f"code line not in the draft: {ln.strip()[:80]}")
        claim = self.answer[span[0]:span[1]]
        if not any(_same_text(ln, claim) for ln in lines):
            raise _Rejected("unknown", "the code run is not the step's claim: a check must be about the text it reports on")
        why = _setup_problem(inp.setup, inp.assertions, inp.code)
        if why:
            raise _Rejected("unknown", why)
        return {"basis": "model"}

    def _guard_check_citation(self, step: Step, inp: Any, span: tuple[int, int]) -> dict[str, Any]:
        ref = find_span(inp.reference, self.answer)
        if ref is None:
            raise _Rejected("unknown", "the reference is not in the draft")
        if not _same_text(inp.reference, self.answer[span[0]:span[1]]):
            raise _Rejected("unknown", "the reference checked is not the step's claim")
        return {"cmp_span": ref}  # the verdict is the citation verifier's (a record matched): its own basis

    def _guard_search_facts(self, step: Step, inp: Any, span: tuple[int, int]) -> dict[str, Any]:
        if find_span(inp.claim, self.answer) is None:
            raise _Rejected("unknown", "the searched claim is not in the draft")
        if not _same_text(inp.claim, self.answer[span[0]:span[1]]):
            raise _Rejected("unknown", "the searched claim is not the step's claim: a check must be about the text "
                                       "it reports on")
        return {}

    # --- judges: tool result vs the draft's value -------------------------------------------

    def _conf(self, step: Step, c: float) -> float:
        """The tool's confidence capped by the step's (a model-chosen input is less sure than a template)."""
        return round(min(c, step.confidence), 3)

    def _judge_number(self, step: Step, span: tuple[int, int], ctx: dict[str, Any], out: Any,
                      value: Fraction | float) -> Check:
        stated: Stated = ctx["stated"]
        v = judge(value, stated.lit, sign=stated.sign, approx=stated.approx, bounds=step.bounds)
        # a template may have found more values the draft states for the same quantity: each is
        # compared, and the first wrong one (in text order) is the check's claim
        also = [(s, claim, judge(value, s.lit, sign=s.sign, approx=s.approx, bounds=step.bounds))
                for s, claim in step.extra.get("also") or ()]
        wrong = next(((s, claim, w) for s, claim, w in also if w.outcome == "fail"), None)
        claim_text = None
        if wrong is not None and v.outcome != "fail":
            stated, claim_text, v = wrong
            span = find_span(claim_text, self.answer) or stated.span
        note = v.note if v.outcome != "fail" else f"the tool computes {v.expected}, the draft states {stated.text}"
        conf = self._conf(step, v.confidence) if v.outcome != "unknown" else 0.5
        c = self._check(step, v.outcome, note, span=span, expected=v.expected, found=stated.text,
                        output=out.data, confidence=conf)
        if claim_text is not None:
            c.claim = claim_text[:500]
        if also:
            c.evidence["stated_values"] = [{"value": s.text, "outcome": w.outcome} for s, _, w in also] + [
                {"value": ctx["stated"].text, "outcome": judge(value, ctx["stated"].lit, sign=ctx["stated"].sign,
                                                               approx=ctx["stated"].approx,
                                                               bounds=step.bounds).outcome}]
        return c

    def _judge_calculate(self, step: Step, inp: Any, span: tuple[int, int], ctx: dict[str, Any], out: Any) -> Check:
        if out.error:
            return self._check(step, "unknown", f"not computed: {out.error}", span=span, output=out.data)
        c = self._judge_number(step, span, ctx, out, out.raw[1])
        c.evidence["tolerance"] = "approximate: stated significant figures" if ctx["stated"].approx else "stated decimals"
        return c

    def _judge_convert_units(self, step: Step, inp: Any, span: tuple[int, int], ctx: dict[str, Any], out: Any) -> Check:
        if out.error:
            return self._check(step, "unknown", f"not converted: {out.error}", span=span, output=out.data)
        return self._judge_number(step, span, ctx, out, out.raw)

    def _judge_sympy_equivalent(self, step: Step, inp: Any, span: tuple[int, int], ctx: dict[str, Any],
                                out: Any) -> Check:
        c = out.raw
        if c.outcome not in ("pass", "fail"):
            return self._check(step, "unknown", c.note or "equivalence undecided", span=span, output=out.data)
        return self._check(step, c.outcome, c.note, span=span, expected=c.expected, found=c.found, output=out.data,
                           confidence=self._conf(step, c.confidence))

    def _judge_run_python(self, step: Step, inp: Any, span: tuple[int, int], ctx: dict[str, Any], out: Any) -> Check:
        d = out.data
        if out.error:
            return self._check(step, "unknown", f"not run: {out.error}", span=span, output=d)
        setup, code = d.get("setup") or {}, d.get("code") or {}
        if setup.get("status") != "ok":
            why = (setup.get("exception") or {}).get("type") or setup.get("status") or d.get("killed_by")
            return self._check(step, "unknown", f"the constructed inputs did not run ({why})"
                               + _module_hint(setup.get("exception")), span=span, output=d)
        status = code.get("status")
        if status == "error":
            exc = code.get("exception") or {}
            found = f"{exc.get('type')}: {exc.get('message')}"
            if exc.get("type") in ENVIRONMENT_ERRORS:
                return self._check(step, "unknown", f"the harness is incomplete: {found}"[:300] + _module_hint(exc, name_it=False), span=span,
                                   expected=found, output=d)
            return self._check(step, "fail", f"the draft's code raises on constructed inputs: {found}"[:300],
                               span=span, expected=found, found=step.claim[:200], output=d,
                               confidence=self._conf(step, 0.85))
        if status != "ok":
            return self._check(step, "unknown", f"the code did not finish ({status or d.get('killed_by')})",
                               span=span, output=d)
        results = d.get("assertions") or []
        bad = [a for a in results if a["status"] == "mismatch"]
        if bad:
            return self._check(step, "fail", f"assertion does not hold: {bad[0]['assertion'][:150]}", span=span,
                               expected=bad[0]["assertion"], found=bad[0].get("got"), output=d,
                               confidence=self._conf(step, 0.75))
        if any(a["status"] != "pass" for a in results) or len(results) < len(inp.assertions):
            return self._check(step, "unknown", "an assertion could not be evaluated", span=span, output=d)
        # A pass only from a run the checked code could not have written
        # (docs/design.md "A verdict rests on what the checked content cannot write"): the
        # harness's framing intact, no tampering, no early end -- the assertions' values are
        # compared in the gateway on what the sandbox captured. A run without assertions, or
        # one the code could have forged, verified nothing.
        if d.get("untrusted"):
            return self._check(step, "unknown", f"not taken as verified: {d['untrusted']}"[:300], span=span,
                               expected="assertions hold", found=step.claim[:200], output=d)
        if not inp.assertions:
            return self._check(step, "unknown", "ran on constructed inputs without assertions: nothing was verified",
                               span=span, expected="no exception", found=step.claim[:200], output=d, confidence=0.5)
        return self._check(step, "pass", f"{len(results)} assertion(s) hold on constructed inputs", span=span,
                           expected="assertions hold", found=step.claim[:200], output=d,
                           confidence=self._conf(step, 0.8))

    def _judge_check_citation(self, step: Step, inp: Any, span: tuple[int, int], ctx: dict[str, Any],
                              out: Any) -> Check:
        if out.error:
            return self._check(step, "unknown", out.error, span=ctx.get("cmp_span", span), output=out.data)
        c: Check = out.raw
        return self._check(step, c.outcome, c.note or str(out.data.get("status")), span=ctx.get("cmp_span", span),
                           expected=c.expected, found=inp.reference, output=out.data, confidence=c.confidence,
                           basis=c.basis or "record")

    def _judge_search_facts(self, step: Step, inp: Any, span: tuple[int, int], ctx: dict[str, Any], out: Any) -> Check:
        d = out.data
        raw = str(d.get("outcome") or d.get("verdict") or "").lower()
        outcome = {"pass": "pass", "supported": "pass", "fail": "fail", "refuted": "fail",
                   "contradicted": "fail"}.get(raw, "unknown")
        conf = float(d.get("confidence", 0.7)) if isinstance(d.get("confidence"), (int, float)) else 0.7
        # the search's verdict rests on what the facts verifier says it rests on (a passage);
        # without that word it is the model's (can fail, never pass)
        basis = d.get("basis") if d.get("basis") in BASES else "model"
        rest = _unsearched(self.answer, span) if outcome == "pass" else []
        if rest:  # the plan searched a true part and would report the sentence's check as a pass
            return self._check(step, "unknown", f"the search checked part of its sentence only; not checked: "
                                                f"{', '.join(rest[:6])}"[:300], span=span, expected=d.get("evidence"),
                               found=inp.claim, output=d, confidence=0.5, basis=basis)
        return self._check(step, outcome, str(d.get("note") or raw or "no verdict")[:300], span=span,
                           expected=d.get("evidence"), found=inp.claim, output=d,
                           confidence=self._conf(step, conf) if outcome != "unknown" else 0.5, basis=basis)


__all__ = ["Step", "Executor", "VERIFIER", "CONSTANTS"]
