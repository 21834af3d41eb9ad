"""Risk scoring: signals fire on what they name, stay quiet on plain prose, and the
verifier triggers follow. Real answers from ../shared/cases where present."""

import json
import os
import re
from pathlib import Path

import pytest

from verifiers import risk

CASES = Path(os.environ.get("VERACITY_CASES", Path(__file__).resolve().parents[3] / "shared" / "cases"))


def test_plain_prose_is_low_risk_and_triggers_nothing():
    r = risk.score("How are you?", "I'm fine, thanks for asking. The weather is lovely today.")
    assert r.verifiers == []
    assert r.score < 0.05


def test_worked_arithmetic_triggers_arithmetic():
    ans = "She has 16 - 3 - 4 = 9 eggs left.\nShe makes 9 * 2 = $18 every day."
    r = risk.score("How much does she make?", ans)
    assert r.verifiers == ["arithmetic"]
    assert r.signals["operation"] >= 2
    assert r.score >= 0.5


def test_currency_percent_and_x_operator():
    assert risk.score(None, "That is a 5% rise.").signals["percent"] == 1
    assert risk.score(None, "It costs €200 or 300 dollars.").signals["currency"] == 2
    assert risk.score(None, "Four boxes: 4 x 52.5 is a lot").signals["operation"] == 1
    # counting stops once the arithmetic family saturates (3 hits): the score cannot rise
    r = risk.score(None, "A 5% rise on €200 gives 4 x 52.5 = 210")
    assert sum(r.signals.get(k, 0) for k in ("operation", "equation", "currency", "percent")) == 3
    assert "arithmetic" in r.verifiers


def test_hyphenated_words_and_dates_are_not_operations():
    r = risk.score(None, "A well-known state-of-the-art model, released in 2019 by a team of twelve.")
    assert "operation" not in r.signals
    assert "arithmetic" not in r.verifiers


def test_code_block_triggers_code():
    ans = "Here:\n```python\ndef f(x):\n    return x + 1\n```\n"
    r = risk.score("write f", ans)
    assert r.signals["code_block"] == 1
    assert "code" in r.verifiers


def test_unfenced_code_lines_count():
    r = risk.score(None, "import pandas as pd\ndef g():\n    pass\n")
    assert r.signals["code_line"] == 2
    assert "code" in r.verifiers


def test_citation_signals():
    ans = ("As shown by Vaswani et al. (2017) and (LeCun, 2015), see doi:10.1038/nature14539 "
           "and arXiv:1706.03762.\n\nReferences\n1. ...")
    r = risk.score("cite papers", ans)
    for s in ("doi", "arxiv", "et_al", "reference_list", "author_year"):
        assert r.signals.get(s, 0) >= 1, s
    assert "citations" in r.verifiers


def test_multi_part_question_triggers_sentinel():
    q = "Please:\n1. summarise the text\n2. translate it to French\nand also list the names?"
    r = risk.score(q, "Summary: ...")
    assert "sentinel" in r.verifiers
    assert r.signals["enumeration"] == 2 and r.signals["also"] == 1
    assert risk.question_signals("顺便告诉我天气") == {"also": 1}
    assert risk.question_signals("What? Why? How?")["questions"] == 2
    assert risk.question_signals("What is 2+2?") == {}


def test_score_is_monotone_in_evidence_and_bounded():
    one = risk.score(None, "3 * 4 = 12")
    many = risk.score(None, "3 * 4 = 12\n5 * 6 = 30\n7 * 8 = 56\n```\nx\n```\n(Smith, 2019) et al.")
    assert 0 < one.score < many.score <= 1.0


@pytest.mark.parametrize("bad", [None, "", "\x00\x01", "(" * 5000, "=" * 10000, "10." * 3000, "$" * 999])
def test_never_raises_on_garbage(bad):
    r = risk.score(bad, bad)
    assert 0.0 <= r.score <= 1.0
    assert isinstance(r.to_dict()["signals"], dict)


@pytest.mark.cases
@pytest.mark.slow
def test_gsm8k_solutions_trigger_arithmetic():
    path = CASES / "math" / "example_model_solutions.jsonl"
    if not path.exists():
        pytest.skip("no ../shared/cases")
    rows = [json.loads(line) for line in path.open()][:100]
    hits = 0
    for row in rows:
        sol = re.sub(r"<<[^>]*>>", "", row["175b_verification"]["solution"])
        hits += "arithmetic" in risk.score(row["question"], sol).verifiers
    assert hits >= 90, hits  # nearly every worked GSM8K solution shows its operations


