"""Whitelisted expression trees and their bounded exact evaluation.

Nothing here ever calls ``eval``, ``sympify`` or ``parse_expr``: the parser (``_tokens``) builds
the tuples below from tokens, and ``evaluate`` walks only these node kinds. Rational arithmetic
is exact (``fractions.Fraction``, the same field as SymPy's ``Rational``); irrational results
(square roots, ``pi``, fractional powers) fall back to binary floating point, which the
tolerance rules absorb with their relative epsilon.

Node kinds (plain tuples, cheap to build):
    ("num", Literal)            a number as written (value, decimals, money, percent, ...)
    ("neg", node)               unary minus
    ("bin", op, left, right)    op in "+-*/", "//" (floor division), "%" (remainder; Python's
                                conventions: ``a // b = floor(a / b)``, ``a % b = a - b * (a // b)``)
    ("pow", base, exponent)
    ("fact", node)              postfix ``!``
    ("pct", node)               postfix ``%`` on a parenthesised expression
    ("func", name, node)        name in FUNCTIONS
    ("const", name)             "pi" | "e"
    ("var", name)               a symbol (only meaningful for ``equivalent``)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Union

Value = Union[Fraction, float]

FUNCTIONS = frozenset({"sqrt", "abs", "sin", "cos", "tan", "log", "ln", "exp"})
CONSTANTS = frozenset({"pi", "e"})

# Work bounds (per expression). An integer power is refused when its result would need more
# than MAX_BITS bits; factorials are refused above MAX_FACTORIAL; trees above MAX_NODES nodes
# or MAX_DEPTH nesting are refused by the parser. Each bound keeps one claim to ~1 ms.
MAX_BITS = 20_000
MAX_FACTORIAL = 300
MAX_NODES = 400
MAX_DEPTH = 40
MAX_EXPONENT = 10_000


class Refused(Exception):
    """The expression is well-formed but too expensive to evaluate within the work bounds."""


class NotNumeric(Exception):
    """The expression has symbols, or an operation with no real value (division by zero)."""


@dataclass(slots=True)
class Literal:
    """A number as the text states it.

    ``value`` is exact. ``ulp`` is one unit of the last stated digit (``0.01`` for ``3.14``,
    ``1`` for ``$45``: the cent precision of money is a tolerance rule, not a property of the
    literal), already scaled by ``%`` or a scale word (``2.5 million``). ``approx_ulp`` is the
    unit of the last *significant* digit (``100`` for ``3,400``), used by the "about" rule.
    """

    value: Fraction
    text: str
    decimals: int = 0
    ulp: Fraction = Fraction(1)
    approx_ulp: Fraction = Fraction(1)
    money: str | None = None  # currency symbol or word ("$", "€", "dollars", "cents")
    percent: bool = False
    unit: str | None = None  # trailing unit word(s), lower-case ("apples", "km", "degf")


def literal_from_text(
    digits: str,
    *,
    currency: str | None = None,
    percent: bool = False,
    scale: int = 1,
    text: str | None = None,
) -> Literal:
    """Build a ``Literal`` from a digit string like ``11,607.55`` or ``.5`` or ``2 1/2``.

    Raises ``ValueError`` when the digits are not a number.
    """
    raw = digits.replace(",", "").strip()
    if " " in raw:  # mixed number "2 1/2"
        whole, frac = raw.split(None, 1)
        n, d = frac.split("/")
        value = Fraction(int(whole)) + Fraction(int(n), int(d))
        decimals = 0
        ulp = approx = Fraction(1, int(d))
    else:
        if "." in raw:
            whole, frac = raw.split(".", 1)
            decimals = len(frac)
            value = Fraction(int((whole or "0") + frac), 10**decimals)
            ulp = approx = Fraction(1, 10**decimals)
        else:
            value = Fraction(int(raw))
            decimals = 0
            ulp = Fraction(1)
            stripped = raw.lstrip("0")
            tz = len(stripped) - len(stripped.rstrip("0")) if stripped else 0
            approx = Fraction(10**tz)
    if scale == 1 and not percent:
        return Literal(value=value, text=text if text is not None else digits, decimals=decimals, ulp=ulp,
                       approx_ulp=approx, money=currency, percent=False)
    factor = Fraction(scale) / (100 if percent else 1)
    return Literal(
        value=value * factor,
        text=text if text is not None else digits,
        decimals=decimals,
        ulp=ulp * factor,
        approx_ulp=approx * factor,
        money=currency,
        percent=percent,
    )


def is_literal(node: tuple) -> bool:
    """True for a bare number, possibly negated (``12``, ``-3.5``, ``$45``)."""
    while node[0] == "neg":
        node = node[1]
    return node[0] == "num"


def literal_of(node: tuple) -> tuple[Literal, int]:
    """The literal of a bare-number node and its sign (+1/-1)."""
    sign = 1
    while node[0] == "neg":
        sign = -sign
        node = node[1]
    return node[1], sign


def has_operation(node: tuple) -> bool:
    """True when the tree computes something (any operator, function, factorial)."""
    kind = node[0]
    if kind == "num" or kind == "const" or kind == "var":
        return False
    if kind == "neg":
        return has_operation(node[1])
    return True


def first_literal(node: tuple) -> Literal | None:
    """The leftmost number of a tree (``13`` in ``13 - 4``), or ``None``."""
    while True:
        kind = node[0]
        if kind == "num":
            return node[1]
        if kind == "bin":
            node = node[2]
        elif kind in ("pow",):
            node = node[1]
        else:
            return None


def has_var(node: tuple) -> bool:
    """True when the tree contains a symbol (then it is algebra, not arithmetic)."""
    kind = node[0]
    if kind == "var":
        return True
    if kind in ("num", "const"):
        return False
    return any(has_var(c) for c in node[1:] if isinstance(c, tuple))


def _bits(q: Fraction) -> int:
    return max(q.numerator.bit_length(), q.denominator.bit_length())


def _check_size(q: Fraction) -> Fraction:
    if _bits(q) > MAX_BITS:
        raise Refused("intermediate value too large")
    return q


def _to_float(v: Value) -> float:
    try:
        return float(v)
    except OverflowError as exc:
        raise Refused("value out of floating-point range") from exc


def _pow(base: Value, exp: Value) -> Value:
    if isinstance(exp, Fraction) and exp.denominator == 1:
        e = exp.numerator
        if abs(e) > MAX_EXPONENT:
            raise Refused("exponent too large")
        if isinstance(base, Fraction):
            if base == 0 and e < 0:
                raise NotNumeric("division by zero")
            if _bits(base) * abs(e) > MAX_BITS:
                raise Refused("power too large")
            return base**e
        try:
            return base**e
        except (OverflowError, ZeroDivisionError) as exc:
            raise Refused("power out of range") from exc
    # fractional exponent: exact square roots of perfect squares, floats otherwise
    if isinstance(base, Fraction) and isinstance(exp, Fraction) and exp.denominator == 2 and base >= 0:
        n, d = base.numerator, base.denominator
        rn, rd = math.isqrt(n), math.isqrt(d)
        if rn * rn == n and rd * rd == d:
            return _pow(Fraction(rn, rd), Fraction(exp.numerator))
    b, x = _to_float(base), _to_float(exp)
    if b < 0:
        raise NotNumeric("fractional power of a negative number")
    if b == 0 and x < 0:
        raise NotNumeric("division by zero")
    try:
        r = b**x
    except OverflowError as exc:
        raise Refused("power out of range") from exc
    return r


def evaluate(node: tuple, _depth: int = 0, env: dict[str, Value] | None = None) -> Value:
    """Value of a tree: ``Fraction`` when exact, ``float`` when irrational.

    ``env`` gives values to symbols (used by ``equivalent``'s random-point test). Raises
    ``NotNumeric`` (unbound symbols, division by zero, domain errors) or ``Refused`` (work
    bounds exceeded). Never evaluates text.
    """
    if _depth > MAX_NODES:
        raise Refused("expression nested too deeply")
    kind = node[0]
    if kind == "num":
        return node[1].value
    if kind == "neg":
        return -evaluate(node[1], _depth + 1, env)
    if kind == "bin":
        op = node[1]
        a = evaluate(node[2], _depth + 1, env)
        b = evaluate(node[3], _depth + 1, env)
        if op == "/":
            if b == 0:
                raise NotNumeric("division by zero")
            r = a / b
        elif op == "*":
            r = a * b
        elif op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op in ("//", "%"):
            if b == 0:
                raise NotNumeric("division by zero")
            q = math.floor(a / b)
            r = Fraction(q) if op == "//" else a - b * q
        else:  # pragma: no cover - parser only emits these
            raise NotNumeric(op)
        return _check_size(r) if isinstance(r, Fraction) else _finite(r)
    if kind == "pow":
        return _pow(evaluate(node[1], _depth + 1, env), evaluate(node[2], _depth + 1, env))
    if kind == "pct":
        return evaluate(node[1], _depth + 1, env) / 100
    if kind == "fact":
        v = evaluate(node[1], _depth + 1, env)
        if not (isinstance(v, Fraction) and v.denominator == 1 and v >= 0):
            raise NotNumeric("factorial of a non-natural number")
        if v > MAX_FACTORIAL:
            raise Refused("factorial too large")
        return Fraction(math.factorial(int(v)))
    if kind == "const":
        return math.pi if node[1] == "pi" else math.e
    if kind == "func":
        arg = evaluate(node[2], _depth + 1, env)
        if node[1] in TRIG and in_degrees(node[2]):  # "\\cos 60^\\circ", "\\tan 45°": degrees
            arg = _to_float(arg) * math.pi / 180
        return _func(node[1], arg)
    if kind == "var" and env is not None and node[1] in env:
        return env[node[1]]
    raise NotNumeric("symbol")


TRIG = frozenset({"sin", "cos", "tan"})
DEGREE_UNITS = frozenset({"deg", "degree", "degrees"})


def in_degrees(node: tuple) -> bool:
    """True when a number of the tree is stated in degrees (``60^\\circ``, ``60°``, "60
    degrees"): the argument of a trigonometric function is then an angle in degrees."""
    if node[0] == "num":
        return node[1].unit in DEGREE_UNITS
    return any(in_degrees(c) for c in node[1:] if isinstance(c, tuple))


def _finite(x: float) -> float:
    if math.isinf(x) or math.isnan(x):
        raise Refused("value out of floating-point range")
    return x


def _func(name: str, v: Value) -> Value:
    if name == "abs":
        return abs(v)
    if name == "sqrt":
        return _pow(v, Fraction(1, 2))
    x = _to_float(v)
    try:
        if name == "sin":
            return math.sin(x)
        if name == "cos":
            return math.cos(x)
        if name == "tan":
            return math.tan(x)
        if name in ("log", "ln"):
            if x <= 0:
                raise NotNumeric("log of a non-positive number")
            return math.log(x) if name == "ln" else math.log10(x)
        if name == "exp":
            if x > 700:
                raise Refused("exp too large")
            return math.exp(x)
    except ValueError as exc:
        raise NotNumeric(str(exc)) from exc
    raise NotNumeric(name)


def interval(node: tuple) -> tuple[Fraction, Fraction] | None:
    """Range of a tree's value when each stated decimal with >= 2 decimals may be a rounded
    intermediate (``33.33`` for 100/3). ``None`` when the tree has other operations.

    Used only to turn a would-be ``fail`` into ``unknown`` ("consistent with rounded inputs").
    """
    kind = node[0]
    if kind == "num":
        lit: Literal = node[1]
        if lit.decimals >= 2 and not lit.money:
            h = lit.ulp / 2
            return (lit.value - h, lit.value + h)
        return (lit.value, lit.value)
    if kind == "neg":
        r = interval(node[1])
        return None if r is None else (-r[1], -r[0])
    if kind == "pct":
        r = interval(node[1])
        return None if r is None else (r[0] / 100, r[1] / 100)
    if kind == "bin":
        a, b = interval(node[2]), interval(node[3])
        if a is None or b is None:
            return None
        op = node[1]
        if op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if op == "*":
            c = [x * y for x in a for y in b]
            return (min(c), max(c))
        if op == "/":
            if b[0] <= 0 <= b[1]:
                return None
            c = [x / y for x in a for y in b]
            return (min(c), max(c))
    return None


def to_text(node: tuple) -> str:
    """Normalised ASCII form of a tree (``(3 + 4) * 2``), used as evidence."""
    return _text(node, 0)


_PREC = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2}


def _text(node: tuple, parent: int) -> str:
    kind = node[0]
    if kind == "num":
        lit: Literal = node[1]
        v = lit.value
        return _fmt_exact(v)
    if kind == "neg":
        s = "-" + _text(node[1], 3)
        return f"({s})" if parent > 1 else s
    if kind == "bin":
        p = _PREC[node[1]]
        right_p = p + 1
        s = f"{_text(node[2], p)} {node[1]} {_text(node[3], right_p)}"
        return f"({s})" if p < parent else s
    if kind == "pow":
        s = f"{_text(node[1], 4)}^{_text(node[2], 4)}"
        return f"({s})" if parent >= 4 else s
    if kind == "fact":
        return f"{_text(node[1], 5)}!"
    if kind == "pct":
        return f"({_text(node[1], 0)})%"
    if kind == "func":
        return f"{node[1]}({_text(node[2], 0)})"
    return str(node[1])


def _fmt_exact(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    d = v.denominator
    # terminating decimal?
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        s = f"{v.numerator / v.denominator!r}"
        exact = Fraction(s)
        if exact == v:
            return s
    return f"{v.numerator}/{v.denominator}"


def _sci(v: Fraction) -> str:
    """Scientific notation with 12 significant digits for very large/small exact values."""
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = 12
        d = decimal.Decimal(v.numerator) / decimal.Decimal(v.denominator)
        return f"{d:.11e}"


def format_value(v: Any, decimals: int | None = None) -> str:
    """Human form of a computed value: exact integers/decimals as is; otherwise rounded to
    ``decimals`` places (or 10 significant digits)."""
    if isinstance(v, Fraction) and v and (abs(v.numerator) >= 10**30 * v.denominator or 10**30 * abs(v.numerator) < v.denominator):
        return _sci(v)
    if isinstance(v, Fraction):
        if decimals is not None:
            scaled = v * 10**decimals
            if (scaled - (scaled.numerator // scaled.denominator)) == Fraction(1, 2):
                # an exact tie (1157.625 to cents): either neighbour is a correct rounding, so
                # show the exact value rather than pick one and contradict the stated value
                return _fmt_exact(v)
            q = round(scaled)
            sign = "-" if q < 0 else ""
            digits = str(abs(q)).rjust(decimals + 1, "0")
            if decimals == 0:
                return sign + digits
            return f"{sign}{digits[:-decimals]}.{digits[-decimals:]}"
        if v.denominator > 10**12:
            return f"{float(v):.10g}"
        s = _fmt_exact(v)
        if "/" not in s:
            return s
        return f"{float(v):.10g}"
    if decimals is not None:
        return f"{v:.{decimals}f}"
    return f"{v:.10g}"
