"""Find the references in an answer: :func:`extract` ``(text) -> list[CitationClaim]``.

What is recognised (English and Chinese):

* BibTeX blocks (``@article{...}``), parsed with bibtexparser 1.x;
* numbered / bulleted reference lists and lines under a "References" / "参考文献" heading,
  each parsed as one formatted entry: APA, Harvard, MLA, Chicago, IEEE, ACM, Vancouver and
  GB/T 7714 (``[J]``/``[C]``/``[M]`` type marks);
* identifiers anywhere: DOIs (bare, ``doi:``, doi.org URLs; trailing punctuation stripped),
  arXiv IDs (new and old style, with versions, ``arXiv:`` / abs / pdf URLs), ISBNs (checksum
  validated with python-stdnum);
* in-text author-year citations ("(Dosovitskiy et al., 2021)", "Dosovitskiy et al. (ICLR
  2021)", "(Smith & Jones, 2020; Lee, 2019)"), linked to their list entry by first-author
  surname and year; unlinked ones are returned as ``in_text`` claims;
* titles in quotes or title marks in prose (“…”, "…", 《…》, *…*) of at least 4 words (or 4
  CJK characters), with an author-year citation in the same sentence attached when present.

Nothing here fetches anything: URLs in the text are recorded as stated fields only.
Parser choice: refextract (INSPIRE) was measured on the rendered benchmark entries and only
separates titles when they are quoted (APA titles stay in its ``misc`` field), so the
style-aware rules below are used; see bench/results/citations.md for field accuracy.
"""

from __future__ import annotations

import bisect
import html
import re
from dataclasses import dataclass
from functools import lru_cache

from verifiers.citations._records import (
    ARXIV_NEW_RE,
    CitationClaim,
    normalize_arxiv,
    normalize_doi,
    parse_person,
    parse_year,
    split_bibtex_authors,
)

MAX_TEXT = 200_000  #: characters of an answer that are scanned (the rest is ignored)

_MARKER_RE = re.compile(r"^\s*(?:\[\d{1,4}\]|\(\d{1,4}\)|\d{1,4}[.)](?!\d)|[-*•·‣▪]|[-*]\s*\[\d{1,4}\])\s+")
_HEADING_RE = re.compile(
    r"^\s*(?:#+\s*|\*\*)?(references|bibliography|works cited|sources|citations|further reading|"
    r"参考文献|参考资料|引用文献|文献)\s*[:：]?\s*(?:\*\*)?\s*$", re.IGNORECASE)
_DOI_URL_RE = re.compile(r"(?:https?://(?:dx\.)?doi\.org/|\bdoi:\s*|\bDOI:?\s*)(10\.\d{4,9}[^\s\"<>]*)", re.IGNORECASE)
_ARXIV_CTX_RE = re.compile(
    r"(?:arxiv\.org/(?:abs|pdf)/|\barXiv(?:\s+preprint)?(?:\s+arXiv)?\s*[:：]?\s*|10\.48550/arXiv\.)"
    r"((?:[a-z\-]{1,32}(?:\.[A-Z]{2})?/\d{7})|\d{4}\.\d{4,5})(v\d+)?(?:\.pdf)?", re.IGNORECASE)
