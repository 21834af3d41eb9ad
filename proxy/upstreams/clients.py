"""Upstream clients: how the gateway talks to the model servers.

* :class:`OpenAIUpstream` — any OpenAI-compatible server (``base_url`` + optional ``api_key``).
  Non-stream chat completions go through :mod:`proxy.upstreams.http1` (an asyncio protocol over
  ``httptools``: 55-105 us CPU per exchange here vs 266-326 us for aiohttp, the largest item
  of the gateway's hop -- bench/results/client.md, gateway.md); streams and the other ``/v1/*`` pass-through
  routes use one shared ``aiohttp.ClientSession`` per process (chosen over httpx by
  measurement, BENCH-NOTES.md: 3,496 vs 563 req/s at 32 connections on this machine).
* :class:`LiteLLMUpstream` — providers that need translation (``provider: litellm``); litellm is
  imported lazily on first use with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it never fetches the
  cost map from the network.
* :class:`BoundUpstream` — an upstream bound to one request (its pass-through credentials and its
  :class:`Timing`); this is what the pipeline calls: ``await ctx.upstream.complete(body)`` and
  ``await ctx.upstream.open_stream(body)``.

Retries: this module is the one layer that retries, and only failures to *connect* (the request
never reached the upstream), ``limits.connect_retries`` times with a short exponential back-off
(tenacity). A request that reached the upstream is never re-sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import aiohttp
from yarl import URL

from proxy.upstreams import http1

from proxy._asgi import memory
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from proxy.config import DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, GatewayConfig, UpstreamConfig
from proxy.wire.errors import UpstreamError
from proxy.observability.log import scrub_secrets
from proxy.redaction import scrub_text

_T = TypeVar("_T")

#: ``(header name, value)`` pairs of a client's tenant headers (see :func:`tenant_headers`)
Tenant = tuple[tuple[str, str], ...]


def _no_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON (RFC 8259 section 6); the stdlib would accept them."""
    raise ValueError(f"{name} is not valid JSON")


#: Deepest JSON nesting the gateway parses and re-serialises (orjson writes at most 255 levels).
MAX_JSON_DEPTH = 255


def _bracket_count(raw: bytes | str) -> int:
    """Opening brackets in ``raw`` (C-speed): an upper bound of its nesting depth."""
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def deeper_than(obj: Any, limit: int) -> bool:
    """True when ``obj`` nests dicts/lists more than ``limit`` levels (iterative walk)."""
    stack = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        if depth > limit:
            return True
        children = o.values() if isinstance(o, dict) else o
        stack.extend((v, depth + 1) for v in children if isinstance(v, (dict, list)))
    return False


try:  # orjson is ~3-5x faster on completion-sized bodies; stdlib json is the fallback
    import orjson as _orjson

    def dumps(obj: Any) -> bytes:
        """JSON bytes (compact, UTF-8). Values orjson refuses (a lone UTF-16 surrogate in a
        string, an integer beyond 64 bits) are written by the stdlib with ASCII escapes."""
        try:
            return _orjson.dumps(obj)
        except TypeError:
            return json.dumps(obj, separators=(",", ":")).encode("ascii")

    def loads(raw: bytes | str) -> Any:
        """Parse JSON; raises ValueError. A ``\\ud800``-style escape of a lone surrogate is
        valid JSON (RFC 8259 section 8.2) that orjson refuses: the stdlib parses it, so a
        model answer with one odd character is not lost as an "unusable" response. Integers
        beyond 64 bits come back exact (see :func:`loads_strict`). A value nested deeper than
        :data:`MAX_JSON_DEPTH` levels is refused (ValueError): it could not be written back
        (orjson stops at 255 levels, the stdlib's recursion near 1,000)."""
        try:
            obj = _orjson.loads(raw)
        except _orjson.JSONDecodeError as exc:
            text = raw if isinstance(raw, (bytes, bytearray, str)) else bytes(raw)
            if ("\\u" if isinstance(text, str) else b"\\u") not in text:
                raise
            try:
                out = json.loads(text, parse_constant=_no_constant)
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise exc from None
        else:
            out = _exact(raw, obj)
        if _bracket_count(raw) > MAX_JSON_DEPTH and deeper_than(out, MAX_JSON_DEPTH):
            raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
        return out

    def loads_strict(raw: bytes | str) -> Any:
        """Parse a client request body; raises ValueError. Stricter than :func:`loads`: a
        lone surrogate is refused (400), as it could not be written to logs, audit files or
        metric labels as UTF-8. orjson turns an integer beyond 64 bits into a float
        (``2**70`` -> ``1.1805916207174113e+21``); a faithful proxy must not change a
        client's or an upstream's numbers, so such a body is parsed again by the stdlib,
        whose integers are exact (and :func:`dumps` writes them back exactly). A leading UTF-8
        byte order mark is ignored, as RFC 8259 section 8.1 allows a parser to do (.NET and
        PowerShell clients send one)."""
        if raw[:3] == _BOM:
            raw = raw[3:]
        return _exact(raw, _orjson.loads(raw))
