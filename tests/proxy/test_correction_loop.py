"""The loop around verification (docs/verification.md; docs/design.md vocabulary "divergence"):
the state sequence actually walked, the divergence stop, A/B/A oscillation, and divergence
reaching the human review queue -- through the real gateway with the real ``openai`` SDK against the scripted mock upstream,
plus the divergence rules on their own (:mod:`proxy.pipeline.divergence`).

Each case tags its question (``[case:NAME]``); the mock's ``fix`` rules answer the correction
prompt (its user turn starts with :data:`EVIDENCE`). Right values are computed here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.config import hash_key
from proxy.pipeline.correction import State, correct, walked_states
from proxy.pipeline.divergence import diverged, numbers
from tests.fixtures.mock import scripted_mock
from verifiers._types import Check, Report

EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()
ADMIN_KEY = "vk-admin-" + "c" * 20
USER_KEY = "vk-user-" + "d" * 20
RIGHT = 17 * 23                                 # 391
WRONG = "17 * 23 = 401 apples"
BIG = 170 * 23                                  # 3910: thousands separators
REFUSAL = "Sorry, I cannot help with that."


def q(tag: str) -> str:
    return f"[case:{tag}] I have 17 boxes of 23 apples. How many apples is that?"


def _fix(tag: str, first: str, *fixes: str) -> list[dict[str, Any]]:
    """Rules: the first draft ``first``; correction rounds answer ``fixes`` in order (the last repeats)."""
    return [{"name": f"{tag}-fix", "match": {"any_message": rf"\[case:{tag}\]", "last_user": EVIDENCE},
             "replies": [{"content": f} for f in fixes] or [{"content": first}]},
            {"name": tag, "match": {"last_user": rf"\[case:{tag}\]"}, "reply": {"content": first}}]


REWRITES = {
    "rw-eq": (WRONG, f"17 * 23 = {RIGHT} apples"),
    "rw-words": (WRONG, f"There are {RIGHT} apples (17 × 23)."),
    "rw-comma": ("170 * 23 = 3,901 apples", f"That makes {BIG:,} apples in all."),
    "rw-nbsp": ("170 * 23 = 3,901 apples", f"That makes {BIG:,} apples in all.".replace(",", "\u00a0")),
}

RULES: list[dict[str, Any]] = [
    *_fix("refuse", WRONG, REFUSAL),
    *_fix("reverse", WRONG, f"17 × 23 is not {RIGHT}."),
    *_fix("aba", WRONG, "17 * 23 = 402 apples", "17 * 23 = 401 apples", f"17 * 23 = {RIGHT} apples"),
    *_fix("maxretry", WRONG, "17 * 23 = 402 apples", "17 * 23 = 403 apples", "17 * 23 = 404 apples"),
    *_fix("annotate", WRONG),
    *[r for tag, (first, fixed) in REWRITES.items() for r in _fix(tag, first, fixed)],
    {"name": "passed", "match": {"last_user": r"\[case:passed\]"}, "reply": {"content": f"17 * 23 = {RIGHT} apples."}},
    {"name": "hello", "match": {"last_user": r"\[case:hello\]"}, "reply": {"content": "Hello! How can I help?"}},
]

mock, _reset_mock = scripted_mock({"models": ["gpt-test"], "rules": RULES})

BASE = {"risk": {"threshold": 0.1}, "correction": {"max_rounds": 3},
        "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}, "planner": {"enabled": False}},
        "audit": {"enabled": True, "include_text": True}}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("loop")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, on_failure in (("loop", "correct"), ("annotate", "annotate")):
        doc = {**BASE, "name": name, "on_failure": on_failure, "overridable": ["streaming.mode"]}
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"review_db": str(tmp / "reviews.sqlite3"), "budget_db": str(tmp / "budget.sqlite3")},
           "keys": [{"hash": hash_key(ADMIN_KEY), "name": "admin", "team": "qa", "policy": "loop", "admin": True},
                    {"hash": hash_key(USER_KEY), "name": "app", "team": "shop", "policy": "loop",
                     "allow_policy_header": True}]}
    return gateway_factory(cfg)


def ask(gw, tag: str, policy: str = "loop", **kw):
    c = openai.OpenAI(base_url=gw.base_url, api_key=USER_KEY, max_retries=0, timeout=60,
                      default_headers={"x-veracity-policy": policy})
    resp = c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": q(tag)}], **kw)
    return resp, resp.model_extra["veracity"]


def fix_calls(mock, tag: str) -> int:
    return sum(1 for r in mock.requests() if r.get("rule") == f"{tag}-fix")


def review_of(gw, request_id: str) -> dict[str, Any]:
    data = httpx.get(gw.url + "/v1/veracity/reviews?status=all&limit=100", timeout=30, trust_env=False,
                     headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()["data"]
    found = [r for r in data if r["request_id"] == request_id]
    assert len(found) == 1, data
    return found[0]


# ------------------------------------------------------------------------- divergence (gateway)


@pytest.mark.slow
def test_refusal_after_evidence_is_divergence_not_corrected(gw, mock):
    resp, rep = ask(gw, "refuse")
    assert resp.choices[0].message.content == WRONG            # the best earlier draft, not the refusal
    assert rep["status"] == "failed"
    assert rep["correction"]["stop_reason"] == "divergence" and rep["correction"]["divergence"]["kind"] == "refusal"
    assert "divergence" in rep["reason"]
    assert rep["rounds"][-1]["diverged"] == "refusal"
    assert rep["states"] == ["INITIAL_GENERATION", "EXECUTING_VERIFICATION", "VERIFICATION_FAILED", "CORRECTING",
                             "MAX_RETRY_EXCEEDED"]
    assert fix_calls(mock, "refuse") == 1                       # stopped at once, no second round
    failed = [c for c in rep["checks"] if c["outcome"] == "fail"]
    assert failed and failed[0]["found"] == "401"
    # the review queue gets it, with both drafts
    r = review_of(gw, resp._request_id)
    assert r["reason"] == "divergence" and r["drafts"] == [WRONG, REFUSAL] and r["answer"] == WRONG


def test_negated_value_is_divergence(gw):
    resp, rep = ask(gw, "reverse")
    assert resp.choices[0].message.content == WRONG
    assert rep["status"] == "failed" and rep["correction"]["divergence"]["kind"] == "reversed"


@pytest.mark.parametrize("tag", list(REWRITES))
def test_right_rewrite_in_other_words_is_corrected(gw, mock, tag):
    resp, rep = ask(gw, tag)
    assert resp.choices[0].message.content == REWRITES[tag][1]
    assert rep["status"] == "corrected" and rep["correction"]["stop_reason"] == "passed"
    assert "divergence" not in rep["correction"]
    assert fix_calls(mock, tag) == 1


# --------------------------------------------------------------------------------- oscillation


def test_a_b_a_oscillation_stops_the_loop(gw, mock):
    resp, rep = ask(gw, "aba")
    assert rep["status"] == "failed" and rep["correction"]["stop_reason"] == "oscillation"
    assert rep["correction"]["oscillation"]["values"] == ["401", "402", "401"]
    assert fix_calls(mock, "aba") == 2                          # the right third answer is never asked for
    assert "401" in resp.choices[0].message.content or "402" in resp.choices[0].message.content
    assert rep["states"][-1] == "MAX_RETRY_EXCEEDED" and rep["states"].count("CORRECTING") == 2
    assert review_of(gw, resp._request_id)["reason"] == "max_retry_exceeded"


# -------------------------------------------------------------------------------------- states

PASS_STATES = ["INITIAL_GENERATION", "EXECUTING_VERIFICATION", "VERIFICATION_PASSED"]
FAIL_STATES = ["INITIAL_GENERATION", "EXECUTING_VERIFICATION", "VERIFICATION_FAILED"]


def test_states_passed(gw):
    _, rep = ask(gw, "passed")
    assert rep["status"] == "passed" and rep["states"] == PASS_STATES


def test_states_failed_without_correction(gw, mock):
    _, rep = ask(gw, "annotate", policy="annotate")
    assert rep["status"] == "failed" and rep["states"] == FAIL_STATES
    assert fix_calls(mock, "annotate") == 0


def test_states_corrected(gw):
    _, rep = ask(gw, "rw-eq")
    assert rep["states"] == FAIL_STATES + ["CORRECTING", "EXECUTING_VERIFICATION", "VERIFICATION_PASSED"]


def test_states_max_retry(gw, mock):
    resp, rep = ask(gw, "maxretry")
    assert rep["correction"]["stop_reason"] == "max_rounds" and fix_calls(mock, "maxretry") == 3
    assert rep["states"] == FAIL_STATES + ["CORRECTING", "EXECUTING_VERIFICATION", "VERIFICATION_FAILED"] * 3 \
        + ["MAX_RETRY_EXCEEDED"]
    assert review_of(gw, resp._request_id)["reason"] == "max_retry_exceeded"


def test_states_not_verified(gw):
    _, rep = ask(gw, "hello")
    assert rep["status"] == "skipped" and rep["states"] == ["INITIAL_GENERATION"]


def test_states_in_a_buffered_stream(gw):
    c = openai.OpenAI(base_url=gw.base_url, api_key=USER_KEY, max_retries=0, timeout=60,
                      default_headers={"x-veracity-policy": "loop"})
    stream = c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": q("refuse")}],
                                       stream=True, extra_body={"veracity": {"streaming": {"mode": "buffer"}}})
    text, reports = "", []
    for chunk in stream:
        if (chunk.model_extra or {}).get("veracity"):
            reports.append(chunk.model_extra["veracity"])
        text += "".join(ch.delta.content or "" for ch in chunk.choices)
    assert text == WRONG and len(reports) == 1
    assert reports[0]["correction"]["stop_reason"] == "divergence" and reports[0]["states"][-1] == "MAX_RETRY_EXCEEDED"


# -------------------------------------------------------------------- the rules on their own

CLAIM = Check("arithmetic", "17 * 23 = 401", "fail", "391", "401",
              {"kind": "equation", "expression": "17 * 23", "value": "391"})


@pytest.mark.parametrize("text", [
    "17 * 23 = 391 apples", "There are 391 apples (17 × 23).", "17×23=391", "Sorry, the answer is 391.",
    "17 × 23 is not 401, it is 391.", "17 * 23 = 402 apples",  # still about the claim: verified as usual
    "17乘以23等于391个苹果。", "17 × 23 = 3.91e2 apples", "17 × 23 = 3.91 × 10^2",
])
def test_no_false_alarm_on_answers_that_keep_the_claim(text):
    assert diverged([CLAIM], text, WRONG) is None


@pytest.mark.parametrize("text, kind", [
    (REFUSAL, "refusal"), ("I'm unable to answer that.", "refusal"), ("抱歉，我无法回答这个问题。", "refusal"),
    ("The answer is 402.", "dropped"), ("The capital of France is Paris.", "dropped"),
    ("There are 1,391 apples.", "dropped"), ("There are 1 391 apples.", "dropped"),
    ("There are 1\u00a0391 apples.", "dropped"), ("17 × 23 ≠ 391", "reversed"),
    ("17 × 23 does not equal 391.", "reversed"),
])
def test_divergence_kinds(text, kind):
    d = diverged([CLAIM], text, WRONG)
    assert d is not None and d.kind == kind


def test_thousands_separators():
    for text in ("1,391", "1 391", "1\u00a0391", "1\u202f391", "1\u2009391"):
        assert [n.value for n in numbers(text)] == [1391], text
    assert [n.value for n in numbers("−3.25 and x2 and 391.")] == [-3.25, 391]
    assert [n.value for n in numbers("共391个，6.82e-6 或 6.82 × 10^-6")] == [391, Decimal("6.82e-6"), Decimal("6.82e-6")]


def test_claim_subject_from_the_draft_words_when_it_wrote_no_operands():
    total = Check("arithmetic", "2500 * 1.045**6 = 3175.0", "fail", 3255.65, 3175.0, {"input": "2500*1.045**6"})
    old = "The total is $3,175.00."
    assert diverged([total], "The total is $3,300.00.", old) is None      # same subject, wrong value: verified
    assert diverged([total], "The total is $3,255.65.", old) is None
    assert diverged([total], "Paris is the capital of France.", old).kind == "dropped"


def test_a_dropped_citation_is_a_fix_not_divergence():
    cite = Check("citations", "Smith (2019). Quantum Gradient Transformers.", "fail", None, None)
    assert diverged([cite], "I could not find a reliable source for that; here is what is known: ...") is None
    assert diverged([cite], REFUSAL).kind == "refusal"


async def test_planning_state_only_when_a_plan_was_made():
    async def verify(text):
        rep = Report(status="passed" if "391" in text else "failed",
                     checks=[Check("planner", "17 * 23 = 401" if "401" in text else "17 * 23 = 391",
                                   "pass" if "391" in text else "fail", "391", "391" if "391" in text else "401",
                                   {"tool": "calculate", "input": "17 * 23"})])
        rep.extra["plan_source"] = "template"
        return rep

    async def complete(body):
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "17 * 23 = 391"},
                             "finish_reason": "stop"}]}

    draft = {"choices": [{"index": 0, "message": {"role": "assistant", "content": WRONG}, "finish_reason": "stop"}]}
    res = await correct({"messages": [{"role": "user", "content": q("x")}]}, draft, complete=complete, verify=verify)
    assert res.report.status == "corrected"
    assert res.report.extra["states"] == [
        "INITIAL_GENERATION", "PLANNING_VERIFICATION", "EXECUTING_VERIFICATION", "VERIFICATION_FAILED",
        "CORRECTING", "PLANNING_VERIFICATION", "EXECUTING_VERIFICATION", "VERIFICATION_PASSED"]
    assert walked_states(res.report) == res.report.extra["states"]
    # without a correction loop the states come from the report itself
    assert walked_states(Report(status="skipped")) == [State.INITIAL_GENERATION.value]
    unverified = Report(status="unverified", checks=[Check("arithmetic", "x", "unknown")])
    assert walked_states(unverified) == ["INITIAL_GENERATION", "EXECUTING_VERIFICATION"]


def test_code_claims_kept_by_code_or_its_names_dropped_otherwise():
    code = Check("code", "block 1: import pandas as pd", "fail", None, "ValueError", {"stderr": "ValueError: ..."})
    assert diverged([code], "```python\nimport pandas as pd\nprint(df[m1 & m2])\n```") is None
    assert diverged([code], "Combine the masks with `&`: `df[(a > 0) & (a < 120)]`.") is None
    assert diverged([code], "With pandas, combine the masks with & rather than and.") is None
    assert diverged([code], "The weather in Paris is sunny today.").kind == "dropped"
    assert diverged([code], REFUSAL).kind == "refusal"
