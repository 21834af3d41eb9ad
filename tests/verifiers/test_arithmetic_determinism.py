"""The arithmetic verifier's verdicts do not depend on the machine's load.

The fault this keeps: ``check`` stopped reading an answer when the wall clock passed its
``budget_ms``, so two full ``veracity eval`` runs under load disagreed on five math verdicts.
The budget is now counted in operations (``verifiers/arithmetic/_work.py``): the same answer
gives the same checks whatever the clock says, and work cut short gives ``unknown`` with
``evidence.kind == "budget"`` -- never a different ``pass``/``fail``.

Oracle: the claims are generated with their values computed by Python's ``Fraction`` here; the
test asserts against those values, never against the verifier's own parser.
"""

from __future__ import annotations

import random
import time
from fractions import Fraction

import pytest

from verifiers import arithmetic
from verifiers.arithmetic import check


def _claims(seed: int, n: int) -> tuple[str, list[bool]]:
    """``n`` sentences "a op b = c." with c right or wrong by the ``Fraction`` oracle."""
    rng = random.Random(seed)
    out, right = [], []
    for _ in range(n):
        a, b = rng.randint(2, 999), rng.randint(2, 99)
        op = rng.choice("+-*")
        v = {"+": Fraction(a + b), "-": Fraction(a - b), "*": Fraction(a * b)}[op]
        ok = rng.random() < 0.5
        c = v if ok else v + rng.randint(1, 9)
        out.append(f"Step: {a} {op} {b} = {c}.")
        right.append(ok)
    return "\n".join(out), right  # one claim a line: the budget is checked between lines


def _verdicts(text: str, **kw) -> list[tuple[str, str, str | None]]:
    return [(c.outcome, c.claim, c.evidence.get("kind")) for c in check(text, **kw)]


@pytest.mark.parametrize("budget_ms", [0, 0.0, -5, 1e-9])
def test_a_budget_of_zero_gives_unknown_never_pass_or_fail(budget_ms):
    text, _ = _claims(1, 6)
    checks = check(text, budget_ms=budget_ms)
    assert checks and all(c.outcome == "unknown" for c in checks), [(c.outcome, c.claim) for c in checks]
    assert checks[0].evidence["kind"] == "budget"


def test_a_budget_of_zero_leaves_the_question_link_unknown():
    """The link to the question is decided on the answer's checks; with the answer unread it
    must not fail (the unread claim may state the question's expression)."""
    checks = check("The answer is 5. Indeed 2 + 2 = 4.", "2+2", budget_ms=0)
    assert "fail" not in [c.outcome for c in checks] and "pass" not in [c.outcome for c in checks]


def test_every_budget_gives_a_prefix_of_the_full_verdicts_then_unknown():
    """Cut anywhere, the checks before the cut are the full run's checks and the rest is one
    ``budget`` unknown: a budget changes how far the answer is read, never a verdict."""
    text, right = _claims(7, 40)
    full = _verdicts(text, budget_ms=1e9)
    assert [o for o, _, _ in full] == ["pass" if r else "fail" for r in right]  # the Fraction oracle
    seen_cut = False
    for budget in (0.5, 1, 2, 5, 10, 20, 40, 80):
        got = _verdicts(text, budget_ms=budget)
        if got[-1][2] == "budget":
            seen_cut = True
            assert got[-1][0] == "unknown"
            assert got[:-1] == full[:len(got) - 1]
        else:
            assert got == full
    assert seen_cut


def test_the_verdicts_do_not_depend_on_the_wall_clock(monkeypatch):
    """A clock that jumps an hour per call (a machine under heavy load, as seen from the
    verifier) gives the same checks as a quiet one."""
    text, _ = _claims(3, 30)
    text += " Und 1.500 + 250 = 1.750. Also 6/2(1+2) = 1 and 2^3^2 = 64."
    quiet = _verdicts(text)
    now = [0.0]

    def jumping() -> float:
        now[0] += 3600.0
        return now[0]

    monkeypatch.setattr(time, "perf_counter", jumping)
    monkeypatch.setattr(time, "monotonic", jumping)
    monkeypatch.setattr(time, "time", jumping)
    assert _verdicts(text) == quiet


def test_a_long_answer_stops_at_the_same_claim_every_time():
    text, _ = _claims(11, 2000)
    first = _verdicts(text)
    assert first[-1][2] == "budget" and first[-1][0] == "unknown"  # the default budget binds here
    assert _verdicts(text) == first


def test_the_real_answers_stay_within_the_default_budget():
    """The costs over-estimate: a long competition solution with identities, second
    evaluations and conversions is read to its end under the default budget."""
    text = ("\\[ (a+b)^2 = a^2 + 2ab + b^2 \\] and \\[ (a-b)^2 = a^2 - 2ab + b^2 \\]. "
            + " ".join(f"Then {k} \\times 7 = {k * 7 + 1}." for k in range(20))
            + " So 5 km = 3.11 miles. " * 3)
    assert "budget" not in [k for _, _, k in _verdicts(text)]


def test_warm_up_is_still_possible():
    arithmetic.warm_up()
