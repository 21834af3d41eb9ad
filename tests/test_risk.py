"""Risk scoring: signals fire on what they name, stay quiet on plain prose, and the
verifier triggers follow. Real answers from ../shared/cases where present."""

import json
import os
import re
from pathlib import Path

import pytest

from verifiers import risk

CASES = Path(os.environ.get("VERACITY_CASES", Path(__file__).resolve().parents[2] / "shared" / "cases"))


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
