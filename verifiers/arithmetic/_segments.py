"""The sides of a claim: a run's segments (:class:`_Seg`) and where they start and end, so prose
numbers stay out (a run glued to a digit or letter by ``: / - .`` loses its outer segment; cuts
before and after; plain stretches of a claim's text)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from verifiers.arithmetic._expr import DEGREE_UNITS, FUNCTIONS, MAX_NODES
from verifiers.arithmetic._tokens import ParseError, Token, parse
from verifiers.arithmetic._units import unit_info


_STICKY = set(":/.-^_\\|")


@dataclass(slots=True)
class _Seg:
    toks: list[Token]  # without UNIT/TILDE tokens
    approx: bool
    units: list[str]
    full: tuple | None = None
    per_units: list[str] | None = None  # units after "/" or "per" (rate denominators)
    prefix: tuple | None = None
    prefix_toks: list[Token] | None = None
    suffix: tuple | None = None
    suffix_toks: list[Token] | None = None
    bad: bool = False
    # "(2) 3+3": the side read without its list label; the spaced product it also reads as
    label_product: tuple | None = None


def _make_seg(toks: list[Token], formula: bool = False) -> _Seg:
    approx = False
    units: list[str] = []
    per_units: list[str] = []
    clean: list[Token] = []
    after_per = False
    for t in toks:
        if t.kind == "TILDE":
            if clean:
                return _Seg(toks=[], approx=False, units=[], bad=True)
            approx = True
        elif t.kind == "UNIT":
            if t.text not in "()/":
                units.append(t.text.lower())
                if after_per:
                    per_units.append(t.text.lower())
            after_per = t.text == "/" or t.text.lower() == "per"
        else:
            after_per = False
            clean.append(t)
    seg = _Seg(toks=clean, approx=approx, units=units, per_units=per_units)
    if not clean or len(clean) > MAX_NODES:
        seg.bad = True
        return seg
    try:
        seg.full = parse(clean, formula=formula)
    except ParseError:
        seg.full = None
    return seg


def _ensure_suffix(seg: _Seg) -> None:
    """Longest parseable suffix starting after a clean cut (two operands side by side, a
    bracket the sentence before closed), after a leading list label (``_enumerator``)."""
    if seg.suffix is not None or seg.full is not None:
        return
    toks = seg.toks
    if _enumerator(toks):  # "(2) 3+3 = 6", "Step (3) (4+1) × 5 = 25": a label opens the side
        try:
            seg.label_product = parse(toks, loose=True)  # ... or a spaced factor: see ClaimFinder._pair
        except ParseError:
            seg.label_product = None
        toks = toks[3:]
    try:  # "1/2 (68) + 10": a spaced product on the left side
        seg.suffix = parse(toks, loose=True)
        seg.suffix_toks = toks
        return
    except ParseError:
        pass
    for k in range(1, len(toks)):
        before, at = toks[k - 1], toks[k]
        # "by 2.) (1/2) ** 0 = 1": a bracket closed by the sentence before, then a spaced "("
        spaced_lp = at.kind == "LP" and before.kind == "RP" and before.end < at.start
        if before.kind in ("NUM", "RP", "FACT", "PCT", "CONST", "VAR") and (at.kind in ("NUM", "FUNC", "CONST")
                                                                           or spaced_lp):
            if at.kind == "NUM" and at.text[:1] == "0" and at.text[1:2].isdigit():
                return  # "350 000": a number with spaces as thousands separators
            try:
                seg.suffix = parse(toks[k:])
                seg.suffix_toks = toks[k:]
                return
            except ParseError:
                continue


def _enumerator(toks: list[Token]) -> bool:
    """The tokens open with one whole number in brackets and a blank, ``(2) 3+3``: a list
    item's or a reference's label, not a factor of a spaced product (``(1/2) 68`` and
    ``2 (3)`` still are; ``(2)(3)``, written tight, is read as a product before this)."""
    return (len(toks) > 3 and toks[0].kind == "LP" and toks[1].kind == "NUM" and toks[1].text.isdigit()
            and toks[2].kind == "RP" and toks[2].end < toks[3].start)


def _ensure_prefix(seg: _Seg) -> None:
    """Longest parseable prefix ending before a clean cut."""
    if seg.prefix is not None or seg.full is not None:
        return
    toks = seg.toks
    for k in range(len(toks) - 1, 0, -1):
        last, nxt = toks[k - 1], toks[k]
        if last.kind in ("NUM", "RP", "FACT", "PCT", "CONST") and nxt.kind in ("NUM", "LP", "FUNC", "CONST", "RP") and \
                not (nxt.start == last.end and nxt.kind in ("LP", "FUNC", "CONST")):
            try:
                seg.prefix = parse(toks[:k])
                seg.prefix_toks = toks[:k]
                return
            except ParseError:
                continue


def _sticky_before(text: str, s: int) -> bool:
    if s == 0:
        return False
    c = text[s - 1]
    if c.isalnum():
        return True
    if c == "," and s >= 2 and text[s - 2].isdigit() and text[s : s + 1].isdigit():
        return True  # "3,5 + 1 = 4,5": a decimal comma
    return c in _STICKY and s >= 2 and text[s - 2].isalnum()




_UNREAD_OPERATIONS = frozenset("lcm gcd sec csc cot arcsin arccos arctan sinh cosh tanh det max min floor ceil".split())
_WORD_LABEL = re.compile(r"[A-Za-z]{3,}")
_CLEAN_WORDS = frozenset("and or so then thus hence where when since because for if with which as but while remainder rem".split())
_PREV_WORD = re.compile(r"([A-Za-z]+)\s*$")


def _cut_before(text: str, s: int, math: bool) -> bool:
    """The run starts right after something that belongs to its first operand: an ellipsis
    (``... + 10``), a prefix ``!`` (a subfactorial ``!5``), and, in a formula, any command or
    symbol the tokeniser could not read (``\\binom{5}{2}``, ``\\lfloor``)."""
    k = s
    while k > 0 and text[k - 1] in " \t":
        k -= 1
    if k == 0:
        return False
    c = text[k - 1]
    if c == "." and text[max(0, k - 3) : k] == "..." or c in "…±∓":
        return True
    if c == "!" and k == s and (k < 2 or not (text[k - 2].isalnum() or text[k - 2] == ")")):
        return True
    if not math or c in "\n,;:([=":
        return False
    if c.isalpha():
        m = _PREV_WORD.search(text, max(0, k - 20), k)
        return not (m and m.group(1).lower() in _CLEAN_WORDS and k - len(m.group(1)) - 1 >= 0 and
                    not text[k - len(m.group(1)) - 1 : k - len(m.group(1))].isalnum())
    return True


def _cut_after(text: str, e: int, depth: int = 0) -> bool:
    """In a formula: the run ends before something it could not read (a command, a symbol
    name, ``...``), so its last side is not the whole expression."""
    k = e
    n = len(text)
    while k < n and text[k] in " \t":
        k += 1
    if k >= n:
        return False
    c = text[k]
    if c in "\n,;:?":
        return False
    if c == ".":
        return text[k : k + 3] == "..."
    if c in "±∓":
        return True
    if c.isalpha():
        j = k
        while j < n and text[j].isalpha():
            j += 1
        w = text[k:j].lower()
        if w in DEGREE_UNITS or unit_info(w) is not None:  # "= 80^\\circ", "= 5 \\text{ cm}": look past the unit
            return _cut_after(text, j, depth + 1) if depth < 3 else True
        # a word after the number is a label or a unit ("= 3 \\text{ dollars}", "= 160 \\text{ spools}"),
        # unless it names an operation the tokeniser does not read ("\\operatorname{lcm}(4, 6)")
        return len(w) < 2 or w in _UNREAD_OPERATIONS or w in FUNCTIONS
    return True
    return True


_PER_WORD = re.compile(r"/[a-z]{2,}(?![\w(^/])")


def _sticky_after(text: str, e: int) -> bool:
    if e >= len(text):
        return False
    c = text[e]
    if c.isdigit():
        return True
    if c == "/" and _PER_WORD.match(text, e):
        return False  # "= $0.4/egg": a rate's unit, as in "= $0.4 per egg"
    if c == "," and e >= 1 and text[e - 1].isdigit() and text[e + 1 : e + 2].isdigit():
        return True
    return c in _STICKY and e + 1 < len(text) and text[e + 1].isalnum()




def _split_at_sep(toks: list[Token]) -> tuple[list[Token], list[Token]]:
    """The tokens before and after the first ``=`` / soft ``=`` of a claim's tokens."""
    for k, t in enumerate(toks):
        if t.kind in ("EQ", "SOFT"):
            return toks[:k], toks[k + 1 :]
    return toks, []


