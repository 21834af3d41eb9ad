"""One bounded, polite JSON GET for the network search backends.

:class:`HttpBackend` is the base of ``wikipedia``, ``searxng`` and ``brave``. It

* contacts only its configured URL: each request is the configured URL plus query
  parameters, the final host is checked, redirects are not followed (a backend takes a query
  string, never a URL, so nothing from model text is ever fetched);
* bounds every request by ``timeout_s`` (connect, read, write and pool, httpx);
* retries only transient failures (connection refused/reset, HTTP 500/502/504) ``retries``
  times with exponential backoff (tenacity). A timeout is not retried (the caller's deadline
  is already being spent) and neither is 429/503: the API asked us to slow down, so the
  backend gives up at once and stays quiet for the ``Retry-After`` it was given (capped at
  ``max_backoff_s``), answering :class:`SourceUnavailable` without a request meanwhile
  (MediaWiki API:Etiquette and Manual:Maxlag parameter; RFC 9110 §10.2.3 ``Retry-After``);
* reads at most ``max_body_bytes`` of an answer (decoded: a gzip bomb counts as what it
  inflates to): a larger one is "source unavailable", not a gateway that runs out of memory;
* maps every failure -- timeout, transport error, non-200 status, malformed JSON, an answer
  too large -- to :class:`~verifiers.facts._passage.SourceUnavailable`, never to an empty result.
"""

from __future__ import annotations

import email.utils
import functools
import time
from collections.abc import Mapping
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from verifiers.facts._passage import SourceUnavailable

#: Statuses that mean "slow down": never retried, Retry-After honoured.
BACKOFF_STATUSES = (429, 503)
#: Statuses worth one more try (the request likely never reached the search engine).
TRANSIENT_STATUSES = (500, 502, 504)
#: Largest answer body read, bytes after content decoding. A page of ten search results with
#: snippets is tens of kB (MediaWiki extracts for ten pages: a few hundred kB); 8 MB is far above
#: any honest answer and keeps a misbehaving server from filling the gateway's memory.
MAX_BODY_BYTES = 8 * 1024 * 1024


@functools.cache
def shared_ssl_context():
    """One TLS context (certifi roots, httpx defaults) for every backend client: building one
    costs ~24 ms, a client with a ready context ~2 ms (measured), and backends are made per
    request. An ``ssl.SSLContext`` is safe to share across clients and threads."""
    return httpx.create_ssl_context()


