"""Field-by-field comparison of a claimed reference with a source record, and the verdict.

The statuses and their confidences live here and nowhere else (:data:`STATUS_AUTHENTICITY`).
The rules are adapted from the "Source or It Didn't Happen" citation-verification framework:
all of title, authors and venue match -> ``VERIFIED``; title highly similar, first
author and venue match -> ``PARTIALLY_VERIFIED``; title matches but authors or venue do not ->
``LIKELY_HALLUCINATION``; no candidate anywhere -> ``NOT_FOUND``; an identifier
(DOI / arXiv ID) whose record disagrees with the stated fields -> ``CONFLICT``.
The thresholds below were checked on ``shared/cases/citations`` (see bench/results/citations.md);
the confidences are fitted on the same labelled data (:data:`STATUS_AUTHENTICITY`).

Titles are normalised (NFKD accent folding, case, punctuation, English stop words) and compared
with rapidfuzz (``fuzz.ratio`` and ``token_sort_ratio``, 0-100). Authors are compared by surname
and initials; "et al." requires the first author. Years must be equal for VERIFIED: a year off by one
(arXiv version vs venue version -- or a changed year, HALLMARK's ``arxiv_version_mismatch``) is at
best PARTIALLY_VERIFIED, and a CONFLICT when the record is the very preprint cited and the stated
year precedes it (:func:`preprint_year_conflict`); a record whose venue names the stated year
("ICLR 2021" in an arXiv journal_ref) confirms it. Venues go through :data:`VENUE_ALIASES` and a journal
abbreviation matcher (ISO 4 style prefixes: "J. Mach. Learn. Res." ~ "Journal of Machine
Learning Research").
"""

from __future__ import annotations

import datetime as _dt
import re
from functools import lru_cache
from dataclasses import dataclass, field
from typing import Any

from rapidfuzz import fuzz

from verifiers.citations._records import CitationClaim, Person, Record, fold, repository_doi

# --------------------------------------------------------------------------- constants (one place)

VERIFIED = "VERIFIED"
PARTIALLY_VERIFIED = "PARTIALLY_VERIFIED"
LIKELY_HALLUCINATION = "LIKELY_HALLUCINATION"
NOT_FOUND = "NOT_FOUND"
CONFLICT = "CONFLICT"
#: the citation statuses a check reports in ``evidence["status"]``, best first
STATUSES = (VERIFIED, PARTIALLY_VERIFIED, LIKELY_HALLUCINATION, NOT_FOUND, CONFLICT)

#: How likely the cited work is genuine and correctly cited, per status (authenticity). Fitted from
#: the labelled citation cases (Walters & Wilder 2023 + HALLMARK dev, 7,300 renderings) by
#: ``bench/citation_confidence_fit.py``: per status, Laplace's rule of succession (k + 1) / (n + 2)
#: on how often the class the status asserts is right, rounded to 3 decimals; provenance and counts
#: in ``verifiers/citations/confidence_fit.json`` (tests/verifiers/test_citation_confidence_fit.py keeps the two
#: equal). Measured with a library that holds the real works (the ``full`` index): an incomplete
#: library makes NOT_FOUND wrong far more often (64.7% right, bench/results/citations.md held_out).
#: The statuses' names follow the "Source or It Didn't Happen" framework, whose
#: 0.95 / 0.8 / 0.3 these numbers replace.
STATUS_AUTHENTICITY: dict[str, float] = {
    VERIFIED: 0.997,            # 3,402 of 3,410 VALID
    PARTIALLY_VERIFIED: 0.107,  # 14 of 138 VALID: its outcome is ``unknown``, not ``pass`` (verify.py)
    LIKELY_HALLUCINATION: 0.003,  # 1,678 of 1,682 HALLUCINATED
    NOT_FOUND: 0.001,           # 1,784 of 1,785 HALLUCINATED
    CONFLICT: 0.018,            # 275 of 279 HALLUCINATED
}

#: VERIFIED needs :func:`titles_equal` (same words up to case/punctuation/accents, or subtitle
#: dropped); a merely similar title (>= TITLE_HIGH) is at best PARTIALLY_VERIFIED.
#: "Highly similar" title: enough for PARTIALLY_VERIFIED when first author and venue match.
TITLE_HIGH = 90.0
#: Below this no record is a candidate for the claim (a different paper).
TITLE_CANDIDATE = 80.0
#: Author lists this short without "et al." are expected to be complete (see compare()).
SHORT_AUTHOR_LIST = 5
#: Venue strings this similar (token_set_ratio) count as the same venue when no alias applies.
VENUE_FUZZY = 88.0

