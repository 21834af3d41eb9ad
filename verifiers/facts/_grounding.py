"""Ungrounded anchors: the numbers, dates, amounts and names of an answer sentence that no
supplied document contains (grounding under the ``rag`` policy).

What cloud grounding services call *ungrounded* content (Azure AI Content Safety groundedness
detection, Google Vertex AI check-grounding, AWS Bedrock contextual grounding) is, at its most
checkable, a specific detail of the answer that the documents never mention. This module finds
those details deterministically: the sentence's **anchors** (:func:`anchors`) are its
quantities (:func:`verifiers.facts._text.numbers`: digits, currency and scale words, percents,
years, spelled numbers), its month names and its named entities (capitalised runs,
:func:`verifiers.facts._text.entities`); an anchor is **present** (:meth:`Documents.has`) when
the documents state it after normalisation:

* case and accents (Unicode NFKD, combining marks dropped: "El Niño" = "El Nino"; an umlaut
  written out: "Mueller" = "Müller"), possessive
  ``'s``, dotted initials ("U.S." = "US");
* quantities by value with scale words and units applied ("$4.2 million" = "4,200,000" =
  "4.2m"), rounding either way as written (:meth:`Quantity.rounds_to`: "$4 million" / "$4.2
  million"), a figure in another unit converted with pint ("1,083 feet" = "330 metres", "104 °F"
  = "40 °C", rounded as written), numbers in words ("twelve" = "12"), and date formats (a year, a day or a month
  written as "2023-03-05", "5/3/2023", "March 5", "5 March"), shares in words ("two-fifths",
  "a quarter", "one in four" = "40%", "25%"), clock times by hour and minute
  ("10:30 a.m." = "10.30am", "17:00" = "5 pm"); a number the documents spell out
  ("number one", "twelve fifty" for 12.50, "second" for "2nd");
* names by any of their words (a surname alone, "Keller" for "Maria Keller"), a shared stem
  of four letters ("Britons" / "Brits" / "British"), a demonym of a place named
  (:data:`DEMONYMS`: "Spanish" / "Spain"), or initials of words of the documents ("UN" /
  "United Nations", and "LA" for "Los Angeles");
* words too generic to name anything (:data:`GENERIC`: titles and roles like "CEO", "Mr",
  "Q4", discourse words like "Yeah"), numbers glued to a name ("COVID-19", "4Q", "5G"), small
  spelled counts (up to :data:`SMALL_SPELLED`: "two friends"), single letters, acronyms ("CNN", "PhDs": too many expansions) and anonymisation
  placeholders ("XXXX") are not anchors.

Everything errs towards *present* (a name counts when any one of its words occurs): a missing
anchor is a strong signal, and false alarms cost more than misses (docs/design.md "False alarms
cost more than misses").
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from verifiers.facts._text import MONTHS, STOP, Quantity, entities, month_of, numbers

__all__ = ["Documents", "anchors", "missing", "derivable", "operands", "WORKED_OUT", "fold", "DEMONYMS", "GENERIC", "MIN_DOC_CHARS", "Anchor"]

#: Evidence text below this many characters is a question, not documents: no anchor is called
#: ungrounded (the gateway's ``GROUNDING_MIN_CHARS`` reads the same way).
MIN_DOC_CHARS = 200
#: Distinct document quantities of one kind :meth:`Documents.derivable` combines (pairs: the
#: work is quadratic in this).
MAX_OPERANDS = 60
#: Letters two words must share at their start to be one name ("Brit-ons" / "Brit-s").
STEM = 4

#: Capitalised words that name no particular thing: titles, roles, periods, generic nouns that
#: summaries capitalise. Such a word is never an anchor on its own.
GENERIC = frozenset("""
mr mrs ms miss dr prof professor sir madam lord lady st mt ceo cfo coo cto cio chair chairman chairwoman chairperson
president vice director manager head chief officer executive founder cofounder co-founder secretary minister
senator governor mayor judge king queen prince princess pope speaker host guest guests interviewer interviewee
caller customer client agent rep representative person user participant team company firm group inc ltd llc plc
celsius fahrenheit kelvin
corp corporation co pty ag sa gmbh q1 q2 q3 q4 h1 h2 fy ytd yoy qoq am pm tv ok okay yes no hi hello dear thanks
thank regards best please yeah yep yup well oh wow hey haha lol um uh hmm sure really actually
indeed anyway ah aw monday tuesday wednesday thursday friday saturday sunday today tomorrow yesterday
mom mum dad mother father brother sister aunt uncle grandma grandpa wife husband son daughter baby
section chapter part figure table appendix article paper study report summary abstract conclusion introduction
""".split())

#: Place -> demonym / adjective pairs whose spellings share no 4-letter stem (the regular ones,
#: "America" / "American", "Brit-ain" / "Brit-ish", meet by :data:`STEM`). Hand list of the
#: common irregular forms (English usage as in the CIA World Factbook's nationality field).
DEMONYMS = {
    "spain": ("spanish", "spaniard", "spaniards"), "france": ("french", "frenchman", "frenchmen"),
    "netherlands": ("dutch",), "holland": ("dutch",), "wales": ("welsh",), "switzerland": ("swiss",),
    "denmark": ("danish", "dane", "danes"), "sweden": ("swedish", "swede", "swedes"),
    "finland": ("finnish", "finn", "finns"), "poland": ("polish", "pole", "poles"),
    "turkey": ("turkish", "turk", "turks"), "greece": ("greek", "greeks"), "ireland": ("irish",),
    "scotland": ("scottish", "scot", "scots"), "england": ("english",), "britain": ("british", "briton", "britons", "brits"),
    "uk": ("british", "briton", "britons", "brits"), "iceland": ("icelandic", "icelander"),
    "thailand": ("thai", "thais"), "philippines": ("filipino", "filipinos", "philippine"),
    "peru": ("peruvian",), "norway": ("norwegian", "norwegians"), "portugal": ("portuguese",),
    "germany": ("german", "germans"), "china": ("chinese",), "japan": ("japanese",), "vietnam": ("vietnamese",),
    "lebanon": ("lebanese",), "sudan": ("sudanese",), "congo": ("congolese",), "senegal": ("senegalese",),
    "madagascar": ("malagasy",), "cyprus": ("cypriot", "cypriots"), "monaco": ("monegasque",),
    "belgium": ("belgian", "belgians"), "israel": ("israeli", "israelis"), "iraq": ("iraqi", "iraqis"),
    "pakistan": ("pakistani", "pakistanis"), "bangladesh": ("bangladeshi",), "yemen": ("yemeni",),
    "kuwait": ("kuwaiti",), "oman": ("omani",), "qatar": ("qatari",), "saudi": ("saudis",),
    "afghanistan": ("afghan", "afghans"), "new zealand": ("kiwi", "kiwis"), "us": ("american", "americans"),
    "usa": ("american", "americans"), "united states": ("american", "americans"),
    "czech republic": ("czech",), "slovakia": ("slovak",), "croatia": ("croatian", "croat", "croats"),
    "serbia": ("serbian", "serb", "serbs"), "bosnia": ("bosnian",), "uzbekistan": ("uzbek",),
    "kazakhstan": ("kazakh",), "tajikistan": ("tajik",), "kyrgyzstan": ("kyrgyz",), "ivory coast": ("ivorian",),
    "argentina": ("argentine", "argentinian"), "brazil": ("brazilian",), "chile": ("chilean",),
    "mexico": ("mexican",), "cuba": ("cuban",), "haiti": ("haitian",), "egypt": ("egyptian",),
    "el salvador": ("salvadoran",), "costa rica": ("costa rican",), "somalia": ("somali",),
}
_DEMONYM_OF = {d: p for p, ds in DEMONYMS.items() for d in ds}

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
#: Anonymisation placeholders ("XXXX", "[NAME]" reads as "name" and is generic enough): no anchor.
_PLACEHOLDER = re.compile(r"(.)\1{2,}")
#: An acronym alone ("CNN", "PhDs", "NLP"): expanded in too many ways ("convolutional network",
#: "ConvNet") to call it missing; never an anchor by itself.
_ACRONYM = re.compile(r"(?:(?:[A-Z][A-Za-z]?){1,3}[A-Z]s?|[A-Z][a-z][A-Z]s?)(?:-\d+)?")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
#: A clock time: "10:30", "10:30:15", "10.30am" (a dot only with am/pm: "12.50" is an amount),
#: "5 pm", "5 p.m.".
_TIME = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s*[ap]\.?m\.?(?![a-z])|\s*h\b)?|\b\d{1,2}\.\d{2}\s*[ap]\.?m\.?(?![a-z])"
                   r"|\b\d{1,2}\s*[ap]\.?m\.?(?![a-z])", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(\d{4})[-/.](\d{1,2})[-/.](\d{1,2})\b")
_NUM_DATE = re.compile(r"\b(\d{1,2})[-/.](\d{1,2})[-/.](\d{2,4})\b")


def fold(text: str) -> str:
    """``text`` lower-cased with accents dropped (NFKD, combining marks removed), dotted
    initials joined ("U.S." -> "us") and typographic apostrophes made plain."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(ch for ch in t if not unicodedata.combining(ch))
    t = t.replace("\u2019", "'").replace("\u2018", "'")
    t = re.sub(r"\b([A-Za-z](?:\.[A-Za-z])+\.?)(?![A-Za-z])", lambda m: m.group(1).replace(".", "") + " ", t)
    return t.lower()


