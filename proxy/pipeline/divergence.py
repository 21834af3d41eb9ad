"""Answer divergence and value oscillation: two ways a correction loop stops without a fix.

docs/design.md vocabulary "divergence": a correction that refuses, drops or reverses the claim it
was asked to fix; it ends the loop and is never ``corrected`` (docs/verification.md, "Risk score,
correction loop, several choices").

:func:`diverged` compares a correction round's new draft with the failed checks of the draft it
was asked to fix. Per failed check, by kind:

* numeric claims (``arithmetic``; ``planner`` steps on ``calculate`` / ``sympy_equivalent`` /
  ``convert_units``; any check whose ``expected`` is a number): the claim is *kept* when the new
  text states the expected value (to the decimals it writes: ``391``, ``3,178.62``), still states
  the value found before (it will fail again; the loop's other rules handle that), or still
  names the claim's operands that the corrected draft wrote (``17`` and ``23`` of ``17 * 23``;
  for a claim without such numbers, the words naming its subject -- its left side, the words
  before the stated value: "The *total* is $3.00" -- fuzzy-matched with rapidfuzz; a claim with
  neither is not judged). It is *reversed* when every mention
  of the expected value is negated (``17 × 23 is not 391``, ``≠ 391``). Otherwise *dropped*.
* code claims (``code``; planner ``run_python``): kept when the new text still has code (a
  fenced or indented block, inline code in backticks) or names an identifier of the claim
  (``pandas`` of ``block 1: import pandas as pd``).
* citations, facts and other claims: not judged (dropping a fabricated reference or a false
  statement *is* the fix).

A new draft diverges when it is a refusal (:data:`REFUSAL`) that keeps no judged claim, or when
every judged claim is dropped or reversed. False alarms cost more than misses (COMMON rules): one
kept claim is enough to let the loop go on, and a rewrite in other words that still states the
right value (``There are 391 apples (17 × 23).``) is kept.

Numbers are read with thousands separators (``,``, space, no-break space U+00A0, narrow
no-break space U+202F, thin space U+2009: ``1,391`` and ``1 391`` are 1391, never 391) and
Unicode minus.

:func:`subject_key` / :func:`value_key` name a failed claim and its stated value across rounds,
for the A/B/A oscillation rule of :func:`proxy.pipeline.correction.correct`.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from rapidfuzz import fuzz

from verifiers import Check

__all__ = ["Divergence", "diverged", "dropped", "fixed_without_checks", "is_refusal", "numbers", "states_fix",
           "unconfirmed_fixes", "subject_key",
           "value_key", "REFUSAL"]

#: A refusal or non-answer, English and Chinese ("Sorry, I cannot help with that.",
#: "I'm unable to answer", "As an AI language model", "抱歉，我无法回答").
REFUSAL = re.compile(
    r"(?i)(?:\b(?:can\s*not|cannot|can't|can’t|won't|won’t|will\s+not|(?:am|'m|’m)\s+(?:not\s+able|unable))\s+"
    r"(?:to\s+)?(?:help|assist|answer|provide|comply|do\s+that|complete|fulfil+|support|respond)\b"
    r"|\bas\s+an\s+ai(?:\s+language\s+model)?\b"
    r"|(?:无法|不能|没法)(?:帮助|帮您|帮你|回答|提供|完成|协助|处理))")

# a number as written: thousands groups (comma, space, no-break/narrow/thin space), decimals, a sign
# (ASCII word characters only before it: in Chinese text a number follows a character, "等于391")
_NUM = re.compile(r"(?<![A-Za-z0-9_.,])([-−]?)(\d{1,3}(?:[,\u00a0\u202f\u2009 ]\d{3})+(?!\d)|\d+)(\.\d+)?"
                  r"(?:[eE]([-+]?\d+)|\s*[×x*]\s*10\s*(?:\^|\*\*)\s*\(?([-−+]?\d+)\)?)?(?!\d)")
_SEPARATORS = str.maketrans("", "", ",\u00a0\u202f\u2009 ")
# a negation right before a value: "is not 391", "isn't 391", "≠ 391", "does not equal 391", "不是391"
_NEGATED = re.compile(r"(?i)(?:≠|!=|\bnot|n't|n’t|\bnever|不是|不等于|并非)\s*(?:equal(?:s)?\s*(?:to)?|be|"
                      r"the\s+(?:answer|result|total)|)\s*[=:]?\s*[$€£¥]?\s*$")
_OPS = str.maketrans({"×": "*", "·": "*", "∗": "*", "÷": "/", "−": "-", "^": "**", "–": "-"})
_SPLIT_CLAIM = re.compile(r"\s*(?:=|≈|≅|~=|\bis\b|\bequals\b)\s*")
_WORD = re.compile(r"[^\W\d_]{3,}")
_FENCE = re.compile(r"```|~~~|`[^`\n]+`|^(?: {4}|\t)\S", re.M)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_KEYWORDS = frozenset({"block", "blocks", "import", "from", "def", "return", "print", "class", "for", "while",
                       "and", "not", "the", "True", "False", "None", "self", "stdin", "lambda", "with"})
_NUMERIC_TOOLS = frozenset({"calculate", "sympy_equivalent", "convert_units"})
_CODE_TOOLS = frozenset({"run_python"})
_COMMON = frozenset({"the", "and", "are", "was", "were", "that", "this", "with", "for", "from", "then", "than",
                     "which", "its", "has", "have", "will", "would", "about", "approximately", "equals", "equal",
                     "gives", "you", "your", "our", "there", "here", "answer", "result", "so", "thus", "therefore"})
#: rapidfuzz ``partial_ratio`` (0..100) from which a claim's words count as still present
WORDS_MIN_RATIO = 85

Kind = Literal["refusal", "dropped", "reversed"]


@dataclass(frozen=True, slots=True)
class Divergence:
    """Why a correction diverged: ``kind`` (``refusal`` | ``dropped`` | ``reversed``) and a short
    human-readable ``detail`` naming the claim(s)."""

    kind: Kind
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "detail": self.detail}


@dataclass(frozen=True, slots=True)
class Number:
    """A number found in text: ``value``, ``decimals`` (the power of ten of its last written
    digit, negated: ``3.25`` has 2, ``6.82e-6`` has 8, ``3e3`` has -3), ``start``/``end``
    character offsets."""

    value: Decimal
    decimals: int
    start: int
    end: int


def numbers(text: str) -> list[Number]:
    """Every number written in ``text``, thousands separators joined (``1,391``, ``1 391``,
    ``1\\u00a0391`` -> 1391), ``−`` read as minus, scientific notation read (``6.82e-6``,
    ``6.82 × 10^-6``). Digits glued to ASCII letters (``x2``) are not numbers."""
    out = []
    for m in _NUM.finditer(text or ""):
        sign, whole, frac = m.group(1), m.group(2).translate(_SEPARATORS), m.group(3) or ""
        exp = int((m.group(4) or m.group(5) or "0").replace("−", "-"))
        try:
            value = Decimal(("-" if sign else "") + whole + frac).scaleb(exp)
        except InvalidOperation:  # pragma: no cover - the regex only lets digits through
            continue
        out.append(Number(value, max(0, len(frac) - 1) - exp, m.start(), m.end()))
    return out


def _as_number(value: Any) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            d = Decimal(str(value))
        except InvalidOperation:
            return None
        return d if d.is_finite() else None
    if isinstance(value, str):
        raw = value.strip().strip("$€£¥%").strip().translate(_SEPARATORS).replace("−", "-")
        if not re.fullmatch(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", raw):
            return None
        return Decimal(raw)
    return None


def _states(n: Number, value: Decimal) -> bool:
    """Whether the written ``n`` states ``value`` to the precision it is written with (half a
    unit of its last written decimal, the rounding convention of the arithmetic verifier)."""
    tol = Decimal(5) * Decimal(10) ** (-(n.decimals + 1))
    return abs(n.value - value) <= max(tol, abs(value) * Decimal("1e-9"))


def _kind_of(c: Check) -> str | None:
    """``numeric`` | ``code`` | None (not judged) for a failed check."""
    tool = c.evidence.get("tool") if isinstance(c.evidence, dict) else None
    if c.verifier == "code" or tool in _CODE_TOOLS:
        return "code"
    if c.verifier == "arithmetic" or tool in _NUMERIC_TOOLS:
        return "numeric"
    if c.verifier in ("citations", "facts", "sentinel") or tool in ("check_citation", "search_facts"):
        return None
    return "numeric" if _as_number(c.expected) is not None else None


def _left(c: Check) -> str:
    """The claim's subject: the expression the evidence names, else the claim's text before its
    last ``=``/``≈``/``is`` (the whole claim when it has none)."""
    ev = c.evidence if isinstance(c.evidence, dict) else {}
    for key in ("expression", "input"):
        if isinstance(ev.get(key), str) and ev[key].strip():
            return ev[key]
    parts = _SPLIT_CLAIM.split(str(c.claim or ""))
    return " ".join(parts[:-1]) if len(parts) > 1 else str(c.claim or "")


def _context_words(c: Check, old: str | None, found: Decimal | None, old_nums: list[Number] | None) -> set[str]:
    """Words naming a claim's subject: the words of its left side, and in the draft it came from
    (``old``, whose numbers are ``old_nums``) the words just before the value it stated, within
    that sentence ("The *total* is $3.00" -> ``total``). Short and common words are left out."""
    words = {w.casefold() for w in _WORD.findall(_left(c))}
    if old and found is not None:
        for n in old_nums or ():
            if n.value == found:
                before = re.split(r"[.!?。！？\n]", old[max(0, n.start - 60):n.start])[-1]
                words |= {w.casefold() for w in _WORD.findall(before)[-4:]}
    return words - _COMMON


#: A number followed by a scale word or sign ("11.6k", "1.16万", "$4.2 million", "3 亿").
_SCALED = re.compile(r"(\d+(?:\.\d+)?)\s*(k|K|thousand|million|mn|m|M|billion|bn|b|万|萬|亿|億|千)(?![A-Za-z])")
_SCALE = {"k": 1e3, "thousand": 1e3, "千": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9, "bn": 1e9,
          "b": 1e9, "万": 1e4, "萬": 1e4, "亿": 1e8, "億": 1e8}
#: A number written in words ("three hundred ninety-one", "eleven thousand", "一万一千六百"): this
#: module does not read them, so a correction that states its value this way is not judged.
_SPELLED = re.compile(r"(?i)\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|"
                      r"fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|"
                      r"ninety|hundred|thousand|million|billion)\b"
                      r"|[零〇一二两三四五六七八九十][零〇一二两三四五六七八九十百千万萬亿億]+")
#: Relative distance within which a number of the correction counts as an answer to the claim
#: (the stated value rounded or truncated another way, "11607.54" for 11607.545…; verification,
#: not this pre-check, decides whether it is right).
NEAR = Decimal("0.01")
#: Most elementary steps (a written number compared with a claim's value; 100 characters a
#: rapidfuzz ratio or an identifier search scans) one :func:`diverged` call spends, about 0.5 s of
#: CPU on the event loop. Past it the draft is not judged (None: the loop verifies it as usual;
#: false alarms cost more than misses). Without it a draft with thousands of failed claims and
#: numbers cost claims x numbers (a 20,000-claim answer held the event loop for minutes).
MAX_WORK = 100_000


class _OutOfWork(Exception):
    """:data:`MAX_WORK` spent."""


class _Scan:
    """What :func:`diverged` reads once per call: the new draft's numbers (by value, sorted for
    :func:`_near`), the old draft's numbers, and the work left."""

    def __init__(self, text: str, old: str | None) -> None:
        self.text = text
        self.nums = numbers(text)
        self.values = {n.value for n in self.nums}
        near = [n.value for n in self.nums]
        for m in _SCALED.finditer(text):
            try:
                near.append(Decimal(m.group(1)) * Decimal(str(_SCALE[m.group(2) if m.group(2) in _SCALE
                                                                     else m.group(2).lower()])))
            except (InvalidOperation, KeyError):
                continue
        self.near = sorted(near)
        self.spelled = _SPELLED.search(text) is not None
        self.old = old
        self._old_nums: list[Number] | None = None
        self._old_values: set[Decimal] | None = None
        self._folded: str | None = None
        self.left = MAX_WORK

    @property
    def old_nums(self) -> list[Number] | None:
        """The old draft's numbers (None without one), read on first use."""
        if self._old_nums is None and self.old is not None:
            self._old_nums = numbers(self.old)
        return self._old_nums

    @property
    def old_values(self) -> set[Decimal] | None:
        if self._old_values is None and self.old_nums is not None:
            self._old_values = {n.value for n in self.old_nums}
        return self._old_values

    @property
    def folded(self) -> str:
        if self._folded is None:
            self._folded = self.text.casefold()
        return self._folded

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left < 0:
            raise _OutOfWork


