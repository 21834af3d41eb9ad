"""The OpenAI-compatible upstream: any server with the OpenAI HTTP API (``base_url`` + optional ``api_key``).

Non-stream chat completions go through :mod:`proxy.upstreams.http1` (an asyncio protocol over
``httptools``: 55-105 us CPU per exchange here vs 266-326 us for aiohttp, the largest item of the
gateway's hop -- bench/results/client.md, gateway.md); streams and the other ``/v1/*``
pass-through routes use one shared ``aiohttp.ClientSession`` per process (chosen over httpx by
measurement, BENCH-NOTES.md: 3,496 vs 563 req/s at 32 connections on this machine).

Retries: this module is the one layer that retries, and only failures to *connect* (the request
never reached the upstream), ``limits.connect_retries`` times with a short exponential back-off
(tenacity). A request that reached the upstream is never re-sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

import aiohttp
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential
from yarl import URL

from proxy._asgi import memory
from proxy.config import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, UpstreamConfig
from proxy.observability.log import scrub_secrets
from proxy.redaction import scrub_text
from proxy.upstreams import http1
from proxy.upstreams.protocol import Tenant, Timing, UpstreamStream
from proxy.wire.errors import UpstreamError
from proxy.wire.json import dumps, loads

__all__ = ["ERROR_BODY_LIMIT", "OpenAIUpstream", "json_object", "relay_headers", "tenant_headers"]

_T = TypeVar("_T")


#: Largest upstream *error* body relayed (bytes); a larger one is replaced by the gateway's own
#: error object: error messages are short, and the body is held in memory to be scrubbed.
ERROR_BODY_LIMIT = 1 << 20

#: response headers relayed from the upstream to the client (lower-case prefixes)
_RELAY_PREFIXES = ("x-ratelimit-", "retry-after", "openai-")


def relay_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> dict[str, str]:
    """The upstream response headers a client may rely on: ``Retry-After(-ms)``,
    ``x-ratelimit-*``, ``openai-*``; the upstream's ``x-request-id`` becomes
    ``x-upstream-request-id`` (the gateway sets its own ``x-request-id``). ``headers``: a
    mapping or ``(name, value)`` pairs; for a repeated name the last value wins. Values are
    scrubbed of the gateway's secrets (:func:`proxy.redaction.scrub_text`)."""
    out: dict[str, str] = {}
    # a list of pairs (proxy.upstreams.http1's answers) is taken as it is: isinstance against
    # the Mapping ABC costs ~1 us a call, on every answer of the hot path
    for k, v in (headers if type(headers) is list else headers.items() if isinstance(headers, Mapping) else headers):
        lk = k.lower()
        if lk.startswith(_RELAY_PREFIXES):
            out[lk] = scrub_text(v)
        elif lk == "x-request-id":
            out["x-upstream-request-id"] = scrub_text(v)
    return out


def _odd_status(status: int, name: str) -> UpstreamError | None:
    """The 502 ``bad_response`` for an upstream status the gateway cannot relay, else None.
    Relayed are 2xx answers and 4xx/5xx errors; RFC 9110 section 15 defines 100-599 only
    (llhttp and aiohttp parse any three digits, and uvicorn cannot write a status outside
    100-599: its ``STATUS_LINE`` table raises ``KeyError``); a 1xx or 3xx as the final answer
    to a POST (redirects are not followed) is no answer either."""
    if 200 <= status < 300 or 400 <= status < 600:
        return None
    return UpstreamError(502, f"upstream {name!r} answered with HTTP status {status}", reason="bad_response")


def _connect_error(exc: BaseException, name: str) -> UpstreamError:
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)) or getattr(exc, "timed_out", False):
        return UpstreamError(504, f"upstream {name!r} did not accept the connection in time",
                             reason="timeout")
    return UpstreamError(502, f"cannot connect to upstream {name!r}", reason="connect")



def json_object(raw: bytes, upstream: str) -> dict[str, Any]:
    """An upstream answer's body as a JSON object; ``UpstreamError`` 502 ``bad_response`` when
    it is not JSON or not an object (``upstream``: the upstream's name, for the message)."""
    try:
        out = loads(raw)
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise UpstreamError(502, f"upstream {upstream!r} sent a response that is not a JSON object",
                            reason="bad_response")
    return out

