"""``searxng``: a self-hosted SearXNG metasearch instance (docs.searxng.org "Search API").

One GET per search: ``{url}?q=Q&format=json&pageno=1`` (``url`` is the instance's ``/search``
endpoint; optional ``categories``, ``engines``, ``language``, ``safesearch``, ``time_range``)
-> ``{"query", "number_of_results", "results": [{"url", "title", "content", "engine",
"publishedDate"?, ...}], "answers", "infoboxes", "suggestions", "unresponsive_engines"}``.

The JSON format must be enabled on the instance (``search.formats: [html, json]`` in
``settings.yml``); otherwise it answers 403, and its limiter answers 429: both are
:class:`SourceUnavailable` ("source unavailable"), never evidence. A result without text
(``content``) is skipped; duplicates of one URL are kept once.
"""

from __future__ import annotations

from typing import Any

import httpx

from verifiers.facts import _offload
from verifiers.facts._passage import Passage, SourceUnavailable
from verifiers.facts.backends._http import HttpBackend, load_json
from verifiers.facts.backends._text import domain_of, iso_date, passage_text, title_text

#: Optional instance parameters passed through from the config (SearXNG Search API).
PASS_THROUGH = ("categories", "engines", "language", "safesearch", "time_range")


class SearxngBackend(HttpBackend):
    """The ``searxng`` backend (module doc). ``url``: the instance's search endpoint, e.g.
    ``http://searx.internal:8080/search`` (a bare base URL gets ``/search``); ``params``: any
    of :data:`PASS_THROUGH`."""

    name = "searxng"

    def __init__(self, url: str, *, timeout_s: float = 5.0, retries: int = 1, params: dict[str, Any] | None = None,
                 user_agent: str | None = None, name: str = "searxng", client: httpx.AsyncClient | None = None):
        self.name = name
        headers = {"Accept": "application/json"}
        if user_agent:
            headers["User-Agent"] = user_agent
        if isinstance(url, str) and httpx.URL(url.strip()).path in ("", "/"):
            url = url.strip().rstrip("/") + "/search"  # the instance's base URL was given
        super().__init__(url, timeout_s=timeout_s, retries=retries, headers=headers, client=client)
        self.params = {k: v for k, v in (params or {}).items() if k in PASS_THROUGH and v is not None}

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages (title + content snippet), engine rank order. Raises
        :class:`SourceUnavailable` for 403 (JSON disabled), 429, other errors, timeouts."""
        query = " ".join(str(query).split())
        if not query or k <= 0:
            return []
        body = await self.fetch({"q": query, "format": "json", "pageno": 1, **self.params})
        # parsing and HTML cleaning are CPU work: off the event loop for a large answer
        return await _offload.run(passages_from, body, k, self.name, size=len(body))


def passages_from(body: bytes, k: int, name: str = "searxng") -> list[Passage]:
    """Up to ``k`` passages from a SearXNG JSON answer (module doc), each within the size bounds
    of :mod:`verifiers.facts.backends._text`. Raises :class:`SourceUnavailable` for a body that
    is not JSON or has no ``results`` list. Pure (runs in a worker process for a large body)."""
    data = load_json(body, name)
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list):
        raise SourceUnavailable(name, "unexpected answer shape (no 'results' list)", 200)
    out: list[Passage] = []
    seen: set[str] = set()
    for r in results:
        if not isinstance(r, dict):
            continue
        url = r.get("url") if isinstance(r.get("url"), str) else None
        text, truncated = passage_text(r.get("content") if isinstance(r.get("content"), str) else "")
        if not text or (url and url in seen):
            continue
        if url:
            seen.add(url)
        out.append(Passage(text=text, title=title_text(r.get("title")), url=url, doc_id=None,
                           published=iso_date(r.get("publishedDate")), source=name, domain=domain_of(url),
                           truncated=truncated))
        if len(out) >= k:
            break
    return out
