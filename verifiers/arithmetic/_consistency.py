"""Internal consistency (docs/arithmetic.md; docs/design.md vocabulary "basis"): a quantity defined
with one value and later used with another in the same answer ("x = 10 … using x = 5", "Let the rate
r = 0.05 … with r = 0.04", "the price is $60 … so the $50 price") is a failed check.

Entry point: :func:`check` ``(answer, question=None) -> list[Check]``; one ``fail`` check per
inconsistent use (``verifier="arithmetic"`` so that policies need no change, ``basis=
"consistency"``: the draft compared with itself, nothing a verifier model wrote), ``found`` the
value used, ``expected`` the value defined, ``evidence`` both spans (``defined``/``used``:
``text``, ``span``, ``value``). No check at all when nothing is inconsistent: this is a detector
of contradictions, not a unit of coverage.

Conservative by design (false alarms cost more than misses):

* a *definition* is an explicit assignment of a one-letter variable to a plain number: ``x = 10``,
  ``let x be 10``, ``Let the rate r = 0.05``, ``r = 5%``, ``\\( x = 10 \\)``, ``x := 10`` -- a
  right-hand side that goes on as an expression (``x = 10 + y``, ``x = 2 \\cdot 3``) is none, nor
  is a letter that is a term of an equation (``y + x = 10``, ``2x = 10``), a function argument,
  subscripted or primed (``x_1``, ``x'``, ``x^2``: other variables);
* a *use* is the same variable with an explicit use word right before it: "using x = 5", "with
  x = 5", "for our x = 5", "the value x = 5"; for named amounts, "the price is $60" (definition)
  and "the $50 price" (use) of the same noun. An evaluation ("substitute x = 1", "plug in",
  "setting", "at x = 0", "for x = 2", "when/if x = 3") is neither: a functional equation is
  evaluated at one point after another;
* a use is flagged only when every earlier assignment of the variable had one and the same value
  and the used value differs beyond rounding (``3.14159`` and ``3.14`` agree; ``5%`` and
  ``0.05`` agree), with the same unit word (or none) after both values;
* never flagged: code blocks (removed); a variable that is updated or iterated anywhere in the
  answer ("new x", "now x", "x becomes", "x is now", ``x = x + 1``, ``x += 1``, "for each x",
  "x from 1 to", ``\\sum_{x=1}``, ``x \\in``, "x = 1, 2, 3"); several values before the use
  (roots, cases: ``x = 2 or x = 3``); a use in a conditional or alternative clause ("if", "when",
  "suppose", "try", "check", "case", "instead", "another" ...); an answer or question that splits
  into cases or parts between the two, or speaks of iterations; a named amount whose noun also
  comes qualified ("new price", "sale price") or whose used value appears anywhere else in the
  answer (computed, so an update: "after the sale the price is ... the $50 price").

Measured on the labelled math cases (``bench/consistency_bench.py``, results in
``bench/results/consistency.md``).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from fractions import Fraction

from verifiers._types import Check

VERIFIER = "arithmetic"

#: characters of an answer this detector reads (it runs on every arithmetic check)
MAX_CHARS = 60_000

_NOTE = re.compile(r"<<[^<>\n]{1,400}>>")
_FENCE = re.compile(r"```.*?(?:```|\Z)|~~~.*?(?:~~~|\Z)", re.S)
_LATEX_TEXT = re.compile(r"\\(?:text|mathrm|textrm|mbox|operatorname)\s*\{([^{}]*)\}")
_LATEX_DELIM = re.compile(r"\\[()\[\]]|\$\$")
_NUMBER = r"(?P<neg>-\s*)?(?P<cur>\\?\$\s*)?(?P<num>\d{1,3}(?:,\d{3}){1,5}(?:\.\d{1,12})?|\d{1,15}(?:\.\d{1,12})?|\.\d{1,12})(?P<pct>\s*\\?%|\s*percent\b)?"
#: a one-letter variable assigned a plain number; what precedes the letter is checked in code
_ASSIGN = re.compile(r"(?<![\w\\'^_{}])(?P<var>[A-Za-z])(?![\w'_^(\[{])\s*(?::=|=|\\coloneqq)\s*" + _NUMBER)
_LET_BE = re.compile(r"\b(?:[Ll]et|[Ss]et)\s+(?P<var>[A-Za-z])\s+be\s+(?:equal\s+to\s+)?" + _NUMBER)
#: what may follow the value of a definition or a use: the end, punctuation or a word -- never
#: an operator, a bracket or more digits (then the right-hand side is an expression)
_AFTER_OK = re.compile(r"\s*(?:$|[.,;:!?)\]}]|\\[)\]]|\$(?!\d)|(?<=\s)(?P<word>[A-Za-z]+)|(?<=\n))")
_OPERATOR_AFTER = re.compile(r"\s*(?:[-+*/^×÷·=<>≤≥(\[{]|\\(?:cdot|times|div|frac|pm|mp|sqrt|le|ge|neq|approx|quad))")
#: use words right before the variable
_USE_BEFORE = re.compile(r"(?:\busing|\bwith|\bour|\bthe\s+value)\s*(?:\\\(|\$)?\s*$", re.I)
#: evaluation words: "substitute x = 1" evaluates a function or an equation at a point (one
#: after another in a functional equation), it neither defines nor uses a quantity
_EVAL_BEFORE = re.compile(r"(?:\bsubstitut\w*|\bplug\w*(?:\s+in)?|\bput\w*|\binsert\w*|\bevaluat\w*|\bset(?:ting)?|"
                          r"\bat|\bfor|\bwhen|\bif)\s*(?:\\\(|\$)?\s*$", re.I)
#: a clause that makes the use hypothetical or an alternative (looked for before the use word in
#: its sentence)
_HYPOTHETICAL = re.compile(r"\b(?:if|when|whenever|suppose|supposing|assume|assuming|try|trying|test|testing|check|"
                           r"checking|verify|case|instead|another|alternative|alternatively|other|different|new|now|"
                           r"next|again|second|third|e\.g|example|say|compare|comparing|consider|what|would|"
                           r"could|might|whether|or)\b", re.I)
_SENTENCE_START = re.compile(r"(?:[.!?]\s|\n)")
_UPDATE = r"(?:\bnew\s+{v}\b|\bnow\s+{v}\b|\b{v}\s+(?:becomes|became|is\s+now|changes|changed|increases|decreases|" \
          r"goes|is\s+updated|is\s+reduced|is\s+increased|updates)|\bupdate[ds]?\s+{v}\b|\b{v}\s*(?:\+=|-=|\*=|/=|←|<-)|" \
          r"(?<![\w\\]){v}\s*=\s*(?:[^=\n,;.$]|\.(?=\d)){{0,40}}(?<![\w\\]){v}(?![\w'])|\bnext\s+{v}\b|\b{v}\s+(?:from|ranges|runs|goes|varies)|" \
          r"\bfor\s+(?:(?:each|every|all|any|some)\s+)?{v}\b|\b{v}\s*(?:\\in|∈|\\geq?|\\leq?|≥|≤|<|>)|[_{{]\s*(?:\{{\s*)?{v}\s*=|" \
          r"(?<![\w\\]){v}\s*=\s*-?\d+\s*,\s*-?\d+\s*,|\b{v}\s*=\s*-?\d+(?:\s*,\s*|\s+)(?:\.\.\.|\\ldots|\\dots|…|to\b)|" \
          r"\b{v}\s*\\to|\b{v}\s*→|\b{v}-th\b|\bdifferent\s+{v}\b|\bother\s+{v}\b|\bsome\s+{v}\b|\b{v}\s*\\neq|\b{v}\s*≠)"
#: words that end a scope: between a definition and a use they mean "another scenario"
_SCOPE_BREAK = re.compile(r"\b(?:case|cases|part|scenario|alternatively|otherwise|suppose|assume|iteration|loop|"
                          r"repeat|repeating|again|similarly|likewise|in\s+general|for\s+example|e\.g\.|instead|"
                          r"option|subcase|next|consider|now)\b|\(\s*(?:[b-h]|ii|iii|iv)\s*\)|^[ \t]*#+\s|^[ \t]*\*\*", re.I | re.M)
_GLOBAL_OFF = re.compile(r"\b(?:iteration|iterate|loop|recursion|recursive|recurrence|sequence|algorithm|induction)\b", re.I)
#: one-letter words that are English, not variables, when written in prose
_NOT_VARS = {"I"}
_STOP_AFTER = {"and", "or", "so", "then", "is", "in", "to", "for", "we", "the", "this", "that", "which", "as",
               "since", "because", "but", "gives", "get", "be", "into", "from", "at", "by", "of", "if", "it",
               "when", "where", "thus", "hence", "therefore", "now", "here", "with", "on", "are", "was"}


@dataclass(slots=True)
class _Occ:
    var: str
    value: Fraction
    text: str
    start: int
    end: int
    decimals: int
    unit: str | None
    percent: bool
    use: bool


def check(answer: str, question: str | None = None) -> list[Check]:
    """The ``fail`` checks of every inconsistent use in ``answer`` (see the module doc); ``[]``
    when none, when the text is not a string, or on any internal fault (a detector of
    contradictions must never turn a right answer into an error)."""
    if not isinstance(answer, str) or "=" not in answer and "$" not in answer and " be " not in answer:
        return []
    try:
        text = _FENCE.sub(lambda m: " " * len(m.group()), answer[:MAX_CHARS])
        text = _NOTE.sub(lambda m: " " * len(m.group()), text)  # GSM8K calculator notes <<48/2=24>>
        if _GLOBAL_OFF.search(text):
            return []
        out = _variables(text, question if isinstance(question, str) else None)
        out += _amounts(text)
        return out
    except Exception:  # noqa: BLE001 - never turn an answer into an error check
        return []


def _clean(text: str) -> str:
    """``text`` with ``\\text{cm}`` -> ``     cm `` style and LaTeX delimiters blanked, same length
    (spans stay offsets into the answer)."""
    def keep_inner(m: re.Match[str]) -> str:
        inner = m.group(1)
        return " " * (m.start(1) - m.start()) + inner + " " * (m.end() - m.end(1))
    text = _LATEX_TEXT.sub(keep_inner, text)
    text = _LATEX_DELIM.sub(lambda m: " " * len(m.group()), text)
    return text.replace("\\%", " %").replace("\\,", "  ").replace("\\!", "  ").replace("\\ ", "  ")


def _value(m: re.Match[str]) -> tuple[Fraction, int, bool] | None:
    num = m.group("num").replace(",", "")
    try:
        v = Fraction(num)
    except (ValueError, ZeroDivisionError):
        return None
    if m.group("neg"):
        v = -v
    decimals = len(num.split(".", 1)[1]) if "." in num else 0
    return v, decimals, bool(m.group("pct"))


def _tail(text: str, end: int) -> tuple[bool, str | None]:
    """Whether the value ending at ``end`` ends the right-hand side (not an expression), and the
    unit word after it (None when none or a stop word)."""
    if _OPERATOR_AFTER.match(text, end):
        return False, None
    if re.match(r"\s*\d", text[end:end + 3]):
        return False, None
    m = _AFTER_OK.match(text, end)
    if m is None:
        return False, None
    word = m.group("word")
    if word and word.lower() in ("million", "billion", "thousand", "trillion", "hundred", "k", "m", "bn"):
        return False, None  # scale words: "1.5 million" vs "1,500,000" is not compared
    if word and word.lower() in _STOP_AFTER:
        word = None
    return True, word.lower() if word else None


def _before_ok(text: str, start: int) -> bool:
    """The variable at ``start`` is assigned, not a term of an equation: what precedes it on its
    line is the start, a separator, an opening bracket or a word (never an operator or a digit)."""
    i = start - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    if i < 0 or text[i] in "\n,;:.!?(\"'$":
        return True
    if text[i].isalpha():  # "so x = 10", "let x = 10" (a word, not "2x" or "xy": the regex needs a non-word before)
        return True
    return False


def _occurrences(text: str) -> list[_Occ]:
    occs: list[_Occ] = []
    for rx in (_ASSIGN, _LET_BE):
        for m in rx.finditer(text):
            var = m.group("var")
            if rx is _ASSIGN and not _before_ok(text, m.start("var")):
                continue
            val = _value(m)
            if val is None:
                continue
            ok, unit = _tail(text, m.end())
            if not ok:
                continue
            value, decimals, pct = val
            head = text[max(0, m.start("var") - 40):m.start("var")]
            if rx is _ASSIGN and _EVAL_BEFORE.search(head):
                continue
            use = bool(_USE_BEFORE.search(head))
            occs.append(_Occ(var, value, text[m.start():m.end()].strip(), m.start(), m.end(), decimals, unit, pct, use))
    occs.sort(key=lambda o: o.start)
    return occs


def _same(a: _Occ, b: _Occ) -> bool:
    """Whether two stated values agree: equal, one the other rounded to its decimals, or a percent
    and its fraction (``5%`` and ``0.05``)."""
    cands = [(a.value, b.value)]
    if a.percent != b.percent:
        cands.append((a.value / 100, b.value) if a.percent else (a.value, b.value / 100))
    for x, y in cands:
        if x == y:
            return True
        d = min(a.decimals + (2 if a.percent and not b.percent else 0),
                b.decimals + (2 if b.percent and not a.percent else 0))
        if abs(x - y) <= Fraction(1, 2) * Fraction(1, 10 ** d) + abs(y) * Fraction(1, 10 ** 9):
            # the less precise one is the other rounded ("3.14" for 3.14159; "5" for 4.6 is not:
            # integers agree only when equal up to half a unit)
            if d > 0 or x == y:
                return True
    return False


def _sentence_before(text: str, pos: int) -> str:
    """The text from the start of the sentence holding ``pos`` up to ``pos``."""
    window = text[max(0, pos - 160):pos]
    starts = [m.end() for m in _SENTENCE_START.finditer(window)]
    return window[starts[-1]:] if starts else window


def _variables(text: str, question: str | None) -> list[Check]:
    clean = _clean(text)
    occs = _occurrences(clean)
    if not any(o.use for o in occs):
        return []
    qvals: dict[str, set[Fraction]] = {}
    if question:  # every value the question gives a letter, in any form ("if r = 0.05 ... with r = 0.04")
        for rx in (_ASSIGN, _LET_BE):
            for m in rx.finditer(_clean(question[:MAX_CHARS])):
                val = _value(m)
                if val is not None:
                    qvals.setdefault(m.group("var"), set()).add(val[0])
    checks: list[Check] = []
    flagged: set[str] = set()
    first_def: dict[str, _Occ] = {}
    values: dict[str, list[_Occ]] = {}   # per variable: one occurrence per distinct value (at most 2)
    updated: dict[str, bool] = {}
    breaks = [m.start() for m in _SCOPE_BREAK.finditer(clean)]
    for occ in occs:
        var, reps = occ.var, values.setdefault(occ.var, [])
        prior = list(reps)
        if len(reps) < 2 and not any(_same(r, occ) for r in reps):
            reps.append(occ)
        if not occ.use:
            first_def.setdefault(var, occ)
            continue
        first = first_def.get(var)
        if var in flagged or var in _NOT_VARS or first is None or len(qvals.get(var, ())) > 1:
            continue  # a use before any definition ("with a = -2 ... with a = 2") compares uses only
        if len(prior) != 1:
            continue  # several values before the use: roots, cases, steps
        if _same(first, occ) or first.unit != occ.unit:
            continue
        if var not in updated:
            updated[var] = re.search(_UPDATE.format(v=re.escape(var)), clean) is not None
        if updated[var]:
            continue
        k = bisect.bisect_right(breaks, first.end - 1)
        if k < len(breaks) and breaks[k] < occ.start:
            continue
        if _HYPOTHETICAL.search(_sentence_before(clean, occ.start)):
            continue
        flagged.add(var)
        checks.append(_fail(var, first, occ, text))
    return checks


_AMOUNT_DEF = re.compile(r"\b[Tt]he\s+(?P<noun>[a-z]{3,20})\s+(?:is|was|costs?|=)\s+(?P<cur>\$)\s*(?P<num>\d{1,3}(?:,\d{3}){1,5}(?:\.\d{1,12})?|\d{1,15}(?:\.\d{1,12})?)(?![\d.,]{0,3}\d)(?P<neg>)(?P<pct>)")
_AMOUNT_USE = re.compile(r"\b[Tt]he\s+(?P<cur>\$)\s*(?P<num>\d{1,3}(?:,\d{3}){1,5}(?:\.\d{1,12})?|\d{1,15}(?:\.\d{1,12})?)(?P<neg>)(?P<pct>)\s+(?P<noun>[a-z]{3,20})\b")
_QUALIFIERS = ("new", "sale", "discounted", "original", "old", "final", "regular", "reduced", "full", "total",
               "unit", "current", "initial", "list", "retail", "selling", "buying", "marked", "adjusted",
               "previous", "later", "first", "second", "other", "average", "each", "per", "higher", "lower",
               "increased", "decreased", "updated", "net", "base", "starting", "ending", "monthly", "weekly",
               "daily", "yearly", "annual", "hourly", "usual", "normal", "special", "combined", "remaining")


def _amounts(text: str) -> list[Check]:
    """"the price is $60 … the $50 price": the same noun, two amounts, nothing in between that
    could make the second one (see the module doc)."""
    uses = list(_AMOUNT_USE.finditer(text))
    if not uses:
        return []
    checks: list[Check] = []
    defs = list(_AMOUNT_DEF.finditer(text))
    done: set[str] = set()
    for u in uses:
        noun = u.group("noun")
        if noun in done:
            continue
        before = [d for d in defs if d.group("noun") == noun and d.end() <= u.start()]
        if not before:
            continue
        values = {Fraction(d.group("num").replace(",", "")) for d in before}
        used = Fraction(u.group("num").replace(",", ""))
        if len(values) != 1 or used in values:
            continue
        if re.search(r"\b(?:" + "|".join(_QUALIFIERS) + r")\s+" + re.escape(noun) + r"\b", text, re.I):
            continue
        if re.search(r"\b" + re.escape(noun) + r"\s+(?:after|before|of\s+(?:the|each|one|a)|per|for)\b", text, re.I):
            continue
        # the used value must come from nowhere: appearing anywhere else (a computed result, a
        # second item's price) makes it an update or another quantity
        num = re.escape(u.group("num"))
        plain = u.group("num").replace(",", "")
        others = [m for m in re.finditer(r"(?<![\d.,])(?:" + num + "|" + re.escape(plain) + r")(?![\d]|\.\d)", text)
                  if not (u.start() <= m.start() < u.end())]
        if others:
            continue
        if _SCOPE_BREAK.search(text, before[-1].end(), u.start()):
            continue
        d = before[0]
        dv, uv = _amount_occ(d, text), _amount_occ(u, text)
        done.add(noun)
        checks.append(_fail(noun, dv, uv, text))
    return checks


def _amount_occ(m: re.Match[str], text: str) -> _Occ:
    num = m.group("num").replace(",", "")
    return _Occ(m.group("noun"), Fraction(num), text[m.start():m.end()], m.start(), m.end(),
                len(num.split(".", 1)[1]) if "." in num else 0, None, False, False)


def _show(o: _Occ) -> str:
    v = o.value
    s = str(v.numerator) if v.denominator == 1 else format(float(v), "g")
    return s + ("%" if o.percent else "")


def _fail(name: str, first: _Occ, use: _Occ, text: str) -> Check:
    return Check(
        verifier=VERIFIER, claim=text[use.start:use.end].strip(), outcome="fail",
        expected=_show(first), found=_show(use),
        evidence={"kind": "consistency", "variable": name,
                  "defined": {"text": text[first.start:first.end].strip(), "span": [first.start, first.end],
                              "value": _show(first)},
                  "used": {"text": text[use.start:use.end].strip(), "span": [use.start, use.end],
                           "value": _show(use)}},
        confidence=0.9, span=(use.start, use.end), basis="consistency",
        note=f"{name} is defined as {_show(first)} ({text[first.start:first.end].strip()!r}) and later used as "
             f"{_show(use)} ({text[use.start:use.end].strip()!r})")