_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS_W = "twenty thirty forty fifty sixty seventy eighty ninety".split()
_ORDINALS = ("zeroth first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth "
             "fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth").split()
#: Spelled numbers up to this value are not anchors: a summary counts what the documents list
#: ("two friends", "three options") without the documents saying the number.
SMALL_SPELLED = 10


def number_words(n: int) -> tuple[str, ...]:
    """The words that write integer ``n`` (0..99) in a document: its cardinal ("twelve",
    "twenty-five" -> the last word "five" is not enough, so the tens word and the unit) and, up
    to twenty, its ordinal ("second"); ``()`` outside 0..99."""
    if not 0 <= n <= 99:
        return ()
    out = [_ONES[n]] if n < 20 else [_TENS_W[n // 10 - 2] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])]
    if n <= 20:
        out.append(_ORDINALS[n])
    if n == 1:
        out.append("single")
    return tuple(out)


def _time_key(text: str) -> tuple[int, int] | None:
    """``(hour mod 12, minute)`` of a clock time ("10:30 am", "10.30am", "22:30", "5 pm"), so
    12- and 24-hour writings meet; None when it does not read as a time."""
    m = re.match(r"(\d{1,2})(?:[:.](\d{2}))?", text.strip())
    if not m:
        return None
    h, mi = int(m.group(1)), int(m.group(2) or 0)
    if h > 24 or mi > 59:
        return None
    return h % 12, mi


_UNIT_AFTER = re.compile(r"[ \t\u00a0]*(?:(\u00b0[ ]?[CF])(?![A-Za-z])|degrees?[ ]+(celsius|fahrenheit)\b"
                         r"|(?:square|sq\.?)[ ]+([a-z]+)\b|([A-Za-z]+)\b)", re.IGNORECASE)


def unit_after(text: str, end: int) -> str | None:
    """The unit word right after a number ending at ``end`` -- one that
    :func:`verifiers.arithmetic._units.unit_info` knows and pint converts (length, mass, volume,
    temperature, time, area; "°C" / "degrees Celsius" -> ``celsius``, "square metres" ->
    ``metres^2``), else ``None`` (money, counts, unknown words)."""
    from verifiers.arithmetic._units import unit_info

    m = _UNIT_AFTER.match(text, end)
    if m is None:
        return None
    if m.group(1):
        return "celsius" if m.group(1)[-1] in "cC" else "fahrenheit"
    if m.group(2):
        return m.group(2).lower()
    if m.group(3):
        info = unit_info(m.group(3))
        return f"{m.group(3).lower()}^2" if info is not None and info[1] == "length" else None
    w = m.group(4).lower()
    info = unit_info(w)
    return w if info is not None and not info[1].startswith("money") and info[1] != "count" else None


def _stem(w: str) -> str:
    return w[:STEM] if len(w) >= STEM else w


@dataclass(frozen=True, slots=True)
class Anchor:
    """One checkable detail of a sentence: ``kind`` (``number`` | ``datepart`` (day or month
    of a numeric date) | ``time`` (a clock time) | ``month`` | ``entity``),
    ``text`` as written, ``quantity`` for numbers."""

    kind: str
    text: str
    quantity: Quantity | None = None
    unit: str | None = None  # the unit word after a number (:func:`unit_after`), for conversions


class Documents:
    """The supplied documents, indexed for :meth:`has` (built once per request).

    Args:
        texts: the documents' texts (the request's non-assistant messages).
    """

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = [t for t in texts if isinstance(t, str) and t.strip()]
        self.text = "\n\n".join(self.texts)

    def build(self) -> "Documents":
        """Build every index now (word sets, stems, initials, numbers, months, times) and return
        self: CPU work linear in the documents' length, for a worker thread, so that :meth:`has`
        is only set lookups on the event loop."""
        for name in ("_word_set", "_stems", "_initials", "_numbers", "_operands", "_unit_values", "_months", "_times"):
            getattr(self, name)
        return self

    @property
    def enough(self) -> bool:
        """True when there is at least :data:`MIN_DOC_CHARS` of document text."""
        return len(self.text.strip()) >= MIN_DOC_CHARS

    @cached_property
    def _folded(self) -> str:
        return fold(self.text)

    @cached_property
    def _words(self) -> list[str]:
        return [w.removesuffix("'s") for w in _WORD.findall(self._folded)]

    @cached_property
    def _word_set(self) -> frozenset[str]:
        return frozenset(self._words)

    @cached_property
    def _stems(self) -> frozenset[str]:
        return frozenset(_stem(w) for w in self._words if not w.isdigit())

    @cached_property
    def _initials(self) -> frozenset[str]:
        ws = [w for w in self._words if w.isalpha()]
        out = set()
        for i in range(len(ws)):
            acc = ""
            for j in range(i, min(i + 6, len(ws))):
                acc += ws[j][0]
                if j > i:
                    out.add(acc)
        # initials of content words only ("United Nations" and "the United Nations of ...")
        cw = [w for w in ws if w not in STOP]
        for i in range(len(cw)):
            acc = ""
            for j in range(i, min(i + 6, len(cw))):
                acc += cw[j][0]
                if j > i:
                    out.add(acc)
        return frozenset(out)

    @cached_property
    def _numbers(self) -> list[Quantity]:
        return numbers(self.text) + numbers(self._folded) + cjk_numbers(self.text) + fraction_percents(self._folded)

    @cached_property
    def _times(self) -> frozenset[tuple[int, int]]:
        return frozenset(k for k in (_time_key(m.group(0)) for m in _TIME.finditer(self.text)) if k is not None)

    @cached_property
    def _months(self) -> frozenset[int]:
        out = {i + 1 for i, m in enumerate(MONTHS) if re.search(r"\b" + m[:3], self._folded)}
        for m in _ISO_DATE.finditer(self.text):
            out.add(int(m.group(2)))
        for m in _NUM_DATE.finditer(self.text):
            out.update((int(m.group(1)), int(m.group(2))))
        return frozenset(x for x in out if 1 <= x <= 12)

    @cached_property
    def _unit_values(self) -> list[tuple[float, str]]:
        """``(value, unit word)`` of every document number followed by a unit (:func:`unit_after`)."""
        return [(q.value, u) for q in numbers(self.text) if (u := unit_after(self.text, q.end)) is not None]

    def _converts_to(self, q: Quantity, unit: str) -> bool:
        """True when a document figure in another unit of the same dimension, converted to
        ``unit`` (pint, :func:`verifiers.arithmetic._units.convert`), is ``q`` rounded to the
        precision it is written with: "1,083 feet" over "330 metres", "104 °F" over "40 °C"."""
        from fractions import Fraction

        from verifiers.arithmetic._units import convert, unit_info

        want = unit_info(unit)
        if want is None:
            return False
        for v, u in self._unit_values:
            have = unit_info(u)
            if u == unit or have is None or have[1] != want[1]:
                continue
            c = convert(Fraction(str(v)), u, unit)
            if c is not None and q.rounds_to(dataclasses.replace(q, value=c), loose=False):
                return True
        return False

    @cached_property
    def _operands(self) -> dict[str, list[float]]:
        """The documents' quantities as :func:`operands` of :meth:`derivable`."""
        return operands(self._numbers)

    def derivable(self, q: Quantity) -> bool:
        """True when ``q`` is one arithmetic step from two document quantities
        (:func:`derivable`) and there is enough document text to ground anything."""
        return self.enough and derivable(q, self._operands)

    def has_word(self, w: str, initials: bool = False) -> bool:
        """True when word ``w`` (folded) or a variant of it occurs in the documents (see module
        doc: stem, demonym, the German transliteration of umlauts: "Mueller" for "Müller"; with
        ``initials`` -- the word was written in capitals, "UK" -- also the initials of
        consecutive document words)."""
        plain = re.sub(r"([aou])e", r"\1", w) if w.isalpha() else w
        if plain != w and plain in self._word_set:
            return True
        if w in self._word_set or (w.endswith("s") and w[:-1] in self._word_set) or w + "s" in self._word_set:
            return True
        if len(w) >= STEM + 1 and not w.isdigit() and _stem(w) in self._stems:
            return True
        place = _DEMONYM_OF.get(w)
        if place is not None and all(p in self._word_set for p in place.split()):
            return True
        if w in DEMONYMS and any(d in self._word_set for d in DEMONYMS[w]):
            return True
        return initials and 2 <= len(w) <= 6 and w.isalpha() and w in self._initials

    def has(self, a: Anchor) -> bool:
        """True when the documents state anchor ``a`` (after normalisation, module doc)."""
        if a.kind == "number" and a.quantity is not None:
            q = a.quantity
            if a.text.isalpha() and a.text.lower() in self._word_set:  # "ten" of "ten-pin"
                return True
            if any(q.rounds_to(d) or d.rounds_to(q) for d in self._numbers):
                return True
            if a.unit is not None and self._converts_to(q, a.unit):
                return True
            # a number written in words in the documents ("number one", "twelve fifty" for 12.50,
            # "second" for 2nd): the integer part, spelled
            if q.kind in ("number", "currency") and q.value < 100:
                return any(all(p in self._word_set for p in w.split("-"))
                           for w in number_words(int(q.value)))
            return False
        if a.kind == "time":
            key = _time_key(a.text)
            if key is None or key in self._times:
                return True
            hour = Quantity(float(key[0] or 12), "number", 0, 0, False, 0, 0, str(key[0] or 12))
            # "at five" / "5 o'clock" for 5:00 pm: the hour alone, when the minutes are zero
            return key[1] == 0 and self.has(Anchor("number", hour.text, hour))
        if a.kind == "datepart" and a.quantity is not None:  # either reading of d/m and m/d
            v = a.quantity.value
            return (v in self._months) or any(d.value == v for d in self._numbers)
        if a.kind == "month":
            m = month_of(a.text)
            return m is None or m in self._months
        kept = [t for t in a.text.split() if not _ACRONYM.fullmatch(t.replace(".", "").removesuffix("'s"))]
        if not kept:
            return True
        caps = {w for t in kept if t.replace(".", "").isupper() for w in _WORD.findall(fold(t))}
        words = [w.removesuffix("'s") for w in _WORD.findall(fold(" ".join(kept)))]
        words = [w for w in words if w not in STOP and w not in GENERIC and not w.isdigit()]
        if len(words) >= 2 and "".join(w[0] for w in words) in self._word_set:  # "LA" for "Los Angeles"
            return True
        return not words or any(self.has_word(w, initials=w in caps) for w in words)

    def states(self, a: Anchor) -> bool:
        """Like :meth:`has`, but a name must occur *whole*: every word of it that is no title
        or generic word ("Southwind Traders" is not stated by "Northwind Traders", "Marie Smith"
        not by "Marie Dubois"). :meth:`has` reads a name as present when any of its words is
        (grounding fails a claim on an absent name, so it is lenient); a passage that *supports*
        a claim must state the name itself (docs/design.md "Asymmetric trust")."""
        if a.kind != "entity" or not self.has(a):
            return self.has(a)
        kept = [t for t in a.text.split() if not _ACRONYM.fullmatch(t.replace(".", "").removesuffix("'s"))]
        caps = {w for t in kept if t.replace(".", "").isupper() for w in _WORD.findall(fold(t))}
        words = [w.removesuffix("'s") for w in _WORD.findall(fold(" ".join(kept)))]
        words = [w for w in words if w not in STOP and w not in GENERIC and not w.isdigit()]
        if len(words) >= 2 and "".join(w[0] for w in words) in self._word_set:  # "LA" for "Los Angeles"
            return True
        return all(self.has_word(w, initials=w in caps) for w in words)


_CJK_NUM = re.compile(r"(?<=[\u3400-\u9fff])\d+(?:\.\d+)?|\d+(?:\.\d+)?(?=[\u3400-\u9fff])")
_LATIN_NAME = re.compile(r"(?<![A-Za-z])[A-Z][A-Za-z'&.-]*[A-Za-z](?:\s+[A-Z][A-Za-z'&.-]*[A-Za-z])*")


_DENOM = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4, "fourths": 4,
          "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "eighth": 8, "eighths": 8, "tenth": 10, "tenths": 10}
_SMALL = {w: i for i, w in enumerate(_ONES)} | {"a": 1, "an": 1, "hundred": 100}
_FRACTION = re.compile(r"\b(a|an|one|two|three|four|five|six|seven|eight|nine)[- ](" + "|".join(_DENOM) + r")\b"
                       r"|\b(half)\b"
                       r"|\b(\d{1,3}|" + "|".join(_ONES[1:]) + r")\s+(?:in|out\s+of)\s+(?:every\s+)?(\d{1,3}|"
                       + "|".join(_ONES[2:]) + r"|hundred)\b")


def fraction_percents(folded: str) -> list[Quantity]:
    """The shares a folded text states in words, as percents: "two-fifths" (40 %), "a quarter"
    (25 %), "half" (50 %), "one in four" / "3 out of 5" (25 %, 60 %). A summary writes the
    same share as "40%": the documents state it (:meth:`Documents.has`)."""
    out: list[Quantity] = []
    for m in _FRACTION.finditer(folded):
        if m.group(2):
            num, den = _SMALL[m.group(1)], _DENOM[m.group(2)]
        elif m.group(3):
            num, den = 1, 2
        else:
            a, b = m.group(4), m.group(5)
            num = int(a) if a.isdigit() else _SMALL[a]
            den = int(b) if b.isdigit() else _SMALL[b]
        if 0 < num <= den:
            out.append(Quantity(100.0 * num / den, "percent", 6, 0, False, m.start(), m.end(), m.group(0)))
    return out


def cjk_numbers(text: str) -> list[Quantity]:
    """Digits written against CJK characters ("有900名"), which :func:`numbers` (word-bounded)
    does not read, as plain quantities. A number followed by a CJK scale character (万, 亿...)
    is left out: its value is not the digits."""
    out = []
    for m in _CJK_NUM.finditer(text):
        if re.match(r"[\u4e07\u842c\u4ebf\u5104\u5343\u767e\u5146]", text[m.end():m.end() + 1]):
            continue
        raw = m.group(0)
        dec = len(raw.split(".")[1]) if "." in raw else 0
        zeros = 0 if dec else len(raw) - len(raw.rstrip("0")) if raw.strip("0") else 0
        out.append(Quantity(float(raw), "number", dec, zeros, False, m.start(), m.end(), raw))
    return out


def anchors(sentence: str) -> list[Anchor]:
    """The anchors of ``sentence`` (module doc), in text order. Numbers whose reading is
    uncertain (:func:`verifiers.facts._text.vagueness`: locale formats, foreign scale words) are
    left out: what cannot be read cannot be missing."""
    out: list[tuple[int, Anchor]] = []
    if _CJK.search(sentence):  # Chinese / Japanese text: digits and Latin names only
        for q in numbers(sentence) + cjk_numbers(sentence):
            out.append((q.start, Anchor("number", q.text.strip(), q)))
        for m in _LATIN_NAME.finditer(sentence):
            if not _ACRONYM.fullmatch(m.group(0)):
                out.append((m.start(), Anchor("entity", m.group(0))))
        return [a for _, a in sorted(out, key=lambda x: x[0])]
    dates = [m.span() for rx in (_ISO_DATE, _NUM_DATE) for m in rx.finditer(sentence)]
    times = []
    for m in _TIME.finditer(sentence):
        times.append(m.span())
        out.append((m.start(), Anchor("time", m.group(0).strip())))
    for q in numbers(sentence):
        if q.vague in ("format", "scale"):
            continue
        glued = re.match(r"[A-Za-z]+", sentence[q.end:q.end + 4])
        if glued and glued.group(0).lower() not in ("st", "nd", "rd", "th"):
            continue  # "4Q", "3D", "5G": part of a name or code, not a quantity
        if re.search(r"[A-Za-z]-?$", sentence[max(0, q.start - 2):q.start]) and not q.text[:1].isalpha():
            continue  # "COVID-19", "F-16", "A4": a name's number
        if q.text.strip().isalpha() and q.value <= SMALL_SPELLED:
            continue
        if any(a <= q.start < b for a, b in times):
            continue  # part of a clock time: compared as a time below
        if any(a <= q.start < b for a, b in dates) and q.kind != "year":
            out.append((q.start, Anchor("datepart", q.text.strip(), q)))  # day or month of "3/5/2021"
            continue
        out.append((q.start, Anchor("number", q.text.strip(), q, unit_after(sentence, q.end))))
    for text, s, _ in entities(sentence):
        if _ACRONYM.fullmatch(text.replace(".", "")):
            continue
        words = [w for w in _WORD.findall(fold(text)) if w not in STOP and not _PLACEHOLDER.fullmatch(w)]
        if not words or all(w in GENERIC or w.isdigit() or len(w) < 2 for w in words):
            continue
        mon = [w for w in text.split() if month_of(w)]
        if mon and len(text.split()) == len(mon):
            out.append((s, Anchor("month", text)))
            continue
        out.append((s, Anchor("entity", text)))
    return [a for _, a in sorted(out, key=lambda x: x[0])]



def operands(nums: Iterable[Quantity]) -> dict[str, list[float]]:
    """Plain quantities by kind (``currency``, ``number``, ``percent``; years and locale- or
    scale-ambiguous readings left out), each list deduplicated and cut at
    :data:`MAX_OPERANDS`: the operands of :func:`derivable`."""
    out: dict[str, list[float]] = {"currency": [], "number": [], "percent": []}
    for d in nums:
        vals = out.get(d.kind)
        if vals is not None and d.vague in ("", "range") and d.value not in vals and len(vals) < MAX_OPERANDS:
            vals.append(d.value)
    return out


#: Words that say a sentence works a figure out (a change, a total, a share, a remainder, a
#: comparison): only in such a sentence is a number one step from the documents' figures read
#: as worked out (:func:`derivable`) -- elsewhere a small count is too easily "derivable" from
#: a document's many figures, and a miss would hide an invented one.
WORKED_OUT = re.compile(
    r"\b(?:ris(?:e|es|en|ing)|rose|gr(?:ew|ow|ows|own|owth|owing)|gain\w*|increas\w*|decreas\w*|declin\w*|"
    r"drop\w*|f[ae]ll(?:s|en|ing)?|cut|reduc\w*|lower|higher|more|less|fewer|total\w*|combined|sum|"
    r"together|altogether|overall|differen\w*|gap|net|remain\w*|rest|other|not|excluding|without|share|"
    r"margin|chang\w*|compared|than|sav(?:e|es|ed|ing|ings)|difference|(?:up|down)\s+(?:from|by)|jump\w*|climb\w*|slid|"
    r"shr[iau]nk\w*|doubl\w*|half|halved|ratio|proportion|percentage|average)\b|[-+]\s*\d",
    re.IGNORECASE)


def derivable(q: Quantity, ops: dict[str, list[float]]) -> bool:
    """True when ``q`` is one arithmetic step from two quantities of ``ops`` (:func:`operands`),
    to the precision ``q`` is written with (strict rounding, :meth:`Quantity.rounds_to`): the
    sum or difference of two amounts or counts of its kind; for a percent the complement ``100 -
    p``, the difference of two percents (points), or the share ``a / b`` or change ``(a - b) /
    b`` of two amounts or counts. A summary that works out "revenue rose by $0.3 million", "grew
    7.7%" or "totalled $8.1 million" from "$4.2 million" and "$3.9 million" states no detail the
    documents lack and contradicts nothing: such a number is neither *ungrounded* nor a
    contradiction of the figures it was computed from -- nor is it *stated*, so no passage
    supports it either (it stays ``unknown``). False alarms cost more than misses
    (docs/design.md "False alarms cost more than misses").
    O(:data:`MAX_OPERANDS` squared)."""
    if q.vague not in ("", "range") or q.kind not in ("currency", "number", "percent"):
        return False

    def hit(v: float) -> bool:
        return q.rounds_to(dataclasses.replace(q, value=v), loose=False)

    if q.kind in ("currency", "number"):
        vals = ops[q.kind]
        return any(hit(a + b) or hit(abs(a - b)) for i, a in enumerate(vals) for b in vals[i + 1:])
    pcts = ops["percent"]
    if any(hit(100.0 - p) for p in pcts) or any(hit(abs(a - b)) for i, a in enumerate(pcts) for b in pcts[i + 1:]):
        return True
    for kind in ("currency", "number"):
        vals = ops[kind]
        for a in vals:
            for b in vals:
                if a != b and b and (hit(100.0 * a / b) or hit(100.0 * abs(a - b) / b)):
                    return True
    return False

def missing(sentence: str, docs: Documents) -> list[Anchor]:
    """The anchors of ``sentence`` that ``docs`` do not contain, nor derive in one arithmetic
    step (:meth:`Documents.derivable`, in a sentence that says it works a figure out:
    :data:`WORKED_OUT`); ``[]`` when the documents are too short to ground
    anything (:attr:`Documents.enough`)."""
    if not docs.enough:
        return []
    worked = WORKED_OUT.search(sentence) is not None
    return [a for a in anchors(sentence) if not docs.has(a)
            and not (worked and a.kind == "number" and a.quantity is not None and docs.derivable(a.quantity))]
