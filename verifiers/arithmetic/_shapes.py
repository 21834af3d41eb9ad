"""Shapes of a claim's expression trees the claim finder asks about: a tight range ("3-5"), a bare
fraction, percents (and ``a + p%`` read as p% of the base), a value used, a product only, sides
that differ in unit."""

from __future__ import annotations

from fractions import Fraction

from verifiers.arithmetic._expr import literal_of
from verifiers.arithmetic._tokens import Token
from verifiers.arithmetic._units import unit_info


def _tight_range(node: tuple, toks: list[Token]) -> bool:
    if not (node[0] == "bin" and node[1] == "-" and node[2][0] == "num" and node[3][0] == "num"):
        return False
    if len(toks) != 3 or toks[0].end != toks[1].start or toks[1].end != toks[2].start:
        return False
    return node[2][1].value < node[3][1].value


def _bare_fraction(node: tuple) -> bool:
    return node[0] == "bin" and node[1] == "/" and node[2][0] == "num" and node[3][0] == "num"


def _has_percent(node: tuple) -> bool:
    if node[0] == "num":
        return node[1].percent
    if node[0] == "pct":
        return True
    return any(_has_percent(c) for c in node[1:] if isinstance(c, tuple))


def _differs_in_unit(ln: tuple, rn: tuple) -> bool:
    a, b = literal_of(ln)[0], literal_of(rn)[0]
    return (a.unit or None) != (b.unit or None) and bool(unit_info(a.unit) or unit_info(b.unit))


def _uses_value(node: tuple, value: Fraction) -> bool:
    if node[0] == "num":
        return node[1].value == value
    return any(_uses_value(c, value) for c in node[1:] if isinstance(c, tuple))


def _has_hundred_percent(node: tuple) -> bool:
    if node[0] == "num":
        return node[1].percent and node[1].value == 1
    return any(_has_hundred_percent(c) for c in node[1:] if isinstance(c, tuple))


def _percent_on_base(node: tuple) -> tuple:
    """``node`` with every ``a + p%`` / ``a - p%`` (``p%`` a bare percent literal, ``a`` no
    percent) read as a calculator and prose read it: ``a * (1 + p/100)`` -- "100 - 20% = 80",
    "50 + 10% = 55" (the percent of the base, not the number ``p/100``). Nodes without such a
    sum come back unchanged (the same object)."""
    if node[0] == "bin" and node[1] in "+-" and node[3][0] == "num" and node[3][1].percent \
            and not _has_percent(node[2]):
        left = _percent_on_base(node[2])
        return ("bin", node[1], left, ("bin", "*", left, node[3]))
    if node[0] in ("num", "const", "var"):
        return node
    kids = [(_percent_on_base(c) if isinstance(c, tuple) else c) for c in node]
    return node if all(a is b for a, b in zip(kids, node)) else tuple(kids)


def _product_only(node: tuple) -> bool:
    """True for a tree of numbers joined by ``*`` and ``/`` only."""
    if node[0] == "num":
        return True
    return node[0] == "bin" and node[1] in "*/" and _product_only(node[2]) and _product_only(node[3])
