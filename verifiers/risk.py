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
  (``(Smith, 2019)``).
- ``sentinel`` family (question only) — ``enumeration`` (numbered or bulleted lines),
  ``also`` ("and also", "as well as", "additionally", "顺便", "另外", "并且"),
  ``questions`` (question marks beyond the first).
- ``length`` — answer length in characters (longer answers carry more claims).

The score is ``1 - prod(1 - w_f * min(1, n_f / k_f))`` over the families, a noisy-OR of the
family evidences; the weights are engineering choices documented next to them, not learned.
Cost target: <= 50 µs for a typical (1-2 kB) answer — see ``bench/pipeline_bench.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

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
_REF_HEADINGS = ("References", "REFERENCES", "references", "Bibliography", "BIBLIOGRAPHY", "Works Cited",
                 "Sources", "SOURCES", "参考文献")
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


#: family -> (weight, saturation count k, verifier it triggers). A family's evidence is
#: ``min(1, n / k)``; the weight is how much one saturated family alone raises the score.
FAMILIES: dict[str, tuple[float, int, str]] = {
    "arithmetic": (0.7, 3, "arithmetic"),   # three worked operations make a numeric answer
    "code": (0.8, 1, "code"),               # any code block is worth running
    "citations": (0.8, 2, "citations"),     # two citation marks make a reference list
    "multi_part": (0.5, 2, "sentinel"),     # two sub-tasks are enough to forget one
}
_LENGTH_WEIGHT = 0.2   # a 4,000-character answer adds at most 0.2 by length alone
_LENGTH_SAT = 4000


@dataclass(slots=True)
class RiskScore:
    """The risk of one answer.

    ``score``: 0..1. ``signals``: signal name -> count (only non-zero ones).
    ``verifiers``: the verifiers the signals trigger, in a stable order
    (``arithmetic``, ``code``, ``citations``, ``sentinel``); the caller applies the policy's
    threshold and enabled set.
    """

    score: float
    signals: dict[str, int] = field(default_factory=dict)
    verifiers: list[str] = field(default_factory=list)

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
    n = _anchored(answer, _REF_HEADINGS, _is_ref_heading, _CAP)
    if n:
        signals["reference_list"] = n
        r += n
    # the pattern starts with a literal "(": SRE's literal-prefix search makes one scan cheap
    n = _count(_AUTHOR_YEAR, answer) if has_digit and ("19" in answer or "20" in answer) else 0
    if n:
        signals["author_year"] = n
        r += n
    fam["citations"] = r

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
    return RiskScore(score=1.0 - keep, signals=signals, verifiers=triggered)