_STOP = {
    "a", "an", "the", "of", "for", "and", "in", "on", "to", "with", "via", "from", "by", "at",
    "is", "are", "its", "as", "or", "into", "using",
}


# --------------------------------------------------------------------------- titles


@lru_cache(maxsize=65536)
def normalize_title(t: str | None) -> str:
    """Folded, punctuation-free, stop-word-free title ("" for None). CJK characters kept."""
    if not t:
        return ""
    s = fold(t)
    s = re.sub(r"[\\{}$^_]", "", s)
    s = re.sub(r"[^\w\u3400-\u9fff]+", " ", s)
    words = [w for w in s.split() if w not in _STOP]
    return " ".join(words)


@lru_cache(maxsize=65536)
def _light(t: str) -> str:
    s = fold(t).replace("&", " and ")
    s = re.sub(r"[\\{}$^_]", "", s)
    return " ".join(re.sub(r"[^\w\u3400-\u9fff]+", " ", s).split())


_HYPHENS = re.compile(r"(?<=\w)[-\u2010\u2011](?=\w)")


@lru_cache(maxsize=65536)
def _orth(t: str) -> str:
    """:func:`_light` with word-internal hyphens deleted instead of spaced: "pre-training" and
    "pretraining" give the same string, "Schema-Variable" and "Schema Variable" do not."""
    return _light(_HYPHENS.sub("", re.sub(r"[\\{}$^_]", "", fold(t))))


def titles_equal(a: str | None, b: str | None) -> bool:
    """Same title up to case, accents, punctuation, "&"/"and" and a hyphen inside a word
    ("pre-training" = "pretraining") — or one is the other's main title with the subtitle (after
    ":") dropped. Stop words count here: "the risk of" and "risk of" are different titles (a
    HALLMARK near-miss perturbation); so does a hyphen turned into a space or a moved one
    ("Schema Variable" for "Schema-Variable", "Chain of-Thought" for "Chain-of-Thought", both
    HALLMARK near-miss perturbations): see :func:`hyphenation_only`."""
    if not a or not b:
        return False
    oa, ob = _orth(a), _orth(b)
    if oa == ob:
        return True
    for x, y in ((a, b), (b, a)):
        if ":" in x:
            head = x.split(":", 1)[0]
            if len(_light(head).split()) >= 3 and _orth(head) == _orth(y):
                return True
    return False


def subtitle_added(cited: str | None, record: str | None) -> str | None:
    """The subtitle of ``cited`` (after ``:``) when only it keeps the titles apart: the record's
    title is the cited main title alone ("Deep Residual Learning for Image Recognition:
    Applications to Quantum Gravity" for the ResNet paper). A record that confirms the main title
    does not confirm a subtitle it lacks, so such a reference is at most PARTIALLY_VERIFIED. The
    reverse -- the record has a subtitle the citation leaves out -- is a common, honest shortening."""
    if not cited or not record or ":" not in cited or _orth(cited) == _orth(record):
        return None
    head, tail = cited.split(":", 1)
    return tail.strip() if _orth(head) == _orth(record) and tail.strip() else None


def hyphenation_only(a: str | None, b: str | None) -> bool:
    """The titles differ only in hyphens and spaces between the same letters ("Schema Variable" /
    "Schema-Variable", "data set" / "dataset"): the same words, but not :func:`titles_equal`."""
    if not a or not b:
        return False
    return _light(a).replace(" ", "") == _light(b).replace(" ", "") and not titles_equal(a, b)


_FUNCTION_WORDS = _STOP | {"towards", "toward", "through", "within", "without", "over", "under", "between", "about",
                           "against", "among", "upon", "onto", "do", "does", "can", "we", "how", "what", "when", "why"}


def _stem_match(w: str, v: str) -> bool:
    """Same word up to inflection or a typo ("model"/"models", "optimisation"/"optimization")."""
    n = 0
    for x, y in zip(w, v):
        if x != y:
            break
        n += 1
    return n >= 5 or fuzz.ratio(w, v) >= 75


