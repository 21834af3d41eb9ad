"""Rewrite an answer into plain arithmetic text, keeping the map to the original.

What it rewrites (each rule is a regular expression; nothing is evaluated):
  * fenced and inline code -> blank (code is the code verifier's business);
  * LaTeX: ``\\frac{a}{b}`` -> ``((a)/(b))``, ``2\\frac{1}{2}`` -> ``(2+1/2)``, ``\\sqrt{x}`` ->
    ``sqrt(x)``, ``^{..}`` -> ``^(..)``, ``\\times \\cdot \\div``, ``\\approx``, ``\\%``, ``\\$``,
    ``\\text{..}``/``\\boxed{..}`` -> their content, math delimiters -> space, ``1{,}000``;
  * Unicode: ``× · ⋅ ÷ − ≈ ² ³ ½ ¼ ¾ ⅓ ⅔ √``, no-break and thin spaces;
  * markdown bold markers and list bullets (``**12**``, ``* 5 + 3``);
  * spoken operators between numbers: ``plus minus times multiplied by divided by``,
    ``equals``/``is equal to`` -> ``=``, ``percent`` -> ``%``, ``°F``/``degrees Celsius`` -> unit words;
  * sentence forms: "add A to B", "multiply A by B", "subtract A from B", "divide A by B",
    "the sum/product/quotient of A and B", "the difference between A and B", "twice A",
    "half of A", "A squared", "A cubed", "A to the power of B", "A raised to the 3rd power",
    "the square root of A";
  * number words next to a spoken operator and another number ("three times 4", "eight
    times four"), after a clause start or a connective only; "two dozen", "a dozen is";
  * result connectives ("is", "gives", "which equals", "to get", ...) -> a soft ``=`` marker
    (``SOFT_EQ``, or ``SOFT_APPROX`` when followed by "about"/"approximately"/"roughly").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from verifiers.arithmetic._mapped import MappedText
from verifiers._bidi import display_order

SOFT_EQ = "\ue000"
SOFT_APPROX = "\ue001"

_NUM = r"[$€£¥]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?"

_R = re.compile


def _c(p: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(p, flags)


# --- code and markdown -------------------------------------------------------------------------
_FENCE = _c(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = _c(r"`([^`\n]*)`")
_ARITH_ONLY = _c(r"[\d\s.,+\-*/^()=%$xX×÷]+")
_BULLET = _c(r"(?m)^[ \t]*[*+\-•][ \t]+")
_STARS = _c(r"\*\*")
# an operand just before / just after a "**" (spaces and tabs skipped): a number, a closing
# bracket, a lone letter (``x ** 2``); a sign counts only when a number or "(" follows it
_POW_BEFORE = _c(r"(?:[\d)\]}.]|(?<![^\W\d_])[^\W\d_])[ \t]*$")
_POW_AFTER = _c(r"[ \t]*(?:[\d(.]|[-+−][ \t]*[\d(.]|[^\W\d_](?![^\W\d_])|(?:sqrt|abs|pi)\b)")
_HEADING = _c(r"(?m)^[ \t]*#+[ \t]*")

# --- LaTeX ---------------------------------------------------------------------------------------
_TEX_SIZE = _c(r"\\(?:left|right|big|Big|bigg|Bigg)(?![a-zA-Z])\s*")
_TEX_FRACNAME = _c(r"\\[dt]frac(?![a-zA-Z])")
_TEX_MIXED = _c(r"(?<![\d.,])(\d+)\s*\\frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")
_TEX_FRAC = _c(r"\\frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_TEX_FRAC_SHORT = _c(r"\\frac\s*(\d)\s*(\d)")
# "\binom{5}{2}" with whole numbers: n! / (k! (n-k)!), within the evaluator's factorial bound
_TEX_BINOM = _c(r"\\[dt]?binom\s*\{\s*(\d{1,3})\s*\}\s*\{\s*(\d{1,3})\s*\}")
_TEX_SQRT = _c(r"\\sqrt\s*\{([^{}]*)\}")
_TEX_SQRT_BARE = _c(r"\\sqrt\s*(\d+|[a-zA-Z](?![a-zA-Z]))")  # "\sqrt3", "\sqrt x"
_TEX_ROOT = _c(r"\\sqrt\s*\[\s*(\d+)\s*\]\s*\{([^{}]*)\}")  # "\sqrt[3]{27}" = 27^(1/3)
_TEX_SUP = _c(r"\^\s*\{([^{}]*)\}")
_TEX_TEXT = _c(r"\\(?:text|textbf|textit|mathrm|mathbf|mbox|operatorname|boxed|fbox)\s*\{([^{}]*)\}")
_TEX_OPS = [
    (_c(r"\\(?:times|cdot|ast)(?![a-zA-Z])"), "*"),
    (_c(r"\\div(?![a-zA-Z])"), "/"),
    (_c(r"\\(?:approx|simeq|sim)(?![a-zA-Z])"), "≈"),
    (_c(r"\\(?:neq|ne)(?![a-zA-Z])"), "≠"),
    (_c(r"\\pi(?![a-zA-Z])"), "π"),
    (_c(r"\\%"), "%"),
    (_c(r"\\\$"), "$"),
    (_c(r"\{,\}"), ","),
    # digit groups "1,\!000" and "10\,000" (thin space) are one number
    (_c(r"(?<=\d)(?:,\s*\\!|\\,)(?=\d{3}(?!\d))"), ","),
    (_c(r"\\\\(?=\s*&\s*[=≈])"), " "),  # "a &= b \\ &= c": one chain over two rows
    (_c(r"\\\\"), " \n "),  # any other row break ends a claim
    (_c(r"\\(sin|cos|tan|log|ln|exp)(?![a-zA-Z])"), [" ", 1, " "]),
    (_c(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)(?![a-zA-Z])"), " "),
    (_c(r"\\(?:tag|label)\*?\s*\{[^{}]*\}|\\(?:nonumber|notag)(?![a-zA-Z])"), " \n "),  # equation numbers
    (_c(r"\\pm(?![a-zA-Z])"), " ± "),  # "x = 2 \pm 1": neither side is one number
    (_c(r"\\mp(?![a-zA-Z])"), " ∓ "),
    (_c(r"\\degree(?![a-zA-Z])"), " deg "),
    (_c(r"\\(?:quad|qquad)(?![a-zA-Z])"), " \n "),  # spacing between listed items: a boundary
    (_c(r"\\[,;:! ]"), " "),
    (_c(r"\\(?:cdots|ldots|dots|dotsb|dotsc|dotsm)(?![a-zA-Z])"), "..."),
    # relations and arrows end a claim: "10 = 4 \implies", "x \equiv 5 \pmod{13}"
    (_c(r"\\(?:implies|impliedby|iff|Rightarrow|Leftarrow|Longrightarrow|Leftrightarrow|rightarrow|to|"
        r"therefore|because|le|leq|ge|geq|lt|gt|leqslant|geqslant|equiv|cong|pmod|bmod|mod|in|notin|mid|nmid|"
        r"subset|subseteq|land|lor|neq|ne)(?![a-zA-Z])"),
     " ; "),
    (_c(r"&"), " "),  # alignment
    (_c(r"\\(?:begin|end)\s*\{[a-zA-Z*]+\}(?:\{[^{}]*\})?"), " \n "),
    (_c(r"\\[\[\]()]"), " \n "),  # display/inline math delimiters: no claim crosses one
    (_c(r"\$\$"), " \n "),
]
_GREEK = dict(zip(
    "alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi rho sigma tau "
    "upsilon phi varphi chi psi omega Gamma Delta Theta Lambda Xi Sigma Phi Psi Omega".split(),
    "αβγδεεζηθθικλμνξρστυφφχψωΓΔΘΛΞΣΦΨΩ"))
_TEX_GREEK = _c(r"\\(" + "|".join(sorted(_GREEK, key=len, reverse=True)) + r")(?![a-zA-Z])")
# "\sin^2 \theta" is (sin θ)^2: the power moves after a one-token argument
_TEX_TRIG_POW = _c(r"\\(sin|cos|tan)\s*\^\s*\{?\s*(\d)\s*\}?\s*(\\[a-zA-Z]+|[a-zA-Z]|"
                   r"\d+(?:\.\d+)?(?:\s*\^\s*\{?\s*\\circ\s*\}?|\s*°)?)(?![a-zA-Z])")  # "\sin^2 30^\circ"
_TEX_DEG = _c(r"\^\s*(?:\{\s*\\circ\s*\}|\(\s*\\circ\s*\)|\\circ)\s*")

# --- Unicode ---------------------------------------------------------------------------------------
# every vulgar fraction of Unicode's Number Forms block (U+2150..215E) and Latin-1
_FRACS = {"½": "1/2", "¼": "1/4", "¾": "3/4", "⅓": "1/3", "⅔": "2/3", "⅛": "1/8", "⅜": "3/8", "⅝": "5/8",
          "⅞": "7/8", "⅕": "1/5", "⅖": "2/5", "⅗": "3/5", "⅘": "4/5", "⅙": "1/6", "⅚": "5/6", "⅐": "1/7",
          "⅑": "1/9", "⅒": "1/10"}
_FRAC_CHARS = "".join(_FRACS)
_UNI_MIXED = _c(r"(?<![\d.,])(\d+)\s?([" + _FRAC_CHARS + "])")
_UNI_FRAC = _c("[" + _FRAC_CHARS + "]")
# superscript exponents: "x²" -> "x^2", "10⁶" -> "10^(6)", "x⁻¹" -> "x^(-1)", "2¹⁰" -> "2^(10)"
_SUPERSCRIPTS = {"⁰": "0", "¹": "1", "²": "2", "³": "3", "⁴": "4", "⁵": "5", "⁶": "6", "⁷": "7", "⁸": "8",
                 "⁹": "9", "⁻": "-", "⁺": "+", "⋅": "*"}
_SUPER_RUN = _c("[⁻⁺]?[⁰¹²³⁴⁵⁶⁷⁸⁹]+")
_UNI_OPS = [
    (_c("[×✕⨯]"), "*"),
    (_c("[·⋅∙]"), "*"),
    (_c("÷"), "/"),
    (_c("[−﹣－]"), "-"),
    (_c("[≈≅≃]"), "≈"),
    (_c("[\u00a0\u2009\u202f\u2007]"), " "),
    (_c(r"(?<= )[–—](?= )"), "-"),
    (_c("√"), " sqrt"),
]

# Invisible format characters (Unicode category Cf: soft hyphen, zero-width space/joiners,
# bidi embeddings/overrides/isolates, word joiner, BOM) are dropped: "2\u200b+\u200b2 = 5"
# must not hide a wrong sum. Fullwidth digits and operators (U+FF01..FF5E, common in CJK
# text) map one-to-one to ASCII (Unicode's NFKC mapping for these characters); the
# fullwidth comma and colon stay, as they separate list items in Chinese text.
_INVISIBLE = _c("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _displayed(t: MappedText) -> MappedText:
    """``t`` with each right-to-left override run in the order it displays
    (:func:`verifiers._bidi.display_order`: same length, so the position map holds; the override
    becomes a zero-width space, dropped with the other invisible characters). The verifier checks
    what the reader sees: "= \u202e391" shows "= 193"."""
    return MappedText(display_order(t.text), t.pos, t.orig_len)


_FULLWIDTH_CHARS = "０１２３４５６７８９＋＝（）．％＊／"
_FULLWIDTH = _c("[" + _FULLWIDTH_CHARS + "]")
_FULLWIDTH_TABLE = {ord(c): ord(c) - 0xFEE0 for c in _FULLWIDTH_CHARS}

# --- words ----------------------------------------------------------------------------------------
_NUMEND = r"(?<=[\d%)])"
_NUMSTART = r"(?=[$€£¥(]?\d|\()"
_WORD_OPS = [
    (_c(_NUMEND + r"[ \t]+plus[ \t]+" + _NUMSTART, re.I), " + "),
    (_c(_NUMEND + r"[ \t]+minus[ \t]+" + _NUMSTART, re.I), " - "),
    (_c(_NUMEND + r"[ \t]+(?:times|multiplied[ \t]+by)[ \t]+" + _NUMSTART, re.I), " * "),
    (_c(_NUMEND + r"[ \t]+divided[ \t]+by[ \t]+" + _NUMSTART, re.I), " / "),
    (_c(_NUMEND + r"[ \t]+(?:raised[ \t]+)?to[ \t]+the[ \t]+power[ \t]+of[ \t]+" + _NUMSTART, re.I), " ^ "),

    (_c(r"(?<=\d)[ \t]*(?:percent|per[ \t]+cent)\b", re.I), "%"),
]
_DEG = [
    (_c(r"\s*°\s*F\b|\s+deg(?:rees?)?\s+(?:Fahrenheit|F)\b|\s+Fahrenheit\b", re.I), " degF"),
    (_c(r"\s*°\s*C\b|\s+deg(?:rees?)?\s+(?:Celsius|centigrade|C)\b|\s+Celsius\b", re.I), " degC"),
    (_c(r"\s*°"), " deg"),  # an angle: "\tan 60°"
]
_PHRASES = [
    # (pattern, pieces) ; A/B are groups 1/2
    (_c(r"\badd(?:ing)?\s+(" + _NUM + r")\s+(?:to|and)\s+(" + _NUM + r")", re.I), ["(", 2, " + ", 1, ")"]),
    (_c(r"\bmultiply(?:ing)?\s+(" + _NUM + r")\s+(?:by|and|with)\s+(" + _NUM + r")", re.I), ["(", 1, " * ", 2, ")"]),
    (_c(r"\bsubtract(?:ing)?\s+(" + _NUM + r")\s+from\s+(" + _NUM + r")", re.I), ["(", 2, " - ", 1, ")"]),
    (_c(r"\bdivid(?:e|ing)\s+(" + _NUM + r")\s+by\s+(" + _NUM + r")", re.I), ["(", 1, " / ", 2, ")"]),
    (_c(r"\b(?:the\s+)?sum\s+of\s+(" + _NUM + r")\s+and\s+(" + _NUM + r")", re.I), ["(", 1, " + ", 2, ")"]),
    (_c(r"\b(?:the\s+)?product\s+of\s+(" + _NUM + r")\s+and\s+(" + _NUM + r")", re.I), ["(", 1, " * ", 2, ")"]),
    (_c(r"\b(?:the\s+)?quotient\s+of\s+(" + _NUM + r")\s+and\s+(" + _NUM + r")", re.I), ["(", 1, " / ", 2, ")"]),
    (_c(r"\b(?:the\s+)?difference\s+between\s+(" + _NUM + r")\s+and\s+(" + _NUM + r")", re.I),
     [" abs(", 1, " - ", 2, ")"]),
    (_c(r"\b(?:the\s+)?square\s+root\s+of\s+(" + _NUM + r")", re.I), [" sqrt(", 1, ")"]),
    # only before a lone number: "half of 6000-1500-2000" has no single reading
    (_c(r"\btwice\s+(" + _NUM + r")(?!\s*[-+*/×÷^(\d])", re.I), ["(2 * ", 1, ")"]),
    (_c(r"\bdouble\s+(" + _NUM + r")(?!\s*[-+*/×÷^(\d])", re.I), ["(2 * ", 1, ")"]),
    (_c(r"\btriple\s+(" + _NUM + r")(?!\s*[-+*/×÷^(\d])", re.I), ["(3 * ", 1, ")"]),
    (_c(r"\bhalf\s+of\s+(" + _NUM + r")(?!\s*[-+*/×÷^(\d])", re.I), ["(1/2 * ", 1, ")"]),
    (_c(r"(?<=[\d)])\s+squared\b", re.I), ["^2"]),
    (_c(r"(?<=[\d)])\s+cubed\b", re.I), ["^3"]),
    (_c(r"(?<=[\d)])[ \t]+(?:raised[ \t]+)?to[ \t]+the[ \t]+(\d+)(?:st|nd|rd|th)[ \t]+power\b", re.I), [" ^ ", 1]),
]
_ANY_UNICODE = _c("[" + _FRAC_CHARS + "×✕⨯·⋅∙÷−﹣－≈≅≃⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺\u00a0\u2009\u202f\u2007–—√]")
_ANY_PHRASE = _c(r"\b(?:add|adding|multiply|multiplying|subtract|subtracting|divide|dividing|sum|product|"
                 r"quotient|difference|square|twice|double|triple|half|squared|cubed|power)\b")
_ANY_WORD_OP = _c(r"\b(?:plus|minus|times|multiplied|divided|percent|per\s+cent|power)\b")
_PHRASES_KEYED = [(pat, pieces, key) for (pat, pieces), key in zip(_PHRASES, [
    "add", "multiply", "subtract", "divid", "sum", "product", "quotient", "difference", "square",
    "twice", "double", "triple", "half", "squared", "cubed", "power"])]

# --- number words -------------------------------------------------------------------------------
# Written as digits only where they are operands of a spoken operator next to another number
# ("three times 4 is 12", "Three times $2000 is $6000", "eight times four is 32"), or count
# dozens ("two dozen", "a dozen is 12"). Elsewhere a number word stays prose ("one of them").
_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
         "sixteen seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()
NUMBER_WORDS: dict[str, int] = {w: i for i, w in enumerate(_ONES)}
NUMBER_WORDS.update({w: 20 + 10 * i for i, w in enumerate(_TENS)})
_NW = r"(?:(?:" + "|".join(_TENS) + r")(?:[- ](?:" + "|".join(_ONES[1:10]) + r"))?|" + "|".join(_ONES[::-1]) + r")"
_SPOKEN_OP = r"(\s+(?:times|plus|minus|multiplied\s+by|divided\s+by)\s+)"
_WORD_ARITH = _c(
    r"(?<![\w$€£¥.,-])(?:(" + _NW + r")|([$€£¥]?\d[\d,]*(?:\.\d+)?))" + _SPOKEN_OP
    + r"(?:(" + _NW + r")(?![\w-])(?!\s+(?:of|as|more|less|fewer|other|another|half)\b)|(?=[$€£¥]?\d))",
    re.I,
)
_ANY_NUMBER_WORD = _c(r"\b(?:" + "|".join(_ONES + _TENS) + r")\b")
# the word before a number word that makes it an operand, not a pronoun or an adjective
_OPERAND_AFTER = frozenset("so then and thus therefore hence is was are were that's thats which because since or but "
                           "gives makes equals get gets also now that".split())
_PREV_WORD = _c(r"([A-Za-z']+)[ \t]*$")
_DOZEN = _c(r"\b(?:(a)|(" + _NW + r"))([ \t]+dozens?\b)", re.I)
_A_DOZEN_IS = _c(r"[ \t]*(?:=|is\b|equals\b|has\b|contains\b)", re.I)


def number_word_value(word: str) -> int | None:
    """0-99 for a number word (``seven``, ``twenty-four``, ``Twenty four``), else ``None``."""
    parts = re.split(r"[- ]+", word.strip().lower())
    if not parts or any(p not in NUMBER_WORDS for p in parts):
        return None
    if len(parts) == 1:
        return NUMBER_WORDS[parts[0]]
    if len(parts) == 2 and parts[0] in _TENS and 1 <= NUMBER_WORDS[parts[1]] <= 9:
        return NUMBER_WORDS[parts[0]] + NUMBER_WORDS[parts[1]]
    return None


def _word_operand_ok(text: str, start: int) -> bool:
    """A number word at ``start`` begins a clause (no word before it on the line, or a
    connective like "so", "is", "and"): "each one times 4" is not "1 * 4"."""
    line = text[max(0, text.rfind("\n", 0, start) + 1, start - 40) : start]
    if not line.strip() or line.rstrip()[-1:] in ".,;:!?=(":
        return True
    m = _PREV_WORD.search(line)
    return bool(m) and m.group(1).lower() in _OPERAND_AFTER


def _word_arith(t: MappedText) -> MappedText:
    text = t.text

    def rep(m: re.Match[str]) -> list[str | int] | None:
        left_w, right_w = m.group(1), m.group(4)
        if left_w is None and right_w is None:
            return None
        if left_w is not None and not _word_operand_ok(text, m.start()):
            return None
        pieces: list[str | int] = [str(number_word_value(left_w)) if left_w else 2, 3]
        if right_w:
            pieces.append(str(number_word_value(right_w)))
        return pieces

    return t.sub(_WORD_ARITH, rep)


def _dozen(t: MappedText) -> MappedText:
    text = t.text

    def rep(m: re.Match[str]) -> list[str | int] | None:
        if m.group(1):  # "a dozen" only as a definition: "a dozen is 12"
            if not _A_DOZEN_IS.match(text, m.end()):
                return None
            return ["1", 3]
        return [str(number_word_value(m.group(2))), 3]  # "two dozen" is a quantity wherever it stands

    return t.sub(_DOZEN, rep)


_SOFT = _c(
    r"(?:,\s*)?\b(?:(?:which\s+)?(?:is\s+equal\s+to|equals)|which\s+(?:is|gives(?:\s+us)?|makes|comes\s+to)|to\s+get|(?:we|you|I)\s+get|"
    r"gives(?:\s+us)?|giving(?:\s+us)?|that\s+is|is|are|was|makes|yields|results\s+in|comes\s+to)"
    r"(\s+(?:about|approximately|approx\.|roughly|around))?(?![\w'])",
    re.I,
)
_APPROX_AFTER_EQ = _c(r"(?<==)(\s*)(?:about|approximately|approx\.|roughly|around)\b", re.I)
_TILDE = _c(r"(?<![\w~])~\s*(?=[$€£¥]?\d)")


def _rebuild(t: MappedText, pattern: re.Pattern[str],
             fn: Callable[[re.Match[str]], list[str | tuple[int, int]] | None]) -> MappedText:
    """Like ``MappedText.sub``, but ``fn`` may keep any slices ``(start, end)`` of the match
    with their own positions (and insert strings, mapped to the match's start), so a
    rewrite that drops characters inside a token still maps the token back exactly."""
    text, pos = t.text, t.pos
    out: list[str] = []
    out_pos: list[int] = []
    last = 0
    changed = False
    for m in pattern.finditer(text):
        pieces = fn(m)
        if pieces is None:
            continue
        changed = True
        out.append(text[last : m.start()])
        out_pos.extend(pos[last : m.start()])
        for piece in pieces:
            if isinstance(piece, tuple):
                a, b = piece
                out.append(text[a:b])
                out_pos.extend(pos[a:b])
            else:
                out.append(piece)
                out_pos.extend([pos[m.start()]] * len(piece))
        last = m.end()
    if not changed:
        return t
    out.append(text[last:])
    out_pos.extend(pos[last:])
    return MappedText("".join(out), out_pos, t.orig_len)


# a comment in a code block, after a blank or at the start of a line: "# ..." in Python, shell,
# R and unlabelled blocks, "// ..." in C-family blocks (in Python "a // b" is floor division);
# what follows it is prose and is read as prose
_HASH_COMMENT = _c(r"(?:^|(?<=[ \t]))#[ \t]?([^\n]*)", re.M)
_SLASH_COMMENT = _c(r"(?:^|(?<=[ \t]))//[ \t]?([^\n]*)", re.M)
_SLASH_LANGS = frozenset("c cpp c++ cc h hpp cs csharp java javascript js jsx ts tsx typescript go golang rust rs "
                         "kotlin kt swift scala dart php".split())


def _fence_comments(m: re.Match[str]) -> list[str | tuple[int, int]]:
    """A fenced code block is blanked (the code verifier's business) except for its comments:
    ``# 10000 * 1.0125 ** 12 = 11607.55`` is a claim in prose. Each comment becomes a line
    of its own; the code around it is gone."""
    pieces: list[str | tuple[int, int]] = [" \n "]
    body_start = m.group(0).find("\n")
    if body_start < 0:
        return pieces
    lang = m.group(0)[3:body_start].strip().lower()
    comment = _SLASH_COMMENT if lang in _SLASH_LANGS else _HASH_COMMENT
    for c in comment.finditer(m.string, m.start() + body_start, m.end()):
        if c.group(1).strip():
            pieces.extend([c.span(1), " \n "])
    return pieces


# Thousands separators of other locales (CLDR number patterns), rewritten to plain digits:
#   "1.234.567" / "1.234,56" (de, es, it, pt, nl, tr, id: "." groups, "," decimals; one group
#   without decimals, "1.000", stays English 1.000), "1'234'567" / "1’234.50" (de-CH),
#   "1 234 567,89" with a no-break, thin or narrow no-break space (fr, SI, ru, pl; "," decimals),
#   "12,34,567.50" (en-IN lakh grouping), "1_000_000" (Python literals).
_LOCALE_HINT = _c(r"\d[.'’\u00a0\u2009\u202f,_]\d")
_TRAILING_HINT = _c(r"\d[ \u00a0\u202f]?[€£¥₹]")
_LOCALE_NUMBERS = _c(
    r"(?<![\d.,'’_])(?:"
    r"(?P<dot>\d{1,3}(?:\.\d{3}){2,}(?:,\d+)?|\d{1,3}\.\d{3},\d+)"
    r"|(?P<apos>\d{1,3}(?:['’]\d{3})+(?:\.\d+)?)"
    r"|(?P<space>\d{1,3}(?:[\u00a0\u2009\u202f]\d{3})+(?:,\d+)?)"
    r"|(?P<lakh>\d{1,2}(?:,\d{2})+,\d{3}(?:\.\d+)?)"
    r"|(?P<under>\d{1,3}(?:_\d{3})+)"
    r")(?![\d'’_]|[.,]\d)"
)


_COMMA_DECIMAL_TEXT = _c(r"(?<![\d.,])\d{1,3}(?:\.\d{3})+,\d{1,2}(?![\d.,])|\d[\u00a0\u2009\u202f]\d{3},\d{1,2}(?![\d.,])")
_COMMA_DECIMAL = _c(r"(?<![\d.,])(\d+),(\d{1,2})(?![\d.,]\d|\d)")


def _locale_number(m: re.Match[str]) -> list[str | tuple[int, int]]:
    """Keep the digits of a grouped number with their positions; the decimal comma of the
    ``dot`` and ``space`` styles becomes ``.``."""
    kind = m.lastgroup
    out: list[str | tuple[int, int]] = []
    for k in range(m.start(), m.end()):
        ch = m.string[k]
        if ch.isdigit():
            out.append((k, k + 1))
        elif ch == "," and kind in ("dot", "space"):
            out.append(".")
        elif ch == "." and kind in ("apos", "lakh"):
            out.append((k, k + 1))
    return out


# "5 €", "12,50 €", "3 £": a currency sign after the amount (fr, de, es...) goes before it
_TRAILING_CURRENCY = _c(r"(?<![\d.,$€£¥₹])(\d+(?:[.,]\d+)*)[ \u00a0\u202f]?([€£¥₹])(?![\w$€£¥₹])")


# A Markdown table (GFM spec, "Tables"): a header row, a delimiter row, body rows
_TABLE = _c(r"(?m)^[ \t]*\|[^\n]*\|[ \t]*\n[ \t]*\|[ \t:|-]*-[ \t:|-]*\|[ \t]*\n(?:[ \t]*\|[^\n]*\|[ \t]*(?:\n|\Z))+")
_EXPR_HEADERS = frozenset("expression calculation computation formula operation calc working math".split())
_VALUE_HEADERS = frozenset("value result answer total product sum quotient difference = equals".split())


def _table_claims(m: re.Match[str]) -> list[str | tuple[int, int]] | None:
    """In a table whose header names an expression column followed by a value column
    ("| Expression | Value |", "| Calculation | Result |"), each body row states
    ``expression = value``: the cell border between the two becomes ``=``. Other tables are
    left as they are (their cells end claims at the ``|``)."""
    text = m.string
    lines = []
    k = m.start()
    while k < m.end():
        e = text.find("\n", k, m.end())
        e = m.end() if e < 0 else e
        lines.append((k, e))
        k = e + 1
    pipes = [[i for i in range(a, b) if text[i] == "|"] for a, b in lines]
    header = [text[p + 1 : q].strip(" \t*_").lower() for p, q in zip(pipes[0], pipes[0][1:])]
    cols = [j for j in range(len(header) - 1) if header[j] in _EXPR_HEADERS and header[j + 1] in _VALUE_HEADERS]
    if not cols:
        return None
    borders = [row[cols[0] + 1] for row in pipes[2:] if len(row) > cols[0] + 2]
    if not borders:
        return None
    out: list[str | tuple[int, int]] = []
    last = m.start()
    for b in borders:
        out.extend([(last, b), "="])
        last = b + 1
    out.append((last, m.end()))
    return out


def _blank(m: re.Match[str]) -> list[str]:
    return [" \n "]


def _fix_mixed(m: re.Match[str]) -> list[str | int] | None:
    if int(m.group(2)) >= int(m.group(3)) or int(m.group(3)) == 0:
        return None
    return ["(", 1, "+", 2, "/", 3, ")"]


def _uni_mixed(m: re.Match[str]) -> list[str | int]:
    return ["(", 1, "+" + _FRACS[m.group(2)] + ")"]


def _superscript(m: re.Match[str]) -> list[str]:
    digits = "".join(_SUPERSCRIPTS[c] for c in m.group(0))
    return ["^" + digits] if len(digits) == 1 else ["^(" + digits + ")"]  # "cm²" stays a unit power


def _soft(m: re.Match[str]) -> list[str]:
    return [" " + (SOFT_APPROX if m.group(1) else SOFT_EQ) + " "]


def normalize(text: str | MappedText, *, soft: bool = True, original: str | None = None) -> MappedText:
    """Rewrite ``text`` into plain arithmetic text (see module docstring).

    ``soft=False`` leaves result connectives alone (used for the question text). ``original``
    is the text the positions of a ``MappedText`` refer to: a list bullet must start a line of
    it (``\\[ -\\sin x \\]`` opens no line, its minus is no bullet).
    """
    t = text if isinstance(text, MappedText) else MappedText(text)
    if _INVISIBLE.search(t.text):
        if "\u202e" in t.text:
            t = _displayed(t)
        t = t.sub(_INVISIBLE, [""])
    if _FULLWIDTH.search(t.text):  # one-to-one, so the position map is unchanged
        t = MappedText(t.text.translate(_FULLWIDTH_TABLE), t.pos, t.orig_len)
    if "`" in t.text:
        t = _rebuild(t, _FENCE, _fence_comments)
        t = t.sub(_INLINE_CODE, _inline_code)
    if "|" in t.text and "-" in t.text:
        t = _rebuild(t, _TABLE, _table_claims)
    if _LOCALE_HINT.search(t.text):
        comma_decimals = bool(_COMMA_DECIMAL_TEXT.search(t.text))
        t = _rebuild(t, _LOCALE_NUMBERS, _locale_number)
        if comma_decimals:
            # the text writes decimals with a comma ("1.234,50"): so is "765,50" in it
            t = _rebuild(t, _COMMA_DECIMAL, lambda m: [m.span(1), ".", m.span(2)])
    if _TRAILING_HINT.search(t.text):
        t = _rebuild(t, _TRAILING_CURRENCY, lambda m: [m.group(2), m.span(1)])
    if "\\" in t.text or "{" in t.text:
        t = _latex(t)
    if _ANY_UNICODE.search(t.text):
        t = t.sub(_UNI_MIXED, _uni_mixed)
        t = t.sub(_UNI_FRAC, lambda m: ["(" + _FRACS[m.group(0)] + ")"])
        t = t.sub(_SUPER_RUN, _superscript)
        for pat, rep in _UNI_OPS:
            t = t.sub(pat, [rep])
    orig = original if original is not None else (text if isinstance(text, str) else None)
    if orig is None:
        t = t.sub(_BULLET, [" "])
    else:
        t = t.sub(_BULLET, lambda m: _bullet(m, t.pos, orig))
    if "#" in t.text:
        t = t.sub(_HEADING, [" "])
    if "**" in t.text:
        t = _stars(t)
    lower = t.text.lower()
    if "°" in lower or "deg" in lower or "fahrenheit" in lower or "celsius" in lower:
        for pat, rep in _DEG:
            t = t.sub(pat, [rep])
    if "dozen" in lower:
        t = _dozen(t)
    if _ANY_WORD_OP.search(lower) and _ANY_NUMBER_WORD.search(lower):
        t = _word_arith(t)
        lower = t.text.lower()
    if _ANY_PHRASE.search(lower):
        for pat, pieces, key in _PHRASES_KEYED:
            if key in lower:
                t = t.sub(pat, pieces)
    if _ANY_WORD_OP.search(lower):
        for pat, rep in _WORD_OPS:
            t = t.sub(pat, [rep])
    if "~" in t.text or "about" in lower or "approx" in lower or "rough" in lower or "around" in lower:
        t = t.sub(_APPROX_AFTER_EQ, [" ~"])
        t = t.sub(_TILDE, ["~"])
    if soft:
        t = t.sub(_SOFT, _soft)
    return t


def _stars(t: MappedText) -> MappedText:
    """Tell markdown emphasis (``**12**``, dropped) from Python's power operator (``3 ** 2``,
    ``(1 + r) ** (4*3)``, ``2**10``, kept for the tokeniser, which reads it as ``^``).

    A ``**`` is a power only between two operands on one line (a number, a bracket or a lone
    letter before it; a number, a bracket, a signed number or a lone letter after it). With
    the same spacing on both sides it is always a power: CommonMark's flanking rule (spec
    0.31 §6.2) lets a delimiter run with blanks on both sides neither open nor close emphasis,
    and one glued on both sides between digits is read as Python writes it. With blanks on
    one side only (``2 **3``) it is emphasis when another ``**`` on the line can pair with it,
    a power otherwise. Runs of three or more stars are emphasis."""
    text = t.text

    def rep(m: re.Match[str]) -> list[str] | None:
        s, e = m.start(), m.end()
        if text[s - 1 : s] == "*" or text[e : e + 1] == "*":
            return [" "]
        line_start = text.rfind("\n", 0, s) + 1
        line_end = text.find("\n", e)
        line_end = len(text) if line_end < 0 else line_end
        if not (_POW_BEFORE.search(text, line_start, s) and _POW_AFTER.match(text, e, line_end)):
            return [" "]
        blank_before, blank_after = text[s - 1 : s] in (" ", "\t"), text[e : e + 1] in (" ", "\t")
        if blank_before == blank_after:
            return None
        other = "**" in (text[e:line_end] if blank_before else text[line_start:s])
        return [" "] if other else None

    return t.sub(_STARS, rep)


def _bullet(m: re.Match[str], pos: list[int], orig: str) -> list[str] | None:
    """A bullet only at the start of a line of the original text (not after a math delimiter
    turned into a line break)."""
    k = m.start()
    if k == 0:
        return [" "] if (not pos or orig[: pos[0]].strip() == "") else None
    p = pos[k - 1] if k - 1 < len(pos) else len(orig)
    return [" "] if p < len(orig) and orig[p] == "\n" else None


def _inline_code(m: re.Match[str]) -> list[str | int] | None:
    # `12 + 3 = 15` is sometimes used for emphasis; keep it when it holds only arithmetic
    if _ARITH_ONLY.fullmatch(m.group(1)):
        return [" ", 1, " "]
    return [" \n "]


def _binom(m: re.Match[str]) -> list[str | int] | None:
    n, k = int(m.group(1)), int(m.group(2))
    if k > n or n > 300:
        return None
    return ["((", 1, ")!/((", 2, ")!*(" + str(n - k) + ")!))"]


def _latex(t: MappedText) -> MappedText:
    t = t.sub(_TEX_SIZE, [""])
    t = t.sub(_TEX_FRACNAME, ["\\frac"])
    # the exponent is written as text mapped to the end of the match, so a claim ending in
    # "\sin^2 \theta" spans to the symbol, not to the "2"
    t = t.sub(_TEX_TRIG_POW, lambda m: [" (\\", 1, " ", 3, ")^" + m.group(2) + " "])
    t = t.sub(_TEX_GREEK, lambda m: [" " + _GREEK[m.group(1)] + " "])
    t = t.sub(_TEX_DEG, [" deg"])
    t = t.sub(_TEX_MIXED, _fix_mixed)
    for _ in range(8):
        before = t.text
        t = t.sub(_TEX_TEXT, [" ", 1, " "])
        t = t.sub(_TEX_BINOM, _binom)
        t = t.sub(_TEX_FRAC, ["((", 1, ")/(", 2, "))"])
        t = t.sub(_TEX_FRAC_SHORT, ["(", 1, "/", 2, ")"])
        t = t.sub(_TEX_ROOT, ["((", 2, ")^(1/", 1, "))"])
        t = t.sub(_TEX_SQRT, ["sqrt(", 1, ")"])
        t = t.sub(_TEX_SQRT_BARE, ["sqrt(", 1, ")"])
        t = t.sub(_TEX_SUP, ["^(", 1, ")"])
        if t.text == before:
            break
    for pat, rep in _TEX_OPS:
        t = t.sub(pat, rep if isinstance(rep, list) else [rep])
    return t
