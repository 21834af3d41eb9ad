"""``wikipedia``: the MediaWiki Action API (any MediaWiki with TextExtracts; Wikipedia by default).

A search is two GETs to the configured ``api.php``; requests to one wiki host go one at a time
across all instances in the process (a lock per event loop and host, API:Etiquette):

1. ``action=query&list=search&srsearch=Q&srlimit=k&srprop=snippet|timestamp`` -> hits
   ``query.search[] = {ns, title, pageid, snippet, timestamp}`` (API:Search);
2. ``action=query&prop=extracts|info&pageids=ID|ID&exintro=1&explaintext=1&exlimit=k&inprop=url``
   -> ``query.pages[] = {pageid, title, extract, fullurl}`` (Extension:TextExtracts; several
   extracts per request need ``exintro``, at most 20).

Both with ``format=json&formatversion=2`` and ``maxlag`` (Manual:Maxlag parameter: a lagged
server answers ``{"error": {"code": "maxlag", "info": ...}}``, with ``Retry-After``, and we
give up rather than wait: the answer is wanted now). Any ``error`` object, 429 or 503 ->
:class:`SourceUnavailable`. The User-Agent must identify the client and give a contact
(Wikimedia User-Agent policy); set ``user_agent`` in the config, the default carries a
placeholder. One passage per hit: the article's lead section as plain text, cut at a
paragraph or sentence boundary near ``max_chars``; a hit without an extract keeps its search
snippet (highlight markup removed). ``published`` is the page's last-edit date (API:Search
``timestamp``), not a publication date.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from typing import Any
from urllib.parse import quote

import httpx

from verifiers.facts import _offload
from verifiers.facts._passage import Passage, SourceUnavailable
from verifiers.facts.backends._http import HttpBackend, load_json
from verifiers.facts.backends._text import (MAX_PASSAGE_CHARS, MAX_RESULT_CHARS, MAX_TITLE_CHARS, domain_of, iso_date,
                                            passage_text)

#: Default User-Agent: names the project; replace the contact placeholder in your config
#: (Wikimedia's User-Agent policy asks for a way to reach the operator).
DEFAULT_USER_AGENT = "veracity-facts/0.1 (https://github.com/veracity; contact: set facts.backends.wikipedia.user_agent)"
#: TextExtracts returns at most 20 intro extracts per request (``exlimit`` max with ``exintro``).
MAX_K = 20

_SENT_END = re.compile(r"(?<=[.!?])\s+")

#: One lock per (event loop, wiki host): backends are made per request, and the etiquette is
#: per client, so every instance talking to one wiki from this process queues on one lock.
_HOST_LOCKS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Lock]]" = \
    weakref.WeakKeyDictionary()


def host_lock(host: str) -> asyncio.Lock:
    """The lock serialising requests to ``host`` on the running event loop."""
    locks = _HOST_LOCKS.setdefault(asyncio.get_running_loop(), {})
    return locks.setdefault(host, asyncio.Lock())


def _cut(text: str, max_chars: int) -> str:
    """``text`` cut to about ``max_chars`` at a paragraph, else sentence, else word boundary."""
    text = text.strip()
    if len(text) <= max_chars:
        return re.sub(r"\s+", " ", text)
    out = ""
    for para in re.split(r"\n\s*\n|\n", text):
        para = re.sub(r"\s+", " ", para).strip()
        if not para:
            continue
        if len(out) + len(para) + 1 <= max_chars:
            out = f"{out} {para}".strip()
            continue
        if not out:  # first paragraph too long: whole sentences
            for sent in _SENT_END.split(para):
                if len(out) + len(sent) + 1 > max_chars:
                    break
                out = f"{out} {sent}".strip()
            if not out:
                out = para[:max_chars].rsplit(" ", 1)[0]
        break
    return out


class WikipediaBackend(HttpBackend):
    """The ``wikipedia`` backend (module doc). ``url``: the wiki's ``api.php`` (default
    ``https://{lang}.wikipedia.org/w/api.php``); ``user_agent``: contactable UA; ``maxlag``:
    seconds (5 is what Wikimedia recommends); ``max_chars``: passage length cap."""

    name = "wikipedia"

    def __init__(self, url: str | None = None, *, lang: str = "en", user_agent: str = DEFAULT_USER_AGENT,
                 timeout_s: float = 5.0, retries: int = 1, maxlag: int | None = 5, max_chars: int = 1500,
                 name: str = "wikipedia", client: httpx.AsyncClient | None = None):
        self.name = name
        if not re.fullmatch(r"[a-z][a-z0-9-]{1,15}", lang or ""):
            raise ValueError(f"{name}: lang must be a Wikipedia language code such as 'en', got {lang!r}")
        self.lang = lang
        super().__init__(url or f"https://{lang}.wikipedia.org/w/api.php", timeout_s=timeout_s, retries=retries,
                         headers={"User-Agent": user_agent, "Accept": "application/json"}, client=client)
        self.maxlag = maxlag
        self.max_chars = int(max_chars)

    async def _api(self, params: dict[str, Any]) -> bytes:
        base = {"action": "query", "format": "json", "formatversion": "2", "maxlag": self.maxlag}
        async with host_lock(self.host):  # one request at a time (API:Etiquette)
            return await self.fetch({**base, **params})

    def _article_base(self) -> str:
        path = self.url.path
        base = path[: -len("/w/api.php")] if path.endswith("/w/api.php") else path.rsplit("/", 1)[0]
        return f"{self.url.scheme}://{self.url.netloc.decode('ascii')}{base}/wiki/"

    def _article_url(self, title: str) -> str:
        return article_url(self._article_base(), title)

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` (<= 20) lead-section passages for ``query``, search rank order.
        Raises :class:`SourceUnavailable` (module doc)."""
        query = " ".join(str(query).split())
        if not query or k <= 0:
            return []
        k = min(int(k), MAX_K)
        body = await self._api({"list": "search", "srsearch": query, "srlimit": k, "srnamespace": 0,
                                "srprop": "snippet|timestamp"})
        # parsing is CPU work: off the event loop for a large answer (both steps)
        hits = await _offload.run(hits_from, body, k, self.name, size=len(body))
        if not hits:
            return []
        body = await self._api({"prop": "extracts|info", "pageids": "|".join(str(h["pageid"]) for h in hits),
                                "exintro": 1, "explaintext": 1, "exlimit": len(hits), "inprop": "url"})
        return await _offload.run(passages_from, body, hits, self.max_chars, self._article_base(), self.name,
                                  size=len(body))