def title_substitutions(stated: str | None, record: str | None) -> list[tuple[str, str]]:
    """Content words of ``stated`` replaced by different content words of ``record``.

    Typos, inflections, function words, added or dropped words do not count; a replaced word does
    ("Contrastive" -> "Comparative", "Reasoning" -> "Inference"): that is how near-miss titles are
    made (HALLMARK ``near_miss_title``, Walters & Wilder's "near-miss" category). Returns
    ``[(stated_word, record_word), ...]`` (pairs in order, best effort).
    """
    if not stated or not record:
        return []
    a = [w for w in _light(stated).split() if w not in _FUNCTION_WORDS]
    b = [w for w in _light(record).split() if w not in _FUNCTION_WORDS]
    a_only = [w for w in a if w not in b]
    b_only = [w for w in b if w not in a]
    a_left = [w for w in a_only if not any(_stem_match(w, v) for v in b_only)]
    b_left = [v for v in b_only if not any(_stem_match(w, v) for w in a_only)]
    return list(zip(a_left, b_left))


def title_similarity(a: str | None, b: str | None) -> float:
    """0-100 similarity of two titles after :func:`normalize_title`.

    The max of ``fuzz.ratio`` and ``fuzz.token_sort_ratio``; a title equal to the other's main
    title (the part before ":" — subtitle dropped) scores 97.
    """
    na, nb = normalize_title(a), normalize_title(b)
    if not na or not nb:
        return 0.0
    if na == nb:
        return 100.0
    score = max(fuzz.ratio(na, nb), fuzz.token_sort_ratio(na, nb))
    for x, y in ((a, b), (b, a)):
        if x and ":" in x:
            main = normalize_title(x.split(":", 1)[0])
            if main and len(main.split()) >= 2 and main == normalize_title(y):
                score = max(score, 97.0)
    return float(score)


# --------------------------------------------------------------------------- authors


_PART_SPLIT = re.compile(r"[\s\-]")


@lru_cache(maxsize=262144)
def _same_person(p: Person, q: Person) -> bool:
    if not p.key or not q.key:
        return False
    surname_ok = p.key == q.key or p.surname == q.surname or (
        len(p.key) > 3 and fuzz.ratio(p.key, q.key) >= 90)
    if not surname_ok:
        # "Boix-Adsera" vs "Adsera"; compound Spanish surnames
        parts_p, parts_q = set(_PART_SPLIT.split(p.surname)), set(_PART_SPLIT.split(q.surname))
        surname_ok = bool(parts_p & parts_q - {""})
    if not surname_ok:
        return False
    if p.initials and q.initials:
        return p.initials[0] == q.initials[0]
    return True


@dataclass(slots=True)
class AuthorComparison:
    """Result of comparing stated authors with a record's authors.

    ``verdict``: ``match`` (every stated author is in the record, and the list is complete or
    cut with "et al."), ``incomplete`` (all stated authors present but the list is shorter than
    the record's without "et al."), ``first_author`` (first author matches, others do not),
    ``mismatch`` (first author differs), ``unknown`` (no authors on one side).
    """

    verdict: str
    matched: int = 0
    stated: int = 0
    record: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "matched": self.matched, "stated": self.stated, "record": self.record}


def compare_authors(stated: list[Person], et_al: bool, record: list[Person]) -> AuthorComparison:
    """Compare author lists by surname + first initial (see :class:`AuthorComparison`)."""
    if not stated or not record:
        return AuthorComparison("unknown", 0, len(stated), len(record))
    first_ok = _same_person(stated[0], record[0])
    used: set[int] = set()
    matched = 0
    for p in stated:
        for j, q in enumerate(record):
            if j not in used and _same_person(p, q):
                used.add(j)
                matched += 1
                break
    n, m = len(stated), len(record)
    if not first_ok:
        # a stated list that is a reordering of the same people is still the same author set
        if matched == n == m and n > 1:
            return AuthorComparison("first_author", matched, n, m)
        return AuthorComparison("mismatch", matched, n, m)
    if matched == n and (n == m or et_al or n > m):
        return AuthorComparison("match", matched, n, m)
    if matched == m and n > m:
        # every author the source lists is stated, in a longer list: the source truncated it
        return AuthorComparison("match", matched, n, m)
    if matched == n and n < m:
        return AuthorComparison("incomplete", matched, n, m)
    return AuthorComparison("first_author", matched, n, m)


