"""The deterministic tier: numbers, dates, named entities and negation of a claim against the
passages about the same subject (docs/facts.md, step 4, the deterministic tier), before any model call.

High precision over recall (docs/design.md "False alarms cost more than misses"): each rule fires only
when the passage is clearly about the same thing and clearly says something else; everything in
between is ``not_enough_info``. Per passage, :func:`judge_passage` returns one of

* ``supported`` -- the claim is *contained* in one sentence of the passage: its words align
  with the sentence in order (the passage may add words, but no content word of the claim is
  replaced, dropped or moved; share of key terms >= :data:`SUPPORT_COVERAGE`), every
  quantity of the claim is stated there (equal, or the claim is the passage's value rounded to
  the precision it was written with), every named entity occurs, negation agrees, and the claim
  is self-contained (no leading pronoun, no first person);
* ``refuted`` by a **quantity**: a sentence about the same subject (share of the claim's key
  terms >= :data:`SUBJECT_COVERAGE`) states a quantity of the same kind (percent, currency, year,
  number) in the same slot (same unit word after it and shared key terms around it) with a
  different value, and the claim's value occurs nowhere in the passage;
* ``refuted`` by a **swap**: the claim and one passage sentence are word-for-word the same
  (aligned share >= :data:`SWAP_ALIGNMENT`) except one short run where the claim has a named
  entity or month the passage does not contain at all, and the passage has another one; or
  except a negation word added or removed; or, locally, a name of the claim that the passage
  never mentions sits between the same two words before and two words after as another name
  in the passage (:func:`_local_swap`);
* ``not_enough_info`` otherwise.

The thresholds were chosen on the tuning splits of bench/facts_bench.py and measured on the
held-out splits (bench/results/facts.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from verifiers.facts._polarity import stance_of
from verifiers.facts._text import (NEGATION, KEY_PREFIX, Quantity, display_order, entities, key_set, keys, month_of,
                                   numbers, sentences, words, STOP)

__all__ = ["PassageVerdict", "judge_passage", "SUPPORT_COVERAGE", "SUBJECT_COVERAGE", "SWAP_ALIGNMENT",
           "MIN_KEYS"]

#: Share of the claim's key terms one passage sentence (or two adjacent) must hold for "contained".
SUPPORT_COVERAGE = 1.0
#: At most this many passage tokens may come between two aligned words of the claim.
MAX_GAP = 3
#: The aligned claim must sit within SPREAD x (claim tokens) + 4 tokens of the passage sentence.
SPREAD = 2.0
#: A claim that starts with a pronoun (or speaks in the first person) is not self-contained: the
#: deterministic tier never finds it "contained" (the model tier resolves pronouns first).
_NOT_SELF_CONTAINED = re.compile(r"^\W*(?:it|its|it's|they|their|them|he|his|she|her|this|that|these|those|there|"
                                 r"i|i'm|i've|my|we|our|you|your)\b|\b(?:i|i'm|i've|my|me)\b", re.IGNORECASE)
#: Share of the claim's key terms (numbers excluded) a passage sentence must hold to be "about the
#: same subject" for the quantity rule.
SUBJECT_COVERAGE = 0.2
#: Content words among the four anchor tokens of a local name swap.
ANCHOR_KEYS = 2
#: Key terms the claim's and the passage's quantity slots must share (besides the unit rule).
SLOT_SHARED = 2
#: Share of the claim's tokens that must align word for word with a passage sentence for the swap rule.
SWAP_ALIGNMENT = 0.75
#: A claim with fewer key terms than this is too short to judge deterministically.
MIN_KEYS = 3
#: Key terms on each side of a quantity that define its slot.
WINDOW = 5

#: Source markers a cited answer carries (``[1]``, ``[2, 3]``, ``[4-6]``, ``【1】``): references to
#: the report's numbered sources, not part of the claim (a corrected answer cites them, docs/facts.md).
_CITATION_MARKER = re.compile(r"\s*(?:\[\s*\d{1,3}(?:\s*[,;\u2013-]\s*\d{1,3})*\s*\]|\u3010\d{1,3}\u3011)")


#: Characters that change how a text reads to these rules but not what it says: format characters
#: (soft hyphen U+00AD from PDF extraction, zero-width space/joiners, bidi marks, BOM) are dropped;
#: control characters become spaces; runs of spaces and tabs become one space ("$4.2  million"
#: must read as $4.2 million, not as $4.2 followed by a word).
_FORMAT_CHARS = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACE_RUN = re.compile(r"[^\S\n]{2,}|[^\S\n ]")


def clean_text(text: str) -> str:
    """``text`` as the deterministic tier reads it (see :data:`_FORMAT_CHARS`); newlines kept
    (they end sentences)."""
    text = _FORMAT_CHARS.sub("", display_order(text))
    text = _CONTROL_CHARS.sub(" ", text)
    return _SPACE_RUN.sub(" ", text)


def strip_citation_markers(text: str) -> str:
    """``text`` without ``[n]``-style source markers (the claim as stated, without its citations)."""
    return _CITATION_MARKER.sub("", text) if ("[" in text or "\u3010" in text) else text


_TOKEN_RE = re.compile(r"[$€£¥]?\d[\d,]*(?:\.\d+)?%?|[A-Za-z][\w'&.-]*[A-Za-z]|[A-Za-z]|%")


@dataclass(slots=True)
class PassageVerdict:
    """What one passage says about a claim: ``verdict`` (``supported`` | ``refuted`` |
    ``not_enough_info``), ``rule`` (``contained`` | ``quantity`` | ``entity`` | ``date`` |
    ``negation`` | ``''``), ``quote`` (the passage sentence(s) it rests on), ``expected`` (what
    the passage states instead, for refutations), ``found`` (what the claim states)."""

    verdict: str
    rule: str = ""
    quote: str = ""
    expected: str | None = None
    found: str | None = None
    note: str = ""
    coverage: float = 0.0
    extra: dict = field(default_factory=dict)


def _sentence_texts(text: str) -> list[str]:
    return [text[a:b] for a, b in sentences(text)]


def _windows(sents: list[str]) -> list[str]:
    """Single sentences and pairs of adjacent sentences."""
    return sents + [sents[i] + " " + sents[i + 1] for i in range(len(sents) - 1)]


def _slot(text: str, q: Quantity) -> tuple[str | None, frozenset[str], frozenset[str], frozenset[str]]:
    """(the unit: the word right after the quantity unless a stop word, cut like a key; the key
    terms around it; the two nearest keys before it; the two nearest keys after it)."""
    after = keys(text[q.end:q.end + 60])
    before = keys(text[max(0, q.start - 80):q.start])
    m = re.match(r"\s?([A-Za-z][\w-]*)", text[q.end:q.end + 40])
    unit = m.group(1).lower()[:KEY_PREFIX] if m and m.group(1).lower() not in STOP else None
    return unit, frozenset(before[-WINDOW:] + after[:WINDOW]), frozenset(before[-2:]), frozenset(after[:2])


def _same_kind(a: Quantity, b: Quantity) -> bool:
    return a.kind == b.kind


def _consistent(a: Quantity, b: Quantity) -> bool:
    return a.rounds_to(b) or b.rounds_to(a)


def _negated(text: str) -> bool:
    return bool(NEGATION.search(text))


def _align_tokens(text: str) -> list[str]:
    """Tokens for containment: content words as keys, stop words lower-case, numbers as ``#``
    (numbers are compared by value separately)."""
    out = []
    for t in _tokens(text):
        if t[0].isdigit() or t[0] in "$€£¥":
            out.append("#")
        elif t == "%":
            continue
        else:
            low = t.lower().removesuffix("'s")
            out.append(low if low in STOP else low[:KEY_PREFIX])
    return out


def _align_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the tokens :func:`_align_tokens` returns, in the same order."""
    return [(m.start(), m.end()) for m in _TOKEN_RE.finditer(text) if m.group(0) != "%"]


