"""Text helpers of the facts verifier: sentences, key terms, numbers, dates, named entities.

Sentences come from pysbd (Sadvilkar & Neumann, "PySBD: Pragmatic Sentence Boundary
Disambiguation", NLP-OSS 2020; rule-based, handles "Dr.", "U.S.", "Jan. 5", decimals), with the
spans kept so a claim can point into the answer. Key terms are lower-case content words cut to
their first :data:`KEY_PREFIX` letters (a crude, language-agnostic stem, the same one
``verifiers.citations._relevance`` uses), so "deliveries"/"delivered" meet.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from verifiers._bidi import display_order

__all__ = ["sentences", "keys", "key_set", "numbers", "Quantity", "entities", "words", "STOP", "KEY_PREFIX",
           "MONTHS", "is_time_bound", "norm_claim", "NEGATION", "display_order"]

#: Words are compared by their first KEY_PREFIX letters.
KEY_PREFIX = 6

STOP = frozenset("""
a an the of in on at to for from by with and or is are was were be been being that this these those as it its
their there than which who whom whose what when where how can may might will would should could do does did has
have had into between among also both either neither nor via per more less most least about over under after before
during while whereas he she they we you i his her him them our your my me us one ones so such just very much many
some any all each other another only own same too s t up out off then once here why if because until against above
below again further not no never nor say said says according
""".split())

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
          "november", "december")
_MONTH_ABBR = {m[:3]: i + 1 for i, m in enumerate(MONTHS)} | {"sept": 9}
_MONTH_RE = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|jun(?:e)?|jul(?:y)?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"

_WORD_RE = re.compile(r"[a-z0-9][a-z0-9]*(?:'[a-z]+)?")
NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none|cannot|without)\b|n't\b", re.IGNORECASE)

_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "mln": 1e6, "billion": 1e9, "bn": 1e9,
          "b": 1e9, "trillion": 1e12, "tn": 1e12}
_NUM_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
              "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
              "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
              "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "dozen": 12}
_NUMBER_RE = re.compile(
    r"(?<![\w.])(?P<cur>[$€£¥])?\s?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|mln|mn|bn|tn|k|m|b)\b)?"
    r"|(?<![\w-])(?P<word>" + "|".join(_NUM_WORDS) + r")(?!\w|-(?!(?:one|two|three|four|five|six|seven|eight|nine)\b))",
    re.IGNORECASE)
_TENS = frozenset(("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"))
_SPELL_GAP = r"(?:\s*-\s*|\s+)"
_SPELL_WORD = r"(?:" + "|".join(_NUM_WORDS) + r"|one|zero|hundred|thousand|million|billion|dot|point|and\s+a\s+half|\d)"
_SPELL_AFTER = re.compile(_SPELL_GAP + _SPELL_WORD + r"\b", re.IGNORECASE)
_SPELL_BEFORE = re.compile(r"\b" + _SPELL_WORD + _SPELL_GAP + r"$", re.IGNORECASE)
#: The fractional part of a spoken decimal after a spelled whole part: "twelve dot fifty" (12.50,
#: a meeting transcript's price), "two point five" (2.5) -- digits spoken as one number 1..99 or
#: written as digits; the words of the fraction are its digits ("fifty" -> "50").
_SPOKEN_POINT = re.compile(r"\s+(?:dot|point)\s+(?:(?P<digits>\d+)\b|(?P<tens>" + "|".join(sorted(_TENS)) + r")(?:" + _SPELL_GAP
    + r"(?P<unit>one|two|three|four|five|six|seven|eight|nine)\b)?|(?P<small>one|two|three|four|five|six|seven|eight|"
    r"nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen)\b)(?!\w)", re.IGNORECASE)
_HEDGE_RE = re.compile(r"\b(?:about|around|approximately|approx|roughly|nearly|almost|over|more than|less than|fewer than|"
                       r"at least|at most|up to|some|an estimated|estimated|under|close to|upwards of|~)\s*$", re.IGNORECASE)
_TIME_BOUND_RE = re.compile(r"\b(?:current(?:ly)?|now|today|latest|as of|this year|recent(?:ly)?|incumbent|presently|"
                            r"so far|to date|still)\b", re.IGNORECASE)
#: A run of capitalised words (optionally joined by of/the/de/and/&), not counting the first
#: word of a sentence unless it is followed by another capitalised word.
_ENTITY_RE = re.compile(r"(?<![\w'])([A-Z][\w'.&-]*[\w]|[A-Z])(?:\s+(?:(?:of|the|de|del|von|van|and|&)\s+)?[A-Z][\w'.&-]*[\w])*")


@lru_cache(maxsize=4096)
def _segmenter():
    import pysbd

    return pysbd.Segmenter(language="en", clean=False, char_span=True)


#: pysbd's cost grows faster than linearly with the block it is given (57 kB in one block: 2.5 s,
#: measured); blocks longer than this are cut first at a plain sentence end near this size.
_PIECE_CHARS = 1500
_ROUGH_END = re.compile(r"(?<=[a-z0-9%)]{3})[.!?][\"')\]]?\s+(?=[A-Z\"'(\[])")


def _pieces(block: str) -> list[tuple[int, str]]:
    """``(offset, text)`` pieces of a long block, cut at rough sentence ends."""
    if len(block) <= _PIECE_CHARS:
        return [(0, block)]
    out: list[tuple[int, str]] = []
    start = 0
    while len(block) - start > _PIECE_CHARS:
        cut = None
        for m in _ROUGH_END.finditer(block, start + _PIECE_CHARS // 2, start + _PIECE_CHARS * 2):
            cut = m.end()
            if cut - start >= _PIECE_CHARS:
                break
        if cut is None:  # no sentence end: cut at a space
            sp = block.rfind(" ", start + _PIECE_CHARS // 2, start + _PIECE_CHARS * 2)
            cut = sp + 1 if sp > start else start + _PIECE_CHARS * 2
        out.append((start, block[start:cut]))
        start = cut
    out.append((start, block[start:]))
    return out


@lru_cache(maxsize=8192)
def sentences(text: str) -> tuple[tuple[int, int], ...]:
    """``(start, end)`` spans of the sentences of ``text`` (pysbd, trailing blanks excluded);
    line breaks also end a sentence (lists, headings), and blocks over 1,500 characters are
    first cut at plain sentence ends (pysbd slows down sharply on long blocks). Cached:
    passages are re-read each round."""
    out: list[tuple[int, int]] = []
    pos = 0
    for block in re.split(r"(\n\s*)", text):
        if block and not block.isspace():
            for off, piece in _pieces(block):
                try:
                    spans = [(s.start, s.end) for s in _segmenter().segment(piece)]
                except Exception:  # pysbd on odd input: the piece is one sentence
                    spans = [(0, len(piece))]
                for a, b in spans:
                    seg = piece[a:b]
                    a2 = a + (len(seg) - len(seg.lstrip()))
                    b2 = a + len(seg.rstrip())
                    if b2 > a2:
                        out.append((pos + off + a2, pos + off + b2))
        pos += len(block)
    return tuple(out)


def words(text: str) -> list[str]:
    """Lower-case word tokens."""
    return _WORD_RE.findall(text.lower())


def keys(text: str) -> list[str]:
    """Key terms of ``text`` in order: content words (no stop words, no bare numbers, possessive
    ``'s`` dropped), cut to :data:`KEY_PREFIX` letters."""
    out = []
    for w in words(text):
        w = w.removesuffix("'s")
        if w not in STOP and len(w) > 1 and not w[0].isdigit() and w not in _NUM_WORDS:
            out.append(w[:KEY_PREFIX])
    return out


@lru_cache(maxsize=8192)
def key_set(text: str) -> frozenset[str]:
    """The key terms of ``text`` (:func:`keys`) as a set, for coverage comparisons."""
    return frozenset(keys(text))


@dataclass(slots=True, frozen=True)
class Quantity:
    """A number stated in text: ``value`` (scale words applied: "1.2 million" -> 1.2e6),
    ``kind`` (``percent`` | ``currency`` | ``year`` | ``number``), ``decimals`` (digits after
    the point as written, for rounding), ``zeros`` (trailing zeros of an integer as written:
    "484,500" -> 2), ``hedged`` ("about 500"), ``start``/``end`` (span), ``text``, ``vague``
    (why the value read may not be the value meant, see :func:`vagueness`: ``"format"`` for a
    locale-ambiguous separator, ``"scale"`` for a scale word this parser does not apply,
    ``"range"`` for an end of a range; ``""`` when the reading is plain)."""

    value: float
    kind: str
    decimals: int
    zeros: int
    hedged: bool
    start: int
    end: int
    text: str
    vague: str = ""

    def rounds_to(self, other: "Quantity", loose: bool = True) -> bool:
        """True when ``other`` is consistent with ``self`` as written: equal, or ``self`` is
        ``other`` rounded half-up to the precision ``self`` was written with -- its decimals
        ("19.6" -> "20" at 0 decimals), and when ``loose`` also its trailing zeros ("484,507"
        -> "480,000"). Loose rounding keeps a contradiction from firing on a rounded figure;
        strict rounding keeps "500" from being *supported* by "450"."""
        if self.value == other.value:
            return True
        if other.value == 0:
            return False
        decimals = self.decimals
        if loose and decimals:  # "6.90" may be 6.9 written to two places
            frac = self.text.split(".")[-1]
            digits = "".join(ch for ch in frac if ch.isdigit())
            decimals -= len(digits) - len(digits.rstrip("0"))
        unit = 10.0 ** -decimals if decimals > 0 else 10.0 ** (self.zeros if loose else 0)
        m = re.search(r"(?:thousand|million|billion|trillion|mln|mn|bn|tn|k|m|b)\b", self.text.lower())
        step = unit * (_SCALE.get(m.group(0), 1.0) if m and self.kind != "year" else 1.0)
        diff = other.value - self.value
        eps = 1e-9 * max(1.0, abs(other.value))
        return -step / 2 - eps <= diff < step / 2 - eps


def numbers(text: str) -> list[Quantity]:
    """The quantities of ``text`` in order (see :class:`Quantity`). Spelled numbers two..ninety
    count, with compounds ("twenty-five", "twenty five", "twenty - five" in transcripts), and so
    do spoken decimals ("twelve dot fifty" 12.50, "two point five" 2.5: :data:`_SPOKEN_POINT`);
    "one" does not (it is more often a pronoun), and a spelled number that is part of a longer
    one ("two hundred", "three point five million") is left out rather than misread."""
    out: list[Quantity] = []
    consumed = 0
    for m in _NUMBER_RE.finditer(text):
        if m.start() < consumed:
            continue
        hedged = bool(_HEDGE_RE.search(text[max(0, m.start() - 16):m.start()]))
        if m.group("word"):
            w = m.group("word").lower()
            value, end = _NUM_WORDS[w], m.end()
            if w in _TENS:
                unit = re.match(_SPELL_GAP + r"(one|two|three|four|five|six|seven|eight|nine)\b", text[end:end + 12],
                                re.IGNORECASE)
                if unit:
                    value += _NUM_WORDS.get(unit.group(1).lower(), 1)
                    end += unit.end()
            point = _SPOKEN_POINT.match(text, end) if w != "hundred" and w != "dozen" else None
            if point and not _SPELL_AFTER.match(text[point.end():point.end() + 16]) and not _SPELL_BEFORE.search(
                    text[max(0, m.start() - 16):m.start()]):
                # a spoken decimal ("twelve dot fifty" = 12.50): its fraction read as the digits said
                if point.group("digits"):
                    frac = point.group("digits")
                elif point.group("tens"):
                    frac = str(_NUM_WORDS[point.group("tens").lower()]
                               + (_NUM_WORDS.get(point.group("unit").lower(), 1) if point.group("unit") else 0))
                else:
                    frac = str(_NUM_WORDS.get(point.group("small").lower(), 1))   # "one": not in _NUM_WORDS
                consumed = point.end()
                out.append(Quantity(float(f"{value}.{frac}"), "number", len(frac), 0, hedged, m.start(), point.end(),
                                    text[m.start():point.end()], vagueness(text, m.start(), point.end())))
                continue
            consumed = end
            # part of a longer spelled number ("two hundred", "fifty" of "twelve dot fifty million"): not parsed
            if _SPELL_AFTER.match(text[end:end + 16]) or _SPELL_BEFORE.search(text[max(0, m.start() - 16):m.start()]):
                continue
            out.append(Quantity(float(value), "number", 0, 0, hedged, m.start(), end, text[m.start():end],
                                vagueness(text, m.start(), end)))
            continue
        raw = m.group("num")
        plain = raw.replace(",", "")
        try:
            v = float(plain)
        except ValueError:
            continue
        decimals = len(plain.split(".")[1]) if "." in plain else 0
        zeros = 0 if decimals else len(plain) - len(plain.rstrip("0")) if plain.strip("0") else 0
        scale = m.group("scale")
        if scale:
            sc = scale.lower()
            # "5 m" is as often metres as millions: single letters only right after a currency
            if sc in ("m", "b", "k") and not m.group("cur"):
                scale = None
            else:
                v *= _SCALE[sc]
        if m.group("pct"):
            kind = "percent"
        elif m.group("cur"):
            kind = "currency"
        elif not decimals and "," not in raw and 1000 <= v <= 2100 and len(plain) == 4:
            kind = "year"
        else:
            kind = "number"
        end = m.end() if (scale or m.group("pct")) else m.start("num") + len(raw)
        out.append(Quantity(v, kind, decimals, zeros, hedged, m.start(), end, text[m.start():end],
                            vagueness(text, m.start("num"), end, raw=raw, scaled=bool(scale))))
    return _mark_ranges(text, out)


#: Digit-group separators other than the comma: spaces (SI / ISO 31-0 "2 500", narrow no-break
#: U+202F in French typography, thin space U+2009) and the no-break space.
_GROUP_SPACE = " \u00a0\u2009\u202f"
#: A number continued by a separator this parser did not take: a decimal comma ("4,2", "12,5 %",
#: "1.234,5"), a space-grouped thousands block ("2 500"), or more dotted groups ("05.03.1999").
_CONT_AFTER = re.compile(r"(?:,\d(?!\d{2}(?!\d))|,\d{4}|[" + _GROUP_SPACE + r"]\d{3}(?!\d)|\.\d)")
_CONT_BEFORE = re.compile(r"(?:(?<![\d.,])\d{1,3}[" + _GROUP_SPACE + r"]|\d[.,])$")
#: Dot-grouped thousands ("2.500", "1.000.000"): 2500 in German/Spanish/Italian, 2.5 in English.
_DOT_GROUPED = re.compile(r"^\d{1,3}(?:\.\d{3})+$")
#: Scale words and signs this parser does not apply ("12万", "1.2 bln", "1,2 Mio.", "15 lakh"):
#: the bare number is not the amount meant.
_FOREIGN_SCALE = re.compile(r"\s?(?:[\u4e07\u842c\u4ebf\u5104\u5343\u767e\u5146]|(?:bln|mio|mrd|mld|md|mil|"
                            r"lakhs?|lacs?|crores?|millionen|milliarden|millones|milliards?|tsd|tys|thousands|"
                            r"millions|billions)\b)", re.IGNORECASE)
#: What joins the two ends of a range: "12-15", "1998–99", "12 to 15", "3% to 5%"; "and" only
#: after "between" ("between 12 and 15").
_RANGE_JOIN = re.compile(r"\s*(?:[-\u2013\u2014~]|to)\s*", re.IGNORECASE)
_RANGE_AND = re.compile(r"\s*and\s*", re.IGNORECASE)
_BETWEEN = re.compile(r"\bbetween\s*$", re.IGNORECASE)


def _mark_ranges(text: str, qs: list[Quantity]) -> list[Quantity]:
    """``qs`` with both ends of each range marked ``vague="range"``: two neighbouring quantities
    of one kind (or a bare number after a year or a currency amount, "1998–99", "$3-4 million")
    joined by a dash or "to", or by "and" after "between". "grew 20.3% to $2.55" is no range
    (two kinds); "$29.9 million or $0.70 per share" neither (two statements of one fact)."""
    out = list(qs)
    for i in range(len(out) - 1):
        a, b = out[i], out[i + 1]
        if a.kind != b.kind and b.kind != "number":
            continue
        gap = text[a.end:b.start]
        if _RANGE_JOIN.fullmatch(gap) or (_RANGE_AND.fullmatch(gap) and _BETWEEN.search(text[max(0, a.start - 12):a.start])):
            out[i], out[i + 1] = replace(a, vague=a.vague or "range"), replace(b, vague=b.vague or "range")
    return out


def vagueness(text: str, start: int, end: int, *, raw: str | None = None, scaled: bool = False) -> str:
    """Why the number at ``text[start:end]`` may not mean the value read: ``"format"`` (a
    locale-ambiguous separator: "2.500" is 2500 in German and 2.5 in English; "4,2" is a decimal
    comma; "2 500" is SI digit grouping -- CLDR number formats differ exactly here), ``"scale"``
    (a scale word or sign not applied: "12万" is 120,000, "1.2 bln", "15 lakh"), or ``""``
    (ranges are marked by :func:`_mark_ranges`). A vague number never refutes a claim and a
    range end never supports one (docs/design.md "False alarms cost more than misses")."""
    if raw is not None and _DOT_GROUPED.match(raw):
        return "format"
    if _CONT_AFTER.match(text, end) or _CONT_BEFORE.search(text[max(0, start - 8):start]):
        return "format"
    if not scaled and _FOREIGN_SCALE.match(text, end):
        return "scale"
    return ""


def month_of(token: str) -> int | None:
    """1..12 for a month name or abbreviation ("Sept.", "march"), else None."""
    t = token.lower().rstrip(".")
    if t in MONTHS:
        return MONTHS.index(t) + 1
    return _MONTH_ABBR.get(t)


def entities(text: str) -> list[tuple[str, int, int]]:
    """Named-entity-like spans ``(text, start, end)``: runs of capitalised words. The first word
    of a sentence counts only when the next word is capitalised too ("New York"), or it is not a
    stop word and occurs capitalised elsewhere. A capitalised heuristic, documented as such: it
    misses lower-case text (dialogue corpora) and errs towards fewer entities."""
    out: list[tuple[str, int, int]] = []
    starts = {a for a, _ in sentences(text)} | {0}
    for m in _ENTITY_RE.finditer(text):
        s, e, t = m.start(), m.end(), m.group(0)
        if s in starts and " " not in t:
            if t.lower() in STOP or not re.search(r"(?<!^)\b" + re.escape(t) + r"\b", text[e:]):
                continue
        if t.lower() in STOP:
            continue
        out.append((t, s, e))
    return out


def is_time_bound(text: str) -> bool:
    """True when the claim is about "now" (current, latest, as of, today...): recency matters."""
    return bool(_TIME_BOUND_RE.search(text))


def norm_claim(text: str) -> str:
    """A claim normalised for cache keys: lower case, words only, single spaces."""
    return " ".join(_WORD_RE.findall(text.lower()))
