"""Polarity: does a passage *state* a claim, or repeat it to deny, doubt or attribute it?

A passage that contains a claim's words is support only when it asserts them. Fact-checking
treats a sentence that repeats a claim in order to reject it as evidence *against* it: FEVER's
REFUTES class (Thorne et al., NAACL 2018) and the claim-review convention of fact-checkers
("Rumours claim X; this is false"), and the attribution literature separates "X said Y" from Y
(Rashkin et al., "Measuring Attribution in Natural Language Generation Models", Computational
Linguistics 2023: a quoted or reported statement is evidence that it was said, not that it is
true; likewise hedges and reported speech in factuality annotation, Saurí & Pustejovsky,
"FactBank", LRE 2009: *allegedly*, *reportedly*, *may* lower a statement's factuality). This
module reads the words *around* the part of a passage that matches a claim and returns its
:class:`Stance`:

* ``denies`` -- the passage repeats the claim to reject it. English markers, scoped to the
  claim: a prefix right before it (:data:`DENY_PREFIX`: "it is not true that", "contrary to
  claims that" (not "contrary to popular belief, X", which asserts X),
  "wrongly / falsely / mistakenly said", "denied that", "the myth that"), or a suffix right after
  it, possibly in the next sentence when that sentence opens with an anaphor
  (:data:`DENY_SUFFIX`: "is false", "is a (common) misconception", "was denied", "; this is
  false", ". That is a rumour"). Chinese markers in the same sentence (:data:`DENY_ZH`: 谣言 as a
  verdict, 误传, 否认, 辟谣, 不实, 并非事实...), and 不是 / 并非 / 没有 / 从未 before or inside the
  claim's part (a plain negation after it is about something else: "900名，不是800名").
* ``doubts`` -- hedged or rumoured anywhere in the sentence (:data:`DOUBT`, :data:`DOUBT_ZH`:
  allegedly, reportedly, rumours, unconfirmed, may / might / could, 据称, 据说, 传闻, 可能...).
* ``attributes`` -- someone's words (:data:`ATTRIBUTION`, :data:`ATTRIBUTION_ZH`: "X said",
  "according to", "claimed", 表示, 声称; or the claim's part inside quotation marks), a claim
  named in a noun's complement ("the statement that X", "the claim that X", 所谓X的说法), or
  text about checking it ("X is verified", "treat X as supported", 核实): such a passage is
  about the statement, it does not make it.
* ``asserts`` -- none of these.

A marker the claim itself carries is discounted ("Rumours claim X" is supported by a passage
saying "Rumours claim X"; "The CEO said X" by "X, the CEO said"). Denial outranks doubt, doubt
outranks attribution. Only ``denies`` ever fails a claim; ``doubts`` and ``attributes`` only
withhold support (docs/design.md "False alarms cost more than misses"), so the denial markers are
narrow and scoped while the others read the whole sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Stance", "stance_of", "DENY_PREFIX", "DENY_SUFFIX", "DOUBT", "ATTRIBUTION", "DENY_ZH", "NEGATION_ZH",
           "DOUBT_ZH", "ATTRIBUTION_ZH", "has_cjk"]

_SAY = (r"(?:said|says|say|claimed|claims|claim|reported|reports|stated|suggested|suggests|believed|believe|"
        r"assumed|thought|asserted|alleged|wrote|writes|described|listed|named|identified|credited|attributed|"
        r"called|labell?ed|portrayed|implied|printed|published)")
#: Denial right before the claim ("<marker> <claim>"). Sources: FEVER REFUTES constructions, the
#: claim-review phrasing of fact-checkers.
DENY_PREFIX = re.compile(
    r"\b(?:it\s+is|it's|it\s+was|it\s+has\s+been|that\s+is)\s+(?:simply\s+|just\s+)?(?:not\s+true|untrue|false|not\s+the\s+case|"
    r"incorrect|wrong|a\s+myth|a\s+(?:common\s+|popular\s+|widespread\s+)?misconception|a\s+rumou?r|fake\s+news)\s+that\b"
    r"|\bcontrary\s+to\s+(?:the\s+)?(?:popular\s+|widespread\s+|common\s+|earlier\s+|some\s+|many\s+|media\s+)?(?:belief|"
    r"claims?|reports?|rumou?rs?|perceptions?|assumptions?|myths?)\s+that\b"
    r"|\b(?:wrongly|falsely|incorrectly|mistakenly|erroneously|inaccurately|untruthfully)\s+(?:\w+\s+){0,2}?" + _SAY +
    r"(?:\s+that)?"
    r"|\b(?:denied|denies|deny|denying|refuted|refutes|refute|rejected|rejects|dismissed|dismisses|debunked|debunks|"
    r"disproved|disproves|disputed|disputes|dispelled)\s+(?:the\s+|any\s+|all\s+|a\s+)?(?:(?:claims?|reports?|rumou?rs?|"
    r"suggestions?|allegations?|stor(?:y|ies)|ideas?|notions?|assertions?|speculation|myths?)\s+)?that\b"
    r"|\b(?:the|a|this|that|common|popular|widespread)\s+(?:myth|misconception|false\s+(?:claim|belief|idea|notion|report|"
    r"story|statement|impression)|hoax|falsehood|fabrication|misunderstanding|mistaken\s+belief)\s+that\b"
    r"|\bthere\s+is\s+no\s+truth\s+(?:in|to)\s+(?:the\s+|any\s+)?(?:claims?|reports?|rumou?rs?|ideas?|suggestions?|"
    r"stor(?:y|ies))(?:\s+that)?"
    r"|\b(?:myth|false|untrue|fake|fiction)\s*:\s*",
    re.IGNORECASE)
_ANAPHOR = (r"(?:this|that|which|it|these|those|such\s+(?:claims?|reports?|rumou?rs?|stories)|the\s+(?:claim|claims|"
            r"story|stories|rumou?r|rumou?rs|report|reports|idea|notion|assertion|allegation|allegations|statement|"
            r"suggestion|account|belief)|(?:this|that|these|those)\s+(?:claim|claims|story|stories|rumou?r|rumou?rs|"
            r"report|reports|idea|notion|assertion|allegations?|statement|suggestion|account|belief)s?)")
_FALSE = (r"(?:false|untrue|not\s+true|not\s+correct|incorrect|wrong|baseless|groundless|unfounded|fake|fabricated|"
          r"(?:a\s+|an\s+)?(?:complete\s+|total\s+|pure\s+|outright\s+)?(?:fabrication|fiction|invention|falsehood|hoax|lie)|"
          r"(?:a\s+)?(?:common\s+|popular\s+|widespread\s+|persistent\s+|urban\s+)?(?:myth|misconception|misunderstanding|"
          r"legend)s?|debunked|denied|refuted|disproven|disproved|dismissed|rejected|(?:just\s+|only\s+|merely\s+|nothing\s+"
          r"but\s+)?(?:a\s+|an\s+)?(?:\w+\s+)?rumou?rs?)")
#: Denial right after the claim ("<claim> is false", "<claim>; this is a myth", "<claim> was
#: denied"), possibly as the next sentence opening with an anaphor ("... . This is false.").
#: Used with ``match(text, pos)`` (anchored at ``pos``; no ``^``, which only matches at 0).
DENY_SUFFIX = re.compile(
    r"[\s,;:\u2014\u2013-]*(?:(?:[.;!]\s*|,\s*|\u2014\s*)?(?:but\s+|however,?\s+)?" + _ANAPHOR + r"\s+)?"
    r"(?:is|was|are|were|has\s+been|have\s+been|had\s+been|remains?|proved|proven\s+to\s+be|turned\s+out\s+to\s+be|"
    r"is\s+(?:simply|just|widely\s+(?:seen|regarded)\s+as|considered)|was\s+later)\s+(?:\w+\s+){0,2}?" + _FALSE + r"\b"
    r"|[\s,;:\u2014\u2013-]*(?:[.;!]\s*)?" + _ANAPHOR + r"\s+(?:has\s+been|was|were|have\s+been)\s+(?:\w+\s+)?"
    r"(?:denied|debunked|refuted|disproven|disproved|retracted|corrected|withdrawn)\b"
    r"|[\s,;:\u2014\u2013-]*(?:[.;!]\s*)?(?:but\s+)?(?:this|that|it)\s+is\s+not\s+(?:so|true|the\s+case|correct)\b",
    re.IGNORECASE)
#: Hedges and rumour words anywhere in the sentence (FactBank's uncertain factuality cues).
DOUBT = re.compile(
    r"\b(?:allegedly|alleged|reportedly|supposedly|purportedly|ostensibly|apparently|seemingly|rumou?r(?:s|ed)?|"
    r"unconfirmed|unverified|unsubstantiated|speculat\w*|hearsay|gossip|may|might|could|possibly|perhaps|maybe|"
    r"probably|likely|unlikely|uncertain|unclear|doubt\w*|dubious|questionable|no\s+evidence|whether|if|"
    r"it\s+is\s+(?:said|claimed|believed|alleged|thought|reported|rumou?red|understood)\s+that|"
    r"is\s+(?:said|claimed|believed|alleged|thought|rumou?red)\s+to)\b",
    re.IGNORECASE)
#: Reported speech: someone's words, not the passage's own statement (Rashkin et al. 2023).
ATTRIBUTION = re.compile(
    r"\b(?:said|says|say|told|tells|claimed|claims|claim|wrote|writes|argued|argues|insisted|insists|asserted|"
    r"asserts|contended|contends|maintained|maintains|alleged|alleges|stated|quoted|quoting|tweeted|posted|"
    r"believes|believed|thinks|according\s+to|in\s+the\s+words\s+of|as\s+\w+\s+put\s+it)\b"
    # a claim embedded in a noun's complement: "the statement that X", "the claim that X" names a
    # proposition, it does not assert it (Huddleston & Pullum, CGEL ch. 11 "content clauses")
    r"|\b(?:the|a|an|this|that|any|its|their|his|her)\s+(?:\w+\s+)?(?:statement|claim|assertion|idea|notion|"
    r"report|suggestion|allegation|story|belief|view|hypothesis|theory|premise|proposition|sentence|answer|"
    r"example|impression|perception|speculation|expectation|assumption)s?\s+that\b"
    # talk about checking or grading a statement ("... is verified", "treat X as supported",
    # "note to the verifier"): text addressed to a checker, not a statement of the fact
    r"|\bverif(?:y|ied|ies|ying|ier|iers|ication)\b|\bfact[- ]?check\w*|\bas\s+(?:true|supported|"
    r"correct|verified|accurate|a\s+fact)\b|\b(?:is|are|was|were)\s+(?:fully\s+)?supported\b",
    re.IGNORECASE)
_QUOTES = {"\"": "\"", "\u201c": "\u201d", "\u00ab": "\u00bb", "\u300c": "\u300d", "\u300e": "\u300f",
           "\u2018": "\u2019"}

#: Chinese denial markers anywhere in the sentence (辟谣 convention: "X是谣言", "X系误传").
DENY_ZH = re.compile(r"是谣言|系谣言|纯属谣言|为谣言|谣言[。，,.]?$|误传|否认|辟谣|不实|不属实|并非事实|不是事实|不是真的|"
                     r"并不真实|是假的|为假|虚假|纯属虚构|子虚乌有|毫无根据|站不住脚|以讹传讹|错误地(?:称|说|报道|认为|写)|"
                     r"(?:说法|传言|报道|消息)(?:是)?错误的?")
#: Chinese plain negation: a denial only before or inside the claim's part.
NEGATION_ZH = re.compile(r"不是|并非|并不|从未|从来没有|没有|未曾|绝非|决非")
#: Chinese hedges and rumour words.
DOUBT_ZH = re.compile(r"据称|据说|据传|传闻|传言|谣言|谣传|听说|可能|或许|也许|大概|疑似|未经证实|尚未证实|尚不清楚|有待证实|"
                      r"是否|似乎|好像|恐怕|估计")
#: Chinese reported speech.
ATTRIBUTION_ZH = re.compile(r"表示|声称|宣称|称|指出|认为|写道|说道|说|据.{1,12}?(?:报道|消息|介绍)|援引|引述|"
                            r"的说法|这一说法|该说法|所谓|核实|验证")
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a CJK ideograph (the Chinese markers apply)."""
    return bool(_CJK.search(text))


