"""arXiv API (https://export.arxiv.org/api/query; arXiv API User's Manual).

Endpoints used:

* ``GET /api/query?id_list=ID&max_results=1`` — one Atom ``<entry>`` per known ID.
* ``GET /api/query?search_query=ti:"..."&max_results=N`` — title search.

The response is an Atom 1.0 feed (namespaces Atom, ``opensearch`` and ``arxiv``); an unknown ID
gives ``opensearch:totalResults`` 0 / no entry; a malformed query gives an entry titled
"Error"; throttling gives a plain-text body. Entry fields read: ``title``, ``author/name``,
``published`` (year), ``id`` (``http://arxiv.org/abs/ID vN``), ``arxiv:journal_ref`` (venue when
published, else "arXiv"), ``arxiv:doi`` (the journal DOI), ``summary`` (the abstract).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from verifiers.citations._records import Record, normalize_arxiv, normalize_doi, parse_year
from verifiers.citations.sources._abstract import clean_text
from verifiers.citations.sources._base import HttpSource, SourceResult

NS = {"a": "http://www.w3.org/2005/Atom", "arxiv": "http://arxiv.org/schemas/atom",
      "opensearch": "http://a9.com/-/spec/opensearch/1.1/"}


def parse_feed(xml_text: str) -> tuple[list[Record], bool]:
    """``(records, error)`` from an arXiv Atom feed; raises ``ValueError`` when it is not XML."""
    if "<!DOCTYPE" in xml_text[:1000] or "<!ENTITY" in xml_text[:4000]:
        raise ValueError("arXiv feed with a DTD refused")
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise ValueError(f"not an Atom feed: {exc}") from exc
    if root.tag != "{http://www.w3.org/2005/Atom}feed":
        raise ValueError("not an Atom feed")
    recs, error = [], False
    for e in root.findall("a:entry", NS):
        title = " ".join((e.findtext("a:title", "", NS) or "").split())
        eid = e.findtext("a:id", "", NS) or ""
        if title == "Error" or "/api/errors" in eid:
            error = True
            continue
        if not title:
            continue
        jref = e.findtext("arxiv:journal_ref", None, NS)
        summary = clean_text(e.findtext("a:summary", "", NS))
        recs.append(Record(
            title=title, authors=[" ".join((a.findtext("a:name", "", NS) or "").split()) for a in e.findall("a:author", NS)],
            year=parse_year(e.findtext("a:published", "", NS)), venue=" ".join(jref.split()) if jref else "arXiv",
            doi=normalize_doi(e.findtext("arxiv:doi", "", NS) or ""), arxiv_id=normalize_arxiv(eid), url=eid,
            source="arxiv", abstract=summary, abstract_kind="abstract" if summary else None))
    return recs, error


class Arxiv(HttpSource):
    """arXiv metadata by ID and by title."""

    name = "arxiv"

    async def _query(self, params: dict[str, str]) -> SourceResult:
        r = await self.get("/api/query", params)
        if r.status_code != 200:
            return self.bad_status(r)
        recs, error = parse_feed(r.text)
        if error and not recs:
            return SourceResult(self.name, "error", [], "arXiv returned an error entry")
        return SourceResult(self.name, "found" if recs else "not_found", recs)

    async def lookup_arxiv(self, arxiv_id: str) -> SourceResult:
        async def run() -> SourceResult:
            res = await self._query({"id_list": arxiv_id, "max_results": "1"})
            res.registry = res.status == "not_found"  # arXiv is the registry of its identifiers
            return res
        return await self.cached("id", arxiv_id, run)

    async def lookup_doi(self, doi: str) -> SourceResult | None:
        m = re.match(r"10\.48550/arxiv\.(.+)$", doi, re.IGNORECASE)
        return await self.lookup_arxiv(normalize_arxiv(m.group(1)) or m.group(1)) if m else None

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult:
        words = re.sub(r"[^\w\s]", " ", title).split()
        q = "ti:\"" + " ".join(words[:20]) + "\""
        return await self.cached("search", q, lambda: self._query({"search_query": q, "max_results": str(self.s.rows)}))
