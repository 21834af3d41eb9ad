"""A second, independent evaluation of an expression before its claim is failed.

docs/design.md "False alarms cost more than misses": *a failure that drives a correction is
confirmed where a second reading exists*; docs/arithmetic.md, "Two evaluators before a failure":
cross-check the tools, stay sceptical of tool output. A ``fail`` drives a re-ask that rewrites the
answer, so a misreading of the notation (the ``**`` dropped as markdown bold once turned a right
compound-interest line into "= 121500") must not reach it alone.

What is independent here, and what is shared
--------------------------------------------
When the written span is plain arithmetic (``plain_string``: digits, operators, brackets,
LaTeX products, fractions and powers, Unicode operators), SymPy reads the written text itself
and nothing is shared but the span's boundaries. Otherwise it reads ``expression_string``:
shared are the normalised text and the token boundaries (where the expression starts and ends,
which words are units). Independent: the reading of each number from its own text (currency,
thousands separators, percent, scale words, mixed numbers), the grammar (operator
precedence, associativity, unary minus, implicit products: Python's, through SymPy's parser
``sympy.parsing.sympy_parser.parse_expr`` with the standard transformations, implicit
multiplication/application and ``rationalize``), and the arithmetic (a walk over SymPy's
unevaluated tree with exact rationals; irrational values in a local mpmath context at 30
digits, never the process-global one).

Safety: ``parse_expr`` evaluates Python. It only ever sees a string this module assembles from
whitelisted pieces (digits, ``+ - * / // % ** ( ) !``, and the names in ``_NAMES``), checked
against ``_SAFE`` before the call; model text never reaches it. Work is bounded before parsing
(exponents, factorials, ``//``/``%`` next to powers) and while walking (``MAX_BITS``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

from verifiers.arithmetic._expr import DEGREE_UNITS, MAX_BITS, MAX_EXPONENT, MAX_FACTORIAL

__all__ = ["Unconfirmed", "expression_string", "plain_string", "second_value"]


class Unconfirmed(Exception):
    """The second evaluator cannot read or evaluate the expression."""


_NAMES = {"sqrt": "sqrt", "abs": "Abs", "sin": "sin", "cos": "cos", "tan": "tan", "ln": "log", "log": "log10",
          "exp": "exp"}
_SAFE = re.compile(r"(?:[0-9.+\-*/%()! ]|(?<![A-Za-z_])(?:sqrt|Abs|sind|cosd|tand|sin|cos|tan|log10|log|exp|pi|E)"
                   r"(?![A-Za-z_]))*")
_NUMBER = re.compile(
    r"^\s*(?P<cur>[$€£¥₹])?\s*(?P<whole>\d[\d, ]*|)(?:\.(?P<frac>\d+))?(?:\s+(?P<n>\d+)/(?P<d>\d+))?"
    r"\s*(?P<pct>%)?\s*(?P<scale>thousand|million|billion|trillion|k)?\s*$", re.I)
_SCALE = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12, "k": 3}
_DPS = 30
_LOCAL: dict[str, Any] | None = None  # names for parse_expr, built once (read-only afterwards)


def _number(text: str) -> str:
    """A number token's text read again from scratch, as a Python expression string:
    ``$1,234.50`` -> ``1234.50``, ``15%`` -> ``(15/100)``, ``2 1/2`` -> ``(2+1/2)``,
    ``2.5 million`` -> ``(2.5*10**6)``."""
    m = _NUMBER.match(text)
    if m is None or not (m.group("whole") or m.group("frac")):
        raise Unconfirmed(f"number {text!r}")
    whole = re.sub(r"[, ]", "", m.group("whole") or "") or "0"
    s = whole + ("." + m.group("frac") if m.group("frac") else "")
    if m.group("n"):
        s = f"({s}+{m.group('n')}/{m.group('d')})"
    if m.group("pct"):
        s = f"({s}/100)"
    if m.group("scale"):
        s = f"({s}*10**{_SCALE[m.group('scale').lower()]})"
    return s


def expression_string(toks: list[Any], text: str) -> str:
    """Python-syntax string of an expression's tokens (``_tokens.Token``, units already
    removed), re-read from ``text`` (the normalised text the tokens index): numbers by
    ``_number``, ``^`` as ``**``, blanks kept where the text has them (SymPy then decides
    implicit products itself). Raises ``Unconfirmed`` for anything outside the whitelist or
    beyond the work bounds."""
    out: list[str] = []
    powers = 0
    # "\\sin 30^\\circ", "tan 45°": trigonometry in degrees when a number says so
    degrees = any(t.kind == "NUM" and t.lit is not None and t.lit.unit in DEGREE_UNITS for t in toks)
    for i, t in enumerate(toks):
        if i and (toks[i - 1].end < t.start or t.kind in ("FUNC", "CONST")):
            out.append(" ")  # "2\\sqrt{3}": a product either way; Python's tokenizer wants a blank
        k = t.kind
        if k == "NUM":
            out.append(_number(text[t.start : t.end]))
        elif k == "OP":
            op = t.text
            if op == "^":
                powers += 1
                nxt = toks[i + 1] if i + 1 < len(toks) else None
                # a literal exponent is bounded here; a computed one by the walk (MAX_BITS)
                if nxt is not None and nxt.kind == "NUM" and nxt.lit is not None and abs(nxt.lit.value) > MAX_EXPONENT:
                    raise Unconfirmed("power beyond the work bounds")
                out.append("**")
            elif op in ("+", "-", "*", "/", "//", "%"):
                out.append(op)
            else:
                raise Unconfirmed(f"operator {op!r}")
        elif k == "LP":
            out.append("(")
        elif k == "RP":
            out.append(")")
        elif k == "FACT":
            prev = toks[i - 1] if i else None
            if prev is not None and prev.kind == "RP" and i >= 3 and toks[i - 3].kind == "LP":
                prev = toks[i - 2]  # "(6)!", as "\\binom{6}{3}" is rewritten
            if prev is None or prev.kind != "NUM" or prev.lit is None or not 0 <= prev.lit.value <= MAX_FACTORIAL:
                raise Unconfirmed("factorial of an expression")
            out.append("!")
        elif k == "PCT":
            out.append("/100")
        elif k == "FUNC" and t.text in _NAMES:
            out.append(_NAMES[t.text] + ("d" if degrees and t.text in ("sin", "cos", "tan") else "") + " ")
        elif k == "CONST":
            out.append("pi" if t.text == "pi" else "E")
        else:
            raise Unconfirmed(f"token {t.text!r}")
    s = "".join(out)
    if powers and ("//" in s or "%" in s):
        raise Unconfirmed("floor division or remainder next to a power")
    return s


# The written text itself, for plain arithmetic: a few rewrites of this module's own (not
# ``_normalize``'s), so a misreading in the shared normalisation (as when "**" was dropped as
# markdown bold) is caught too. Anything else falls back to ``expression_string``.
_PLAIN_REWRITES = [
    (re.compile(r"\\(?:left|right)(?![a-zA-Z])|\\[,;! ]"), ""),
    (re.compile(r"\\(?:times|cdot)(?![a-zA-Z])|[×·⋅]"), "*"),
    (re.compile(r"\\div(?![a-zA-Z])|÷"), "/"),
    (re.compile(r"[−–]"), "-"),
    (re.compile(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}"), r"((\1)/(\2))"),
    (re.compile(r"\^\s*\{([^{}]*)\}"), r"**(\1)"),
    (re.compile(r"\^"), "**"),
    (re.compile(r"(?<=\d),(?=\d{3}(?!\d))"), ""),
    (re.compile(r"[$€£¥₹]"), ""),
    (re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s?%"), r"(\1/100)"),
    (re.compile(r"(?<=[\d)])\s*[xX]\s*(?=[\d(])"), "*"),
    (re.compile(r"[{}]"), ""),
]
_PLAIN_OK = re.compile(r"[0-9.+\-*/()% ]+")


def plain_string(written: str) -> str | None:
    """The written span as a Python expression when it is plain arithmetic once LaTeX
    products/fractions/powers, Unicode operators, currency signs, thousands commas, ``x`` as
    times and ``N%`` are rewritten; ``None`` otherwise (words, units, mixed numbers, ``//``
    or ``%`` between operands, ``!``: left to ``expression_string``)."""
    s = written.strip()
    if not s or len(s) > 2000 or re.search(r"%\s*[\d(]", s) or "//" in s:
        return None  # "17 % 5": a remainder, not a percentage
    for pat, rep in _PLAIN_REWRITES:
        s = pat.sub(rep, s)
    if not _PLAIN_OK.fullmatch(s) or "//" in s or re.search(r"\d\s+\d+/\d", s) or re.search(r"%\s*[\d(]", s):
        return None
    if any(abs(int(e)) > MAX_EXPONENT for e in re.findall(r"\*\*\s*\(?\s*-?(\d{1,12})", s)):
        return None
    return s


def second_value(source: str) -> Fraction | float:
    """Value of a whitelisted expression string (from ``expression_string``) by SymPy's parser
    and an exact walk over its unevaluated tree. ``Fraction`` when rational, ``float`` when
    irrational. Raises ``Unconfirmed``."""
    if not source.strip() or len(source) > 2000 or not _SAFE.fullmatch(source):
        raise Unconfirmed("not a whitelisted expression")
    from sympy.parsing.sympy_parser import (implicit_multiplication_application, parse_expr, rationalize,
                                            standard_transformations)

    transformations = standard_transformations + (implicit_multiplication_application, rationalize)
    global _LOCAL
    if _LOCAL is None:
        _LOCAL = _local()
    try:
        tree = parse_expr(source, local_dict=_LOCAL, transformations=transformations, evaluate=False)
    except Exception as exc:  # SyntaxError, tokenize.TokenError, TypeError...: any is "cannot read"
        raise Unconfirmed(f"sympy could not parse: {type(exc).__name__}") from None
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = _DPS
    try:
        v = _walk(tree, ctx, 0)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError, RecursionError) as exc:
        raise Unconfirmed(f"no value: {type(exc).__name__}") from None
    if isinstance(v, Fraction):
        return v
    if isinstance(v, ctx.mpc) or not ctx.isfinite(v):
        raise Unconfirmed("not a finite real value")
    return float(v)


def _log10(x: Any) -> Any:
    import sympy

    return sympy.log(x, 10)


def _in_degrees(f: Any) -> Any:
    import sympy

    return lambda x: f(x * sympy.pi / 180)


def _local() -> dict[str, Any]:
    import sympy

    return {"log10": _log10, "sind": _in_degrees(sympy.sin), "cosd": _in_degrees(sympy.cos),
            "tand": _in_degrees(sympy.tan)}


def _bits(q: Fraction) -> int:
    return max(q.numerator.bit_length(), q.denominator.bit_length())


def _real(v: Any, ctx: Any) -> Any:
    return ctx.mpf(v.numerator) / v.denominator if isinstance(v, Fraction) else v


def _walk(e: Any, ctx: Any, depth: int) -> Any:
    """Exact value of a SymPy tree (``Fraction``), or an mpmath number of ``ctx`` once a step
    is irrational."""
    import sympy

    if depth > 200:
        raise RecursionError
    if e.is_Rational:
        return Fraction(int(e.p), int(e.q))
    if e is sympy.pi:
        return +ctx.pi
    if e is sympy.E:
        return +ctx.e
    args = [_walk(a, ctx, depth + 1) for a in e.args]
    if isinstance(e, sympy.Add):
        total: Any = Fraction(0)
        for a in args:
            total = total + a if isinstance(a, Fraction) and isinstance(total, Fraction) else \
                _real(total, ctx) + _real(a, ctx)
        return total
    if isinstance(e, sympy.Mul):
        prod: Any = Fraction(1)
        for a in args:
            if isinstance(a, Fraction) and isinstance(prod, Fraction):
                prod = prod * a
                if _bits(prod) > MAX_BITS:
                    raise OverflowError
            else:
                prod = _real(prod, ctx) * _real(a, ctx)
        return prod
    if isinstance(e, sympy.Pow):
        base, exp = args
        if isinstance(base, Fraction) and isinstance(exp, Fraction) and exp.denominator == 1:
            n = exp.numerator
            if abs(n) > MAX_EXPONENT or _bits(base) * abs(n) > MAX_BITS:
                raise OverflowError
            if base == 0 and n < 0:
                raise ZeroDivisionError
            return base**n
        if isinstance(base, Fraction) and exp == Fraction(1, 2) and base >= 0:
            rn, rd = math.isqrt(base.numerator), math.isqrt(base.denominator)
            if rn * rn == base.numerator and rd * rd == base.denominator:
                return Fraction(rn, rd)
        b, x = _real(base, ctx), _real(exp, ctx)
        if b < 0:
            raise ValueError("fractional power of a negative number")
        return ctx.power(b, x)
    if isinstance(e, sympy.Abs):
        return abs(args[0])
    fn = {sympy.sin: ctx.sin, sympy.cos: ctx.cos, sympy.tan: ctx.tan, sympy.exp: ctx.exp}.get(type(e))
    if fn is not None:
        x = _real(args[0], ctx)
        if abs(x) > 10_000:
            raise OverflowError
        return fn(x)
    if isinstance(e, sympy.log):
        x = _real(args[0], ctx)
        if x <= 0:
            raise ValueError("log of a non-positive number")
        return ctx.log(x) if len(args) == 1 else ctx.log(x) / ctx.log(_real(args[1], ctx))
    if isinstance(e, sympy.factorial):
        n = args[0]
        if not (isinstance(n, Fraction) and n.denominator == 1 and 0 <= n <= MAX_FACTORIAL):
            raise OverflowError
        return Fraction(math.factorial(int(n)))
    raise TypeError(type(e).__name__)
