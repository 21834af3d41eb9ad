"""Where an answer is in LaTeX math mode, and the context rules that depend on it.

``math_spans(text)`` finds the math regions of an answer, in original offsets:

* display ``\\[ .. \\]``, ``$$ .. $$``, inline ``\\( .. \\)``;
* environments ``\\begin{equation|align|gather|multline|eqnarray}[*] .. \\end{..}`` (and the
  ``aligned``/``cases``/``array`` blocks inside them, which lie within);
* inline ``$ .. $`` by Pandoc's rule for ``tex_math_dollars`` (pandoc.org, MANUAL "Math"):
  the opening ``$`` has a non-blank character right after it, the closing ``$`` a non-blank
  character right before it and no digit right after it, and both are on one line. Money
  (``$5 and $10``) fails that rule: its would-be closing ``$`` is followed by a digit.

Inside a math region the verifier reads the text as a formula (see ``_claims`` and
``_tokens``): single letters are symbols (``3^{6k}``, ``2k - 1``: never the magnitude suffix
"thousand"), blanks do not separate factors (``6 \\cdot 27 \\sqrt{3}``), a claim never crosses the
region's delimiters, an ``align`` row break ``\\\\`` or a ``\\quad`` between listed items, and a
side that meets a symbol or command it cannot read is not cut short but left unchecked.
"""

from __future__ import annotations

import bisect
import re

_ENVS = r"(?:equation|align|alignat|gather|multline|eqnarray|displaymath|math)\*?"
# one pass over the delimiters, paired by a small state machine: linear in the text, whatever
# it holds (a regular expression with a lazy body would rescan the text after every unclosed "\[")
_DELIM = re.compile(r"\\\[|\\\]|\\\(|\\\)|\$\$|\\begin\{(" + _ENVS + r")\}|\\end\{(" + _ENVS + r")\}|(?<!\\)\$")
_CLOSE = {"\\[": "\\]", "\\(": "\\)", "$$": "$$"}
_FENCE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)
MAX_INLINE = 500  # a "$...$" formula longer than this is not one
# Words that cannot be in a $..$ formula: two prose words in a row ("$5 and $" is money)
_PROSE = re.compile(r"(?<!\\)(?<![a-zA-Z])[a-zA-Z]{3,}\s+[a-zA-Z]{3,}(?![^{}\n]{0,80}\})")


class MathSpans:
    """Sorted, disjoint ``(start, end)`` math regions of one text (original offsets), each
    given as the content *between* the delimiters."""

    __slots__ = ("starts", "ends", "dollars")

    def __init__(self, spans: list[tuple[int, int]], dollars: set[int] | None = None):
        spans = sorted(spans)
        self.starts = [s for s, _ in spans]
        self.ends = [e for _, e in spans]
        self.dollars = dollars or set()  # offsets of single "$" delimiters (not money)

    def __bool__(self) -> bool:
        return bool(self.starts)

    def region(self, pos: int) -> int:
        """Index of the region holding original offset ``pos``, or -1."""
        k = bisect.bisect_right(self.starts, pos) - 1
        if k >= 0 and pos < self.ends[k]:
            return k
        return -1


def math_spans(text: str) -> MathSpans:
    """The math regions of ``text`` (see the module docstring). Linear time; never raises."""
    out: list[tuple[int, int]] = []
    dollars: set[int] = set()
    if "\\" not in text and "$" not in text:
        return MathSpans(out)
    open_tok: str | None = None  # the delimiter that opened the current region
    open_end = 0
    open_start = 0
    n = len(text)
    fences = [f.span() for f in _FENCE.finditer(text)] if "`" in text else []
    fence_starts = [a for a, _ in fences]
    for m in _DELIM.finditer(text):
        if fences:
            f = bisect.bisect_right(fence_starts, m.start()) - 1
            if f >= 0 and m.start() < fences[f][1]:
                continue  # "\\[" or "$HOME" in code is no math delimiter
        tok = m.group(0)
        if open_tok is None:
            if tok in _CLOSE:
                open_tok, open_start, open_end = tok, m.start(), m.end()
            elif m.group(1):
                open_tok, open_start, open_end = "env:" + m.group(1), m.start(), m.end()
            elif tok == "$" and m.end() < n and not text[m.end()].isspace():
                open_tok, open_start, open_end = "$", m.start(), m.end()
            continue
        if open_tok == "$":
            if tok != "$":
                open_tok = None  # "$5 and \(x\)": the first "$" was money
                if tok in _CLOSE:
                    open_tok, open_start, open_end = tok, m.start(), m.end()
                continue
            body = text[open_end : m.start()]
            ok = (body and not text[m.start() - 1].isspace() and text[m.start() - 1] != "\\"
                  and not (m.end() < n and text[m.end()].isdigit()) and "\n" not in body
                  and len(body) <= MAX_INLINE and not _PROSE.search(body) and _formula_like(body))
            if ok:
                out.append((open_end, m.start()))
                dollars.update((open_start, m.start()))
                open_tok = None
            elif m.end() < n and not text[m.end()].isspace():
                open_start, open_end = m.start(), m.end()  # this "$" may open the next formula
            else:
                open_tok = None
            continue
        closes = _CLOSE.get(open_tok) if not open_tok.startswith("env:") else None
        if (closes is not None and tok == closes) or (open_tok.startswith("env:") and m.group(2) == open_tok[4:]):
            out.append((open_end, m.start()))
            open_tok = None
    return MathSpans(out, dollars)


