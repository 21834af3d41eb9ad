"""OpenAlex (https://api.openalex.org, docs: developers.openalex.org).

Endpoints used:

* ``GET /works/doi:{doi}`` — a single work (external IDs in URN form, "Get a single work");
  404 when unknown. Also the arXiv lookup: OpenAlex's external work IDs are DOI, MAG, PMID and
  PMCID (no arXiv ID), and it holds arXiv preprints under arXiv's DataCite DOI
  ``10.48550/arXiv.<id>``. OpenAlex does not hold every (recent) preprint, so a 404 for an arXiv
  DOI abstains (``None``) instead of saying ``not_found``.
* ``GET /works?search=...&per_page=N`` -> ``{"meta": {"count": N, ...}, "results": [work, ...]}``.

``mailto`` (polite pool) and the optional ``api_key`` go in the query string. Work fields read:
``title`` / ``display_name``, ``authorships[].author.display_name``, ``publication_year``,
``primary_location.source.display_name``, ``doi`` (URL form; a ``10.48550/arxiv.<id>`` DOI gives
the arXiv ID), ``is_retracted``, ``id``, ``abstract_inverted_index`` (rebuilt with every position of
every word, :func:`~verifiers.citations.sources._abstract.from_inverted_index`). No ``select=``:
OpenAlex returns the whole work object, abstract index included, by default.
"""

from __future__ import annotations

from typing import Any

from verifiers.citations._records import Record, normalize_arxiv, normalize_doi, registered_doi
from verifiers.citations.sources._abstract import from_inverted_index
from verifiers.citations.sources._base import HttpSource, SourceResult, quote_id


def work_to_record(w: dict[str, Any]) -> Record:
    """A :class:`Record` from one OpenAlex work object."""
    if not isinstance(w, dict):
        raise TypeError("work is not an object")
    authors = [((a.get("author") or {}).get("display_name") or a.get("raw_author_name") or "")
               for a in w.get("authorships") or []]
    src = ((w.get("primary_location") or {}).get("source") or {})
    doi = normalize_doi(w.get("doi") or "")
    retracted = bool(w.get("is_retracted"))
    abstract = from_inverted_index(w.get("abstract_inverted_index"))
    return Record(title=w.get("title") or w.get("display_name") or "", authors=[a for a in authors if a],
                  year=w.get("publication_year"), venue=src.get("display_name"), doi=doi,
                  arxiv_id=normalize_arxiv(doi) if doi and doi.startswith("10.48550/arxiv.") else None,
                  url=w.get("id"), source="openalex", retracted=retracted,
                  retraction={"type": "retraction", "source": "openalex is_retracted"} if retracted else None,
                  abstract=abstract, abstract_kind="abstract" if abstract else None)


class OpenAlex(HttpSource):
    """OpenAlex works by DOI and full-text search."""

    name = "openalex"

    def _params(self) -> dict[str, str]:
        p = {}
        if self.mailto:
            p["mailto"] = self.mailto
        if self.s.api_key:
            p["api_key"] = self.s.api_key.get_secret_value()
        return p

    async def lookup_doi(self, doi: str) -> SourceResult | None:
        doi = registered_doi(doi)

        async def run() -> SourceResult:
            r = await self.get(f"/works/doi:{quote_id(doi)}", self._params())
            if r.status_code == 404:
                return SourceResult(self.name, "not_found", [], "DOI unknown to OpenAlex")
            if r.status_code != 200:
                return self.bad_status(r)
            return SourceResult(self.name, "found", [work_to_record(self.json(r))])
        res = await self.cached("doi", doi, run)
        if res is not None and res.status == "not_found" and doi.startswith("10.48550/"):
            return None  # OpenAlex lacks many arXiv preprints: its 404 says nothing about the ID
        return res

    async def lookup_arxiv(self, arxiv_id: str) -> SourceResult | None:
        """The arXiv preprint through its DataCite DOI ``10.48550/arXiv.<id>`` (see module doc)."""
        return await self.lookup_doi(f"10.48550/arxiv.{arxiv_id}")

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult:
        async def run() -> SourceResult:
            r = await self.get("/works", {"search": title, "per_page": str(self.s.rows), **self._params()})
            if r.status_code != 200:
                return self.bad_status(r)
            recs = [work_to_record(w) for w in self.json(r)["results"]]
            recs = [x for x in recs if x.title]
            return SourceResult(self.name, "found" if recs else "not_found", recs)
        return await self.cached("search", title, run)
