"""Prometheus metrics of verification (docs/metrics.md; docs/design.md "Shared vocabulary" for the names).

Every metric below but the few marked "request-wide" carries ``model``, ``team`` and
``policy`` (the policy's name: ``observe`` traffic, verified in the background after the
answer went out, can be told apart from traffic the gateway corrects or blocks), so every
dashboard panel filters by model and team.

=============================================  =========  ========================================
name                                           type       labels (besides model, team, policy)
=============================================  =========  ========================================
veracity_checks_total                          counter    verifier, outcome (pass|fail|unknown|
                                                          error), draft (first: the upstream's
                                                          first draft; correction: a round's draft)
veracity_reports_total                         counter    status (passed|unverified|corrected|
                                                          failed|skipped|error): answers, one per
                                                          choice, by their final report status
veracity_first_draft_failures_total            counter    -- answers (one per choice) whose first
                                                          draft had a failed check, whatever
                                                          happened next (corrected, failed, blocked)
veracity_final_answer_failures_total           counter    -- answers whose final report is
                                                          ``failed`` (returned or blocked wrong)
veracity_correction_rounds_total               counter    -- correction rounds run (one upstream
                                                          call for a new draft each)
veracity_corrections_total                     counter    outcome (corrected|max_rounds|
                                                          oscillation|budget|...): correction loops
veracity_blocked_answers_total                 counter    -- responses withheld by policy
veracity_units_total                           counter    verifier, result (passed|failed|
                                                          undecided): final answers' units
veracity_truncated_verifications_total         counter    verifier (a length limit cut what it read)
veracity_verification_duration_seconds         histogram  verifier (and ``total``)
veracity_verification_seconds_total            counter    -- wall time spent verifying (s)
veracity_verification_extra_tokens_total       counter    -- ``cost.tokens`` of the reports
veracity_verification_extra_calls_total        counter    kind (upstream|verifier_model|search)
veracity_verification_cost_usd_total           counter    -- USD of the extra tokens at litellm's
                                                          price table (as the daily budgets:
                                                          :class:`proxy.stores.budget.Prices`); a model
                                                          the table does not know adds 0
veracity_review_open                           gauge      model, team only: open reviews in the
                                                          review store (set at each scrape)
=============================================  =========  ========================================

Request-wide (no model/team/policy): ``veracity_sentinel_calls_total{result}``,
``veracity_extra_tokens_total{kind}``, ``veracity_risk_score``,
``veracity_budget_exhausted_total{scope}``.

What each counts, for the rates (``deploy/prometheus/veracity-rules.yml`` divides by the checked
answers, ``veracity_reports_total{status!="skipped"}``): the *hallucination rate* of a model is
``veracity_first_draft_failures_total`` over checked answers (each answer once, however many
checks or rounds failed); what the gateway let through wrong is
``veracity_final_answer_failures_total``; failed checks of first drafts per verifier are
``veracity_checks_total{outcome="fail", draft="first"}`` (a correction round's checks are
``draft="correction"``, so a loop that retries three times does not count three hallucinations).
``veracity_hallucinations_total`` (which counted every round's failed checks) is gone.

Defined in the default registry next to ``proxy/observability/metrics.py``'s, so ``GET /metrics`` serves
them (and prometheus-client's multiprocess mode aggregates them the same way). ``model``,
``team`` and ``policy`` values come from routed model names (bounded by
:func:`proxy.observability.metrics.model_label`), configured teams and policy names, so cardinality is
bounded by the config.

Responses with several choices (``n > 1``) count per verified choice: each choice's checks,
risk score, correction loop and status; the request-level metrics (duration ``total``, the
sentinel, budget, cost counters) once per request. The cost counters count only verified
answers (not ``skipped`` without checks).
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from proxy.observability.metrics import model_label

#: the labels every answer-level metric carries (see the module doc)
ML = ["model", "team", "policy"]

CHECKS = Counter("veracity_checks_total",
                 "Verification checks by verifier, outcome and draft (first: the upstream's first draft; "
                 "correction: a correction round's draft).", ["verifier", "outcome", "draft", *ML])
CORRECTIONS = Counter("veracity_corrections_total", "Correction loops by how they ended.", ["outcome", *ML])
CORRECTION_ROUNDS = Counter("veracity_correction_rounds_total",
                            "Correction rounds run (each asks the upstream for a new draft).", ML)
SENTINEL_CALLS = Counter("veracity_sentinel_calls_total", "Sentinel (verify_result) results per request.",
                         ["result"])
VERIFICATION_DURATION = Histogram("veracity_verification_duration_seconds",
                                  "Wall time of each verifier (and of whole verification: verifier=total).",
                                  ["verifier", *ML],
                                  buckets=(0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                                           10.0, 30.0, 60.0))
EXTRA_TOKENS = Counter("veracity_extra_tokens_total", "Tokens spent on extra upstream calls by kind.", ["kind"])
RISK_SCORE = Histogram("veracity_risk_score", "Risk score (0..1) of answers.",
                       buckets=(0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0))
BUDGET_EXHAUSTED = Counter("veracity_budget_exhausted_total", "Verifications cut short by a budget.", ["scope"])
REPORTS = Counter("veracity_reports_total",
                  "Verified answers (one per choice) by final report status (passed needs a passing check; "
                  "unverified: checks attempted, none passed or failed).", ["status", *ML])
FINAL_FAILURES = Counter("veracity_final_answer_failures_total",
                         "Answers (one per choice) whose final report is failed: returned (or blocked) with a "
                         "failed check after any correction.", ML)
TRUNCATED = Counter("veracity_truncated_verifications_total",
                    "Verification runs in which a verifier read only part of the answer (a length limit), "
                    "by verifier.", ["verifier", *ML])

UNITS = Counter("veracity_units_total",
                "Check-worthy units of final answers (one per check) by verifier and result: passed "
                "(on evidence the verifier model did not write), failed, undecided (unknown, error, or a "
                "pass on the verifier model's word). Coverage = (passed + failed) / all.",
                ["verifier", "result", *ML])
REVIEW_OPEN = Gauge("veracity_review_open",
                    "Open reviews in the review store (answers waiting for a person), by model and team; "
                    "read from the store at each scrape, so every replica reports the same shared queue.",
                    ["model", "team"], multiprocess_mode="mostrecent")

#: ``status`` label values (docs/design.md "report"); anything else counts as ``other``.
STATUSES = frozenset({"passed", "unverified", "corrected", "failed", "skipped", "error"})


def _policy(report: Any, policy: str | None) -> str:
    """The ``policy`` label: ``policy`` when given, else the report's ``extra["policy"]``,
    else ``_none``."""
    if policy:
        return policy
    name = getattr(report, "extra", {}).get("policy") if report is not None else None
    return name if isinstance(name, str) and name else "_none"


def observe_checks(report: Any, *, model: str, team: str, policy: str | None = None, draft: str = "first") -> None:
    """Record the checks of one verification run: ``veracity_checks_total`` with ``draft``
    (``first``: the upstream's first draft; ``correction``: a correction round's draft, see
    :func:`proxy.pipeline.verify._verifier`), truncations, and per-verifier durations from
    ``report.extra["durations_ms"]``."""
    labels = (model_label(model), team, _policy(report, policy))
    for c in report.checks:
        _child(CHECKS, c.verifier, c.outcome, draft, *labels).inc()
        if c.outcome != "fail" and isinstance(c.evidence, dict) and c.evidence.get("kind") == "truncated":
            _child(TRUNCATED, c.verifier, *labels).inc()
    per_choice = report.extra.get("choices")
    runs = ([e.get("durations_ms") for e in per_choice if isinstance(e, dict)] if isinstance(per_choice, list)
            else [report.extra.get("durations_ms")])  # n > 1: each choice's run, not their sum
    for durations in runs:
        for name, ms in (durations or {}).items():
            if isinstance(ms, (int, float)):
                _child(VERIFICATION_DURATION, name, *labels).observe(ms / 1000.0)


_CHILDREN: dict[tuple[Any, ...], Any] = {}


def _child(metric: Any, *labels: str) -> Any:
    """``metric.labels(*labels)``, cached (``labels()`` takes a lock and builds tuples on each
    call); for the bounded label sets only (verifier names, outcomes, config names)."""
    key = (id(metric), *labels)
    c = _CHILDREN.get(key)
    if c is None:
        c = metric.labels(*labels)
        if len(_CHILDREN) < 5000:
            _CHILDREN[key] = c
    return c


def observe_report(report: Any, *, model: str, team: str, checks: bool = True, policy: str | None = None,
                   cost_usd: float = 0.0) -> None:
    """Record a finished :class:`verifiers._types.Report`: its checks as the first draft's
    (unless ``checks`` is False because :func:`observe_checks` already saw each run), the risk
    score, the whole verification time (``verifier="total"``; only when something was
    verified: a ``skipped`` report without checks -- low risk, checks off, over budget -- adds
    no duration sample), correction loops and rounds, sentinel outcomes, the answer's status
    (``veracity_reports_total``, ``veracity_final_answer_failures_total``) and the extra cost
    (``cost_usd``: the request's extra tokens priced by :class:`proxy.stores.budget.Prices`). A
    multi-choice report (``extra["choices"]``, see :mod:`proxy.pipeline.choices`) adds one risk sample,
    one correction outcome and one status per choice. ``policy``: the policy's name (default:
    ``report.extra["policy"]``)."""
    policy = _policy(report, policy)
    model = model_label(model)
    if checks:
        observe_checks(report, model=model, team=team, policy=policy)
    labels = (model, team, policy)
    _observe_units(report, labels)
    _observe_first_drafts_and_cost(report, labels, cost_usd)
    if report.cost.ms and (report.checks or report.status != "skipped"):  # nothing verified: no duration
        _child(VERIFICATION_DURATION, "total", *labels).observe(report.cost.ms / 1000.0)
    per_choice = report.extra.get("choices")
    if isinstance(per_choice, list):  # n > 1 (proxy/pipeline/choices.py): risk and correction per choice
        for entry in per_choice:
            if isinstance(entry, dict):
                _observe_answer(entry.get("risk"), entry.get("status"), entry.get("correction"), entry.get("rounds"),
                                labels)
                _observe_status(entry.get("status"), labels)
    else:
        _observe_answer(report.risk, report.status, report.extra.get("correction"), report.rounds, labels)
        _observe_status(report.status, labels)
    sent = report.extra.get("sentinel")
    if sent and sent.get("injected"):
        SENTINEL_CALLS.labels(sent.get("result", "not_called")).inc()


def _observe_units(report: Any, labels: tuple[str, str, str]) -> None:
    """The final answer's check-worthy units in ``veracity_units_total`` (its coverage)."""
    by = report.coverage["by_verifier"] if report.checks else {}
    for verifier, row in by.items():
        for result, key in (("passed", "passed"), ("failed", "failed"), ("undecided", "unknown")):
            if row[key]:
                _child(UNITS, verifier, result, *labels).inc(row[key])


