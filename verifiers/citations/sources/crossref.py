"""Crossref REST API (https://api.crossref.org, docs: github.com/CrossRef/rest-api-doc).

Endpoints used:

* ``GET /works/{doi}`` -> ``{"status": "ok", "message-type": "work", "message": {work}}``;
  404 (body "Resource not found.") when the DOI is not registered with Crossref.
* ``GET /works?query.bibliographic=...&rows=N`` -> ``{"message": {"items": [work, ...],
  "total-results": N}}``.

* ``GET /works/{doi}/agency`` -> ``{"message": {"DOI": ..., "agency": {"id": "datacite", "label":
  "DataCite"}}}``, asked only after a 404 from ``/works/{doi}``: which registration agency holds
  the DOI (Crossref, DataCite, mEDRA, JaLC...). A 404 there means no agency knows the DOI: only
  then is the DOI reported ``not_found`` with ``registry=True``; a DOI held by another agency (or
  by Crossref without a public record) is ``registered``: it exists, its metadata is elsewhere.

All carry ``mailto`` to join the "polite" pool. Work fields read: ``title[0]``, ``author[]``
(``family``/``given`` or ``name``), ``issued.date-parts`` (falling back to ``published-print``,
``published-online``, ``created``), ``container-title[0]``, ``DOI``, ``URL``. Retractions
(api_format.md "Update"; Crossref's Retraction Watch integration): ``updated-by[]`` entries of
type ``retraction`` / ``withdrawal`` / ``removal`` on the retracted work, a ``relation`` key
naming a retraction (``is-retracted-by``), or a title starting with "RETRACTED"; an item whose
own ``update-to[]`` has type ``retraction`` is the retraction notice itself. ``abstract`` (a JATS
XML fragment, present only when the publisher deposited one) becomes plain text
(:func:`~verifiers.citations.sources._abstract.from_jats`); the API returns it without ``select=``.
"""

from __future__ import annotations

from typing import Any

from verifiers.citations._records import Record, normalize_doi, registered_doi
from verifiers.citations.sources._abstract import from_jats
from verifiers.citations.sources._base import HttpSource, SourceResult, quote_id

_RETRACT_TYPES = {"retraction", "withdrawal", "removal", "partial_retraction"}


def _year(w: dict[str, Any]) -> int | None:
    for k in ("issued", "published-print", "published-online", "published", "created"):
        parts = (w.get(k) or {}).get("date-parts") or []
        if parts and parts[0] and parts[0][0]:
            try:
                return int(parts[0][0])
            except (TypeError, ValueError):
                continue
    return None


def work_to_record(w: dict[str, Any]) -> Record:
    """A :class:`Record` from one Crossref work object (see module doc for the fields)."""
    if not isinstance(w, dict):
        raise TypeError("work is not an object")
    titles = w.get("title") or []
    title = titles[0] if titles else ""
    subtitle = (w.get("subtitle") or [None])[0]
    if subtitle and subtitle.lower() not in title.lower():
        title = f"{title}: {subtitle}"
    authors = []
    for a in w.get("author") or []:
        if a.get("family"):
            authors.append(f"{a['family']}, {a.get('given', '')}".strip(", "))
        elif a.get("name"):
            authors.append(a["name"])
    venue = (w.get("container-title") or [None])[0] or (w.get("event") or {}).get("name")
    retraction = None
    for u in w.get("updated-by") or []:
        if str(u.get("type", "")).lower() in _RETRACT_TYPES:
            retraction = {"type": u.get("type"), "notice_doi": u.get("DOI"), "source": u.get("source"),
                          "date": ((u.get("updated") or {}).get("date-parts") or [[None]])[0]}
    for k, rels in (w.get("relation") or {}).items():
        if "retract" in k.lower():
            ids = [r.get("id") for r in rels if isinstance(r, dict)] if isinstance(rels, list) else []
            retraction = retraction or {"type": k, "notice_doi": ids[0] if ids else None}
    if title.upper().startswith("RETRACTED"):
        retraction = retraction or {"type": "retraction", "notice_doi": None, "source": "title"}
    notice = any(str(u.get("type", "")).lower() in _RETRACT_TYPES for u in w.get("update-to") or [])
    abstract = from_jats(w.get("abstract"))
    return Record(title=title, authors=authors, year=_year(w), venue=venue, doi=normalize_doi(w.get("DOI")),
                  url=w.get("URL"), source="crossref", retracted=retraction is not None, retraction=retraction,
                  extra={"type": w.get("type"), "is_retraction_notice": notice},
                  abstract=abstract, abstract_kind="abstract" if abstract else None)


class Crossref(HttpSource):
    """Crossref works by DOI and bibliographic search."""

    name = "crossref"

    def _params(self) -> dict[str, str]:
        return {"mailto": self.mailto} if self.mailto else {}

    async def lookup_doi(self, doi: str) -> SourceResult:
        doi = registered_doi(doi)

        async def run() -> SourceResult:
            r = await self.get(f"/works/{quote_id(doi)}", self._params())
            if r.status_code == 404:
                return await self._agency(doi)
            if r.status_code != 200:
                return self.bad_status(r)
            return SourceResult(self.name, "found", [work_to_record(self.json(r)["message"])])
        return await self.cached("doi", doi, run)

    async def _agency(self, doi: str) -> SourceResult:
        """After a 404 from ``/works/{doi}``: is the DOI registered anywhere (``/agency``)?"""
        r = await self.get(f"/works/{quote_id(doi)}/agency", self._params())
        if r.status_code == 404:
            return SourceResult(self.name, "not_found", [], "DOI not registered with any registration agency",
                                registry=True)
        if r.status_code != 200:
            return self.bad_status(r)
        agency = self.json(r)["message"]["agency"]
        label = str(agency.get("label") or agency.get("id") or "an agency")[:40]
        return SourceResult(self.name, "registered", [], f"DOI registered with {label}; no Crossref metadata")

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult:
        q = " ".join([title] + (authors[:1] if authors else []) + ([str(year)] if year else []))

        async def run() -> SourceResult:
            params = {"query.bibliographic": q, "rows": str(self.s.rows), **self._params()}
            r = await self.get("/works", params)
            if r.status_code != 200:
                return self.bad_status(r)
            items = self.json(r)["message"]["items"]
            recs = [work_to_record(w) for w in items if w.get("title")]
            return SourceResult(self.name, "found" if recs else "not_found", recs)
        return await self.cached("search", q, run)

    async def lookup_isbn(self, isbn: str) -> SourceResult:
        async def run() -> SourceResult:
            r = await self.get("/works", {"filter": f"isbn:{isbn}", "rows": "3", **self._params()})
            if r.status_code != 200:
                return self.bad_status(r)
            recs = [work_to_record(w) for w in self.json(r)["message"]["items"] if w.get("title")]
            return SourceResult(self.name, "found" if recs else "not_found", recs)
        return await self.cached("isbn", isbn, run)
