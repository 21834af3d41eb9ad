"""Semantic Scholar Academic Graph API (https://api.semanticscholar.org/graph/v1).

Endpoints used:

* ``GET /graph/v1/paper/DOI:{doi}`` and ``/paper/ARXIV:{id}`` -> one paper object; 404 when unknown.
* ``GET /graph/v1/paper/search/match?query=TITLE`` -> ``{"data": [paper + "matchScore"]}``
  (closest title match); 404 "Title match not found".

Optional API key in the ``x-api-key`` header. ``fields`` requested: title, authors (``name``),
year, venue, publicationVenue (``name``), externalIds (``DOI``, ``ArXiv``), url, abstract (null
when the publisher does not allow it); the single-paper lookups also ask for ``tldr``
(``{"model", "text"}``, the fallback when the abstract is null) -- the search endpoints do not
return it (allenai/s2-folks#161).
"""

from __future__ import annotations

from typing import Any

from verifiers.citations._records import Record, normalize_arxiv, normalize_doi
from verifiers.citations.sources._abstract import from_s2
from verifiers.citations.sources._base import HttpSource, SourceResult, quote_id

FIELDS = "title,authors,year,venue,publicationVenue,externalIds,url,abstract"
PAPER_FIELDS = FIELDS + ",tldr"


def paper_to_record(p: dict[str, Any]) -> Record:
    """A :class:`Record` from one Semantic Scholar paper object."""
    if not isinstance(p, dict):
        raise TypeError("paper is not an object")
    ext = p.get("externalIds") or {}
    venue = p.get("venue") or (p.get("publicationVenue") or {}).get("name")
    abstract, kind = from_s2(p)
    return Record(title=p.get("title") or "", authors=[a.get("name", "") for a in p.get("authors") or [] if a.get("name")],
                  year=p.get("year"), venue=venue or None, doi=normalize_doi(ext.get("DOI") or ""),
                  arxiv_id=normalize_arxiv(ext.get("ArXiv") or "") if ext.get("ArXiv") else None,
                  url=p.get("url"), source="semantic_scholar", abstract=abstract, abstract_kind=kind)


class SemanticScholar(HttpSource):
    """Semantic Scholar papers by DOI, arXiv ID and title match."""

    name = "semantic_scholar"

    def _headers(self) -> dict[str, str]:
        h = super()._headers()
        if self.s.api_key:
            h["x-api-key"] = self.s.api_key.get_secret_value()
        return h

    async def _paper(self, pid: str, key: str) -> SourceResult:
        async def run() -> SourceResult:
            r = await self.get(f"/graph/v1/paper/{quote_id(pid)}", {"fields": PAPER_FIELDS})
            if r.status_code == 404:
                return SourceResult(self.name, "not_found", [], "paper not found")
            if r.status_code != 200:
                return self.bad_status(r)
            return SourceResult(self.name, "found", [paper_to_record(self.json(r))])
        return await self.cached("paper", key, run)

    async def lookup_doi(self, doi: str) -> SourceResult:
        return await self._paper(f"DOI:{doi}", doi)

    async def lookup_arxiv(self, arxiv_id: str) -> SourceResult:
        return await self._paper(f"ARXIV:{arxiv_id}", "arxiv:" + arxiv_id)

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult:
        async def run() -> SourceResult:
            r = await self.get("/graph/v1/paper/search/match", {"query": title, "fields": FIELDS})
            if r.status_code == 404:
                return SourceResult(self.name, "not_found", [], "title match not found")
            if r.status_code != 200:
                return self.bad_status(r)
            recs = [paper_to_record(p) for p in self.json(r).get("data") or []]
            recs = [x for x in recs if x.title]
            return SourceResult(self.name, "found" if recs else "not_found", recs)
        return await self.cached("match", title, run)