def _observe_status(status: Any, labels: tuple[str, str, str]) -> None:
    """One answer's report status in ``veracity_reports_total`` (``other`` for a value outside
    :data:`STATUSES`, so a bug cannot grow the label set), and a ``failed`` one in
    ``veracity_final_answer_failures_total``."""
    _child(REPORTS, status if status in STATUSES else "other", *labels).inc()
    if status == "failed":
        _child(FINAL_FAILURES, *labels).inc()


def _observe_answer(risk: Any, status: Any, correction: Any, rounds: Any, labels: tuple[str, str, str]) -> None:
    """The risk score, correction outcome and correction rounds of one verified answer (one choice)."""
    if isinstance(risk, dict) and isinstance(risk.get("score"), (int, float)):
        RISK_SCORE.observe(float(risk["score"]))
    if isinstance(correction, dict) and rounds:
        outcome = "corrected" if status == "corrected" else correction.get("stop_reason", "failed")
        _child(CORRECTIONS, str(outcome).split(":")[0], *labels).inc()
        _child(CORRECTION_ROUNDS, *labels).inc(len(rounds) if isinstance(rounds, list) else 1)


# ------------------------------------------------------------ per model and team (the dashboard)

FIRST_DRAFT_FAILURES = Counter("veracity_first_draft_failures_total",
                               "Answers (one per choice) whose first draft had a failed check, whatever "
                               "happened next (corrected, returned failed, blocked).", ML)
