"""Shared records of the verification vocabulary (see docs/design.md "Shared vocabulary").

A *claim* is one checkable statement in an answer; a *check* is the result of verifying one
claim; a *report* gathers the checks of one answer. Every verifier returns ``list[Check]``.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Generic, Literal, TypeVar, overload

Outcome = Literal["pass", "fail", "unknown", "error"]
ReportStatus = Literal["passed", "unverified", "corrected", "failed", "skipped", "error"]

#: the outcomes a :class:`Check` may have
OUTCOMES: tuple[str, ...] = ("pass", "fail", "unknown", "error")

#: What a check's verdict rests on (docs/design.md "Asymmetric trust", vocabulary "basis"):
#: ``recomputed`` (the draft's own stated expression recomputed by a tool), ``executed`` (the
#: draft's own code, its own asserts or the question's examples executed and compared),
#: ``record`` (matched to a bibliographic record), ``passage`` (a passage states the claim and
#: does not deny, doubt or attribute it), ``consistency`` (the draft compared with itself: a
#: quantity defined with one value and used with another), ``model`` (the verifier model wrote
#: the inputs, the assertions or the verdict: it may fail an answer, never pass it), ``absence``
#: (no record matched: the work is missing from the sources searched -- a fail only when those
#: sources can be expected to hold it, named in the check's ``evidence["searched"]``; it never passes).
Basis = Literal["recomputed", "executed", "record", "passage", "consistency", "model", "absence"]
BASES: tuple[str, ...] = ("recomputed", "executed", "record", "passage", "consistency", "model", "absence")

#: The basis a verifier's checks have when the verifier did not set one (the safe reading:
#: anything the planner produced rests on the verifier model unless it says otherwise).
DEFAULT_BASIS: dict[str, str] = {"arithmetic": "recomputed", "code": "executed", "citations": "record",
                                 "facts": "passage", "planner": "model", "sentinel": "model"}


@dataclass(slots=True)
class Check:
    """The result of verifying one claim.

    Fields:
        verifier: name of the verifier that produced it (``arithmetic``, ``code``,
            ``citations``, ``sentinel``).
        claim: the claim as text (an equation, a code block's first line, a reference).
        outcome: ``pass`` | ``fail`` | ``unknown`` | ``error``. ``unknown`` is an honest
            outcome when the claim cannot be checked with confidence; ``error`` means the
            verifier itself failed.
        expected: the value the tool computed / the record it found (JSON-serialisable).
        found: the value the answer stated.
        evidence: tool input and output that justify the outcome (JSON-serialisable dict).
        confidence: 0..1, how sure the verifier is of ``outcome``.
        span: ``(start, end)`` character offsets of the claim in the answer, or ``None``.
        note: one human-readable line.
        basis: what the verdict rests on (:data:`BASES`); ``None`` until the verifier or
            :func:`verifiers.run.run` sets it (:data:`DEFAULT_BASIS`). A ``pass`` whose basis is
            ``model`` is the verifier model's word: it never makes an answer ``passed``
            (:func:`decided_pass`).
    """

    verifier: str
    claim: str
    outcome: Outcome
    expected: Any = None
    found: Any = None
    evidence: dict[str, Any] = field(default_factory=dict)
    confidence: float = 1.0
    span: tuple[int, int] | None = None
    note: str = ""
    basis: str | None = None

    @property
    def failed(self) -> bool:
        """True when the outcome is ``fail``."""
        return self.outcome == "fail"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (``span`` as a 2-list). Same result as ``dataclasses.asdict`` (values
        copied, nested dataclasses as dicts) without its generic deep copy, which cost ~100 us
        per check on the gateway's hot path."""
        return {"verifier": self.verifier, "claim": self.claim, "outcome": self.outcome,
                "expected": _plain(self.expected), "found": _plain(self.found),
                "evidence": _plain(self.evidence), "confidence": self.confidence,
                "span": list(self.span) if self.span is not None else None, "note": self.note,
                "basis": self.basis}


def decided_pass(check: Check, *, trust_model_passes: bool = False) -> bool:
    """True when ``check`` passed on evidence the verifier model did not write (docs/design.md
    "Asymmetric trust"): a ``pass`` whose ``basis`` is ``model`` counts only when a policy opts in
    (``verification.trust_model_passes``)."""
    return check.outcome == "pass" and (check.basis != "model" or trust_model_passes)


def coverage_of(checks: list[Check], *, answer_chars: int | None = None,
                trust_model_passes: bool = False) -> dict[str, Any]:
    """What the checks decided (docs/design.md vocabulary "coverage"), overall and per verifier.

    Each check is one check-worthy unit a verifier found (an equation, a code block, a
    reference, a statement); a unit a verifier found and could not read or decide is an
    ``unknown`` check. Returns ``{"units", "decided", "passed", "failed", "unknown",
    "model_only", "chars_covered", "chars", "by_verifier": {name: {same keys but by_verifier}}}``:
    ``passed`` counts decided passes (:func:`decided_pass`), ``model_only`` passes on the verifier
    model's word alone (counted in ``unknown`` too: undecided), ``unknown`` includes ``error``,
    ``decided`` = ``passed`` + ``failed``, ``chars_covered`` the characters of the answer inside
    the spans of decided checks (overlaps counted once), ``chars`` the answer's length (or None).
    """
    def blank() -> dict[str, Any]:
        return {"units": 0, "decided": 0, "passed": 0, "failed": 0, "unknown": 0, "model_only": 0,
                "chars_covered": 0, "chars": answer_chars}

    overall = blank()
    per: dict[str, dict[str, Any]] = {}
    spans: dict[str, list[tuple[int, int]]] = {}
    for c in checks:
        row = per.get(c.verifier)
        if row is None:
            row = per[c.verifier] = blank()
        if c.outcome == "fail":
            key = "failed"
        elif decided_pass(c, trust_model_passes=trust_model_passes):
            key = "passed"
        else:
            key = "unknown"
            if c.outcome == "pass":
                row["model_only"] += 1
                overall["model_only"] += 1
        for r in (row, overall):
            r["units"] += 1
            r[key] += 1
        if key != "unknown" and c.span is not None:
            spans.setdefault(c.verifier, []).append(c.span)
    for r in [overall, *per.values()]:
        r["decided"] = r["passed"] + r["failed"]
    for name, sp in spans.items():
        per[name]["chars_covered"] = _covered(sp)
    overall["chars_covered"] = _covered([s for sp in spans.values() for s in sp])
    overall["by_verifier"] = per
    return overall


def _covered(spans: list[tuple[int, int]]) -> int:
    """Characters inside the union of ``spans`` (half-open ``(start, end)`` pairs)."""
    total, end = 0, -1
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


_ATOMS = (str, int, float, bool, type(None))


def _plain(v: Any) -> Any:
    """A copy of ``v`` as ``dataclasses.asdict`` makes it: JSON-shaped containers copied
    recursively, atoms as is, nested dataclasses as dicts, anything else deep-copied."""
    t = type(v)
    if t in _ATOMS:
        return v
    if t is dict:
        return {_plain(k): _plain(x) for k, x in v.items()}
    if t is list:
        return [_plain(x) for x in v]
    if t is tuple:
        return tuple(_plain(x) for x in v)
    if is_dataclass(v) and not isinstance(v, type):
        return asdict(v)
    return copy.deepcopy(v)


@dataclass(slots=True)
class Cost:
    """Extra work verification caused: ``tokens`` (prompt+completion of extra upstream
    calls and verifier-model calls), ``upstream_calls`` (sentinel and correction calls),
    ``verifier_calls`` (verifier-model calls: plans, claims, queries, verdicts),
    ``searches`` (search-backend queries of the facts verifier), ``ms`` (gateway wall time
    spent verifying/correcting)."""

    tokens: int = 0
    upstream_calls: int = 0
    ms: float = 0.0
    verifier_calls: int = 0
    searches: int = 0


_T = TypeVar("_T")


class _Entry(Generic[_T]):
    """A typed name for one entry of :attr:`Report.extra`: ``report.policy = "strict"`` is
    ``report.extra["policy"] = "strict"``, and reading it gives ``None`` while unset. The entries
    stay in ``extra`` so that :meth:`Report.to_dict` writes them in the order they were set (the
    report's JSON is the same whichever way an entry was written)."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    @overload
    def __get__(self, obj: None, owner: type) -> _Entry[_T]: ...
    @overload
    def __get__(self, obj: Report, owner: type) -> _T | None: ...

    def __get__(self, obj: Report | None, owner: type) -> _Entry[_T] | _T | None:
        if obj is None:
            return self
        return obj.extra.get(self.key)

    def __set__(self, obj: Report, value: _T) -> None:
        obj.extra[self.key] = value

    def __delete__(self, obj: Report) -> None:
        obj.extra.pop(self.key, None)


@dataclass(slots=True)
class Report:
    """All checks of one answer.

    ``status`` (docs/design.md "report"): ``passed`` (every check-worthy unit found was decided and
    passed, none on the verifier model's word alone), ``unverified`` (checks were attempted, none
    failed, not everything could be decided: some check ``unknown``/``error``, or a pass rests
    only on the verifier model), ``corrected`` (a correction round fixed every failure), ``failed``
    (failures remain), ``skipped`` (nothing was worth checking: low risk, over budget, checks
    off; ``reason`` says which), ``error`` (every check is an ``error``: verification broke).
    ``risk``: the risk score dict (``score`` 0..1, ``signals``, ``verifiers``).
    ``rounds``: one dict per correction round.
    ``answer_chars``: length of the verified answer (for ``coverage.chars``);
    ``trust_model_passes``: the policy's opt-in that counts model-written passes as decided.
    In :meth:`to_dict`, ``cost.ms`` and ``extra["durations_ms"]`` values are rounded to 0.1 ms,
    and ``coverage`` is :func:`coverage_of` the checks.

    ``extra`` holds the report's other top-level entries; those docs/report.md names have typed
    names (:class:`_Entry`, ``None`` while unset): ``policy`` (the policy's name), ``states``
    (the AMTFV states walked), ``sources`` (the numbered passages and records checks cite),
    ``correction`` (the loop's last state and stop reason), ``sentinel`` (injected or why not,
    its rounds), ``choices`` (``n > 1``: one report dict per choice, with its ``index``), and
    ``verifier_model``, ``unconfirmed`` / ``unconfirmed_note`` / ``unconfirmed_note_not_appended``
    (facts), ``observe``, ``durations_ms``. ``budget_stop``: a correction loop was cut by the
    budget or deadline (request metrics; never serialised).
    """

    status: ReportStatus = "skipped"
    checks: list[Check] = field(default_factory=list)
    risk: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    cost: Cost = field(default_factory=Cost)
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    answer_chars: int | None = None
    trust_model_passes: bool = False
    budget_stop: bool = field(default=False, repr=False, compare=False)

    policy = _Entry[str]("policy")
    states = _Entry[list[str]]("states")
    sources = _Entry[list[dict[str, Any]]]("sources")
    correction = _Entry[dict[str, Any]]("correction")
    sentinel = _Entry[dict[str, Any]]("sentinel")
    choices = _Entry[list[dict[str, Any]]]("choices")
    verifier_model = _Entry[dict[str, Any]]("verifier_model")
    unconfirmed = _Entry[list[str]]("unconfirmed")
    unconfirmed_note = _Entry[str]("unconfirmed_note")
    unconfirmed_note_not_appended = _Entry[str]("unconfirmed_note_not_appended")
    observe = _Entry[bool]("observe")
    durations_ms = _Entry[dict[str, float]]("durations_ms")

    @property
    def coverage(self) -> dict[str, Any]:
        """:func:`coverage_of` this report's checks."""
        return coverage_of(self.checks, answer_chars=self.answer_chars,
                           trust_model_passes=self.trust_model_passes)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "fail"]

    def to_dict(self) -> dict[str, Any]:
        """The ``veracity`` object placed in responses (see docs/report.md)."""
        d: dict[str, Any] = {
            "status": self.status,
            "risk": self.risk,
            "checks": [c.to_dict() for c in self.checks],
            "rounds": self.rounds,
            # not asdict(): it deep-copies every value, ~10 us on the gateway's hot path
            # ms rounded to 0.1: sub-0.1 ms digits are timer noise, not information
            "cost": {"tokens": self.cost.tokens, "upstream_calls": self.cost.upstream_calls,
                     "verifier_calls": self.cost.verifier_calls, "searches": self.cost.searches,
                     "ms": round(self.cost.ms, 1)},
        }
        if self.checks:
            d["coverage"] = self.coverage
        if self.reason:
            d["reason"] = self.reason
        d.update(self.extra)
        durations = d.get("durations_ms")
        if type(durations) is dict:
            d["durations_ms"] = {k: round(v, 1) if isinstance(v, float) else v for k, v in durations.items()}
        return d
