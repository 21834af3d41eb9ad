"""The per-model-and-team counters of :mod:`proxy.observability.verification_metrics` that the dashboard
divides (``veracity_reports_total``, ``veracity_first_draft_failures_total``, the extra-cost
counters): one answer per choice, a first draft failed when the status or a correction round says
so, cost once per request, nothing for an answer that was not checked."""

from __future__ import annotations

import uuid

from prometheus_client import REGISTRY

from proxy.observability import verification_metrics as vm
from verifiers._types import Check, Cost, Report


def _answers(team: str, status: str, policy: str = "_none") -> float:
    return REGISTRY.get_sample_value("veracity_reports_total", {"model": "_offline", "team": team, "policy": policy,
                                                                "status": status}) or 0.0


def _cost(name: str, team: str, policy: str = "_none", **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"model": "_offline", "team": team, "policy": policy, **labels}) or 0.0


def test_one_answer_per_choice_with_its_first_draft():
    team = f"t-{uuid.uuid4().hex[:8]}"
    rep = Report(status="failed", checks=[Check("arithmetic", "1+1=3", "fail")],
                 cost=Cost(tokens=40, upstream_calls=1, ms=250.0, verifier_calls=2))
    rep.extra["choices"] = [
        {"status": "corrected", "correction": {"stop_reason": "passed"}, "rounds": [{"round": 1}]},
        {"status": "failed", "correction": None, "rounds": []},
        {"status": "passed"},
        {"status": "unverified"},
        # a correction round ran, its draft had only unknown checks: the first draft still failed
        {"status": "unverified", "correction": {"stop_reason": "unverified"}, "rounds": [{"round": 1}]},
    ]
    vm.observe_report(rep, model="_offline", team=team)
    assert (_answers(team, "corrected"), _answers(team, "failed"), _answers(team, "passed"),
            _answers(team, "unverified")) == (1, 1, 1, 2)
    assert _cost("veracity_first_draft_failures_total", team) == 3
    assert _cost("veracity_final_answer_failures_total", team) == 1       # the one choice left failed
    assert _cost("veracity_correction_rounds_total", team) == 2           # two choices, one round each
    # the request's cost once, not per choice
    assert _cost("veracity_verification_seconds_total", team) == 0.25
    assert _cost("veracity_verification_extra_tokens_total", team) == 40
    assert _cost("veracity_verification_extra_calls_total", team, kind="upstream") == 1
    assert _cost("veracity_verification_extra_calls_total", team, kind="verifier_model") == 2
    assert _cost("veracity_verification_extra_calls_total", team, kind="search") == 0


def test_a_skipped_answer_counts_as_an_answer_but_costs_nothing():
    team = f"t-{uuid.uuid4().hex[:8]}"
    vm.observe_report(Report(status="skipped", reason="low risk", cost=Cost(ms=3.0)), model="_offline", team=team)
    assert _answers(team, "skipped") == 1
    assert _cost("veracity_verification_seconds_total", team) == 0
    assert _cost("veracity_first_draft_failures_total", team) == 0


def test_blocked_answers_counted_per_model_and_team():
    team = f"t-{uuid.uuid4().hex[:8]}"
    vm.observe_blocked("_offline", team)
    vm.observe_blocked("_offline", team)
    assert _cost("veracity_blocked_answers_total", team) == 2


def test_policy_label_tells_observe_traffic_apart():
    team = f"t-{uuid.uuid4().hex[:8]}"
    for policy in ("observe", "strict", "strict"):
        rep = Report(status="failed", checks=[Check("arithmetic", "2+2=5", "fail")])
        rep.extra["policy"] = policy
        vm.observe_report(rep, model="_offline", team=team)
    assert _answers(team, "failed", "observe") == 1 and _answers(team, "failed", "strict") == 2
    # an explicit policy wins over the report's
    vm.observe_report(Report(status="passed", checks=[Check("arithmetic", "2+2=4", "pass")]), model="_offline",
                      team=team, policy="lenient")
    assert _answers(team, "passed", "lenient") == 1


