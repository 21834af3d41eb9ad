"""The word tables the comparison rules read, apart from the rules: negation (:func:`_negated`),
words of opposite sense (:data:`_OPPOSITES`), words that make a claim stronger (:data:`_STRONG`),
currency families (:data:`_CURRENCIES`), same-sense families, class nouns, quantity words, an
opening anaphor; and the name rules built on them: another name in the place of part of a name
(:func:`_rival_name`), amounts in different currencies (:func:`_same_money`)."""

from __future__ import annotations

import re

from verifiers.facts._text import NEGATION, STOP, Quantity


def _negated(text: str) -> bool:
    return bool(NEGATION.search(text))


_ANAPHOR_START = re.compile(r"\s*(?:it|its|he|his|she|her|they|their|this|these|the\s+(?:company|firm|group|"
                            r"organi[sz]ation|business|city|country|team|club|band|university|school|agency))\b",
                            re.IGNORECASE)


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
