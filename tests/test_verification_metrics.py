"""The per-answer counters of :mod:`proxy.verification_metrics` that the dashboard divides
(``veracity_answers_total``, the extra-cost counters): one answer per choice, ``first_draft``
from the status, cost once per request, nothing for an answer that was not checked."""

from __future__ import annotations

import uuid

from prometheus_client import REGISTRY

from proxy import verification_metrics as vm
from verifiers._types import Check, Cost, Report


def _answers(team: str, status: str, first: str) -> float:
    return REGISTRY.get_sample_value("veracity_answers_total", {"model": "_offline", "team": team, "status": status,
                                                                "first_draft": first}) or 0.0


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
    ]
    vm.observe_report(rep, model="_offline", team=team)
    assert _answers(team, "corrected", "fail") == 1
    assert _answers(team, "failed", "fail") == 1
    assert _answers(team, "passed", "no_fail") == 1
    assert _answers(team, "unverified", "no_fail") == 1
    # the request's cost once, not per choice
    assert _cost("veracity_verification_seconds_total", team) == 0.25
    assert _cost("veracity_verification_extra_tokens_total", team) == 40
    assert _cost("veracity_verification_extra_calls_total", team, kind="upstream") == 1
    assert _cost("veracity_verification_extra_calls_total", team, kind="verifier_model") == 2
    assert _cost("veracity_verification_extra_calls_total", team, kind="search") == 0


def test_a_skipped_answer_counts_as_an_answer_but_costs_nothing():
    team = f"t-{uuid.uuid4().hex[:8]}"
    vm.observe_report(Report(status="skipped", reason="low risk", cost=Cost(ms=3.0)), model="_offline", team=team)
    assert _answers(team, "skipped", "no_fail") == 1
    assert _cost("veracity_verification_seconds_total", team) == 0


def test_blocked_answers_counted_per_model_and_team():
    team = f"t-{uuid.uuid4().hex[:8]}"
    vm.observe_blocked("_offline", team)
    vm.observe_blocked("_offline", team)
    assert _cost("veracity_blocked_answers_total", team) == 2