# --------------------------------------------------------------------------- venues

#: Canonical venue -> aliases (folded). Sources: the venues' own names and DBLP's short names.
VENUE_ALIASES: dict[str, tuple[str, ...]] = {
    "neurips": ("neurips", "nips", "advances in neural information processing systems",
                "conference on neural information processing systems", "neural information processing systems",
                "adv neural inf process syst"),
    "iclr": ("iclr", "international conference on learning representations"),
    "icml": ("icml", "international conference on machine learning", "proceedings of machine learning research icml"),
    "cvpr": ("cvpr", "ieee cvf conference on computer vision and pattern recognition",
             "conference on computer vision and pattern recognition", "computer vision and pattern recognition",
             "ieee conference on computer vision and pattern recognition"),
    "iccv": ("iccv", "international conference on computer vision", "ieee cvf international conference on computer vision"),
    "eccv": ("eccv", "european conference on computer vision"),
    "aaai": ("aaai", "aaai conference on artificial intelligence", "proceedings of the aaai conference on artificial intelligence"),
    "ijcai": ("ijcai", "international joint conference on artificial intelligence"),
    "acl": ("acl", "annual meeting of the association for computational linguistics",
            "association for computational linguistics"),
    "emnlp": ("emnlp", "empirical methods in natural language processing",
              "conference on empirical methods in natural language processing"),
    "naacl": ("naacl", "naacl hlt", "north american chapter of the association for computational linguistics"),
    "kdd": ("kdd", "sigkdd", "acm sigkdd conference on knowledge discovery and data mining",
            "knowledge discovery and data mining"),
    "www": ("www", "the web conference", "world wide web conference"),
    "sigir": ("sigir",),
    "uai": ("uai", "uncertainty in artificial intelligence", "conference on uncertainty in artificial intelligence"),
    "aistats": ("aistats", "international conference on artificial intelligence and statistics",
                "artificial intelligence and statistics"),
    "colt": ("colt", "conference on learning theory"),
    "corl": ("corl", "conference on robot learning"),
    "icra": ("icra", "international conference on robotics and automation"),
    "miccai": ("miccai", "medical image computing and computer assisted intervention"),
    "interspeech": ("interspeech",),
    "icassp": ("icassp", "international conference on acoustics speech and signal processing"),
    "jmlr": ("jmlr", "journal of machine learning research", "j mach learn res"),
    "tmlr": ("tmlr", "transactions on machine learning research", "trans mach learn res"),
    "tpami": ("tpami", "ieee transactions on pattern analysis and machine intelligence",
              "ieee trans pattern anal mach intell"),
    "ijcv": ("ijcv", "international journal of computer vision", "int j comput vis"),
    "pnas": ("pnas", "proceedings of the national academy of sciences",
             "proceedings of the national academy of sciences of the united states of america",
             "proc natl acad sci u s a", "proc natl acad sci usa"),
    "nature": ("nature",),
    "science": ("science",),
    "arxiv": ("arxiv", "corr", "arxiv preprint", "arxiv org", "arxiv e prints", "computing research repository"),
    "biorxiv": ("biorxiv", "bioarxiv", "cold spring harbor laboratory"),
    "medrxiv": ("medrxiv",),
}
_ALIAS_INDEX: dict[str, str] = {a: k for k, al in VENUE_ALIASES.items() for a in al}
PREPRINT_VENUES = {"arxiv", "biorxiv", "medrxiv"}
_VENUE_NOISE = re.compile(
    r"\b(proceedings|proc|of|the|in|on|annual|international|conference|conf|workshop|symposium|"
    r"ieee|acm|cvf|\d{1,4}(st|nd|rd|th)?|vol|volume|pp|pages|edition|ed)\b")


def _fold_venue(v: str) -> str:
    s = fold(v)
    s = re.sub(r"[^\w]+", " ", s)
    return " ".join(s.split())


