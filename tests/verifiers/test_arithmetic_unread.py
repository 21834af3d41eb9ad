"""A calculation visibly stated in an answer is never silently left out of its report.

The fault this keeps: "(2) 3 = 7" gave no check at all (a list label or a factor: the claim
finder stood down), so a report could say ``passed`` with the statement never looked at. The
class: every calculation written in numbers alone that the finder does not read -- a bracketed
number before a number, decimal commas or lists ("2,5 + 1 = 3,5"), ranges ("40-64=24"), after
an ellipsis, prose before it ("The 5 people brought in 5*2=10") -- is an ``unknown`` check of
kind ``unread`` with why. And one reason it stood down was wrong: an ordinal ("The third monkey
eats 315 - 24 = 291") was taken for a multiplier ("a third of"), and right claims went unchecked.

Oracle: the statements are generated with their values computed by ``Fraction`` here.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from verifiers.arithmetic import check

RNG = random.Random(13)


def _covering(text: str, stmt: str) -> list:
    k = text.index(stmt)
    return [c for c in check(text) if c.span and c.span[0] < k + len(stmt) and k < c.span[1]]


def _shapes(n: int) -> list[tuple[str, str]]:
    """(text, the statement in it) for statements the finder cannot read with confidence."""
    out = []
    for _ in range(n):
        a, b, i = RNG.randint(2, 99), RNG.randint(2, 99), RNG.randint(1, 9)
        c = a + b + RNG.choice([0, 0, 1, 10])
        stmt = RNG.choice([f"({i}) {a} = {a * i + RNG.choice([0, 1])}", f"{a},5 + {b} = {c},5",
                           f"{a}-{a + b}={b + RNG.choice([0, 3])}"])
        lead = RNG.choice(["", "Step: ", "We had it... ", "Then "])
        out.append((f"{lead}{stmt} items.", stmt))
    return out


@pytest.mark.parametrize("text,stmt", _shapes(60))
def test_an_ambiguous_statement_is_reported_unknown_never_dropped_or_failed(text, stmt):
    got = _covering(text, stmt)
    assert got, f"no check covers {stmt!r}"
    assert "fail" not in [c.outcome for c in got], [(c.claim, c.outcome, c.note) for c in got]


@pytest.mark.parametrize("text,why", [
    ("(2) 3 = 7", "list label or a factor"),
    ("(2) 3 = 6", "list label or a factor"),
    ("2,5 + 1 = 3,5", "decimal comma"),
    ("He has 40-64=24 screws left over", "range"),
    ("The answer is 2... 1234 × 5678 = 7,006,552", "ellipsis"),
    ("The 5 people brought in 5*2=10 old records", "context"),
])
def test_the_unread_check_says_why(text, why):
    got = [c for c in check(text) if c.evidence.get("kind") == "unread"]
    assert len(got) == 1 and got[0].outcome == "unknown" and why in got[0].note, [(c.claim, c.note) for c in check(text)]


@pytest.mark.parametrize("text", [
    "X*4 + 240 = 1920",           # the tail of a formula in symbols
    "we get 33 / 2 = 2x / 2",     # a formula goes on after the number
    "x + 2 = 5",
    "```python\nassert 2 + 2 == 4\nprint(3 + 3 = 7)\n```",  # code is the code verifier's
    "16 - 3 = 13 - 4",            # a running total
    "<<2+2=4>>",
])
def test_formulas_code_and_running_totals_are_not_reported_unread(text):
    assert not [c for c in check(text) if c.evidence.get("kind") == "unread"]


ORDINALS = ["third", "fifth", "tenth", "quarter"]


@pytest.mark.parametrize("seed", range(20))
def test_an_ordinal_before_a_claim_does_not_hide_it(seed):
    """"The third bag had 300 / 2 = 150": checked (pass when right, fail when wrong, by the
    Fraction oracle); "a third of 90 + 30 = 60" stays unread (the fraction may be the head)."""
    rng = random.Random(seed)
    a, b = rng.randint(10, 999), rng.randint(2, 9)
    op = rng.choice("+-*")
    v = {"+": Fraction(a + b), "-": Fraction(a - b), "*": Fraction(a * b)}[op]
    right = rng.random() < 0.5
    c = v if right else v + rng.randint(1, 5)
    text = f"The {rng.choice(ORDINALS)} monkey eats {a} {op} {b} = {c} bananas."
    outs = [x.outcome for x in check(text) if x.evidence.get("kind") in ("equation", "natural_language")]
    assert outs == ["pass" if right else "fail"], (text, outs)
    fraction = f"a third of {a} {op} {b} = {c}"
    assert "fail" not in [x.outcome for x in check(fraction)]
