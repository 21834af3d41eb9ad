"""Two evaluators before a failure (docs/arithmetic.md; docs/design.md "False alarms cost more than
misses": a failure that drives a correction is confirmed where a second reading exists). An
arithmetic ``fail`` stands only when SymPy's parser, reading the same span again (the written text
when it is plain arithmetic), finds the same value; when the two disagree, or the second cannot read
the claim, the check is ``unknown`` with both values in the evidence."""

from __future__ import annotations

from fractions import Fraction

import pytest

import verifiers.arithmetic as arithmetic
import verifiers.arithmetic._claims as claims
import verifiers.arithmetic._normalize as normalize
import verifiers.arithmetic._question as question_link
from verifiers.arithmetic import check
from verifiers.arithmetic._confirm import Unconfirmed, plain_string, second_value


def _only(text: str, question: str | None = None):
    out = check(text, question)
    assert len(out) == 1, out
    return out[0]


@pytest.mark.parametrize("text,expected,values", [
    ("2 ** 10 = 1000", "1024", ["1024", "1000"]),
    ("$32 - $20 = $300", "12", ["12", "300"]),
    ("15% of 80 = 13", "12", ["12", "13"]),
    ("\\( \\frac{3}{4} \\times 8 = 7 \\)", "6", ["6", "7"]),
    ("3 × 4 = 2 × 7", "12", ["12", "14"]),
    ("12 = 3 * 5", "15", ["15", "12"]),
])
def test_a_failure_is_confirmed_by_a_second_evaluation(text, expected, values):
    c = _only(text)
    assert (c.outcome, c.expected) == ("fail", expected)
    second = c.evidence["second_evaluation"]
    assert second["agrees"] is True and "parse_expr" in second["method"]
    assert second["values"] == values


def test_a_misreading_in_the_shared_normalisation_is_caught(monkeypatch):
    # the reading that dropped every spaced "**" as markdown bold (the cause of the false
    # "expected 121500"): the second evaluation reads the written text and disagrees
    old = normalize._c(r"(?<![\d)])\*\*|\*\*(?![\d(])")
    monkeypatch.setattr(normalize, "_stars", lambda t: t.sub(old, [" "]), raising=False)
    c = _only("A = 10000 * (1 + 0.05/4) ** (4*3) = 11607.55")
    assert c.outcome == "unknown", c
    second = c.evidence["second_evaluation"]
    assert (second["first_value"], second["second_value"]) == ("121500", "11607.54518")
    assert "disagree" in c.note
    # the same misreading cut "3 ** 2 + 1" to "2 + 1": the written stretch is read whole
    c = _only("3 ** 2 + 1 = 10")
    assert c.outcome == "unknown" and c.evidence["second_evaluation"]["second_value"] == "10"


def test_a_fault_of_the_first_evaluator_gives_unknown_with_both_values(monkeypatch):
    real = claims.evaluate
    monkeypatch.setattr(claims, "evaluate", lambda node, *a, **k: real(node, *a, **k) + 1)
    c = _only("6 * 7 = 50")  # wrong either way, but the faulty evaluator says 43, SymPy 42
    assert c.outcome == "unknown"
    second = c.evidence["second_evaluation"]
    assert (second["first_value"], second["second_value"]) == ("43", "42")


def test_the_question_link_is_confirmed_too(monkeypatch):
    c = _only("The answer is 8740.", question="4839+3948-45")
    assert (c.outcome, c.expected) == ("fail", "8742") and c.evidence["second_evaluation"]["agrees"] is True
    real = question_link.evaluate
    monkeypatch.setattr(question_link, "evaluate", lambda node: real(node) - 2)
    c = _only("The answer is 8740.", question="4839+3948-45")  # the faulty evaluator "agrees" with 8740
    assert c.outcome in ("pass", "unknown")
    c = _only("The answer is 8741.", question="4839+3948-45")
    assert c.outcome == "unknown" and c.evidence["second_evaluation"]["second_value"] == "8742"


def test_a_claim_the_second_evaluator_cannot_read_is_unknown(monkeypatch):
    def cannot(source: str):
        raise Unconfirmed("test")

    monkeypatch.setattr(claims, "second_value", cannot)
    c = _only("2 ** 10 = 1000")
    assert c.outcome == "unknown" and c.evidence["second_evaluation"]["reason"] == "test"
    assert _only("2 ** 10 = 1024").outcome == "pass"  # a pass needs no confirmation


@pytest.mark.parametrize("source", ["__import__('os').system('true')", "x + 1", "lambda: 1", "2 ** 10 ** 10 ** 10",
                                    "().__class__", "1" * 3000])
def test_the_second_evaluator_takes_only_whitelisted_arithmetic(source):
    with pytest.raises(Unconfirmed):
        second_value(source)


def test_second_value_is_exact_and_bounded():
    assert second_value("10000 * (1 + 1/80) ** 12") == Fraction(10000) * Fraction(81, 80) ** 12
    assert second_value("(15/100) * 80") == 12
    assert second_value("sqrt(16) + 5!") == 124
    assert abs(second_value("sqrt(2)") - 2 ** 0.5) < 1e-15
    with pytest.raises(Unconfirmed):
        second_value("2 ** 100000")


@pytest.mark.parametrize("written,plain", [
    ("10000 * (1 + 0.05/4) ** (4*3)", "10000 * (1 + 0.05/4) ** (4*3)"),
    ("$1,234.50 × 2", "1234.50 * 2"),
    ("\\frac{3}{4} \\cdot 8", "((3)/(4)) * 8"),
    ("2^{10}", "2**(10)"),
    ("17 % 5", None),        # a remainder: not a percentage
    ("2 1/2 + 1", None),     # a mixed number
    ("5 apples * 3", None),  # words
])
def test_plain_string(written, plain):
    assert plain_string(written) == plain


@pytest.mark.parametrize("text,expected", [
    # Omni-MATH solutions labelled wrong: caught on the base, first left unknown by the second
    # evaluation ("2\sqrt{3}" glued, nine powers in one side)
    (r"\[ 12 + 6\sqrt{3} = 30 \]", "22"),
    (r"\[ 2019 = 2^{10} + 2^9 + 2^8 + 2^7 + 2^6 + 2^5 + 2^2 + 2^1 + 2^0 \]", "2023"),
    ("so $2*√91/3 ≈ 5.77$", "6.36"),
    (r"\(\sin 30^\circ = 0.6\)", "0.5"),
])
def test_roots_trigonometry_and_long_sums_are_confirmed(text, expected):
    arithmetic.warm_up()
    c = _only(text)
    assert (c.outcome, c.expected) == ("fail", expected), c.note
    assert c.evidence["second_evaluation"]["agrees"] is True