def _contained(claim: str, ckeys: frozenset[str], cnums: list[Quantity], cents: list[str],
               window: str, after: str = "") -> PassageVerdict | None:
    """The claim, word for word, inside ``window``: the passage may add words anywhere, but every
    content word of the claim must align with the same word in order (a key term replaced,
    dropped or moved -> not contained). Then its polarity (:func:`~verifiers.facts._polarity.stance_of`
    over ``window`` and the sentence ``after`` it): repeated to deny it -> ``refuted`` (rule
    ``denial``); doubted or attributed -> ``not_enough_info`` (rule ``polarity``); stated ->
    ``supported``."""
    wkeys = key_set(window)
    cov = len(ckeys & wkeys) / len(ckeys)
    if cov < SUPPORT_COVERAGE:
        return None
    ct, wt = _align_tokens(claim), _align_tokens(window)
    sm = SequenceMatcher(None, ct, wt, autojunk=False)
    inner = False
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete") and any(t not in STOP and t != "#" for t in ct[i1:i2]):
            return None
        if tag in ("insert", "replace") and 0 < i1 < len(ct) and inner and j2 - j1 > MAX_GAP:
            return None
        inner = inner or tag == "equal"
    blocks = [b for b in sm.get_matching_blocks() if b.size]
    if blocks and (blocks[-1].b + blocks[-1].size - blocks[0].b) > SPREAD * len(ct) + 4:
        return None
    wnums = [w for w in numbers(window) if w.vague != "range"]  # an end of "12-15" states no value
    if any(not any(c.rounds_to(w, loose=c.hedged) and _same_money(claim, c, window, w)
                   for w in wnums if _same_kind(c, w) or c.kind == "number")
           for c in cnums):
        return None
    low = window.lower()
    if any(e.lower() not in low for e in cents):
        return None
    offs = _align_spans(window)
    span = None
    if blocks and len(offs) == len(wt):
        span = (offs[blocks[0].b][0], offs[blocks[-1].b + blocks[-1].size - 1][1])
    st = stance_of(window + (" " + after if after else ""), span, claim)
    if st.stance == "denies":
        return PassageVerdict("refuted", "denial", (window + (" " + after if st.where == "suffix" and after else "")).strip(),
                              expected=window.strip(), found=claim.strip(), coverage=cov,
                              note=f"the passage repeats the claim to deny it (\u201c{st.marker}\u201d)",
                              extra={"stance": st.stance, "marker": st.marker})
    if _negated(claim) != _negated(window):
        return None
    if not st.asserts:
        return PassageVerdict("not_enough_info", "polarity", window.strip(), coverage=cov,
                              note=f"the passage {st.stance} the claim (\u201c{st.marker}\u201d): not support",
                              extra={"stance": st.stance, "marker": st.marker})
    return PassageVerdict("supported", "contained", window.strip(), coverage=cov,
                          note=f"the passage states every term{' and number' if cnums else ''} of the claim")


