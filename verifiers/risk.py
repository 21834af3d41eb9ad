"""Risk scoring: cheap signals that decide which verifiers run (tiered verification).

``score(question, answer)`` looks at the question and the draft answer with a handful of
precompiled regular expressions and returns a :class:`RiskScore`: a score in 0..1, the
signal counts it saw, and the verifiers those signals trigger. The gateway's policy sets the
threshold below which an answer goes straight through unverified.

Signals (each counted, capped at :data:`_CAP`):

- ``arithmetic`` family — ``operation`` (``12 * 3``, ``4 x 5``, ``2^8``), ``equation``
  (``= 36``), ``currency`` (``$1,200``, ``€5``, ``300 USD``), ``percent`` (``5%``, ``5 percent``).
- ``code`` family — ``code_block`` (a fenced block), ``code_line`` (``def``/``class``/``import``
  at the start of a line outside a fence).
- ``citations`` family — ``doi`` (``10.1000/xyz``), ``arxiv`` (``arXiv:2101.00001``),
  ``et_al``, ``reference_list`` (a "References"/"Bibliography" heading), ``author_year``
  (``(Smith, 2019)``), ``bibtex`` (a BibTeX entry ``@article{``, ``@inproceedings{``...: two
  marks each, a whole reference on its own; before it 900 of the 1,460 BibTeX renderings of the
  labelled citation cases went to ``code`` only, ``veracity eval``, docs/eval.md).
- ``facts`` family (docs/facts.md) — world claims: ``date`` (a year 1500-2099, "2023年",
  "3月5日"), ``quantity`` ("484,507", "3.2 million", "330 metres", "5万"), ``statistic``
  ("20%", "5 percent", "百分之"), ``superlative`` (objective ones: "largest", "most populous",
  "最大"; not "best"/"greatest"), ``attribution`` ("according to", "data show", "据报道"),
  ``factoid`` (a short who/when/where/which question that names something). Counted only when
  the answer names something (a capitalised word mid-sentence, or a first word that is not a
  common sentence starter), carries an attribution, or has a date plus another kind; never in an
  answer that shows worked arithmetic, in unfenced code, or in a reference list.
- ``sentinel`` family (question only) — ``enumeration`` (numbered or bulleted lines),
  ``also`` ("and also", "as well as", "additionally", "顺便", "另外", "并且"),
  ``questions`` (question marks beyond the first).
- ``computation`` family (question + answer; the planner's templates) — the question
  states an expression (``stated_expression``: "97/117/0.65", "1/1! + 1/2!") or two numbers
  (not years) and a computing word (``numeric_task``: "how much", "product", "复利"), and
  the answer states a number with no operation or equation shown and no code
  (``unshown_value``). Triggers the ``planner`` verifier.
- ``length`` — answer length in characters (longer answers carry more claims).

The score is ``1 - prod(1 - w_f * min(1, n_f / k_f))`` over the families, a noisy-OR of the
family evidences; the weights are engineering choices documented next to them, not learned.
Cost target: <= 50 µs for a typical (1-2 kB) answer — see ``bench/pipeline_bench.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from verifiers._limits import unread_check
from verifiers._types import Check

__all__ = ["RiskScore", "score", "question_signals", "FAMILIES"]

_CAP = 20        # signal counts stop mattering long before this; capping bounds the work
_MAX_PROBES = 64  # at most this many anchor occurrences are examined per signal

# How the scan stays under 50 µs: a regex scan costs ~10-30 ns per character in CPython (one
# dispatch per position), so four or five full scans of a 2 kB answer already cost more than
# the budget. Instead each signal is anchored on a rare character or word found with
# ``str.find``/``str.count`` (C speed, ~1 ns per character) and confirmed by looking at a few
# characters around the anchor.

# -- arithmetic family ----------------------------------------------------------------------
# An operator between two numbers: "16 - 3", "9 * 2", "4 x 5", "2^8", "3×4", "10 ÷ 2".
_OPERATORS = ("+", "*", "/", "×", "÷", "^", "-", " x ")
_CURRENCY_SIGNS = ("$", "€", "£", "¥")
_CURRENCY_WORDS = (" USD", " EUR", " GBP", " dollar", " euro", " cent")
_DIGITS = frozenset("0123456789")

# -- code family ----------------------------------------------------------------------------
_CODE_STARTS = ("def ", "class ", "import ", "from ", "async def ")

# -- citations family -----------------------------------------------------------------------
# DOI syntax: "10." + registrant (4-9 digits) + "/" + suffix (Crossref's recommended pattern).
_DOI = re.compile(r"10\.\d{4,9}/[^\s\"'<>]+")
# arXiv identifiers: new style YYMM.NNNNN (arXiv help "Understanding the arXiv identifier").
_ARXIV = re.compile(r"arXiv:\s?\d{4}\.\d{4,5}|arxiv\.org/abs/", re.IGNORECASE)
#: Lower-cased substrings, one of which every heading of :data:`_REF_HEADINGS` contains.
_REF_HINTS = (b"references", b"bibliography", b"works cited", b"sources", "参考文献".encode())
_REF_HEADINGS = ("References", "REFERENCES", "references", "Bibliography", "BIBLIOGRAPHY", "Works Cited",
                 "Sources", "SOURCES", "参考文献")
# BibTeX entry types (BibTeX's standard styles + biblatex's @online), "@type{" or "@type {"
_BIBTEX = re.compile(r"@(?:article|inproceedings|conference|book|inbook|incollection|misc|phdthesis|mastersthesis|"
                     r"techreport|proceedings|unpublished|manual|booklet|online)\s*\{", re.IGNORECASE)
# "(Smith, 2019)", "(Smith and Jones 2020a)"; matched at each "(".
_AUTHOR_YEAR = re.compile(r"\([A-Z][A-Za-z'-]+(?: (?:and|&) [A-Z][A-Za-z'-]+| et al\.?)?,? (?:19|20)\d\d[a-z]?\)")

# -- sentinel family (question) -------------------------------------------------------------
_ENUM = re.compile(r"[ \t]*(?:\d{1,2}[.)]|[-*•]|[a-z][)])[ \t]+\S")  # matched after a newline
_ALSO_WORDS = ("and also", "as well as", "additionally", "顺便", "另外", "并且", "以及")


def _digit_before(text: str, i: int) -> bool:
    """A digit at ``i-1``, allowing one or two spaces between."""
    j = i - 1
    if j >= 0 and text[j] == " ":
        j -= 1
        if j >= 0 and text[j] == " ":
            j -= 1
    return j >= 0 and text[j] in _DIGITS


def _digit_after(text: str, i: int) -> bool:
    """A digit at ``i``, allowing spaces, one "(" and one currency sign between."""
    n = len(text)
    j = i
    for _ in range(4):
        if j >= n:
            return False
        ch = text[j]
        if ch in _DIGITS:
            return True
        if ch not in " ($€£":
            return False
        j += 1
    return False


def _anchored(text: str, needles: tuple[str, ...], ok, cap: int) -> int:
    """Count occurrences of any of ``needles`` for which ``ok(text, start, end)`` holds,
    stopping at ``cap`` confirmed hits or :data:`_MAX_PROBES` probes per needle."""
    n = 0
    for needle in needles:
        i = text.find(needle)
        probes = 0
        while i != -1 and probes < _MAX_PROBES:
            probes += 1
            if ok(text, i, i + len(needle)):
                n += 1
                if n >= cap:
                    return n
            i = text.find(needle, i + 1)
    return n


def _is_operation(text: str, start: int, end: int) -> bool:
    return _digit_before(text, start) and _digit_after(text, end)


def _is_equation(text: str, start: int, end: int) -> bool:
    return _digit_after(text, end) or (end < len(text) and text[end] == " "
                                       and end + 1 < len(text) and text[end + 1] in "-$€£"
                                       and _digit_after(text, end + 2))


def _is_sign_amount(text: str, start: int, end: int) -> bool:
    return end < len(text) and (text[end] in _DIGITS or (text[end] == " " and end + 1 < len(text)
                                                        and text[end + 1] in _DIGITS))


def _is_after_number(text: str, start: int, end: int) -> bool:
    return _digit_before(text, start)


def _is_code_line(text: str, start: int, end: int) -> bool:
    return start == 0 or text[start - 1] == "\n"


def _is_doi(text: str, start: int, end: int) -> bool:
    return (start == 0 or not text[start - 1].isalnum()) and _DOI.match(text, start) is not None


# Regex forms used when an anchor is too common for probing to be cheap (code, tables):
# one C-level scan then costs less than many Python-level probes.
_OPERATION_RX = re.compile(r"\d ?[-+*/×÷^] ?\(?\$?\d|\d x \d")
_EQUATION_RX = re.compile(r"= ?[-$€£]?\s?\d")
_PROBE_LIMIT = 12


def _is_ref_heading(text: str, start: int, end: int) -> bool:
    """The word is alone on its line, give or take four non-word characters each side
    ("## References", "References:", "**Sources**")."""
    ls = text.rfind("\n", 0, start) + 1
    le = text.find("\n", end)
    if le == -1:
        le = len(text)
    if start - ls > 4 or le - end > 4:
        return False
    return not any(ch.isalnum() for ch in text[ls:start]) and not any(ch.isalnum() for ch in text[end:le])


def _ref_headings(text: str) -> tuple[int, int]:
    """``(count, position of the first)`` of the reference-list headings
    (:func:`_is_ref_heading`) in ``text``; position -1 when there is none. At most
    :data:`_MAX_PROBES` probes per heading word, count capped at :data:`_CAP`."""
    n = 0
    first = -1
    for needle in _REF_HEADINGS:
        i = text.find(needle)
        probes = 0
        while i != -1 and probes < _MAX_PROBES:
            probes += 1
            if _is_ref_heading(text, i, i + len(needle)):
                n += 1
                if first < 0 or i < first:
                    first = i
                if n >= _CAP:
                    return n, first
            i = text.find(needle, i + 1)
    return n, first


def _is_author_year(text: str, start: int, end: int) -> bool:
    return (end < len(text) and text[end].isupper()
            and _AUTHOR_YEAR.match(text, start) is not None)


_ENUM_START = frozenset("0123456789-*•")


def _is_enum_item(text: str, start: int, end: int) -> bool:
    j = end
    n = len(text)
    while j < n and text[j] in " \t":
        j += 1
    if j >= n:
        return False
    ch = text[j]
    if ch not in _ENUM_START and not (ch.isalpha() and j + 1 < n and text[j + 1] == ")"):
        return False
    return _ENUM.match(text, end) is not None


# -- facts family ----------------------------------------------------------------------------
# Cost: SRE scans at ~0.5 ns per character only when a pattern starts with a literal (its
# prefix search); a pattern that starts with a class or an alternation costs 10-20 ns per
# character (measured: ``\d+`` over 2 kB ~ 20 µs), and each ``str.find`` is a full pass too.
# So the facts signals work on the answer's UTF-8 bytes, with every digit mapped to "0"
# (``bytes.translate``, ~1 µs per 2 kB): every number pattern then starts with the literal
# "0", and each word pattern with a literal ("est", "most ", " show", " ").
_DIGIT_TO_0 = bytes.maketrans(b"123456789", b"000000000")
_U = str.encode
_UNITS = (rb"km\b|kilomet(?:er|re)s?\b|miles?\b|met(?:er|re)s?\b|feet\b|kg\b|kilograms?\b|tonnes?\b|tons\b"
          rb"|acres\b|hectares\b|people\b|inhabitants\b|residents\b|employees\b|vehicles\b|copies\b|votes\b"
          rb"|deaths\b|" + b"|".join(_U(u) for u in ("°C", "°F", "平方公里", "公里", "千米", "辆", "吨", "名")))
# ``0(?<!00)``: the first digit of a number (no digit before it), so no match starts inside one;
# possessive ``*+``: a failed unit is not retried at every shorter digit run (that backtracking
# made the scan ~3x slower on number-heavy text).
_NUM0 = re.compile(
    rb"0(?<!00)(?:"
    rb"(?P<quantity>0{0,2}(?:,000)++(?!0)"                                               # 484,507
    rb"|0*+(?:\.0++)?+ ?+(?:million|billion|trillion|thousand|bn\b|" + _U("万|亿") + rb"|" + _UNITS + rb"))"
    rb"|(?P<statistic>0*+(?:\.0++)?+ ?+(?:%|" + _U("％") + rb"|percent\b|per cent\b))"    # 20%, 5 percent
    rb"|(?P<date>000 ?" + _U("年") + rb"|0? ?" + _U("月") + rb" ?0)"                      # 2023年, 3月5日
    rb"|(?P<year>000(?![0%]|[.,]0| ?%))"                                                  # 2023 (value checked)
    rb")")
_FACT_CAP = 4   # number anchors counted per answer (the family saturates at 2)
_HAN_LEADS = (0xE4, 0xE5, 0xE6, 0xE7, 0xE8, 0xE9)   # UTF-8 lead bytes of U+4000-U+9FFF (int: memchr)
_YEAR_HEADS = frozenset((b"15", b"16", b"17", b"18", b"19", b"20"))   # years 1500-2099
_NOT_BEFORE_YEAR = frozenset(b"$.,\xac\xa3\xa5")  # "$2019", "3.2019", and the last bytes of € £ ¥
#: Objective superlatives (opinion ones -- best, worst, greatest, easiest -- are left out on
#: purpose: "the best way to learn" is advice, "the largest city" a checkable claim).
_SUPERLATIVES = ("largest", "biggest", "smallest", "oldest", "youngest", "tallest", "highest", "lowest",
                 "longest", "shortest", "earliest", "fastest", "slowest", "richest", "poorest", "deepest",
                 "heaviest", "hottest", "coldest", "busiest", "densest", "wealthiest")
# "est" found with bytes.find (~2x faster than a regex with that literal prefix, measured),
# then the word it ends looked up in a set (a lookbehind per superlative cost ~3 µs per "est")
_SUPER_SET = frozenset(_U(w) for w in _SUPERLATIVES)
_SUPER_MOST = re.compile(rb"most (?:populous|visited|spoken|widely spoken)\b")
_CJK_FACT = re.compile(r"[〇零一二三四五六七八九]{4}年|[一二三四五六七八九十百千两]+[万亿]|百分之")
_CJK_SUPER = re.compile(r"最(?:大|高|早|长|多|小|低|快|深|古老|先|重|富|热|冷|年轻|老)|首位|首个|首次|第一位|第一家|第一座")
_SHOWS = re.compile(rb" show(?:(?<=studies show)|(?<=research show)|(?<=data show)|(?<=statistics show)"
                    rb"|(?<=figures show)|(?<=polls show))")
_CJK_ATTRIBUTION = ("据报道", "据统计", "据悉", "据了解", "数据显示", "报告显示", "统计显示", "调查显示")
# A proper noun: a capitalised word after a lower-case word or ",;:(" ("in Q4", "by Tesla",
# "Elon Musk", "The Eiffel"); "I" and "I'm" do not count. Literal " " first: ~0.6 µs per 1.5 kB.
_ENTITY = re.compile(rb" (?<=[a-z,;:(] )[A-Z][A-Za-z]")
_FIRST_WORD = re.compile(r"[\s*#>_\"'(-]{0,8}([A-Z][^\W\d_]*)")
#: Words that start sentences without naming anything; the first word of an answer that is
#: capitalised and not one of these counts as a name ("Tesla delivered ...", "Paris.").
_STARTERS = frozenset(
    "a an the this that these those there here it its i we you he she they my our your his her their "
    "yes no sure ok okay well hi hello hey thanks thank great good sorry unfortunately absolutely "
    "certainly of in on at for to as if when while after before since so but and or also however "
    "let please what why how who where which not some many most all each every one by with from "
    "because although though just maybe perhaps probably actually honestly personally overall first "
    "second third finally then now today note do does did is are was were be can could would "
    "should will may might must have has had yeah yep yup nope wow oh ah lol haha hmm right true "
    "cool nice awesome interesting really exactly indeed agreed definitely totally".split())
# A factoid question: asks for a name, date, place or amount (HotpotQA-style) and names
# something itself. Only short questions (a long prompt carrying documents is grounding's
# business, decided by the pipeline); words of the lower-cased question (a regex with \b
# and an alternation cost ~3 µs per question).
_WH_WORDS = frozenset(("who", "whom", "whose", "when", "where", "which"))
_HOW_PHRASES = ("how many", "how old", "how tall", "how long ago", "how far")
_WHAT_PHRASES = ("what year", "what city", "what country", "what state", "what company", "what team",
                 "what county", "what nationality", "what is the name")
_FACTOID_MAX_Q = 400

# -- computation family (question + answer) -> planner ----------------------------------------
# A question that states numbers and asks for a computed value, answered with a value and no
# visible working: the template plans of the planner (docs/verifier-model.md, "Template plans")
# check exactly this shape ("What is the product of 97/117/...?" -> "approximately 0.000191").
# On the digit-mapped bytes of the question, like _NUM0.
_Q_EXPRESSION = re.compile(rb"0(?: ?(?:[-+*/^]|\*\*|" + _U("×|÷") + rb") ?\(?0|!| x 0)")
_Q_NUMBER = re.compile(rb"0(?<!00)0*(?:[.,]0+)*")
_COMPUTE_WORDS = ("what is", "what's", "calculate", "compute", "how much", "how many", "total", "product",
                  "sum of", "interest", "rate", "average", "evaluate", "solve", "percent", "%",
                  "多少", "计算", "求", "复利", "利率", "本金", "总共", "合计", "平均", "等于")
_Q_COMPUTE_TAIL = 600   # characters at the end of a question read for the computation shape

#: family -> (weight, saturation count k, verifier it triggers). A family's evidence is
#: ``min(1, n / k)``; the weight is how much one saturated family alone raises the score.
FAMILIES: dict[str, tuple[float, int, str]] = {
    "arithmetic": (0.7, 3, "arithmetic"),   # three worked operations make a numeric answer
    "code": (0.8, 1, "code"),               # any code block is worth running
    "citations": (0.8, 2, "citations"),     # two citation marks make a reference list
    "facts": (0.62, 2, "facts"),            # one entity + date/quantity claim: 0.31, two saturate
    "multi_part": (0.5, 2, "sentinel"),     # two sub-tasks are enough to forget one
    "computation": (0.5, 1, "planner"),     # a stated task answered with a bare value: plan it
}
_LENGTH_WEIGHT = 0.2   # a 4,000-character answer adds at most 0.2 by length alone
_LENGTH_SAT = 4000


@dataclass(slots=True)
class RiskScore:
    """The risk of one answer.

    ``score``: 0..1. ``signals``: signal name -> count (only non-zero ones).
    ``verifiers``: the verifiers the signals trigger, in a stable order
    (``arithmetic``, ``code``, ``citations``, ``facts``, ``sentinel``, ``planner``); the caller
    applies the policy's threshold and enabled set.
    """

    score: float
    signals: dict[str, int] = field(default_factory=dict)
    verifiers: list[str] = field(default_factory=list)
    #: the answer's length (characters) when it is longer than a scan limit, else 0
    length: int = 0

    def unread_checks(self, enabled: Iterable[str] | None = None) -> list[Check]:
        """The ``unknown`` ``risk`` checks (:func:`verifiers._limits.unread_check`) saying the
        scan stopped before the answer's end (a limit is never silent): one for :data:`MAX_SCAN_CHARS` (no
        signal of any family was looked for past it), and one for :data:`FACTS_SCAN_CHARS` when
        ``facts`` is in ``enabled`` (None: every verifier) and was not triggered (the facts
        verifier reports its own limit when it runs). ``[]`` for an answer scanned whole."""
        out: list[Check] = []
        if self.length > MAX_SCAN_CHARS:
            out.append(unread_check("risk", limit="MAX_SCAN_CHARS", limit_value=MAX_SCAN_CHARS,
                                    checked=MAX_SCAN_CHARS, total=self.length,
                                    reader="the risk scan (which picks the verifiers)"))
        facts_on = enabled is None or "facts" in enabled
        if self.length > FACTS_SCAN_CHARS and facts_on and "facts" not in self.verifiers:
            out.append(unread_check("risk", limit="FACTS_SCAN_CHARS", limit_value=FACTS_SCAN_CHARS,
                                    checked=FACTS_SCAN_CHARS, total=self.length,
                                    reader="the risk scan for fact claims"))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form used as ``Report.risk``."""
        return {"score": round(self.score, 4), "signals": dict(self.signals),
                "verifiers": list(self.verifiers)}


