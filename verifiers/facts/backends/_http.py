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
  inflates to, and is stopped while inflating, :class:`BoundedDecoder`): a larger one is
  "source unavailable", not a gateway that runs out of memory;
* parses nothing on the event loop: :meth:`HttpBackend.fetch` returns the body's bytes, and the
  backends parse and clean them in a worker process (:mod:`verifiers.facts._offload`);
* maps every failure -- timeout, transport error, non-200 status, malformed JSON, an answer
  too large -- to :class:`~verifiers.facts._passage.SourceUnavailable`, never to an empty result.
"""

from __future__ import annotations

import email.utils
import functools
import json
import time
import zlib
from collections.abc import Mapping
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from verifiers.facts import _offload
from verifiers.facts._passage import SourceUnavailable

#: Statuses that mean "slow down": never retried, Retry-After honoured.
BACKOFF_STATUSES = (429, 503)
#: Statuses worth one more try (the request likely never reached the search engine).
TRANSIENT_STATUSES = (500, 502, 504)
#: Largest answer body read, bytes after content decoding. A page of ten search results with
#: snippets is tens of kB (MediaWiki extracts for ten pages: a few hundred kB); 8 MB is far above
#: any honest answer and keeps a misbehaving server from filling the gateway's memory.
MAX_BODY_BYTES = 8 * 1024 * 1024
#: Content codings we ask for (and decode ourselves, bounded: :class:`BoundedDecoder`).
ACCEPT_ENCODING = "gzip, deflate"
#: An error body is read for its message only up to this size.
MAX_DETAIL_BYTES = 64 * 1024


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

    async def _once(self, url: httpx.URL, headers: dict[str, str]) -> tuple[int, httpx.Headers, bytes]:
        """One GET: ``(status, headers, body)``, the body decoded and at most ``max_body_bytes``."""
        self.requests += 1
        limit = self.max_body_bytes
        try:
            async with self.client.stream("GET", url, headers={"Accept-Encoding": ACCEPT_ENCODING, **headers},
                                          timeout=self.timeout_s, follow_redirects=False) as r:
                if r.status_code in TRANSIENT_STATUSES:
                    raise _Transient(f"HTTP {r.status_code}", r.status_code)
                declared = r.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit and "content-encoding" not in r.headers:
                    raise self._fail(f"answer too large ({int(declared)} bytes declared; limit {limit})",
                                     r.status_code)
                decoder = BoundedDecoder(r.headers.get("content-encoding", ""), limit)
                if decoder.unsupported:
                    raise self._fail(f"unsupported Content-Encoding {decoder.unsupported!r}", r.status_code)
                try:
                    async for chunk in r.aiter_raw():  # raw: decoded here, bounded while inflating
                        decoder.feed(chunk)
                    decoder.finish()
                except BodyTooLarge:
                    raise self._fail(f"answer too large (over {limit} bytes decoded)", r.status_code) from None
                except zlib.error as exc:
                    raise _Transient(f"DecodingError: {exc}"[:200]) from exc
        except httpx.TimeoutException as exc:
            raise self._fail(f"timeout after {self.timeout_s:g} s ({type(exc).__name__})") from exc
        except (httpx.TransportError, httpx.DecodingError) as exc:
            raise _Transient(f"{type(exc).__name__}: {exc}"[:200]) from exc
        return r.status_code, r.headers, decoder.body()

    async def fetch(self, params: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> bytes:
        """GET the configured URL with ``params``; the body of a 200 answer as bytes (decoded,
        at most ``max_body_bytes``), not parsed: parsing is CPU work, done by the caller off the
        event loop (:mod:`verifiers.facts._offload`).

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
                        status, rh, body = await self._once(url, hdrs)
                    except _Transient as exc:
                        last = exc
                        raise
        except _Transient:
            assert last is not None
            raise self._fail(f"{last} (after {self.retries + 1} attempt(s))", last.status) from None
        if status in BACKOFF_STATUSES:
            ra = retry_after_s(rh.get("Retry-After"))
            if ra:
                self._quiet_until = time.monotonic() + min(ra, self.max_backoff_s)
            raise self._fail(f"HTTP {status} (rate limited or overloaded"
                             + (f", Retry-After {ra:g} s)" if ra is not None else ")"), status)
        if status != 200:
            raise self._fail(f"HTTP {status}{self._detail(body)}", status)
        return body

    async def get_json(self, params: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> Any:
        """:meth:`fetch`, then the parsed JSON body (parsed off the event loop when large).
        Raises :class:`SourceUnavailable` as :meth:`fetch` does, and for malformed JSON."""
        body = await self.fetch(params, headers)
        return await _offload.run(load_json, body, self.name, size=len(body))

    def _detail(self, body: bytes) -> str:
        """A short reason from an error body (JSON ``error`` objects of the three APIs); only
        small bodies are read (a large one is not parsed on the event loop for a message)."""
        if len(body) > MAX_DETAIL_BYTES:
            return ""
        try:
            data = json.loads(body)
        except Exception:
            return ""
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict):
            bits = [str(err[k]) for k in ("code", "info", "detail") if err.get(k)]
            return (": " + " - ".join(bits))[:200] if bits else ""
        if isinstance(err, str):
            return f": {err}"[:200]
        return ""


