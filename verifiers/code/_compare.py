"""Comparing what the sandbox showed with what the answer states -- in the gateway.

The harness (:mod:`verifiers.code._harness`) only frames the run; every comparison happens
here, on text the sandbox backend captured (the answer's own prints) and on the ``repr`` text
of a statement's value. Values are rebuilt from that text with :func:`ast.literal_eval` (plus
the reprs of numpy scalars/arrays, ``Fraction`` and ``Decimal``), so the answer's ``__eq__``
never decides a comparison (docs/design.md "A verdict rests on what the checked content cannot write").

Rules (unchanged from the in-sandbox comparison they replace): doctest's ``OutputChecker``
with ``ELLIPSIS | NORMALIZE_WHITESPACE``; literals compared leniently (numbers with
``math.isclose(rel_tol=1e-6, abs_tol=1e-9)`` or rounding to the stated number of decimals,
lists/tuples element-wise, a 1-tuple against its element, dicts by keys and values);
whitespace-normalized text; ``True``/``False``/``None``/``null`` case-insensitively; numpy's
``[1 2 3]`` against ``[1, 2, 3]``.

Printed output against a stated output or a question's expected output: whitespace-normalised
lines, doctest's checker for a whole output, a stated line anywhere in what was printed
(:func:`_compare_stdout`); numbers token by token within ``rel 1e-6`` (:func:`_numbers_match`).
"""

from __future__ import annotations

import doctest
import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from verifiers import _pyast

_CHECKER = doctest.OutputChecker()
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
_NP_SCALAR = re.compile(r"\bnp\.(?:float|int|uint|bool|complex|str|bytes)_?\d*\(([^()]*)\)")
_NP_ARRAY = re.compile(r"^array\((.*?)(?:,\s*dtype=[\w.]+)?\)$", re.S)
_FRACTION = re.compile(r"^Fraction\((-?\d+),\s*(\d+)\)$")
_DECIMAL = re.compile(r"^Decimal\('([^']*)'\)$")
_MISSING = object()


def _lit(text: str) -> tuple[bool, Any]:
    try:
        return True, _pyast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def value_from_repr(text: str | None) -> Any:
    """The plain Python value a ``repr`` text stands for, or ``_MISSING`` when it is not one
    (a user object's repr). Handles literals, ``np.float64(0.5)``, ``array([1, 2])``,
    ``Fraction(1, 2)``, ``Decimal('0.5')``."""
    if text is None or len(text) > 20_000:
        return _MISSING
    t = text.strip()
    ok, v = _lit(t)
    if ok:
        return v
    m = _FRACTION.match(t)
    if m:
        return Fraction(int(m.group(1)), int(m.group(2)))
    m = _DECIMAL.match(t)
    if m:
        try:
            return Decimal(m.group(1))
        except InvalidOperation:
            return _MISSING
    u = _NP_SCALAR.sub(r"\1", t)
    m = _NP_ARRAY.match(u)
    if m:
        u = m.group(1)
    if u != t:
        ok, v = _lit(u)
        if ok:
            return v
    return _MISSING


def _as_number(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float, Fraction, Decimal)):
        try:
            return float(x)
        except (OverflowError, ValueError):
            return None
    return None


def _decimals(text: str) -> int | None:
    t = text.strip()
    return len(t.split(".", 1)[1]) if "." in t and t.replace(".", "", 1).lstrip("-").isdigit() else None


def same(got: Any, want: Any, want_text: str = "") -> bool:
    """Lenient equality of two plain values (see the module docstring)."""
    try:
        a, b = _as_number(got), _as_number(want)
        if a is not None and b is not None:
            if math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9):
                return True
            d = _decimals(want_text)
            return d is not None and round(a, d) == round(b, d)
        if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
            return len(got) == len(want) and all(same(x, y) for x, y in zip(got, want))
        if isinstance(got, tuple) and len(got) == 1 and not isinstance(want, tuple):
            return same(got[0], want, want_text)  # `("Venus")` in prose means a 1-tuple
        if isinstance(got, dict) and isinstance(want, dict):
            return got.keys() == want.keys() and all(same(got[k], want[k]) for k in got)
        r = got == want
        return bool(r) if isinstance(r, bool) else False
    except Exception:  # noqa: BLE001 - plain values only; a comparison that breaks is no match
        return False


def compare(got_text: str, value_repr: str | None, has_value: bool, want: str) -> str:
    """``'pass' | 'mismatch' | 'unknown'`` for one example/statement.

    ``got_text``: what a REPL would show (the captured prints, then the value's repr when the
    statement is an expression with a value); ``value_repr``: that repr alone (or None);
    ``want``: the stated output. An empty ``want`` after a boolean expression (``>>> f(x) == y``
    with no output line) is read as an assertion: ``True`` passes, ``False`` mismatches.
    """
    value = value_from_repr(value_repr) if has_value and value_repr is not None else _MISSING
    if not want.strip():
        if has_value and isinstance(value, bool):
            return "pass" if value else "mismatch"
        return "pass" if not got_text.strip() else "unknown"
    if _CHECKER.check_output(want + "\n", got_text, _FLAGS):
        return "pass"
    ok, wv = _lit(want)
    if ok:
        if value is not _MISSING and same(value, wv, want):
            return "pass"
        pv = value_from_repr(got_text)
        if pv is not _MISSING and same(pv, wv, want):
            return "pass"
    g, w = " ".join(got_text.split()), " ".join(want.split())
    if g == w or (w.lower() in ("true", "false", "none", "null") and g.lower() == w.lower().replace("null", "none")):
        return "pass"
    # numpy prints `[1 2 3]` where prose writes `[1, 2, 3]`: formatting, not a wrong value
    if " ".join(g.replace(",", " ").split()) == " ".join(w.replace(",", " ").split()):
        return "pass"
    return "mismatch"


def raises_as_stated(want: str, exc_type: str | None) -> bool:
    """True when ``want`` is a doctest traceback whose last line names ``exc_type``."""
    if not exc_type or not want.lstrip().startswith("Traceback (most recent call last)"):
        return False
    last = want.strip().splitlines()[-1]
    return last.split(":", 1)[0].strip().split(".")[-1] == exc_type


def _numbers_match(got: str, want: str) -> bool:
    """Token-wise equality with float tolerance (rel 1e-6), for printed answers like ``2.50``."""
    g, w = got.split(), want.split()
    if len(g) != len(w):
        return False
    for a, b in zip(g, w):
        if a == b:
            continue
        try:
            fa, fb = float(a), float(b)
        except ValueError:
            return False
        if not (abs(fa - fb) <= 1e-6 * max(1.0, abs(fb))):
            return False
    return True


def _norm_ws(s: str) -> str:
    return "\n".join(" ".join(ln.split()) for ln in s.strip().split("\n") if ln.strip())


def _compare_stdout(got: str, want: str, *, whole: bool) -> str:
    g, w = _norm_ws(got), _norm_ws(want)
    if whole:
        if g == w or doctest.OutputChecker().check_output(want.strip() + "\n", got.strip() + "\n",
                                                           doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE):
            return "pass"
        if not g:
            return "unknown"  # printed nothing: the output may come from code the user runs
        return "mismatch"
    lines = g.split("\n")
    if w in lines or w == g or (w and w in g):
        return "pass"
    return "mismatch" if g else "unknown"