def _count(rx: re.Pattern[str], text: str) -> int:
    n = 0
    for _ in rx.finditer(text):
        n += 1
        if n >= _CAP:
            break
    return n


def question_signals(question: str | None) -> dict[str, int]:
    """Multi-part signals of a question: ``enumeration``, ``also``, ``questions`` (extra
    question marks). Empty dict for an empty question."""
    if not question:
        return {}
    out: dict[str, int] = {}
    n = _anchored("\n" + question, ("\n",), _is_enum_item, _CAP)
    if n >= 2:  # one bullet is not a list
        out["enumeration"] = n
    low = question.lower()
    n = sum(low.count(w) for w in _ALSO_WORDS)
    if n:
        out["also"] = n
    n = question.count("?") + question.count("？")
    if n >= 2:
        out["questions"] = n - 1
    return out


def _first_word_is_name(text: str) -> bool:
    """The first word of ``text`` is capitalised and not a common sentence starter."""
    m = _FIRST_WORD.match(text)
    return m is not None and m.group(1).lower() not in _STARTERS


def _is_named(prose: str, raw: bytes) -> int:
    """1 when the answer names something: a proper noun (:data:`_ENTITY`) in ``raw`` (its
    UTF-8 bytes) or a first word that is a name; else 0."""
    return int(_first_word_is_name(prose) or _ENTITY.search(raw) is not None)


