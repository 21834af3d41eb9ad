"""Prometheus metrics of verification (issue 6, "Surface, metrics, audit").

=======================================  =========  ======================================
name                                     type       labels
=======================================  =========  ======================================
veracity_checks_total                    counter    verifier, outcome (pass|fail|unknown|error)
veracity_hallucinations_total            counter    verifier, model, team  (failed checks)
veracity_corrections_total               counter    outcome (corrected|failed|oscillation|budget|...)
veracity_sentinel_calls_total            counter    result (ready|not_ready|not_called|mixed|...)
veracity_verification_duration_seconds   histogram  verifier (and ``total`` for the whole run)
veracity_extra_tokens_total              counter    kind (sentinel|correction)
veracity_risk_score                      histogram  —
veracity_budget_exhausted_total          counter    —  (plus ``scope`` label: request|key|team)
veracity_reports_total                   counter    status (passed|unverified|corrected|failed|
                                                    skipped|error), model, team
veracity_truncated_verifications_total   counter    verifier (a length limit cut what it read)
=======================================  =========  ======================================

Defined in the default registry next to ``proxy/metrics.py``'s, so ``GET /metrics`` serves
them (and prometheus-client's multiprocess mode aggregates them the same way). ``model`` and
``team`` label values come from routed model names and configured teams, so cardinality is
bounded by the config. :func:`observe_report` records one finished report.

Responses with several choices (``n > 1``) count per verified choice: each choice's checks
(``veracity_checks_total``, ``veracity_hallucinations_total``), risk score and correction loop;
the request-level metrics (``veracity_verification_duration_seconds{verifier="total"}``, the
sentinel, ``veracity_budget_exhausted_total``) once per request.

Per model and team, for the dashboard and the recording rules
(``deploy/prometheus/veracity-rules.yml``), which divide them by the checked answers
(``veracity_reports_total{status!="skipped"}``):

=========================================  =======  ========================================
veracity_first_draft_failures_total        counter  model, team  (answers, one per choice,
                                                    whose first draft had a failed check)
veracity_blocked_answers_total             counter  model, team  (responses withheld by policy)
veracity_verification_seconds_total        counter  model, team  (wall time spent verifying)
veracity_verification_extra_tokens_total   counter  model, team  (``cost.tokens`` of the reports)
veracity_verification_extra_calls_total    counter  model, team, kind (upstream|verifier_model|search)
=========================================  =======  ========================================

The cost counters count once per request (a report's ``cost`` sums its choices') and only for
verified answers (not ``skipped`` without checks).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Histogram

from proxy.metrics import model_label

CHECKS = Counter("veracity_checks_total", "Verification checks by verifier and outcome.",
                 ["verifier", "outcome"])
HALLUCINATIONS = Counter("veracity_hallucinations_total",
                         "Failed checks (claims found wrong) by verifier, model and team.",
                         ["verifier", "model", "team"])
CORRECTIONS = Counter("veracity_corrections_total", "Correction loops by how they ended.", ["outcome"])
SENTINEL_CALLS = Counter("veracity_sentinel_calls_total", "Sentinel (verify_result) results per request.",
                         ["result"])
VERIFICATION_DURATION = Histogram("veracity_verification_duration_seconds",
                                  "Wall time of each verifier (and of whole verification: verifier=total).",
                                  ["verifier"],
                                  buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                                           10.0, 30.0, 60.0))
EXTRA_TOKENS = Counter("veracity_extra_tokens_total", "Tokens spent on extra upstream calls by kind.", ["kind"])
RISK_SCORE = Histogram("veracity_risk_score", "Risk score (0..1) of answers.",
                       buckets=(0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
BUDGET_EXHAUSTED = Counter("veracity_budget_exhausted_total", "Verifications cut short by a budget.", ["scope"])
REPORTS = Counter("veracity_reports_total",
                  "Verified answers by report status (passed needs a passing check; unverified: checks "
                  "attempted, none passed or failed).", ["status", "model", "team"])
TRUNCATED = Counter("veracity_truncated_verifications_total",
                    "Verification runs in which a verifier read only part of the answer (a length limit), "
                    "by verifier.", ["verifier"])

UNITS = Counter("veracity_units_total",
                "Check-worthy units of final answers (one per check) by verifier and result: passed "
                "(on evidence the verifier model did not write), failed, undecided (unknown, error, or a "
                "pass on the verifier model's word). Coverage = (passed + failed) / all.",
                ["verifier", "result"])

#: ``status`` label values (the report vocabulary, DESIGN.md); anything else counts as ``other``.
STATUSES = frozenset({"passed", "unverified", "corrected", "failed", "skipped", "error"})


def observe_checks(report: Any, *, model: str, team: str) -> None:
    """Record the checks of one verification run (the first draft's, and each correction
    round's): ``veracity_checks_total``, ``veracity_hallucinations_total`` (failed checks: the
    model said something wrong, even if a later round corrected it) and per-verifier
    durations from ``report.extra["durations_ms"]``."""
    for c in report.checks:
        _child(CHECKS, c.verifier, c.outcome).inc()
        if c.outcome == "fail":
            HALLUCINATIONS.labels(c.verifier, model_label(model), team).inc()
        elif isinstance(c.evidence, dict) and c.evidence.get("kind") == "truncated":
            _child(TRUNCATED, c.verifier).inc()
    per_choice = report.extra.get("choices")
    runs = ([e.get("durations_ms") for e in per_choice if isinstance(e, dict)] if isinstance(per_choice, list)
            else [report.extra.get("durations_ms")])  # n > 1: each choice's run, not their sum
    for durations in runs:
        for name, ms in (durations or {}).items():
            if isinstance(ms, (int, float)):
                _child(VERIFICATION_DURATION, name).observe(ms / 1000.0)


_CHILDREN: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, cached (``labels()`` takes a lock and builds tuples on each
    call); for the bounded label sets only (verifier names, outcomes)."""
    key = (id(metric), *labels)
    c = _CHILDREN.get(key)
    if c is None:
        c = metric.labels(*labels)
        if len(_CHILDREN) < 1000:
            _CHILDREN[key] = c
    return c