def test_first_draft_and_correction_rounds_are_counted_apart():
    """A first draft with one failed check, corrected after three rounds whose drafts failed
    twice: one hallucinating first draft, three rounds, no failed final answer -- not four
    "hallucinations" as when every round's failed checks were summed."""
    team = f"t-{uuid.uuid4().hex[:8]}"
    first = Report(status="failed", checks=[Check("arithmetic", "17*23=401", "fail")])
    vm.observe_checks(first, model="_offline", team=team, policy="p", draft="first")
    for outcome in ("fail", "fail", "pass"):
        vm.observe_checks(Report(status="failed", checks=[Check("arithmetic", "17*23=x", outcome)]),
                          model="_offline", team=team, policy="p", draft="correction")
    final = Report(status="corrected", checks=[Check("arithmetic", "17*23=391", "pass")])
    final.extra["correction"] = {"stop_reason": "passed"}
    final.rounds = [{"round": 1}, {"round": 2}, {"round": 3}]
    vm.observe_report(final, model="_offline", team=team, policy="p", checks=False)

    def checks(draft: str, outcome: str) -> float:
        return _cost("veracity_checks_total", team, "p", verifier="arithmetic", outcome=outcome, draft=draft)
    assert (checks("first", "fail"), checks("correction", "fail"), checks("correction", "pass")) == (1, 2, 1)
    assert _cost("veracity_first_draft_failures_total", team, "p") == 1
    assert _cost("veracity_correction_rounds_total", team, "p") == 3
    assert _cost("veracity_final_answer_failures_total", team, "p") == 0
    assert _cost("veracity_corrections_total", team, "p", outcome="corrected") == 1
    assert REGISTRY.get_sample_value("veracity_hallucinations_total",
                                     {"verifier": "arithmetic", "model": "_offline", "team": team}) is None


def test_verification_cost_in_dollars_only_for_verified_answers():
    team = f"t-{uuid.uuid4().hex[:8]}"
    vm.observe_report(Report(status="passed", checks=[Check("arithmetic", "1+1=2", "pass")], cost=Cost(tokens=900)),
                      model="_offline", team=team, cost_usd=0.0125)
    vm.observe_report(Report(status="skipped", reason="low risk"), model="_offline", team=team, cost_usd=5.0)
    assert _cost("veracity_verification_cost_usd_total", team) == 0.0125


def test_review_backlog_gauge_follows_the_store():
    team = f"t-{uuid.uuid4().hex[:8]}"

    def gauge() -> float | None:
        return REGISTRY.get_sample_value("veracity_review_open", {"model": "m", "team": team})
    vm.set_review_backlog({("m", team): 7})
    assert gauge() == 7
    vm.set_review_backlog(None)                       # the store did not answer: the last value stays
    assert gauge() == 7
    vm.set_review_backlog({})                         # every review of that pair resolved
    assert gauge() == 0


# ------------------------------------------------- the gateway metrics' model and team labels


def _series(name: str, team: str) -> dict[tuple[str, ...], float]:
    """Every sample ``name`` of ``team``: its labels but team -> value."""
    out = {}
    for fam in REGISTRY.collect():
        for s in fam.samples:
            if s.name == name and s.labels.get("team") == team:
                out[tuple(v for k, v in sorted(s.labels.items()) if k != "team")] = s.value
    return out


