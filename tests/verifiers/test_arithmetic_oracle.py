"""Differential tests of the arithmetic verifier against independent oracles (hypothesis,
fixed seed, bounded; the long run is ``bench/arithmetic_oracle_bench.py``).

docs/design.md "Test against an independent oracle": "Test a verifier against an independent
oracle (generated inputs in every notation, exact evaluation of what was generated), never against
its own parser." Expression trees are generated (``tests/arith_oracle_gen.py``), rendered in each
notation inside prose, display math, a table or a code comment, with the right value (correctly
rounded) or a wrong one (at least two units of the last stated place off; the tolerance is half a
unit). The oracle evaluates the *tree* with ``fractions.Fraction``. Invariants:

* a right statement is never ``fail``;
* a wrong statement is never ``pass``;
* a ``fail``'s ``expected`` is the oracle's value rounded to the places it shows.

The same for ``equivalent()`` (generated identities and near-identities; oracle: exact
evaluation at random rational points), unit conversions (oracle: pint) and the planner's
``calculate`` tool.
"""

from __future__ import annotations

import pytest

import asyncio
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import pint
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests import arith_oracle_gen as gen
from verifiers.arithmetic import check, equivalent
from verifiers.planner import Toolbox
from verifiers.planner._tools import CalculateIn

SETTINGS = dict(derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
_UREG = pint.UnitRegistry()


def _number(s: str) -> Fraction | None:
    try:
        return Fraction(Decimal(s.replace(",", "").split()[0]))
    except (InvalidOperation, ValueError, IndexError):
        return None


def expected_matches(expected: str | None, oracle: Fraction) -> bool:
    """A fail's ``expected`` is the oracle rounded to the places it shows (or exactly it)."""
    if expected is None:
        return False
    e = _number(expected)
    if e is None:
        return False
    places = len(expected.split()[0].partition(".")[2])
    return abs(e - oracle) <= Fraction(1, 2 * 10**places) + abs(oracle) * Fraction(1, 10**9)


def violations(stmt: gen.Statement) -> list[str]:
    """The invariants a statement's checks break (empty when none)."""
    out = []
    for c in check(stmt.text):
        if stmt.right and c.outcome == "fail":
            out.append(f"false alarm: {c.claim!r} expected {c.expected} ({c.note})")
        if not stmt.right and c.outcome == "pass":
            out.append(f"wrong statement passed: {c.claim!r} ({c.note})")
        if c.outcome == "fail" and not expected_matches(c.expected, stmt.oracle):
            out.append(f"fail with expected {c.expected} but the oracle says {float(stmt.oracle)!r}")
    return out


@settings(max_examples=500, **SETTINGS)
@given(st.randoms(use_true_random=False), st.sampled_from(gen.NOTATIONS), st.booleans())
@pytest.mark.slow
def test_statements_in_every_notation(rng, notation, right):
    try:
        stmt = gen.statement(rng, notation, right)
    except gen.NoValue:
        assume(False)
        return
    assert violations(stmt) == [], stmt


@settings(max_examples=150, **SETTINGS)
@given(st.randoms(use_true_random=False), st.sampled_from(sorted(gen.FORMULA_STYLES)), st.booleans())
def test_equivalent_against_evaluation_at_rational_points(rng, style, identity):
    a = gen.sym_tree(rng)
    b = gen.rewrite(a, rng) if identity else gen.perturb(a, rng)
    differs = gen.differs(a, b, rng)
    assume(differs is not None)
    assume(identity or differs)  # a perturbation that changes nothing is no near-identity
    assert not (identity and differs), "the generator's rewrite changed the value"
    s = gen.FORMULA_STYLES[style]
    c = equivalent(gen.render(a, s), gen.render(b, s))
    if identity:
        assert c.outcome != "fail", (gen.render(a, s), gen.render(b, s), c)
    else:
        assert c.outcome != "pass", (gen.render(a, s), gen.render(b, s), c)


@settings(max_examples=150, **SETTINGS)
@given(st.randoms(use_true_random=False), st.booleans())
def test_unit_conversions_against_pint(rng, right):
    text, oracle, d, stated = gen.conversion(rng, right, _UREG)
    scaled = oracle * 10**d
    assume(abs(scaled - round(scaled) - Fraction(1, 2)) > Fraction(1, 10**6))  # no rounding tie
    assume(abs(scaled - round(scaled) + Fraction(1, 2)) > Fraction(1, 10**6))
    for c in check(text):
        if c.evidence.get("kind") != "unit_conversion":
            continue
        assert not (right and c.outcome == "fail"), (text, c)
        assert not (not right and c.outcome == "pass"), (text, c)
        if c.outcome == "fail":
            assert expected_matches(c.expected, oracle), (text, c.expected, float(oracle))


@settings(max_examples=150, **SETTINGS)
@given(st.randoms(use_true_random=False), st.sampled_from([n for n in gen.NOTATIONS if n != "words"]))
def test_planner_calculate_against_the_tree(rng, notation):
    t = gen.tree(rng)
    try:
        v = gen.value(t)
    except gen.NoValue:
        assume(False)
        return
    expr = gen.render(t, gen.STYLES[notation])
    out = asyncio.run(Toolbox().get("calculate").run(CalculateIn(expression=expr)))
    assume(out.error is None or "no value" not in out.error)
    assert out.error is None, (expr, out.data)
    # no "exact" key: the value is written exactly; "exact": p/q; "exact": None: 10 significant digits
    if out.data.get("exact"):
        assert Fraction(out.data["exact"]) == v, (expr, out.data, v)
    elif "exact" not in out.data:
        assert Fraction(Decimal(out.data["value"])) == v, (expr, out.data, v)
    else:
        assert abs(Fraction(Decimal(out.data["value"])) - v) <= abs(v) * Fraction(1, 10**9), (expr, out.data, v)