_BULLET_AT = re.compile(r"[ \t]*[-*+•][ \t]+")
_PLAIN_CHARS = frozenset("0123456789.,+-*/^() \t$€£¥%×÷·−")
# an enumerator where the widened text begins: "(2) 3+3", "2) 3+3" -- a list item's or a
# reference's label, not a factor ("1. 2+2" ends at the period already)
_ENUMERATOR = re.compile(r"(?:\(\d+\)|\d+\))[ \t]+")


def _punctuation(text: str, i: int) -> bool:
    """``text[i]`` is a ``.`` or ``,`` that is no part of a number: a sentence end ("by 5678.
    1234 × ..."), an abbreviation ("e.g. 5"), a list number ("1. 2+2"), a clause comma. A
    decimal point or a digit group's comma always has a digit right after it ("3.14",
    "1,234", ".5"); "3.14." ends in one of each."""
    return text[i] in ".," and not (i + 1 < len(text) and text[i + 1].isdigit())


def _plain_stretch(text: str, a: int, b: int, left: bool) -> tuple[int, int]:
    """``[a, b)`` widened over the plain arithmetic written next to it (leftwards for the left
    side of a claim, rightwards for the right side), so the second evaluation reads what is
    written, not just what the first reading took as the expression ("3 ** 2 + 1" when a
    misreading kept only "2 + 1"). The widening stays inside the claim's sentence and item:
    it stops at sentence punctuation (``_punctuation``: "We multiply 1234 by 5678. 1234 × 5678
    = ..." is not ``5678. 1234 × 5678``, which SymPy reads as a product) and drops a list
    bullet or enumerator it would begin with ("- 8^(-1)", "(2) 3+3"), as the first reading
    does (the tokeniser ends a run at such a period; ``_ensure_suffix`` drops a leading
    "(2)")."""
    if left:
        start = a
        while a > 0 and text[a - 1] in _PLAIN_CHARS and not _punctuation(text, a - 1):
            a -= 1
        line = text.rfind("\n", 0, start) + 1
        if a <= line + len(text[line:start]) - len(text[line:start].lstrip(" \t")) + 1 and \
                _BULLET_AT.match(text, line, start):
            a = _BULLET_AT.match(text, line, start).end()  # "- 8^(-1) = ...": a list bullet, no minus
        while a < start and text[a] in " \t":
            a += 1
        label = _ENUMERATOR.match(text, a, start)
        if label is not None:
            a = label.end()
    else:
        while b < len(text) and text[b] in _PLAIN_CHARS and not _punctuation(text, b):
            b += 1
    while a < b and text[a] in " \t":
        a += 1
    while b > a and text[b - 1] in " \t,.":
        b -= 1
    return a, b
