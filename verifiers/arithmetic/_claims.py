"""Find arithmetic claims in normalised text and verify each one.

A *run* is a maximal stretch of math tokens; ``=``/``≈``/soft ``=`` split it into segments.
Each adjacent pair of segments is a candidate claim:

* ``expression = number``        the common case (``16 - 3 - 4 = 9 duck eggs``);
* ``number = expression``        reversed (``12 = 3 * 4``), not when the number carries a
                                 physical unit (``3 hours = 3 * 60``);
* ``number unit = number unit``  a unit conversion (``5 km = 3.11 miles``) when both words are
                                 known units of one dimension; other number pairs are not claims;
* ``expression = expression``    both computed; skipped when the right side continues a running
                                 total (``16 - 3 = 13 - 4 = 9``).

Precision rules that keep prose numbers out: a run glued to a digit or letter by ``: / - .``
(times ``2:15``, dates, ranges, versions) loses its outer segment; a soft ``=`` ("is", "gives")
needs an operator on its left and a bare number on its right; symbols make a pair unchecked.

Beside it: ``_segments`` (a claim's sides and where they start and end), ``_sampling``
(identities tested at sample points before SymPy), ``_claim_units`` (units of a claim's sides),
``_shapes`` (shapes of its expression trees).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from verifiers._types import Check
from verifiers.arithmetic._expr import (
    NotNumeric,
    Refused,
    evaluate,
    first_literal,
    format_value,
    has_operation,
    has_var,
    interval,
    is_literal,
    literal_of,
    to_text,
)
from verifiers.arithmetic._confirm import Unconfirmed, expression_string, plain_string, second_value
from verifiers.arithmetic._equivalent import symbolic_difference
from verifiers.arithmetic._latex import context_window, moduli, negated
from verifiers.arithmetic._mapped import MappedText
from verifiers.arithmetic._tokens import MULTIPLIER_WORDS, Token
from verifiers.arithmetic._tolerance import Verdict, equal_values, judge
from verifiers.arithmetic._work import COST_CONVERT, COST_IDENTITY, COST_PAIR, COST_SECOND, Work
from verifiers.arithmetic._units import calendar_candidates, convert, dozen_factor, unit_info
from verifiers.arithmetic._claim_units import _counts_dozens, _money_of, _uncancelled, _units_conflict
from verifiers.arithmetic._sampling import _MORE_POINTS, _agrees_at, _sampled_difference, _size
from verifiers.arithmetic._shapes import (_bare_fraction, _differs_in_unit, _has_hundred_percent, _has_percent,
                                         _percent_on_base, _product_only, _tight_range, _uses_value)
from verifiers.arithmetic._segments import (_WORD_LABEL, _Seg, _cut_after, _cut_before, _ensure_prefix, _ensure_suffix,
                                           _make_seg, _plain_stretch, _split_at_sep, _sticky_after, _sticky_before)

VERIFIER = "arithmetic"
_OPEN_DELIM = re.compile(r"(?:\\\[|\\\(|\$\$|\$|\\begin\{[a-zA-Z*]+\})\s*$")
_REMAINDER = re.compile(r"[ \t]*(?:\\text\s*\{\s*)?(?:remainder|rem|R|r)\b[ \t]*\}?[ \t]*(?:of[ \t]+)?(?:\\\(|\$)?[ \t]*"
                        r"([-−]?[ \t]*\d+(?:\.\d+)?)")
MAX_IDENTITY_NODES = 80
MAX_DECISIONS = 4  # SymPy expansions per answer (each ~2-10 ms); later identities stay unchecked





_UNIT_TAIL = re.compile(r"[ \t]*(?:°[ \t]*[CF]\b|degrees?[ \t]+[A-Za-z]+|[A-Za-z]+)")


def rtoks_of(toks: list[Token]) -> list[Token]:
    """Tokens after the (last) ``=`` of a claim."""
    k = max(i for i, t in enumerate(toks) if t.kind in ("EQ", "SOFT"))
    return toks[k + 1 :] or toks[-1:]


_COMPARATIVE = re.compile(
    r"[ \t]*(?:more|less|longer|shorter|fewer|ago|later|earlier|older|younger|before|after|than|late|early|"
    r"faster|slower|over|under|left|remaining|extra|behind|ahead|too|apart|from|since|until)\b", re.I)
_LABEL = re.compile(r"([A-Za-z][A-Za-z' ]{0,60}?)[ \t]*$")
_BETWEEN = re.compile(r"\s*(?:\([^()\d]{0,40}\))?[\s.,;:!]*(?:(?:so|thus|therefore|then|hence|and)\b[\s,]*)?", re.I)


def _label_before(text: str, start: int) -> str | None:
    """Words just before a run that starts with ``=`` on its line (``Total earnings =``)."""
    line_start = text.rfind("\n", 0, start) + 1
    m = _LABEL.search(text, line_start, start)
    if not m or m.end() != start and text[m.end() : start].strip():
        return None
    return " ".join(m.group(1).lower().split()) or None


def _only_label_between(text: str, end: int, start: int, label: str) -> bool:
    if start - end > 300:
        return False
    between = text[end:start]
    k = between.lower().rfind(label.split()[0]) if label.strip() else -1
    if k < 0:
        return False
    gap = between[:k]
    return _BETWEEN.fullmatch(gap) is not None


_RATE_WORDS = frozenset("for in over after during within per every each of by than at".split())


def _judge_candidates(values: list[Any], lit: Any, sign: int, approx: bool) -> Verdict:
    """Judge a stated value against one computed value, or against several (calendar
    conventions): ``pass`` when it matches any, ``fail`` only when it is outside all of them
    (beyond the tolerance of the lowest and the highest), ``unknown`` in between."""
    verdicts = [judge(x, lit, sign=sign, approx=approx) for x in values]
    if len(values) == 1:
        return verdicts[0]
    for v in verdicts:
        if v.outcome == "pass":
            return v
    stated = sign * lit.value
    lo, hi = min(values), max(values)
    nearest = min(range(len(values)), key=lambda i: abs(Fraction(values[i]) - stated))
    v = verdicts[nearest]
    span = f"{verdicts[0].expected} .. {verdicts[-1].expected}"
    if all(x.outcome == "fail" for x in verdicts) and not (lo <= stated <= hi):
        v.expected = span
        v.note = f"outside every calendar convention ({span})"
        return v
    return Verdict("unknown", v.rule, v.expected, v.tolerance, f"depends on the calendar convention ({span})", 0.5)


_DIGIT_RUN = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


def _digit_runs(s: str) -> list[str]:
    return [d.replace(",", "") for d in _DIGIT_RUN.findall(s)]


def _same_value(a: Any, b: Any) -> bool:
    """Equal exactly (two ``Fraction``s) or to 1e-9 relative (a float on either side)."""
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    try:
        fa, fb = float(a), float(b)
    except (OverflowError, ValueError):
        return False
    return abs(fa - fb) <= 1e-9 * max(1.0, abs(fa), abs(fb))


#: fractions that are also ordinals: after "the" they count a position ("The third bag had
#: 300 / 2 = 150 M&Ms"), not a part ("a third of 90")
_ORDINALS = frozenset("third fifth tenth quarter".split())
_THE_BEFORE = re.compile(r"(?i)\bthe\s+$")


def _ordinal(text: str, word: Token) -> bool:
    """Whether multiplier word ``word`` is an ordinal here: one of :data:`_ORDINALS` right
    after "the". Before, every "third" made the next run's head "prose", and right claims
    ("The third monkey eats 315 - 24 = 291") went unchecked while the report counted the answer
    as covered."""
    return word.text.lower() in _ORDINALS and _THE_BEFORE.search(text, max(0, word.start - 8), word.start) is not None


class ClaimFinder:
    """Turns the runs of one text into ``Check`` records.

    ``kind`` names the claim form in the evidence (``equation``, ``calculator_note``, ...);
    ``strict`` (calculator notes) reports unparseable pairs as ``unknown`` instead of skipping.
    """

    def __init__(self, mt: MappedText, original: str, offset: int = 0, kind: str = "equation", strict: bool = False,
                 note_ends: set[int] | None = None, spans: Any = None, question: str | None = None,
                 work: Work | None = None):
        self.mt = mt
        self.work = work if work is not None else Work(None)  # operations counted (``_work``)
        self.spans = spans  # ``_latex.MathSpans`` of ``original`` (offset 0 only)
        self.question = question  # the user's message: its modular wording counts as context
        self.original = original
        self.offset = offset
        self.kind = kind
        self.strict = strict
        self.note_ends = note_ends or set()
        self.before: Token | None = None
        self._run_first: Token | None = None
        self._confirmed: tuple | None = None
        self._labelled: tuple | None = None
        self._math = False
        self._decisions = 0
        self.checks: list[Check] = []

    # -- spans ---------------------------------------------------------------------------------
    def span(self, toks: list[Token]) -> tuple[int, int]:
        s, e = self.mt.orig_span(toks[0].start, toks[-1].end)
        s, e = s + self.offset, e + self.offset
        text = self.original
        opened = text.count("{", s, e) - text.count("}", s, e)
        while opened > 0 and e < len(text) and text[e] == "}":  # "= \\boxed{5}": close the brace
            e += 1
            opened -= 1
        return (s, e)

    def claim_text(self, span: tuple[int, int]) -> str:
        return self.original[span[0] : span[1]].strip()

    # -- main ----------------------------------------------------------------------------------
    def run(self, run: list[Token], before: Token | None = None) -> None:
        """Check every claim of one run; ``before`` is the token just before it."""
        self.before = before
        self._run_first = run[0]
        self._confirmed = None
        seps: list[Token] = []
        parts: list[list[Token]] = [[]]
        for t in run:
            if t.kind in ("EQ", "SOFT"):
                seps.append(t)
                parts.append([])
            else:
                parts[-1].append(t)
        if not seps:
            return
        self._math = math = run[0].math >= 0 and all(t.math == run[0].math for t in run)
        segs = [_make_seg(p, formula=math) for p in parts]
        text = self.mt.text
        if run[0].kind == "EQ":
            label = _label_before(text, run[0].start)
        elif run[0].kind == "VAR" and len(run) > 1 and run[1].kind == "EQ":
            label = ((_label_before(text, run[0].start) or "") + " " + run[0].text.lower()).strip()
        else:
            label = None
        prev = self._labelled
        self._labelled = None
        if label and not _WORD_LABEL.search(label) and (math or (prev is not None and "\n" not in text[prev[1]:run[0].start])):
            label = None  # "x = 4 - \sqrt{3}, x = 4 + \sqrt{3}": two solutions, not one chain

        if run[0].kind not in ("EQ", "SOFT") and _sticky_before(text, run[0].start):
            segs[0].bad = True
        if _cut_before(text, run[0].start, math):
            segs[0].bad = True  # "\dots 3 = 9 + 12 + 9 = 30", "!5 = 44", "\binom{5}{2} = 10" in a formula
        if math and self.spans is not None and self._region_cut(run):
            segs[0].bad = True  # "Gain = (coins) × \( \frac{1}{100} = ... \)": the formula began in prose
        if math and _cut_after(text, run[-1].end):
            segs[-1].bad = True  # "= \frac{\sqrt 2}{2} \sec x": the side goes on past what we read
        if run[-1].kind not in ("EQ", "SOFT") and _sticky_after(text, run[-1].end):
            segs[-1].bad = True
        if before is not None and (before.kind in ("OP", "NUM", "RP", "PCT") or
                                   (before.text.lower() in MULTIPLIER_WORDS and not _ordinal(text, before)) or
                                   (run[0].kind == "OP" and before.kind in ("WORD", "TRAIL"))):
            segs[0].bad = True  # "250 of the books - 135 sold - 50 = 65": the head is prose
        if label and prev is not None and prev[0] == label and _only_label_between(text, prev[1], seps[0].start, label):
            # "Total fruits = 52 + 24 + 44 + 48 \] \[ Total fruits = 178": one chain over two lines
            self._confirmed = prev[3]
            self._pair(prev[2], seps[0], segs[1])
        for i, sep in enumerate(seps):
            self._pair(segs[i], sep, segs[i + 1])
        if label:
            self._labelled = (label, run[-1].end, segs[-1], self._confirmed)

    def _region_cut(self, run: list[Token]) -> bool:
        spans = self.spans
        k = run[0].math
        start = self.mt.pos[run[0].start]
        if self.original[spans.starts[k] : start].strip():
            return False  # the run is not where the formula opens
        before = self.original[max(0, spans.starts[k] - 12) : spans.starts[k]]
        before = _OPEN_DELIM.sub("", before).rstrip()
        if not before or before.endswith("**"):
            return False  # "**Sum:** \( 1 + 1 = 2 \)": markdown bold, not a product
        line = _OPEN_DELIM.sub("", self.original[: spans.starts[k]].rpartition("\n")[2]).rstrip()
        if before[-1] in "-*+" and not line[:-1].strip():
            return False  # "- \(12 = 2^2 \cdot 3\)": a markdown bullet opens the line, not a minus
        # "Gain = (coins) × \( ... \)" cuts the formula's first operand; an "=" before it does not
        # ("Total = \(2 \times 2000 = 4000\)": the formula's first side is whole)
        return before[-1] in "×*+-/^·÷" or before.endswith(("\\times", "\\cdot", "\\div"))

    def _side(self, seg: _Seg, left: bool) -> tuple[tuple | None, list[Token] | None]:
        if seg.bad:
            return None, None
        if seg.full is not None:
            return seg.full, seg.toks
        if self.strict or self._math:  # a calculator note, a formula: no partial reads
            return None, None
        if left:
            _ensure_suffix(seg)
            return seg.suffix, seg.suffix_toks
        _ensure_prefix(seg)
        return seg.prefix, seg.prefix_toks

    def _pair(self, a: _Seg, sep: Token, b: _Seg) -> None:
        """Check one ``a = b``. A left side opening with a list label (``_enumerator``) is read
        without it; its failure stands only when the side read as a spaced product fails too
        ("(2) 3+3 = 9" is ``unknown``: 2 * 3 + 3 is 9), as other two-reading claims are decided
        only where the readings agree (``_judge``: "a ± p%")."""
        n = len(self.checks)
        self._pair_once(a, sep, b)
        if a.label_product is None or len(self.checks) == n or self.checks[-1].outcome != "fail":
            return
        read, confirmed = self.checks[n:], self._confirmed
        saved = a.suffix, a.suffix_toks
        del self.checks[n:]
        a.suffix, a.suffix_toks = a.label_product, a.toks
        try:
            self._pair_once(a, sep, b)
        finally:
            product = self.checks[n:]
            del self.checks[n:]
            a.suffix, a.suffix_toks = saved
            self._confirmed = confirmed
            self.checks.extend(read)
        if not any(c.outcome == "fail" for c in product):
            c = self.checks[-1]
            c.outcome, c.confidence = "unknown", 0.5
            c.note = (f"the line opens with {a.toks[0].text}{a.toks[1].text}{a.toks[2].text}: as a list label "
                      f"the value is {c.expected}; as a factor the claim holds")

    def _pair_once(self, a: _Seg, sep: Token, b: _Seg) -> None:
        self.work.spend(COST_PAIR)
        soft = sep.kind == "SOFT"
        ln, ltoks = self._side(a, True)
        rn, rtoks = self._side(b, False)
        if ln is None or rn is None or ltoks is None or rtoks is None:
            if self.strict and not soft and (a.toks or b.toks):
                toks = (a.toks or []) + [sep] + (b.toks or [])
                self._unknown(toks, "could not parse the calculator note")
            return
        if has_var(ln) or has_var(rn):
            if self._math and not soft and not self.strict and has_var(ln) and has_var(rn):
                self._identity(ln, rn, ltoks + [sep] + rtoks)
            return
        approx = sep.approx or b.approx
        l_lit, r_lit = is_literal(ln), is_literal(rn)
        toks = ltoks + [sep] + rtoks
        if soft:
            conversion = is_literal(ln) and r_lit and unit_info(literal_of(ln)[0].unit) is not None
            if not (has_operation(ln) or conversion) or not r_lit or rtoks is not b.toks:
                return
        if r_lit and self._after_note(rtoks):
            return  # "9 * 2 = $<<9*2=18>>18": the calculator note is the same claim
        # values
        try:
            lv = evaluate(ln)
            rv = evaluate(rn)
        except Refused as exc:
            self._unknown(toks, f"refused: {exc}")
            return
        except NotNumeric as exc:
            if self.strict:
                self._unknown(toks, f"not a number: {exc}")
            return
        if not self.strict and _tight_range(ln, ltoks) and not (r_lit and rv < 0):
            # "1990-2000 = 10 years", "3-4 = about 1 hour": a range, not a subtraction (a range
            # is never negative: "12-71.2 = -69.2" is a subtraction)
            return
        if _bare_fraction(ln) and r_lit and abs(lv) < 1 <= abs(rv) and not self.strict:
            return  # "2/5 is equal to 12.8 hectares": a part of a whole, not a quotient
        if l_lit and r_lit:
            if self._confirmed is not None and self._confirmed[0] is a and not _differs_in_unit(ln, rn):
                # "(2 + 3) * 4 = 20 = 21": the chain claims the expression equals 21 as well
                _, node, value, etoks = self._confirmed
                lit, sign = literal_of(rn)
                self._judge(node, value, lit, sign, approx, etoks + [sep] + rtoks, a, b)
                return
            self._conversion(ln, rn, a, b, toks, approx, soft)
            return
        if r_lit:
            lit, sign = literal_of(rn)
            if not self.strict and self._remainder(ln, lit, sign, toks):
                return
            if _units_conflict(_uncancelled(a, lit.unit), _money_of(ltoks), lit):
                return
            n_before = len(self.checks)
            self._judge(ln, lv, lit, sign, approx, toks, a, b)
            if len(self.checks) > n_before and self.checks[-1].outcome == "pass":
                self._confirmed = (b, ln, lv, ltoks)
            return
        # running total: "16 - 3 = 13 - 4" (the right side starts from the left's value)
        first = first_literal(rn)
        if first is not None and equal_values(first.value, lv):
            return
        if first is not None and not isinstance(lv, float) and abs(Fraction(lv) - first.value) <= first.ulp / 2:
            return
        if l_lit:
            if soft or approx:
                return  # "1024 \\approx 10^3": the rough side is the expression; its precision is not stated
            lit, sign = literal_of(ln)
            if lit.unit or a.units or (_has_percent(rn) and not lit.percent) or _uses_value(rn, lit.value):
                return  # "6 nephews = 96 cookies/6", "48 = 100% + 20%", "$80 = 25/100 x $80"
            if _units_conflict(_uncancelled(b, lit.unit), _money_of(rtoks), lit):
                return
            self._judge(rn, rv, lit, sign, approx, toks, b, a, reverse=True)
            return
        if soft:
            return
        # expression = expression
        if equal_values(lv, rv):
            self._emit(toks, "pass", format_value(lv), to_text(rn), ln, rn, "exact", "0", "", 0.9)
            return
        if approx:
            return  # "≈" between two computations states no precision to hold them to
        bl, br = interval(ln), interval(rn)
        if bl is not None and br is not None and bl[0] <= br[1] and br[0] <= bl[1]:
            self._emit(toks, "unknown", format_value(lv), format_value(rv), ln, rn, "exact", "0",
                       "consistent with rounded intermediate values", 0.5)
            return
        left, right = _split_at_sep(toks)
        second = self._second_opinion([(left, lv), (right, rv)])
        if second.get("agrees") is False:
            self._emit(toks, "unknown", format_value(lv), format_value(rv), ln, rn, "exact", "0", second["note"], 0.5,
                       second=second)
            return
        self._emit(toks, "fail", format_value(lv), format_value(rv), ln, rn, "exact", "0",
                   "the two sides of the equation differ", 0.7, exact=lv, stated=rv, second=second)

    def _after_note(self, toks: list[Token]) -> bool:
        if not self.note_ends:
            return False
        pos = self.mt.pos
        return any(pos[k] in self.note_ends for t in toks for k in range(t.start, t.end))

    def _judge(self, node: tuple, value: Any, lit: Any, sign: int, approx: bool, toks: list[Token],
               expr_seg: _Seg, lit_seg: _Seg, reverse: bool = False) -> None:
        v = judge(value, lit, sign=sign, approx=approx, bounds=lambda: interval(node))
        if v.outcome == "fail" and _counts_dozens(expr_seg.units, lit):
            # "4 dozen eggs * $2 = $96": the writer may count a dozen as 12 of its items
            # a product or quotient has just these readings; any other tree is left undecided
            for other in (value * 12, value / 12):
                v2 = judge(other, lit, sign=sign, approx=approx, bounds=None)
                if v2.outcome == "pass":
                    v = v2
                    v.note = "a dozen counted as 12"
                    break
            else:
                if not _product_only(node):
                    v = Verdict("unknown", v.rule, v.expected, v.tolerance, "a dozen may be counted as 1 or as 12", 0.5)
        if v.outcome != "pass" and not lit.percent and _has_hundred_percent(node):
            # "32 / 96 * 100% = 33.333": the writer means the percentage number
            v2 = judge(value * 100, lit, sign=sign, approx=approx, bounds=None)
            if v2.outcome == "pass":
                v = v2
                v.note = (v.note + " (x 100% read as a percentage)").strip()
        on_base = node if lit.percent else _percent_on_base(node)
        if on_base is not node:
            # "100 - 20% = 80": a percent added to or taken from a base is a share of that base.
            # Two readings; the statement is decided only where they do not disagree about it.
            try:
                v2 = judge(evaluate(on_base), lit, sign=sign, approx=approx, bounds=None)
            except (ArithmeticError, ValueError, OverflowError):
                v2 = None
            if v2 is not None and v2.outcome == "pass":
                v = v2
                v.note = (v.note + " (a \u00b1 p% read as a share of a)").strip()
            elif v2 is not None and v.outcome == "pass":  # "50 + 10% = 50": only as 50 + 0.1
                v = Verdict("unknown", v.rule, v2.expected, v.tolerance,
                            f"a \u00b1 p% read as a share of a gives {v2.expected}; only as the number p/100 "
                            f"does it give the stated value", 0.5)
            elif v2 is not None and v.outcome == "fail" and v2.outcome == "fail":
                # the natural reading's value is the one a correction should aim at
                v = Verdict("fail", v2.rule, v2.expected, v2.tolerance,
                            f"a \u00b1 p% read as a share of a gives {v2.expected} (as the number p/100: "
                            f"{v.expected})", v.confidence)
        found = ("-" if sign < 0 else "") + lit.text.strip()
        conf = v.confidence
        outcome, note, second = v.outcome, v.note, None
        if outcome == "fail" and (reverse or self.kind == "natural_language"):
            conf = 0.85
        if outcome == "fail":
            left, right = _split_at_sep(toks)
            expr_toks, stated_toks = (right, left) if reverse else (left, right)
            second = self._second_opinion([(expr_toks, value), (stated_toks, sign * lit.value)])
            if second.get("agrees") is False:
                outcome, conf = "unknown", 0.5
                note = second["note"]
        self._emit(toks, outcome, v.expected, found, node, None, v.rule, v.tolerance, note, conf,
                   approx=approx, exact=value, stated=sign * lit.value, second=second)

    def _conversion(self, ln: tuple, rn: tuple, a: _Seg, b: _Seg, toks: list[Token], approx: bool,
                    soft: bool = False) -> None:
        llit, lsign = literal_of(ln)
        rlit, rsign = literal_of(rn)
        lu, ru = llit.unit, rlit.unit
        first = a.toks[0] if a.toks else None
        if first is not None and first is self._run_first and self.before is not None and \
                self.before.kind == "WORD" and self.before.text.lower() in _RATE_WORDS:
            return  # "7.5 hours a day for 6 days = 45 hours": a rate, not a conversion
        dozen = dozen_factor(lu, ru)
        if dozen is not None:
            if llit.value == rlit.value:
                return  # "3 dozen = 3 cartons": a recount, not a conversion
            dz_seg, count_unit = (a, ru) if dozen > 1 else (b, lu)
            if soft and count_unit and count_unit not in dz_seg.units:
                return  # "2 dozen is 2 boxes": "is" may name something else; "=" or the same noun only
            values = [lsign * llit.value * dozen]
            names = ("dozen", count_unit or "") if dozen > 1 else (lu or "", "dozen")
        else:
            if not lu or not ru or lu == ru:
                return
            li, ri = unit_info(lu), unit_info(ru)
            if li is None or ri is None or li[1] != ri[1] or li[0] == ri[0]:
                return
            names = (li[0], ri[0])
            cands = calendar_candidates(lsign * llit.value, lu, ru)
            if cands is not None:
                values = cands
            else:
                self.work.spend(COST_CONVERT)
                conv = convert(lsign * llit.value, lu, ru)
                if conv is None:
                    return
                values = [conv]
        span = self.span(toks)
        tail = _UNIT_TAIL.match(self.original, span[1])
        if tail:
            span = (span[0], tail.end())
        if soft and _COMPARATIVE.match(self.original, span[1]):
            return  # "his 2 hours is 30 minutes more than hers": a comparison, not a conversion
        v = _judge_candidates(values, rlit, rsign, approx)
        found = self.original[self.span(rtoks_of(toks))[0] : span[1]].strip()
        expected = f"{v.expected} {names[1]}".strip()
        evidence = {
            "kind": "unit_conversion",
            "expression": f"{format_value(lsign * llit.value)} {names[0]} -> {names[1]}".strip(),
            "value": format_value(values[0]) if len(values) == 1 else
            f"{format_value(values[0])} .. {format_value(values[-1])} (calendar conventions)",
            "rule": v.rule,
            "tolerance": v.tolerance,
            "tool": "pint" if dozen is None and len(values) == 1 and calendar_candidates(
                llit.value, lu or "", ru or "") is None else "exact factors",
        }
        self.checks.append(
            Check(
                verifier=VERIFIER,
                claim=self.claim_text(span),
                outcome=v.outcome,  # type: ignore[arg-type]
                expected=expected,
                found=found,
                evidence=evidence,
                confidence=v.confidence,
                span=span,
                note=v.note or ("" if v.outcome == "pass" else f"{found} should be {expected}"),
            )
        )

    def _emit(self, toks: list[Token], outcome: str, expected: str, found: Any, ln: tuple, rn: tuple | None,
              rule: str, tol: str, note: str, conf: float, approx: bool = False, exact: Any = None,
              stated: Any = None, second: dict[str, Any] | None = None) -> None:
        span = self.span(toks)
        claim = self.claim_text(span)
        evidence: dict[str, Any] = {"kind": self.kind, "expression": to_text(ln), "rule": rule, "tolerance": tol}
        if second is not None:
            evidence["second_evaluation"] = {k: v for k, v in second.items() if k != "note"}
        if outcome == "fail" and not self.strict:
            why = self._withdrawn(span, exact, stated)
            if why is not None:
                outcome, conf, note = "unknown", 0.5, why
                evidence["context"] = why
        if rn is not None:
            evidence["right_expression"] = to_text(rn)
        if exact is not None:
            evidence["value"] = format_value(exact)
            if isinstance(exact, Fraction) and exact.denominator != 1:
                evidence["exact"] = f"{exact.numerator}/{exact.denominator}"
        if approx:
            evidence["approximate"] = True
        if not note and outcome == "fail":
            note = f"{to_text(ln)} = {expected}, not {found}"
        self.checks.append(
            Check(
                verifier=VERIFIER,
                claim=claim,
                outcome=outcome,  # type: ignore[arg-type]
                expected=expected,
                found=found if not isinstance(found, str) else found,
                evidence=evidence,
                confidence=conf,
                span=span,
                note=note,
            )
        )

    def _second_opinion(self, sides: list[tuple[list[Token], Any]]) -> dict[str, Any]:
        """Evaluate each side of a would-be failure a second time, independently (``_confirm``:
        SymPy's parser on the re-read span, exact arithmetic on its tree) and compare with the
        first evaluation. ``agrees`` is True when every side has the same value both ways (the
        failure is confirmed), False otherwise (the check becomes ``unknown``; ``note`` says
        why, the evidence keeps both values)."""
        out: dict[str, Any] = {"method": "sympy.parsing.sympy_parser.parse_expr + exact rational walk",
                               "expressions": [], "values": []}
        text = self.mt.text
        for k, (toks, first) in enumerate(sides):
            try:
                a, b = self.mt.orig_span(toks[0].start, toks[-1].end) if toks else (0, 0)
                a, b = a + self.offset, b + self.offset
                src = None
                # the written span holds exactly the numbers the tokens read (no word turned into
                # an operator, "9 squared", no locale grouping): then read what is written
                if toks and _digit_runs(self.original[a:b]) == _digit_runs(
                        " ".join(text[t.start:t.end] for t in toks if t.kind == "NUM")):
                    a, b = _plain_stretch(self.original, a, b, left=k == 0)
                    src = plain_string(self.original[a:b])
                v2 = None
                if src is not None:  # the written text itself, when it is plain arithmetic
                    self.work.spend(COST_SECOND)
                    try:
                        v2 = second_value(src)
                    except Unconfirmed:
                        v2 = None
                if v2 is None:
                    src = expression_string(toks, text)
                    self.work.spend(COST_SECOND)
                    v2 = second_value(src)
                out["expressions"].append(src)
            except Unconfirmed as exc:
                out.update(agrees=False, reason=str(exc),
                           note=f"not confirmed: the second evaluation could not read the claim ({exc})")
                return out
            out["values"].append(format_value(v2))
            if not _same_value(first, v2):
                out.update(agrees=False, first_value=format_value(first), second_value=format_value(v2),
                           note=f"two evaluations disagree: {format_value(first)} (parser) vs "
                                f"{format_value(v2)} (SymPy) for {src}")
                return out
        out["agrees"] = True
        return out

    def _withdrawn(self, span: tuple[int, int], exact: Any, stated: Any) -> str | None:
        """Why a computed difference is not a false claim here (``_latex`` context rules)."""
        why = negated(self.original, span[0], span[1])
        if why is not None:
            return why
        mods = moduli(context_window(self.original, span[0], span[1], self.question))
        if mods is None:
            return None
        if not mods:
            return "modular or digit context without a stated modulus"
        if isinstance(exact, Fraction) and isinstance(stated, Fraction) and exact.denominator == 1 \
                and stated.denominator == 1:
            for m in sorted(mods):
                if (exact.numerator - stated.numerator) % m == 0:
                    return f"consistent with a residue modulo {m}"
                if m == 100 and 0 <= stated < 10 and (exact.numerator // 10) % 10 == stated:
                    return "consistent with the tens digit"
        return None

    def _identity(self, ln: tuple, rn: tuple, toks: list[Token]) -> None:
        """A formula with free symbols on both sides (``(a+b)^2 = a^2 + 2ab + b^2``,
        ``\\cos^2 θ = 1 - \\sin^2 θ``). First both sides are evaluated exactly at three rational
        points: a difference that changes from point to point means an equation in the symbols
        (``4k^2 - 28k + 40 = 0``, ``x^2 + y^2 = 2xy``), a condition, not a claim: unchecked.
        Otherwise a rational function goes to SymPy (``_equivalent.symbolic_difference``,
        ``cancel(expand(a - b))``): ``pass`` when it is 0, ``fail`` when it is a nonzero constant
        (false for every value of the symbols). Roots and trigonometry pass when the sides agree
        at three more points (random-point identity testing, as ``equivalent``'s numeric path).
        A side that is a lone symbol (``D = b^2 - 4ac``) is a definition; a letter applied to a
        parenthesis (``f(0)``) may be a function: both skipped. At most ``MAX_DECISIONS`` SymPy
        calls per answer (time)."""
        if ln[0] == "var" or rn[0] == "var" or _size(ln) + _size(rn) > MAX_IDENTITY_NODES:
            return
        for t, u in zip(toks, toks[1:]):
            if t.kind == "VAR" and u.kind == "LP" and u.start == t.end:
                return  # "f(0) = 2f(0) - 1": a function applied, not a product
        sampled, exact = _sampled_difference(ln, rn)
        if sampled == "varies":
            return  # a condition on the symbols, not an identity: no need for SymPy
        span = self.span(toks)
        claim = self.claim_text(span)
        ev: dict[str, Any] = {"kind": "identity", "left": to_text(ln), "right": to_text(rn)}
        outcome, conf, note = None, 0.0, ""
        if exact:  # a rational function of the symbols: SymPy's expansion decides
            if self._decisions >= MAX_DECISIONS:
                return
            self._decisions += 1
            self.work.spend(COST_IDENTITY)
            diff = symbolic_difference(ln, rn)
            if diff is None:
                return
            if diff == 0:
                outcome, conf, note = "pass", 1.0, "equal symbolically"
                ev["method"] = "sympy: cancel(expand(a - b)) == 0"
            elif sampled == "constant" and diff.is_number and diff.is_zero is False:
                outcome, conf, note = "fail", 0.9, f"false for every value of the symbols: the sides differ by {diff}"
                ev["method"] = "sympy: a - b is a nonzero constant"
                ev["difference"] = str(diff)[:200]
        elif sampled == "same" and _agrees_at(ln, rn, _MORE_POINTS):
            # roots, trigonometry: no symbolic proof attempted (SymPy's simplification of these
            # costs 10-50 ms); equal at six sample points is the polynomial-identity-testing pass
            outcome, conf, note = "pass", 0.9, "equal at every sample point"
            ev["method"] = "evaluation at 6 sample points"
        if outcome is None:
            return
        if outcome == "fail":
            why = self._withdrawn(span, None, None)
            if why:
                outcome, conf, note = "unknown", 0.5, why
                ev["context"] = why
        self.checks.append(Check(verifier=VERIFIER, claim=claim, outcome=outcome,  # type: ignore[arg-type]
                                 expected=to_text(ln), found=to_text(rn), evidence=ev, confidence=conf,
                                 span=span, note=note))

    def _remainder(self, ln: tuple, lit: Any, sign: int, toks: list[Token]) -> bool:
        """``17 / 5 = 3 remainder 2``, ``-161 \\div 13 = -12 \\text{ remainder } -5``: a quotient with
        its remainder. Judged as ``a = q * b + r`` with ``|r| < |b|`` (either sign convention);
        returns True when the claim had that form (and was emitted)."""
        end = self.span(toks)[1]
        m = _REMAINDER.match(self.original, end)
        if m is None:
            return False
        if not (ln[0] == "bin" and ln[1] == "/"):
            self._unknown(toks, "a quotient with a remainder, of an expression that is not a division")
            return True
        try:
            a, b = evaluate(ln[2]), evaluate(ln[3])
        except (Refused, NotNumeric):
            return True
        q = sign * lit.value
        r = Fraction(m.group(1).replace(" ", "")) if "." not in m.group(1) else None
        if not all(isinstance(x, Fraction) and x.denominator == 1 for x in (a, b, q)) or r is None or \
                r.denominator != 1 or b == 0:
            self._unknown(toks, "a quotient with a remainder, not of whole numbers")
            return True
        span = (self.span(toks)[0], m.end())
        qq, rr = divmod(a.numerator, b.numerator)
        ok = a == q * b + r and abs(r) < abs(b)
        self.checks.append(Check(
            verifier=VERIFIER, claim=self.original[span[0]:span[1]].strip(), outcome="pass" if ok else "fail",
            expected=f"{qq} remainder {rr}", found=f"{format_value(q)} remainder {format_value(r)}",
            evidence={"kind": "division_with_remainder", "expression": to_text(ln), "rule": "a = q*b + r, |r| < |b|",
                      "tolerance": "0"},
            confidence=1.0 if ok else 0.9, span=span,
            note="" if ok else f"{format_value(a)} = {qq} * {format_value(b)} + {rr}"))
        return True

    def _unknown(self, toks: list[Token], note: str) -> None:
        toks = [t for t in toks if t is not None]
        if not toks:
            return
        span = self.span(toks)
        self.checks.append(
            Check(
                verifier=VERIFIER,
                claim=self.claim_text(span),
                outcome="unknown",
                evidence={"kind": self.kind},
                confidence=0.5,
                span=span,
                note=note,
            )
        )
