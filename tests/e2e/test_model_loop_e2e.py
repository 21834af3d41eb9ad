"""End to end, model in the loop: the real ``openai`` SDK -> Veracity (``veracity serve``
subprocess) -> the scripted mock upstream, which plays both the client's model and the
verifier model. Verifier-model calls are recognised by their structure (the JSON schema name
the gateway asks for: ``Plan`` for the planner), never by a test-only header.

Covers the planner (docs/verifier-model.md: template and model plans, its worked cases,
malformed / hostile plans, timeouts and budgets, a verifier model on another upstream) and the
facts verifier (docs/facts.md: grounding in the
request's own documents, [n] sources in the correction, the unconfirmed note, search backends
that fail, no URL from model text fetched).
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import yaml

from proxy.upstreams.mock import MockUpstream
from tests.fixtures.sandboxes import missing, sandbox_with_pandas

EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()

# --- docs/verifier-model.md's compound-interest case as a model wrote it
CI_Q = "本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？"
CI_BAD = "根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。"
CI_RIGHT = 10000 * (1 + 0.05 / 4) ** 12                    # 11607.545...
CI_GOOD = f"根据公式A=P*(1+r/n)^(nt)，本息和约为{CI_RIGHT:.2f}元。"

# --- a question that states an expression; the answer states a value
PROD_Q = "What is the product of 97/117/0.6534725/0.27613576234/0.6734576?"
PROD_RIGHT = 97 / 117 / 0.6534725 / 0.27613576234 / 0.6734576   # 6.8222...
PROD_BAD = "The result is approximately 0.000191."
PROD_GOOD = f"The result is approximately {PROD_RIGHT:.4f}."

# --- model plans: the planner is the mock answering the `Plan` schema
PLAN_DRAFT = "The train covers 120 km in 1.5 hours, so its average speed is 80 km/h."


def plan_of(*steps: dict[str, Any]) -> str:
    return json.dumps({"verification_needed": True, "verification_steps": list(steps)})


SPEED_STEP = {"step_id": 1, "description": "average speed = distance / time", "tool": "calculate",
              "input": {"expression": "120 / 1.5"}, "claim": "its average speed is 80 km/h",
              "expected_check": "the quotient equals the stated speed"}

PANDAS_Q = "[case:pandas-plan] Clean my data.csv: keep only rows with a plausible Age."
PANDAS_CODE = "df = df[(df['Age'] > 0) and (df['Age'] < 120)]"
PANDAS_BAD = f"""Here is the cleaning step:

```python
import pandas as pd

df = pd.read_csv("data.csv")
{PANDAS_CODE}
df.to_csv("clean.csv", index=False)
```
"""
PANDAS_GOOD = PANDAS_BAD.replace(" and ", " & ")
PANDAS_PLAN = plan_of({
    "step_id": 1, "description": "run the filter on constructed data with invalid ages",
    "tool": "run_python",
    "input": {"setup": "import pandas as pd\ndf = pd.DataFrame({'Age': [25, -5, 150, 30]})",
              "code": PANDAS_CODE,
              "assertions": ["list(df['Age']) == [25, 30]"]},
    "claim": PANDAS_CODE, "expected_check": "only the ages 25 and 30 remain"})


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []

    def plan(tag: str, content: str, delay_ms: float = 0) -> None:
        r.append({"name": f"{tag}-plan", "match": {"schema": "Plan", "any_message": rf"\[case:{tag}\]"},
                  "reply": {"content": content, "delay_ms": delay_ms}})

    def correctable(tag: str, question_re: str, first: str, fixed: str) -> None:
        r.append({"name": f"{tag}-fix", "match": {"any_message": question_re, "last_user": EVIDENCE, "schema": "-"},
                  "reply": {"content": fixed}})
        r.append({"name": tag, "match": {"last_user": question_re, "schema": "-"}, "reply": {"content": first}})

    # model plans (matched before the client's own turns)
    plan("plan-pass", plan_of(SPEED_STEP))
    plan("plan-malformed", "Sure! Here is my plan: step 1, check the speed.")
    plan("plan-tool", plan_of(dict(SPEED_STEP, tool="browse_web", input={"url": "http://127.0.0.1:9/x"})))
    # a claim the draft never made ("90 km/h"), "checked" against the planner's own number
    plan("plan-claim", plan_of(dict(SPEED_STEP, claim="its average speed is 90 km/h",
                                    input={"expression": "135 / 1.5"})))
    plan("plan-slow", plan_of(SPEED_STEP), delay_ms=8000)
    plan("pandas-plan", PANDAS_PLAN)
    # a wrong draft: the plan of the first draft checks "90 km/h", of the corrected one "80 km/h"
    r.append({"name": "plan-fail-plan", "match": {"schema": "Plan", "any_message": r"\[case:plan-fail\]"},
              "replies": [{"content": plan_of(dict(SPEED_STEP, claim="its average speed is 90 km/h"))},
                          {"content": plan_of(SPEED_STEP)}]})
    plan("other-upstream", plan_of(SPEED_STEP))
    r.append({"name": "plan-unexpected", "match": {"schema": "Plan"},
              "reply": {"content": json.dumps({"verification_needed": False, "verification_steps": []})}})
    correctable("compound", "按季度复利", CI_BAD, CI_GOOD)
    correctable("product", r"product of 97/117/", PROD_BAD, PROD_GOOD)
    correctable("pandas-plan", r"\[case:pandas-plan\]", PANDAS_BAD, PANDAS_GOOD)
    correctable("plan-fail", r"\[case:plan-fail\]", PLAN_DRAFT.replace("80", "90"), PLAN_DRAFT)
    r.append({"name": "plan-draft", "match": {"last_user": r"\[case:(plan-|other-upstream)", "schema": "-"},
              "reply": {"content": PLAN_DRAFT}})
    return r


def _policy(name: str, **over: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": name, "on_failure": "correct", "risk": {"threshold": 0.2},
        "correction": {"max_rounds": 2},
        "verifiers": {"arithmetic": {"enabled": True}, "code": {"enabled": True, "timeout_ms": 60000,
                                                                 "sandbox": {"limits": {"timeout_s": 30}}},
                      "citations": {"enabled": False},
                      "planner": {"enabled": True, "when": "never", "timeout_ms": 60000}},
        "budgets": {"request": {"extra_calls": 6, "extra_tokens": 50000, "deadline_ms": 120000}},
        "streaming": {"mode": "buffer", "keepalive_s": 5},
    }
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(doc.get(k), dict):
            doc[k] = _merge(doc[k], v)
        else:
            doc[k] = v
    return doc


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


# risk threshold 0: the planner runs whatever the rule-based signals say (what is tested is the plan)
ALWAYS = {"verifiers": {"planner": {"when": "always"}}, "risk": {"threshold": 0.0}}
POLICIES = {
    "templates": _policy("templates"),
    "plans": _policy("plans", **ALWAYS),
    "plans-fast": _policy("plans-fast", verifiers={"planner": {"when": "always", "timeout_ms": 1500}},
                          risk={"threshold": 0.0}),
    "plans-nobudget": _policy("plans-nobudget", budgets={"request": {"extra_calls": 0}}, **ALWAYS),
    "plans-unexplained": _policy("plans-unexplained", verifiers={"planner": {"when": "unexplained"}}),
    "plans-other": _policy("plans-other", verification={"model": "cheap-verifier"}, **ALWAYS),
}


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("model-loop-e2e")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    mock = MockUpstream({"rules": _rules(), "models": ["gpt-test"]}).start()
    cheap = MockUpstream({"rules": [
        {"name": "cheap-plan", "match": {"schema": "Plan"}, "reply": {"content": plan_of(SPEED_STEP)}}],
        "models": ["cheap-verifier"]}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["gpt-*"], "base_url": mock.base_url},
                         {"name": "cheap", "models": ["cheap-*"], "base_url": cheap.base_url, "api_key": "sk-cheap"}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock, "cheap": cheap, "tmp": tmp}
    mock.stop()
    cheap.stop()


@pytest.fixture(autouse=True)
def _reset_mocks(env):
    env["mock"].reset()
    env["cheap"].reset()


def ask(env, policy: str, question: str, **kw: Any):
    c = openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=240,
                      default_headers={"x-veracity-policy": policy})
    resp = c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": question}], **kw)
    return resp, resp.model_extra["veracity"]


def rules_hit(mock: MockUpstream, prefix: str) -> list[str]:
    return [str(r.get("rule")) for r in mock.requests() if str(r.get("rule", "")).startswith(prefix)]


def planner_checks(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in report["checks"] if c["verifier"] == "planner"]


# ------------------------------------------------------------------ planner: template plans


def test_compound_interest_case_detected_by_template_and_corrected_without_a_planner_call(env):
    resp, rep = ask(env, "templates", CI_Q)
    assert resp.choices[0].message.content == CI_GOOD
    assert rep["status"] == "corrected", rep
    wrong = rep["corrected_checks"]
    assert [c["verifier"] for c in wrong] == ["planner"] and "11608.92" in wrong[0]["claim"]
    assert wrong[0]["evidence"]["plan_source"] == "template"
    # the template computed the right value from the question; no verifier-model call was made
    assert not rules_hit(env["mock"], "plan"), env["mock"].requests()
    assert rep["cost"]["verifier_calls"] == 0
    assert rep["states"][:3] == ["INITIAL_GENERATION", "PLANNING_VERIFICATION", "EXECUTING_VERIFICATION"]
    assert "CORRECTING" in rep["states"] and rep["states"][-1] == "VERIFICATION_PASSED"
    fix = [r["body"] for r in env["mock"].requests() if r.get("rule") == "compound-fix"]
    assert len(fix) == 1 and "11607.5" in fix[0]["messages"][-1]["content"]


def test_product_of_a_division_chain_detected_and_corrected(env):
    resp, rep = ask(env, "templates", PROD_Q)
    assert rep["status"] == "corrected", rep
    assert resp.choices[0].message.content == PROD_GOOD
    fix = [r["body"] for r in env["mock"].requests() if r.get("rule") == "product-fix"]
    assert len(fix) == 1 and "6.82" in fix[0]["messages"][-1]["content"]
    assert not rules_hit(env["mock"], "plan")


# ------------------------------------------------------------------ planner: model plans


def test_model_plan_executed_with_the_tool_and_passes(env):
    resp, rep = ask(env, "plans", "[case:plan-pass] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    pc = planner_checks(rep)
    assert [c["outcome"] for c in pc] == ["pass"], rep
    # the model wrote the expression: its pass is not a verification (docs/design.md "Asymmetric trust")
    assert pc[0]["basis"] == "model" and rep["status"] == "unverified"
    assert pc[0]["evidence"]["tool"] == "calculate" and pc[0]["evidence"]["input"] == {"expression": "120 / 1.5"}
    assert "80" in json.dumps(pc[0]["expected"]) and "80" in json.dumps(pc[0]["found"])
    assert rep["cost"]["verifier_calls"] == 1 and rep["verifier_model"]["calls"][0]["purpose"] == "plan"
    # the plan was asked with a JSON schema named Plan
    body = [r["body"] for r in env["mock"].requests() if r.get("rule") == "plan-pass-plan"][0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "Plan"


def test_model_plan_catches_a_wrong_value_and_the_correction_is_verified_again(env):
    resp, rep = ask(env, "plans", "[case:plan-fail] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    # the model's step (its own expression 120 / 1.5) may fail the first draft and drive the
    # re-ask, but its pass on the new draft is the model's word alone (docs/design.md "Asymmetric
    # trust"): the corrected draft is returned as `unverified`, never `corrected`
    assert rep["status"] == "unverified", rep
    assert [(c["outcome"], c["basis"]) for c in planner_checks(rep)] == [("pass", "model")]
    # what the first draft got wrong, and the round that fixed it
    assert [c["claim"] for c in rep["corrected_checks"]] == ["its average speed is 90 km/h"]
    assert rep["corrected_checks"][0]["outcome"] == "fail" and rep["corrected_checks"][0]["expected"] == "80"
    assert rep["corrected_checks"][0]["basis"] == "model"
    assert rep["rounds"][0]["status"] == "unverified"
    fix = [r["body"] for r in env["mock"].requests() if r.get("rule") == "plan-fail-fix"]
    assert len(fix) == 1 and "120 / 1.5" in fix[0]["messages"][-1]["content"]
    assert len(rules_hit(env["mock"], "plan-fail-plan")) == 2        # each draft planned once
    # both plans are in the request's cost, not only the last draft's
    assert rep["cost"]["verifier_calls"] == 2 and len(rep["verifier_model"]["calls"]) == 2


def test_malformed_plan_is_an_error_after_one_repair_and_the_answer_still_arrives(env):
    resp, rep = ask(env, "plans", "[case:plan-malformed] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    assert len(rules_hit(env["mock"], "plan-malformed-plan")) == 2        # the plan, one repair
    pc = planner_checks(rep)
    assert pc and all(c["outcome"] == "error" for c in pc), rep
    assert rep["status"] != "passed"


def test_unknown_tool_never_runs_and_never_passes(env):
    resp, rep = ask(env, "plans", "[case:plan-tool] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    pc = planner_checks(rep)
    assert pc and all(c["outcome"] in ("error", "unknown") for c in pc), rep
    assert rep["status"] not in ("passed", "failed")


def test_a_step_whose_claim_is_not_in_the_draft_is_rejected(env):
    resp, rep = ask(env, "plans", "[case:plan-claim] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT       # nothing was "corrected" on a made-up claim
    pc = planner_checks(rep)
    assert pc and all(c["outcome"] in ("unknown", "error") for c in pc), rep
    assert rep["status"] not in ("passed", "failed", "corrected")


def test_a_planner_that_times_out_leaves_the_answer_and_an_unknown(env):
    resp, rep = ask(env, "plans-fast", "[case:plan-slow] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    pc = planner_checks(rep)
    assert pc and all(c["outcome"] in ("unknown", "error") for c in pc), rep
    assert rep["status"] != "passed"


def test_a_planner_over_the_request_budget_is_unknown_and_makes_no_call(env):
    resp, rep = ask(env, "plans-nobudget", "[case:plan-pass] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    assert not rules_hit(env["mock"], "plan-pass-plan")
    pc = planner_checks(rep)
    assert pc and all(c["outcome"] == "unknown" for c in pc), rep


def test_verification_model_on_another_upstream_with_its_own_key(env):
    resp, rep = ask(env, "plans-other", "[case:other-upstream] How fast is the train on average?")
    assert resp.choices[0].message.content == PLAN_DRAFT
    assert [c["outcome"] for c in planner_checks(rep)] == ["pass"], rep
    assert not rules_hit(env["mock"], "other-upstream-plan")          # the client's upstream planned nothing
    cheap = env["cheap"].requests()
    assert len(cheap) == 1 and cheap[0]["body"]["model"] == "cheap-verifier"
    assert cheap[0]["headers"].get("authorization") == "Bearer sk-cheap"
    assert rep["verifier_model"]["model"] == "cheap-verifier"


def test_data_cleaning_case_model_builds_a_harness_with_constructed_data(env):
    why = sandbox_with_pandas()
    if why:
        missing(why)
    resp, rep = ask(env, "plans-unexplained", PANDAS_Q)
    # the failing draft is corrected, but the corrected code's own checks are all `unknown` (a
    # run_python harness is never a pass: it reports from inside the checked process): the
    # answer is `unverified`, not `corrected` (docs/design.md "Asymmetric trust"), with what was
    # wrong still listed
    assert rep["status"] == "unverified", rep
    assert rep["correction"]["stop_reason"] == "unverified" and rep["corrected_checks"]
    assert not [c for c in rep["checks"] if c["outcome"] in ("pass", "fail")]
    assert resp.choices[0].message.content == PANDAS_GOOD
    fix = [r["body"] for r in env["mock"].requests() if r.get("rule") == "pandas-plan-fix"]
    assert len(fix) == 1 and "truth value" in fix[0]["messages"][-1]["content"].lower()
    assert len(rules_hit(env["mock"], "pandas-plan-plan")) >= 1