except ImportError:  # pragma: no cover - exercised only without orjson
    def dumps(obj: Any) -> bytes:
        """JSON bytes (compact, UTF-8)."""
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    loads = loads_strict = json.loads

_BOM = b"\xef\xbb\xbf"
#: bytes.translate table: ASCII digit -> b"0", any other byte -> b" "
_DIGIT_MAP = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
#: orjson parses integers in [-2**63, 2**64 - 1] exactly; every integer outside that range
#: has at least 19 digits (-9223372036854775809 has 19, 18446744073709551616 has 20)
_BIG_INT_DIGITS = 19
_BIG_RUN = b"0" * _BIG_INT_DIGITS


def has_long_digit_run(raw: bytes | bytearray | memoryview | str) -> bool:
    """True when ``raw`` holds 19 or more consecutive ASCII digits, i.e. it may hold an integer
    that orjson cannot represent (it returns a float for it). Costs about 0.3 ns a byte on a
    typical body: a run of 19 digits covers two adjacent bytes of ``raw[::9]`` (any 19
    consecutive positions hold two consecutive multiples of 9), so only bodies where that
    sample shows two digits side by side are scanned in full. False positives (long
    decimals, digits in strings) only cost a slower exact parse."""
    if type(raw) is not bytes:
        raw = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if b"00" not in raw[::9].translate(_DIGIT_MAP):
        return False
    return _BIG_RUN in raw.translate(_DIGIT_MAP)


def _exact(raw: Any, obj: Any) -> Any:
    """``obj`` (orjson's parse of ``raw``), or the stdlib's parse of ``raw`` when ``raw`` may
    hold an integer beyond 64 bits. The stdlib is used only then: it is ~3x slower. Its parse
    equals orjson's in every other value (orjson has already accepted ``raw``: valid UTF-8,
    no lone surrogate, no NaN); a body too deeply nested for the stdlib keeps orjson's parse."""
    if type(obj) is dict and has_long_digit_run(raw):  # only objects are forwarded (other bodies are refused)
        try:
            return json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return obj
    return obj


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
    for k, v in (headers.items() if isinstance(headers, Mapping) else headers):
        lk = k.lower()
        if lk.startswith(_RELAY_PREFIXES):
            out[lk] = scrub_text(v)
        elif lk == "x-request-id":
            out["x-upstream-request-id"] = scrub_text(v)
    return out


@dataclass(slots=True)
class Timing:
    """Per-request clock (seconds, ``time.perf_counter``): ``start`` of the request,
    ``upstream_s`` accumulated waiting on upstreams, ``upstream_calls`` made."""

    start: float = field(default_factory=time.perf_counter)
    upstream_s: float = 0.0
    upstream_calls: int = 0

    def elapsed(self) -> float:
        """Seconds since ``start``."""
        return time.perf_counter() - self.start

    def overhead(self) -> float:
        """Gateway time so far excluding upstream waits (seconds, >= 0)."""
        return max(0.0, self.elapsed() - self.upstream_s)


# --------------------------------------------------------------------------- SSE relay


_FINISH_RE = re.compile(rb'"finish_reason"\s*:\s*"')
_ERROR_RE = re.compile(rb'^\s*\{\s*"error"\s*:')