def test_gateway_metrics_bound_model_labels_as_the_verification_metrics_do(monkeypatch):
    """``veracity_upstream_errors_total`` and ``veracity_overhead_seconds`` carry ``model`` and
    ``team``; the model name goes through the one bound the verification metrics use
    (``metrics.model_label``, one set of admitted names): a name a verified answer admitted keeps
    its label on upstream errors, a name first seen in a failed call is ``_other``, and past the
    limit every new name is ``_other`` -- however many names clients make up, the series stay
    within the limit. The cached label children stay within their bound and counting goes on
    past it."""
    from proxy.observability import metrics

    own = set(metrics._model_labels)
    monkeypatch.setattr(metrics, "_model_labels", set(own))  # a private copy (see tests/hostile)
    monkeypatch.setattr(metrics, "MAX_MODEL_LABELS", len(own) + 3)
    monkeypatch.setattr(metrics, "_children", {})
    monkeypatch.setattr(metrics, "_error_children", {})
    monkeypatch.setattr(metrics, "MAX_CACHED_CHILDREN", 4)
    team = f"t-{uuid.uuid4().hex[:8]}"

    vm.observe_blocked("m-verified", team)          # a verified answer admits the name...
    metrics.upstream_error("http_500", "m-verified", team, 500)
    metrics.upstream_error("http_404", "m-made-up", team, 404)   # ...a name only seen failing never gets one
    assert _series("veracity_upstream_errors_total", team) == {("m-verified", "http_500"): 1.0,
                                                               ("_other", "http_404"): 1.0}

    for i in range(50):                              # clients making up names (a `*` upstream serves any)
        metrics.observe_request("/v1/chat/completions", f"m-{i}", 200, 0.01, 0.001, None, 0.0, team)
        metrics.upstream_error("timeout", f"m-{i}", team, 200)
    overhead = _series("veracity_overhead_seconds_count", team)
    errors = _series("veracity_upstream_errors_total", team)
    models = {k[0] for k in overhead} | {k[0] for k in errors}
    assert models == {"m-verified", "m-0", "m-1", "_other"}   # 3 admitted names, the rest _other
    assert overhead[("m-0", "/v1/chat/completions")] == 1.0
    assert overhead[("_other", "/v1/chat/completions")] == 48.0
    assert errors[("_other", "timeout")] == 48.0 and errors[("m-1", "timeout")] == 1.0
    # the cached children: one per label tuple (bounded names keep them few), at most the bound
    # (5 error label tuples above, 4 cached); what did not fit is still counted, through labels()
    assert len(metrics._children) == 3 and len(metrics._error_children) == 4
    for status in range(201, 211):
        metrics.observe_request("/v1/chat/completions", "m-0", status, 0.01, 0.001, None, 0.0, team)
    assert len(metrics._children) == 4
    assert _series("veracity_overhead_seconds_count", team)[("m-0", "/v1/chat/completions")] == 11.0
    assert metrics._children[("/v1/chat/completions", "m-0", 200, team)][2] is metrics.OVERHEAD.labels(
        "/v1/chat/completions", "m-0", team)        # the cached child is the labelled one, reused
    # the team is the caller's, not mixed: another team's traffic is not in this team's series
    other = f"t-{uuid.uuid4().hex[:8]}"
    metrics.upstream_error("timeout", "m-0", other, 200)
    assert _series("veracity_upstream_errors_total", team)[("m-0", "timeout")] == 1.0


def test_request_without_a_known_caller_is_team_none():
    """A request refused before its key was accepted counts as ``team="_none"``
    (:data:`proxy.observability.metrics.NO_TEAM`), never as some configured team."""
    from proxy.observability import metrics

    route = f"/t-{uuid.uuid4().hex[:8]}"
    metrics.observe_request(route, "_unknown", 401, 0.001, 0.001, None, 0.0)
    assert REGISTRY.get_sample_value("veracity_requests_total", {"route": route, "model": "_unknown",
                                                                 "team": "_none", "status": "401"}) == 1.0
    assert REGISTRY.get_sample_value("veracity_overhead_seconds_count", {"route": route, "model": "_unknown",
                                                                         "team": "_none"}) == 1.0


def test_upstream_errors_are_counted_only_through_the_labelled_helper():
    """Every count of ``veracity_upstream_errors_total`` / ``veracity_overhead_seconds`` goes
    through :mod:`proxy.observability.metrics` (``upstream_error``, ``observe_request``), which
    bound the model label and cache the children: a direct ``.labels(...)`` elsewhere would
    skip the bound (and, with the old one-label form, raise at the first error)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "proxy"
    offenders = [str(p.relative_to(root.parent)) for p in root.rglob("*.py")
                 if p.name != "metrics.py" and any(f"{name}.labels(" in p.read_text(encoding="utf-8")
                                                   for name in ("UPSTREAM_ERRORS", "OVERHEAD", "REQUESTS"))]
    assert not offenders, offenders