@dataclass(frozen=True, slots=True)
class Stance:
    """How a passage treats a claim it contains: ``stance`` (``asserts`` | ``denies`` |
    ``doubts`` | ``attributes``), ``marker`` (the words that decided it, ``""`` for
    ``asserts``), ``where`` (``prefix`` | ``suffix`` | ``sentence`` | ``quote`` | ``""``)."""

    stance: str
    marker: str = ""
    where: str = ""

    @property
    def asserts(self) -> bool:
        """True when the passage states the claim as its own (support may rest on it)."""
        return self.stance == "asserts"


_ASSERTS = Stance("asserts")
#: Words between a prefix marker and the claim's part at most (a subject or determiner).
PREFIX_GAP_WORDS = 6
#: Words between the claim's part and a suffix marker at most.
SUFFIX_GAP_WORDS = 4


def _found(rx: re.Pattern[str], text: str) -> list[str]:
    return [m.group(0).strip().lower() for m in rx.finditer(text)]


def _own(marker: str, claim_markers: set[str]) -> bool:
    m = " ".join(marker.split())
    return any(m == c or m in c or c in m for c in claim_markers)


def _inside_quotes(text: str, start: int, end: int) -> str:
    """The quotation mark that encloses ``text[start:end]``, or ``""``."""
    for open_, close in _QUOTES.items():
        if open_ == close:
            if text[:start].count(open_) % 2 == 1 and open_ in text[end:]:
                return open_
            continue
        before = text[:start]
        if before.count(open_) > before.count(close) and close in text[end:]:
            return open_
    return ""