BLOCKED = Counter("veracity_blocked_answers_total",
                  "Responses withheld by policy (HTTP 422 or a stream's error event): a failed answer under "
                  "on_failure: block (an unverified one where the policy blocks those too).", ML)
VERIFICATION_SECONDS = Counter("veracity_verification_seconds_total",
                               "Wall time spent verifying and correcting answers (seconds).", ML)
VERIFICATION_EXTRA_TOKENS = Counter("veracity_verification_extra_tokens_total",
                                    "Tokens of the extra upstream and verifier-model calls verification made.", ML)
VERIFICATION_EXTRA_CALLS = Counter("veracity_verification_extra_calls_total",
                                   "Extra calls verification made: upstream (sentinel, correction), "
                                   "verifier_model, search.", ["kind", *ML])
VERIFICATION_COST_USD = Counter("veracity_verification_cost_usd_total",
                                "US dollars of the extra tokens verification spent (sentinel, correction, verifier "
                                "model), at litellm's price table as the daily budgets charge them; 0 for a model "
                                "the table does not know.", ML)
#: report statuses that say the first draft had a failed check: ``corrected`` (a round fixed
#: it) and ``failed`` (failures remain; with ``annotate``/``block`` the first draft is the answer)
_FIRST_DRAFT_FAILED = ("corrected", "failed")


