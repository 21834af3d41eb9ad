"""World claims no enabled verifier checks: honest coverage under policies without the facts
verifier (docs/design.md vocabulary "report": ``passed`` means every check-worthy unit found was
decided).

Under a policy that checks arithmetic but not facts, an answer such as "The Eiffel Tower was
completed in 1887. Each third is 300 / 3 = 100 metres tall." would otherwise be ``passed`` on its
one recomputed equation while its world claim went unread. A sentence is such a claim when it
names something and ties a specific detail to it -- the unit cloud grounding services check:

* a **detail**: a number, date, clock time or month (:func:`verifiers.facts._grounding.anchors`);
* and a **name** that makes it a world claim: a run of two or more capitalised words ("Eiffel
  Tower", "Maria Keller"; :func:`verifiers.facts._text.entities`) that neither the question nor
  a decided check's text contains (after the grounding normalisation: accents, name variants);
  or, for a question without numbers (a factual question, not a word problem), a name the
  question uses in mid-sentence ("France" in "What is the population of France?") with a detail
  the question does not give. A single capitalised word of the answer
  alone is not enough: in solutions it is mostly "First", "Step", "Total", a variable "P"; and
  in a word problem the answer's derived values are the arithmetic verifier's (measured with
  ``bench/verdict_ab.py`` on the math case answers);
* and no arithmetic in the sentence (an operator, ``=``, a minus between amounts): that is the
  arithmetic verifier's unit.

Each one becomes an ``unknown`` ``facts`` check (``evidence.kind`` ``not_checked``): the report is
``unverified``, never ``failed`` -- nothing was found wrong.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from verifiers._types import Check
from verifiers.facts._grounding import Anchor, Documents, anchors, fold
from verifiers.facts._text import STOP, entities, sentences

__all__ = ["unchecked_claims", "MAX_UNCHECKED"]

#: At most this many ``not_checked`` checks per answer (the first ones in text order).
MAX_UNCHECKED = 8
#: Characters of the answer read for world claims (a long answer's rest is left as it is).
READ_CHARS = 20_000
_DETAIL = ("number", "datepart", "time", "month")


def unchecked_claims(answer: str, question: str | None, decided: Iterable[tuple[int, int]],
                     *, reason: str = "the policy does not enable the facts verifier") -> list[Check]:
    """``unknown`` ``facts`` checks for the sentences of ``answer`` that state world claims no
    check decided (module doc).

    Args:
        answer: the draft answer.
        question: the user's question (its names are not world claims of the answer), or None.
        decided: ``(start, end)`` spans of the checks that passed or failed.
        reason: why no verifier checks them, for the note.

    Returns:
        At most :data:`MAX_UNCHECKED` checks, each with the sentence's span and the anchors that
        made it a world claim in ``evidence`` (``names``, ``details``).
    """
    spans = sorted(decided)
    known = Documents([question or ""] + [answer[a:b] for a, b in spans])
    # a question that gives numbers is a word problem: its answer's derived values are the
    # arithmetic verifier's, so only a name it never mentions makes a world claim there
    asked = {} if _DIGIT.search(question or "") else _mid_sentence_names(question or "")
    out: list[Check] = []
    for a, b in sentences(answer[:READ_CHARS]):
        if any(s < b and a < e for s, e in spans):
            continue
        sentence = answer[a:b]
        if _WORKED.search(sentence) or _MATH.search(sentence) or _LABEL.match(sentence):
            continue
        found = anchors(sentence)
        details = [x for x in found if x.kind in _DETAIL]
        if not details:
            continue
        new_names = [x for x in found if x.kind == "entity" and _proper_name(x.text) and not known.has(x)]
        folded = " " + " ".join(re.findall(r"\w+", fold(sentence))) + " "
        asked_names = [Anchor("entity", t) for f, t in asked.items() if f" {f} " in folded]
        if not new_names and not (asked_names and not all(known.has(x) for x in details)):
            continue
        names = new_names or asked_names
        shown = [x.text for x in names + details]
        out.append(Check(verifier="facts", claim=sentence.strip()[:500], outcome="unknown", confidence=0.0,
                         span=(a, b), basis="passage",
                         evidence={"kind": "not_checked", "names": [x.text for x in names][:5],
                                   "details": [x.text for x in details][:5]},
                         note=f"states a fact ({', '.join(shown[:3])}) that nothing checked: {reason}"))
        if len(out) >= MAX_UNCHECKED:
            break
    return out


_DIGIT = re.compile(r"\d")
#: Mathematical writing (LaTeX, inline formulas, inequalities): a solution's, not a world claim.
_MATH = re.compile(r"\\[(\[]|\\[a-zA-Z]+\{|\$[^$\s]|[<>≤≥]")
#: A heading or a labelled line ("## Step 1: ...", "Final Answer: ...", "Key Insight: ...").
_LABEL = re.compile(r"\s*(?:#|(?:[A-Z][\w'-]*\s+){0,3}[A-Z][\w'-]*\s*\d*\s*:)")


#: Sentence openers that a capitalised-run heuristic glues to a name ("Since Mr Jackson",
#: "Applying the AM-GM inequality"): read on the math case answers (bench/verdict_ab.py).
_DISCOURSE = frozenset("since thus therefore hence so then first second third next finally also applying apply "
                       "using use considering given let now note step method final key by from in on".split())


def _proper_name(text: str) -> bool:
    """A name of two or more words, each capitalised and longer than one letter, once leading
    discourse and stop words are dropped ("Since Mr" is not one, "Gustave Eiffel" is)."""
    words = text.replace(".", " ").split()
    while words and (words[0].lower() in STOP or words[0].lower() in _DISCOURSE):
        words = words[1:]
    return len(words) >= 2 and all(len(w) > 1 and w[0].isupper() for w in words)
#: Worked arithmetic in a sentence: an operator or "=" between numbers (the arithmetic verifier's).
_WORKED = re.compile(r"[=+*/×÷^]|\\times|\\cdot|\d\s*-\s*\$?\d|\$\s*-")


def _mid_sentence_names(question: str) -> dict[str, str]:
    """The names the question uses in mid-sentence (capitalised runs not opening a sentence),
    as folded words joined by one space -> as written."""
    starts = {a for a, _ in sentences(question)} if question else set()
    return {" ".join(re.findall(r"\w+", fold(t))): t for t, s, _ in entities(question) if s not in starts}