@pytest.mark.cases
def test_humaneval_solutions_trigger_code_not_citations():
    path = CASES / "code" / "humaneval_py_gpt4_simple.jsonl"
    if not path.exists():
        pytest.skip("no ../shared/cases")
    rows = [json.loads(line) for line in path.open()][:50]
    for row in rows:
        r = risk.score(row["prompt"], "```python\n" + row["solution"] + "\n```")
        assert "code" in r.verifiers
        assert "citations" not in r.verifiers


def test_arithmetic_inside_fenced_code_does_not_trigger_arithmetic():
    ans = "Use this:\n```python\nx = 3 * 4\ny = x + 1\nprint(y == 13)\n```\nIt prints True."
    r = risk.score(None, ans)
    assert r.verifiers == ["code"]
    assert "operation" not in r.signals and "equation" not in r.signals
    prose_and_code = "So 3 * 4 = 12.\n```python\nprint(3 * 4)\n```"
    assert "arithmetic" in risk.score(None, prose_and_code).verifiers


# -- facts family (world claims) ----------------------------------------------------------

def _default_threshold() -> float:
    from proxy.policy import default_policies_dir, load_file

    return load_file(default_policies_dir() / "default.yaml").risk.threshold


def test_factual_answer_reaches_the_default_threshold_and_names_facts():
    # before the facts family: this answer scored 0.24 and was skipped
    r = risk.score("How many cars did Tesla deliver?", "Tesla delivered 484,507 vehicles in Q4 2023, up 20%")
    assert r.score >= _default_threshold()
    assert "facts" in r.verifiers
    assert r.signals["quantity"] >= 1 and r.signals["date"] >= 1 and r.signals["statistic"] >= 1


@pytest.mark.parametrize("answer,signal", [
    ("Einstein was born in 1879.", "date"),
    ("The Nordic World Ski Championships took place on 23 February 2011 in Oslo.", "date"),
    ("Paris has 2,102,650 inhabitants.", "quantity"),
    ("Apple earned 3.2 billion in the quarter, Reuters said.", "quantity"),
    ("Mount Everest rises 8849 metres above sea level.", "quantity"),
    ("Turnout in Ohio was 62 percent.", "statistic"),
    ("Jupiter is the largest planet in the Solar System.", "superlative"),
    ("Tokyo is the most populous metropolitan area.", "superlative"),
    ("According to the census, most people in the town speak Welsh.", "attribution"),
    ("Recent data show that fewer people in the region own cars.", "attribution"),
])
def test_each_facts_signal_fires_on_a_named_claim(answer, signal):
    r = risk.score(None, answer)
    assert r.signals.get(signal, 0) >= 1, r.signals
    assert "facts" in r.verifiers
    assert r.score >= _default_threshold()  # one checkable claim about something named is enough


def test_factoid_question_makes_a_short_named_answer_checkable():
    q = "The Oberoi family is part of a hotel company that has a head office in what city?"
    r = risk.score(q, "Delhi")
    assert r.signals.get("factoid") == 1 and "facts" in r.verifiers
    # the same short answer with no question is not a claim we can see
    assert "facts" not in risk.score(None, "Delhi").verifiers
    # a word problem with numbers is not a factoid (the computation family's business)
    assert "factoid" not in risk.score("Tom has 3 apples and buys 5 more. How many apples does Tom have?",
                                       "Tom has eight apples.").signals


def test_chinese_dates_and_quantities_count():
    r = risk.score(None, "特斯拉2023年第四季度交付了484,507辆汽车，同比增长20%。")
    assert "facts" in r.verifiers and r.signals["date"] >= 1 and r.signals["quantity"] >= 1
    r = risk.score(None, "据统计，该市一九九九年人口为三千万。")
    assert r.signals.get("attribution") == 1 and "facts" in r.verifiers
    assert r.signals["date"] == 1 and r.signals["quantity"] == 1
    # "3年" is three years, not a date; 元 is an amount, not a world quantity
    assert "facts" not in risk.score(None, "存3年后本息和约为11608.92元。").verifiers