class _Transient(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


def check_url(url: Any, what: str) -> httpx.URL:
    """``url`` as an :class:`httpx.URL`; ValueError unless it is an absolute http(s) URL."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError(f"{what}: a URL is required")
    try:
        u = httpx.URL(url.strip())
    except Exception as exc:  # httpx.InvalidURL
        raise ValueError(f"{what}: invalid URL {url!r}: {exc}") from None
    if u.scheme not in ("http", "https") or not u.host:
        raise ValueError(f"{what}: {url!r} must be an absolute http(s) URL")
    return u


def retry_after_s(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header: delta-seconds or an HTTP-date (RFC 9110
    §10.2.3); None when absent or unreadable."""
    if not value:
        return None
    v = value.strip()
    try:
        return max(0.0, float(v))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class HttpBackend:
    """Base of the network backends (see module doc).

    ``url``: the configured endpoint (absolute http(s)); ``timeout_s``: per request, seconds;
    ``retries``: extra attempts for transient failures; ``max_backoff_s``: cap on a
    ``Retry-After`` pause; ``headers``: sent with every request; ``client``: an
    ``httpx.AsyncClient`` to share (closed by :meth:`aclose` only when this backend made it).
    """

    name = "http"
    #: The largest answer read (bytes, decoded); see :data:`MAX_BODY_BYTES`.
    max_body_bytes = MAX_BODY_BYTES

    def __init__(self, url: str, *, timeout_s: float = 5.0, retries: int = 1, max_backoff_s: float = 300.0,
                 headers: Mapping[str, str] | None = None, client: httpx.AsyncClient | None = None):
        self.url = check_url(url, self.name)
        self.host = self.url.host
        self.timeout_s = float(timeout_s)
        self.retries = max(0, int(retries))
        self.max_backoff_s = float(max_backoff_s)
        self.headers = dict(headers or {})
        self._own_client = client is None
        self.client = client or httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), follow_redirects=False,
                                                 verify=shared_ssl_context())
        self._quiet_until = 0.0
        #: HTTP requests sent (for cost accounting: "network calls per search").
        self.requests = 0

    async def aclose(self) -> None:
        """Close the HTTP client if this backend created it."""
        if self._own_client:
            await self.client.aclose()

    # -- one request --------------------------------------------------------------------------

    def _fail(self, message: str, status: int | None = None) -> SourceUnavailable:
        return SourceUnavailable(self.name, message, status)

    async def _once(self, url: httpx.URL, headers: dict[str, str]) -> httpx.Response:
        self.requests += 1
        limit = self.max_body_bytes
        try:
            async with self.client.stream("GET", url, headers=headers, timeout=self.timeout_s,
                                          follow_redirects=False) as r:
                if r.status_code in TRANSIENT_STATUSES:
                    raise _Transient(f"HTTP {r.status_code}", r.status_code)
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit and "content-encoding" not in r.headers:
                    raise self._fail(f"answer too large ({int(declared)} bytes declared; limit {limit})",
                                     r.status_code)
                body = bytearray()
                async for chunk in r.aiter_bytes():  # decoded: the limit is on what we would hold
                    body += chunk
                    if len(body) > limit:
                        raise self._fail(f"answer too large (over {limit} bytes)", r.status_code)
        except httpx.TimeoutException as exc:
            raise self._fail(f"timeout after {self.timeout_s:g} s ({type(exc).__name__})") from exc
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}"[:200]) from exc
        # the body as read (already decoded): a plain response the JSON readers below can use
        hdrs = [(k, v) for k, v in r.headers.multi_items()
                if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
        return httpx.Response(r.status_code, headers=hdrs, content=bytes(body), request=r.request)

    async def get_json(self, params: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        """GET the configured URL with ``params``; the parsed JSON body of a 200 answer.

        Raises :class:`SourceUnavailable` for everything else (see module doc); ``status`` is
        the HTTP status when there was one."""
        now = time.monotonic()
        if now < self._quiet_until:
            raise self._fail(f"backing off for {self._quiet_until - now:.0f} s more (server asked: Retry-After)")
        url = self.url.copy_merge_params({k: v for k, v in params.items() if v is not None})
        if url.host != self.host:  # defence in depth: never leave the configured host
            raise self._fail(f"refusing to contact {url.host!r}")
        hdrs = {**self.headers, **(headers or {})}
        last: _Transient | None = None
        try:
            async for attempt in AsyncRetrying(stop=stop_after_attempt(self.retries + 1),
                                               wait=wait_exponential(multiplier=0.2, max=1.0),
                                               retry=retry_if_exception_type(_Transient), reraise=True):
                with attempt:
                    try:
                        r = await self._once(url, hdrs)
                    except _Transient as exc:
                        last = exc
                        raise
        except _Transient:
            assert last is not None
            raise self._fail(f"{last} (after {self.retries + 1} attempt(s))", last.status) from None
        if r.status_code in BACKOFF_STATUSES:
            ra = retry_after_s(r.headers.get("Retry-After"))
            if ra:
                self._quiet_until = time.monotonic() + min(ra, self.max_backoff_s)
            raise self._fail(f"HTTP {r.status_code} (rate limited or overloaded"
                             + (f", Retry-After {ra:g} s)" if ra is not None else ")"), r.status_code)
        if r.status_code != 200:
            raise self._fail(f"HTTP {r.status_code}{self._detail(r)}", r.status_code)
        try:
            return r.json()
        except Exception:  # json.JSONDecodeError, UnicodeDecodeError
            raise self._fail("malformed JSON in a 200 answer", 200) from None

    def _detail(self, r: httpx.Response) -> str:
        """A short reason from an error body (JSON ``error`` objects of the three APIs)."""
        try:
            body = r.json()
        except Exception:
            return ""
        err = body.get("error") if isinstance(body, dict) else None
        if isinstance(err, dict):
            bits = [str(err[k]) for k in ("code", "info", "detail") if err.get(k)]
            return (": " + " - ".join(bits))[:200] if bits else ""
        if isinstance(err, str):
            return f": {err}"[:200]
        return ""
