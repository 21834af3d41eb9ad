"""Tokeniser and whitelisted recursive-descent parser for arithmetic in prose.

The tokeniser turns normalised text into numbers, operators, parentheses, ``=``/soft ``=``
and words; a second pass decides what each word is (``x`` between numbers is ``*``, ``of``
after a percent is ``*``, ``million`` scales a number, words after a number are its unit,
single letters next to operators are symbols). The parser accepts only the grammar below and
builds ``_expr`` tuples; anything else raises ``ParseError``.

    expr    := term (("+" | "-") term)*
    term    := unary (("*" | "/" | "//" | "%" | implicit) unary)*    implicit: 2(3+4), 2π, (a)(b)
    unary   := ("-" | "+") unary | power
    power   := postfix ("^" unary)?                       right-associative
    postfix := atom ("!" | "%")*
    atom    := NUMBER | CONST | VAR | FUNC atom | "(" expr ")"
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from verifiers.arithmetic._expr import CONSTANTS, FUNCTIONS, MAX_DEPTH, MAX_NODES, Literal, literal_from_text
from verifiers.arithmetic._normalize import SOFT_APPROX


class ParseError(Exception):
    """The tokens are not an expression of the accepted grammar."""


@dataclass(slots=True)
class Token:
    kind: str  # NUM OP LP RP EQ SOFT FACT PCT FUNC CONST VAR UNIT TRAIL WORD STOP TILDE
    start: int
    end: int
    text: str
    lit: Literal | None = None
    approx: bool = False
    units: list[str] = field(default_factory=list)
    math: int = -1  # index of the LaTeX math region holding the token (``_latex``), -1 in prose


_TOKEN = re.compile(
    r"[ \t\r\f\v]*(?:(?P<nl>\n)"
    r"|(?P<mixed>(?<![\d.,/])\d+ \d+/\d+(?![\d./,]))"
    r"|(?P<sci>(?<![\w.,])(?P<mant>\d+(?:\.\d+)?)[eE](?P<exp>[+-]?\d{1,3})(?![\w.]))"
    r"|(?P<num>(?P<cur>[$€£¥₹])?[ ]?(?P<dig>(?<=[$€£¥₹])\d{1,3}(?: \d{3})+(?!\d|[.,]\d)|(?<=[$€£¥₹] )\d{1,3}(?: \d{3})+(?!\d|[.,]\d)"
    r"|\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?P<pct>%|[ ]%(?! [\d(.]|[\d(]))?)"
    r"|(?P<pow>\*\*|\^)"
    r"|(?P<fdiv>(?<=[\d)\s])//(?=[ \t]*[\d(.]))"
    r"|(?P<mod>(?<=[\d)] )%(?= [\d(.]))"
    r"|(?P<op>[-+*/])"
    r"|(?P<lp>\()"
    r"|(?P<rp>\))"
    r"|(?P<eq>={1,2}|≈|~=)"
    r"|(?P<soft>[\ue000\ue001])"
    r"|(?P<tilde>~)"
    r"|(?P<bang>!)"
    r"|(?P<pct2>%)"
    r"|(?P<word>[^\W\d_]+)"
    r"|(?P<other>.))",
    re.S,
)

SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12, "k": 10**3}
MONEY_WORDS = {"dollar": "$", "dollars": "$", "usd": "$", "euro": "€", "euros": "€", "cents": "¢", "cent": "¢"}
STOPWORDS = frozenset(
    """a an the and or nor but so then thus hence therefore is are was were be been being am of to for
    from by with without in on at into onto as if than that this these those which who whom whose it
    its he she they we you i me him her them us our your his their my mine more less fewer most
    least each every all any some no not only also just still again after before when while where
    since until because total overall left remaining over under about around approximately roughly
    nearly almost exactly times plus minus what how many much can could will would should may
    might must do does did has have had per let now here there step answer result final gives
    give get gets got makes make yields equals equal remainder remainders quotient rem digit digits mod
    modulo""".split()
)
_MATH = frozenset({"NUM", "OP", "LP", "RP", "EQ", "SOFT", "FACT", "PCT", "FUNC", "CONST", "VAR", "UNIT", "TILDE"})
_OPERAND_END = frozenset({"NUM", "RP", "PCT", "FACT", "CONST", "VAR"})
_OPERAND_START = frozenset({"NUM", "LP", "FUNC", "CONST", "VAR"})


def tokenize(text: str, *, formula: bool = False, start: int = 0, end: int | None = None,
             math: Callable[[int], int] | None = None) -> list[Token]:
    """Tokens of normalised text, with words classified (see module docstring).

    ``formula=True`` (for ``equivalent``) reads every other word as single-letter symbols
    (``2ab`` is ``2*a*b``, ``πr`` is ``pi*r``) instead of units and prose.
    ``math`` maps a position of ``text`` to its LaTeX math region (-1 outside one, see
    ``_latex``): there single letters are symbols (``2k`` is not 2,000, ``x`` is not "times")
    and short letter groups glued to a number are products of symbols (``2ab``).
    """
    toks: list[Token] = []
    for m in _TOKEN.finditer(text, start, len(text) if end is None else end):
        g = m.lastgroup
        if g is None:  # trailing blanks
            continue
        s, e = m.span(g)
        if g == "nl" or g == "other":
            toks.append(Token("STOP", s, e, m.group(g)))
        elif g == "mixed":
            whole, frac = m.group(g).split(" ")
            n, d = frac.split("/")
            if 0 < int(n) < int(d):
                toks.append(Token("NUM", s, e, m.group(g), lit=literal_from_text(m.group(g))))
            else:  # "12 15/3" is not a mixed number: re-tokenise the pieces
                toks.extend(_plain_pieces(m.group(g), s))
        elif g == "sci":  # "1e3", "2.5E-4": Python's / a calculator's scientific notation
            lit = literal_from_text(m.group("mant"), scale=Fraction(10) ** int(m.group("exp")), text=m.group(g))
            toks.append(Token("NUM", s, e, m.group(g), lit=lit))
        elif g == "num":
            cur = m.group("cur")
            dig = m.group("dig").replace(" ", "")
            lit = literal_from_text(dig, currency=cur, percent=bool(m.group("pct")), text=m.group(g))
            toks.append(Token("NUM", s, e, m.group(g), lit=lit))
        elif g == "pow":
            toks.append(Token("OP", s, e, "^"))
        elif g == "fdiv":
            toks.append(Token("OP", s, e, "//"))
        elif g == "mod":
            toks.append(Token("OP", s, e, "%"))
        elif g == "op":
            toks.append(Token("OP", s, e, m.group(g)))
        elif g == "lp":
            toks.append(Token("LP", s, e, "("))
        elif g == "rp":
            toks.append(Token("RP", s, e, ")"))
        elif g == "eq":
            toks.append(Token("EQ", s, e, m.group(g), approx=m.group(g) in ("≈", "~=")))
        elif g == "soft":
            toks.append(Token("SOFT", s, e, m.group(g), approx=m.group(g) == SOFT_APPROX))
        elif g == "tilde":
            toks.append(Token("TILDE", s, e, "~"))
        elif g == "bang":
            toks.append(Token("FACT", s, e, "!"))
        elif g == "pct2":
            toks.append(Token("PCT", s, e, "%"))
        else:
            toks.append(Token("WORD", s, e, m.group(g)))
    if math is not None:
        for t in toks:
            t.math = math(t.start)
    return _formula_words(toks) if formula else _classify(toks, text)


def _formula_words(toks: list[Token]) -> list[Token]:
    out: list[Token] = []
    for t in toks:
        if t.kind != "WORD":
            out.append(t)
            continue
        w = t.text
        if w.lower() in FUNCTIONS:
            out.append(Token("FUNC", t.start, t.end, w.lower()))
            continue
        if w.lower() == "pi":
            out.append(Token("CONST", t.start, t.end, "pi"))
            continue
        for k, ch in enumerate(w):
            kind, name = ("CONST", "pi") if ch == "π" else ("VAR", ch)
            out.append(Token(kind, t.start + k, t.start + k + 1, name))
    return out


def _plain_pieces(s: str, offset: int) -> list[Token]:
    whole, frac = s.split(" ")
    n, d = frac.split("/")
    out = [Token("NUM", offset, offset + len(whole), whole, lit=literal_from_text(whole))]
    p = offset + len(whole) + 1
    out.append(Token("NUM", p, p + len(n), n, lit=literal_from_text(n)))
    p += len(n)
    out.append(Token("OP", p, p + 1, "/"))
    out.append(Token("NUM", p + 1, p + 1 + len(d), d, lit=literal_from_text(d)))
    return out


def _kind(toks: list[Token], i: int) -> str:
    return toks[i].kind if 0 <= i < len(toks) else "STOP"


def _is_unit_word(t: Token) -> bool:
    w = t.text.lower()
    return t.kind == "WORD" and len(w) >= 2 and w not in STOPWORDS and w not in FUNCTIONS and w not in CONSTANTS


def _classify(toks: list[Token], text: str) -> list[Token]:
    n = len(toks)
    # pass 1: operator words, scale words, functions, constants, the glued "!" and "%"
    for i, t in enumerate(toks):
        if t.kind == "FACT":
            prev = toks[i - 1] if i else None
            if not (prev and prev.end == t.start and prev.kind in ("NUM", "RP")) or (
                i + 1 < n and toks[i + 1].kind == "EQ" and toks[i + 1].start == t.end and toks[i + 1].text == "="
            ):
                t.kind = "STOP"
            continue
        if t.kind != "WORD":
            continue
        w = t.text.lower()
        nk = _kind(toks, i + 1)
        if t.math >= 0:
            _math_word(toks, i, t, nk)
            continue
        if w in ("x",) and nk in ("NUM", "LP", "FUNC", "CONST") and _operand_before(toks, i):
            t.kind, t.text = "OP", "*"
        elif w == "of" and nk in ("NUM", "LP") and _fraction_or_percent_before(toks, i):
            t.kind, t.text = "OP", "*"
        elif w in SCALES and i and toks[i - 1].kind == "NUM" and toks[i - 1].lit is not None and (
            w != "k" or (toks[i - 1].end == t.start and not _k_is_symbol(text))
        ):
            prev = toks[i - 1]
            lit = prev.lit
            f = SCALES[w]
            lit.value *= f
            lit.ulp *= f
            lit.approx_ulp = lit.ulp if lit.decimals else lit.approx_ulp * f
            prev.end = t.end
            prev.text = text[prev.start : t.end]
            lit.text = prev.text  # "found" shows "-1.8 billion", not "-1.8"
            t.kind = "SKIP"
        elif w in FUNCTIONS and nk in ("LP", "NUM"):
            t.kind = "FUNC"
            t.text = w
        elif w in ("pi", "π"):
            t.kind, t.text = "CONST", "pi"
        elif w in MONEY_WORDS and i and toks[i - 1].kind == "NUM" and toks[i - 1].lit.money is None:
            toks[i - 1].lit.money = MONEY_WORDS[w]
            t.kind = "UNITWORD"
        elif i and toks[i - 1].end == t.start and toks[i - 1].kind == "NUM" and w not in GLUED_OK and len(w) > 1:
            t.kind = "VAR"  # "1Dachshund + 1/4Papillon": a named quantity, not a unit
        elif len(w) == 1:
            glued = (i and toks[i - 1].end == t.start and toks[i - 1].kind in ("NUM", "RP")) or (
                i + 1 < n and toks[i + 1].start == t.end and toks[i + 1].kind in ("LP", "NUM")
            )
            near = _kind(toks, i - 1) in ("OP", "EQ", "LP") or nk in ("OP", "EQ", "RP", "SOFT")
            if glued or near:
                t.kind = "VAR"
    if any(t.kind == "SPLIT" for t in toks):
        toks = _split_letters(toks)
    toks = [t for t in toks if t.kind != "SKIP"]
    # pass 2: unit words after an operand
    n = len(toks)
    i = 0
    while i < n:
        t = toks[i]
        if t.kind in ("NUM", "RP", "PCT"):
            j = i + 1
            words: list[int] = []
            powered: dict[str, str] = {}
            while j < n and len(words) < 3:
                u = toks[j]
                if u.kind == "UNITWORD" or _is_unit_word(u):
                    words.append(j)
                    j += 1
                    if j + 1 < n and toks[j].kind == "OP" and toks[j].text == "^" and toks[j + 1].kind == "NUM" \
                            and toks[j].start == u.end:
                        words.extend([j, j + 1])  # "cm^2" (from "cm²"): a unit power
                        powered[u.text.lower()] = toks[j + 1].text
                        j += 2
                elif u.kind == "WORD" and u.text.lower() == "per" and j + 1 < n and _is_unit_word(toks[j + 1]):
                    words.extend([j, j + 1])
                    j += 2
                elif u.kind == "OP" and u.text == "/" and j + 1 < n and _is_unit_word(toks[j + 1]):
                    words.extend([j, j + 1])
                    j += 2
                else:
                    break
            # "7995 (total cookies) - 2595 (rainbow cookies)": a parenthetical label
            if j < n and toks[j].kind == "LP":
                k = j + 1
                while k < n and k - j <= 6 and toks[k].kind in ("WORD", "TRAIL", "UNITWORD", "VAR"):
                    k += 1
                if k > j + 1 and k < n and toks[k].kind == "RP":
                    words.extend(range(j, k + 1))
                    j = k + 1
            if words:
                follows = toks[j].kind if j < n else "STOP"
                inside = follows in ("OP", "EQ", "SOFT", "RP")
                names = [toks[k].text.lower() for k in words if toks[k].kind in ("WORD", "UNITWORD", "TRAIL", "VAR")]
                names = [w for w in names if w not in MONEY_WORDS] or names
                for k in words:
                    toks[k].kind = "UNIT" if inside else "TRAIL"
                if t.kind == "NUM" and t.lit is not None and names:
                    # "5 cm² = 500 mm²": an area, not a length (the power is part of the unit)
                    t.lit.unit = names[0] + ("^" + powered[names[0]] if names[0] in powered else "")
                t.units = names
                i = j
                continue
        if t.kind == "UNITWORD":
            t.kind = "TRAIL"
        i += 1
    return toks


# "k" standing alone ("where k = 2004", "for some integer k", "(k + 1)") makes every "2k" of
# the text a product with the symbol k, not 2,000
_STANDALONE_K = re.compile(r"(?<![A-Za-z0-9_\\])[kK](?![A-Za-z0-9])(?=\s*(?:[=<>≤≥)+\-^]|\s(?:is|be|must|can)\b))"
                           r"|(?:integer|let|where|for|some|each|all|when|if|with)\s+[kK]\b|\(\s*[kK](?![A-Za-z0-9])")
_k_cache: tuple[str | None, bool] = (None, False)  # (text, answer): one tuple, so threads never mix the two


def _k_is_symbol(text: str) -> bool:
    global _k_cache
    cached = _k_cache
    if cached[0] is text:
        return cached[1]
    found = bool(_STANDALONE_K.search(text))
    _k_cache = (text, found)
    return found


def _math_word(toks: list[Token], i: int, t: Token, nk: str) -> None:
    """Classify a word inside a LaTeX math region: functions, ``π``, single-letter symbols
    (never a scale like ``k`` = thousand, never ``x`` = times), short letter groups glued to
    a number or a symbol (``2ab``, ``xy``: products of symbols); longer words (``\\text{ways}``)
    stay words (units or prose)."""
    w = t.text
    lw = w.lower()
    if lw in FUNCTIONS and nk in ("LP", "NUM", "WORD", "FUNC", "CONST"):
        t.kind, t.text = "FUNC", lw
    elif lw in ("pi", "π"):
        t.kind, t.text = "CONST", "pi"
    elif len(w) == 1:
        t.kind = "VAR"
    elif len(w) <= 3 and w.isalpha() and lw not in STOPWORDS and lw not in GLUED_OK and i and \
            toks[i - 1].end == t.start and toks[i - 1].kind in ("NUM", "RP", "VAR", "OP", "LP"):
        t.kind = "SPLIT"


def _split_letters(toks: list[Token]) -> list[Token]:
    out: list[Token] = []
    for t in toks:
        if t.kind != "SPLIT":
            out.append(t)
            continue
        for k, ch in enumerate(t.text):
            out.append(Token("VAR", t.start + k, t.start + k + 1, ch, math=t.math))
    return out


def _operand_before(toks: list[Token], i: int) -> bool:
    """A number (maybe followed by unit words, ``/ day``, ``per hour``) ends just before ``i``."""
    k = i - 1
    hops = 0
    while k >= 0 and hops < 4:
        t = toks[k]
        if t.kind in ("WORD", "UNITWORD") and (_is_unit_word(t) or t.kind == "UNITWORD" or t.text.lower() == "per"):
            k -= 1
        elif t.kind == "OP" and t.text == "/" and k + 1 < i and _is_unit_word(toks[k + 1]):
            k -= 1
        else:
            break
        hops += 1
    return k >= 0 and toks[k].kind in ("NUM", "RP", "PCT")


def _fraction_or_percent_before(toks: list[Token], i: int) -> bool:
    p = toks[i - 1] if i else None
    if p is None:
        return False
    if p.kind == "PCT" or (p.kind == "NUM" and p.lit is not None and p.lit.percent):
        return True
    if p.kind == "RP":
        return True
    if p.kind == "NUM" and i >= 3 and toks[i - 2].kind == "OP" and toks[i - 2].text == "/" and toks[i - 3].kind == "NUM":
        return True
    return p.kind == "NUM" and p.lit is not None and " " in p.text.strip()  # mixed number


def runs(toks: list[Token]) -> list[list[Token]]:
    """Maximal sequences of math tokens (numbers, operators, ``=``, units, symbols)."""
    return [r for _, r in runs_with_context(toks)]


_LINKS = frozenset("of in per for at with by".split())
MULTIPLIER_WORDS = frozenset("half twice double triple third thirds quarter quarters fifth fifths tenth".split())
# words that may follow a number without a space and still be a unit or ordinal ("5km", "3rd")
GLUED_OK = frozenset("km kg cm mm lb lbs oz ft mi ml hr hrs min mins mph kph sec k m g s h".split())


def _joins_word(toks: list[Token], k: int) -> bool:
    """True when the operator ``toks[k]`` is a ``-`` or ``/`` written inside one word
    (``2-beta``, ``well-known``, ``and/or``): no blank on either side and a word right after
    it. Such a sign joins a compound word; it is no operator that prose interrupts, so it
    must not make the next expression the tail of one (nothing is silently unverified)."""
    op = toks[k]
    return (op.text in ("-", "/") and 0 < k < len(toks) - 1 and toks[k + 1].kind == "WORD"
            and toks[k - 1].end == op.start and op.end == toks[k + 1].start)


def _interrupted(toks: list[Token], i: int) -> Token | None:
    """The operator when a few prose words interrupt an expression (``25 classmates + his 1
    teacher``): the run starting at ``i`` is then not a whole expression."""
    k = i - 1
    words = 0
    linked = False
    while k >= 0 and toks[k].kind in ("WORD", "TRAIL") and words < 3:
        linked = linked or toks[k].text.lower() in _LINKS
        k -= 1
        words += 1
    if words and k >= 0 and toks[k].kind == "OP" and not _joins_word(toks, k):
        return toks[k]
    for j in range(k + 1, i):  # "half of 6000-1500-2000 = 2500": scaled by a word
        if toks[j].text.lower() in MULTIPLIER_WORDS:
            return toks[j]
    if linked and k >= 0 and toks[k].kind in ("NUM", "RP", "PCT"):
        return toks[k]  # "24 eggs in 1 tray x 2 trays = 48": the run is the tail of a product
    return None


def runs_with_context(toks: list[Token]) -> list[tuple[Token | None, list[Token]]]:
    """Like ``runs``, each with the token just before it (``None`` at the start)."""
    out: list[tuple[Token | None, list[Token]]] = []
    cur: list[Token] = []
    prev: Token | None = None
    before: Token | None = None
    for i, t in enumerate(toks):
        if t.kind in _MATH:
            if not cur:
                before = _interrupted(toks, i) or prev
            cur.append(t)
        else:
            if cur:
                out.append((before, cur))
            cur = []
        prev = t
    if cur:
        out.append((before, cur))
    return out


# ---------------------------------------------------------------------------------------------
# parser


class _Parser:
    __slots__ = ("toks", "i", "depth", "nodes", "formula", "loose")

    def __init__(self, toks: list[Token], formula: bool, loose: bool = False):
        self.toks = toks
        self.i = 0
        self.depth = 0
        self.nodes = 0
        self.formula = formula
        self.loose = loose

    def peek(self) -> Token | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> Token:
        t = self.toks[self.i]
        self.i += 1
        return t

    def node(self, n: tuple) -> tuple:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ParseError("expression too large")
        return n

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("expression nested too deeply")

    def expr(self) -> tuple:
        self.enter()
        left = self.term()
        while (t := self.peek()) is not None and t.kind == "OP" and t.text in "+-":
            self.take()
            left = self.node(("bin", t.text, left, self.term()))
        self.depth -= 1
        return left

    def term(self) -> tuple:
        left = self.unary()
        while (t := self.peek()) is not None:
            if t.kind == "OP" and t.text in ("*", "/", "//", "%"):
                self.take()
                if t.text == "/" and self._spaced(t) and (frac := self._tight_fraction()) is not None:
                    left = self.node(("bin", "/", left, frac))
                else:
                    left = self.node(("bin", t.text, left, self.unary()))
            elif self._implicit(t):
                left = self.node(("bin", "*", left, self.unary()))
            else:
                break
        return left

    def _spaced(self, op: Token) -> bool:
        k = self.i - 1
        before = self.toks[k - 1] if k >= 1 else None
        after = self.toks[k + 1] if k + 1 < len(self.toks) else None
        return bool((before and before.end < op.start) or (after and op.end < after.start))

    def _tight_fraction(self) -> tuple | None:
        """``a / b/c`` written with a tight ``b/c`` means ``a / (b/c)`` (``1 1/2 / 1/2 = 3``)."""
        k = self.i
        if k + 2 >= len(self.toks):
            return None
        a, op, b = self.toks[k], self.toks[k + 1], self.toks[k + 2]
        if not (a.kind == "NUM" and op.kind == "OP" and op.text == "/" and b.kind == "NUM"):
            return None
        if a.end != op.start or op.end != b.start:
            return None
        if a.lit.value.denominator != 1 or b.lit.value.denominator != 1 or a.lit.money or b.lit.money:
            return None
        nxt = self.toks[k + 3] if k + 3 < len(self.toks) else None
        if nxt is not None and nxt.kind == "OP" and nxt.text == "^":
            return None
        self.i += 3
        return self.node(("bin", "/", ("num", a.lit), ("num", b.lit)))

    def _implicit(self, t: Token) -> bool:
        prev = self.toks[self.i - 1]
        if self.loose and prev.kind in ("NUM", "RP") and (t.kind == "LP" or (prev.kind == "RP" and t.kind == "NUM")):
            return True
        if prev.kind not in _OPERAND_END or t.kind not in ("LP", "FUNC", "CONST", "VAR"):
            return False
        if self.formula:
            return True
        return prev.end == t.start

    def unary(self) -> tuple:
        t = self.peek()
        if t is not None and t.kind == "OP" and t.text in "+-":
            self.take()
            self.enter()
            inner = self.unary()
            self.depth -= 1
            return inner if t.text == "+" else self.node(("neg", inner))
        return self.power()

    def power(self) -> tuple:
        base = self.postfix()
        t = self.peek()
        if t is not None and t.kind == "OP" and t.text == "^":
            self.take()
            self.enter()
            exp = self.unary()
            self.depth -= 1
            return self.node(("pow", base, exp))
        return base

    def postfix(self) -> tuple:
        node = self.atom()
        while (t := self.peek()) is not None and t.kind in ("FACT", "PCT"):
            self.take()
            node = self.node(("fact", node) if t.kind == "FACT" else ("pct", node))
        return node

    def atom(self) -> tuple:
        t = self.peek()
        if t is None:
            raise ParseError("unexpected end")
        if t.kind == "NUM":
            self.take()
            return self.node(("num", t.lit))
        if t.kind == "CONST":
            self.take()
            return self.node(("const", t.text))
        if t.kind == "VAR":
            self.take()
            return self.node(("var", t.text))
        if t.kind == "FUNC":
            self.take()
            self.enter()
            arg = self.postfix() if (self.peek() and self.peek().kind != "LP") else self.atom()
            self.depth -= 1
            return self.node(("func", t.text, arg))
        if t.kind == "LP":
            self.take()
            inner = self.expr()
            c = self.peek()
            if c is None or c.kind != "RP":
                raise ParseError("unbalanced parenthesis")
            self.take()
            return inner
        raise ParseError(f"unexpected {t.text!r}")


def parse(toks: list[Token], *, formula: bool = False, loose: bool = False) -> tuple:
    """Parse a whole token slice (unit words already removed) into an ``_expr`` tree.

    ``loose`` also reads ``1/2 (68)`` (number, space, parenthesis) as a product; it is used
    only for the left side of an equation. Raises ``ParseError`` when the slice is not
    exactly one expression.
    """
    if not toks:
        raise ParseError("empty")
    if len(toks) > MAX_NODES:
        raise ParseError("expression too long")
    p = _Parser(toks, formula, loose)
    node = p.expr()
    if p.i != len(toks):
        raise ParseError(f"unexpected {toks[p.i].text!r}")
    return node



__all__ = ["Token", "ParseError", "tokenize", "runs", "runs_with_context", "parse"]