_ISBN_RE = re.compile(r"\bISBN(?:-1[03])?[:：]?\s*((?:97[89][\s\-]?)?(?:\d[\s\-]?){9}[\dXx])\b")
_URL_RE = re.compile(r"https?://[^\s<>\"'）》]+")
_YEAR_PAREN_RE = re.compile(r"\(\s*((?:19|20|21)\d{2})[a-z]?(?:,\s*[A-Za-z]+\.?(?:\s+\d{1,2})?)?\s*\)\.?|\(n\.d\.\)\.?")
_YEAR_RE = re.compile(r"(?<![\d/.\-])((?:19|20|21)\d{2})[a-z]?(?![\d])")
_QUOTE_RES = [
    re.compile(r"“([^”]{3,400}?)”"),
    re.compile(r"\"([^\"]{3,400}?)\""),
    re.compile(r"《([^》]{2,200}?)》"),
    re.compile(r"«([^»]{3,400}?)»"),
    re.compile(r"(?<![A-Za-z])'(.{10,400}?)'(?=[,.;:](?:\s|$)|\s*$)"),
    re.compile(r"‘(.{10,400}?)’(?=[,.;:](?:\s|$)|\s*$)"),
]
_ITALIC_RE = re.compile(r"(?<![*\w])\*([^*\n]{2,300}?)\*(?![*\w])|(?<![_\w])_([^_\n]{2,300}?)_(?![_\w])")
_ET_AL_RE = re.compile(r",?\s*(?:et\s+al\.?|and\s+others|等人?|et\.\s*al\.?)", re.IGNORECASE)
_CJK_RE = re.compile(r"[\u3400-\u9fff]")
_GBT_RE = re.compile(r"^(?P<au>[^\[\]]+?)[.．]\s*(?P<ti>[^\[\]]+?)\s*\[(?P<ty>[A-Z]{1,2}(?:/OL)?)\]\s*[.．]?\s*(?P<rest>.*)$")
_INITIALS_RE = re.compile(r"^(?:[A-Z][a-z]?\.[\s\-‐]*){1,4}$|^[A-Z]{1,3}$|^(?:[A-Z]\.[\s\-‐]*)*[A-Z]\.?$")
_NAME_WORD = r"[A-Z][\w'’\-]*(?:[-\s](?:[A-Z][\w'’\-]+))?"
#: bounded repeats (at most 3 particles, 40 letters; the arXiv archive name of _ARXIV_CTX_RE,
#: 32): with ``*``/``+`` these patterns, run over the whole answer, backtracked quadratically
#: ("A-A-A-...", "van van ...", "arXiv-arXiv-...": 100 kB held the GIL, so the whole
#: gateway, for minutes)
_SURNAME = r"(?:(?:van|von|de|der|del|da|di|le|la)\s+){0,3}[A-Z][A-Za-z'’\-]{1,40}"
_INTEXT_PAREN_RE = re.compile(r"\(([^()]{3,300}?(?:19|20)\d{2}[a-z]?[^()]{0,40})\)")
_INTEXT_NARR_RE = re.compile(
    rf"\b({_SURNAME})(?:\s+(?:et\s+al\.?|and\s+{_SURNAME}|&\s+{_SURNAME}))?\s*\((?:[A-Za-z]+\s+)?((?:19|20)\d{{2}})[a-z]?\)")
_INTEXT_ITEM_RE = re.compile(
    rf"^\s*(?:e\.g\.,?\s*|see\s+|cf\.\s*)?({_SURNAME})(?:\s+(?:et\s+al\.?|and\s+{_SURNAME}|&\s+{_SURNAME}))?,?\s+(?:[A-Za-z]+\s+)?((?:19|20)\d{{2}})[a-z]?\s*$")


# --------------------------------------------------------------------------- authors


def parse_author_list(s: str) -> tuple[list[str], bool]:
    """Split an author string into names; returns ``(names, et_al)``.

    Handles "Vaswani, A., Shazeer, N., & Parmar, N." (APA), "A. Vaswani, N. Shazeer, and N.
    Parmar" (IEEE), "Jockers, Matthew, and Daniela Witten" (MLA), "Smith JA, Lee K" (Vancouver),
    "张三, 李四, 王五" and "A and B and C" (BibTeX). Returns ``([], False)`` when ``s`` does not
    look like a list of names.
    """
    names, et_al = _parse_author_list(s)
    return list(names), et_al


@lru_cache(maxsize=16384)
def _parse_author_list(s: str) -> tuple[tuple[str, ...], bool]:
    """Cached worker of :func:`parse_author_list` (tuples, so the cache cannot be mutated)."""
    s = (s or "").strip().strip(".,;:").strip()
    if not s:
        return (), False
    et_al = bool(_ET_AL_RE.search(s))
    s = _ET_AL_RE.sub("", s)
    s = re.sub(r"\s*(?:,\s*)?(?:\band\b|&|＆|和|与)\s*", ", ", s)
    s = re.sub(r"[;；，、]", ",", s)
    toks = [t.strip(" .") if not _INITIALS_RE.match(t.strip()) else t.strip() for t in s.split(",")]
    toks = [t for t in toks if t]
    if not toks:
        return (), et_al
    out: list[str] = []
    i = 0
    # MLA / Chicago: "Surname, Given(s)" for the first author only, then "Given Surname"
    if (len(toks) >= 2 and len(toks[0].split()) == 1 and not _INITIALS_RE.match(toks[1])
            and 1 <= len(toks[1].split()) <= 3 and (len(toks) == 2 or len(toks[2].split()) >= 2)
            and not _CJK_RE.search(toks[0])):
        out.append(f"{toks[0]}, {toks[1]}")
        i = 2
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if nxt is not None and _INITIALS_RE.match(nxt) and not _INITIALS_RE.match(t) and len(t.split()) <= 3:
            out.append(f"{t}, {nxt.strip()}")
            i += 2
            continue
        out.append(t)
        i += 1
    names = []
    for n in out:
        if re.search(r"\d{2,}|https?:", n) or len(n.split()) > 5 or len(n) > 60:
            return (), et_al
        if not re.search(r"[A-Za-z\u3400-\u9fff]", n):
            continue
        names.append(n.strip())
    if not all(parse_person(n) for n in names):
        return (), et_al
    return tuple(names), et_al


