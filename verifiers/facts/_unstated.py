"""What a claim says that the quoted sentence does not, though its numbers and names are there: the
named kinds (:func:`unstated_detail`: another currency, the opposite sense, a stronger word, another
thing counted) and, past them, every element of the claim (:func:`unstated_term`); each can only
turn a verifier model's pass into ``unknown`` (docs/design.md "Asymmetric trust")."""

from __future__ import annotations

import re

from verifiers.facts._text import KEY_PREFIX, STOP, Quantity, entities, key_set, keys, numbers, words
from verifiers.facts._lexicon import (_ANAPHOR_START, _CLASS_NOUNS, _CURRENCIES, _NAME_TOKEN, _NOT_SUPERLATIVE, 
                                      _OPPOSITES, _QUANTITY_WORDS, _SAME_SENSE, _STRONG, _currency, _same_money)


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
