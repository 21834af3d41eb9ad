"""Nothing is silently unverified: every length limit of a verifier or of the risk
scan, when an answer exceeds it, shows in the report as one ``unknown`` check naming the
verifier, the limit and how much was read (``evidence.kind == "truncated"``), so the status is
``unverified`` (or what the other checks say), never ``skipped`` with ``checks: []``; and it is
counted in ``veracity_truncated_verifications_total{verifier}``. The cases as the issue reported
them are in tests/hostile/test_hostile_inputs.py (``..._never_silently_skipped``); here, each limit."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import REGISTRY

from proxy.observability import verification_metrics as vmetrics
from proxy.stores.budget import RequestBudget
from proxy.pipeline.sequence import verify_text
from proxy.policy import Policy, PolicyStore
from verifiers import arithmetic, risk, verify
from verifiers._types import Report
from verifiers.citations import acheck as citations_acheck
from verifiers.citations._extract import MAX_TEXT
from verifiers.run import run

PROSE = "Some words here. "


def is_truncation(c) -> bool:
    """The check says part of the answer was not read (``verifiers._limits.unread_check``)."""
    return isinstance(c.evidence, dict) and c.evidence.get("kind") == "truncated"
  # 17 characters, no signal of any verifier


def _cut(report: Report) -> list[tuple[str, str]]:
    return [(c.verifier, c.evidence["limit"]) for c in report.checks if is_truncation(c)]


def _default_verify(text: str, policy: Policy | None = None) -> Report:
    pol = policy or PolicyStore(None).get("default")
    return asyncio.run(verify_text(pol, None, text, RequestBudget.from_policy(pol.budgets.request)))


# -- arithmetic: MAX_CHARS ------------------------------------------------------------------------


def test_arithmetic_says_where_it_stopped_reading():
    text = PROSE * (arithmetic.MAX_CHARS // len(PROSE) + 10) + "3 * 4 = 13."
    checks = arithmetic.check(text)
    assert len(checks) == 1 and checks[0].outcome == "unknown"
    ev = checks[0].evidence
    assert ev == {"kind": "truncated", "limit": "MAX_CHARS", "limit_value": 60_000, "checked": 60_000,
                  "total": len(text), "unit": "characters"}
    assert checks[0].span == (60_000, len(text)) and "60,000" in checks[0].note


def test_arithmetic_claims_before_the_limit_still_count():
    text = "3 * 4 = 13. " + PROSE * (arithmetic.MAX_CHARS // len(PROSE) + 10)
    assert [c.outcome for c in arithmetic.check(text)] == ["fail", "unknown"]
    assert verify(text).status == "failed"


def test_short_answers_get_no_truncation_check():
    rep = _default_verify("The product is 3 * 4 = 12.")
    assert rep.status == "passed" and _cut(rep) == []


# -- risk scan: MAX_SCAN_CHARS ------------------------------------------------------------------

CODE = "```python\ndef add(a, b:\n    return a + b\n```\n"  # a syntax error: tier 1, no sandbox needed


def test_code_block_that_runs_past_the_scan_limit_is_still_verified():
    # opened before the cut, closed after it: one code block the scan saw begin
    head = PROSE * (risk.MAX_SCAN_CHARS // len(PROSE)) + "\n\n"
    text = head[: risk.MAX_SCAN_CHARS - 20] + "\n" + CODE
    assert text.index("```") < risk.MAX_SCAN_CHARS < text.rindex("```")
    rep = _default_verify(text)
    assert "code" in rep.risk["verifiers"]
    assert rep.status == "failed" and any(c.verifier == "code" and c.outcome == "fail" for c in rep.checks)
    assert ("risk", "MAX_SCAN_CHARS") in _cut(rep)


def test_low_risk_long_answer_says_it_was_not_scanned_whole():
    text = PROSE * (risk.MAX_SCAN_CHARS // len(PROSE) + 100)
    rep = _default_verify(text)
    assert rep.status == "unverified" and "longer than the risk scan" in (rep.reason or "")


def test_risk_facts_scan_limit_only_matters_when_facts_may_run():
    r = risk.score(None, PROSE * 1500)  # 25,500 characters
    assert [c.evidence["limit"] for c in r.unread_checks(["arithmetic", "facts"])] == ["FACTS_SCAN_CHARS"]
    assert r.unread_checks(["arithmetic", "code"]) == []
    assert risk.score(None, PROSE * 100).unread_checks(None) == []


# -- citations: MAX_TEXT ------------------------------------------------------------------------


def test_references_past_the_extractor_limit_are_said_unread():
    ref = "\n\nReferences\n1. Smith, J. (2019). A Study of Things. Journal of Studies, 3(2), 1-9.\n"
    text = PROSE * (MAX_TEXT // len(PROSE) + 10) + ref
    checks = asyncio.run(citations_acheck(text, sources={"use": [], "cache": {"backend": "none"}}))
    assert [(c.verifier, c.outcome, c.evidence.get("limit")) for c in checks] == [("citations", "unknown", "MAX_TEXT")]


# -- planner: MAX_TEXT_CHARS --------------------------------------------------------------------


def test_planner_says_its_plans_read_a_prefix():
    from verifiers.planner import MAX_TEXT_CHARS

    text = PROSE * (MAX_TEXT_CHARS // len(PROSE) + 10)
    rep = asyncio.run(run(text, ["planner"], options={"planner": {"when": "never"}}))
    assert _cut(rep) == [("planner", "MAX_TEXT_CHARS")] and rep.status == "unverified"


# -- code: MAX_BLOCKS (already reported; now in the same shape) --------------------------------


def test_too_many_code_blocks_is_a_truncation_check():
    from verifiers.code import MAX_BLOCKS, plan

    text = "\n".join(f"```python\nx{i} = {i}\n```" for i in range(MAX_BLOCKS + 3))
    cut = [c for c in plan(text).checks if is_truncation(c)]
    assert len(cut) == 1 and cut[0].evidence["limit"] == "MAX_BLOCKS" and cut[0].evidence["total"] == MAX_BLOCKS + 3


# -- the metric ---------------------------------------------------------------------------------


def _truncated(verifier: str) -> float:
    return REGISTRY.get_sample_value("veracity_truncated_verifications_total",
                                     {"verifier": verifier, "model": "m", "team": "t", "policy": "_none"}) or 0.0


def test_truncation_checks_are_counted_by_verifier():
    text = "Lorem ipsum dolor sit amet. " * 2200 + "\n\n3 * 4 = 13."
    rep = _default_verify(text)
    before = _truncated("arithmetic")
    vmetrics.observe_checks(rep, model="m", team="t")
    assert _truncated("arithmetic") == before + 1


@pytest.mark.parametrize("status", ["passed", "unverified", "failed", "skipped", "corrected", "error"])
def test_report_status_is_a_metric_label(status):
    labels = {"status": status, "model": "_offline", "team": "t", "policy": "_none"}
    before = REGISTRY.get_sample_value("veracity_reports_total", labels) or 0.0
    vmetrics.observe_report(Report(status=status), model="_offline", team="t")  # type: ignore[arg-type]
    assert REGISTRY.get_sample_value("veracity_reports_total", labels) == before + 1


# -- facts: max_claims (a policy cap on claims checked per answer) ------------------------------


def test_facts_beyond_max_claims_are_said_unchecked():
    from verifiers.facts import ContextBackend, acheck

    answer = ("Acme was founded in 1990 in Springfield. Acme employs 48 people in Springfield. "
              "Acme's revenue in 2023 was $4.2 million. Acme's chief executive is Jane Doe.")
    backends = [ContextBackend([{"role": "system", "content": "Acme annual report: revenue $4.2 million."}])]
    out = asyncio.run(acheck(answer, None, backends=backends, max_claims=2))
    cut = [c for c in out.checks if is_truncation(c)]
    assert len(out.claims) == 2 and [c.evidence["limit"] for c in cut] == ["max_claims"]
    assert cut[0].evidence["limit_value"] == 2 and "the first 2 were checked" in cut[0].note
    whole = asyncio.run(acheck(answer, None, backends=backends, max_claims=8))
    assert not [c for c in whole.checks if is_truncation(c)]