@pytest.mark.parametrize("answer", [
    "I think Python is the best language for beginners, honestly.",
    "In my opinion, the Beatles are the greatest band ever.",
    "Thanks! Have a great weekend, and say hi to Anna for me.",
    "Yeah, I agree with you 100 %.",
    "The best way to learn is to practise a little every day.",
])
def test_opinion_and_chit_chat_do_not_trigger_facts(answer):
    r = risk.score("What do you think?", answer)
    assert "facts" not in r.verifiers, r.signals
    assert r.score < _default_threshold()


def test_code_answers_do_not_trigger_facts():
    fenced = "Here:\n```python\nYEAR = 2023\nprint('Paris has 2,102,650 people, the largest city')\n```\n"
    assert "facts" not in risk.score("write it", fenced).verifiers
    unfenced = 'def longest(strings):\n    """Return the longest of the strings, None in 2023."""\n    return max(strings)\n'
    r = risk.score("write longest()", unfenced)
    assert "facts" not in r.verifiers and "superlative" not in r.signals


@pytest.mark.parametrize("answer", [
    "20% of 150 is 30.",
    "The answer is 1,234,567.",
    "5% of 200 is 10, so the total is 210.",
    "She has 16 - 3 - 4 = 9 eggs left. According to the problem, Janet sells them for $2, the highest price.",
])
def test_plain_arithmetic_is_not_pushed_over_the_threshold_by_facts(answer):
    before = risk.score(None, answer)
    assert "facts" not in before.verifiers, before.signals


def test_number_boundaries_are_not_dates_or_quantities():
    for text in ("Bob paid $2019.", "Bob measured 3.2019 units.", "Bob got 2019% more.", "Bob counted 1,2,3 items.",
                 "Bob wrote 1450 lines."):
        r = risk.score(None, text)
        assert "date" not in r.signals and "quantity" not in r.signals, (text, r.signals)


def test_reference_list_years_are_citations_not_facts():
    refs = "References\n1. Smith, J. (2019). Deep nets. Nature.\n2. Doe, A. (2020). Wide nets. Science.\n"
    r = risk.score("cite papers", refs)
    assert "citations" in r.verifiers and "facts" not in r.verifiers
    r = risk.score("cite papers", "Einstein was born in 1879.\n\n" + refs)
    assert r.verifiers[:2] == ["citations", "facts"]


# -- computation family -> planner (the planner's templates) ---------------------------------

@pytest.mark.parametrize("question,answer", [
    ("本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？", "根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。"),
    ("What is the product of 97/117/0.6534725/0.27613576234/0.6734576?", "approximately 0.000191"),
    ("What is 1/1! + 1/2! + … + 1/10!?", "approximately 1.7182818284590455"),
])
def test_stated_task_with_a_bare_value_names_the_planner(question, answer):
    r = risk.score(question, answer)
    assert r.score >= _default_threshold()
    assert "planner" in r.verifiers
    assert r.signals["unshown_value"] == 1
    assert r.signals.get("stated_expression", 0) + r.signals.get("numeric_task", 0) == 1


def test_computation_family_needs_a_task_a_value_and_no_working():
    q = "Janet has 16 eggs and eats 3. She sells the rest at $2 each. How much does she make?"
    assert "planner" in risk.score(q, "She makes $26.").verifiers
    # working shown: the arithmetic verifier checks it, not the planner
    r = risk.score(q, "16 - 3 = 13 eggs, and 13 * 2 = 26 dollars.")
    assert "planner" not in r.verifiers and "arithmetic" in r.verifiers
    # no number in the answer, no number in the question, code, years only
    assert "planner" not in risk.score(q, "She makes a fair amount.").verifiers
    assert "planner" not in risk.score("How much does it cost?", "About 26 dollars.").verifiers
    assert "planner" not in risk.score("What is 3 * 4 in Python?", "```python\nprint(3 * 4)\n```").verifiers
    assert "planner" not in risk.score("What happened between 1914 and 1918?",
                                       "The First World War, which lasted 4 years.").verifiers
    # the multi-part signals used for the sentinel are unchanged by it
    assert risk.question_signals("What is 2+2?") == {}


def test_verifier_order_is_stable():
    r = risk.score("What is 12 * 3, and cite a source?",
                   "12 * 3 = 36 (Smith, 2019) et al.\n```\nx\n```\nEinstein was born in 1879.\n")
    assert r.verifiers == [v for v in ("arithmetic", "code", "citations", "facts", "sentinel", "planner")
                           if v in r.verifiers]


