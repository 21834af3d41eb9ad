"""DBLP publication search (https://dblp.org/search/publ/api; dblp FAQ "How to use the dblp search API").

Endpoint used: ``GET /search/publ/api?q=...&format=json&h=N`` ->
``{"result": {"hits": {"@total": "N", "hit": [{"@score": ..., "info": {...}}]}}}``.
``info`` fields read: ``title`` (ends with "."), ``authors.author`` (one object or a list of
``{"@pid", "text"}``), ``venue`` (string or list), ``year``, ``doi``, ``ee``, ``url``.
"""

from __future__ import annotations

from typing import Any

from verifiers.citations._records import Record, normalize_doi, parse_year
from verifiers.citations.sources._base import HttpSource, SourceResult


def hit_to_record(info: dict[str, Any]) -> Record:
    """A :class:`Record` from one DBLP hit ``info`` object."""
    if not isinstance(info, dict):
        raise TypeError("hit info is not an object")
    au = (info.get("authors") or {}).get("author") or []
    if isinstance(au, dict):
        au = [au]
    authors = [a.get("text", "") if isinstance(a, dict) else str(a) for a in au]
    venue = info.get("venue")
    if isinstance(venue, list):
        venue = venue[0] if venue else None
    return Record(title=(info.get("title") or "").rstrip("."), authors=[a for a in authors if a],
                  year=parse_year(info.get("year")), venue=venue, doi=normalize_doi(info.get("doi") or ""),
                  url=info.get("url") or info.get("ee"), source="dblp")


class Dblp(HttpSource):
    """DBLP search by title (DBLP has no DOI lookup endpoint)."""

    name = "dblp"

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult:
        async def run() -> SourceResult:
            r = await self.get("/search/publ/api", {"q": title, "format": "json", "h": str(self.s.rows)})
            if r.status_code != 200:
                return self.bad_status(r)
            hits = self.json(r)["result"]["hits"]
            items = hits.get("hit") or []
            recs = [hit_to_record(h["info"]) for h in items]
            recs = [x for x in recs if x.title]
            return SourceResult(self.name, "found" if recs else "not_found", recs)
        return await self.cached("search", title, run)
