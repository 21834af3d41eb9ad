"""The AMTFV planner (docs/verifier-model.md): template plans, model plans from a scripted verifier model, the
guard against verification hallucination, the executor, run_python in a real sandbox, and the
planner through ``verifiers.run.run``.

The run_python tests use the docker backend when available, else bwrap; they are skipped when
neither can run here, except under ``VERACITY_CI=1`` / ``VERACITY_REQUIRE_SANDBOX`` (then a
missing sandbox fails, as in tests/verifiers/test_code.py).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.fixtures.sandboxes import FAST, first_box, require_pandas
from verifiers import arithmetic, planner, sandbox
from verifiers.model import ScriptedModel
from verifiers.run import run

CI_Q = "本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？"
EN_Q = "If you invest $10,000 at 5% compounded quarterly for 3 years, what is the final amount?"
PRODUCT_Q = "What is the product of 97/117/0.6534725/0.27613576234/0.6734576?"
SERIES_Q = "What is 1/1! + 1/2! + … + 1/10!?"


def check(answer, question=None, **kw):
    return asyncio.run(planner.acheck(answer, question, **kw))


def outcomes(out):
    return [c.outcome for c in out.checks]


# --- template plans (no model call) ----------------------------------------------------------

@pytest.mark.parametrize("question,draft,want,expected", [
    (CI_Q, "根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。", "fail", "11607.55"),
    (CI_Q, "根据公式A=P*(1+r/n)^(nt)计算得约为11607.55元。", "pass", "11607.55"),
    (EN_Q, "The final amount is about $11,608.92.", "fail", "11607.55"),
    (EN_Q, "A = 10000(1 + 0.05/4)^12 ≈ $11,607.55", "pass", "11607.55"),
    ("本金5000元，年利率4%，按月复利，存2年，到期本息和是多少？", "到期本息和约为5415.71元。", "pass", "5415.71"),
    ("You deposit $2,000 at 6% interest compounded annually for 5 years. How much interest is earned?",
     "The interest earned is $676.45.", "pass", "676.45"),
    ("You deposit $2,000 at 6% simple interest for 5 years. What is the total amount?",
     "The total amount is $2,600.", "pass", "2600"),
    (PRODUCT_Q, "approximately 0.000191", "fail", "6.822219"),
    (PRODUCT_Q, "The product is approximately 6.82.", "pass", "6.82"),
    (SERIES_Q, "approximately 1.7182818284590455", "fail", "1.7182818011463845"),
    (SERIES_Q, "It is approximately 1.7182818.", "pass", None),
    ("计算 2^10 的值", "结果为1000", "fail", "1024"),
    ("143287*534156=?", "76537610772", "pass", "76537610772"),
    ("12 * (3 + 4) = ?", "The answer is 74.", "fail", "84"),
    ("Compute $\\frac{20+16 \\times 20}{20 \\times 16}$.", "So the value is $\\boxed{\\frac{17}{15}}$.", "fail", None),
])
def test_templates_detect_and_pass(question, draft, want, expected):
    out = check(draft, question)
    assert out.plan_source == "template" and out.error is None
    [c] = out.checks
    assert c.outcome == want and c.verifier == "planner"
    if expected is not None:
        assert c.expected == expected
    assert c.evidence["tool"] == "calculate" and c.evidence["plan_source"] == "template"
    assert draft[c.span[0]:c.span[1]] == c.claim


@pytest.mark.parametrize("question,draft", [
    (CI_Q, "A = 10000 × (1 + 0.05/4)^(4×3) = 10000 × 1.16075 ≈ 11607.55元。所以最终本息和约为11607.55元。"),
    (CI_Q, "最终本息和约为11607.55元，其中利息为1607.55元。"),
    (EN_Q, "You'll have about $11,608."),
    (EN_Q, "Year 1: $10,509.45, Year 2: $11,044.86, Year 3: $11,607.55"),
    (PRODUCT_Q, "≈ 6.82, i.e. 6.822 to three decimals"),
    (PRODUCT_Q, "97/117 = 0.829, then /0.6534725 = 1.2687, /0.27613576234 = 4.5945, /0.6734576 = 6.8222.\n\n"
                "So the product is about 6.82."),
])
def test_correct_drafts_in_other_shapes_pass(question, draft):
    out = check(draft, question)
    assert outcomes(out) == ["pass"]


def test_compound_interest_names_the_numbers():
    out = check("根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。", CI_Q)
    c = out.checks[0]
    assert c.found == "11608.92" and "10000" in c.evidence["input"]["expression"]
    assert c.evidence["output"]["value"].startswith("11607.545")


def test_rounded_growth_factor_is_unknown_not_fail():
    # (1.0125)^12 rounded to 1.1608 -> 11608.00: an honest rounding, not a wrong answer
    out = check("A = 10000 × 1.1608 = 11608.00元", CI_Q)
    assert outcomes(out) == ["unknown"]


@pytest.mark.parametrize("question,draft", [
    ("Natalia sold clips to 48 of her friends in April, and then she sold half as many in May. How many?",
     "She sold 48/2 = 24 in May, so 72 in total."),
    ("What is 1/2 + 1/4 + 1/8 + ...?", "The sum is 1."),  # infinite series: no template
    ("What is 1 + 2 + ... + 10 + 3?", "58"),  # not one progression
    ("What is the value of $\\sum_{k=1}^{10} k$?", "55"),
    ("Find 2+2 and explain why.", "It is 5."),  # words after the expression: not the expression question
    ("What is 1/2 + 1/4 + ... + 1/2^10?", "About 1."),  # the progression is in the exponent: no template
    (CI_Q, "我不知道。"),
    # two readings (a right value and a later wrong one): neither a pass nor a fail
    (EN_Q, "Total after 3 years: $11,607.55 (compared to $11,500 with simple interest)"),
    ("12 * (3 + 4) = ?", "12 * 7 gives 84, so the answer is 74."),
])
def test_templates_do_not_fire_without_a_clear_reading(question, draft):
    assert check(draft, question).plan_source is None


# --- model plans -------------------------------------------------------------------------------

APPLES_Q = "Tom buys 17 boxes with 23 apples in each box. How many apples does he have?"


def plan(*steps, needed=True):
    return {"verification_needed": needed, "verification_steps": [
        {"step_id": i + 1, "description": "", "expected_check": "", **s} for i, s in enumerate(steps)]}


def calc(expr, claim):
    return {"tool": "calculate", "input": {"expression": expr}, "claim": claim}


def scripted(answer, **kw):
    return ScriptedModel([(lambda m, name, purpose: name == "Plan", answer)], **kw)


def test_model_plan_fail_and_pass_and_prompt_shape():
    m = scripted(plan(calc("17 * 23", "He has 401 apples")))
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True)
    assert out.plan_source == "model" and outcomes(out) == ["fail"]
    c = out.checks[0]
    assert (c.expected, c.found) == ("391", "401") and c.evidence["tool"] == "calculate"
    assert c.evidence["output"]["value"] == "391" and c.evidence["plan_source"] == "model"
    seen = m.seen[0]
    assert seen["purpose"] == "plan" and seen["schema_name"] == "Plan"
    system = seen["messages"][0]["content"]
    assert seen["messages"][0]["role"] == "system" and "rigorous verification expert" in system
    last = seen["messages"][-1]["content"]
    assert APPLES_Q in last and "He has 401 apples." in last and '"calculate"' in last
    assert "run_python" not in last and "search_facts" not in last  # not offered without a sandbox / search

    m = scripted(plan(calc("17 * 23", "He has 391 apples")))
    assert outcomes(check("He has 391 apples.", APPLES_Q, model=m, use_model=True)) == ["pass"]


def test_verification_not_needed_gives_no_checks():
    m = scripted(plan(needed=False))
    out = check("Paris is the capital of France.", "Capital of France?", model=m, use_model=True)
    assert out.checks == [] and out.plan_source == "model" and out.plan["verification_needed"] is False


def test_malformed_plan_after_one_repair_is_an_error():
    m = scripted(ScriptedModel.seq("I think it is fine", {"verification_needed": "maybe"}))
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True)
    assert out.checks == [] and out.error.startswith("invalid") and len(m.calls) == 2


def test_repaired_plan_is_executed():
    m = scripted(ScriptedModel.seq("no json here", plan(calc("17*23", "401 apples"))))
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True)
    assert outcomes(out) == ["fail"] and out.plan["repaired"] is True


def test_unknown_tool_is_rejected_with_an_error_check():
    m = scripted(plan({"tool": "wolfram", "input": {"q": "17*23"}, "claim": "401 apples"}))
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True)
    [c] = out.checks
    assert c.outcome == "error" and "unknown tool" in c.note


def test_claim_not_in_draft_is_rejected_never_passed():
    m = scripted(plan(calc("17 * 23", "He has 391 apples")))  # the planner "corrects" the claim
    [c] = check("He has 401 apples.", APPLES_Q, model=m, use_model=True).checks
    assert c.outcome == "unknown" and "claim not in draft" in c.note


@pytest.mark.parametrize("expr,why", [
    ("401", "computes nothing"),
    ("401 * 1", "restates the claim"),
    ("17 * 29", "not in the question or draft"),  # 29 is the planner's own number
])
def test_restated_or_invented_inputs_are_rejected(expr, why):
    m = scripted(plan(calc(expr, "He has 401 apples")))
    [c] = check("He has 401 apples.", APPLES_Q, model=m, use_model=True).checks
    assert c.outcome == "unknown" and why in c.note


def test_claim_with_several_unmarked_numbers_is_not_guessed():
    m = scripted(plan(calc("17 * 23", "401 apples and 5 pears")))
    [c] = check("He has 401 apples and 5 pears.", APPLES_Q, model=m, use_model=True).checks
    assert c.outcome == "unknown" and "several numbers" in c.note


@pytest.mark.parametrize("draft,want", [("He has about 390 apples.", "pass"), ("He has about 380 apples.", "fail"),
                                        ("He has 390 apples.", "fail")])
def test_approximate_claims_use_the_stated_precision(draft, want):
    m = scripted(plan(calc("17 * 23", draft.rstrip("."))))
    assert outcomes(check(draft, APPLES_Q, model=m, use_model=True)) == [want]


def test_slow_tool_leaves_the_remaining_steps_unknown():
    async def slow(claim):
        await asyncio.sleep(5)
        return {"verdict": "supported"}

    tools = planner.Toolbox(search_facts=slow)
    step = {"tool": "search_facts", "input": {"claim": "Paris is in France"}, "claim": "Paris is in France"}
    m = scripted(plan(step, calc("17 * 23", "391 apples")))
    out = check("Paris is in France. He has 391 apples.", APPLES_Q, model=m, use_model=True, tools=tools,
                deadline_s=0.3)
    assert outcomes(out) == ["unknown", "unknown"] and all("deadline" in c.note for c in out.checks)


def test_short_circuit_on_first_failure():
    m = scripted(plan(calc("17 * 23", "401 apples"), calc("401 / 17", "23.6 apples per box")))
    out = check("He has 401 apples, 23.6 apples per box.", APPLES_Q, model=m, use_model=True)
    assert outcomes(out) == ["fail"]
    assert [e["status"] for e in out.plan["executed"]] == ["checked", "not_run"]


def test_max_steps_drops_later_steps():
    m = scripted(plan(calc("17 * 23", "391 apples"), calc("17 + 23", "40 things")))
    out = check("He has 391 apples and 40 things.", APPLES_Q, model=m, use_model=True, max_steps=1)
    assert outcomes(out) == ["pass"] and out.plan["executed"][-1]["reason"] == "max_steps"


def test_budget_spent_is_one_unknown_check():
    m = scripted(plan(calc("17 * 23", "401 apples")), max_calls=0)
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True)
    [c] = out.checks
    assert c.outcome == "unknown" and "unavailable" in c.note and out.error is None


def test_slow_planner_hits_the_deadline():
    m = scripted(plan(calc("17 * 23", "401 apples")), delay_s=2.0)
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True, deadline_s=0.2)
    [c] = out.checks
    assert c.outcome == "unknown" and "deadline" in c.note


def test_model_error_is_an_error_not_a_crash():
    from verifiers.model import ModelError

    m = scripted(ModelError("upstream 500"))
    out = check("He has 401 apples.", APPLES_Q, model=m, use_model=True)
    assert out.checks == [] and out.error.startswith("model_error")


def test_duplicate_of_a_rule_check_is_merged():
    draft = "So he has 17 * 23 = 401 apples."
    rules = arithmetic.check(draft, APPLES_Q)
    assert [c.outcome for c in rules] == ["fail"]
    m = scripted(plan(calc("17 * 23", "17 * 23 = 401")))
    out = check(draft, APPLES_Q, model=m, use_model=True, rule_checks=rules)
    assert out.checks == [] and out.plan["executed"][0]["status"] == "merged"


def test_template_runs_before_the_model_and_no_call_is_made():
    m = scripted(plan(needed=False))
    out = check("approximately 0.000191", PRODUCT_Q, model=m, use_model=True)
    assert out.plan_source == "template" and outcomes(out) == ["fail"] and m.calls == []


def test_no_model_no_plan():
    out = check("He has 401 apples.", APPLES_Q, model=None, use_model=True)
    assert out.checks == [] and out.plan_source is None


# --- the other tools -------------------------------------------------------------------------

@pytest.mark.parametrize("draft,want", [("5 km is about 3.11 miles.", "pass"), ("5 km is about 3.5 miles.", "fail")])
def test_convert_units(draft, want):
    step = {"tool": "convert_units", "input": {"value": 5, "from_unit": "km", "to_unit": "mile"},
            "claim": draft.rstrip(".")}
    out = check(draft, "How far is 5 km in miles?", model=scripted(plan(step)), use_model=True)
    assert outcomes(out) == [want]


@pytest.mark.parametrize("draft,left,right,want", [
    ("Expanding, (x+1)^2 = x^2 + 2x + 1.", "(x+1)^2", "x^2 + 2x + 1", "pass"),
    ("Expanding, (x+1)^2 = x^2 + 1.", "(x+1)^2", "x^2 + 1", "fail"),
    ("Expanding, (x+1)^2 = x^2 + 1.", "(x+1)^2", "x^2 + 2x + 1", "unknown"),  # right side is the planner's
])
def test_sympy_equivalent_compares_the_drafts_own_formulas(draft, left, right, want):
    step = {"tool": "sympy_equivalent", "input": {"left": left, "right": right}, "claim": draft[11:].rstrip(".")}
    out = check(draft, "Expand (x+1)^2.", model=scripted(plan(step)), use_model=True)
    assert outcomes(out) == [want]


def test_search_facts_is_offered_only_when_set_and_its_verdict_is_used():
    assert "search_facts" not in planner.Toolbox().names()
    asked = []

    async def search(claim):
        asked.append(claim)
        return {"verdict": "refuted", "evidence": "Canberra is the capital", "note": "contradicted by source"}

    tools = planner.Toolbox(search_facts=search)
    assert "search_facts" in tools.names()
    step = {"tool": "search_facts", "input": {"claim": "Sydney is the capital of Australia"},
            "claim": "Sydney is the capital of Australia"}
    out = check("Sydney is the capital of Australia.", "Capital of Australia?", model=scripted(plan(step)),
                use_model=True, tools=tools)
    assert outcomes(out) == ["fail"] and asked == ["Sydney is the capital of Australia"]


def test_check_citation_on_one_reference_from_a_local_index(tmp_path):
    from verifiers.citations import build_index
    from verifiers.citations._records import Record

    db = str(tmp_path / "lib.sqlite3")
    build_index([], db, records=[Record(
        title="Deep Residual Learning for Image Recognition", year=2016,
        authors=["Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun"],
        venue="IEEE Conference on Computer Vision and Pattern Recognition", doi="10.1109/CVPR.2016.90")])
    tools = planner.Toolbox(citation_sources={"use": [], "local_index": {"path": db}, "cache": {"backend": "none"}})
    assert "check_citation" in tools.names() and "check_citation" not in planner.Toolbox().names()
    ref = ("He, K., & Sun, J. (2019). Deep Residual Learning for Image Recognition. Nature, 12(3), 45-67. "
           "https://doi.org/10.1038/s41586-019-9999-9")
    draft = "ResNets were introduced in " + ref
    step = {"tool": "check_citation", "input": {"reference": ref}, "claim": ref}
    [c] = check(draft, "Who introduced ResNets?", model=scripted(plan(step)), use_model=True, tools=tools).checks
    assert c.outcome == "fail" and c.evidence["output"]["status"] == "LIKELY_HALLUCINATION"
    assert c.span == (draft.index(ref), len(draft))


def test_run_python_not_offered_without_a_working_sandbox():
    tools = planner.Toolbox(sandbox=sandbox.get("none"))
    assert "run_python" not in tools.names()
    step = {"tool": "run_python", "input": {"code": "x = 1", "assertions": []}, "claim": "x = 1"}
    [c] = check("```python\nx = 1\n```", "Set x.", model=scripted(plan(step)), use_model=True, tools=tools).checks
    assert c.outcome == "error" and "unknown tool" in c.note


# --- run_python in a real sandbox ---------------------------------------------------------------




@pytest.fixture(scope="module")
def box():
    yield from first_box(FAST)


@pytest.fixture(scope="module")
def pandas_box(box):
    return require_pandas(box)


DATA_Q = "Clean data.csv: keep the rows whose Age is between 0 and 120, using pandas."
DATA_DRAFT = ("```python\nimport pandas as pd\ndf = pd.read_csv(\"data.csv\")\n"
              "df = df[(df['Age'] > 0) and (df['Age'] < 120)]\n```")
SETUP = "import pandas as pd\ndf = pd.DataFrame({'Age': [25, -5, 150, 30]})"


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_run_python_pandas_truth_value_error_fails(pandas_box):
    step = {"tool": "run_python", "claim": "df = df[(df['Age'] > 0) and (df['Age'] < 120)]",
            "input": {"setup": SETUP, "code": "df = df[(df['Age'] > 0) and (df['Age'] < 120)]",
                      "assertions": ["list(df['Age']) == [25, 30]"]}}
    tools = planner.Toolbox(sandbox=pandas_box)
    out = check(DATA_DRAFT, DATA_Q, model=scripted(plan(step)), use_model=True, tools=tools, deadline_s=60)
    [c] = out.checks
    assert c.outcome == "fail" and "truth value of a Series is ambiguous" in c.expected
    assert c.evidence["output"]["code"]["exception"]["type"] == "ValueError"


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_run_python_correct_filter_passes_and_foreign_code_is_rejected(pandas_box):
    good = DATA_DRAFT.replace(" and ", " & ")
    line = "df = df[(df['Age'] > 0) & (df['Age'] < 120)]"
    step = {"tool": "run_python", "claim": line,
            "input": {"setup": SETUP, "code": line, "assertions": ["list(df['Age']) == [25, 30]"]}}
    tools = planner.Toolbox(sandbox=pandas_box)
    out = check(good, DATA_Q, model=scripted(plan(step)), use_model=True, tools=tools, deadline_s=60)
    # the right filter runs and its assertion holds, judged in the gateway on a run the checked
    # code could not have written (docs/design.md "A verdict rests on what the checked content cannot write"):
    # a pass
    assert outcomes(out) == ["pass"] and "assertion(s) hold" in out.checks[0].note
    # the planner may not swap in its own (fixed) code for the draft's
    out = check(DATA_DRAFT, DATA_Q, model=scripted(plan({**step, "claim": "df = pd.read_csv(\"data.csv\")"})),
                use_model=True, tools=tools, deadline_s=60)
    [c] = out.checks
    assert c.outcome == "unknown" and "code line not in the draft" in c.note


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.parametrize("setup,assertions,why", [
    (SETUP + "\nimport pandas\npandas.DataFrame.__getitem__ = lambda self, k: self", ["len(df) == 4"], "setup may"),
    (SETUP + "\ndef bool_(x):\n    return True", ["len(df) == 2"], "setup may only build data"),
    (SETUP, ["True"], "must be about the draft's code"),
])
def test_run_python_harness_cannot_patch_the_code_into_passing(pandas_box, setup, assertions, why):
    line = "df = df[(df['Age'] > 0) and (df['Age'] < 120)]"
    step = {"tool": "run_python", "claim": line, "input": {"setup": setup, "code": line, "assertions": assertions}}
    tools = planner.Toolbox(sandbox=pandas_box)
    [c] = check(DATA_DRAFT, DATA_Q, model=scripted(plan(step)), use_model=True, tools=tools, deadline_s=60).checks
    assert c.outcome == "unknown" and why in c.note


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.parametrize("line", ["import os; os._exit(0)", "import sys; sys.exit(0)",
                                  "import sys; f = sys._getframe()"])
def test_run_python_code_that_ends_early_or_reaches_the_harness_is_never_a_pass(box, line):
    """docs/design.md "A verdict rests on what the checked content cannot write": the draft's
    code ends the run before the assertions (which would fail) or
    reaches for the harness: unknown, not the pass a forged report would give."""
    draft = f"```python\nx = 1\n{line}\n```"
    step = {"tool": "run_python", "claim": line, "input": {"setup": "x = 1", "code": line, "assertions": ["x == 2"]}}
    tools = planner.Toolbox(sandbox=box)
    [c] = check(draft, "Exit.", model=scripted(plan(step)), use_model=True, tools=tools, deadline_s=60).checks
    assert c.outcome in ("unknown", "fail"), c.note


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_run_python_harness_that_hangs_is_unknown(box):
    draft = "```python\nwhile True:\n    pass\n```"
    step = {"tool": "run_python", "claim": "while True:", "input": {"code": "while True:\n    pass"}}
    tools = planner.Toolbox(sandbox=box, python_timeout_s=3)
    [c] = check(draft, "Loop.", model=scripted(plan(step)), use_model=True, tools=tools, deadline_s=60).checks
    assert c.outcome == "unknown"


# --- through verifiers.run ------------------------------------------------------------------------

def test_through_run_templates_and_model_plans():
    rep = asyncio.run(run("根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。", ["arithmetic", "planner"], question=CI_Q))
    assert rep.status == "failed" and rep.extra["plan_source"] == "template"
    assert [c.verifier for c in rep.checks] == ["planner"]

    m = scripted(plan(calc("17 * 23", "He has 401 apples")))
    rep = asyncio.run(run("He has 401 apples.", ["arithmetic", "planner"], question=APPLES_Q,
                          options={"planner": {"model": m, "when": "unexplained"}}))
    assert rep.status == "failed" and rep.extra["plan_source"] == "model" and len(m.calls) == 1
    assert rep.extra["plan"]["verification_steps"][0]["tool"] == "calculate"

    m = scripted("not a plan")
    rep = asyncio.run(run("He has 401 apples.", ["planner"], question=APPLES_Q,
                          options={"planner": {"model": m, "when": "always"}}))
    assert rep.status == "error" and rep.checks[0].note.startswith("plan: invalid")

    # policy "never": no model call even with a model
    m = scripted(plan(calc("17 * 23", "He has 401 apples")))
    rep = asyncio.run(run("He has 401 apples.", ["planner"], question=APPLES_Q,
                          options={"planner": {"model": m, "when": "never"}}))
    assert rep.status == "skipped" and m.calls == []


@pytest.mark.docker
@pytest.mark.bwrap
@pytest.mark.slow
def test_through_run_the_data_cleaning_case_the_rules_leave_unknown(pandas_box):
    """The data-cleaning case of docs/verifier-model.md end to end in ``verifiers.run``: the code
    verifier cannot run code that reads a file (``unknown``), so the planner (``when: unexplained``)
    is asked, builds the constructed DataFrame and the draft's line raises the pandas truth-value
    error."""
    line = "df = df[(df['Age'] > 0) and (df['Age'] < 120)]"
    step = {"tool": "run_python", "claim": line,
            "input": {"setup": SETUP, "code": line, "assertions": ["list(df['Age']) == [25, 30]"]}}
    m = scripted(plan(step))
    rep = asyncio.run(run(DATA_DRAFT, ["code", "planner"], question=DATA_Q,
                          options={"code": {"sandbox": pandas_box, "timeout_s": 60},
                                   "planner": {"model": m, "when": "unexplained", "sandbox": pandas_box,
                                               "timeout_s": 60}}))
    code_checks = [c for c in rep.checks if c.verifier == "code"]
    assert code_checks and all(c.outcome == "unknown" for c in code_checks)
    [p] = [c for c in rep.checks if c.verifier == "planner"]
    assert p.outcome == "fail" and "truth value" in p.expected and rep.status == "failed"
    assert len(m.calls) == 1 and rep.extra["plan_source"] == "model"


def test_the_prompts_own_few_shot_plan_obeys_the_guard():
    """The example the prompt teaches with must itself pass the executor's guard (else the
    planner is taught to write steps that get rejected)."""
    from verifiers.planner._prompt import _EXAMPLES

    q, d, p = _EXAMPLES[0]
    out = check(d, q, model=scripted(p), use_model=True)
    assert outcomes(out) == ["pass", "pass"]
    assert [e["status"] for e in out.plan["executed"]] == ["checked", "checked"]


@pytest.mark.docker
@pytest.mark.bwrap
def test_the_prompts_run_python_example_obeys_the_guard(pandas_box):
    from verifiers.planner._prompt import _EXAMPLES

    q, d, p = _EXAMPLES[1]
    out = check(d, q, model=scripted(p), use_model=True, tools=planner.Toolbox(sandbox=pandas_box), deadline_s=60)
    # the right code, judged outside the sandbox (docs/design.md "A verdict rests on what the
    # checked content cannot write")
    assert outcomes(out) == ["pass"]
    assert [e["status"] for e in out.plan["executed"]] == ["checked"]


# --- offline (no verifier model) ---------------------------------------------------------------

DISCOUNT_Q = "What does a $60 item with a 15% discount cost?"
DISCOUNT_A = "The total cost is $45.50 after a 15% discount on $60."


def _offline(answer, question, when):
    from verifiers.run import run

    return asyncio.run(run(answer, ["arithmetic", "planner"], question=question,
                           options={"planner": {"when": when, "timeout_ms": 5000}}))


def test_offline_planner_without_a_model_says_so_instead_of_skipping():
    # `veracity verify --policy math` / POST /v1/veracity/verify have no verifier model: a risky
    # answer no rule can check used to come out `skipped` ("no checkable claims"), as if there
    # were nothing to check; the gateway with an unavailable model says `unknown` -- so does this
    rep = _offline(DISCOUNT_A, DISCOUNT_Q, "unexplained")
    planned = [c for c in rep.checks if c.verifier == "planner"]
    assert [(c.outcome, c.evidence.get("reason")) for c in planned] == [("unknown", "unavailable:no_model")]
    assert rep.status == "unverified"
    # a policy that never asks for model plans: nothing to say
    assert [c for c in _offline(DISCOUNT_A, DISCOUNT_Q, "never").checks if c.verifier == "planner"] == []
    # a template plan needs no model: its check stands alone (a word problem: the arithmetic
    # verifier binds a bare value only to a question that is itself an expression, PRODUCT_Q)
    tpl = _offline("You will have about $13,000.", EN_Q, "unexplained")
    assert [(c.verifier, c.outcome) for c in tpl.checks] == [("planner", "fail")]
    bare = _offline("approximately 0.000191", PRODUCT_Q, "unexplained")
    assert [(c.verifier, c.outcome) for c in bare.checks] == [("arithmetic", "fail")] and bare.status == "failed"
    assert tpl.extra.get("plan_source") == "template" and tpl.status == "failed"


# --- what each check rests on (docs/design.md "Asymmetric trust") -------------------------------------

DISCOUNT_Q = "A $60 item has a 15% discount. What is the price?"


def test_template_checks_rest_on_a_recomputation_model_plans_on_the_model():
    [c] = check("根据公式A=P*(1+r/n)^(nt)计算得约为11607.55元。", CI_Q).checks
    assert (c.outcome, c.basis) == ("pass", "recomputed")
    # the model built an expression from the question's numbers that "agrees" with a wrong draft
    out = check("The price is $45.50.", DISCOUNT_Q, model=scripted(plan(calc("60 - 15 + 1/2", "The price is $45.50"))),
                use_model=True)
    [c] = out.checks
    assert (c.outcome, c.basis) == ("pass", "model") and "wrote the expression" in c.evidence["basis_reason"]
    # a model step can still fail the draft (its failure drives a re-ask)
    [c] = check("He has 401 apples.", APPLES_Q, model=scripted(plan(calc("17 * 23", "He has 401 apples"))),
                use_model=True).checks
    assert (c.outcome, c.basis) == ("fail", "model")


@pytest.mark.parametrize("draft,expr,claim,basis", [
    ("120 / 1.5 = 80, so the speed is 80 km/h.", "120 / 1.5", "120 / 1.5 = 80", "recomputed"),
    ("The speed is (120/1.5) ≈ 80 km/h.", "120 / 1.5", "The speed is (120/1.5) ≈ 80", "recomputed"),
    ("He walks 120 km in 1.5 hours at 80 km/h.", "120 / 1.5", "at 80 km/h", "model"),  # not the draft's expression
    ("120 / 1.5 = 80 and 60 + 20 = 80 km/h.", "120 / 1.5", "60 + 20 = 80", "model"),   # another expression's value
    ("So 5 - 2 + 1 = 3 apples.", "2 + 1", "So 5 - 2 + 1 = 3", "model"),  # the tail of the draft's expression
])
def test_only_the_drafts_own_stated_expression_rests_on_a_recomputation(draft, expr, claim, basis):
    out = check(draft, "How fast?", model=scripted(plan(calc(expr, claim))), use_model=True)
    [c] = out.checks
    assert c.outcome == "pass" and c.basis == basis, (c.note, c.evidence)


def test_a_formula_compared_with_itself_proves_nothing():
    same = {"left": "\\frac{n^2}{2}", "right": "\\frac{n^2}{2}"}
    # the claim states one equation: its own two sides are compared instead (here: false -> fail)
    draft = "So there are $\\frac{n(n-1)}{2} = \\frac{n^2}{2}$ pairs."
    step = {"tool": "sympy_equivalent", "input": same, "claim": "$\\frac{n(n-1)}{2} = \\frac{n^2}{2}$"}
    [c] = check(draft, "How many pairs?", model=scripted(plan(step)), use_model=True).checks
    assert (c.outcome, c.basis) == ("fail", "recomputed")
    assert c.evidence["compared"] == {"left": "\\frac{n(n-1)}{2}", "right": "\\frac{n^2}{2}"}
    # \binom{n}{2} is beyond the CAS reader: unknown, never the pass the identical sides gave
    draft = "The number of pairs is $\\binom{n}{2} = \\frac{n^2}{2}$."
    step = {"tool": "sympy_equivalent", "input": same, "claim": "$\\binom{n}{2} = \\frac{n^2}{2}$"}
    [c] = check(draft, "How many pairs?", model=scripted(plan(step)), use_model=True).checks
    assert c.outcome == "unknown"
    # no equation in the claim to take the sides from: rejected
    draft = "Half of n squared, \\frac{n^2}{2}, grows fast."
    step = {"tool": "sympy_equivalent", "input": same, "claim": "Half of n squared, \\frac{n^2}{2}, grows fast"}
    [c] = check(draft, "How fast?", model=scripted(plan(step)), use_model=True).checks
    assert c.outcome == "unknown" and "proves nothing" in c.note


def test_a_search_verdict_rests_on_what_the_search_says_it_rests_on():
    async def search(claim):
        return {"verdict": "supported", "evidence": "Canberra is the capital", "basis": None}

    step = {"tool": "search_facts", "input": {"claim": "Canberra is the capital of Australia"},
            "claim": "Canberra is the capital of Australia"}
    tools = planner.Toolbox(search_facts=search)
    [c] = check("Canberra is the capital of Australia.", "Capital?", model=scripted(plan(step)), use_model=True,
                tools=tools).checks
    assert (c.outcome, c.basis) == ("pass", "model")


# --- the interest template compares every value the draft states for the quantity ----------------

@pytest.mark.parametrize("draft,want,found", [
    # docs/verifier-model.md's re-ask: the first value agrees, the second (also the final amount)
    # is wrong
    ("根据公式A=P*(1+r/n)^(nt)，本息和约为11607.55元。使用Python精确计算的结果约为11614.80元。", "fail", "11614.80"),
    ("本息和约为11614.80元。精确计算的结果约为11607.55元。", "fail", "11614.80"),
    ("本息和约为11607.55元。精确计算的结果为11607.55元。", "pass", "11607.55"),
])
def test_interest_template_checks_every_stated_value(draft, want, found):
    [c] = check(draft, CI_Q).checks
    assert (c.outcome, c.found, c.basis) == (want, found, "recomputed")
    assert draft[c.span[0]:c.span[1]] == c.claim and found in c.claim
    assert len(c.evidence["stated_values"]) == 2


@pytest.mark.parametrize("draft", [
    "Year 1: $10,509.45, Year 2: $11,044.86, Year 3: $11,607.55",        # intermediate years
    "If compounded monthly it would be $11,614.72; quarterly, you will have $11,607.55.",  # another case
])
def test_interest_template_leaves_figures_of_other_quantities_alone(draft):
    assert outcomes(check(draft, EN_Q)) == ["pass"]