def _quantity_refute(claim: str, ckeys: frozenset[str], cnums: list[Quantity], sents: list[str],
                     all_nums: list[Quantity]) -> PassageVerdict | None:
    from verifiers.facts._grounding import WORKED_OUT, derivable, operands

    claim_nums = numbers(claim)
    ops: dict[str, list[float]] | None = None
    for q in cnums:
        if q.hedged or q.vague:  # "about 500", "2.500", "12万", "12-15": not a value to contradict
            continue
        if any(_consistent(q, p) for p in all_nums if _same_kind(q, p) or "number" in (q.kind, p.kind)):
            continue  # the passage states the claim's value somewhere: no contradiction here
        ops = operands(all_nums) if ops is None else ops
        if WORKED_OUT.search(claim) and derivable(q, ops):
            continue  # a sum, difference, share or change of the passage's figures: worked out, not contradicted
        cunit, cwin, cbefore, cafter = _slot(claim, q)
        best: tuple[int, Quantity, str] | None = None
        tie = False
        for s in sents:
            skeys = key_set(s)
            if len(ckeys & skeys) / len(ckeys) < SUBJECT_COVERAGE:
                continue
            for p in numbers(s):
                if not _same_kind(q, p) or p.hedged or p.vague:
                    continue
                if any(_consistent(o, p) for o in claim_nums if o is not q):
                    continue  # the claim states the passage's value too: two values, not a contradiction
                punit, pwin, pbefore, pafter = _slot(s, p)
                if q.kind == "number" and (cunit is None or cunit != punit):
                    continue
                if cunit is not None and punit is not None and cunit != punit:
                    continue
                shared = len(cwin & pwin)
                if shared < SLOT_SHARED or not (cbefore & pbefore or cafter & pafter):
                    continue
                if best is None or shared > best[0]:
                    best, tie = (shared, p, s), False
                elif shared == best[0] and not _consistent(best[1], p):
                    tie = True
        if best is not None and not tie:
            _, p, s = best
            return PassageVerdict("refuted", "date" if q.kind == "year" else "quantity", s.strip(),
                                  expected=p.text, found=q.text,
                                  note=f"the passage gives {p.text} where the claim says {q.text}")
    return None