_FORMULA_SIGNS = re.compile(r"[\\^_{}=<>+*/()-]|^[A-Za-z]$|^\d")


def _formula_like(body: str) -> bool:
    return bool(_FORMULA_SIGNS.search(body))


# Delimiters (as found in the original text); the normaliser turns each into a line break so
# that no claim crosses one.
DELIMITER = re.compile(
    r"\\\[|\\\]|\\\(|\\\)|\$\$|\\(?:begin|end)\{[a-zA-Z*]+\}(?:\{[^{}]*\})?"
)


# --- context rules for a claim that computes to a different value --------------------------------
# A false equation is not always a claim that it holds. Each rule below turns a ``fail`` into
# ``unknown`` (never into ``pass``), so text can only withdraw a verdict, never write one.

# "We cannot make 5 + 3 = 9", "if 2 + 2 = 5, then", "suppose 3 * 4 = 13": the writer does not
# assert the equation (within the same clause, at most ~50 characters before it).
_NEGATED_BEFORE = re.compile(
    r"\b(?:cannot|can\s*not|can't|could\s+not|couldn't|not|never|isn't|aren't|wasn't|weren't|doesn't|don't|"
    r"instead\s+of|rather\s+than|mistakenly|incorrectly|wrongly|claim(?:s|ed)?\s+that|says?\s+that|said\s+that|"
    r"thought\s+that)\b[^.!?\n;:,]{0,40}$"
    r"|\b(?:suppose|supposing|assume|assuming)\b[^.!?\n;:,]{0,12}$"
    r"|(?:\\text\s*\{\s*or\s*\}|(?:\$|\\\)|\\\])\s*or\b)(?:[\s$\\()\[\]{}]|quad)*$",  # "3 - 2r = 2r or 3 - 2r = -2r": alternatives, neither asserted
    re.I,
)
# "... \implies 10 = 4, which is false", "Check: 60 = 5^2 + 6^2 = 61. This does not work."
_NEGATED_AFTER = re.compile(
    r"(?:\b(?:which|this|that|it|these|this\s+equation|the\s+equation)\s+(?:is|was|are)\s+(?:clearly\s+|obviously\s+)?"
    r"(?:false|not\s+true|untrue|incorrect|wrong|impossible|a\s+contradiction|not\s+possible|not\s+valid|invalid)\b"
    r"|\bcontradiction\b|\b(?:does|do|did)\s*(?:not|n't)\s+(?:work|hold|satisfy|match|equal|check\s+out)\b"
    r"|\bnot\s+satisfied\b|\bno\s+solution\b|\bnot\s+a\s+solution\b"
    r"|\b(?:is|was)\s+false\b|\bwhich\s+fails\b)",
    re.I,
)
_CLAUSE = re.compile(r"\b(?:because|since|but|so|and|while|whereas|then|thus|hence|therefore|as)\b", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
# alternatives between formulas only ("$x = 1$ or $x = 2$", "\\quad \\text{or} \\quad"), not the prose
# "or" of "3 feet per 200 feet, or 3/200 = 0.015 feet per foot"
_ALTERNATIVE_AFTER = re.compile(r"\s*(?:\\quad\s*|,\s*)*(?:\\text\s*\{\s*or\s*\}|(?:\$|\\\)|\\\])\s*or\b)", re.I)
_DENIED_AFTER = re.compile(
    r"[\s.,$\\()\]]{0,8}(?:is|are|would\s+be)\s+(?:clearly\s+)?(?:not\s+possible|impossible|false|not\s+true|"
    r"invalid|not\s+valid|a\s+contradiction)\b", re.I)
_QUOTES = (('"', '"'), ("“", "”"), ("«", "»"))


def negated(original: str, start: int, end: int) -> str | None:
    """Why the claim at ``original[start:end]`` is not asserted (negated, hypothetical,
    quoted, or shown false by the writer), or ``None``."""
    line_start = max(original.rfind("\n", 0, start) + 1, start - 200)
    before = original[line_start:start]
    clause = before[-60:]
    cut = None
    for cut in _CLAUSE.finditer(clause):
        pass
    if cut is not None:
        clause = clause[cut.end():]
    if _NEGATED_BEFORE.search(clause):
        return "negated or hypothetical in its sentence"
    for o, c in _QUOTES:
        if o == c:
            if before.count(o) % 2 == 1 and c in original[end : end + 80].split("\n", 1)[0]:
                return "quoted"
        elif before.rfind(o) > before.rfind(c) and c in original[end : end + 80]:
            return "quoted"
    if _ALTERNATIVE_AFTER.match(original, end) or _DENIED_AFTER.match(original, end):
        return "an alternative, or denied right after it"
    after = original[end : end + 200].split("\n\n", 1)[0]
    stops = [m.end() for m in _SENTENCE_END.finditer(after)]
    if len(stops) >= 2:
        after = after[: stops[1]]
    if _NEGATED_AFTER.search(after):
        return "shown false by the writer"
    return None


# Modular arithmetic, digits and remainders: "the units digit of 16^17 is 6", "5 * 3 * 3 = 5"
# while working mod 10.
MODULAR = re.compile(
    r"\\pmod|\\bmod|\\mod\b|\bmod\b|\bmodulo\b|\\equiv|≡|\bremainders?\b|\b(?:units?|ones|last|tens|final)\s+digits?\b|"
    r"\blast\s+(?:two|three|four|\d)\s+digits\b|\bcongruen|\bresidues?\b",
    re.I,
)
_MODULUS = re.compile(
    r"(?:\\pmod|\\bmod|\\mod|\bmod(?:ulo)?|\bdivided\s+by|\bdivisible\s+by)\s*[{(]?\s*(?:\\\(|\$)?\s*(\d{1,12})\b",
    re.I,
)
_DIGITS = [(re.compile(r"\b(?:units?|ones|last|final)\s+digit\b", re.I), 10),
           (re.compile(r"\blast\s+two\s+digits\b", re.I), 100),
           (re.compile(r"\blast\s+three\s+digits\b", re.I), 1000),
           (re.compile(r"\btens\s+digit\b", re.I), 100)]


def moduli(text: str) -> set[int] | None:
    """``None`` when ``text`` says nothing modular; else the moduli it names (maybe none)."""
    if not MODULAR.search(text):
        return None
    out = {int(m.group(1)) for m in _MODULUS.finditer(text) if 1 < int(m.group(1)) <= 10**12}
    for pat, m in _DIGITS:
        if pat.search(text):
            out.add(m)
    return out


def context_window(original: str, start: int, end: int, question: str | None = None) -> str:
    """The text a claim's modular context is read from: its paragraph, the one before, and
    the question (each bounded to ~1,500-2,000 characters)."""
    p0 = original.rfind("\n\n", max(0, start - 1500), start)
    p0 = original.rfind("\n\n", max(0, start - 1500), p0) if p0 > 0 else -1
    p1 = original.find("\n\n", end, end + 1500)
    window = original[max(0, p0, start - 1500) : (p1 if p1 >= 0 else min(len(original), end + 1500))]
    return window + "\n" + (question or "")[:2000]


# "the remainder when 2004 is divided by 12 is 0"
REMAINDER_SENTENCE = re.compile(
    r"\bremainder\s+(?:when|of)\s+\$?\\?\(?\s*(\d[\d,]*)\s*\\?\)?\$?\s+(?:is\s+)?divided\s+by\s+\$?\\?\(?\s*(\d[\d,]*)"
    r"\s*\\?\)?\$?\s*(?:,\s*)?(?:is|equals|=)\s+\$?\\?\(?\s*(?:\\boxed\{)?\s*(\d+)\b",
    re.I,
)
