"""Identities with symbols tested at sample points before SymPy: both sides evaluated exactly at
fixed rational points (:func:`_sampled_difference`, :func:`_agrees_at`)."""

from __future__ import annotations

from fractions import Fraction

from verifiers.arithmetic._expr import NotNumeric, Refused, evaluate


_SAMPLE_POINTS = (Fraction(3, 7), Fraction(-5, 3), Fraction(11, 4))
_MORE_POINTS = (Fraction(7, 5), Fraction(-2, 9), Fraction(13, 6))


def _agrees_at(ln: tuple, rn: tuple, points: tuple[Fraction, ...]) -> bool:
    """Both sides defined, real and equal (relative 1e-9) at every point."""
    names = sorted(_names(ln, set()) | _names(rn, set()))
    for k, p in enumerate(points):
        env = {n: p + Fraction(j, 17 + k) for j, n in enumerate(names)}
        try:
            a, b = evaluate(ln, env=env), evaluate(rn, env=env)
            if isinstance(a, complex) or isinstance(b, complex) or abs(a - b) > 1e-9 * (1 + abs(a) + abs(b)):
                return False
        except (NotNumeric, Refused, OverflowError, ValueError, ZeroDivisionError, TypeError):
            # OverflowError also from the comparison: an exact rational past float range
            # against a float side (a^2013 = p^n), not comparable here: no verdict
            return False
    return True


def _sampled_difference(ln: tuple, rn: tuple) -> tuple[str, bool]:
    """Cheap pre-test before SymPy: both sides evaluated exactly (rationals; floats where a
    function is irrational) at three points, every symbol set to a different rational.
    First item: ``varies`` when the difference is not the same at all three (not an identity,
    not a constant difference: an equation in the symbols), ``zero``, ``constant`` (the same
    nonzero value), or ``same`` (undecided). Second: every value was an exact rational."""
    names = sorted(_names(ln, set()) | _names(rn, set()))
    diffs = []
    for k, p in enumerate(_SAMPLE_POINTS):
        env = {n: p + Fraction(j, 13 + k) for j, n in enumerate(names)}
        try:
            d = evaluate(ln, env=env) - evaluate(rn, env=env)
        except (NotNumeric, Refused, OverflowError, ValueError, ZeroDivisionError, TypeError):
            return "same", False
        diffs.append(d)
    exact = all(isinstance(d, Fraction) for d in diffs)
    lo, hi = min(diffs), max(diffs)
    try:
        spread = abs(hi - lo) > 1e-9 * (1 + abs(hi))
    except OverflowError:  # a rational past float range minus a float: undecided
        return "same", False
    if spread:
        return "varies", exact
    if exact:
        return ("zero" if hi == 0 else "constant"), True
    return "same", False


def _names(node: tuple, out: set[str]) -> set[str]:
    if node[0] == "var":
        out.add(node[1])
    for c in node[1:]:
        if isinstance(c, tuple):
            _names(c, out)
    return out


def _size(node: tuple) -> int:
    return 1 + sum(_size(c) for c in node[1:] if isinstance(c, tuple))