def _is_factoid_question(question: str) -> bool:
    """A who/when/where/which (or how many/old, what year/city...) question that names
    something and does not state two numbers (that is a word problem: the computation
    family's)."""
    ql = question.lower()
    ws = ql.replace("?", " ").replace(",", " ").replace("？", " ").split()
    if _WH_WORDS.isdisjoint(ws):
        if not ("how" in ws and any([p in ql for p in _HOW_PHRASES])) and \
                not ("what" in ws and any([p in ql for p in _WHAT_PHRASES])):
            return False
    qraw = question.encode("utf-8", "surrogatepass")
    if _ENTITY.search(qraw) is None and not _first_word_is_name(question):
        return False
    return _count_numbers(qraw, qraw.translate(_DIGIT_TO_0), 2) < 2


def _count_numbers(raw: bytes, mapped: bytes, cap: int) -> int:
    """Numbers in ``raw`` (``mapped``: the same bytes, digits mapped to "0") that are not
    years (1500-2099 written as four digits), up to ``cap``."""
    n = 0
    for m in _Q_NUMBER.finditer(mapped):
        a, b = m.span()
        if b - a == 4 and raw[a:a + 2] in _YEAR_HEADS:
            continue
        n += 1
        if n >= cap:
            break
    return n


def _facts_signals(prose: str, question: str | None, has_digit: bool, worked: int,
                   signals: dict[str, int], encoded: tuple[bytes, bytes] | None = None) -> int:
    """Facts-family anchors of ``prose``, counted into ``signals``: ``date`` (a year, 3月5日),
    ``quantity`` (484,507; 3.2 million; 330 metres; 5万), ``statistic`` (20%, 5 percent,
    百分之), ``superlative`` (the largest, most populous, 最大), ``attribution`` ("according
    to", "data show", 据报道), ``factoid`` (a short who/when/which question about something
    named). ``encoded``: ``prose`` as UTF-8 bytes and their ASCII lower-case, when the caller
    has them. Returns the family count, 0 unless a gate holds: a proper noun in the answer, an
    attribution, or a date with a second kind of anchor (CJK text has no capitals: it needs the
    date or the attribution).

    An answer that shows its working (``worked`` > 0: an operation or equation between
    numbers) is a solution: its numbers, superlatives ("the smallest n") and "according to the
    problem" are not world claims, so the family is 0 (measured on GSM8K and ProcessBench
    solutions: bench/results/risk.md)."""
    if worked:
        return 0
    if encoded is None:
        raw = prose.encode("utf-8", "surrogatepass")
        low = raw.lower()   # ASCII-only lower-casing: C speed, multi-byte characters untouched
    else:
        raw, low = encoded
    k = FAMILIES["facts"][1]
    named = -1   # does the answer name something (the gate)? looked up lazily, -1 = not yet
    kinds: dict[str, int] = {}
    total = 0
    if has_digit:
        mapped = raw.translate(_DIGIT_TO_0)
        for m in _NUM0.finditer(mapped):   # ~0.5 µs per match
            kind = m.lastgroup
            if kind == "year":
                a = m.start()
                if raw[a:a + 2] not in _YEAR_HEADS or (a and raw[a - 1] in _NOT_BEFORE_YEAR):
                    continue
                kind = "date"
            kinds[kind] = kinds.get(kind, 0) + 1
            total += 1
            if total >= _FACT_CAP:
                break
    # Han characters (U+4E00-U+9FFF) have UTF-8 lead bytes E4-E9; memchr finds one at C speed,
    # and the CJK patterns (which start with a class, ~20 ns/char) run only when there is one
    han = len(raw) != len(prose) and any([b in raw for b in _HAN_LEADS])
    if han:
        n = 0
        for m in _CJK_FACT.finditer(prose):
            g = m.group()
            kind = "date" if g.endswith("年") else "statistic" if g == "百分之" else "quantity"
            kinds[kind] = kinds.get(kind, 0) + 1
            n += 1
            if n >= _FACT_CAP:
                break
        total += n
        n = 0
        for _ in _CJK_SUPER.finditer(prose):
            n += 1
            if n >= _FACT_CAP:
                break
        if n:
            kinds["superlative"] = n
            total += n
    # once k anchors stand in a named answer the family cannot rise: like the arithmetic
    # family, counting stops there (on number-dense prose this skips most of the passes)
    if total >= k:
        named = _is_named(prose, raw)
    if named != 1:
        n = probes = 0
        i = low.find(b"est")
        while i != -1 and probes < _MAX_PROBES:
            probes += 1
            e = i + 3
            if e >= len(low) or not (97 <= low[e] <= 122):   # the word ends here
                w = low[low.rfind(b" ", max(0, e - 16), e) + 1:e]
                if (w in _SUPER_SET or w.lstrip(b"(\"'*_") in _SUPER_SET
                        or (low.startswith(b"-selling", e) and w.endswith(b"best"))):
                    n += 1
            i = low.find(b"est", e)
        if b"most " in low:   # bytes in/count: ~0.4 ns per byte; a multi-byte-prefix regex ~2 ns
            n += len(_SUPER_MOST.findall(low))
        if n:
            kinds["superlative"] = min(_CAP, kinds.get("superlative", 0) + n)
            total += n
            if total >= k and named < 0:
                named = _is_named(prose, raw)
    attribution = 0
    if named != 1 or total < k:
        attribution = low.count(b"according to") + low.count(b"reported")
        if b" show" in low:
            attribution += len(_SHOWS.findall(low))
        if han:
            attribution += sum([prose.count(w) for w in _CJK_ATTRIBUTION])
    factoid = 0
    if (question and (named != 1 or total + attribution < k) and len(question) <= _FACTOID_MAX_Q
            and ("?" in question or "？" in question) and prose and not prose.isspace()
            and _is_factoid_question(question)):
        factoid = 1
    if not kinds and not attribution and not factoid:
        return 0
    if not (attribution or ("date" in kinds and len(kinds) >= 2)):
        if named < 0:
            named = _is_named(prose, raw)
        if named != 1:
            return 0
    total = 0
    for kind, n in kinds.items():
        signals[kind] = min(_CAP, n)
        total += min(_CAP, n)
    if attribution:
        signals["attribution"] = min(_CAP, attribution)
        total += min(_CAP, attribution)
    if factoid:
        signals["factoid"] = 1
    return total + factoid