def _tokens(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def _norm_tok(t: str) -> str:
    t = t.lower()
    return t[:KEY_PREFIX] if t.isalpha() else t


def _swap_refute(claim: str, sents: list[str], passage_low: str) -> PassageVerdict | None:
    ctoks = _tokens(claim)
    if len(ctoks) < 4:
        return None
    cn = [_norm_tok(t) for t in ctoks]
    for s in sents:
        stoks = _tokens(s)
        sn = [_norm_tok(t) for t in stoks]
        sm = SequenceMatcher(None, cn, sn, autojunk=False)
        matched = sum(b.size for b in sm.get_matching_blocks())
        if matched / len(cn) < SWAP_ALIGNMENT:
            continue
        diffs = [op for op in sm.get_opcodes() if op[0] != "equal"]
        # one differing run; everything else the same (a trailing run of extra passage words is fine)
        core = [op for op in diffs if not (op[0] == "insert" and (op[1] == len(cn) or op[1] == 0))]
        if len(core) != 1:
            continue
        tag, i1, i2, j1, j2 = core[0]
        cpart, spart = ctoks[i1:i2], stoks[j1:j2]
        if tag in ("insert", "delete"):
            part = cpart or spart
            if len(part) == 1 and NEGATION.fullmatch(part[0]):
                return PassageVerdict("refuted", "negation", s.strip(), expected=s.strip(), found=claim.strip(),
                                      note=f"the passage says the opposite (negation {'added' if cpart else 'removed'})")
            continue
        if not (1 <= len(cpart) <= 3 and 1 <= len(spart) <= 3) or i1 == 0:
            continue
        ctext, stext = " ".join(cpart), " ".join(spart)
        if ctext.lower() in passage_low:
            continue
        cm, sm_ = [month_of(t) for t in cpart], [month_of(t) for t in spart]
        if len(cpart) == 1 and len(spart) == 1 and cm[0] and sm_[0] and cm[0] != sm_[0]:
            return PassageVerdict("refuted", "date", s.strip(), expected=stext, found=ctext,
                                  note=f"the passage gives {stext} where the claim says {ctext}")
        cap = lambda ts: all(t[:1].isupper() and t.lower() not in STOP for t in ts)  # noqa: E731
        if cap(cpart) and cap(spart) and not any(month_of(t) for t in cpart + spart) and not _same_name(ctext, stext):
            return PassageVerdict("refuted", "entity", s.strip(), expected=stext, found=ctext,
                                  note=f"the passage names {stext} where the claim names {ctext}")
    return None


def _is_name(t: str) -> bool:
    return t[:1].isupper() and t.lower() not in STOP and not month_of(t)


def _same_name(a: str, b: str) -> bool:
    """True when two names may well be one: equal letters, one the initials of the other ("LA" /
    "Los Angeles", "J.K" / "J K"), or a shared word ("Smith" / "John Smith")."""
    la, lb = re.sub(r"[^a-z0-9]", "", a.lower()), re.sub(r"[^a-z0-9]", "", b.lower())
    if la == lb:
        return True
    ia = "".join(w[0] for w in re.findall(r"[A-Za-z]+", a)).lower()
    ib = "".join(w[0] for w in re.findall(r"[A-Za-z]+", b)).lower()
    if la == ib or lb == ia:
        return True
    wa = {w for w in re.findall(r"[a-z]{3,}", a.lower())}
    wb = {w for w in re.findall(r"[a-z]{3,}", b.lower())}
    return bool(wa & wb)


def _local_swap(claim: str, sents: list[str], passage_low: str) -> PassageVerdict | None:
    """A named entity of the claim that the passage never mentions, in a slot the passage fills
    with another name: the two tokens before and the two after are the same words in both
    (at least :data:`ANCHOR_KEYS` of those four are content words)."""
    ct = _tokens(claim)
    cn = [_norm_tok(t) for t in ct]
    i = 1  # a name that opens the claim has no left anchor
    while i < len(ct):
        if not _is_name(ct[i]):
            i += 1
            continue
        j = i
        while j < len(ct) and j - i < 4 and _is_name(ct[j]):
            j += 1
        name = " ".join(ct[i:j])
        left, right = cn[max(0, i - 2):i], cn[j:j + 2]
        i = j
        if len(left) < 2 or len(right) < 2 or name.lower() in passage_low:
            continue
        if sum(1 for t in left + right if t not in STOP and t.isalpha()) < ANCHOR_KEYS:
            continue
        for s in sents:
            st = _tokens(s)
            sn = [_norm_tok(t) for t in st]
            for a in range(2, len(sn)):
                if sn[a - 2:a] != left:
                    continue
                for b in range(a + 1, min(a + 4, len(sn) - 1)):
                    if sn[b:b + 2] == right and all(_is_name(t) for t in st[a:b]):
                        other = " ".join(st[a:b])
                        if not _same_name(name, other):
                            return PassageVerdict("refuted", "entity", s.strip(), expected=other, found=name,
                                                  note=f"the passage names {other} where the claim names {name}")
    return None


def judge_passage(claim: str, passage: str, *, context: str | None = None,
                  elsewhere: str = "") -> PassageVerdict:
    """Judge ``claim`` against one passage text with the rules of the module doc.

    ``context``: a longer text to read the claim's subject from when the claim itself is short
    (a one-phrase answer judged with its question); quantities, entities and negation still come
    from ``claim``. ``elsewhere``: the text of the other passages retrieved for the claim -- a
    value or name the claim states that occurs there is never contradicted. Never raises for any str input; O(sentences x claim length).
    """
    claim, passage, elsewhere = clean_text(strip_citation_markers(claim)), clean_text(passage), clean_text(elsewhere)
    context = clean_text(strip_citation_markers(context)) if context else context
    subject = context or claim
    ckeys = key_set(subject)
    if len(ckeys) < MIN_KEYS or not passage.strip():
        return PassageVerdict("not_enough_info", note="too few key terms to compare")
    sents = _sentence_texts(passage)
    cnums = numbers(claim)
    cents = [e for e, _, _ in entities(claim)]
    all_nums = numbers(passage) + (numbers(elsewhere) if elsewhere else [])
    low = passage.lower() + "\n" + elsewhere.lower()
    q = _quantity_refute(subject, ckeys, [n for n in numbers(subject) if n.start >= len(subject) - len(claim)]
                         if context else cnums, sents, all_nums)
    if q is not None:
        return q
    if context is None:
        sw = _swap_refute(claim, sents, low) or _local_swap(claim, sents, low)
        if sw is not None:
            return sw
    best: PassageVerdict | None = None
    denial: PassageVerdict | None = None
    withheld: PassageVerdict | None = None
    self_contained = context is None and not _NOT_SELF_CONTAINED.search(claim)
    for i, w in enumerate(sents):
        hit = (_contained(claim, ckeys, cnums, cents, w, sents[i + 1] if i + 1 < len(sents) else "")
               if self_contained else None)
        if hit is None:
            continue
        if hit.verdict == "refuted":
            denial = denial or hit
        elif hit.verdict == "not_enough_info":
            withheld = withheld or hit
        elif best is None or len(hit.quote) < len(best.quote):
            best = hit
    if denial is not None and best is None:
        return denial
    if denial is not None:  # one sentence states it, another denies it: the passage decides nothing
        return PassageVerdict("not_enough_info", "polarity", denial.quote, coverage=denial.coverage,
                              note="the passage both states and denies the claim")
    if best is not None:
        return best
    if withheld is not None:
        return withheld
    cov = max((len(ckeys & key_set(s)) / len(ckeys) for s in sents), default=0.0)
    return PassageVerdict("not_enough_info", coverage=cov,
                          note=f"the closest passage sentence holds {round(cov * 100)}% of the claim's key terms")


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


_ANAPHOR_START = re.compile(r"\s*(?:it|its|he|his|she|her|they|their|this|these|the\s+(?:company|firm|group|"
                            r"organi[sz]ation|business|city|country|team|club|band|university|school|agency))\b",
                            re.IGNORECASE)


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


#: Words of opposite sense: a claim with a word of one side where the quoted sentence has only the
#: other ("rose" / "fell", "opened" / "closed", "joined" / "left") says the opposite of it, whatever
#: the verifier model read. Whole words, case-insensitive.
_OPPOSITES = [(re.compile(r"\b(?:%s)\b" % a, re.I), re.compile(r"\b(?:%s)\b" % b, re.I)) for a, b in [
    (r"ris(?:e|es|en|ing)|rose|increas\w*|gr(?:ew|ow|ows|own|owing)|climb\w*|jump\w*|soar\w*|grow(?:th)|up",
     r"f[ae]ll(?:s|en|ing)?|decreas\w*|declin\w*|drop\w*|shr[iau]nk\w*|slid\w*|slump\w*|plung\w*|down"),
    (r"open(?:s|ed|ing)?", r"clos(?:e|es|ed|ing|ure)|shut\w*"),
    (r"join(?:s|ed|ing)?|hir(?:e|es|ed|ing)|appoint\w*|elected",
     r"left|leav(?:e|es|ing)|quit\w*|resign\w*|depart\w*|fired|dismiss\w*|retir\w*|ousted"),
    (r"bought|buy(?:s|ing)?|acquir\w*|purchas\w*", r"s[oe]ll(?:s|ing)?|sold|divest\w*"),
    (r"w[io]n(?:s|ning)?|victor\w*", r"los(?:e|es|ing|t)|defeat\w*"),
    (r"profit\w*|surplus\w*|revenues?|income|earn\w*", r"loss(?:es)?|deficit\w*"),
    (r"import\w*", r"export\w*"),
    (r"before|earlier|prior", r"after|later"),
    (r"above|over|more|higher|larger|bigger|greater|most|highest|largest|biggest|maxim\w*",
     r"below|under|less|fewer|lower|smaller|least|lowest|smallest|minim\w*"),
    (r"born|birth", r"died|dead|death"),
    (r"first|earliest", r"last|final|latest"),
    (r"approv\w*|accept\w*|pass(?:ed)?", r"reject\w*|vetoed|refus\w*|declin(?:e|ed)"),
    (r"includ\w*", r"exclud\w*"),
    (r"north\w*", r"south\w*"), (r"east\w*", r"west\w*"),
    (r"start\w*|began|begin\w*|launch\w*|found(?:ed|s)?", r"end(?:s|ed)?|stopp?\w*|halt\w*|ceas\w*|dissolv\w*"),
    (r"executive|ceo", r"financial|cfo|operating|coo|technology|cto"),
    (r"men|male|man", r"women|female|woman"),
    (r"public", r"private"), (r"maj(?:or|ority)", r"min(?:or|ority)"),
]]
#: Words that make a claim stronger or change whom it is about: a superlative, "only", "every",
#: "record", a role qualifier ("former", "deputy", "acting"), a hedge that reverses the sense
#: ("unlikely"). The quoted sentence must say them too: a passage that does not, does not state
#: the claim (the verifier model may think it implied; that is its word, docs/design.md "Asymmetric trust").
_STRONG = re.compile(r"\b(?:\w{3,}est|most|least|best|worst|only|sole|solely|every|all|always|never|none|record|"
                     r"unique|entire|whole|first|last|former|ex|deputy|vice|acting|interim|assistant|associate|co|"
                     r"honorary|unlikely|doubtful|falsely|wrongly|allegedly|rarely|seldom|hardly|barely|nearly|almost|"
                     r"over|under|above|below|more|less|fewer|exceed\w*|than|since|until|per|each|times|twice|double\w*|"
                     r"half|triple\w*|quarter)\b", re.IGNORECASE)
_NOT_SUPERLATIVE = frozenset("interest honest forest rest test latest guest west request harvest contest protest "
                             "invest arrest suggest digest modest manifest chest nest quest pest vest crestest".split())
#: Currency families a symbol, code or word names ("$" is every dollar: US, Canadian, ...).
_CURRENCIES = [(re.compile(p, re.I), fam) for p, fam in [
    (r"€|\beur\b|\beuros?\b", "EUR"), (r"£|\bgbp\b|\bpounds? sterling\b|\bsterling\b", "GBP"),
    (r"\$|\busd\b|\bcad\b|\baud\b|\bnzd\b|\bhkd\b|\bsgd\b|\bdollars?\b", "DOLLAR"),
    (r"¥|\byen\b|\bjpy\b|\byuan\b|\bcny\b|\brmb\b|\brenminbi\b", "YEN-YUAN"),
    (r"₹|\binr\b|\brupees?\b", "INR"), (r"\bchf\b|\bfrancs?\b", "CHF"), (r"₩|\bkrw\b|\bwon\b", "KRW"),
    (r"\bsek\b|\bnok\b|\bdkk\b|\bkron[aeo]r?\b", "KRONA"), (r"₽|\brub\b|\broubles?\b|\brubles?\b", "RUB"),
]]


def _currency(text: str, q: Quantity) -> frozenset[str]:
    """The currency families written right at quantity ``q`` of ``text`` (the sign or code
    before it, the code or word after it, past a scale word)."""
    around = text[max(0, q.start - 4):q.start] + " " + q.text + " " + text[q.end:q.end + 14]
    return frozenset(fam for pat, fam in _CURRENCIES if pat.search(around))


_NAME_TOKEN = re.compile(r"[^\W\d_][\w'’.-]*")


def _rival_name(name: str, window: str) -> str | None:
    """The other name ``window`` has where ``name`` is only partly there: a word of the name
    occurs, and next to it, where the name has a word the window lacks, the window has another
    capitalised word ("Northwind Traders" for "Southwind Traders", "Marie Dubois" for "Marie
    Smith"). None when the rest of the name is just not repeated ("the tower" for "the Eiffel
    Tower") or the word in its place is a title or generic word (``_grounding.GENERIC``:
    "President Obama" for "Barack Obama", "Queen Elizabeth" for "Elizabeth Windsor" -- the words
    :meth:`~verifiers.facts._grounding.Documents.states` does not ask for either)."""
    from verifiers.facts._grounding import GENERIC, fold

    nw = [t for t in _NAME_TOKEN.findall(name)]
    wt = [(m.group(0), m.start()) for m in _NAME_TOKEN.finditer(window)]
    wlow = [fold(t) for t, _ in wt]
    present = [fold(t) in wlow for t in nw]
    for i, t in enumerate(nw):
        if not present[i]:
            continue
        for j, w in enumerate(wlow):
            if w != fold(t):
                continue
            for step in (-1, 1):
                k, jj = i + step, j + step
                if 0 <= k < len(nw) and not present[k] and 0 <= jj < len(wt):
                    other = wt[jj][0]
                    if other[:1].isupper() and fold(other) not in STOP and fold(other) not in GENERIC \
                            and fold(other) != fold(nw[k]):
                        return " ".join(x for x, _ in sorted([wt[jj], wt[j]], key=lambda p: p[1]))
    return None


def _same_money(claim: str, c: Quantity, window: str, w: Quantity) -> bool:
    """False when amount ``c`` of the claim and ``w`` of the window are written in different
    currencies ("€4.2 million" is not stated by "$4.2 million"); True when either names none."""
    cc, wc = _currency(claim, c), _currency(window, w)
    return not (cc and wc and not cc & wc)


def unstated_detail(claim: str, window: str, before: str = "") -> str | None:
    """What the claim says that the quoted sentence(s) ``window`` do not, though its numbers and
    names are there: the only check between a verifier model's ``supported`` and a ``pass``, so
    each rule can turn a pass into ``unknown``, never a claim into a failure (false alarms cost
    more than misses; a miss here is a pass on the model's word, which docs/design.md "Asymmetric trust"
    forbids).
    ``before``: the sentence before, when the window opens with an anaphor.

    * an amount in another currency than the passage's same amount ("€4.2 million" / "$4.2
      million");
    * a word of the opposite sense (:data:`_OPPOSITES`: "rose" where the passage has "fell");
    * a stronger word (:data:`_STRONG`: superlative, "only", "former", "more than", "unlikely")
      the quoted sentence does not have;
    * the thing a number counts ("85 robots") when the quoted sentence never names it.

    Returns the reason, or None."""
    text = window + " " + before
    low = text.lower()
    wnums = numbers(window)
    for q in numbers(claim):
        if q.kind == "currency":
            cc = _currency(claim, q)
            same = [w for w in wnums if q.rounds_to(w) or w.rounds_to(q)]
            if cc and same and not any(_same_money(claim, q, window, w) for w in same):
                return f"the quoted sentence gives the amount {q.text.strip()} in another currency"
        m = re.match(r"\s?(?:(?:thousand|million|billion|trillion)\s+)?([A-Za-z][a-z-]{2,})", claim[q.end:q.end + 40])
        if m and q.kind == "number":
            noun = m.group(1).lower()
            if noun in _QUANTITY_WORDS or _same_unit(claim, q, window):
                continue  # "4.2 million dollars" for "$4.2 million", "300 meters" for "300 metres"
            if noun not in STOP and noun[:KEY_PREFIX] not in key_set(text) and noun.rstrip("s")[:KEY_PREFIX] \
                    not in {k.rstrip("s") for k in key_set(text)}:
                return f"the quoted sentence does not say what {q.text.strip()} counts ({noun})"
    for a, b in _OPPOSITES:
        for mine, other in ((a, b), (b, a)):
            hit = mine.search(claim)
            if hit and not mine.search(text) and other.search(text):
                return (f"the claim says \u201c{hit.group(0)}\u201d where the quoted sentence says "
                        f"\u201c{other.search(text).group(0)}\u201d")
    for m in _STRONG.finditer(claim):
        w = m.group(0).lower()
        if w in _NOT_SUPERLATIVE or (w.endswith("est") and w not in ("largest", "biggest") and len(w) < 5):
            continue
        if not re.search(r"\b" + re.escape(w) + r"\b", low):
            return f"the quoted sentence does not say \u201c{m.group(0)}\u201d"
    return unstated_term(claim, window, before)


#: Paraphrases the rules accept for a claim word the quoted sentence lacks: the same side of a
#: pair in :data:`_OPPOSITES` ("dropped" for "fell", "grew" for "rose") and these families of one
#: sense. Kept small on purpose: a word outside them must be in the quoted sentence.
_SAME_SENSE = [re.compile(r"\b(?:%s)\b" % p, re.I) for p in (
    r"boss(?:es)?|ceo|chief\s+executive(?:\s+officer)?",
)]
#: Nouns that name the kind of thing the subject is ("the company", "the firm"): stated by the
#: quoted sentence when it names its subject (a name, here or in the sentence before it, or an
#: anaphor that points there) or uses a word of the same family.
_CLASS_NOUNS = [frozenset(f.split()) for f in (
    "company companies firm firms business businesses corporation group organisation organization enterprise "
    "retailer manufacturer maker employer",
    "city town country nation state region",
    "team club side",
    "university school college institute",
    "agency authority body",
)]
#: Quantity words the numeric comparison already decided (scale words, currency and percent words).
_QUANTITY_WORDS = frozenset("thousand million billion trillion mn bn percent per cent pct dollar dollars usd euro euros eur "
                            "pound pounds gbp yen yuan".split())


def _same_unit(claim: str, q: Quantity, window: str) -> bool:
    """True when quantity ``q`` of the claim has a unit (:func:`~verifiers.facts._grounding.unit_after`)
    and ``window`` states the same value in the same unit ("300 meters" / "300 metres")."""
    from verifiers.arithmetic._units import unit_info
    from verifiers.facts._grounding import unit_after

    cu = unit_info(unit_after(claim, q.end))
    return cu is not None and any((q.rounds_to(w) or w.rounds_to(q)) and unit_info(unit_after(window, w.end)) == cu
                                  for w in numbers(window))


def _swapped_anchors(claim: str, window: str) -> str | None:
    """Two names of the claim that the quoted sentence states in the other order ("Neil Gaiman
    directed Beowulf" on "Beowulf, directed by Robert Zemeckis and written by Neil Gaiman";
    "France is the capital of Paris" on "Paris is the capital of France"): every word is there,
    but not the claim's arrangement -- which the rules cannot confirm (a passive paraphrase is
    ``unknown`` too: a miss, never a false alarm). A name is a run of capitalised words, not stop
    or generic words; a sentence's first word counts only when the sentence names it
    capitalised elsewhere ("Sales fell" names nothing)."""
    from verifiers.facts._grounding import GENERIC, fold

    def tracked(text: str) -> list[str]:
        out: list[str] = []
        for m in _NAME_TOKEN.finditer(text):
            w = m.group(0)
            low = fold(w).strip(".'’")
            if not w[:1].isupper() or low in STOP or low in GENERIC or len(low) < 2 or low in out:
                continue
            initial = not text[:m.start()].strip() or bool(re.search(r"[.!?:]\s*$", text[:m.start()]))
            if initial and not re.search(r"[^.!?:\s]\s+" + re.escape(w) + r"\b", window):
                continue
            out.append(low)
        return out

    fw = fold(window)
    seq = []
    for w in tracked(claim):
        at = [m.start() for m in re.finditer(r"\b" + re.escape(w) + r"\b", fw)]
        if at:
            seq.append((w, min(at), max(at)))
    for i in range(len(seq) - 1):
        a, b = seq[i], seq[i + 1]
        if a[1] > b[2]:  # every mention of a comes after the last of b
            return f"the quoted sentence states {b[0].title()} before {a[0].title()}: not the claim's arrangement"
    return None


def _base(k: str) -> str:
    return k[:-1] if len(k) > 3 and k.endswith("s") else k


def unstated_term(claim: str, window: str, before: str = "") -> str | None:
    """The first element of ``claim`` that the quoted sentence(s) ``window`` (and ``before``,
    the sentence an opening anaphor points to) do not state: the whitelist under
    :func:`unstated_detail`'s named kinds, so what a kind list misses cannot pass on the verifier
    model's word (docs/design.md "Asymmetric trust": a pass rests on a passage that states the claim).

    * an attribution or hedge the claim carries (:data:`~verifiers.facts._polarity.ATTRIBUTION`,
      :data:`~verifiers.facts._polarity.DOUBT`: "according to the CEO", "X said", "reportedly",
      "probably") that the quoted sentence does not carry;
    * a number the sentence does not state (a small count in words, "two" where it says
      "three", which the caller's anchors leave out), or states for another count of the same
      thing ("three Nobel Prizes" in a sentence that also says "two more");
    * a number in another unit: a currency the sentence does not name ("4.2 million dollars"
      for "€4.2 million"), a percent where the sentence has the value but no percent ("5%"
      for "5 percentage points"), a unit of another kind or size ("300 ft" for "300 metres");
    * a content word (:func:`~verifiers.facts._text.keys`, plural ``s`` folded) the sentence lacks
      -- a source ("a study found", "researchers"), a qualifier ("in rural areas", "in mice",
      "a month"), a role ("the CEO") -- unless it is a word of a number or name the caller
      confirmed (:func:`~verifiers.facts._grounding.anchors`), a word of the same sense
      (:data:`_OPPOSITES` sides, :data:`_SAME_SENSE`) the sentence has, or a class noun
      (:data:`_CLASS_NOUNS`) for a subject the sentence names;
    * in CJK text, an ideograph of the claim the sentence lacks.

    Each reason can only turn a pass into ``unknown`` (false alarms cost more than misses; a
    paraphrase the lists do not know is an honest ``unknown``). Returns the reason, or None."""
    from verifiers.arithmetic._units import unit_info
    from verifiers.facts._grounding import anchors, unit_after
    from verifiers.facts._polarity import ATTRIBUTION, DOUBT, has_cjk

    text = window + (" " + before if before else "")
    low = text.lower()
    if has_cjk(claim):
        lacking = [ch for ch in dict.fromkeys(claim) if "\u3400" <= ch <= "\u9fff" and ch not in text]
        return f"the quoted sentence does not state \u201c{''.join(lacking)}\u201d" if lacking else None
    anc = anchors(claim)
    covered = {w for x in anc for w in words(x.text)}
    for rx in (ATTRIBUTION, DOUBT):
        for m in rx.finditer(claim):
            mark = " ".join(m.group(0).lower().split())
            if set(words(mark)) <= covered:
                continue  # "May" the month
            if not re.search(r"\b" + r"\s+".join(map(re.escape, mark.split())) + r"\b", low):
                return f"the quoted sentence does not say \u201c{m.group(0)}\u201d (who says it, or how sure)"
    other = {fam for pat, fam in _CURRENCIES if pat.search(claim)} - {fam for pat, fam in _CURRENCIES if pat.search(text)}
    if other:
        return f"the quoted sentence gives no amount in {', '.join(sorted(other))}"
    wnums = numbers(text)
    confirmed = {x.quantity.start for x in anc if x.quantity is not None}
    for q in numbers(claim):
        same = [w for w in wnums if q.rounds_to(w) or w.rounds_to(q)]
        if not same:
            if q.start in confirmed:
                continue  # an anchor the caller found stated (another notation: "$4.2 million" / "4,200,000")
            return f"the quoted sentence does not state {q.text.strip()}"  # "two" where it says "three"
        noun = re.match(r"\s?([^\W\d_]{3,})", claim[q.end:q.end + 30])
        if noun and noun.group(1).lower() not in STOP:
            n = noun.group(1).lower()
            counts = [w for w in wnums if re.match(r"\s?" + re.escape(n) + r"\b", text[w.end:w.end + 30].lower())]
            if counts and not any(q.rounds_to(w) or w.rounds_to(q) for w in counts):
                return f"the quoted sentence gives {counts[0].text.strip()} {n} where the claim says {q.text.strip()}"
        if q.kind == "percent" and not any(w.kind == "percent" for w in same):
            return f"the quoted sentence does not give {q.text.strip()} as a percentage"
        cu = unit_info(unit_after(claim, q.end))
        if cu is not None:
            wu = [unit_info(unit_after(text, w.end)) for w in same]
            if cu in wu:
                m = re.match(r"\s*([^\W\d_]+)", claim[q.end:q.end + 30])
                covered |= set(words(m.group(1))) if m else set()
            elif any(u is not None for u in wu):
                return f"the quoted sentence gives {q.text.strip()} in another unit"
    order = _swapped_anchors(claim, window)
    if order is not None:
        return order
    wkeys = {_base(k) for k in key_set(text)}
    named = bool(entities(text)) or bool(_ANAPHOR_START.match(window))
    for w in words(claim):
        w = w.removesuffix("'s")
        if w in STOP or len(w) < 2 or w[0].isdigit() or w in covered or w in _QUANTITY_WORDS:
            continue
        k = keys(w)
        if not k or _base(k[0]) in wkeys:
            continue
        if any(w in fam and (named or fam & set(words(low))) for fam in _CLASS_NOUNS):
            continue
        if any(rx.search(w) and rx.search(text) for pair in _OPPOSITES for rx in pair):
            continue
        if any(rx.search(claim) and rx.search(text) and w in {x for hit in rx.findall(claim) for x in words(hit)}
               for rx in _SAME_SENSE):
            continue
        return f"the quoted sentence does not say \u201c{w}\u201d"
    return None