class BodyTooLarge(Exception):
    """The decoded body grew past the limit (raised by :class:`BoundedDecoder`)."""


class BoundedDecoder:
    """Content decoding (RFC 9110 §8.4.1: ``gzip``, ``x-gzip``, ``deflate``, identity) that never
    holds more than ``limit`` decoded bytes: each chunk is inflated with ``max_length`` set to
    what is left (zlib), so a gzip bomb stops at ``limit`` + 1 bytes instead of inflating a whole
    network chunk (~64 kB compressed -> up to ~64 MB) first. ``unsupported`` names a coding this
    decoder does not speak (we ask for :data:`ACCEPT_ENCODING` only). Several gzip members one
    after the other are read as one body, as browsers and httpx do."""

    def __init__(self, content_encoding: str, limit: int):
        self.limit = limit
        self._out = bytearray()
        codings = [c.strip().lower() for c in content_encoding.split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        self.unsupported = ""
        self._mode = ""
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            self.unsupported = content_encoding.strip()
        elif codings:
            self._mode = "deflate" if codings[0] == "deflate" else "gzip"
        self._z = self._new() if self._mode else None
        self._first = True

    def _new(self) -> Any:
        return zlib.decompressobj(31 if self._mode == "gzip" else 15)

    def _room(self) -> int:
        return self.limit - len(self._out) + 1  # one byte more than allowed: "over the limit" is seen

    def _put(self, data: bytes) -> None:
        self._out += data
        if len(self._out) > self.limit:
            raise BodyTooLarge()

    def feed(self, chunk: bytes) -> None:
        """Decode one raw chunk; raises :class:`BodyTooLarge` past the limit, ``zlib.error``
        for a corrupt stream."""
        if self._z is None:
            self._put(chunk)
            return
        if self._mode == "deflate" and self._first and chunk:
            self._first = False
            try:  # "deflate" is zlib-wrapped by the RFC, raw deflate by some servers (httpx does the same)
                self._put(self._z.decompress(chunk, self._room()))
            except zlib.error:
                self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                self._put(self._z.decompress(chunk, self._room()))
        else:
            self._put(self._z.decompress(chunk, self._room()))
        self._drain()

    def _drain(self) -> None:
        assert self._z is not None
        while True:
            if self._z.unconsumed_tail:
                self._put(self._z.decompress(self._z.unconsumed_tail, self._room()))
                continue
            if self._mode == "gzip" and self._z.eof and self._z.unused_data.strip(b"\0"):
                rest = self._z.unused_data
                self._z = self._new()  # the next gzip member
                self._put(self._z.decompress(rest, self._room()))
                continue
            return

    def finish(self) -> None:
        """End of the raw body: flush the decoder (a truncated stream stays what was decoded)."""
        if self._z is not None:
            self._put(self._z.flush())

    def body(self) -> bytes:
        """The decoded body so far."""
        return bytes(self._out)


def load_json(body: bytes, name: str = "http") -> Any:
    """``body`` parsed as JSON (UTF-8/16/32 detected, RFC 8259 §8.1); :class:`SourceUnavailable`
    when it is not JSON or nests deeper than the parser allows. Runs in a worker process for a
    large body (module-level, picklable)."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # JSONDecodeError is a ValueError
        raise SourceUnavailable(name, "malformed JSON in a 200 answer", 200) from None
