"""Shared records of the verification vocabulary (see DESIGN.md, "Shared vocabulary").

A *claim* is one checkable statement in an answer; a *check* is the result of verifying one
claim; a *report* gathers the checks of one answer. Every verifier returns ``list[Check]``.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, Literal

Outcome = Literal["pass", "fail", "unknown", "error"]
ReportStatus = Literal["passed", "unverified", "corrected", "failed", "skipped", "error"]

OUTCOMES: tuple[str, ...] = ("pass", "fail", "unknown", "error")


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
                "span": list(self.span) if self.span is not None else None, "note": self.note}


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


@dataclass(slots=True)
class Report:
    """All checks of one answer.

    ``status`` (DESIGN.md vocabulary): ``passed`` (at least one check passed and none failed),
    ``unverified`` (checks were attempted, none failed, none passed: every check ``unknown`` or
    some ``error``), ``corrected`` (a correction round fixed every failure), ``failed``
    (failures remain), ``skipped`` (nothing was worth checking: low risk, over budget, checks
    off; ``reason`` says which), ``error`` (every check is an ``error``: verification broke).
    ``risk``: the risk score dict (``score`` 0..1, ``signals``, ``verifiers``).
    ``rounds``: one dict per correction round.
    In :meth:`to_dict`, ``cost.ms`` and ``extra["durations_ms"]`` values are rounded to 0.1 ms.
    """

    status: ReportStatus = "skipped"
    checks: list[Check] = field(default_factory=list)
    risk: dict[str, Any] | None = None
    rounds: list[dict[str, Any]] = field(default_factory=list)
    cost: Cost = field(default_factory=Cost)
    reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if c.outcome == "fail"]

    def to_dict(self) -> dict[str, Any]:
        """The ``veracity`` object placed in responses (see README "Report format")."""
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
        if self.reason:
            d["reason"] = self.reason
        d.update(self.extra)
        durations = d.get("durations_ms")
        if type(durations) is dict:
            d["durations_ms"] = {k: round(v, 1) if isinstance(v, float) else v for k, v in durations.items()}
        return d