class OpenAIUpstream:
    """An OpenAI-compatible HTTP upstream (chat completions, models, any ``/v1/*``).

    Timeouts: ``sock_connect`` = ``connect_timeout_s``; ``sock_read`` = ``read_timeout_s``
    (the longest silence between two reads, so long streams are fine). No total timeout.
    Size: an answer (non-stream body, or one stream's bytes in total) larger than
    ``max_response_bytes`` is refused with a 502 ``too_large`` and its connection closed.
    """

    #: speaks the OpenAI HTTP API itself: an :class:`proxy.upstreams.protocol.HttpUpstream`
    http_api = True

    def __init__(self, config: UpstreamConfig, session: aiohttp.ClientSession, *,
                 connect_timeout_s: float, read_timeout_s: float, connect_retries: int,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
                 max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES,
                 http: http1.Http1Client | None = None) -> None:
        self.name = config.name
        self.max_event_bytes = max_event_bytes
        self.http = http or http1.Http1Client()
        self._pool: http1.Http1Pool | None = None
        self.max_response_bytes = max_response_bytes
        self.config = config
        self.session = session
        self.base_url = (config.base_url or "").rstrip("/")
        #: parsed once (a ``str`` would be parsed into a ``yarl.URL`` by aiohttp on every call)
        self.chat_url = URL(self.base_url + "/chat/completions")
        self.connect_retries = connect_retries
        self.timeout = aiohttp.ClientTimeout(
            total=None,
            sock_connect=config.connect_timeout_s or connect_timeout_s,
            sock_read=config.read_timeout_s or read_timeout_s,
        )
        base = {"Content-Type": "application/json", **config.headers}
        key = config.api_key.get_secret_value() if config.api_key else None
        self._own_headers = {**base, "Authorization": f"Bearer {key}"} if key else None
        self._base_headers = base
        # the chat request's head, built once (http1 adds Host and Content-Length)
        self._chat_head = http1.request_head("POST", self.chat_url, (self._own_headers or base).items())

    async def warm_up(self) -> None:
        """Open the keep-alive pool (and load the TLS trust store) now, not on the first request."""
        self._pool = self.http.pool(self.chat_url)

    def headers(self, auth: str | None, tenant: Tenant = ()) -> dict[str, str]:
        """Request headers: the upstream's own key, else the client's ``Authorization`` (with
        the client's ``tenant`` headers: they go only with the client's own key)."""
        if self._own_headers is not None:
            return self._own_headers
        if auth:
            return {**self._base_headers, "Authorization": auth, **dict(tenant)}
        return self._base_headers

    async def _connect_retrying(self, call: Callable[[], Awaitable[_T]], errors: tuple[type[BaseException], ...]) -> _T:
        """``await call()``, retried ``connect_retries`` times with exponential back-off when it
        raises one of ``errors`` (failures to connect: the request never left). The first
        attempt runs without tenacity (the hot path); a last failure raises
        :class:`UpstreamError` (502 ``connect`` / 504 ``timeout``)."""
        try:
            return await call()
        except errors as first:
            return await self._retry_connect(call, errors, first)

    async def _retry_connect(self, call: Callable[[], Awaitable[_T]], errors: tuple[type[BaseException], ...],
                             first: BaseException) -> _T:
        """The retries of :meth:`_connect_retrying` after its first attempt failed with ``first``
        (tenacity: ``connect_retries`` more attempts, exponential back-off from 50 ms, at most
        1 s apart); raises :class:`UpstreamError` (502 ``connect`` / 504 ``timeout``) with the
        last failure, ``first`` when no retry is configured."""
        if self.connect_retries <= 0:
            raise _connect_error(first, self.name) from None
        try:
            async for attempt in AsyncRetrying(
                retry=retry_if_exception_type(errors),
                stop=stop_after_attempt(self.connect_retries),
                wait=wait_exponential(multiplier=0.05, max=1.0),
                reraise=True,
            ):
                with attempt:
                    return await call()
        except errors as exc:
            raise _connect_error(exc, self.name) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def _post(self, url: URL | str, data: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
        """POST with connect-only retries. Returns an open response (caller releases it)."""
        return await self._connect_retrying(
            lambda: self.session.post(url, data=data, headers=headers, timeout=self.timeout),
            (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError))

    def too_large_error(self, resp: aiohttp.ClientResponse) -> UpstreamError:
        """Close ``resp`` (the rest of the answer is never read) and return the 502 ``too_large``
        :class:`UpstreamError` for an answer over ``max_response_bytes``."""
        resp.close()  # drop the connection: the rest of the answer is never read
        return self._too_large()

    def _too_large(self) -> UpstreamError:
        memory.release_soon()  # the refused answer's reads are freed as the request unwinds
        return UpstreamError(502, f"upstream {self.name!r} sent an answer larger than limits.max_response_bytes "
                             f"({self.max_response_bytes} bytes)", reason="too_large")

    async def read_capped(self, resp: aiohttp.ClientResponse, limit: int | None = None) -> bytes:
        """The whole body of ``resp``, at most ``limit`` bytes (default ``max_response_bytes``).
        A ``Content-Length`` within the limit is read in one call (aiohttp reads exactly that
        many bytes); a larger one, or a chunked body growing past the limit, closes the
        connection and raises :class:`UpstreamError` 502 ``too_large``. Transport errors
        propagate (aiohttp / asyncio exceptions). Does not release ``resp``."""
        limit = self.max_response_bytes if limit is None else limit
        length = resp.content_length
        if length is not None:
            if length > limit:
                raise self.too_large_error(resp)
            return await resp.read()
        parts: list[bytes] = []
        size = 0
        async for chunk in resp.content.iter_any():
            size += len(chunk)
            if size > limit:
                raise self.too_large_error(resp)
            parts.append(chunk)
        return b"".join(parts)

    async def _error_from(self, resp: aiohttp.ClientResponse) -> UpstreamError:
        try:
            body: bytes | None = await self.read_capped(resp, min(self.max_response_bytes, ERROR_BODY_LIMIT))
        except (aiohttp.ClientError, asyncio.TimeoutError, UpstreamError):
            body = None  # lost, or too large to be an error message: the gateway writes its own
        finally:
            resp.release()
        if body:
            body = scrub_secrets(body)  # an upstream may echo the key it was sent
        return UpstreamError(resp.status, f"upstream {self.name!r} answered HTTP {resp.status}",
                             reason=f"http_{resp.status}", body=body, headers=relay_headers(resp.headers))

    async def _exchange(self, data: bytes, auth: str | None, tenant: Tenant = ()) -> http1.Http1Response:
        """POST ``data`` to ``/chat/completions`` through :mod:`proxy.upstreams.http1` and return the
        whole response; connect failures are retried like :meth:`_post`'s. Raises
        :class:`UpstreamError` (connect) or :class:`http1.Http1Error` (mapped by
        :class:`_UpstreamCall`)."""
        pool = self._pool
        if pool is None:
            pool = self._pool = self.http.pool(self.chat_url)
        head = self._chat_head
        if self._own_headers is None and auth:
            head += http1.header_line("Authorization", auth)
            for name, value in tenant:
                head += http1.header_line(name, value)
        timeout = self.timeout
        try:  # the first attempt without the retry wrapper's coroutine and closure (the hot path)
            return await pool.request(head, data, connect_s=timeout.sock_connect, read_s=timeout.sock_read,
                                      max_body=self.max_response_bytes)
        except http1.ConnectFailed as first:
            return await self._retry_connect(
                lambda: pool.request(head, data, connect_s=timeout.sock_connect, read_s=timeout.sock_read,
                                     max_body=self.max_response_bytes),
                (http1.ConnectFailed,), first)

    async def complete(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                       tenant: Tenant = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """POST ``/chat/completions`` (non-stream). Returns ``(response dict, relay headers)``.
        ``auth``: the client's credential, sent when this upstream has no key of its own, with
        the client's ``tenant`` headers (:func:`tenant_headers`).

        Raises :class:`UpstreamError`: upstream HTTP status (>= 400) with its body (dropped
        when over 1 MiB) and headers; 502 connect failure / non-JSON answer / connection lost /
        answer over ``max_response_bytes``; 504 timeout.
        """
        data = dumps(body)
        with _UpstreamCall(self.name, timing):
            try:
                resp = await self._exchange(data, auth, tenant)
            except http1.ResponseTooLarge:
                raise self._too_large() from None
        odd = _odd_status(resp.status, self.name)
        if odd is not None:
            raise odd
        if resp.status >= 400:
            err = resp.body if 0 < len(resp.body) <= ERROR_BODY_LIMIT else None
            raise UpstreamError(resp.status, f"upstream {self.name!r} answered HTTP {resp.status}",
                                reason=f"http_{resp.status}", body=scrub_secrets(err) if err else None,
                                headers=relay_headers(resp.headers))
        return json_object(resp.body, self.name), relay_headers(resp.headers)

    async def open_stream(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                          tenant: Tenant = ()) -> UpstreamStream:
        """POST ``/chat/completions`` with ``stream: true`` and check the status. Raises
        :class:`UpstreamError` (as :meth:`complete`) before any byte is relayed."""
        data = dumps(body)
        with _UpstreamCall(self.name, timing):
            resp = await self._post(self.chat_url, data, self.headers(auth, tenant))
            odd = _odd_status(resp.status, self.name)
            if odd is not None:
                resp.close()
                raise odd
            if resp.status >= 400:
                raise await self._error_from(resp)
        ctype = resp.headers.get("Content-Type", "")
        if "text/event-stream" not in ctype:
            resp.close()
            raise UpstreamError(502, f"upstream {self.name!r} answered a stream request with {ctype or 'no content type'}",
                                reason="bad_response")
        return UpstreamStream(self.stream_chunks(resp), headers=relay_headers(resp.headers), timing=timing,
                              closer=resp.close, max_event=self.max_event_bytes, name=self.name)

    async def stream_chunks(self, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
        """The body of a streamed answer as it arrives, capped at ``max_response_bytes``
        (:meth:`too_large_error`); a read timeout is a 504, a lost connection a 502
        (:class:`UpstreamError`). Releases ``resp`` at the end, closes it on error."""
        limit = self.max_response_bytes
        size = 0
        try:
            async for chunk in resp.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise self.too_large_error(resp)
                yield chunk
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            resp.close()
            raise UpstreamError(504, f"upstream {self.name!r} stopped sending (read timeout)", reason="timeout") from None
        except aiohttp.ClientError:
            resp.close()
            raise UpstreamError(502, f"upstream {self.name!r} dropped the connection mid-stream",
                                reason="disconnect") from None
        resp.release()

    async def request(self, method: str, path: str, *, query: str, body: bytes, headers: Mapping[str, str],
                      auth: str | None, timing: Timing) -> aiohttp.ClientResponse:
        """Pass-through: send ``method path?query`` with ``body`` to this upstream untouched
        (``path`` relative to ``/v1``). The client's ``Content-Type`` is kept (multipart
        uploads carry their boundary in it); its ``OpenAI-Organization``/``OpenAI-Project`` go
        only with its own key. Returns the open response; the caller streams and releases it.
        Raises :class:`UpstreamError` for connect failures/timeouts only."""
        url = self.base_url + path + (("?" + query) if query else "")
        h = {k.lower(): v for k, v in headers.items() if k.lower() in _PASS_REQUEST_HEADERS}
        if self._own_headers is not None:  # the gateway's key: the client may not pick its org/project
            for name in _TENANT_HEADERS:
                h.pop(name, None)
        for k, v in self.headers(auth).items():
            if k.lower() == "content-type" and "content-type" in h:
                continue  # the body's own type wins (a multipart upload's boundary)
            h[k.lower()] = v
        if not body:
            h.pop("content-type", None)
        t0 = time.perf_counter()
        try:
            resp = await self.session.request(method, url, data=body or None, headers=h, timeout=self.timeout)
        except (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError) as exc:
            raise _connect_error(exc, self.name) from None
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamError(504, f"upstream {self.name!r} timed out", reason="timeout") from None
        except aiohttp.ClientError:
            raise UpstreamError(502, f"connection to upstream {self.name!r} was lost", reason="disconnect") from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            timing.upstream_calls += 1
        if not 200 <= resp.status < 600:  # relayed as is, 3xx included; see _odd_status
            resp.close()
            raise UpstreamError(502, f"upstream {self.name!r} answered with HTTP status {resp.status}",
                                reason="bad_response")
        return resp

    async def list_models(self, *, auth: str | None) -> list[dict[str, Any]]:
        """``GET /models`` of this upstream (``data`` list). Raises :class:`UpstreamError`."""
        t = Timing()
        resp = await self.request("GET", "/models", query="", body=b"", headers={}, auth=auth, timing=t)
        try:
            if resp.status >= 400:
                raise await self._error_from(resp)
            raw = await resp.read()
        except aiohttp.ClientError:
            raise UpstreamError(502, f"connection to upstream {self.name!r} was lost", reason="disconnect") from None
        finally:
            resp.release()
        try:
            data = loads(raw).get("data")
        except (ValueError, AttributeError):
            data = None
        if not isinstance(data, list):
            raise UpstreamError(502, f"upstream {self.name!r} sent an unusable model list", reason="bad_response")
        return [m for m in data if isinstance(m, dict)]


#: client request headers forwarded on pass-through routes (besides Authorization handling)
_PASS_REQUEST_HEADERS = frozenset({"content-type", "accept", "openai-organization", "openai-project",
                                   "openai-beta", "user-agent"})
#: client headers that pick the tenant billed for a key: forwarded only with the client's own key
#: (pass-through auth), never next to the upstream's key (NVIDIA-NeMo/Switchyard#419)
_TENANT_HEADERS = ("openai-organization", "openai-project")
_TENANT_NAMES = {"openai-organization": "OpenAI-Organization", "openai-project": "OpenAI-Project"}


def tenant_headers(headers: Mapping[str, str]) -> Tenant:
    """The client's ``OpenAI-Organization``/``OpenAI-Project`` headers (``headers`` keyed by
    lower-case name) as ``(name, value)`` pairs, for :meth:`OpenAIUpstream.complete` and
    ``open_stream``: the OpenAI API bills the request to that organization/project
    (https://platform.openai.com/docs/api-reference/authentication)."""
    return tuple((_TENANT_NAMES[n], headers[n]) for n in _TENANT_HEADERS if headers.get(n))


class _UpstreamCall:
    """Context of one upstream HTTP call: adds its wall time and count to ``timing`` and maps
    transport failures to :class:`UpstreamError` (timeouts -> 504 ``timeout``; a lost or refused
    connection after connect retries -> 502 ``disconnect``). An ``UpstreamError`` raised inside
    passes unchanged. A class, not ``contextlib.contextmanager``: it is on the hot path."""

    __slots__ = ("name", "timing", "t0")

    def __init__(self, name: str, timing: "Timing") -> None:
        self.name, self.timing = name, timing

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.timing.upstream_s += time.perf_counter() - self.t0
        self.timing.upstream_calls += 1
        if exc_type is None or issubclass(exc_type, UpstreamError):
            return False
        if issubclass(exc_type, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
            raise UpstreamError(504, f"upstream {self.name!r} timed out", reason="timeout") from None
        if issubclass(exc_type, aiohttp.ClientError):
            raise UpstreamError(502, f"connection to upstream {self.name!r} was lost", reason="disconnect") from None
        if issubclass(exc_type, http1.Http1Error):
            if issubclass(exc_type, http1.ReadTimeout):
                raise UpstreamError(504, f"upstream {self.name!r} timed out", reason="timeout") from None
            if issubclass(exc_type, http1.BadResponse):
                raise UpstreamError(502, f"upstream {self.name!r} sent an invalid HTTP response: {exc}",
                                    reason="bad_response") from None
            raise UpstreamError(502, f"connection to upstream {self.name!r} was lost", reason="disconnect") from None
        return False
