"""Shared machinery of the network sources: one polite, bounded, retrying HTTP GET.

Every source inherits :class:`HttpSource`, which

* builds URLs only from its configured ``base_url`` + a fixed path with percent-encoded
  identifiers, checks the final host, and never follows redirects (no URL from model text is
  ever fetched: SSRF);
* spaces request starts by ``rate_per_sec`` and caps requests in flight by ``concurrency``;
* retries 429 / 5xx / timeouts / connection errors with exponential backoff (tenacity),
  honouring ``Retry-After`` (capped at 2 s);
* caches definitive answers (``found`` / ``not_found``) through :mod:`verifiers.citations._cache`.

A source answers with a :class:`SourceResult`: ``found`` (records), ``not_found`` (the source
says no such work: 404 or zero hits), ``registered`` (the DOI exists — its registration agency
says so — but this source holds no metadata for it, e.g. a DataCite DOI asked of Crossref),
``error`` (bad status, malformed body) or ``timeout``. Only ``found`` and ``not_found`` are
definitive; the others make that source's say ``unknown``. ``registry`` marks a ``not_found``
from the identifier's registry itself (no registration agency knows the DOI; arXiv has no such
ID): the only kind of "no" that can show an identifier is fabricated.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from verifiers.citations._config import SourceSettings
from verifiers.citations._records import Record

DEFINITIVE = ("found", "not_found")
#: Statuses worth caching: the definitive ones and ``registered`` (a DOI does not stop existing).
CACHEABLE = DEFINITIVE + ("registered",)

#: True while :func:`verifiers.citations._verify` consults the cache alone: :meth:`HttpSource.cached`
#: then answers ``None`` on a miss instead of asking the source.
CACHE_ONLY: contextvars.ContextVar[bool] = contextvars.ContextVar("veracity_citations_cache_only", default=False)


@dataclass(slots=True)
class SourceResult:
    """One source's answer to one query (see module doc for ``status``)."""

    source: str
    status: str
    records: list[Record] = field(default_factory=list)
    detail: str = ""
    registry: bool = False

    @property
    def definitive(self) -> bool:
        return self.status in DEFINITIVE

    def to_cache(self) -> dict[str, Any]:
        return {"status": self.status, "records": [r.to_cache_dict() for r in self.records], "detail": self.detail,
                "registry": self.registry}

    @classmethod
    def from_cache(cls, source: str, d: dict[str, Any]) -> "SourceResult":
        return cls(source, d["status"], [Record.from_dict(r) for r in d.get("records", [])], d.get("detail", "") + " (cached)",
                   bool(d.get("registry")))


class _Retryable(Exception):
    def __init__(self, msg: str, retry_after: float | None = None):
        super().__init__(msg)
        self.retry_after = retry_after


class _RateLimiter:
    """Minimum spacing between request starts, shared across event loops (thread-safe)."""

    def __init__(self, rate_per_sec: float):
        self.interval = 1.0 / rate_per_sec
        self._next = 0.0
        self._lock = threading.Lock()

    async def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            slot = max(now, self._next)
            self._next = slot + self.interval
        if slot > now:
            await asyncio.sleep(slot - now)


def quote_id(identifier: str) -> str:
    """Percent-encode an identifier for a URL path segment ('/' kept for DOIs; '..' refused)."""
    if any(seg in ("", ".", "..") for seg in identifier.split("/")) or any(c in identifier for c in "\r\n\t ?#\\"):
        raise ValueError(f"refusing identifier {identifier!r}")
    return quote(identifier, safe="/:")


