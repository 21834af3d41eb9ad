"""Every notation models write for arithmetic, read right (docs/design.md "False alarms cost more
than misses": "A verifier must never turn a right answer into a wrong one"): Python's ``**`` with
any spacing, ``//``, ``%`` as remainder or percentage by context, Unicode superscripts and vulgar
fractions, power words, thousands separators of several locales, currency after the amount, area
units, and claims in code comments and Markdown tables. Each expected value below is worked out by
hand in the comment next to it, not read back from the verifier."""

from __future__ import annotations

import asyncio

import pytest

from verifiers.arithmetic import check
from verifiers.planner import Toolbox
from verifiers.planner._tools import CalculateIn


def _one(text: str):
    checks = [c for c in check(text) if c.outcome != "unknown" or c.evidence.get("kind") != "budget"]
    assert len(checks) == 1, (text, checks)
    return checks[0]


# --- Python's power operator --------------------------------------------------------------------

def test_compound_interest_with_spaced_power_passes():
    # 10000 * 1.0125^12 = 11607.5451...: the stated 11607.55 is the correctly rounded value.
    # It used to read "(1 + 0.05/4) (4*3)" (the "**" dropped as markdown bold): 121500.
    c = _one("A = 10000 * (1 + 0.05/4) ** (4*3) = 11607.55")
    assert c.outcome == "pass" and c.expected == "11607.55"


def test_spaced_power_binds_tighter_than_plus():
    assert _one("3 ** 2 + 1 = 10").outcome == "pass"  # 9 + 1
    c = _one("3 ** 2 + 1 = 11")
    assert (c.outcome, c.expected) == ("fail", "10")


@pytest.mark.parametrize("text", ["2 ** 10 = 1000", "2**10 = 1000", "2 **10 = 1000", "2** 10 = 1000",
                                  "2\t**\t10 = 1000"])
def test_wrong_power_is_caught_with_any_spacing(text):
    c = _one(text)
    assert (c.outcome, c.expected, c.found) == ("fail", "1024", "1000")


@pytest.mark.parametrize("text,expected", [
    ("(335) ** 2 = 112225", "112225"),         # 335^2 = 112225
    ("(87.71) ** 2 = 7693.0441", "7693.0441"),  # 87.71^2 = 7693.0441
    ("3.14 * 5 ** 2 = 78.5", "78.5"),           # 3.14 * 25
    ("2 ** -1 = 0.5", "0.5"),
    ("-2 ** 2 = -4", "-4"),                     # Python: -(2**2)
    ("2 ** 3 ** 2 = 512", "512"),               # right-associative: 2**9
])
def test_power_readings(text, expected):
    c = _one(text)
    assert (c.outcome, c.expected) == ("pass", expected)


@pytest.mark.parametrize("text", ["**12** + **5** = **17**", "**Answer:** 3 ** 2 = 9", "The sum 4 + 5 = **9**",
                                  "**Total:** 3 * 4 = 12"])
def test_markdown_bold_is_still_emphasis(text):
    assert _one(text).outcome == "pass"


def test_bold_around_a_wrong_sum_still_fails():
    c = _one("**Total:** 3 * 4 = **13**")
    assert (c.outcome, c.expected) == ("fail", "12")


# --- the planner's calculate tool ------------------------------------------------------------------

@pytest.mark.parametrize("expression,value", [("2 ** 3", "8"), ("3.14 * 5 ** 2", "78.5"), ("2**10", "1024"),
                                              ("7 // 2", "3"), ("17 % 5", "2"), ("2³ + ½", "8.5")])
def test_planner_calculate_reads_python_notation(expression, value):
    out = asyncio.run(Toolbox().get("calculate").run(CalculateIn(expression=expression)))
    assert out.error is None, out.data
    assert out.data["value"] == value


# --- // and % -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,outcome,expected", [
    ("17 // 5 = 3", "pass", "3"),
    ("-7 // 2 = -4", "pass", "-4"),   # Python floors toward -infinity
    ("17 // 5 = 4", "fail", "3"),
    ("17 % 5 = 2", "pass", "2"),
    ("17 % 5 = 3", "fail", "2"),
    ("(10 + 7) % 5 = 2", "pass", "2"),
])
def test_floor_division_and_remainder(text, outcome, expected):
    c = _one(text)
    assert (c.outcome, c.expected) == (outcome, expected)


@pytest.mark.parametrize("text,expected", [("15% of 80 = 12", "12"), ("20 % of 50 = 10", "10"),
                                           ("80 * 15% = 12", "12")])
def test_percent_stays_percent(text, expected):
    c = _one(text)
    assert (c.outcome, c.expected) == ("pass", expected)


def test_a_glued_percent_before_a_number_is_no_remainder():
    # GSM8K reference #239 writes "30% of 1000" as "30/100%1000 = 300": never a remainder
    assert [c.outcome for c in check("30/100%1000 = 300") if c.outcome == "fail"] == []


# --- Unicode ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text,outcome,expected", [
    ("2¹⁰ = 1024", "pass", "1024"),
    ("10⁶ = 100000", "fail", "1000000"),
    ("4⁻¹ = 0.25", "pass", "0.25"),
    ("2⅗ + ⅖ = 3", "pass", "3"),        # 13/5 + 2/5
    ("⅞ − ⅛ = 0.75", "pass", "0.75"),
    ("6 · 7 = 42", "pass", "42"),
    ("84 ÷ 4 = 21", "pass", "21"),
    ("3 × 2² = 12", "pass", "12"),
])
def test_unicode_notation(text, outcome, expected):
    c = _one(text)
    assert (c.outcome, c.expected) == (outcome, expected)


