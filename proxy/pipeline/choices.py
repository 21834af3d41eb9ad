"""Responses with several choices (OpenAI's ``n > 1``): one report per choice, one for the request.

The pipeline verifies (and corrects) every choice of such a response on its own; this module
holds the pieces that are about the *shape* of a multi-choice response and report, so
``proxy/pipeline/sequence.py`` stays a sequence of calls:

* :func:`split` -- the choices as one-choice completions (what the correction loop works on);
* :func:`put_back` -- a corrected choice back at its client-visible ``index``;
* :func:`combine` -- the request's report from the per-choice reports (:class:`ChoicesReport`);
* :func:`withhold` -- ``on_failure: block`` for a multi-choice response: failing choices are
  withheld (``content: null``, ``refusal`` set, ``finish_reason: "content_filter"``), the
  others are returned; every ``index`` stays present because OpenAI clients expect ``n``
  choices.

Vocabulary as in docs/design.md "report", "check", "correction round"; the report format is in
docs/report.md (the ``choices`` entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from verifiers import Report

from proxy.wire.messages import choice_list

__all__ = ["ChoicesReport", "choice_list", "split", "put_back", "combine", "withhold", "unverified_message",
           "STATUS_ORDER"]

#: How a request's ``status`` is chosen from its choices' statuses: the first status in this
#: order that any choice has (a failure anywhere is the request's failure; ``skipped`` only
#: when no choice was verified).
STATUS_ORDER: tuple[str, ...] = ("failed", "error", "corrected", "unverified", "passed", "skipped")


@dataclass(slots=True)
class ChoicesReport(Report):
    """The report of a multi-choice response: a :class:`~verifiers._types.Report` whose
    ``checks`` are the union of every choice's checks, plus ``check_choice`` (the choice
    ``index`` of each check, same order). :meth:`to_dict` adds ``"choice": index`` to each
    check dict; the per-choice reports are in ``extra["choices"]``."""

    check_choice: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """:meth:`Report.to_dict` with each top-level check tagged with its choice ``index``."""
        d = Report.to_dict(self)
        for check, index in zip(d["checks"], self.check_choice):
            check["choice"] = index
        return d


def split(completion: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """Every choice of ``completion`` as ``(index, one-choice completion)``: a shallow copy of
    the completion (same ``id``, ``model``, ``usage``...) whose only choice is that one, with
    ``index`` 0, the shape the correction loop and :func:`proxy.wire.messages.completion_text`
    read. ``index`` is the choice's own ``index`` (its position when missing or not an int)."""
    out = []
    for pos, choice in enumerate(choice_list(completion)):
        index = choice.get("index")
        index = index if isinstance(index, int) and not isinstance(index, bool) else pos
        out.append((index, {**completion, "choices": [{**choice, "index": 0}]}))
    return out