def _looks_like_authors(s: str) -> bool:
    names, et_al = parse_author_list(s)
    if not names:
        return False
    if _CJK_RE.search(s):
        return all(len(n) <= 4 for n in names)
    # every name should carry a capital letter; titles usually have long lower-case words
    lower_words = sum(1 for w in re.findall(r"\b[a-z]{4,}\b", s) if w not in {"and", "others"})
    return lower_words == 0 or (et_al and lower_words <= 1)


# --------------------------------------------------------------------------- one entry


@dataclass(slots=True)
class _Parsed:
    title: str | None = None
    authors: list[str] | None = None
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


def _clean_title(t: str | None) -> str | None:
    if not t:
        return None
    t = re.sub(r"[*_]{1,2}", "", t).strip()
    t = t.strip(" .,;:\"'“”‘’《》«»")
    t = re.sub(r"\s+", " ", t)
    return t or None


def _clean_venue(v: str | None) -> str | None:
    if not v:
        return None
    v = re.sub(r"[*_]{1,2}", "", v)
    v = re.sub(r"^\s*(?:in[:\s]+|published in\s+)", "", v, flags=re.IGNORECASE)
    v = re.sub(r"^\s*proc\.\s+(?:of\s+(?:the\s+)?)?", "", v, flags=re.IGNORECASE)
    v = re.sub(r"\(pp\.[^)]*\)|\bpp?\.\s*[\d\-–:]+", "", v)
    v = re.sub(r"\bvol(?:ume)?\.?\s*\d+.*$|\bno\.\s*\d+.*$", "", v, flags=re.IGNORECASE)
    v = re.sub(r",?\s*\d+\s*\(\d+\)\s*[:,]?.*$", "", v)    # 12(3), 45-67
    v = re.sub(r"[,.]?\s*(?:19|20|21)\d{2}[a-z]?\b.*$", "", v)  # trailing year and what follows
    v = re.sub(r",\s*\d+[\d\-–:, ]*$", "", v)
    v = v.strip(" .,;:()")
    return v or None


def _split_sentences(s: str) -> list[str]:
    """Split on ". ", "? ", "! " not preceded by an initial or a common abbreviation."""
    parts: list[str] = []
    start = 0
    for m in re.finditer(r"[.?!。](?:\s+|$)", s):
        end = m.start()
        before = s[start:end]
        last = before.split()[-1] if before.split() else ""
        if m.group(0)[0] == "." and (re.fullmatch(r"[A-Z]|[A-Z][a-z]?|(?:[A-Z]\.)+[A-Z]|vs|al|eds?|Proc|Vol|No|pp|Jr|Sr|St|Inc|Int|Conf|J|Trans|Ann|Assoc|Comput|Res|Sci|Eng|Natl|Acad", last)):
            continue
        parts.append(s[start:end + (1 if m.group(0)[0] in "?!" else 0)].strip())
        start = m.end()
    if s[start:].strip():
        parts.append(s[start:].strip())
    return [p for p in parts if p]


def _title_and_venue(rest: str) -> tuple[str | None, str | None]:
    """From the text after the authors/year: the title and the venue."""
    rest = rest.strip(" .,;:")
    it = _ITALIC_RE.search(rest)
    if it:
        ital = (it.group(1) or it.group(2)).strip()
        before = re.sub(r"[.,]?\s*\b(?:In|in)\s*:?$", "", rest[: it.start()].strip(" .,;:")).strip(" .,;:")
        if before:
            return _clean_title(before), _clean_venue(ital)
        after = rest[it.end():].strip(" .,;:")   # APA book / MLA: italic title first
        return _clean_title(ital), _clean_venue(after) if after else None
    parts = _split_sentences(rest)
    if not parts:
        return None, None
    title = parts[0]
    venue = " ".join(parts[1:]) if len(parts) > 1 else None
    if venue is None and "," in title and len(title.split(",")[0].split()) >= 3:
        # Harvard/Vancouver without a full stop between title and journal is rare; keep as title
        pass
    return _clean_title(title), _clean_venue(venue)


