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

Beside it, a private module per concern: ``_clean`` (the text as the rules read it), ``_lexicon``
(the word tables: negation, opposite senses, stronger words, currencies; the rival-name rule),
``_unstated`` (what a claim says that the quoted sentence does not), ``_support`` (confirming a
verifier model's ``supported`` at its quote, :func:`confirm_support`, still importable from here).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from verifiers.facts._polarity import stance_of
from verifiers.facts._text import (NEGATION, KEY_PREFIX, Quantity, entities, key_set, keys, month_of, numbers, sentences,
                                   STOP)
from verifiers.facts._clean import clean_text, strip_citation_markers
from verifiers.facts._lexicon import _negated, _same_money

# Also importable from here as before (the model tier's confirmation and its rules, split out):
from verifiers.facts._support import CONFIRM_KEYS, confirm_support
from verifiers.facts._unstated import unstated_detail, unstated_term

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