def test_area_units_convert_as_areas():
    # 1 cm^2 = 100 mm^2: "5 cm² = 500 mm²" is right (it was read as lengths: expected 50)
    assert _one("5 cm² = 500 mm²").outcome == "pass"
    assert _one("5 cm^2 = 50 mm^2").outcome == "fail"


# --- words -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,outcome,expected", [
    ("3 to the power of 4 is 81", "pass", "81"),
    ("2 raised to the power of 10 equals 1000", "fail", "1024"),
    ("2 raised to the 5th power is 32", "pass", "32"),
    ("(1.5) squared = 2.25", "pass", "2.25"),
    ("7 squared is 48", "fail", "49"),
    ("6 times 7 is 42", "pass", "42"),
])
def test_power_and_operator_words(text, outcome, expected):
    c = _one(text)
    assert (c.outcome, c.expected) == (outcome, expected)


# --- thousands separators, currency ----------------------------------------------------------------

@pytest.mark.parametrize("text,outcome,expected", [
    ("2 × 1.250.000 = 2.500.000", "pass", "2500000"),           # de/es grouping
    ("2 × 1.250.000 = 2.600.000", "fail", "2500000"),
    ("1.234,50 € + 765,50 € = 2.000,00 €", "pass", "2000"),    # decimal comma, euro after the amount
    ("1.234,50 € + 765,50 € = 2.001,00 €", "fail", "2000"),
    ("3 × 1’250 = 3’750", "pass", "3750"),                      # de-CH
    ("2 × 1\u202f250\u202f000 = 2\u202f500\u202f000", "pass", "2500000"),  # fr / SI narrow spaces
    ("3 * 12,50,000 = 37,50,000", "pass", "3750000"),           # en-IN lakh
    ("1_000_000 * 3 = 3_000_000", "pass", "3000000"),           # Python literal
    ("5 € + 3 € = 9 €", "fail", "8"),
    ("3 x 1,000 = 3,000", "pass", "3000"),                      # en
])
def test_locale_numbers_and_currency(text, outcome, expected):
    c = _one(text)
    assert (c.outcome, c.expected) == (outcome, expected)


def test_a_lone_decimal_comma_is_not_guessed():
    # "3,5" without a locale signal in the text may be a list: nothing is claimed about it
    assert [c for c in check("I picked 3,5 and 7.") if c.outcome != "pass"] == []


# --- where claims stand --------------------------------------------------------------------------

def test_claims_in_code_comments_are_read_and_code_is_not():
    text = ("Here:\n```python\nA = 10000 * (1 + 0.05/4) ** (4*3)  # 10000 * 1.0125 ** 12 = 11607.55\n"
            "# 2 ** 10 = 1000\nx = \"#1 = 2\"\ny = 3 * 4 == 13\n```\n")
    checks = check(text)
    assert [(c.outcome, c.expected) for c in checks] == [("pass", "11607.55"), ("fail", "1024")]
    assert text[checks[1].span[0]:checks[1].span[1]] == "2 ** 10 = 1000"


def test_markdown_table_rows():
    text = "| Step | Calculation |\n|---|---|\n| 1 | 3 ** 2 + 1 = 10 |\n| 2 | 2 ** 10 = 1000 |\n"
    assert [(c.outcome, c.expected) for c in check(text)] == [("pass", "10"), ("fail", "1024")]


def test_markdown_table_with_expression_and_value_columns():
    text = ("| Item | Calculation | **Result** |\n| :-- | --- | ---: |\n| A | $3 × 4 | $12 |\n"
            "| B | 7 ÷ 2 | 3.4 |\n")
    assert [(c.outcome, c.expected) for c in check(text)] == [("pass", "12"), ("fail", "3.5")]


def test_display_math_and_latex_power():
    text = "\\[ A = 10000 \\left(1 + \\frac{0.05}{4}\\right)^{4 \\cdot 3} = 11607.55 \\]"
    assert _one(text).outcome == "pass"


# --- the planner's sympy_equivalent (formulas) ----------------------------------------------------

@pytest.mark.parametrize("left,right,outcome", [
    ("(x + 1) ** 2", "x ** 2 + 2*x + 1", "pass"),
    ("(x + 1) ** 2", "x ** 2 + 1", "fail"),
    ("x**3 * x", "x ** 4", "pass"),
    ("(a + b)²", "a² + 2ab + b²", "pass"),
])
def test_planner_sympy_equivalent_reads_python_powers(left, right, outcome):
    from verifiers.planner._tools import SympyEquivalentIn

    out = asyncio.run(Toolbox().get("sympy_equivalent").run(SympyEquivalentIn(left=left, right=right)))
    assert out.data["outcome"] == outcome, out.data


def test_code_is_not_read_as_a_comment():
    # in Python "a // b" is floor division, not a comment; "//" comments only in C-family blocks
    text = "```python\nassert n // 2 == 3\nx = 7 // 2  # 7 // 2 = 4\n```\n```js\nlet y = 2 ** 10; // 2 ** 10 = 1000\n```"
    assert [(c.outcome, c.expected, c.claim) for c in check(text)] == [("fail", "3", "7 // 2 = 4"),
                                                                        ("fail", "1024", "2 ** 10 = 1000")]