def _escaped_finish(data: bytes) -> bool:
    """True when the JSON ``data`` has a choice with a string ``finish_reason`` written with
    ``\\u`` escapes that the byte pattern :data:`_FINISH_RE` cannot see (``"finish\\u005freason"``:
    JSON allows any character escaped, RFC 8259 §7). Only called for data holding ``\\u``."""
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    choices = doc.get("choices") if isinstance(doc, dict) else None
    return isinstance(choices, list) and any(
        isinstance(c, dict) and isinstance(c.get("finish_reason"), str) for c in choices)


class EventTooLarge(ValueError):
    """An SSE event grew past :attr:`SSERelay.max_event` bytes without its terminating blank line."""


class SSERelay:
    """Incremental SSE splitter for relaying ``chat.completion.chunk`` streams.

    ``feed(bytes) -> bytes`` returns every *complete* event received so far, re-framed as
    ``data: ...\\n\\n`` (``event:`` kept), and keeps any incomplete tail for the next call, so
    nothing is held back longer than one event. Frames without data (``id:``/``retry:``-only,
    comments, empty ``data:``) are dropped: the ``openai`` SDK would otherwise try to
    ``json.loads("")`` them (``openai/_streaming.py``, ``SSEDecoder.decode``). CRLF and a lone CR
    (both end a line in the SSE format) become LF; a CR that ends a read waits for the next one.

    Bounded: the incomplete tail is kept as a list of reads (each read is scanned once, so an
    event arriving in N reads costs O(its size), not O(N x size)), and when it exceeds
    ``max_event`` bytes ``feed`` raises :class:`EventTooLarge` (the caller closes the stream).

    State: ``done`` (``data: [DONE]`` seen), ``finished`` (a ``finish_reason`` string seen),
    ``errored`` (the upstream sent a ``data: {"error": ...}`` event). Error events (that
    shape, or ``event: error``) are relayed with the configured upstream keys replaced by
    ``[REDACTED]`` (:func:`proxy.observability.log.scrub_secrets`), as upstream error bodies are.
    Event format: https://html.spec.whatwg.org/multipage/server-sent-events.html
    """

    __slots__ = ("_parts", "_size", "_cr", "max_event", "done", "finished", "errored", "events")

    def __init__(self, max_event: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._parts: list[bytes] = []  # the incomplete tail (LF line ends only), in reads
        self._size = 0
        self._cr = False  # the last read ended in CR: maybe half of a CRLF
        self.max_event = max_event
        self.done = False
        self.finished = False
        self.errored = False
        self.events = 0

    def feed(self, chunk: bytes) -> bytes:
        """Add raw bytes; return the complete events among them (possibly ``b""``). Raises
        :class:`EventTooLarge` when the incomplete event grows past ``max_event`` bytes."""
        if self._cr:
            chunk, self._cr = b"\r" + chunk, False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):  # maybe half of a CRLF cut between reads: decided on the next one
                chunk, self._cr = chunk[:-1], True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # CRLF, LF and CR all end a line
        parts = self._parts
        if parts:
            if b"\n\n" not in chunk and not (chunk[:1] == b"\n" and parts[-1].endswith(b"\n")):
                return self._hold(chunk)
            buf = b"".join(parts) + chunk
        else:
            buf = chunk
        end = buf.rfind(b"\n\n")
        if end < 0:
            return self._hold(buf, fresh=True)
        self._parts, self._size = [], 0
        if end + 2 < len(buf):
            self._hold(buf[end + 2:], fresh=True)
        return self._events(buf[:end].split(b"\n\n"))

    def _hold(self, data: bytes, fresh: bool = False) -> bytes:
        if fresh:
            self._parts, self._size = [], 0
        if data:
            self._parts.append(data)
            self._size += len(data)
            if self._size > self.max_event:
                self._parts, self._size = [], 0
                raise EventTooLarge(f"an SSE event larger than {self.max_event} bytes")
        return b""

    def flush(self) -> bytes:
        """At end of input: the last event if the upstream omitted its final blank line."""
        buf = b"".join(self._parts) + (b"\n" if self._cr else b"")
        self._parts, self._size, self._cr = [], 0, False
        return self._events([e for e in buf.split(b"\n\n") if e.strip()]) if buf.strip() else b""

    def _events(self, raw_events: list[bytes]) -> bytes:
        out: list[bytes] = []
        for ev in raw_events:
            if ev.startswith(b"data: ") and b"\n" not in ev:  # the common case: one data line
                data = ev[6:]
                framed = ev + b"\n\n"
                event_line = b""
            else:
                data_lines: list[bytes] = []
                event_line = b""
                for line in ev.split(b"\n"):
                    name, _, value = line.partition(b":")
                    if value.startswith(b" "):
                        value = value[1:]
                    if name == b"data":
                        data_lines.append(value)
                    elif name == b"event" and value:
                        event_line = b"event: " + value + b"\n"
                data = b"\n".join(data_lines)
                framed = event_line + b"".join(b"data: " + d + b"\n" for d in data_lines) + b"\n"
            if not data.strip():
                continue
            if self.done:  # nothing may follow [DONE]
                continue
            if data.strip() == b"[DONE]":
                self.done = True
                if not (self.finished or self.errored):
                    continue  # held back: the relay reports the missing finish_reason instead
                framed = b"data: [DONE]\n\n"
            elif not self.finished and (_FINISH_RE.search(data) or (b"\\u" in data and _escaped_finish(data))):
                self.finished = True
            elif _ERROR_RE.match(data):
                self.errored = True
                framed = scrub_secrets(framed)  # an upstream may echo the key it was sent
            elif event_line == b"event: error\n":
                framed = scrub_secrets(framed)
            self.events += 1
            out.append(framed)
        return b"".join(out)