def parse_reference(s: str) -> _Parsed:
    """Parse one formatted reference string into fields (best effort; missing fields stay None)."""
    p = _Parsed()
    work = " ".join(html.unescape(s).split())
    work = _MARKER_RE.sub("", work, count=1)

    m = _DOI_URL_RE.search(work)
    if m:
        p.doi = normalize_doi(m.group(1))
        work = (work[: m.start()] + work[m.end():]).strip()
    m = _ARXIV_CTX_RE.search(work)
    if m:
        p.arxiv_id = normalize_arxiv(m.group(1))
        work = (work[: m.start()] + " arXiv " + work[m.end():]).strip()
        if p.doi and p.doi.startswith("10.48550/arxiv."):
            p.arxiv_id = p.arxiv_id or normalize_arxiv(p.doi)
    elif p.doi and p.doi.startswith("10.48550/arxiv."):
        p.arxiv_id = normalize_arxiv(p.doi)
    if not p.doi:
        m = re.search(r"\b(10\.\d{4,9}/\S+)", work)
        if m:
            p.doi = normalize_doi(m.group(1))
            work = (work[: m.start()] + work[m.end():]).strip()
    m = _ISBN_RE.search(work)
    if m:
        p.isbn = _valid_isbn(m.group(1))
        work = (work[: m.start()] + work[m.end():]).strip()
    m = _URL_RE.search(work)
    if m:
        p.url = m.group(0).rstrip(".,;)")
        work = _URL_RE.sub("", work).strip()
    work = re.sub(r"\s*(?:Available|Retrieved)(?: online)?(?: at| from)?:?\s*$", "", work, flags=re.IGNORECASE)
    work = re.sub(r"\s*\[(?:Online|PDF)\]\.?", "", work, flags=re.IGNORECASE)
    work = re.sub(r"\s+", " ", work).strip(" .,;")

    pm = re.search(r"\bpp?\.\s*([\d]+\s*[-–]+\s*[\d]+|\d+)", work) or re.search(r"[:,]\s*(\d+\s*[-–]\s*\d+)\s*\.?\s*$", work)
    if pm:
        p.pages = re.sub(r"\s|–", lambda x: "" if x.group(0).isspace() else "-", pm.group(1))
    vm = re.search(r"\bvol(?:ume)?\.?\s*(\d+)|,\s*(\d{1,4})\s*\(\d+\)", work, re.IGNORECASE)
    if vm:
        p.volume = vm.group(1) or vm.group(2)

    # GB/T 7714: 作者. 题名[J]. 刊名, 年, 卷(期): 页码.
    g = _GBT_RE.match(work)
    if g:
        p.style = "gbt7714"
        names, et_al = parse_author_list(g.group("au"))
        p.authors, p.et_al = names, et_al
        p.title = _clean_title(g.group("ti"))
        rest = g.group("rest")
        ym = _YEAR_RE.search(rest)
        p.year = int(ym.group(1)) if ym else None
        p.venue = _clean_venue(rest.split(",")[0] if "," in rest else rest)
        return p

    q = None
    yp0 = _YEAR_PAREN_RE.search(work)
    apa_first = bool(yp0 and not re.match(r"\s*[\"“'‘«《]", work[yp0.end():]) and _looks_like_authors(work[: yp0.start()]))
    for qr in ([] if apa_first else _QUOTE_RES):
        q = qr.search(work)
        if q and len(q.group(1).split()) >= 2 or (q and _CJK_RE.search(q.group(1))):
            break
        q = None
    if q:
        before, after = work[: q.start()], work[q.end():]
        p.title = _clean_title(q.group(1))
        yb = _YEAR_PAREN_RE.search(before)
        if yb and yb.group(1):
            p.year = int(yb.group(1))
            before = before[: yb.start()]
        yc = re.search(r"[.,]\s*((?:19|20|21)\d{2})[a-z]?[.,]?\s*$", before)
        if yc:
            p.year = int(yc.group(1))
            before = before[: yc.start()]
        if _looks_like_authors(before):
            p.authors, p.et_al = parse_author_list(before)
        ya = _YEAR_RE.findall(after)
        if p.year is None and ya:
            p.year = int(ya[-1])
        it = _ITALIC_RE.search(after)
        venue_src = (it.group(1) or it.group(2)) if it else after
        p.venue = _clean_venue(venue_src)
        p.style = ("ieee" if re.match(r"^\s*(?:[A-Z]\.\s*)+[A-Z]", before.strip()) else
                   "mla" if "," in before.split(" and ")[0] else "chicago")
        if q.re.pattern.startswith("(?<![A-Za-z])'") or q.re.pattern.startswith("‘"):
            p.style = "harvard"
        return p

    yp = _YEAR_PAREN_RE.search(work)
    acm = re.search(r"\.\s+((?:19|20|21)\d{2})[a-z]?\.\s+", work)
    if yp and _looks_like_authors(work[: yp.start()]):
        p.style = "apa"
        names, et_al = parse_author_list(work[: yp.start()])
        p.authors, p.et_al = names, et_al
        p.year = int(yp.group(1)) if yp.group(1) else None
        p.title, p.venue = _title_and_venue(work[yp.end():])
    elif acm and _looks_like_authors(work[: acm.start()]):
        p.style = "acm"
        names, et_al = parse_author_list(work[: acm.start()])
        p.authors, p.et_al = names, et_al
        p.year = int(acm.group(1))
        p.title, p.venue = _title_and_venue(work[acm.end():])
    else:
        # Harvard without parentheses ("Smith, J. 2020. Title. Journal") or generic
        hv = re.match(r"^(.{3,300}?)[,.]?\s+((?:19|20|21)\d{2})[a-z]?[.,]\s+(.*)$", work)
        if hv and _looks_like_authors(hv.group(1)):
            p.style = "harvard"
            names, et_al = parse_author_list(hv.group(1))
            p.authors, p.et_al = names, et_al
            p.year = int(hv.group(2))
            p.title, p.venue = _title_and_venue(hv.group(3))
        else:
            parts = _split_sentences(work)
            for dm in list(re.finditer(r"\.\s+", work))[:8]:
                if _looks_like_authors(work[: dm.start()]) and len(work[dm.end():].split()) >= 2:
                    parts = [work[: dm.start()]] + _split_sentences(work[dm.end():])
                    break
            if parts and _looks_like_authors(parts[0]) and len(parts) >= 2:
                names, et_al = parse_author_list(parts[0])
                p.authors, p.et_al = names, et_al
                p.title = _clean_title(parts[1])
                p.venue = _clean_venue(" ".join(parts[2:])) if len(parts) > 2 else None
                p.style = "vancouver"
            elif parts:
                p.title, p.venue = _title_and_venue(work)
    if p.year is None:
        ys = _YEAR_RE.findall(work)
        if ys:
            p.year = int(ys[-1])
    if p.venue and p.title and p.venue == p.title:
        p.venue = None
    return p


