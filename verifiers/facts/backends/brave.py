"""``brave``: the Brave Search API, web search (api-dashboard.search.brave.com documentation).

One GET per search: ``https://api.search.brave.com/res/v1/web/search?q=Q&count=k&text_decorations=false
&result_filter=web`` with headers ``X-Subscription-Token: <key>`` and ``Accept: application/json``
-> ``{"type": "search", "query": {...}, "web": {"type": "search", "results": [{"title", "url",
"description", "page_age"?, "age"?, "extra_snippets"?, "meta_url": {...}, ...}]}}``.

Errors come as ``{"type": "ErrorResponse", "error": {"code", "detail", "status", ...}}``: 401/403
(bad or missing subscription token, plan), 422 (bad parameter), 429 (rate or quota limit) ->
:class:`SourceUnavailable`. The key is read from the environment variable named in the config
(default ``BRAVE_API_KEY``), never from the config file. Each search is one billable request
(``count`` at most 20).
"""

from __future__ import annotations

import httpx

from verifiers.facts import _offload
from verifiers.facts._passage import Passage, SourceUnavailable
from verifiers.facts.backends._http import HttpBackend, load_json
from verifiers.facts.backends._text import bounded, domain_of, iso_date, passage_text, title_text

DEFAULT_URL = "https://api.search.brave.com/res/v1/web/search"
#: The API's maximum ``count`` for web search.
MAX_K = 20


class BraveBackend(HttpBackend):
    """The ``brave`` backend (module doc). ``api_key``: the subscription token; ``country`` /
    ``search_lang``: optional API parameters; ``extra_snippets``: ask for up to 5 extra
    excerpts per result (plans that include them) and append them to the passage text."""

    name = "brave"

    def __init__(self, api_key: str, *, url: str = DEFAULT_URL, timeout_s: float = 5.0, retries: int = 1,
                 country: str | None = None, search_lang: str | None = None, extra_snippets: bool = False,
                 name: str = "brave", client: httpx.AsyncClient | None = None):
        self.name = name
        if not api_key:
            raise ValueError(f"{name}: an API key is required")
        super().__init__(url, timeout_s=timeout_s, retries=retries, client=client,
                         headers={"Accept": "application/json", "X-Subscription-Token": api_key})
        self.params = {"country": country, "search_lang": search_lang,
                       "extra_snippets": "true" if extra_snippets else None}

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` (<= 20) passages (title + description), rank order. Raises
        :class:`SourceUnavailable` for 401/429/other errors, timeouts, malformed bodies."""
        query = " ".join(str(query).split())
        if not query or k <= 0:
            return []
        k = min(int(k), MAX_K)
        body = await self.fetch({"q": query, "count": k, "text_decorations": "false", "result_filter": "web",
                                 **self.params})
        # parsing and HTML cleaning are CPU work: off the event loop for a large answer
        return await _offload.run(passages_from, body, k, self.name, size=len(body))

    @staticmethod
    def _detail_of(body: dict) -> str:
        err = body.get("error")
        if isinstance(err, dict):
            bits = [str(err[x]) for x in ("code", "detail") if err.get(x)]
            return (": " + " - ".join(bits))[:200] if bits else ""
        return ""


#: Extra snippets read per result at most (the API sends up to 5).
MAX_EXTRA_SNIPPETS = 5


def passages_from(body: bytes, k: int, name: str = "brave") -> list[Passage]:
    """Up to ``k`` passages from a Brave web-search answer (module doc), each within the size
    bounds of :mod:`verifiers.facts.backends._text`. Raises :class:`SourceUnavailable` for an
    error answer or a body of another shape. Pure (runs in a worker process for a large body)."""
    data = load_json(body, name)
    if not isinstance(data, dict):
        raise SourceUnavailable(name, "unexpected answer shape (not a JSON object)", 200)
    if data.get("type") == "ErrorResponse" or "error" in data:
        raise SourceUnavailable(name, f"API error{BraveBackend._detail_of(data)}", 200)
    web = data.get("web")
    if web is None:
        return []  # no web results for this query: the API omits the section
    results = web.get("results") if isinstance(web, dict) else None
    if not isinstance(results, list):
        raise SourceUnavailable(name, "unexpected answer shape (web.results is not a list)", 200)
    out: list[Passage] = []
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("url"), str):
            continue
        text, truncated = passage_text(r.get("description") if isinstance(r.get("description"), str) else "")
        extra = r.get("extra_snippets")
        if isinstance(extra, list):
            more = [passage_text(x) for x in extra[:MAX_EXTRA_SNIPPETS] if isinstance(x, str)]
            truncated = truncated or any(c for _, c in more) or len(extra) > MAX_EXTRA_SNIPPETS
            text = " ".join([text, *[m for m, _ in more if m]]).strip()
            text, cut = bounded(text)
            truncated = truncated or cut
        if not text:
            continue
        url = r["url"]
        out.append(Passage(text=text, title=title_text(r.get("title")), url=url,
                           published=iso_date(r.get("page_age")) or iso_date(r.get("age")),
                           source=name, domain=domain_of(url), truncated=truncated))
        if len(out) >= k:
            break
    return out