def _stance_zh(text: str, start: int, end: int, claim: str) -> Stance:
    for m in DENY_ZH.finditer(text):
        if m.group(0) not in claim:
            return Stance("denies", m.group(0), "sentence")
    for m in NEGATION_ZH.finditer(text):
        if m.start() < end and m.group(0) not in claim:
            return Stance("denies", m.group(0), "prefix" if m.start() < start else "sentence")
    for rx, stance in ((DOUBT_ZH, "doubts"), (ATTRIBUTION_ZH, "attributes")):
        for m in rx.finditer(text):
            if m.group(0) not in claim:
                return Stance(stance, m.group(0), "sentence")
    return _ASSERTS


def _suffixes(text: str) -> list[str]:
    """Every :data:`DENY_SUFFIX` match that starts at a word of ``text`` (lower case)."""
    out = []
    for w in re.finditer(r"(?:^|(?<=\s))\S", text):
        m = DENY_SUFFIX.match(text, w.start())
        if m and m.group(0).strip():
            out.append(m.group(0).strip().lower())
    return out


def stance_of(text: str, span: tuple[int, int] | None = None, claim: str = "") -> Stance:
    """The :class:`Stance` of ``text`` (one passage sentence, optionally followed by the next
    sentence) towards the claim whose words sit at ``text[span[0]:span[1]]``.

    Args:
        text: the passage sentence (and, for the anaphoric suffix, the sentence after it).
        span: where the claim's part is in ``text``; None: the whole of ``text`` (prefix markers
            then count anywhere before the end, suffix markers anywhere after the start).
        claim: the claim; markers it carries itself are discounted.

    Never raises for any str input; linear in ``len(text)`` (a few regular-expression scans).
    """
    text = text or ""
    start, end = span if span is not None else (0, len(text))
    start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
    if has_cjk(text):
        return _stance_zh(text, start, end, claim or "")
    own_deny = (set(_found(DENY_PREFIX, claim)) | set(_suffixes(claim))) if claim else set()
    # prefix: the marker ends within PREFIX_GAP_WORDS words before the claim's part, with no
    # sentence end between
    for m in DENY_PREFIX.finditer(text, 0, end if span is not None else len(text)):
        if span is not None:
            if m.end() > start + 1:
                if m.start() >= start:  # a marker inside the claim's part: the claim is quoted in it
                    if _own(m.group(0), own_deny):
                        continue
                    return Stance("denies", m.group(0).strip(), "prefix")
                continue
            gap = text[m.end():start]
            if re.search(r"[.;!?]\s", gap) or len(gap.split()) > PREFIX_GAP_WORDS:
                continue
        if _own(m.group(0).lower(), own_deny):
            continue
        return Stance("denies", m.group(0).strip(), "prefix")
    tail = text[end:] if span is not None else text
    gap_ok = lambda s: len(s.split()) <= SUFFIX_GAP_WORDS  # noqa: E731
    if span is not None:
        # the suffix begins within SUFFIX_GAP_WORDS words after the claim's part
        words = list(re.finditer(r"\S+", tail))
        starts = [0] + [w.start() for w in words[:SUFFIX_GAP_WORDS + 1]]
        for s0 in starts:
            if not gap_ok(tail[:s0]):
                break
            m = DENY_SUFFIX.match(tail, s0)
            if m and not re.search(r"[.;!?]\s", tail[:s0]) and not _own(m.group(0).strip().lower(), own_deny):
                return Stance("denies", m.group(0).strip(" ,;:.\u2014-"), "suffix")
    else:
        for mk in _suffixes(text):
            if not _own(mk, own_deny):
                return Stance("denies", mk.strip(" ,;:.\u2014-"), "suffix")
    # doubt and attribution: anywhere in the sentence of the claim (the first sentence of text)
    first = text
    cut = re.search(r"[.!?;](?:\s|$)", text[end:]) if span is not None else None
    if cut is not None:
        first = text[:end + cut.end()]
    claim_doubt = set(_found(DOUBT, claim))
    for m in DOUBT.finditer(first):
        if not _own(m.group(0).lower(), claim_doubt):
            return Stance("doubts", m.group(0).strip(), "sentence")
    claim_attr = set(_found(ATTRIBUTION, claim))
    if not claim_attr:
        for m in ATTRIBUTION.finditer(first):
            return Stance("attributes", m.group(0).strip(), "sentence")
        if span is not None and not any(q in claim for q in _QUOTES):
            q = _inside_quotes(first, start, end)
            if q:
                return Stance("attributes", q, "quote")
    return _ASSERTS
