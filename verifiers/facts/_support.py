"""Confirming a verifier model's ``supported`` at the words it quoted: the quote located in the
passage, the quoted sentence(s) stating the claim's numbers and names, agreeing on negation and
asserting it, and saying nothing against what the claim adds (:func:`confirm_support`;
docs/design.md "Asymmetric trust")."""

from __future__ import annotations

import re

from verifiers.facts._polarity import stance_of
from verifiers.facts._text import key_set, numbers, sentences
from verifiers.facts._clean import clean_text, strip_citation_markers
from verifiers.facts._lexicon import _ANAPHOR_START, _negated, _rival_name
from verifiers.facts._unstated import unstated_detail


_CJK_SENT = re.compile(r"[^。！？；!?;\n]+[。！？；!?;]?")
#: Share of a claim's key terms the quoted sentence must hold when the claim has no number or
#: name to confirm.
CONFIRM_KEYS = 0.5


def _passage_sentences(passage: str) -> list[tuple[int, int]]:
    from verifiers.facts._polarity import has_cjk

    if has_cjk(passage):
        return [(m.start(), m.end()) for m in _CJK_SENT.finditer(passage) if m.group(0).strip()]
    return list(sentences(passage))


def _locate_quote(quote: str, passage: str) -> tuple[int, int] | None:
    i = passage.find(quote)
    if i >= 0:
        return i, i + len(quote)
    low, q = passage.lower(), " ".join(quote.split()).lower().strip(" .\"'“”")
    i = low.find(q)
    if i >= 0:
        return i, i + len(q)
    if len(q) < 8:
        return None
    from rapidfuzz import fuzz

    al = fuzz.partial_ratio_alignment(q, low)
    if al is not None and al.score >= 90:
        return al.dest_start, al.dest_end
    return None






def confirm_support(claim: str, quote: str, passage: str) -> tuple[str, str]:
    """Does ``passage`` state ``claim``, at the words ``quote`` a verifier model cited as support?
    The deterministic check a model's ``supported`` verdict must pass (docs/design.md "Asymmetric
    trust": a pass rests on a passage that states the claim and does not deny, doubt or
    attribute it).

    The quoted sentence(s) -- the passage's sentences the quote touches -- must state every
    number and name of the claim (:func:`verifiers.facts._grounding.anchors`, normalised as
    there; for support the rest of the passage does not count: a model could otherwise quote
    one sentence and borrow the claim's year or city from another; a denial is read in the
    whole passage) -- or, for a claim with
    none, the quoted sentence(s) must hold :data:`CONFIRM_KEYS` of its key terms -- the quoted
    sentence(s) must agree with it on negation, and assert it (:func:`verifiers.facts._polarity.stance_of` around the quote and around the
    claim's numbers and names).

    Returns ``(stance, why)``: ``("asserts", "")`` when confirmed; ``("denies", marker)`` when
    the passage repeats the claim to deny it (scoped markers only: the claim then fails);
    otherwise ``("unconfirmed", reason)``. Never raises for str input.
    """
    from verifiers.facts._grounding import Documents, anchors, fold
    from verifiers.facts._polarity import has_cjk

    claim, passage = clean_text(strip_citation_markers(claim)), clean_text(passage)
    where = _locate_quote(clean_text(quote), passage)
    sents = _passage_sentences(passage)
    if where is None or not sents:
        return "unconfirmed", "the quote is not found in the passage"
    idx = [i for i, (a, b) in enumerate(sents) if a < where[1] and b > where[0]] or [0]
    a0, b0 = sents[idx[0]][0], sents[idx[-1]][1]
    nxt = sents[idx[-1] + 1][1] if idx[-1] + 1 < len(sents) else b0
    window, wide = passage[a0:b0], passage[a0:nxt]
    qspan = (max(0, where[0] - a0), min(len(window), where[1] - a0))
    # the claim's numbers and names, located in the window
    docs = Documents([passage])
    anc = anchors(claim)
    absent = [x.text for x in anc if not docs.has(x)]
    if absent:
        return "unconfirmed", f"the cited passage does not state {', '.join(absent)}"
    fw = fold(window)
    pos = []
    for x in anc:
        if x.quantity is not None:
            pos += [(q.start, q.end) for q in numbers(window) if x.quantity.rounds_to(q) or q.rounds_to(x.quantity)]
        else:
            for w in re.findall(r"[a-z0-9]+", fold(x.text)):
                j = fw.find(w)
                if j >= 0 and len(w) > 2:
                    pos.append((j, j + len(w)))
    aspan = (min(p[0] for p in pos), max(p[1] for p in pos)) if pos else None
    for span in (qspan, aspan):
        if span is not None:
            st = stance_of(wide, span, claim)
            if st.stance == "denies":
                return "denies", st.marker
    # support needs the quoted sentence(s) to state them: a passage naming them elsewhere
    # (another year, another city, a sentence about something else) does not make the quote
    # support the claim (a denial above reads the whole passage)
    # (a name may come from the sentence before when the quote opens with an anaphor: "Its chief
    # executive is Marie Dubois" after a sentence naming Northwind Traders)
    wdocs = Documents([window])
    prev = Documents([passage[sents[idx[0] - 1][0]:sents[idx[0] - 1][1]]]) \
        if idx[0] > 0 and _ANAPHOR_START.match(window) else None
    absent = [x.text for x in anc if not wdocs.has(x)
              and not (prev is not None and x.kind == "entity" and prev.has(x))]
    if absent:
        return "unconfirmed", f"the quoted sentence does not state {', '.join(absent)}"
    for x in anc:  # a name stated in part, another name in the place of the rest
        if x.kind == "entity" and not wdocs.states(x):
            rival = _rival_name(x.text, window)
            if rival is not None:
                return "unconfirmed", f"the quoted sentence names {rival} where the claim names {x.text}"
    if not anc:
        if has_cjk(claim):
            return "unconfirmed", "the claim has no number or name the rules can confirm"
        ck = key_set(claim)
        if not ck or len(ck & key_set(window)) / len(ck) < CONFIRM_KEYS:
            return "unconfirmed", "the quoted sentence holds too few of the claim's terms"
    if not has_cjk(window) and _negated(claim) != _negated(window):
        return "unconfirmed", "the quoted sentence and the claim differ in negation"
    st = stance_of(wide, qspan, claim)
    if not st.asserts:
        return "unconfirmed", f"the passage {st.stance} it (\u201c{st.marker}\u201d)"
    if aspan is not None:
        st = stance_of(wide, aspan, claim)
        if not st.asserts:
            return "unconfirmed", f"the passage {st.stance} it (\u201c{st.marker}\u201d)"
    prev_text = passage[sents[idx[0] - 1][0]:sents[idx[0] - 1][1]] if prev is not None else ""
    why = unstated_detail(claim, window, prev_text)
    if why is not None:
        return "unconfirmed", why
    return "asserts", ""