def observe_report(report: Any, *, model: str, team: str, checks: bool = True) -> None:
    """Record a finished :class:`verifiers._types.Report`: its checks (unless ``checks`` is
    False because :func:`observe_checks` already saw each run), the risk score, the whole
    verification time (``verifier="total"``; only when something was verified: a ``skipped``
    report without checks -- low risk, checks off, over budget -- adds no duration sample),
    correction and sentinel outcomes, and the answer's status (``veracity_reports_total``). A
    multi-choice report (``extra["choices"]``, see :mod:`proxy.choices`) adds one risk sample,
    one correction outcome and one status per choice."""
    if checks:
        observe_checks(report, model=model, team=team)
    _observe_units(report)
    _observe_first_drafts_and_cost(report, model_label(model), team)
    if report.cost.ms and (report.checks or report.status != "skipped"):  # nothing verified: no duration
        _child(VERIFICATION_DURATION, "total").observe(report.cost.ms / 1000.0)
    per_choice = report.extra.get("choices")
    if isinstance(per_choice, list):  # n > 1 (proxy/choices.py): risk and correction per choice
        for entry in per_choice:
            if isinstance(entry, dict):
                _observe_answer(entry.get("risk"), entry.get("status"), entry.get("correction"), entry.get("rounds"))
                _observe_status(entry.get("status"), model, team)
    else:
        _observe_answer(report.risk, report.status, report.extra.get("correction"), report.rounds)
        _observe_status(report.status, model, team)
    sent = report.extra.get("sentinel")
    if sent and sent.get("injected"):
        SENTINEL_CALLS.labels(sent.get("result", "not_called")).inc()


def _observe_units(report: Any) -> None:
    """The final answer's check-worthy units in ``veracity_units_total`` (its coverage)."""
    by = report.coverage["by_verifier"] if report.checks else {}
    for verifier, row in by.items():
        for result, key in (("passed", "passed"), ("failed", "failed"), ("undecided", "unknown")):
            if row[key]:
                _child(UNITS, verifier, result).inc(row[key])


