"""Typed seams between the pipeline and the verifiers: the report's named entries and the
per-verifier option classes (no change of the report's JSON or of what a verifier receives)."""

from __future__ import annotations

import asyncio
import json

import pytest

from verifiers._types import Check, Report
from verifiers.run import (ArithmeticOptions, CitationsOptions, FactsOptions, PlannerOptions, VerifierOptions,
                           averify, options_of, run)


def test_named_entries_write_the_same_json_in_the_order_they_were_set():
    typed, raw = Report(status="passed"), Report(status="passed")
    typed.extra["durations_ms"] = {"arithmetic": 1.25}
    raw.extra["durations_ms"] = {"arithmetic": 1.25}
    typed.policy, typed.states, typed.sentinel = "strict", ["draft", "verify", "verified"], {"injected": False}
    raw.extra.update(policy="strict", states=["draft", "verify", "verified"], sentinel={"injected": False})
    assert json.dumps(typed.to_dict()) == json.dumps(raw.to_dict())
    assert list(typed.to_dict())[-4:] == ["durations_ms", "policy", "states", "sentinel"]
    assert Report().policy is None and Report().choices is None
    del typed.sentinel
    assert "sentinel" not in typed.to_dict() and typed.sentinel is None


def test_budget_stop_is_never_serialised():
    rep = Report(status="failed")
    rep.budget_stop = True
    assert "budget_stop" not in rep.to_dict() and rep.extra == {}


def test_options_from_a_mapping_take_known_names_and_timeout_ms():
    o = ArithmeticOptions.of({"timeout_ms": 2000, "budget_ms": 50, "not_an_option": 1})
    assert (o.timeout_s, o.budget_ms) == (2.0, 50)
    assert FactsOptions.of({"timeout_s": 3, "timeout_ms": 9000, "grounding": True}).timeout_s == 3.0
    assert CitationsOptions.of(None).timeout_s == 10.0
    p = PlannerOptions(when="always")
    assert PlannerOptions.of(p) is p
    with pytest.raises(TypeError):
        FactsOptions.of(p)
    typed = options_of({"arithmetic": {"timeout_ms": 500}, "planner": p, "custom": {"timeout_s": 1}})
    assert type(typed["arithmetic"]) is ArithmeticOptions and typed["planner"] is p
    assert type(typed["custom"]) is VerifierOptions and typed["custom"].timeout_s == 1.0


def test_run_takes_typed_options_and_gives_the_planner_the_rule_checks():
    seen = {}

    async def rules(answer, question, opts):
        seen["rules"] = opts
        return [Check("rules", "2 + 2 = 5", "fail")]

    async def planner(answer, question, opts):
        seen["planner"] = opts
        return []

    reg = {"rules": rules, "planner": planner}
    opts = {"rules": ArithmeticOptions(timeout_s=5.0), "planner": PlannerOptions(when="never", timeout_s=5.0)}
    rep = asyncio.run(run("2 + 2 = 5", ["rules", "planner"], registry=reg, options=opts))
    assert rep.status == "failed" and seen["rules"] is opts["rules"]
    got = seen["planner"]
    assert isinstance(got, PlannerOptions) and got.when == "never"
    assert [c.claim for c in got.rule_checks] == ["2 + 2 = 5"] and opts["planner"].rule_checks == ()
    # a mapping stays a mapping for a custom adapter (the library's old form)
    asyncio.run(run("x", ["rules", "planner"], registry=reg, options={"planner": {"timeout_ms": 900}}))
    assert seen["planner"]["timeout_ms"] == 900 and len(seen["planner"]["rule_checks"]) == 1


def test_a_timeout_in_typed_options_cuts_the_verifier():
    async def slow(answer, question, opts):
        await asyncio.sleep(30)

    rep = asyncio.run(run("x", ["slow"], registry={"slow": slow}, options={"slow": VerifierOptions(timeout_s=0.05)}))
    assert rep.checks[0].outcome == "unknown" and "did not finish within 50 ms" in rep.checks[0].note


def test_averify_with_a_given_score_does_not_score_again(monkeypatch):
    from verifiers import risk

    score = risk.score(None, "2 + 2 = 5")
    monkeypatch.setattr(risk, "score", lambda *a, **k: pytest.fail("scored again"))
    rep = asyncio.run(averify("2 + 2 = 5", {"verifiers": ["arithmetic"], "force": True}, risk=score, unread=False))
    assert rep.status == "failed" and rep.risk == score.to_dict()
