"""Orchestration: concurrent verifiers, per-verifier and per-request deadlines, crashes
become checks, never failures of the request."""

import asyncio
import time

import pytest

import verifiers
from verifiers._types import Check
from verifiers.run import run, status_of


def adapter(outcome="pass", delay=0.0, exc=None, name="x"):
    async def go(answer, question, opts):
        if delay:
            await asyncio.sleep(delay)
        if exc:
            raise exc
        return [Check(name, f"claim in {answer[:10]}", outcome)]
    return go


async def test_verifiers_run_concurrently():
    # each verifier waits until the other one has started: run one after the other, the first
    # would wait until its own deadline (an ``unknown`` check); no wall-clock bound to miss
    started = {"a": asyncio.Event(), "b": asyncio.Event()}

    def meeting(name, other):
        async def go(answer, question, opts):
            started[name].set()
            await started[other].wait()
            return [Check(name, f"claim in {answer[:10]}", "pass")]
        return go

    reg = {"a": meeting("a", "b"), "b": meeting("b", "a")}
    opts = {"a": {"timeout_ms": 30_000}, "b": {"timeout_ms": 30_000}}
    rep = await run("text", ["a", "b"], registry=reg, options=opts)
    assert [c.verifier for c in rep.checks] == ["a", "b"] and rep.status == "passed"
    assert [c.outcome for c in rep.checks] == ["pass", "pass"]
    assert set(rep.extra["durations_ms"]) == {"a", "b"}


async def test_crash_becomes_error_check_and_others_survive():
    reg = {"boom": adapter(exc=ValueError("bad input " + "z" * 1000)), "ok": adapter(outcome="fail", name="ok")}
    rep = await run("t", ["boom", "ok"], registry=reg)
    boom = rep.checks[0]
    assert boom.verifier == "boom" and boom.outcome == "error" and boom.note.startswith("ValueError: bad input")
    assert len(boom.note) <= 300
    assert rep.status == "failed"  # the other verifier's failure still counts


async def test_own_timeout_and_request_deadline_give_unknown():
    reg = {"slow": adapter(delay=120), "fast": adapter(name="fast")}
    t0 = time.perf_counter()
    rep = await run("t", ["slow", "fast"], registry=reg, options={"slow": {"timeout_ms": 100}})
    assert time.perf_counter() - t0 < 60  # cut at its deadline, not after its 120 s (loaded CI: no tight bound)
    assert rep.checks[0].outcome == "unknown" and "deadline" in rep.checks[0].note
    # the fast verifier passed, the slow one decided nothing: not everything found was verified
    assert rep.status == "unverified"
    cov = rep.to_dict()["coverage"]
    assert (cov["units"], cov["decided"], cov["passed"], cov["unknown"]) == (2, 1, 1, 1)
    rep = await run("t", ["slow"], registry=reg, deadline_s=0.05)
    assert rep.checks[0].outcome == "unknown"


async def test_missing_verifier_module_is_an_error_check(monkeypatch):
    async def missing(answer, question, opts):
        import verifiers.no_such_module  # noqa: F401
    rep = await run("t", ["m", "sentinel"], registry={"m": missing})
    assert rep.checks[0].outcome == "error" and "ModuleNotFoundError" in rep.checks[0].note


async def test_no_verifier_means_skipped():
    rep = await run("t", [], registry={})
    assert rep.status == "skipped" and rep.reason == "no verifier triggered"


def test_status_of():
    assert status_of([]) == "skipped"
    assert status_of([Check("a", "", "error")]) == "error"
    assert status_of([Check("a", "", "error"), Check("b", "", "unknown")]) == "unverified"
    assert status_of([Check("a", "", "unknown")]) == "unverified"
    # a pass beside an undecided unit is not `passed` (docs/design.md "report")
    assert status_of([Check("a", "", "pass"), Check("b", "", "unknown")]) == "unverified"
    assert status_of([Check("a", "", "pass"), Check("b", "", "pass")]) == "passed"
    assert status_of([Check("a", "", "pass"), Check("b", "", "fail")]) == "failed"


def test_a_pass_on_the_verifier_models_word_never_makes_an_answer_passed():
    model_pass = Check("planner", "60 - 15 + 1/2 = 45.5", "pass", basis="model")
    rule_pass = Check("arithmetic", "2 + 2 = 4", "pass", basis="recomputed")
    assert status_of([model_pass]) == "unverified"
    assert status_of([rule_pass, model_pass]) == "unverified"
    # ... unless a policy opts in by name
    assert status_of([rule_pass, model_pass], trust_model_passes=True) == "passed"
    # its failures still count
    assert status_of([rule_pass, Check("planner", "x", "fail", basis="model")]) == "failed"


async def test_checks_without_a_basis_get_their_verifiers_default():
    async def planner(answer, question, opts):
        return [Check("planner", "c", "pass")]

    async def arithmetic(answer, question, opts):
        return [Check("arithmetic", "2 + 2 = 4", "pass", span=(0, 9))]
    rep = await run("2 + 2 = 4 and more", ["arithmetic", "planner"], registry={"arithmetic": arithmetic, "planner": planner})
    assert [c.basis for c in rep.checks] == ["recomputed", "model"]
    assert rep.status == "unverified"
    d = rep.to_dict()
    assert d["checks"][1]["basis"] == "model"
    cov = d["coverage"]
    assert (cov["units"], cov["passed"], cov["model_only"], cov["chars_covered"], cov["chars"]) == (2, 1, 1, 9, 18)
    assert cov["by_verifier"]["planner"]["model_only"] == 1


def test_coverage_counts_overlapping_spans_once():
    from verifiers._types import coverage_of
    checks = [Check("a", "", "pass", span=(0, 10)), Check("a", "", "fail", span=(5, 12)),
              Check("b", "", "unknown", span=(20, 30)), Check("b", "", "pass", span=(40, 45))]
    cov = coverage_of(checks, answer_chars=50)
    assert cov["chars_covered"] == 12 + 5
    assert cov["by_verifier"]["a"]["chars_covered"] == 12
    assert (cov["by_verifier"]["b"]["decided"], cov["by_verifier"]["b"]["unknown"]) == (1, 1)


def test_library_verify_uses_risk_and_registry():
    seen = []

    async def arith(answer, question, opts):
        seen.append((answer, question))
        return [Check("arithmetic", "2 + 2 = 5", "fail", 4, 5)]

    rep = verifiers.verify("So 2 + 2 = 5, and 3 * 3 = 9.", {"messages": [{"role": "user", "content": "sum?"}],
                                                            "registry": {"arithmetic": arith}})
    assert rep.status == "failed" and rep.risk["verifiers"] == ["arithmetic"]
    assert seen == [("So 2 + 2 = 5, and 3 * 3 = 9.", "sum?")]
    low = verifiers.verify("Hello there.", {"registry": {"arithmetic": arith}})
    assert low.status == "skipped" and len(seen) == 1


async def test_library_verify_refuses_inside_a_loop():
    with pytest.raises(RuntimeError, match="averify"):
        verifiers.verify("x")