class UpstreamStream:
    """An opened upstream stream (status 2xx already checked). Iterate it for relayable SSE
    bytes (see :class:`SSERelay`); iteration raises :class:`UpstreamError` when the connection
    drops or times out, or (502 ``too_large``, the connection closed) when one event grows past
    ``max_event`` bytes. ``aclose()`` closes the upstream connection at once (client gone) and
    is idempotent. ``relay`` exposes ``done`` / ``finished`` / ``errored`` after iteration.
    ``name``: the upstream's name, for error messages."""

    def __init__(self, chunks: AsyncIterator[bytes], *, headers: dict[str, str], timing: Timing,
                 closer: Any = None, max_event: int = DEFAULT_MAX_EVENT_BYTES, name: str = "upstream") -> None:
        self._chunks = chunks
        self._closer = closer
        self.headers = headers
        self.timing = timing
        self.name = name
        self.relay = SSERelay(max_event)
        self._pending: list[bytes] = []
        self.closed = False

    async def peek(self) -> None:
        """Read until the first complete event is buffered (or EOF). Upstream failures raised
        here happen before any byte went to the client, so they become a JSON error."""
        while not self._pending:
            data = await self._read()
            if data is None:
                tail = self.relay.flush()
                if tail:
                    self._pending.append(tail)
                self._pending.append(b"")  # EOF marker
                return
            out = await self._feed(data)
            if out:
                self._pending.append(out)

    async def _feed(self, data: bytes) -> bytes:
        try:
            return self.relay.feed(data)
        except EventTooLarge:
            await self.aclose()
            memory.release_soon()
            raise UpstreamError(502, f"upstream {self.name!r} sent an SSE event larger than limits.max_event_bytes "
                                f"({self.relay.max_event} bytes)", reason="too_large") from None

    async def _read(self) -> bytes | None:
        t0 = time.perf_counter()
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            return None
        finally:
            self.timing.upstream_s += time.perf_counter() - t0

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[bytes]:
        while self._pending:
            item = self._pending.pop(0)
            if not item:  # EOF marker
                return
            yield item
        while True:
            data = await self._read()
            if data is None:
                tail = self.relay.flush()
                if tail:
                    yield tail
                return
            out = await self._feed(data)
            if out:
                yield out

    async def aclose(self) -> None:
        """Close the upstream response (drops the connection if the body was not fully read)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self._closer is not None:
                res = self._closer()
                if asyncio.iscoroutine(res):
                    await res
        except Exception:  # noqa: BLE001 - closing must never raise into the relay
            pass


# --------------------------------------------------------------------------- upstreams


class Upstream(Protocol):
    """What every upstream implements. ``auth`` is the client's ``Authorization`` header value
    for pass-through auth (used only when the upstream has no key of its own)."""

    name: str
    config: UpstreamConfig

    async def complete(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                       tenant: Tenant = ()) -> tuple[dict[str, Any], dict[str, str]]: ...

    async def open_stream(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                          tenant: Tenant = ()) -> UpstreamStream: ...


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


class OpenAIUpstream:
    """An OpenAI-compatible HTTP upstream (chat completions, models, any ``/v1/*``).

    Timeouts: ``sock_connect`` = ``connect_timeout_s``; ``sock_read`` = ``read_timeout_s``
    (the longest silence between two reads, so long streams are fine). No total timeout.
    Size: an answer (non-stream body, or one stream's bytes in total) larger than
    ``max_response_bytes`` is refused with a 502 ``too_large`` and its connection closed.
    """

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
        return await self._connect_retrying(
            lambda: pool.request(head, data, connect_s=self.timeout.sock_connect, read_s=self.timeout.sock_read,
                                 max_body=self.max_response_bytes),
            (http1.ConnectFailed,))

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
        try:
            out = loads(resp.body)
        except ValueError:
            out = None
        if not isinstance(out, dict):
            raise UpstreamError(502, f"upstream {self.name!r} sent a response that is not a JSON object",
                                reason="bad_response")
        return out, relay_headers(resp.headers)

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
        return UpstreamStream(self._chunks(resp), headers=relay_headers(resp.headers), timing=timing,
                              closer=resp.close, max_event=self.max_event_bytes, name=self.name)

    async def _chunks(self, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]:
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


class LiteLLMUpstream:
    """A provider reached through litellm (``provider: litellm``). ``litellm_params`` are passed
    to ``litellm.acompletion`` (e.g. ``model: anthropic/claude-3-5-sonnet-20240620``,
    ``api_key``, ``api_base``); without ``model`` there, the request's model is used as is.
    litellm is imported at start-up only when such an upstream is configured (3.5-4.8 s,
    ~200 MB; BENCH-NOTES.md), with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (no network at import)."""

    def __init__(self, config: UpstreamConfig) -> None:
        self.name = config.name
        self.config = config
        self._litellm: Any = None

    def _lib(self) -> Any:
        if self._litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm  # noqa: PLC0415 - lazily: heavy import

            litellm.drop_params = False
            self._litellm = litellm
        return self._litellm

    def _args(self, body: dict[str, Any]) -> dict[str, Any]:
        args = {**body, **self.config.litellm_params}
        if self.config.api_key and "api_key" not in args:
            args["api_key"] = self.config.api_key.get_secret_value()
        if self.config.base_url and "api_base" not in args:
            args["api_base"] = self.config.base_url
        return args

    def _error(self, exc: Exception) -> UpstreamError:
        lib = self._lib()
        status = getattr(exc, "status_code", None)
        if isinstance(exc, getattr(lib, "Timeout", ())):
            return UpstreamError(504, f"upstream {self.name!r} timed out", reason="timeout")
        if isinstance(exc, getattr(lib, "APIConnectionError", ())) or not isinstance(status, int):
            return UpstreamError(502, f"cannot reach upstream {self.name!r} through litellm", reason="connect")
        body = dumps({"error": {"message": scrub_text(str(getattr(exc, "message", ""))) or type(exc).__name__,
                                "type": "upstream_error", "param": None, "code": f"http_{status}"}})
        return UpstreamError(status, f"upstream {self.name!r} answered HTTP {status}", reason=f"http_{status}",
                             body=body)

    async def complete(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                       tenant: Tenant = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """``litellm.acompletion`` -> the OpenAI-shaped dict. Raises :class:`UpstreamError`."""
        lib = self._lib()
        t0 = time.perf_counter()
        try:
            resp = await lib.acompletion(**self._args(body))
        except Exception as exc:  # noqa: BLE001 - litellm raises many types; map them all
            raise self._error(exc) from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            timing.upstream_calls += 1
        return resp.model_dump(), {}

    async def open_stream(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                          tenant: Tenant = ()) -> UpstreamStream:
        """``litellm.acompletion(stream=True)`` re-encoded as SSE bytes."""
        lib = self._lib()
        t0 = time.perf_counter()
        try:
            wrapper = await lib.acompletion(**{**self._args(body), "stream": True})
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc) from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            timing.upstream_calls += 1

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in wrapper:
                    yield b"data: " + dumps(chunk.model_dump(exclude_none=True)) + b"\n\n"
            except Exception as exc:  # noqa: BLE001
                raise self._error(exc) from None
            yield b"data: [DONE]\n\n"

        return UpstreamStream(chunks(), headers={}, timing=timing)


@dataclass(slots=True)
class BoundUpstream:
    """An upstream bound to one request: ``await complete(body) -> dict`` and
    ``await open_stream(body) -> UpstreamStream`` use the request's pass-through credentials
    and add their waiting time to ``timing.upstream_s``. ``headers`` holds the relayable
    headers of the last completed call. Both raise :class:`proxy.wire.errors.UpstreamError`."""

    upstream: Any
    auth: str | None
    timing: Timing
    headers: dict[str, str] = field(default_factory=dict)
    #: the client's OpenAI-Organization/-Project (sent only with the client's own key)
    tenant: "Tenant" = ()

    @property
    def name(self) -> str:
        return self.upstream.name

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        out, self.headers = await self.upstream.complete(body, auth=self.auth, timing=self.timing,
                                                         tenant=self.tenant)
        return out

    async def open_stream(self, body: dict[str, Any]) -> UpstreamStream:
        stream = await self.upstream.open_stream(body, auth=self.auth, timing=self.timing, tenant=self.tenant)
        self.headers = stream.headers
        return stream


class Upstreams:
    """All configured upstreams of one process, sharing one aiohttp session and one
    :class:`http1.Http1Client` (keep-alive pools per origin).

    Create inside the event loop (``await Upstreams.start(cfg)``) and ``await close()`` at
    shutdown. ``route(model)`` returns the first upstream serving ``model`` (config order).
    """

    def __init__(self, cfg: GatewayConfig, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.http = http1.Http1Client(keepalive_s=30.0)
        lim = cfg.limits
        self.all: list[Any] = []
        for u in cfg.upstreams:
            if u.provider == "litellm":
                self.all.append(LiteLLMUpstream(u))
            else:
                self.all.append(OpenAIUpstream(u, session, connect_timeout_s=lim.connect_timeout_s,
                                               read_timeout_s=lim.read_timeout_s,
                                               connect_retries=lim.connect_retries,
                                               max_response_bytes=lim.max_response_bytes,
                                               max_event_bytes=lim.max_event_bytes,
                                               http=self.http))
        self._cache: dict[str, Any] = {}

    @classmethod
    async def start(cls, cfg: GatewayConfig) -> "Upstreams":
        """Open the shared session (keep-alive pool, no limit on connections per host,
        ``trust_env=False``: no proxy env lookups per request)."""
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30)
        session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                        skip_auto_headers=("User-Agent",), auto_decompress=True)
        ups = cls(cfg, session)
        for u in ups.all:
            if isinstance(u, OpenAIUpstream):  # pools (and the TLS trust store) now, not on the first request
                u._pool = ups.http.pool(u.chat_url)
            elif isinstance(u, LiteLLMUpstream):
                # import now (in a thread), not on the first request: it takes seconds
                await asyncio.to_thread(u._lib)
        return ups

    def route(self, model: str) -> Any | None:
        """The upstream for ``model`` or None (results cached per model name)."""
        hit = self._cache.get(model)
        if hit is not None:
            return hit
        for u in self.all:
            if u.config.serves(model):
                if len(self._cache) < 4096:
                    self._cache[model] = u
                return u
        return None

    def default(self) -> Any | None:
        """The first OpenAI-compatible upstream (for pass-through routes without a model)."""
        return next((u for u in self.all if isinstance(u, OpenAIUpstream)), None)

    async def close(self) -> None:
        self.http.close()
        await self.session.close()


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