def _valid_isbn(raw: str) -> str | None:
    try:
        from stdnum import isbn as _isbn
    except ImportError:  # pragma: no cover - python-stdnum is a dependency
        return re.sub(r"[\s\-]", "", raw)
    return _isbn.compact(raw) if _isbn.is_valid(raw) else None


# --------------------------------------------------------------------------- whole text


def _lines(text: str) -> list[tuple[int, int, str]]:
    out, pos = [], 0
    for line in text.split("\n"):
        out.append((pos, pos + len(line), line))
        pos += len(line) + 1
    return out


def _accept(p: _Parsed) -> bool:
    if p.doi or p.arxiv_id or p.isbn:
        return True
    if not p.title or (len(p.title) < 8 and not (_CJK_RE.search(p.title) and len(p.title) >= 4)):
        return False
    if len(p.title.split()) < 2 and not _CJK_RE.search(p.title):
        return False
    return bool(p.authors) and (p.year is not None or bool(p.venue))


_SENT_END = re.compile(r"(?<!\bal)(?<!\bet)(?<!\be\.g)(?<![A-Z])[.!?。！？]\s+")
_PROSE_STARTS = {"as", "in", "see", "the", "this", "we", "our", "according", "following", "like", "unlike", "and",
                 "but", "also", "recent", "recently", "earlier", "prior", "previous", "e.g", "cf", "for", "both", "here"}


def _plausible_entry(p: _Parsed) -> bool:
    """Guard for lines without a list marker: the author list must not start with a prose word
    and the title must start like a title (capital, digit, quote or CJK)."""
    if p.authors and fold_first(p.authors[0]) in _PROSE_STARTS:
        return False
    return bool(p.title) and bool(re.match(r"[\w\u3400-\u9fff\"“'‘(«《]", p.title)) and not p.title[:1].islower()


def fold_first(name: str) -> str:
    return (name.split() or [""])[0].strip(".,").lower()


def _claim_from(p: _Parsed, raw: str, span: tuple[int, int], kind: str = "entry") -> CitationClaim:
    return CitationClaim(
        raw=raw, span=span, kind=kind, title=p.title, authors=list(p.authors or []), et_al=p.et_al,
        year=p.year, venue=p.venue, volume=p.volume, pages=p.pages, doi=p.doi, arxiv_id=p.arxiv_id,
        isbn=p.isbn, url=p.url, style=p.style)