class HttpSource:
    """Base class of the network sources. Subclasses set ``name`` and implement the lookups."""

    name = "http"

    def __init__(self, settings: SourceSettings, *, client: httpx.AsyncClient, cache: Any, mailto: str | None,
                 limiter: _RateLimiter, user_agent: str):
        self.s = settings
        self.client = client
        self.cache = cache
        self.mailto = mailto
        self.limiter = limiter
        self.sem = asyncio.Semaphore(settings.concurrency)
        self.host = httpx.URL(settings.base_url).host
        self.user_agent = user_agent

    # -- HTTP -------------------------------------------------------------------------------

    def _headers(self) -> dict[str, str]:
        ua = self.user_agent + (f" mailto:{self.mailto}" if self.mailto else "")
        return {"User-Agent": ua}

    async def _get_once(self, path: str, params: dict[str, Any]) -> httpx.Response:
        url = httpx.URL(self.s.base_url + path, params=params)
        if url.host != self.host:  # defence in depth: never leave the configured host
            raise ValueError(f"refusing to contact {url.host!r}")
        await self.limiter.wait()
        async with self.sem:
            try:
                r = await self.client.get(url, headers=self._headers(), timeout=self.s.timeout, follow_redirects=False)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                raise _Retryable(f"{type(exc).__name__}") from exc
        if r.status_code == 429 or r.status_code >= 500:
            ra = r.headers.get("Retry-After")
            try:
                retry_after = min(float(ra), 2.0) if ra else None
            except ValueError:
                retry_after = None
            raise _Retryable(f"HTTP {r.status_code}", retry_after)
        return r

    async def get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        """GET ``base_url + path`` with retries; raises ``_Retryable`` after the last attempt."""
        params = dict(params or {})
        last: _Retryable | None = None
        wait = wait_exponential(multiplier=self.s.backoff, max=2.0)
        async for attempt in AsyncRetrying(stop=stop_after_attempt(self.s.retries + 1), wait=wait,
                                           retry=retry_if_exception_type(_Retryable), reraise=True):
            with attempt:
                try:
                    return await self._get_once(path, params)
                except _Retryable as exc:
                    last = exc
                    if exc.retry_after:
                        await asyncio.sleep(exc.retry_after)
                    raise
        raise last or _Retryable("no attempt made")  # pragma: no cover

    async def cached(self, op: str, arg: str, fn) -> SourceResult | None:
        """Run ``fn()`` unless a definitive answer for ``(op, arg)`` is cached; map failures.

        Under :data:`CACHE_ONLY` a miss returns ``None`` without asking the source.
        """
        key = f"{self.name}|{op}|{arg}"
        hit = await self.cache.get(key)
        if hit is not None:
            return SourceResult.from_cache(self.name, hit)
        if CACHE_ONLY.get():
            return None
        try:
            res = await fn()
        except _Retryable as exc:
            status = "timeout" if "Timeout" in str(exc) else "error"
            return SourceResult(self.name, status, [], str(exc))
        except ValueError as exc:  # malformed JSON / XML or a refused identifier
            return SourceResult(self.name, "error", [], f"bad response: {exc}"[:200])
        except (KeyError, TypeError, AttributeError, IndexError) as exc:
            return SourceResult(self.name, "error", [], f"unexpected response shape: {type(exc).__name__}")
        if res is not None and res.status in CACHEABLE:
            await self.cache.set(key, res.to_cache())
        return res

    def json(self, r: httpx.Response) -> Any:
        """Parsed JSON body; raises ``ValueError`` for a malformed one."""
        try:
            return r.json()
        except Exception as exc:  # json.JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"malformed JSON from {self.name}") from exc

    def bad_status(self, r: httpx.Response) -> SourceResult:
        return SourceResult(self.name, "error", [], f"HTTP {r.status_code}")

    # -- interface ----------------------------------------------------------------------------

    async def lookup_doi(self, doi: str) -> SourceResult | None:
        """Record(s) for a DOI, or None when this source cannot look DOIs up."""
        return None

    async def lookup_arxiv(self, arxiv_id: str) -> SourceResult | None:
        """Record(s) for an arXiv ID, or None when unsupported."""
        return None

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult | None:
        """Candidate records for a title (+ first author / year hints), or None when unsupported."""
        return None