@lru_cache(maxsize=16384)
def canonical_venue(v: str | None) -> str | None:
    """Canonical key of a venue (``"neurips"``), the folded string when unknown, None if empty."""
    if not v or not v.strip():
        return None
    s = _fold_venue(v)
    s = re.sub(r"\b(19|20)\d{2}\b", " ", s)
    s = re.sub(r"\barxiv (preprint )?(arxiv )?\d{4}\s*\d{4,5}\b", "arxiv", s)
    s = " ".join(s.split())
    if s in _ALIAS_INDEX:
        return _ALIAS_INDEX[s]
    stripped = re.sub(r"^(proceedings of the |proc |in )+", "", s)
    if stripped in _ALIAS_INDEX:
        return _ALIAS_INDEX[stripped]
    # "Proc. NeurIPS", "NeurIPS Workshop ..." -> look for an alias as a whole word sequence
    for alias, key in sorted(_ALIAS_INDEX.items(), key=lambda kv: -len(kv[0])):
        if (len(alias) >= 4 or alias in {"acl", "www", "uai"}) and re.search(rf"\b{re.escape(alias)}\b", s):
            return key
    return s


def _abbrev_match(short: str, long: str) -> bool:
    """ISO 4-style abbreviation: each word of ``short`` is a prefix of the next content word of ``long``."""
    sw = [w for w in short.split() if w not in {"of", "the", "and", "in", "on", "for", "s"}]
    lw = [w for w in long.split() if w not in {"of", "the", "and", "in", "on", "for", "s"}]
    if not sw or len(sw) > len(lw) or len(sw) < 2:
        return False
    i = 0
    for w in lw:
        if i < len(sw) and w.startswith(sw[i]):
            i += 1
    return i == len(sw) and len(sw) >= len(lw) - 1


def compare_venues(stated: str | None, record: str | None) -> str:
    """``match`` | ``preprint`` (stated a preprint server for a published work: fine) |
    ``published_vs_preprint`` (stated a venue, record only a preprint) | ``mismatch`` | ``unknown``."""
    cs, cr = canonical_venue(stated), canonical_venue(record)
    if cs is None or cr is None:
        return "unknown"
    if cs == cr:
        return "match"
    if cs in PREPRINT_VENUES:
        return "preprint"
    if cr in PREPRINT_VENUES:
        return "published_vs_preprint"
    a, b = _fold_venue(stated or ""), _fold_venue(record or "")
    if _abbrev_match(a, b) or _abbrev_match(b, a):
        return "match"
    ca = " ".join(_VENUE_NOISE.sub(" ", a).split())
    cb = " ".join(_VENUE_NOISE.sub(" ", b).split())
    if ca and cb and (fuzz.token_set_ratio(ca, cb) >= VENUE_FUZZY or _abbrev_match(ca, cb) or _abbrev_match(cb, ca)):
        return "match"
    return "mismatch"


# --------------------------------------------------------------------------- years


_ARXIV_NEW = re.compile(r"^(\d{2})(\d{2})\.\d{4,5}")
_ARXIV_OLD = re.compile(r"^[a-z][a-z.\-]*(?:\.[a-z]{2})?/(\d{2})\d{5}", re.IGNORECASE)
_BIORXIV_DOI = re.compile(r"^10\.(?:1101|64898)/(\d{4})\.\d{2}\.\d{2}")


def _id_year(arxiv_id: str | None, doi: str | None) -> int | None:
    """The year of a preprint's first version from its identifier: an arXiv ID's YYMM (arXiv
    help "Understanding the arXiv identifier"; old style ``archive/YYMMNNN``) or a bioRxiv /
    medRxiv DOI's posting date (``10.1101/2025.06.26.661885``). None when neither says."""
    aid = arxiv_id
    if not aid and doi and doi.lower().startswith("10.48550/arxiv."):
        aid = doi[len("10.48550/arxiv."):]
    if aid:
        m = _ARXIV_NEW.match(aid)
        if m and 1 <= int(m.group(2)) <= 12:
            return 2000 + int(m.group(1))
        m = _ARXIV_OLD.match(aid)
        if m:
            yy = int(m.group(1))
            return 1900 + yy if yy >= 91 else 2000 + yy
    if doi:
        m = _BIORXIV_DOI.match(doi)
        if m:
            return int(m.group(1))
    return None


def first_version_year(claim: CitationClaim, record: Record) -> int | None:
    """The year of the first version of the preprint ``claim`` cites: from the claim's own arXiv ID
    / arXiv or bioRxiv DOI, else the record's, else the year of an arXiv record (arXiv's
    ``published`` is the first version's date; DBLP's CoRR entries carry the same year). None when
    nothing says -- a bioRxiv record's year alone does not do: it may be a later version's."""
    y = _id_year(claim.arxiv_id, claim.doi) or _id_year(record.arxiv_id, record.doi)
    if y is None and (record.source == "arxiv" or canonical_venue(record.venue) == "arxiv"):
        y = record.year
    return y


