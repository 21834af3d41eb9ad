"""When does a stated number agree with a computed one?

The rule follows the precision the text states (the convention of significant figures and
rounding in NIST SP 811, sec. 7.9 and appendix B.7 "rounding numbers"):

* ``=`` with a value written to k decimals: pass when it is the correctly rounded result,
  ``|computed - stated| <= 0.5 * 10**-k`` (plus a relative epsilon of 1e-9 for binary
  floating point and irrational results). ``3.33`` for 10/3 passes; ``3.34`` fails.
* "≈", "~", "about", "approximately", "roughly", "around": pass when the value is the
  computed one rounded to the *significant figures* the text states (``3,000`` has one,
  ``3.14`` three). Off by one unit of the last significant digit (double rounding) is
  ``unknown``, not ``fail``.
* money (``$``, ``€``, ``£``, ``¥``, "dollars"): amounts are exact to the cent, so
  ``|computed - stated| <= 0.005``.
* percent: ``25%`` agrees with a computed 0.25 and, by the common "x 100 = %" shorthand, with 25.
* a value below one stated as a whole number (``⅓ + ⅓ = 1``, ``1 / 3 = 0``) keeps no significant
  figure of it: ``unknown``, never a pass by rounding.
* never ``fail`` when the stated value is the computed one *truncated* (``0.666`` for 2/3,
  ``7`` for 7.5 people) or consistent with rounded inputs (``33.33 * 3 = 100``): those are
  ``unknown`` with a note, because a correct answer may say so on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from verifiers.arithmetic._expr import Literal, Value, format_value

REL_EPS = Fraction(1, 10**9)
ABS_EPS = Fraction(1, 10**12)
CENT_HALF = Fraction(1, 200)

_RANK = {"pass": 2, "unknown": 1, "fail": 0}


@dataclass(slots=True)
class Verdict:
    outcome: str  # pass | fail | unknown
    rule: str  # exact | decimals | sigfigs | cents
    expected: str
    tolerance: str
    note: str = ""
    confidence: float = 1.0


def _frac(v: Value) -> Fraction:
    return v if isinstance(v, Fraction) else Fraction(v)


def _eps(c: Fraction) -> Fraction:
    return abs(c) * REL_EPS + ABS_EPS


def judge(
    computed: Value,
    lit: Literal,
    *,
    sign: int = 1,
    approx: bool = False,
    bounds: tuple[Fraction, Fraction] | None | Callable[[], tuple[Fraction, Fraction] | None] = None,
) -> Verdict:
    """Compare a computed value with a stated literal (see module docstring).

    ``bounds`` is the range of the computed value when its inputs may be rounded
    intermediates; when the stated value fits it, a would-be failure becomes ``unknown``.
    """
    if isinstance(computed, float) and not math.isfinite(computed):
        return Verdict("unknown", "exact", "", "", "computed value is not finite", 0.5)
    c = _frac(computed)
    candidates = [(sign * lit.value, lit.ulp, lit.approx_ulp, "")]
    if lit.percent:
        candidates.append((sign * lit.value * 100, lit.ulp * 100, lit.approx_ulp * 100, " (percent read as x100)"))
    best: Verdict | None = None
    for value, ulp, aulp, how in candidates:
        v = _one(c, computed, value, ulp, aulp, lit, approx, bounds)
        if how and v.outcome == "pass":
            v.note = (v.note + how).strip()
        if best is None or _RANK[v.outcome] > _RANK[best.outcome]:
            best = v
    assert best is not None
    if lit.percent and best.outcome != "pass" and best.rule != "sigfigs":
        best.expected = format_value(c * 100, lit.decimals) + "%"
    return best


def _one(
    c: Fraction,
    computed: Value,
    stated: Fraction,
    ulp: Fraction,
    aulp: Fraction,
    lit: Literal,
    approx: bool,
    bounds: tuple[Fraction, Fraction] | None,
) -> Verdict:
    diff = abs(c - stated)
    eps = _eps(c)
    decimals = max(0, lit.decimals) if not lit.percent else None
    if approx:
        rule, half = "sigfigs", aulp / 2
        expected = _round_to(c, aulp)
    elif lit.money and lit.money != "¢" and lit.decimals <= 2:
        rule, half = "cents", CENT_HALF
        expected = format_value(c, 2) if c.denominator != 1 else format_value(c)
    else:
        rule, half = "decimals", ulp / 2
        expected = format_value(c, decimals) if (decimals is not None and c.denominator != 1) else format_value(computed)
    tol = f"±{format_value(half)}"
    if diff <= eps:
        return Verdict("pass", "exact", format_value(computed), "0", "", 1.0)
    if diff < half - eps or (diff <= half + eps and _tie_ok(c, stated, half)):
        if rule == "decimals" and not approx and ulp >= 1 and 0 < abs(c) < 1:
            # "⅓ + ⅓ = 1", "1 / 3 = 0": a value below one written as a whole number keeps none of
            # its significant figures -- rounding cannot vouch for it (nor fail it: "= 1 bus")
            return Verdict("unknown", rule, expected, tol, "a value below one stated as a whole number", 0.5)
        return Verdict("pass", rule, expected, tol, "stated value is the rounded result", 0.95)
    if approx and diff <= half * Fraction(11, 10) + eps:
        # double rounding (3454 -> 3500 -> 4000) is off by at most half a unit plus a tenth
        return Verdict("unknown", rule, expected, tol, "consistent with rounding in two steps", 0.5)
    # truncation at the stated precision; for whole numbers also rounding up ("8 buses")
    step = aulp if approx else ulp
    if step > 0:
        q = c / step
        toward_zero = math.floor(q) if q >= 0 else math.ceil(q)
        allowed = {toward_zero * step}
        if step >= 1:
            allowed |= {math.floor(q) * step, math.ceil(q) * step}
        if stated in allowed:
            return Verdict("unknown", rule, expected, tol, "stated value is the truncated result", 0.5)
    if c < 0 < stated and abs(-c - stated) <= half + eps:
        return Verdict("unknown", rule, expected, tol, "stated value is the magnitude of a negative result", 0.5)
    if callable(bounds):
        bounds = bounds()
    if bounds is not None and bounds[0] - half - eps <= stated <= bounds[1] + half + eps:
        return Verdict("unknown", rule, expected, tol, "consistent with rounded intermediate values", 0.5)
    return Verdict("fail", rule, expected, tol, "", 0.95)


def _tie_ok(c: Fraction, stated: Fraction, half: Fraction) -> bool:
    """On an exact tie (3.5 to a whole number) accept round-half-up and round-half-even only."""
    if abs(c - stated) != half or half == 0:
        return True
    step = 2 * half
    q = c / step  # k + 1/2 exactly
    lo, hi = math.floor(q), math.ceil(q)
    up = hi if c >= 0 else lo
    even = lo if lo % 2 == 0 else hi
    return stated in (up * step, even * step)


def _round_to(c: Fraction, step: Fraction) -> str:
    if step <= 0:
        return format_value(c)
    q = round(c / step) * step
    if step >= 1:
        return format_value(q)
    k = 0
    s = step
    while s < 1 and k < 30:
        s *= 10
        k += 1
    return format_value(q, k)


def equal_values(a: Value, b: Value) -> bool:
    """Exact equality up to the relative epsilon (for ``expr = expr`` pairs)."""
    fa, fb = _frac(a), _frac(b)
    return abs(fa - fb) <= _eps(fa) + _eps(fb)
