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

from verifiers.facts._passage import Passage
from verifiers.facts.backends._http import HttpBackend
from verifiers.facts.backends._text import clean_text, domain_of, iso_date

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
        body = await self.get_json({"q": query, "count": k, "text_decorations": "false", "result_filter": "web",
                                    **self.params})
        if not isinstance(body, dict):
            raise self._fail("unexpected answer shape (not a JSON object)", 200)
        if body.get("type") == "ErrorResponse" or "error" in body:
            raise self._fail(f"API error{self._detail_of(body)}", 200)
        web = body.get("web")
        if web is None:
            return []  # no web results for this query: the API omits the section
        results = web.get("results") if isinstance(web, dict) else None
        if not isinstance(results, list):
            raise self._fail("unexpected answer shape (web.results is not a list)", 200)
        out: list[Passage] = []
        for r in results:
            if not isinstance(r, dict) or not isinstance(r.get("url"), str):
                continue
            text = clean_text(r.get("description") if isinstance(r.get("description"), str) else "")
            extra = r.get("extra_snippets")
            if isinstance(extra, list):
                more = [clean_text(x) for x in extra if isinstance(x, str)]
                text = " ".join([text, *[m for m in more if m]]).strip()
            if not text:
                continue
            url = r["url"]
            out.append(Passage(text=text, title=clean_text(r.get("title") if isinstance(r.get("title"), str) else ""),
                               url=url, published=iso_date(r.get("page_age")) or iso_date(r.get("age")),
                               source=self.name, domain=domain_of(url)))
            if len(out) >= k:
                break
        return out

    @staticmethod
    def _detail_of(body: dict) -> str:
        err = body.get("error")
        if isinstance(err, dict):
            bits = [str(err[x]) for x in ("code", "detail") if err.get(x)]
            return (": " + " - ".join(bits))[:200] if bits else ""
        return ""