def preprint_year_conflict(claim: CitationClaim, record: Record) -> bool:
    """True when the claim cites a preprint as a preprint and states a year before the preprint's
    first version (:func:`first_version_year`): no version of it can carry that year. (A year after
    the first version's may be a later revision's, or the published version's: not a conflict.)

    The claim cites the preprint when its venue is a preprint server (:data:`PREPRINT_VENUES`), or
    it names no venue and states an arXiv ID or an arXiv / bioRxiv DOI.
    """
    if claim.year is None:
        return False
    cv = canonical_venue(claim.venue)
    cites_preprint = cv in PREPRINT_VENUES or (cv is None and bool(
        claim.arxiv_id or repository_doi(claim.doi) in ("arXiv", "bioRxiv/medRxiv")))
    if not cites_preprint:
        return False
    first = first_version_year(claim, record)
    return first is not None and claim.year < first


def compare_years(stated: int | None, record: int | None) -> str:
    """``match`` | ``off_by_one`` (arXiv vs venue version, or a changed year: never VERIFIED, see
    :func:`compare`) | ``mismatch`` | ``unknown``."""
    if stated is None or record is None:
        return "unknown"
    if stated == record:
        return "match"
    if abs(stated - record) == 1:
        return "off_by_one"
    return "mismatch"


# --------------------------------------------------------------------------- verdict


@dataclass(slots=True)
class Comparison:
    """Per-field comparison of a claim with one record plus the resulting status."""

    record: Record
    title: float
    authors: AuthorComparison
    year: str
    venue: str
    status: str
    via_identifier: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def authenticity(self) -> float:
        return STATUS_AUTHENTICITY[self.status]

    def to_evidence(self) -> dict[str, Any]:
        return {
            "title_similarity": round(self.title, 1),
            "authors": self.authors.to_dict(),
            "year": self.year,
            "venue": self.venue,
            "via_identifier": self.via_identifier,
        }


_RANK = {VERIFIED: 5, PARTIALLY_VERIFIED: 4, LIKELY_HALLUCINATION: 3, CONFLICT: 2, NOT_FOUND: 1}


def status_rank(status: str) -> int:
    """Order used to pick the best candidate: VERIFIED > PARTIALLY_VERIFIED > LIKELY_HALLUCINATION > CONFLICT > NOT_FOUND."""
    return _RANK[status]


