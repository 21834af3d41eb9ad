"""Text helpers of the planner: find a claim in the draft, read the numbers a claim states,
and parse an expression with the arithmetic verifier's own whitelisted parser.

Nothing here evaluates model text as code: expressions go through
:mod:`verifiers.arithmetic._tokens` (tokeniser + recursive-descent parser building plain tuples)
and :func:`verifiers.arithmetic._expr.evaluate` (bounded exact arithmetic).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction

from verifiers.arithmetic._expr import Literal, NotNumeric, Refused, evaluate, has_operation, has_var, literal_from_text
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tokens import ParseError, parse, runs, tokenize

#: Marks a stated value as approximate ("约", "approximately", "≈"): the tolerance is then the
#: stated significant figures (verifiers.arithmetic._tolerance, NIST SP 811 sec. 7.9).
APPROX_BEFORE = re.compile(
    r"(?:approximately|approx\.?|about|around|roughly|nearly|close\s+to|~|≈|\\approx|约为|约合|约是|大约|约|近似为|近似)"
    r"\s*[:：]?\s*(?:is\s+|为\s*|是\s*|equals?\s+)?\**\s*[$€£¥]?\s*$",
    re.I,
)

_SUP = str.maketrans({"²": "^2", "³": "^3", "×": "*", "·": "*", "⋅": "*", "÷": "/", "−": "-", "–": "-",
                      "\u00a0": " ", "\u2009": " ", "\u202f": " "})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_WS = re.compile(r"\s+")


def _norm_char_map(text: str, *, drop_space: bool) -> tuple[str, list[int]]:
    """``text`` normalised (NFKC, unified operators, thousands separators dropped, whitespace
    collapsed or dropped, lower case) and, for each output character, its offset in ``text``."""
    out: list[str] = []
    pos: list[int] = []
    prev_space = True
    for i, ch in enumerate(text):
        rep = unicodedata.normalize("NFKC", ch).translate(_SUP).lower()
        if ch == "," and 0 < i < len(text) - 1 and _THOUSANDS.match(text, i) and text[i - 1].isdigit():
            continue
        for r in rep:
            if r.isspace():
                if drop_space or prev_space:
                    continue
                out.append(" ")
                pos.append(i)
                prev_space = True
            else:
                out.append(r)
                pos.append(i)
                prev_space = False
    while out and out[-1] == " ":
        out.pop()
        pos.pop()
    return "".join(out), pos


def normalized(text: str, *, drop_space: bool = False) -> str:
    """The comparison form of ``text`` (see :func:`find_span`)."""
    return _norm_char_map(text, drop_space=drop_space)[0]


def find_span(claim: str, draft: str) -> tuple[int, int] | None:
    """``(start, end)`` of ``claim`` in ``draft``, compared after normalising both: Unicode NFKC,
    ``× · ÷ − ²`` to ASCII, thousands separators dropped (``11,607.55`` = ``11607.55``),
    whitespace collapsed, case folded. Tried again with whitespace ignored altogether. None when
    the claim does not occur (or is empty)."""
    if not isinstance(claim, str) or not claim.strip() or not isinstance(draft, str):
        return None
    for drop in (False, True):
        c, _ = _norm_char_map(claim.strip(), drop_space=drop)
        d, pos = _norm_char_map(draft, drop_space=drop)
        if not c:
            return None
        i = d.find(c)
        if i >= 0:
            return pos[i], pos[i + len(c) - 1] + 1
    return None


_NUMBER = re.compile(
    r"(?<![A-Za-z0-9_.])(?<!\d,)(?P<sign>[-−])?(?P<cur>[$€£¥])?\s?(?P<dig>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
    r"(?:\s*(?:[x×*·]|\\times)\s*10\s*\^\s*\{?\s*(?P<exp>[-−+]?\d{1,3})\s*\}?|[eE](?P<eexp>[-+]?\d{1,3})(?![\w]))?"
    r"(?P<pct>\s?%)?"
)


@dataclass(slots=True)
class Stated:
    """A number as the draft states it: its :class:`Literal` (exact value, precision), the
    sign, whether an approximation word precedes it, and its span in the text it came from."""

    lit: Literal
    sign: int
    approx: bool
    span: tuple[int, int]

    @property
    def value(self) -> Fraction:
        return self.sign * self.lit.value

    @property
    def text(self) -> str:
        return ("-" if self.sign < 0 else "") + self.lit.text


def numbers_in(text: str) -> list[Stated]:
    """Every number ``text`` states, in order: plain, grouped (``11,607.55``), currency,
    percent, scientific (``1.91 × 10^-4``, ``1.91e-4``). Scientific values keep their stated
    precision (the mantissa's last digit scaled by the power of ten)."""
    out: list[Stated] = []
    for m in _NUMBER.finditer(text):
        dig = m.group("dig")
        try:
            lit = literal_from_text(dig, currency=m.group("cur"), percent=bool(m.group("pct")), text=m.group(0).strip())
        except (ValueError, ZeroDivisionError):
            continue
        exp = m.group("exp") or m.group("eexp")
        if exp is not None:
            k = int(exp.replace("−", "-"))
            factor = Fraction(10) ** k
            lit = Literal(value=lit.value * factor, text=m.group(0).strip(), decimals=max(0, lit.decimals - k),
                          ulp=lit.ulp * factor, approx_ulp=lit.ulp * factor, money=lit.money, percent=lit.percent)
        before = text[max(0, m.start() - 40):m.start()]
        # "3-4": a minus after an operand is subtraction, not the sign of 4
        sign = -1 if m.group("sign") and not re.search(r"[\w)\]]\s*$", before) else 1
        out.append(Stated(lit=lit, sign=sign, approx=bool(APPROX_BEFORE.search(before)),
                          span=m.span()))
    return out


class ExprError(ValueError):
    """The text is not one arithmetic expression of the accepted grammar, or has no value."""


def parse_expression(text: str, *, max_chars: int = 2000) -> tuple:
    """The expression tree of ``text`` (one expression, no ``=``, no symbols), built by the
    arithmetic verifier's whitelisted parser. Raises :class:`ExprError`."""
    if not isinstance(text, str) or not text.strip():
        raise ExprError("empty expression")
    if len(text) > max_chars:
        raise ExprError("expression too long")
    mt = normalize(text, soft=False)
    toks = tokenize(mt.text)
    rs = runs(toks)
    if len(rs) != 1:
        raise ExprError("not one expression")
    inside = {id(t) for t in rs[0]}
    if any(id(t) not in inside and t.text.strip() and t.kind != "STOP" for t in toks):
        raise ExprError("text around the expression")
    run = [t for t in rs[0] if t.kind != "UNIT"]
    if any(t.kind in ("EQ", "SOFT", "TILDE") for t in run):
        raise ExprError("an equation, not an expression")
    try:
        node = parse(run)
    except (ParseError, RecursionError) as exc:
        raise ExprError(f"cannot parse: {exc}") from None
    if has_var(node):
        raise ExprError("expression has symbols")
    return node


def value_of(node: tuple) -> Fraction | float:
    """Exact value of a parsed tree (Fraction, or float when irrational). Raises
    :class:`ExprError` when it has none or is too expensive."""
    try:
        return evaluate(node)
    except (NotNumeric, Refused, RecursionError) as exc:
        raise ExprError(f"no value: {exc}") from None


def literals(node: tuple) -> list[Literal]:
    """Every number literal of a tree."""
    out: list[Literal] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n[0] == "num":
            out.append(n[1])
        else:
            stack.extend(c for c in n[1:] if isinstance(c, tuple))
    return out


__all__ = ["find_span", "normalized", "numbers_in", "Stated", "parse_expression", "value_of", "literals",
           "ExprError", "APPROX_BEFORE", "has_operation"]