def _observe_status(status: Any, model: str, team: str) -> None:
    """One answer's report status in ``veracity_reports_total`` (``other`` for a value outside
    :data:`STATUSES`, so a bug cannot grow the label set)."""
    REPORTS.labels(status if status in STATUSES else "other", model_label(model), team).inc()


def _observe_answer(risk: Any, status: Any, correction: Any, rounds: Any) -> None:
    """The risk score and correction outcome of one verified answer (one choice)."""
    if isinstance(risk, dict) and isinstance(risk.get("score"), (int, float)):
        RISK_SCORE.observe(float(risk["score"]))
    if isinstance(correction, dict) and rounds:
        outcome = "corrected" if status == "corrected" else correction.get("stop_reason", "failed")
        CORRECTIONS.labels(str(outcome).split(":")[0]).inc()


# ------------------------------------------------------------ per model and team (the dashboard)

FIRST_DRAFT_FAILURES = Counter("veracity_first_draft_failures_total",
                               "Answers (one per choice) whose first draft had a failed check, whatever "
                               "happened next (corrected, returned failed, blocked).", ["model", "team"])
BLOCKED = Counter("veracity_blocked_answers_total",
                  "Responses withheld by policy (HTTP 422 or a stream's error event): a failed answer under "
                  "on_failure: block (an unverified one where the policy blocks those too).", ["model", "team"])
VERIFICATION_SECONDS = Counter("veracity_verification_seconds_total",
                               "Wall time spent verifying and correcting answers (seconds).", ["model", "team"])
VERIFICATION_EXTRA_TOKENS = Counter("veracity_verification_extra_tokens_total",
                                    "Tokens of the extra upstream and verifier-model calls verification made.",
                                    ["model", "team"])
VERIFICATION_EXTRA_CALLS = Counter("veracity_verification_extra_calls_total",
                                   "Extra calls verification made: upstream (sentinel, correction), "
                                   "verifier_model, search.", ["model", "team", "kind"])
#: report statuses that say the first draft had a failed check: ``corrected`` (a round fixed
#: it) and ``failed`` (failures remain; with ``annotate``/``block`` the first draft is the answer)
_FIRST_DRAFT_FAILED = ("corrected", "failed")


def first_draft_failed(status: Any, correction: Any, rounds: Any) -> bool:
    """Whether one answer's first draft had a failed check: its status is ``corrected`` or
    ``failed``, or a correction round ran (rounds only run after a failed check, whatever
    status the last draft ends with, e.g. ``unverified``)."""
    return status in _FIRST_DRAFT_FAILED or bool(isinstance(correction, dict) and rounds)


def _observe_first_drafts_and_cost(report: Any, model: str, team: str) -> None:
    """``veracity_first_draft_failures_total`` per answer (each choice of ``extra["choices"]``)
    and the extra cost of the response (its report's ``cost``, once): seconds spent verifying,
    extra tokens, extra calls; nothing for a response with nothing verified."""
    per_choice = report.extra.get("choices")
    answers = ([(e.get("status"), e.get("correction"), e.get("rounds")) for e in per_choice if isinstance(e, dict)]
               if isinstance(per_choice, list)
               else [(report.status, report.extra.get("correction"), report.rounds)])
    failed = sum(1 for a in answers if first_draft_failed(*a))
    if failed:
        _child(FIRST_DRAFT_FAILURES, model, team).inc(failed)
    if not (report.checks or report.status != "skipped"):
        return  # nothing verified: as for the duration histogram, no sample
    cost = report.cost
    if cost.ms:
        _child(VERIFICATION_SECONDS, model, team).inc(cost.ms / 1000.0)
    if cost.tokens:
        _child(VERIFICATION_EXTRA_TOKENS, model, team).inc(cost.tokens)
    for kind, n in (("upstream", cost.upstream_calls), ("verifier_model", cost.verifier_calls),
                    ("search", cost.searches)):
        if n:
            _child(VERIFICATION_EXTRA_CALLS, model, team, kind).inc(n)


def observe_blocked(model: str, team: str) -> None:
    """One response withheld by policy (HTTP 422, or the error event of a buffered stream;
    every place that sends :func:`proxy.pipeline._blocked_body` calls this):
    ``veracity_blocked_answers_total``."""
    _child(BLOCKED, model_label(model), team).inc()