def compare(claim: CitationClaim, record: Record, *, via_identifier: bool = False, today: _dt.date | None = None) -> Comparison:
    """Compare ``claim`` with ``record`` and decide the status for this pair.

    ``via_identifier`` is True when the record was reached through the claim's DOI / arXiv ID:
    then a title that does not match means the identifier points at another work (``CONFLICT``).
    A year off by one is at best ``PARTIALLY_VERIFIED`` (the record does not confirm the stated
    year), ``CONFLICT`` under :func:`preprint_year_conflict`.
    """
    today = today or _dt.date.today()
    t = title_similarity(claim.title, record.title) if claim.title else 0.0
    if claim.title and t < TITLE_CANDIDATE and not via_identifier:
        # a different paper: skip the (costly) author comparison
        return Comparison(record, t, AuthorComparison("unknown"), "unknown", "unknown", NOT_FOUND, False, [])
    a = compare_authors(claim.people, claim.et_al, record.people)
    y = compare_years(claim.year, record.year)
    if y == "off_by_one" and record.venue and re.search(rf"(?<!\d){claim.year}(?!\d)", record.venue):
        # the record's own venue names the stated year (an arXiv record's journal_ref "ICLR 2021"
        # beside its first version's 2020): the record confirms the year of the version cited
        y = "match"
    v = compare_venues(claim.venue, record.venue)
    notes: list[str] = []
    if y == "off_by_one":
        notes.append(f"year {claim.year} vs {record.year} (preprint and published versions often differ by a year)")
    if claim.year and claim.year > today.year:
        notes.append(f"year {claim.year} is in the future")
    if v == "preprint":
        notes.append("cited as a preprint; the record is the published version")

    same_version_year = preprint_year_conflict(claim, record)
    if same_version_year:
        if y == "off_by_one":
            notes.pop(0)   # not "preprint and published versions differ": the preprint itself is cited
        notes.append(f"year {claim.year} is before {first_version_year(claim, record)}, the year of the cited "
                     "preprint's first version")

    if not claim.title:
        # identifier-only (or authors+year) claim: judge by what was stated
        if via_identifier:
            bad = a.verdict == "mismatch" or y == "mismatch" or same_version_year
            status = CONFLICT if bad else (PARTIALLY_VERIFIED if y == "off_by_one" else VERIFIED)
            if bad:
                notes.append("identifier resolves to a work whose authors/year differ from the stated ones")
        else:
            status = NOT_FOUND
        return Comparison(record, t, a, y, v, status, via_identifier, notes)

    if t < TITLE_CANDIDATE:
        if via_identifier:
            notes.append("identifier resolves to a different work than the stated title")
            return Comparison(record, t, a, y, v, CONFLICT, via_identifier, notes)
        return Comparison(record, t, a, y, v, NOT_FOUND, via_identifier, notes)

    # A list of <= SHORT_AUTHOR_LIST names without "et al." is complete in every major style
    # (IEEE and Vancouver list up to 6, APA up to 20, Chicago up to 10), so a shorter-than-record
    # list that short drops real authors; longer lists are style truncations (PARTIALLY_VERIFIED).
    authors_bad = (a.verdict == "mismatch" or (a.verdict == "incomplete" and a.stated <= SHORT_AUTHOR_LIST)
                   or (a.verdict == "first_author" and a.matched < max(1, a.stated // 2)))
    venue_bad = v in ("mismatch", "published_vs_preprint")
    year_bad = y == "mismatch" or bool(claim.year and claim.year > today.year)
    if a.verdict == "mismatch":
        notes.append("first author differs from the record")
    elif a.verdict == "incomplete":
        notes.append(f"author list cut to {a.stated} of {a.record} without 'et al.'")
    if venue_bad:
        notes.append(f"venue '{claim.venue}' does not match '{record.venue}'")
    if y == "mismatch":
        notes.append(f"year {claim.year} does not match {record.year}")

    exact = titles_equal(claim.title, record.title)
    if exact:
        if same_version_year and not authors_bad and not venue_bad:
            # the very version cited, with a year it cannot have: the record contradicts the claim
            status = CONFLICT
        elif authors_bad or venue_bad or year_bad:
            status = LIKELY_HALLUCINATION
        elif a.verdict in ("match", "unknown") and v in ("match", "unknown", "preprint"):
            # a year off by one is a preprint/published pair as often as a changed year: the record
            # does not confirm the stated year, so the reference is not VERIFIED as written
            status = PARTIALLY_VERIFIED if y == "off_by_one" else VERIFIED
            extra = subtitle_added(claim.title, record.title)
            if extra and status == VERIFIED:
                # the record confirms the main title only: a subtitle it lacks may be made up
                status = PARTIALLY_VERIFIED
                notes.append(f"the cited subtitle '{extra}' is not in the record's title")
        else:  # first author matches, some co-authors differ
            status = PARTIALLY_VERIFIED
    elif t >= TITLE_HIGH:
        subst = title_substitutions(claim.title, record.title)
        if subst and a.verdict in ("match", "first_author", "incomplete"):
            # the real authors under a title with a word swapped: a near-miss title
            status = LIKELY_HALLUCINATION
            notes.append("title word(s) changed: " + ", ".join(f"'{x}' for '{y}'" for x, y in subst[:3]))
        elif not authors_bad and not venue_bad and not year_bad:
            status = PARTIALLY_VERIFIED
            if hyphenation_only(claim.title, record.title):
                notes.append("title differs from the record's in hyphenation / spacing only")
            else:
                notes.append(f"title differs from the record's (similarity {t:.0f})")
        else:
            status = LIKELY_HALLUCINATION
    else:
        # a near-miss title: same authors on a different title is a typical fabrication
        status = LIKELY_HALLUCINATION if a.verdict in ("match", "first_author", "incomplete") else NOT_FOUND
        if status == LIKELY_HALLUCINATION:
            notes.append(f"title only resembles the record's (similarity {t:.0f})")
    if via_identifier and status in (NOT_FOUND,):
        status = CONFLICT
    return Comparison(record, t, a, y, v, status, via_identifier, notes)