def _computation_signals(question: str, prose: str, has_digit: bool, worked: int, code_blocks: int,
                         signals: dict[str, int]) -> int:
    """Computation-family count (0 or 1): the question states an expression
    (``stated_expression``: ``97/117``, ``1/2!``) or at least two numbers that are not years
    and a computing word (``numeric_task``: "how much", "复利", "product"), and the answer's
    prose states a number with no worked operation or equation (``unshown_value``). Code
    answers are the code verifier's and never count. Only the last :data:`_Q_COMPUTE_TAIL`
    characters of the question are read."""
    if not has_digit or worked or code_blocks:
        return 0
    qt = question[-_Q_COMPUTE_TAIL:]
    if not any(d in qt for d in "0123456789"):
        return 0
    qraw = qt.encode("utf-8", "surrogatepass")
    mapped = qraw.translate(_DIGIT_TO_0)
    if _Q_EXPRESSION.search(mapped) is not None:
        kind = "stated_expression"
    else:
        low = qt.lower()
        if not any(w in low for w in _COMPUTE_WORDS) or _count_numbers(qraw, mapped, 2) < 2:
            return 0
        kind = "numeric_task"
    signals[kind] = 1
    signals["unshown_value"] = 1
    return 1


#: Characters of an answer's prose read by the facts family: it saturates at two anchors, so a
#: claim-bearing answer shows them long before this; the bound keeps a 200 kB answer of CJK
#: text (whose patterns scan at ~20-40 ns per character) at ~1 ms.
FACTS_SCAN_CHARS = 20_000