def _bibtex_blocks(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in re.finditer(r"@(article|inproceedings|incollection|book|misc|phdthesis|mastersthesis|techreport|"
                         r"proceedings|inbook|unpublished|online|conference|manual)\s*\{", text, re.IGNORECASE):
        depth, i = 0, m.end() - 1
        while i < len(text):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    spans.append((m.start(), i + 1))
                    break
            i += 1
    return spans


_BIB_HEAD = re.compile(r"@(\w+)\s*\{\s*([^,\s]*)\s*,")
_BIB_FIELD = re.compile(r"\s*([A-Za-z][\w\-]*)\s*=\s*")


def _fast_bibtex(block: str) -> dict | None:
    """One simple BibTeX entry -> field dict, or None to fall back to bibtexparser.

    bibtexparser 1.x (pyparsing) takes ~18 ms per entry on this machine, which alone would
    exceed the 10 ms per-citation budget; plain entries (``{..}``, ``".."`` or bare values, no
    ``#`` concatenation, no @string macros) are read here, anything else goes to bibtexparser.
    """
    m = _BIB_HEAD.match(block)
    if not m:
        return None
    out = {"ENTRYTYPE": m.group(1).lower(), "ID": m.group(2)}
    i, n = m.end(), len(block)
    while i < n:
        fm = _BIB_FIELD.match(block, i)
        if not fm:
            rest = block[i:].strip()
            return out if rest in ("}", ",}", "") or rest.startswith("}") else None
        name, i = fm.group(1).lower(), fm.end()
        if i >= n:
            return None
        c = block[i]
        if c == "{":
            depth, j = 0, i
            while j < n:
                if block[j] == "{":
                    depth += 1
                elif block[j] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if depth:
                return None
            val, i = block[i + 1:j], j + 1
        elif c == '"':
            j = block.find('"', i + 1)
            if j < 0:
                return None
            val, i = block[i + 1:j], j + 1
        else:
            vm = re.match(r"[\w.\-]+", block[i:])
            if not vm:
                return None
            val, i = vm.group(0), i + vm.end()
        tail = re.match(r"\s*(,|\}|#)", block[i:])
        if not tail or tail.group(1) == "#":
            return None
        out[name] = " ".join(val.split())
        i += tail.end() if tail.group(1) == "," else tail.start()
        if tail.group(1) == "}":
            return out
    return out


def _parse_bibtex(block: str) -> list[dict]:
    fast = _fast_bibtex(block)
    if fast is not None:
        return [fast]
    import bibtexparser
    from bibtexparser.bparser import BibTexParser

    parser = BibTexParser(common_strings=True)
    parser.ignore_nonstandard_types = False
    try:
        db = bibtexparser.loads(block, parser=parser)
    except Exception:  # malformed BibTeX from a model: skip the block, never crash
        return []
    return db.entries


def _strip_tex(s: str | None) -> str | None:
    if s is None:
        return None
    s = re.sub(r"\\[a-zA-Z]+\s*\{([^{}]*)\}", r"\1", s)
    s = re.sub(r"\\['`^\"~=.uvHcbdt]\{?([A-Za-z])\}?", r"\1", s)
    s = s.replace("{", "").replace("}", "").replace("\\&", "&")
    return " ".join(s.split())


def bibtex_entry_to_claim(e: dict, raw: str, span: tuple[int, int]) -> CitationClaim:
    """A :class:`CitationClaim` from one bibtexparser entry dict."""
    authors = [_strip_tex(a) or "" for a in split_bibtex_authors(e.get("author", ""))]
    et_al = "others" in (e.get("author", "") or "").lower().split()
    doi = normalize_doi(e.get("doi")) if e.get("doi") else None
    arx = normalize_arxiv(e.get("eprint") or "") if e.get("eprint") else None
    if not arx and doi and doi.startswith("10.48550/arxiv."):
        arx = normalize_arxiv(doi)
    return CitationClaim(
        raw=raw, span=span, kind="bibtex", title=_strip_tex(e.get("title")), authors=[a for a in authors if a],
        et_al=et_al, year=parse_year(e.get("year")), venue=_strip_tex(e.get("journal") or e.get("booktitle") or e.get("publisher")),
        volume=e.get("volume"), pages=e.get("pages"), doi=doi, arxiv_id=arx, isbn=_valid_isbn(e["isbn"]) if e.get("isbn") else None,
        url=e.get("url"), style="bibtex")


def _intext_citations(text: str) -> list[tuple[tuple[int, int], str, int, bool]]:
    """(span, first-author surname, year, et_al) for every author-year citation in ``text``."""
    found = []
    for m in _INTEXT_PAREN_RE.finditer(text):
        inner_start = m.start(1)
        pos = 0
        for item in re.split(r";", m.group(1)):
            im = _INTEXT_ITEM_RE.match(item)
            if im and re.search(r"[a-z]", im.group(1)):
                s = inner_start + pos
                found.append(((s, s + len(item)), im.group(1), int(im.group(2)), "et al" in item))
            pos += len(item) + 1
    # parenthetical spans are disjoint and in text order: bisect instead of scanning them all
    # per narrative match (4,000 "Smith et al. (2001)" took 2.5 s); earlier narrative matches
    # cannot contain a later one (finditer matches do not overlap)
    paren = [span for span, *_ in found]
    paren_starts = [a for a, _ in paren]
    for m in _INTEXT_NARR_RE.finditer(text):
        i = bisect.bisect_right(paren_starts, m.start()) - 1
        if i >= 0 and m.start() < paren[i][1]:
            continue
        if m.group(1) in {"In", "The", "See", "And", "For", "Table", "Figure", "Section", "Eq", "Vol"}:
            continue
        found.append(((m.start(), m.end()), m.group(1), int(m.group(2)), "et al" in m.group(0)))
    return found


def extract(text: str) -> list[CitationClaim]:
    """All references in ``text`` as :class:`CitationClaim` records, in text order.

    Raises ``TypeError`` when ``text`` is not a string. Text past :data:`MAX_TEXT` characters is
    ignored. Identifiers and quoted titles inside a recognised entry are not repeated as
    separate claims; in-text citations linked to an entry are recorded in ``entry.in_text``.
    """
    if not isinstance(text, str):
        raise TypeError(f"extract() needs a str, got {type(text).__name__}")
    text = text[:MAX_TEXT]
    claims: list[CitationClaim] = []
    # spans already claimed, sorted by start (bisect), so `free` costs O(log n + nearby spans)
    # instead of a scan of every span: an answer with thousands of reference lines was
    # quadratic (4,000 lines: 3.7 s)
    starts: list[int] = []
    ends: list[int] = []
    longest = [0]

    def free(a: int, b: int) -> bool:
        i = bisect.bisect_left(starts, b)  # spans starting before b: [0, i)
        lo = a - longest[0]  # a span starting at or before lo ends at or before a
        while i > 0:
            i -= 1
            if starts[i] <= lo:
                break
            if ends[i] > a:
                return False
        return True

    def take(span: tuple[int, int]) -> None:
        a, b = span
        i = bisect.bisect_right(starts, a)
        starts.insert(i, a)
        ends.insert(i, b)
        longest[0] = max(longest[0], b - a)

    # 1. BibTeX blocks
    for a, b in _bibtex_blocks(text):
        block = text[a:b]
        for e in _parse_bibtex(block)[:1]:
            c = bibtex_entry_to_claim(e, block, (a, b))
            if c.title or c.doi or c.arxiv_id:
                claims.append(c)
                take((a, b))

    # 2. reference-list entries (numbered / bulleted lines, lines under a References heading)
    lines = _lines(text)
    in_refs = False
    i = 0
    while i < len(lines):
        a, b, line = lines[i]
        if _HEADING_RE.match(line):
            in_refs = True
            i += 1
            continue
        if not line.strip():
            i += 1
            continue
        if re.match(r"^\s*#{1,6}\s", line):
            in_refs = False
        is_item = bool(_MARKER_RE.match(line))
        if (is_item or in_refs) and free(a, b):
            # join indented continuation lines
            j = i + 1
            while j < len(lines) and lines[j][2].strip() and lines[j][2][:1].isspace() and not _MARKER_RE.match(lines[j][2]):
                b = lines[j][1]
                j += 1
            raw = text[a:b]
            p = parse_reference(raw)
            ok = _accept(p) or (p.style in ("ieee", "mla", "chicago", "harvard") and bool(p.title)
                                and len(p.title.split()) >= 3 and bool(p.year or p.venue))
            if ok and not is_item:  # a plain line under a References heading must carry a year or an identifier
                ok = bool(p.year or p.doi or p.arxiv_id or p.isbn) and _plausible_entry(p)
            if ok:
                lead = len(raw) - len(raw.lstrip())
                claims.append(_claim_from(p, raw.strip(), (a + lead, b)))
                take((a, b))
            i = j
            continue
        # a stand-alone line that is a whole formatted reference (no marker)
        if free(a, b) and len(line) < 600 and (_YEAR_PAREN_RE.search(line) or _DOI_URL_RE.search(line)):
            p = parse_reference(line)
            if (_accept(p) and p.authors and p.title and _plausible_entry(p)
                    and p.style in ("apa", "acm", "harvard", "gbt7714", "ieee", "mla", "chicago")):
                lead = len(line) - len(line.lstrip())
                claims.append(_claim_from(p, line.strip(), (a + lead, b)))
                take((a, b))
        i += 1

    # 3. identifiers in prose
    for m in _DOI_URL_RE.finditer(text):
        if free(m.start(), m.end()):
            doi = normalize_doi(m.group(1))
            if doi:
                arx = normalize_arxiv(doi) if doi.startswith("10.48550/arxiv.") else None
                claims.append(CitationClaim(raw=m.group(0), span=(m.start(), m.end()), kind="identifier", doi=doi, arxiv_id=arx))
                take((m.start(), m.end()))
    for m in re.finditer(r"(?<![\w/.])(10\.\d{4,9}/[^\s\"<>]+)", text):
        if free(m.start(), m.end()):
            doi = normalize_doi(m.group(1))
            if doi:
                arx = normalize_arxiv(doi) if doi.startswith("10.48550/arxiv.") else None
                claims.append(CitationClaim(raw=m.group(0), span=(m.start(), m.end()), kind="identifier", doi=doi,
                                            arxiv_id=arx))
                take((m.start(), m.end()))
    for m in _ARXIV_CTX_RE.finditer(text):
        if free(m.start(), m.end()):
            arx = normalize_arxiv(m.group(1))
            if arx:
                claims.append(CitationClaim(raw=m.group(0), span=(m.start(), m.end()), kind="identifier", arxiv_id=arx))
                take((m.start(), m.end()))
    for m in _ISBN_RE.finditer(text):
        if free(m.start(), m.end()):
            isbn = _valid_isbn(m.group(1))
            if isbn:
                claims.append(CitationClaim(raw=m.group(0), span=(m.start(), m.end()), kind="identifier", isbn=isbn))
                take((m.start(), m.end()))

    # 4. in-text author-year citations: link to entries, else keep as in_text claims
    intext = _intext_citations(text)
    unlinked: list[tuple[tuple[int, int], str, int, bool]] = []
    entries = [c for c in claims if c.kind in ("entry", "bibtex")]
    for span, surname, year, et_al in intext:
        if not free(*span):
            continue
        target = None
        for c in entries:
            people = c.people
            if people and people[0].key == parse_person(surname).key and c.year == year:
                target = c
                break
        if target is not None:
            target.in_text.append(span)
        else:
            unlinked.append((span, surname, year, et_al))

    # 5. quoted titles in prose
    for qr in _QUOTE_RES[:4] + [_ITALIC_RE]:
        for m in qr.finditer(text):
            if not free(m.start(), m.end()):
                continue
            title = _clean_title(next(g for g in m.groups() if g))
            if not title:
                continue
            cjk = bool(_CJK_RE.search(title))
            if (cjk and len(title) < 4) or (not cjk and (len(title.split()) < 4 or not title[:1].isupper())):
                continue
            if not cjk and sum(1 for w in title.split() if w[:1].isupper()) < 2 and len(title.split()) > 12:
                continue  # a quoted sentence, not a title
            c = CitationClaim(raw=m.group(0), span=(m.start(), m.end()), kind="title", title=title)
            # attach an author-year citation from the same sentence
            ends = [e.end() for e in _SENT_END.finditer(text, max(0, m.start() - 400), m.start())]
            sent_a = max([text.rfind("\n", 0, m.start()) + 1] + ends)
            # the sentence end is looked for within 400 characters (as its start above): an
            # unbounded find per quoted title was quadratic on text without ". " or newlines
            horizon = min(len(text), m.end() + 400)
            sent_b_candidates = [x for x in (text.find(". ", m.end(), horizon), text.find("\n", m.end(), horizon))
                                 if x != -1]
            sent_b = min(sent_b_candidates) if sent_b_candidates else horizon
            for k, (span, surname, year, et_al) in enumerate(unlinked):
                if sent_a <= span[0] <= sent_b:
                    c.authors, c.et_al, c.year = [surname], True if et_al else False, year
                    c.in_text.append(span)
                    unlinked.pop(k)
                    break
            claims.append(c)
            take((m.start(), m.end()))

    for span, surname, year, et_al in unlinked:
        claims.append(CitationClaim(raw=text[span[0]:span[1]], span=span, kind="in_text", authors=[surname], et_al=et_al, year=year))

    claims.sort(key=lambda c: c.span[0])
    return claims


__all__ = ["extract", "parse_reference", "parse_author_list", "bibtex_entry_to_claim", "ARXIV_NEW_RE"]