def first_draft_failed(status: Any, correction: Any, rounds: Any) -> bool:
    """Whether one answer's first draft had a failed check: its status is ``corrected`` or
    ``failed``, or a correction round ran (rounds only run after a failed check, whatever
    status the last draft ends with, e.g. ``unverified``)."""
    return status in _FIRST_DRAFT_FAILED or bool(isinstance(correction, dict) and rounds)


def _observe_first_drafts_and_cost(report: Any, labels: tuple[str, str, str], cost_usd: float) -> None:
    """``veracity_first_draft_failures_total`` per answer (each choice of ``extra["choices"]``)
    and the extra cost of the response (its report's ``cost``, once): seconds spent verifying,
    extra tokens, extra calls, dollars; nothing for a response with nothing verified."""
    per_choice = report.extra.get("choices")
    answers = ([(e.get("status"), e.get("correction"), e.get("rounds")) for e in per_choice if isinstance(e, dict)]
               if isinstance(per_choice, list)
               else [(report.status, report.extra.get("correction"), report.rounds)])
    failed = sum(1 for a in answers if first_draft_failed(*a))
    if failed:
        _child(FIRST_DRAFT_FAILURES, *labels).inc(failed)
    if not (report.checks or report.status != "skipped"):
        return  # nothing verified: as for the duration histogram, no sample
    cost = report.cost
    if cost.ms:
        _child(VERIFICATION_SECONDS, *labels).inc(cost.ms / 1000.0)
    if cost.tokens:
        _child(VERIFICATION_EXTRA_TOKENS, *labels).inc(cost.tokens)
    if cost_usd and cost_usd > 0:
        _child(VERIFICATION_COST_USD, *labels).inc(cost_usd)
    for kind, n in (("upstream", cost.upstream_calls), ("verifier_model", cost.verifier_calls),
                    ("search", cost.searches)):
        if n:
            _child(VERIFICATION_EXTRA_CALLS, kind, *labels).inc(n)


def observe_blocked(model: str, team: str, policy: str = "_none") -> None:
    """One response withheld by policy (HTTP 422, or the error event of a buffered stream;
    every place that sends :func:`proxy.pipeline.respond.blocked_body` calls this):
    ``veracity_blocked_answers_total``."""
    _child(BLOCKED, model_label(model), team, policy).inc()


_REVIEW_LABELS: set[tuple[str, str]] = set()


def set_review_backlog(open_by: dict[tuple[str, str], int] | None) -> None:
    """Set ``veracity_review_open`` from the store's open reviews per ``(model, team)``
    (:meth:`proxy.stores.review.ReviewStore.open_by`); a pair seen before and now absent goes to 0.
    None (no store yet: nothing ever went to review) sets nothing."""
    if open_by is None:
        return
    for pair in _REVIEW_LABELS - set(open_by):
        REVIEW_OPEN.labels(*pair).set(0)
    for (model, team), n in open_by.items():
        REVIEW_OPEN.labels(model, team).set(n)
        _REVIEW_LABELS.add((model, team))