#: Characters of an answer scanned for signals (the citation verifier reads 200,000, the
#: arithmetic verifier 60,000); ``length`` still counts the whole answer.
MAX_SCAN_CHARS = 200_000


def score(question: str | None, answer: str | None) -> RiskScore:
    """Score the risk of ``answer`` to ``question`` (both plain text; ``None`` is empty).

    Never raises on any string input. See the module docstring for the signals and the
    formula.
    """
    answer = answer or ""
    if not isinstance(answer, str):
        answer = str(answer)
    length = len(answer)
    # signals come from the first MAX_SCAN_CHARS (the verifiers read no further either); a
    # 10 MB answer cost ~0.4 s of event-loop time to scan whole
    answer = answer[:MAX_SCAN_CHARS]
    signals: dict[str, int] = {}
    fam: dict[str, int] = {}

    # arithmetic: counting stops once the family saturates (k hits), the score cannot rise
    k = FAMILIES["arithmetic"][1]
    a = 0
    # fenced code is the code verifier's: arithmetic looks at the prose around it only
    fences = answer.count("```")
    prose = "".join(answer.split("```")[::2]) if fences >= 2 else answer
    # every arithmetic signal needs a digit: ten C-speed membership tests rule most prose out
    has_digit = any(d in answer for d in "0123456789")
    has_digit_prose = has_digit and (prose is answer or any(d in prose for d in "0123456789"))
    ops = sum(prose.count(o) for o in _OPERATORS) if has_digit_prose else 0
    eqs = prose.count("=") if has_digit_prose else 0
    for name, needles, ok, rx, count in (
        ("operation", _OPERATORS, _is_operation, _OPERATION_RX, ops),
        ("equation", ("=",), _is_equation, _EQUATION_RX, eqs),
        ("currency", _CURRENCY_SIGNS, _is_sign_amount, None, -1),
        ("currency", _CURRENCY_WORDS, _is_after_number, None, -1),
        ("percent", ("%", " percent"), _is_after_number, None, -1),
    ):
        if a >= k or not has_digit_prose:
            break
        if count == 0:
            continue
        if count > _PROBE_LIMIT:  # many anchors (tables, long derivations): one C-level scan is cheaper
            n = min(_count(rx, prose), k - a)
        else:
            n = _anchored(prose, needles, ok, k - a)
        if n:
            signals[name] = signals.get(name, 0) + n
            a += n
    fam["arithmetic"] = a

    # code
    c = (fences + answer.count("~~~")) // 2  # open + close fence = one block
    if fences % 2 and length > MAX_SCAN_CHARS:
        c += 1  # a block opened before the scan limit runs past it: still a code block to verify
    if c:
        signals["code_block"] = c
    else:
        c = _anchored(answer, _CODE_STARTS, _is_code_line, _CAP)
        if c:
            signals["code_line"] = c
    fam["code"] = c

    # citations
    r = 0
    n = _anchored(answer, ("10.",), _is_doi, _CAP) if has_digit else 0
    if n:
        signals["doi"] = n
        r += n
    if "rXiv" in answer or "rxiv" in answer or "RXIV" in answer:
        n = _count(_ARXIV, answer)
        if n:
            signals["arxiv"] = n
            r += n
    n = min(_CAP, answer.count("et al"))
    if n:
        signals["et_al"] = n
        r += n
    # one lower-cased byte copy (~1 µs per 2 kB) rules the nine heading needles out in five passes
    raw = answer.encode("utf-8", "surrogatepass")
    low = raw.lower()
    n, ref_at = _ref_headings(answer) if any([h in low for h in _REF_HINTS]) else (0, -1)
    if n:
        signals["reference_list"] = n
        r += n
        if prose is not answer:   # headings were found in the answer; the facts cut is in the prose
            ref_at = _ref_headings(prose)[1]
    # the pattern starts with a literal "(": SRE's literal-prefix search makes one scan cheap
    n = _count(_AUTHOR_YEAR, answer) if has_digit and ("19" in answer or "20" in answer) else 0
    if n:
        signals["author_year"] = n
        r += n
    if "@" in answer:
        n = min(_CAP, _count(_BIBTEX, answer))
        if n:
            signals["bibtex"] = n
            r += 2 * n
    fam["citations"] = r

    # facts: world claims in the prose (fenced code is the code verifier's)
    worked = signals.get("operation", 0) + signals.get("equation", 0)
    # unfenced code (code_line): its docstrings and literals are not world claims
    # the reference list is the citations verifier's: its years and titles are not claims
    facts_text = (prose if ref_at < 0 else prose[:ref_at])[:FACTS_SCAN_CHARS]
    fam["facts"] = 0 if "code_line" in signals else _facts_signals(
        facts_text, question, has_digit_prose and (ref_at < 0 or any(d in facts_text for d in "0123456789")),
        worked, signals, (raw, low) if facts_text is answer else None)

    # computation: a stated numeric task answered with a bare value
    fam["computation"] = _computation_signals(question, prose, has_digit_prose, worked, c, signals) \
        if question else 0

    # multi-part question
    q = question_signals(question) if question else {}
    signals.update(q)
    fam["multi_part"] = sum(q.values())

    keep = 1.0
    triggered: list[str] = []
    for family, (weight, k, verifier) in FAMILIES.items():
        n = fam[family]
        if n:
            keep *= 1.0 - weight * min(1.0, n / k)
            triggered.append(verifier)
    if answer:
        signals["length"] = length
        keep *= 1.0 - _LENGTH_WEIGHT * min(1.0, length / _LENGTH_SAT)
    return RiskScore(score=1.0 - keep, signals=signals, verifiers=triggered,
                     length=length if length > min(MAX_SCAN_CHARS, FACTS_SCAN_CHARS) else 0)