def put_back(completion: dict[str, Any], index: int, single: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``completion`` whose choice ``index`` is the only choice of ``single`` (a
    corrected one-choice completion), renumbered to ``index``; the other choices, ``id``,
    ``usage`` and every other field are ``completion``'s. ``single`` without a choice: unchanged."""
    new = choice_list(single)
    if not new:
        return completion
    choices = list(completion.get("choices") or [])
    for pos, choice in enumerate(choices):
        if isinstance(choice, dict) and choice.get("index", pos) == index:
            choices[pos] = {**new[0], "index": index}
            break
    return {**completion, "choices": choices}


def combine(per_choice: list[tuple[int, Report]]) -> ChoicesReport:
    """The request's report from ``(index, report)`` per choice, in ``index`` order.

    ``status``: by :data:`STATUS_ORDER`; ``risk``: the riskiest choice's; ``checks``: every
    choice's (tagged with ``choice``); ``rounds`` and ``corrected_checks``: every choice's, each
    dict with ``choice``; ``cost``: tokens and calls summed (``ms`` is the caller's: choices run
    concurrently); ``durations_ms``: per verifier, summed over choices; ``reason``: the choices'
    reasons, ``"choice N: ..."`` joined by ``"; "``; ``extra["choices"]``: one dict per choice,
    ``{"index": N, **report.to_dict()}`` (the same fields as a one-choice report).
    """
    per_choice = sorted(per_choice, key=lambda p: p[0])
    out = ChoicesReport()
    statuses = {r.status for _, r in per_choice}
    out.status = next((s for s in STATUS_ORDER if s in statuses), "skipped")  # type: ignore[assignment]
    risks = [r.risk for _, r in per_choice if isinstance(r.risk, dict)]
    out.risk = max(risks, key=lambda r: r.get("score") or 0.0) if risks else None
    corrected: list[dict[str, Any]] = []
    durations: dict[str, float] = {}
    reasons = []
    for index, rep in per_choice:
        out.checks.extend(rep.checks)
        out.check_choice.extend([index] * len(rep.checks))
        out.rounds.extend({**r, "choice": index} for r in rep.rounds)
        corrected.extend({**c, "choice": index} for c in rep.extra.get("corrected_checks") or ())
        out.cost.tokens += rep.cost.tokens
        out.cost.upstream_calls += rep.cost.upstream_calls
        out.cost.verifier_calls += rep.cost.verifier_calls
        out.cost.searches += rep.cost.searches
        for name, ms in (rep.durations_ms or {}).items():
            if isinstance(ms, (int, float)):
                durations[name] = durations.get(name, 0.0) + ms
        if rep.reason:
            reasons.append(f"choice {index}: {rep.reason}")
    out.reason = "; ".join(reasons) or None
    if corrected:
        out.extra["corrected_checks"] = corrected
    if durations:
        out.durations_ms = durations
    out.choices = [{"index": index, **rep.to_dict()} for index, rep in per_choice]
    return out


def unverified_message(prefix: str, checks: Any) -> str:
    """``"<prefix>: nothing in it could be verified (N check(s) unknown: verifier: note; ...)."``
    for an ``unverified`` answer (``on_unverified: block``); ``checks`` are :class:`Check`
    objects or their dicts."""
    def field_(c: Any, name: str) -> Any:
        return c.get(name) if isinstance(c, dict) else getattr(c, name, None)

    open_ = [c for c in checks or () if field_(c, "outcome") in ("unknown", "error")]
    what = "; ".join(f"{field_(c, 'verifier')}: {field_(c, 'claim') or field_(c, 'note')}"[:120] for c in open_[:3])
    return f"{prefix}: nothing in it could be verified ({len(open_)} check(s) unknown or error: {what})."


def withhold(completion: dict[str, Any], report: Report,
             statuses: frozenset[str] | set[str] = frozenset({"failed"})) -> tuple[dict[str, Any], list[int]]:
    """``on_failure: block`` / ``on_unverified: block`` for a multi-choice response:
    ``(completion, withheld indexes)``.

    Each choice whose report (``report.extra["choices"]``) has one of ``statuses`` (``failed``,
    and ``unverified`` under ``on_unverified: block``) is replaced by a message with ``content:
    null`` and a ``refusal`` naming the failed checks (or, for an unverified choice, saying
    nothing could be verified), ``logprobs: null`` (they would spell out the withheld text) and
    ``finish_reason: "content_filter"`` (OpenAI's "content was omitted"); its report entry gets
    ``"blocked": true``. The completion is returned unchanged when no choice has such a status.
    The caller blocks the whole response (HTTP 422) instead when every choice has.
    """
    entries = report.choices or []
    failed = {e["index"]: e for e in entries if isinstance(e, dict) and e.get("status") in statuses}
    if not failed:
        return completion, []
    choices = list(completion.get("choices") or [])
    withheld = []
    for pos, choice in enumerate(choices):
        index = choice.get("index", pos) if isinstance(choice, dict) else pos
        entry = failed.get(index)
        if entry is None:
            continue
        bad = [c for c in entry.get("checks") or () if c.get("outcome") == "fail"]
        what = "; ".join(f"{c.get('verifier')}: {c.get('claim')}"[:120] for c in bad[:3])
        refusal = (f"Veracity withheld this choice: {len(bad)} check(s) failed ({what})." if entry.get("status") == "failed"
                   else unverified_message("Veracity withheld this choice", entry.get("checks")))
        choices[pos] = {"index": index, "message": {"role": "assistant", "content": None, "refusal": refusal},
                        "logprobs": None, "finish_reason": "content_filter"}
        entry["blocked"] = True
        withheld.append(index)
    return {**completion, "choices": choices}, withheld
