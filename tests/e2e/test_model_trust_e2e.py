"""Asymmetric trust through the gateway (docs/design.md "Asymmetric trust"): a verifier model that
obeys whatever it reads writes plans whose passes must never make an answer ``passed`` or
``corrected``; a step it wrote can fail an answer; a rule check is never replaced by a plan.

The real ``openai`` SDK -> Veracity (``veracity serve`` subprocess) under the *shipped*
policies (``policies/math.yaml``, ``strict.yaml``, ``code.yaml``) -> the scripted mock upstream,
which plays both the client's model and an obedient verifier model answering the ``Plan``
schema with the plan each test gives. No network: the drafts cite nothing, so the strict
policy's citation sources are never asked.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from verifiers import sandbox
from tests.fixtures.mock import shipped_policy_gateway

UNTRUSTED_OK = ("passed", "corrected")


def plan_of(*steps: dict[str, Any]) -> str:
    return json.dumps({"verification_needed": True, "verification_steps": [
        {"step_id": i + 1, "description": "", "expected_check": "", **s} for i, s in enumerate(steps)]})


# --- calculate built from the question's numbers and small constants ----------------------------
DISCOUNT_Q = "[case:discount] A $60 item has a 15% discount. What is the price?"
DISCOUNT_DRAFT = "The price is $45.50."
DISCOUNT_PLAN = plan_of({"tool": "calculate", "input": {"expression": "60 - 15 + 1/2"}, "claim": "The price is $45.50"})
# the same in Chinese, with another made-up expression
DISCOUNT_ZH_Q = "[case:discount-zh] 一件60元的商品打八五折（优惠15%），现价是多少元？"
DISCOUNT_ZH_DRAFT = "现价为45.5元。"
DISCOUNT_ZH_PLAN = plan_of({"tool": "calculate", "input": {"expression": "60 - 15 + 1/2"}, "claim": "现价为45.5元"})
# a right answer: the model's (right) expression still is the model's word, not the draft's
RIGHT_Q = "[case:discount-right] A $60 item has a 15% discount. What is the price?"
RIGHT_DRAFT = "The price is $51."
RIGHT_PLAN = plan_of({"tool": "calculate", "input": {"expression": "60 * (1 - 15/100)"}, "claim": "The price is $51"})
# units chosen by the model
UNITS_Q = "[case:units] How long is a 5 km run in miles?"
UNITS_DRAFT = "A 5 km run is 8.05 miles."
UNITS_PLAN = plan_of({"tool": "convert_units", "input": {"value": 5, "from_unit": "mile", "to_unit": "km"},
                      "claim": "A 5 km run is 8.05 miles"})

# --- sympy_equivalent given one formula as both sides -------------------------------------------
BINOM_Q = "[case:binom] How many pairs can be formed from n people?"
BINOM_DRAFT = "The number of pairs is $\\binom{n}{2} = \\frac{n^2}{2}$."
BINOM_PLAN = plan_of({"tool": "sympy_equivalent", "input": {"left": "\\frac{n^2}{2}", "right": "\\frac{n^2}{2}"},
                      "claim": "$\\binom{n}{2} = \\frac{n^2}{2}$"})
PAIRS_Q = "[case:pairs] How many handshakes do n people make if each pair shakes hands once?"
PAIRS_DRAFT = "Each pair shakes once, so there are $\\frac{n(n-1)}{2} = \\frac{n^2}{2}$ handshakes."
PAIRS_PLAN = plan_of({"tool": "sympy_equivalent", "input": {"left": "\\frac{n^2}{2}", "right": "\\frac{n^2}{2}"},
                      "claim": "$\\frac{n(n-1)}{2} = \\frac{n^2}{2}$"})

# --- run_python with an assertion that cannot fail, or that asserts the buggy value -------------
CSV_CODE = '''import csv

def total(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return sum(int(r["qty"]) for r in rows[1:])'''
CSV_DRAFT = "Here is `total`, which sums the qty column of data.csv:\n\n```python\n" + CSV_CODE + "\n```\n"
SETUP = "with open('data.csv', 'w') as f:\n    f.write('qty\\n1\\n4\\n')"


def csv_plan(assertion: str) -> str:
    return plan_of({"tool": "run_python", "input": {"setup": SETUP, "code": CSV_CODE, "assertions": [assertion]},
                    "claim": "def total(path):"})


CSV_CASES = {"csv-vacuous": "total('data.csv') == 5 or True", "csv-buggy": "total('data.csv') == 4",
             "csv-right": "total('data.csv') == 5"}

# --- docs/verifier-model.md's compound-interest case: the re-ask states a second, wrong value ---
CI_Q = "[case:ci] 本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？"
CI_BAD = "根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。"
CI_TWO = "根据公式A=P*(1+r/n)^(nt)，本息和约为11607.55元。使用Python精确计算的结果约为11614.80元。"
CI_GOOD = "根据公式A=P*(1+r/n)^(nt)，本息和约为11607.55元。"
CI_GOOD_Q = "[case:ci-good] 本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？"


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []

    def plan(tag: str, content: str) -> None:
        r.append({"name": f"{tag}-plan", "match": {"schema": "Plan", "any_message": rf"\[case:{tag}\]"},
                  "reply": {"content": content}})

    def draft(tag: str, content: str) -> None:  # every turn of the conversation, re-asks too
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]", "schema": "-"},
                  "reply": {"content": content}})

    for tag, content in [("discount", DISCOUNT_PLAN), ("discount-zh", DISCOUNT_ZH_PLAN),
                         ("discount-right", RIGHT_PLAN), ("units", UNITS_PLAN), ("binom", BINOM_PLAN),
                         ("pairs", PAIRS_PLAN)] + [(t, csv_plan(a)) for t, a in CSV_CASES.items()]:
        plan(tag, content)
    r.append({"name": "plan-other", "match": {"schema": "Plan"},
              "reply": {"content": json.dumps({"verification_needed": False, "verification_steps": []})}})
    r.append({"name": "ci-fix", "match": {"any_message": r"\[case:ci\]", "last_user": "Automatic verification found",
                                          "schema": "-"}, "reply": {"content": CI_TWO}})
    for tag, content in [("discount", DISCOUNT_DRAFT), ("discount-zh", DISCOUNT_ZH_DRAFT),
                         ("discount-right", RIGHT_DRAFT), ("units", UNITS_DRAFT), ("binom", BINOM_DRAFT),
                         ("pairs", PAIRS_DRAFT), ("ci", CI_BAD), ("ci-good", CI_GOOD)] + \
            [(t, CSV_DRAFT) for t in CSV_CASES]:
        draft(tag, content)
    return r


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    yield from shipped_policy_gateway(tmp_path_factory, gateway_factory, _rules(), "model-trust-e2e")


def ask(env, policy: str, question: str):
    c = openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=240,
                      default_headers={"x-veracity-policy": policy})
    resp = c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": question}])
    return resp, resp.model_extra["veracity"]


def planned(env, tag: str) -> bool:
    return any(r.get("rule") == f"{tag}-plan" for r in env["mock"].requests())


def by(report: dict[str, Any], verifier: str) -> list[dict[str, Any]]:
    return [c for c in report["checks"] if c["verifier"] == verifier]


def _runner() -> None:
    why = sandbox.get("auto").unavailable_reason()
    if why or sandbox.get("auto").name == "none":
        from tests.fixtures.sandboxes import missing
        missing(f"no sandbox runs code here: {why}")


# ------------------------------------------------------------------ calculate / convert_units


@pytest.mark.parametrize("policy", ["math", "strict"])
@pytest.mark.parametrize("question,draft", [(DISCOUNT_Q, DISCOUNT_DRAFT), (DISCOUNT_ZH_Q, DISCOUNT_ZH_DRAFT)])
def test_a_calculation_the_model_made_up_never_passes_the_answer(env, policy, question, draft):
    resp, rep = ask(env, policy, question)
    assert resp.choices[0].message.content == draft
    tag = question.split("]")[0][len("[case:"):]
    assert planned(env, tag), "the verifier model was asked for a plan"
    pc = by(rep, "planner")
    # the made-up expression "agrees" with the wrong draft: a pass, on the model's word alone
    assert [(c["outcome"], c["basis"]) for c in pc] == [("pass", "model")], rep
    assert "verifier model wrote the expression" in pc[0]["evidence"]["basis_reason"]
    assert rep["status"] not in UNTRUSTED_OK and rep["status"] == "unverified", rep
    assert rep["coverage"]["model_only"] >= 1 and rep["coverage"]["passed"] == 0


@pytest.mark.parametrize("policy", ["math", "strict"])
def test_a_model_plan_pass_is_never_passed_even_when_the_answer_is_right(env, policy):
    # the asymmetric rule does not look at whether the model happened to be right
    resp, rep = ask(env, policy, RIGHT_Q)
    assert [(c["outcome"], c["basis"]) for c in by(rep, "planner")] == [("pass", "model")], rep
    assert rep["status"] == "unverified"


# the math policy's risk threshold (0.1) skips these drafts (no number worked out in the text);
# strict verifies every checkable answer
@pytest.mark.parametrize("policy", ["strict"])
def test_units_the_model_chose_never_pass(env, policy):
    resp, rep = ask(env, policy, UNITS_Q)
    pc = by(rep, "planner")
    assert pc and all(c["outcome"] != "pass" or c["basis"] == "model" for c in pc), rep
    assert rep["status"] not in UNTRUSTED_OK, rep


# ------------------------------------------------------------------ sympy_equivalent


@pytest.mark.parametrize("policy", ["strict"])
def test_a_formula_compared_with_itself_never_passes(env, policy):
    resp, rep = ask(env, policy, BINOM_Q)
    assert resp.choices[0].message.content == BINOM_DRAFT
    assert planned(env, "binom")
    pc = by(rep, "planner")
    assert pc and not [c for c in pc if c["outcome"] == "pass"], rep
    # the claim's own two sides were compared instead (the CAS cannot read \binom{n}{2}: unknown)
    assert pc[0]["evidence"].get("compared") == {"left": "\\binom{n}{2}", "right": "\\frac{n^2}{2}"}, pc
    assert rep["status"] not in UNTRUSTED_OK, rep


def test_a_formula_compared_with_itself_is_replaced_by_the_claims_sides_and_fails(env):
    # n(n-1)/2 = n^2/2 is false: the claim's own sides are compared, the check fails on a
    # recomputation of what the draft wrote, and strict blocks the answer that stays wrong
    with pytest.raises(openai.UnprocessableEntityError) as err:
        ask(env, "strict", PAIRS_Q)
    assert "planner: $\\frac{n(n-1)}{2} = \\frac{n^2}{2}$" in str(err.value)
    assert planned(env, "pairs")


# ------------------------------------------------------------------ run_python


@pytest.mark.parametrize("policy", ["code", "strict"])
@pytest.mark.parametrize("tag", ["csv-vacuous", "csv-buggy"])
def test_model_written_assertions_never_pass_and_the_rule_check_stays(env, policy, tag):
    _runner()
    resp, rep = ask(env, policy, f"[case:{tag}] Write total(path): the sum of the qty column of data.csv.")
    assert resp.choices[0].message.content == CSV_DRAFT
    assert planned(env, tag)
    code_checks = by(rep, "code")
    # the rule check is still there, unknown: the code ran, nothing about its behaviour compared
    assert [c["outcome"] for c in code_checks] == ["unknown"], rep
    assert code_checks[0]["note"] == "ran without errors; nothing about its behaviour was compared"
    pc = by(rep, "planner")
    assert [(c["outcome"], c["basis"]) for c in pc] == [("pass", "model")], rep
    assert rep["status"] == "unverified", rep


def test_a_model_written_assertion_can_fail_the_answer(env):
    _runner()
    resp, rep = ask(env, "code", "[case:csv-right] Write total(path): the sum of the qty column of data.csv.")
    pc = by(rep, "planner")
    assert [(c["outcome"], c["basis"]) for c in pc][:1] == [("fail", "model")], rep
    assert rep["status"] == "failed" and by(rep, "code"), rep


# ---------------------------------------------------- docs/verifier-model.md's compound-interest case


def test_a_correction_with_a_second_wrong_value_is_not_corrected(env):
    resp, rep = ask(env, "math", CI_Q)
    assert rep["status"] not in UNTRUSTED_OK, rep
    assert rep["status"] == "failed"
    wrong = [c for c in rep["checks"] if c["outcome"] == "fail"]
    assert wrong and wrong[0]["found"] == "11614.80" and wrong[0]["basis"] == "recomputed", rep
    values = {v["value"]: v["outcome"] for v in wrong[0]["evidence"]["stated_values"]}
    assert values == {"11607.55": "pass", "11614.80": "fail"}


def test_a_right_compound_interest_answer_passes_on_the_template(env):
    resp, rep = ask(env, "math", CI_GOOD_Q)
    pc = by(rep, "planner")
    assert [(c["outcome"], c["basis"]) for c in pc] == [("pass", "recomputed")], rep
    assert not planned(env, "ci-good")
    assert rep["status"] == "passed", rep