def _near(expected: Decimal, scan: _Scan) -> bool:
    """Whether the text states a value within :data:`NEAR` of ``expected``, plain or scaled."""
    if expected == 0:
        return False
    radius = abs(expected) * NEAR
    i = bisect.bisect_left(scan.near, expected - radius)
    return i < len(scan.near) and scan.near[i] <= expected + radius


def _numeric(c: Check, scan: _Scan) -> str:
    """``kept`` | ``reversed`` | ``dropped`` | ``unknown`` for one numeric claim in the new
    text (``scan.old``: the draft the claim was found in). A value near the expected one, plain
    or scaled ("11607.54", "11.6k", "1.16万"), keeps the claim; a claim that looks dropped while
    the text writes numbers in words is not judged (``unknown``): false alarms cost more."""
    text, nums = scan.text, scan.nums
    expected, found = _as_number(c.expected), _as_number(c.found)
    if expected is not None:
        scan.spend(len(nums))
        mentions = [n for n in nums if _states(n, expected)]
        if mentions:
            negated = [n for n in mentions if _NEGATED.search(text[max(0, n.start - 40):n.start])]
            if len(negated) == len(mentions):
                return "reversed"
            return "kept"
        if _near(expected, scan):
            return "kept"
    if found is not None and found in scan.values:
        return "kept"
    dropped = "unknown" if scan.spelled else "dropped"
    operands = {n.value for n in numbers(_left(c))}
    operands.discard(found)
    if scan.old_values is not None:  # only what the draft itself wrote can be required of its correction
        operands &= scan.old_values
    if operands:
        return "kept" if operands <= scan.values else dropped
    if scan.old_nums is not None:
        scan.spend(len(scan.old_nums))
    words = _context_words(c, scan.old, found, scan.old_nums)
    if not words:
        return "unknown"  # nothing names the claim's subject: not judged
    folded = scan.folded
    for w in words:
        scan.spend(1 + len(folded) // 100)
        if fuzz.partial_ratio(w, folded) >= WORDS_MIN_RATIO:
            return "kept"
    return dropped


def states_fix(failed: Sequence[Check], new_text: str) -> bool:
    """Whether ``new_text`` states the value each of ``failed`` should have had: every failed
    check is numeric with an ``expected`` value (what the gateway's tool computed) that the text
    states (plain or scaled, not negated), and the wrong ``found`` value is gone unless it equals
    it. The evidence that a correction no verifier could re-read ("There are 391 apples (17 ×
    23).") fixed the claim -- and not kept the wrong value in another form ("17 * 23 -> 401").
    False for any other kind of failed check (nothing to confirm it with)."""
    if not failed:
        return False
    scan = _Scan(new_text or "", None)
    try:
        for c in failed:
            if _kind_of(c) != "numeric":
                return False
            expected, found = _as_number(c.expected), _as_number(c.found)
            if expected is None:
                return False
            scan.spend(len(scan.nums))
            mentions = [n for n in scan.nums if _states(n, expected)
                        and not _NEGATED.search(scan.text[max(0, n.start - 40):n.start])]
            if not mentions and not _near(expected, scan):
                return False
            if found is not None and found != expected and found in scan.values:
                return False
    except _OutOfWork:
        return False
    return True


def dropped(c: Check, new_text: str) -> bool:
    """Whether the failed claim ``c`` -- a reference, a fact, a sentinel finding: a kind with no
    value to state again (:func:`_kind_of` None) -- is gone from ``new_text``: fewer than
    :data:`_DROPPED_BELOW` of its distinctive words (four letters or more, and numbers:
    surnames, title words, year, volume) are in the new text. A reworded reference keeps its
    authors, year and title words; a draft that drops it keeps at most its topic.
    docs/verification.md: dropping a fabricated reference or a false fact is a fix. False for a
    numeric or code check and for a claim with fewer than three such words."""
    if _kind_of(c) is not None:
        return False
    words = {w for w in _TOKEN.findall(str(c.claim or "").casefold()) if len(w) >= 4 or w.isdigit()}
    if len(words) < 3:
        return False
    kept = set(_TOKEN.findall((new_text or "").casefold())) & words
    return len(kept) < _DROPPED_BELOW * len(words)


_TOKEN = re.compile(r"\w+")
#: :func:`dropped`: the share of a claim's distinctive words a new draft keeping it would hold
_DROPPED_BELOW = 0.5


def fixed_without_checks(failed: Sequence[Check], new_text: str) -> bool:
    """Whether a correction whose new draft no verifier found anything to check in shows the
    fix of every check in ``failed``: each numeric one states its computed value and drops the
    wrong one (:func:`states_fix`), each reference or fact is gone (:func:`dropped`). A failed
    code check is never shown fixed by a draft with no code to run."""
    if not failed:
        return False
    numeric = [c for c in failed if _kind_of(c) == "numeric"]
    return ((not numeric or states_fix(numeric, new_text))
            and all(dropped(c, new_text) for c in failed if _kind_of(c) != "numeric"))


def unconfirmed_fixes(failed: Sequence[Check], passed: Sequence[Check], new_text: str) -> list[Check]:
    """The numeric claims among ``failed`` (a draft's failed checks) whose fix the correction
    ``new_text`` does not show: no check among ``passed`` (the new draft's decided passes) is about
    the same subject (:func:`subject_key`), and the text does not state the computed value
    (:func:`states_fix`). "First, 17 × 2 = 34. Then 17 * 23 -> 401" re-passes 17 × 2 only: the
    claim that failed is still unverified, so the draft is no ``corrected`` one. Other kinds of
    failed check are left to the caller."""
    subjects = {subject_key(p) for p in passed}
    return [c for c in failed if _kind_of(c) == "numeric" and subject_key(c) not in subjects
            and not states_fix([c], new_text)]


def _label(c: Check) -> str:
    claim = " ".join(str(c.claim or c.verifier).split())
    return claim if len(claim) <= 80 else claim[:79] + "…"


def is_refusal(text: str) -> bool:
    """Whether ``text`` refuses or declines to answer (:data:`REFUSAL`)."""
    return REFUSAL.search(text or "") is not None


def diverged(failed: Sequence[Check], new_text: str, old_text: str | None = None) -> Divergence | None:
    """Whether ``new_text`` (a correction round's draft) diverged from what it was asked to fix:
    ``failed``, the failed checks of the draft it corrects, ``old_text`` (when given: only the
    operands and words that draft wrote are asked of the correction). See the module doc for the rules.
    Returns a :class:`Divergence` or None (no divergence: the loop verifies the draft as usual).
    Pure and bounded: at most :data:`MAX_WORK` steps (regular expressions, one rapidfuzz ratio per
    claim without numbers), past which the draft is not judged (None)."""
    text = new_text or ""
    scan = _Scan(text, old_text)
    has_code = _FENCE.search(text) is not None
    verdicts: list[tuple[Check, str]] = []
    try:
        for c in failed:
            kind = _kind_of(c)
            if kind == "numeric":
                verdict = _numeric(c, scan)
                if verdict == "kept":  # one kept claim lets the loop go on
                    return None
                if verdict != "unknown":
                    verdicts.append((c, verdict))
            elif kind == "code":
                if has_code:
                    return None
                for n in set(_IDENT.findall(str(c.claim or ""))) - _KEYWORDS:
                    scan.spend(1 + len(text) // 100)
                    if re.search(rf"\b{re.escape(n)}\b", text):
                        return None
                verdicts.append((c, "dropped"))
    except _OutOfWork:
        return None  # too much to judge within MAX_WORK: not judged
    if is_refusal(text):
        return Divergence("refusal", "the correction refused or declined to answer")
    if not verdicts:
        return None
    reversed_ = [c for c, v in verdicts if v == "reversed"]
    if reversed_:
        return Divergence("reversed", "the correction negates the corrected value of: "
                          + "; ".join(_label(c) for c in reversed_[:3]))
    return Divergence("dropped", "the correction no longer states: " + "; ".join(_label(c) for c, _ in verdicts[:3]))


def subject_key(c: Check) -> str:
    """A failed claim's identity across rounds, whatever value it states: the verifier and the
    claim's subject (:func:`_left`) with spacing and operator spelling normalised (``17 × 23``
    and ``17*23`` are one subject)."""
    left = _left(c)
    found = c.found if isinstance(c.found, str) else json.dumps(c.found, default=str)
    if left == str(c.claim or "") and found:
        left = left.replace(found, "")
    return c.verifier + ":" + "".join(left.translate(_OPS).casefold().split())


def value_key(c: Check) -> str:
    """The value a failed claim states, comparable across rounds (``1,391`` == ``1391``)."""
    d = _as_number(c.found)
    if d is not None:
        return format(d.normalize(), "f")
    return json.dumps(c.found, default=str, sort_keys=True)