@pytest.mark.cases
def test_facts_and_planner_stay_off_worked_math_and_code():
    math = CASES / "math" / "example_model_solutions.jsonl"
    code = CASES / "code" / "humaneval_py_gpt4_simple.jsonl"
    if not math.exists() or not code.exists():
        pytest.skip("no ../shared/cases")
    rows = [json.loads(line) for line in math.open()][:200]
    facts = planner = 0
    for row in rows:
        sol = re.sub(r"<<[^>]*>>", "", row["175b_verification"]["solution"])
        v = risk.score(row["question"], sol).verifiers
        facts += "facts" in v
        planner += "planner" in v
    assert facts <= 2 and planner <= 4, (facts, planner)  # worked solutions show their numbers
    for row in [json.loads(line) for line in code.open()][:60]:
        for ans in ("```python\n" + row["solution"] + "\n```", row["solution"]):
            v = risk.score(row["prompt"], ans).verifiers
            assert "facts" not in v and "planner" not in v


@pytest.mark.cases
def test_bare_gsm8k_answers_name_the_planner():
    path = CASES / "math" / "test.jsonl"
    if not path.exists():
        pytest.skip("no ../shared/cases")
    rows = [json.loads(line) for line in path.open()][:200]
    hits = sum("planner" in risk.score(r["question"], "The answer is " + r["answer"].split("####")[-1].strip() + ".")
               .verifiers for r in rows)
    assert hits >= 150, hits  # a word problem answered with a bare number is a planner case


@pytest.mark.cases
def test_facts_fire_on_halueval_answers_to_their_questions():
    path = CASES / "grounding" / "HaluEval-qa" / "qa_data.json"
    if not path.exists():
        pytest.skip("no ../shared/cases")
    rows = [json.loads(line) for line in path.open()][:300]
    right = sum("facts" in risk.score(r["question"], r["right_answer"]).verifiers for r in rows)
    wrong = sum("facts" in risk.score(r["question"], r["hallucinated_answer"]).verifiers for r in rows)
    # risk is not a hallucination detector: it must send both to the facts verifier
    assert right >= 100 and wrong >= 100, (right, wrong)


def test_default_policy_sends_the_design_cases_past_the_threshold(monkeypatch):
    """Through the gateway's own risk step (``proxy.pipeline.sequence.verify_text``) under the shipped
    ``default`` policy: docs/verifier-model.md's compound-interest draft was ``skipped`` ("risk below
    threshold", risk 0.002); now the planner is asked (its template plans cost no model call).
    The Tesla answer (0.24, skipped before the facts family) is now scored risky and names ``facts``."""
    import asyncio

    from proxy.pipeline import verify as pipeline
    from proxy.stores.budget import RequestBudget
    from proxy.policy import default_policies_dir, load_file
    from verifiers._types import Report

    policy = load_file(default_policies_dir() / "default.yaml")
    calls = []

    async def recorded(text, names, **kw):  # what the gateway would run; the verifiers are not ours here
        calls.append(list(names))
        return Report(status="skipped", reason="recorded")

    import verifiers.run

    monkeypatch.setattr(verifiers.run, "run", recorded)  # verify_text runs them through verifiers.run.averify
    rep = asyncio.run(pipeline.verify_text(policy, "本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？",
                                           "根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。", RequestBudget()))
    assert rep.reason != "risk below threshold" and calls[-1] == ["planner"]
    assert rep.risk["score"] >= policy.risk.threshold
    rep = asyncio.run(pipeline.verify_text(policy, None, "Tesla delivered 484,507 vehicles in Q4 2023, up 20%",
                                           RequestBudget()))
    assert rep.risk["score"] >= policy.risk.threshold and "facts" in rep.risk["verifiers"]


def test_a_bibtex_entry_sends_the_answer_to_the_citation_verifier():
    """A fenced BibTeX block is a reference, not only code: before this signal, 900 of the 1,460
    BibTeX renderings of the labelled citation cases reached no citation check (veracity eval)."""
    ans = ("Here is the BibTeX you asked for:\n\n```bibtex\n@inproceedings{jockers2010,\n  title = {A computational "
           "approach to theme in the novel},\n  author = {M. Jockers and D. Witten},\n  year = {2010},\n"
           "  booktitle = {Literary and Linguistic Computing}\n}\n```\n")
    r = risk.score(None, ans)
    assert r.signals["bibtex"] == 1 and "citations" in r.verifiers
    # an e-mail address or a decorator is no BibTeX entry
    assert "bibtex" not in risk.score(None, "Write to me@article.com or use @dataclass {x}").signals