def _query_of(body: bytes, name: str) -> dict[str, Any]:
    """The ``query`` object of an Action API answer; SourceUnavailable for an ``error`` object
    or another shape."""
    data = load_json(body, name)
    if not isinstance(data, dict):
        raise SourceUnavailable(name, "unexpected answer shape (not a JSON object)", 200)
    err = data.get("error")
    if err is not None:
        code = err.get("code", "?") if isinstance(err, dict) else "?"
        info = err.get("info", "") if isinstance(err, dict) else str(err)
        raise SourceUnavailable(name, f"API error {code}: {info}"[:200], 200)
    q = data.get("query")
    if q is None:
        q = {}  # no hits: MediaWiki omits "query" for an empty result set
    if not isinstance(q, dict):
        raise SourceUnavailable(name, "unexpected answer shape ('query' is not an object)", 200)
    return q


def article_url(base: str, title: str) -> str:
    """The article URL for ``title`` under ``base`` (``https://host/wiki/``)."""
    return f"{base}{quote(title.replace(' ', '_'), safe=':/()')}"


def hits_from(body: bytes, k: int, name: str = "wikipedia") -> list[dict[str, Any]]:
    """The first ``k`` hits of an API:Search answer as ``{"pageid", "title", "snippet",
    "timestamp"}`` (title and snippet cut to the bounds of :mod:`verifiers.facts.backends._text`).
    Pure (runs in a worker process for a large body)."""
    hits = _query_of(body, name).get("search") or []
    if not isinstance(hits, list):
        raise SourceUnavailable(name, "unexpected answer shape (query.search is not a list)", 200)
    out = []
    for h in hits:
        if isinstance(h, dict) and isinstance(h.get("pageid"), int) and not isinstance(h.get("pageid"), bool):
            out.append({"pageid": h["pageid"],
                        "title": h["title"][:MAX_TITLE_CHARS] if isinstance(h.get("title"), str) else "",
                        "snippet": h["snippet"][:MAX_RESULT_CHARS + 1] if isinstance(h.get("snippet"), str) else "",
                        "timestamp": h.get("timestamp") if isinstance(h.get("timestamp"), str) else None})
        if len(out) >= k:
            break
    return out


def passages_from(body: bytes, hits: list[dict[str, Any]], max_chars: int, article_base: str,
                  name: str = "wikipedia") -> list[Passage]:
    """One passage per hit (search rank order) from a TextExtracts answer: the lead section cut
    near ``max_chars`` (at most :data:`MAX_PASSAGE_CHARS`), else the hit's snippet. Pure (runs in
    a worker process for a large body)."""
    pages = _query_of(body, name)
    by_id: dict[int, dict[str, Any]] = {}
    raw_pages = pages.get("pages") or []
    if isinstance(raw_pages, dict):  # formatversion=1 shape, should a proxy rewrite it
        raw_pages = list(raw_pages.values())
    if not isinstance(raw_pages, list):
        raw_pages = []
    for p in raw_pages:
        if isinstance(p, dict) and isinstance(p.get("pageid"), int):
            by_id[p["pageid"]] = p
    out: list[Passage] = []
    for h in hits:
        page = by_id.get(h["pageid"], {})
        title = str(page.get("title") or h.get("title") or "")[:MAX_TITLE_CHARS]
        extract = page.get("extract") if isinstance(page.get("extract"), str) else ""
        text = _cut(extract[:MAX_RESULT_CHARS], min(max_chars, MAX_PASSAGE_CHARS)) if extract else ""
        truncated = False
        if not text:
            text, truncated = passage_text(h.get("snippet"))
        if not text:
            continue
        url = page.get("canonicalurl") or page.get("fullurl")
        if not isinstance(url, str) or domain_of(url) is None:
            url = article_url(article_base, title)
        out.append(Passage(text=text, title=title, url=url, doc_id=f"{name}:{h['pageid']}",
                           published=iso_date(h.get("timestamp")), source=name, domain=domain_of(url),
                           truncated=truncated))
    return out
