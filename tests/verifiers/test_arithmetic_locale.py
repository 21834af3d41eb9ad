"""A statement that holds in its writer's number format is never failed, whatever else the
answer numbers.

The false alarm this keeps: "Mit Python 3.12: 1.500 + 250 = 1.750" was ``fail``: the version
number "3.12" was taken as evidence that the answer writes "." as the decimal point, so the German
thousands ("1.500" = 1500) were read as 1.5. The class: any number that names something rather
than counts it -- versions ("v2.5", "GPT-3.5", "Node 18.17"), dates ("12.03.2024", "am 12.03."),
sections ("§ 3.2", "Abschnitt 4.1"), standards ("ISO 9001", "DIN 5008"), clock times ("12.30
Uhr"), numbers in code -- is no evidence of a locale, and prose in a language that groups with
"." (de, es, it, pt, nl) is.

Oracle: ``tests/arith_locale_gen.py`` draws the numbers, renders them in the writer's locale and
decides each statement with ``Fraction`` arithmetic (and the other locale's reading with CLDR's
two-line rule on the written digits), never with the verifier's parser.
"""

from __future__ import annotations

import pytest

from tests import arith_locale_gen as gen
from verifiers.arithmetic import check

CASES = gen.cases(600, seed=5)


def _verdict(text: str) -> str:
    outs = [c.outcome for c in check(text) if c.evidence.get("kind") in ("equation", "natural_language")]
    return "fail" if "fail" in outs else "pass" if "pass" in outs else "unknown" if outs else "none"


def test_the_generator_draws_every_kind_of_statement():
    assert {c.locale for c in CASES} == {"en", "de"}
    assert sum(c.right for c in CASES) > 200 and sum(not c.right and not c.right_other for c in CASES) > 200


@pytest.mark.parametrize("k", range(0, len(CASES), 50))
def test_a_right_statement_in_its_writers_format_is_never_failed(k):
    """Among versions, dates, sections, standards and clock times, in either language."""
    bad = [c.text for c in CASES[k:k + 50] if c.right and _verdict(c.text) == "fail"]
    assert not bad


def test_a_statement_wrong_in_both_readings_is_still_caught():
    """Catches kept: the wrong statements (by the oracle, in both readings) that are failed. A
    few stay ``unknown`` for other reasons (rounding rules, an English writer's "," groups in
    German prose read as decimals), none passes where only mixed readings could make it hold."""
    wrong = [c for c in CASES if not c.right and not c.right_other]
    verdicts = [_verdict(c.text) for c in wrong]
    assert verdicts.count("fail") >= 0.8 * len(wrong), verdicts.count("fail") / len(wrong)


@pytest.mark.parametrize("text", [
    "Mit Python 3.12: 1.500 + 250 = 1.750",
    "Using Python 3.12, the total is 1.500 + 250 = 1.750.",
    "Mit v2.5: 1.500 + 250 = 1.750",
    "Laut § 3.2: 1.500 + 250 = 1.750",
    "Siehe Abschnitt 4.1: 1.200 + 300 = 1.500 Stück.",
    "Um 12.30 Uhr waren es 1.500 + 250 = 1.750 Besucher.",
    "Am 12.03. waren es 1.500 + 250 = 1.750.",
    "Am 12.03.2024 sind es 1.500 + 250 = 1.750",
    "Wie GPT-3.5 sagt: 2.500 + 250 = 2.750",
    "Der Code `x = 2.5` läuft; zusammen 1.500 + 250 = 1.750.",
    "```python\nprint(2.5)\n```\n1.500 + 250 = 1.750",
    "Die Steigung ist 2.5 und zusammen 1.500 + 250 = 1.750.",  # German prose, an English decimal
    "Zusammen ergibt das 1,500 × 2 = 3.",  # German prose: "," is the decimal comma
])
def test_a_name_or_a_language_is_no_evidence_of_english_decimals(text):
    checks = check(text)
    assert checks and "fail" not in [c.outcome for c in checks], [(c.claim, c.outcome, c.note) for c in checks]
    assert any(c.evidence.get("other_locale") for c in checks)


@pytest.mark.parametrize("text", [
    "It costs $2.50. So 1.500 + 250 = 1.750.",  # an English quantity, at a sentence's end
    "Each weighs 2.5 kg, and 1.500 + 250 = 1.750 kg in total.",
    "The house cost 25*3=75,000 and the rate is 0.75.",  # English "," groups: no decimal-comma reading
    "On 12.03.2024 the sum 1.000 + 1 = 1.002 was wrong.",  # wrong in both readings
    "Zusammen ergibt das 36,791 × 10 = 367.91.",  # "367.91" has no continental reading
])
def test_english_quantities_or_a_claim_wrong_both_ways_still_fail(text):
    assert "fail" in [c.outcome for c in check(text)]
