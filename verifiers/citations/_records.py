"""Records of the citation verifier: what the answer claims and what a source holds.

* :class:`CitationClaim` — one reference found in model text (raw span + whatever fields it
  carries). Produced by :func:`verifiers.citations._extract.extract`.
* :class:`Person` — an author reduced to what references reliably carry: surname + initials.
* :class:`Record` — one bibliographic record returned by a source (Crossref, OpenAlex, arXiv,
  Semantic Scholar, DBLP, the local index), normalised to the same fields.

Identifier syntax follows the registries: DOI ``10.<registrant>/<suffix>`` (DOI Handbook §2.2,
case-insensitive), arXiv identifiers ``YYMM.NNNN[N][vV]`` and old style ``archive[.SC]/YYMMNNN``
(arXiv help "Understanding the arXiv identifier").
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from dataclasses import asdict, dataclass, field
from typing import Any

# --------------------------------------------------------------------------- identifiers

#: DOI: "10." + 4-9 digit registrant (optionally dotted) + "/" + suffix without spaces.
DOI_RE = re.compile(r"\b(10\.\d{4,9}(?:\.\d+)*/[^\s\"'<>{}\[\]|\\^`，。；、）》]+)", re.IGNORECASE)
#: arXiv new style (2007+): YYMM.NNNN (to 1412) or YYMM.NNNNN (from 1501), optional version.
ARXIV_NEW_RE = re.compile(r"(?<![\d.])(\d{4}\.\d{4,5})(v\d+)?(?![\d])")
#: arXiv old style: archive(.subject class)/YYMMNNN, optional version.
ARXIV_OLD_RE = re.compile(
    r"\b((?:astro-ph|cond-mat|gr-qc|hep-ex|hep-lat|hep-ph|hep-th|math-ph|nlin|nucl-ex|nucl-th|"
    r"physics|quant-ph|math|cs|q-bio|q-fin|stat|eess|econ|chao-dyn|cmp-lg|solv-int|patt-sol|"
    r"adap-org|comp-gas|alg-geom|dg-ga|funct-an|q-alg|mtrl-th|supr-con|chem-ph|acc-phys|ao-sci|"
    r"atom-ph|bayes-an|plasm-ph)(?:\.[A-Z]{2})?/\d{7})(v\d+)?\b"
)

_TRAILING_PUNCT = ".,;:)]}>'\"”’»。，；：）》"


def normalize_doi(raw: str | None) -> str | None:
    """Bare lower-case DOI from ``raw`` (bare, ``doi:``-prefixed or a doi.org URL), or None.

    Trailing sentence punctuation is stripped (a DOI ending in ``.`` or ``)`` is almost always
    prose around it); balanced parentheses inside the suffix are kept (``10.1016/S0140-6736(97)11096-0``).
    """
    if not raw:
        return None
    s = raw.strip()
    s = re.sub(r"^(?:https?://)?(?:dx\.)?doi\.org/", "", s, flags=re.IGNORECASE)
    s = re.sub(r"^doi:\s*", "", s, flags=re.IGNORECASE)
    m = DOI_RE.search(s)
    if not m:
        return None
    doi = m.group(1)
    while doi and doi[-1] in _TRAILING_PUNCT:
        if doi[-1] == ")" and doi.count("(") >= doi.count(")"):
            break
        doi = doi[:-1]
    # a DOI never contains whitespace or "..": refuse path tricks outright
    if ".." in doi.split("/", 1)[-1] and re.search(r"(^|/)\.\.(/|$)", doi):
        return None
    return doi.lower() if "/" in doi else None


#: DOI prefixes of repositories and preprint servers, under which a copy or a preprint of any work
#: gets its own DOI (so a work legitimately has one of these *and* a publisher DOI), plus ACM
#: Digital Library's 10.5555, which ACM prints on proceedings it hosts without registering them
#: (NeurIPS, ICML...): such a DOI resolves nowhere yet is what a correct ACM export carries.
#: Only ever used to *suppress* a fabricated-DOI flag. Sources: each service's own DOI pages;
#: 10.64898 is bioRxiv/medRxiv's newer prefix, seen on the real bioRxiv records of
#: shared/cases/citations/raw_crossdomain_valid.jsonl.
REPOSITORY_DOI_PREFIXES: dict[str, str] = {
    "10.48550": "arXiv", "10.1101": "bioRxiv/medRxiv", "10.64898": "bioRxiv/medRxiv", "10.5281": "Zenodo",
    "10.6084": "figshare", "10.31219": "OSF Preprints", "10.31234": "PsyArXiv", "10.31235": "SocArXiv",
    "10.2139": "SSRN", "10.21203": "Research Square", "10.20944": "Preprints.org", "10.36227": "TechRxiv",
    "10.26434": "ChemRxiv", "10.22541": "Authorea", "10.13140": "ResearchGate", "10.5555": "ACM DL (unregistered)",
}


def doi_prefix(doi: str | None) -> str | None:
    """The registrant prefix of a DOI (``"10.1609"`` for ``10.1609/aaai.v35i4.16381``), or None."""
    if not doi or "/" not in doi:
        return None
    p = doi.split("/", 1)[0].lower()
    return p if re.fullmatch(r"10\.\d{4,9}(?:\.\d+)*", p) else None


def repository_doi(doi: str | None) -> str | None:
    """Name of the repository / preprint server whose prefix ``doi`` has (see
    :data:`REPOSITORY_DOI_PREFIXES`), or None."""
    return REPOSITORY_DOI_PREFIXES.get(doi_prefix(doi) or "")


def registered_doi(doi: str) -> str:
    """The DOI as registered, for lookups: arXiv's DataCite DOIs carry no version
    (``10.48550/arxiv.2602.12279v1`` -> ``10.48550/arxiv.2602.12279``; arXiv help "arXiv DOIs"),
    though citations often append one. Other DOIs are returned unchanged."""
    m = re.match(r"(10\.48550/arxiv\.)(.+?)v\d+$", doi, re.IGNORECASE)
    return (m.group(1) + m.group(2)).lower() if m else doi


def normalize_arxiv(raw: str | None) -> str | None:
    """arXiv identifier without version (``2010.11929``, ``hep-th/9901001``) or None.

    Accepts ``arXiv:ID``, ``abs/`` and ``pdf/`` URLs and the ``10.48550/arXiv.ID`` DOI form.
    """
    if not raw:
        return None
    s = raw.strip()
    s = re.sub(r"^10\.48550/arxiv\.", "", s, flags=re.IGNORECASE)
    m = ARXIV_OLD_RE.search(s)
    if m:
        return m.group(1)
    m = ARXIV_NEW_RE.search(s)
    if m:
        yymm = int(m.group(1)[2:4])
        if 1 <= yymm <= 12:
            return m.group(1)
    return None


# --------------------------------------------------------------------------- people

_PARTICLES = {"van", "von", "der", "den", "de", "del", "della", "di", "da", "du", "le", "la", "dos", "das", "ten", "ter", "bin", "al"}
_SUFFIXES = {"jr", "jr.", "sr", "sr.", "ii", "iii", "iv"}
_CJK_RE = re.compile(r"[\u3400-\u9fff]")


@lru_cache(maxsize=65536)
def fold(text: str) -> str:
    """Lower-case ASCII-folded text (accents removed by NFKD decomposition; CJK kept)."""
    t = unicodedata.normalize("NFKD", text)
    t = "".join(c for c in t if not unicodedata.combining(c))
    t = t.replace("ø", "o").replace("Ø", "O").replace("ß", "ss").replace("ł", "l").replace("Ł", "L")
    return t.lower()


@dataclass(slots=True, frozen=True)
class Person:
    """An author as references carry it: folded ``surname`` and ``initials`` (e.g. ``"an"``)."""

    surname: str
    initials: str = ""

    @property
    def key(self) -> str:
        """Last word of the surname (``"van der berg"`` -> ``"berg"``): the robust part."""
        return self.surname.split()[-1] if self.surname else ""

    def display(self) -> str:
        ini = " ".join(f"{c.upper()}." for c in self.initials)
        return f"{self.surname.title()}, {ini}".strip(", ") if ini else self.surname.title()


def _initials_of(given: str) -> str:
    parts = re.split(r"[\s.\-‐]+", given.strip())
    return "".join(p[0] for p in (fold(x) for x in parts) if p and p[0].isalpha())


@lru_cache(maxsize=65536)
def parse_person(name: str) -> Person | None:
    """Parse one author name in any common form into a :class:`Person`.

    Forms: ``"Surname, Given"``, ``"Surname, G. N."``, ``"G. N. Surname"``, ``"Given Surname"``,
    ``"Surname GN"`` (Vancouver), DBLP's ``"Rohit Agrawal 0002"`` and CJK names (first character
    taken as the surname, which holds for the vast majority of Chinese names). Returns None for
    an empty or non-name string.
    """
    n = re.sub(r"\s+\d{4}$", "", (name or "").strip())  # DBLP homonym number
    n = re.sub(r"[{}*†‡]", "", n).strip(" ,.;")
    if not n or n.lower() in {"et al", "others", "et al.", "等"}:
        return None
    if _CJK_RE.search(n) and not re.search(r"[A-Za-z]", n):
        n = n.replace(" ", "").replace("·", "")
        return Person(surname=n[0], initials=fold(n[1:2])) if n else None
    if "," in n:
        sur, _, given = n.partition(",")
        given = given.strip()
        if fold(given).strip(". ") in _SUFFIXES:
            given = ""
        return Person(surname=fold(sur.strip()), initials=_initials_of(given))
    toks = [t for t in n.split() if fold(t).strip(".") not in _SUFFIXES]
    if not toks:
        return None
    if len(toks) == 1:
        return Person(surname=fold(toks[0]).strip("."), initials="")
    # Vancouver "Smith JA": last token is all-caps initials
    if len(toks) >= 2 and re.fullmatch(r"[A-Z]{1,3}", toks[-1]) and not re.fullmatch(r"[A-Z]{1,3}", toks[0]):
        return Person(surname=fold(" ".join(toks[:-1])), initials=fold(toks[-1]))
    i = len(toks) - 1
    while i > 1 and fold(toks[i - 1]).strip(".") in _PARTICLES:
        i -= 1
    return Person(surname=fold(" ".join(toks[i:])).strip("."), initials=_initials_of(" ".join(toks[:i])))


def split_bibtex_authors(s: str) -> list[str]:
    """Split a BibTeX ``author`` field on `` and `` (BibTeX's own separator)."""
    return [a.strip() for a in re.split(r"\s+and\s+", s or "") if a.strip() and a.strip().lower() != "others"]


# --------------------------------------------------------------------------- claims and records


@dataclass(slots=True)
class CitationClaim:
    """One reference found in an answer.

    ``raw`` is the exact text, ``span`` its ``(start, end)`` offsets in the answer. ``kind`` is
    ``entry`` (a reference-list / formatted entry), ``bibtex``, ``identifier`` (a bare DOI, arXiv
    ID or ISBN), ``title`` (a quoted title in prose) or ``in_text`` (an author-year citation
    such as "(Dosovitskiy et al., 2021)"). ``authors`` hold the names as written; ``et_al`` is
    True when the list was cut with "et al." / "等". ``in_text`` lists the spans of in-text
    citations linked to this entry. ``style`` is the detected style (apa, ieee, mla, ...).
    """

    raw: str
    span: tuple[int, int]
    kind: str = "entry"
    title: str | None = None
    authors: list[str] = field(default_factory=list)
    et_al: bool = False
    year: int | None = None
    venue: str | None = None
    volume: str | None = None
    pages: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    isbn: str | None = None
    url: str | None = None
    style: str | None = None
    in_text: list[tuple[int, int]] = field(default_factory=list)

    @property
    def people(self) -> list[Person]:
        return [p for p in (parse_person(a) for a in self.authors) if p]

    def fields(self) -> dict[str, Any]:
        """The stated fields as a JSON-ready dict (what ``Check.found`` carries)."""
        d = {k: v for k, v in asdict(self).items() if k not in ("raw", "span", "in_text") and v not in (None, [], False)}
        return d


@dataclass(slots=True)
class Record:
    """A bibliographic record from one source, normalised.

    ``authors`` are display names as the source gives them; ``source`` names the source
    (``crossref``, ``openalex``, ``arxiv``, ``semantic_scholar``, ``dblp``, ``local``);
    ``retracted`` is True when the source marks the work retracted (Crossref ``updated-by`` /
    ``relation``, OpenAlex ``is_retracted``); ``retraction`` keeps the notice details.
    ``abstract`` is the work's abstract as plain text when the source has one (OpenAlex
    ``abstract_inverted_index`` rebuilt, Semantic Scholar ``abstract`` or ``tldr.text``, Crossref
    ``abstract`` with its JATS markup stripped, arXiv ``summary``, the local index's ``abstract``),
    else None; ``abstract_kind`` says which (``abstract`` | ``tldr``). Neither goes into
    :meth:`to_dict` (a check's ``expected`` stays small); both go into the cache
    (:meth:`to_cache_dict`).
    """

    title: str
    authors: list[str] = field(default_factory=list)
    year: int | None = None
    venue: str | None = None
    doi: str | None = None
    arxiv_id: str | None = None
    url: str | None = None
    source: str = ""
    retracted: bool = False
    retraction: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    abstract: str | None = None
    abstract_kind: str | None = None

    @property
    def people(self) -> list[Person]:
        return [p for p in (parse_person(a) for a in self.authors) if p]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the ``expected`` value of a citation check."""
        d = asdict(self)
        d.pop("extra", None)
        d.pop("abstract", None)
        d.pop("abstract_kind", None)
        if not d.get("retraction"):
            d.pop("retraction", None)
        return d

    def to_cache_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` plus the abstract (when there is one): what the source cache keeps."""
        d = self.to_dict()
        if self.abstract:
            d["abstract"], d["abstract_kind"] = self.abstract, self.abstract_kind
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Record":
        keys = {"title", "authors", "year", "venue", "doi", "arxiv_id", "url", "source", "retracted", "retraction",
                "abstract", "abstract_kind"}
        return cls(**{k: v for k, v in d.items() if k in keys})


def parse_year(v: Any) -> int | None:
    """First 4-digit year 1000-2199 in ``v`` (int or str), else None."""
    if isinstance(v, int):
        return v if 1000 <= v <= 2199 else None
    m = re.search(r"\b(1\d{3}|2[01]\d{2})\b", str(v or ""))
    return int(m.group(1)) if m else None
