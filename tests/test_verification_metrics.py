"""The per-model-and-team counters of :mod:`proxy.verification_metrics` that the dashboard
divides (``veracity_reports_total``, ``veracity_first_draft_failures_total``, the extra-cost
counters): one answer per choice, a first draft failed when the status or a correction round says
so, cost once per request, nothing for an answer that was not checked."""

from __future__ import annotations

import uuid

from prometheus_client import REGISTRY

from proxy import verification_metrics as vm
from verifiers._types import Check, Cost, Report


def _answers(team: str, status: str) -> float:
    return REGISTRY.get_sample_value("veracity_reports_total", {"model": "_offline", "team": team,
                                                                "status": status}) or 0.0


def _cost(name: str, team: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, {"model": "_offline", "team": team, **labels}) or 0.0


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
