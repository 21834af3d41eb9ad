"""Claim forms added after counting them in real answers (``$VERACITY_CASES/math``): number
words as operands, dozens, calendar durations (months, years), and rates whose units cancel
(``2 years * 12 months per year = 24 months``). Each real excerpt is named by its source and
kept with a right and a wrong value; prose that only looks like these forms stays unflagged."""

from __future__ import annotations

import pytest

from verifiers import Check
from verifiers.arithmetic import check


def decided(answer: str) -> list[Check]:
    return [c for c in check(answer) if c.outcome in ("pass", "fail")]


def one(answer: str) -> Check:
    cs = decided(answer)
    assert len(cs) == 1, [(c.claim, c.outcome) for c in cs]
    return cs[0]


@pytest.mark.parametrize(
    "right,wrong,expected",
    [
        # ProcessBench gsm8k-59, step 2
        ("Three times $2000 is $6000.", "Three times $2000 is $5000.", "6000"),
        # GSM8K example solutions #1200 (6b_verification)
        ("Eight times four is 32.", "Eight times four is 36.", "32"),
        ("So twelve plus three is 15.", "So twelve plus three is 16.", "15"),
        ("twenty-four divided by 6 is 4", "twenty-four divided by 6 is 5", "4"),
        ("half of 30 is 15", "half of 30 is 16", "15"),
        # GSM8K example solutions #446 (6b_verification)
        ("Find the number of eggs in the cases: 4 dozen = 48 eggs", "Find the number of eggs: 4 dozen = 36 eggs",
         "48 eggs"),
        ("a dozen is 12", "a dozen is 10", "12"),
        ("two dozen = 24", "two dozen = 20", "24"),
        ("48 eggs = 4 dozen", "48 eggs = 3 dozen", "4 dozen"),
        # GSM8K example solutions #861 (6b_verification) writes "Ammend of 1 year is 12 months"
        # ("of 1 year" reads as a rate there, so that line itself is left alone)
        ("Since 1 year is 12 months", "Since 1 year is 10 months", "12 month"),
        ("2 years = 24 months", "2 years = 20 months", "24 month"),
        ("1.5 decades = 15 years", "1.5 decades = 25 years", "15 year"),
        ("90 minutes = 1.5 hours", "90 minutes = 2.5 hours", "1.5 hour"),
    ],
)
def test_new_claim_forms_right_and_wrong(right: str, wrong: str, expected: str) -> None:
    r, w = one(right), one(wrong)
    assert r.outcome == "pass", r
    assert w.outcome == "fail", w
    assert w.expected == expected


@pytest.mark.parametrize(
    "text",
    [
        "1 year = 365 days",
        "1 year = 366 days",  # a leap year
        "1 year = 52 weeks",
        "1 year = 365.25 days",
        "1 month = 30 days",
        "1 month = 4 weeks",  # the GSM8K convention
        "February: 1 month = 28 days",
        "3 months = 13 weeks",
        "6 months = 26 weeks",
    ],
)
def test_calendar_conventions_all_pass(text: str) -> None:
    assert one(text).outcome == "pass"


def test_calendar_value_outside_every_convention_fails_inside_is_unknown() -> None:
    c = one("2 years = 500 days")
    assert c.outcome == "fail" and c.expected == "728 .. 732 day"
    # between two conventions but matching none (a year of 365.5 days): not decided
    (u,) = check("1 year = 365.6 days")
    assert u.outcome == "unknown" and "calendar convention" in u.note


@pytest.mark.parametrize(
    "text",
    [
        # GSM8K reference #422
        "So in 2 years, she will collect 2 years * 12 months per year = 24 months",
        # GSM8K reference #401
        "She works 6 days/week * 4 weeks/month = 24 days",
        # GSM8K reference #830
        "282 minutes/week * 4 weeks/month = 1128 minutes/month",
        # GSM8K example solutions #422 (6b_finetuning)
        "6 months / 4 months/year = 1.5 years",
    ],
)
def test_rates_whose_units_cancel_are_checked(text: str) -> None:
    assert one(text).outcome == "pass"


def test_rate_with_a_wrong_product_fails() -> None:
    c = one("2 years * 12 months per year = 26 months")
    assert c.outcome == "fail" and c.expected == "24"


@pytest.mark.parametrize(
    "text",
    [
        "2 * 30 minutes = 1 hour",  # units that do not cancel: a conversion inside, not checked
        "2 * 30 minutes/day = 1 hour/day",
        "Each one times 4 is 20 because each box holds 5.",  # "one" is a pronoun here
        "Adam was four years old four times four equals 18 years ago.",  # GSM8K example #909, altered
        "She ran three times as many as 4 is 12",
        "3 times one of them is 10",
        "3 dozen = 3 cartons",  # a recount, not a conversion
        "2 dozen is 2 boxes",
        "a dozen eggs * $2 = $24",  # "a dozen" is a number only in a definition
        "4 dozen eggs * $2 = $96",  # $2 per egg: a dozen counted as 12
        "72 months / 12 months = 6 years",
        # "is" between two durations that compare rather than convert (a false alarm on main too)
        "His 2 hours is 30 minutes more than hers.",
        "Her 2 years is 4 months more than his.",
        "He is 5 years older, so 10 years is 2 decades ago.",
    ],
)
def test_no_false_alarm_on_look_alikes(text: str) -> None:
    assert not [c for c in check(text) if c.outcome == "fail"], check(text)


def test_dozen_in_a_sum_is_not_decided() -> None:
    (c,) = check("2 dozen + 6 = 30 rolls")
    assert c.outcome == "unknown" and "dozen" in c.note


# --- a result followed by a rate unit written with "/" ("= $700/week") --------------------------------


@pytest.mark.parametrize(
    "right,wrong",
    [
        # GSM8K reference #17 (notes stripped)
        ("Jill makes per week teaching: $20/hour * 35 hours/week = $700/week",
         "Jill makes per week teaching: $20/hour * 35 hours/week = $750/week"),
        # GSM8K reference #614 (notes stripped)
        ("20 gallons/load * $0.15/gallon = $3.00/load", "20 gallons/load * $0.15/gallon = $3.50/load"),
    ],
)
def test_result_with_a_slash_rate_unit_is_checked(right: str, wrong: str) -> None:
    assert one(right).outcome == "pass"
    assert one(wrong).outcome == "fail"


def test_wrong_results_with_slash_units_from_real_answers_are_found() -> None:
    # GSM8K example solutions #62 (6b_verification) and #1241 (175b_verification), both wrong
    c = one("5% of $200000/year is $200000 x .05 = $100/year")
    assert c.outcome == "fail" and c.expected == "10000"
    c = one("So, Rose's profit is $1/3 - $2.4/12 = $0.4/egg.")
    assert c.outcome == "fail"


@pytest.mark.parametrize("text", ["2 + 2 = 8/x", "We met on 3 + 1 = 4/5/2020.", "10 / 2 = 5/a"])
def test_slash_after_a_result_still_glues_other_things(text: str) -> None:
    assert not [c for c in check(text) if c.outcome == "fail"], check(text)
