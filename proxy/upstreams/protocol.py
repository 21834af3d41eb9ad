"""The upstream protocol: what the gateway needs from a model server, and the per-request pieces.

* :class:`Upstream` -- every provider (:class:`proxy.upstreams.openai.OpenAIUpstream`,
  :class:`proxy.upstreams.litellm.LiteLLMUpstream`): ``complete``, ``open_stream``, ``warm_up``
  and the capability flag ``http_api``.
* :class:`HttpUpstream` -- an upstream that speaks the OpenAI HTTP API itself (``http_api``
  true): it also serves the pass-through routes and the model list; :func:`is_http_upstream`
  narrows an :class:`Upstream` to it (callers ask the capability, never the class).
* :class:`BoundUpstream` -- an upstream bound to one request (its pass-through credentials and
  its :class:`Timing`); this is what the pipeline calls: ``await ctx.upstream.complete(body)``
  and ``await ctx.upstream.open_stream(body)``.
* :class:`UpstreamStream` -- an opened stream, relayed event by event
  (:class:`proxy.wire.relay.SSERelay`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from proxy._asgi import memory
from proxy.config import DEFAULT_MAX_EVENT_BYTES, UpstreamConfig
from proxy.wire.errors import UpstreamError
from proxy.wire.relay import EventTooLarge, SSERelay

if TYPE_CHECKING:
    import aiohttp

__all__ = ["BoundUpstream", "HttpUpstream", "Tenant", "Timing", "Upstream", "UpstreamStream", "is_http_upstream"]

#: ``(header name, value)`` pairs of a client's tenant headers
#: (see :func:`proxy.upstreams.openai.tenant_headers`)
Tenant = tuple[tuple[str, str], ...]


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

class Upstream(Protocol):
    """What every upstream implements. ``auth`` is the client's ``Authorization`` header value
    for pass-through auth (used only when the upstream has no key of its own).

    ``complete`` returns ``(chat.completion dict, relayable response headers)``; ``open_stream``
    an :class:`UpstreamStream` whose status was checked. Both raise
    :class:`proxy.wire.errors.UpstreamError`. ``warm_up`` is awaited once at start-up
    (connection pools, heavy imports: not on the first request). ``http_api``: whether this
    upstream is an :class:`HttpUpstream` (speaks the OpenAI HTTP API itself)."""

    name: str
    config: UpstreamConfig
    http_api: bool

    async def warm_up(self) -> None: ...

    async def complete(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                       tenant: Tenant = ()) -> tuple[dict[str, Any], dict[str, str]]: ...

    async def open_stream(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                          tenant: Tenant = ()) -> UpstreamStream: ...


class HttpUpstream(Upstream, Protocol):
    """An upstream that speaks the OpenAI HTTP API itself (``http_api`` true): besides chat
    completions it serves any other ``/v1/*`` route byte for byte (``request``) and its model
    list (``list_models``); the lean lane forwards to it directly. ``max_response_bytes``:
    the largest answer relayed; ``read_capped`` / ``too_large_error`` enforce it on a response
    ``request`` returned. Errors: :class:`proxy.wire.errors.UpstreamError`."""

    max_response_bytes: int

    async def request(self, method: str, path: str, *, query: str, body: bytes, headers: Mapping[str, str],
                      auth: str | None, timing: Timing) -> aiohttp.ClientResponse: ...

    async def list_models(self, *, auth: str | None) -> list[dict[str, Any]]: ...

    async def read_capped(self, resp: aiohttp.ClientResponse, limit: int | None = None) -> bytes: ...

    def stream_chunks(self, resp: aiohttp.ClientResponse) -> AsyncIterator[bytes]: ...

    def too_large_error(self, resp: aiohttp.ClientResponse) -> UpstreamError: ...


def is_http_upstream(upstream: Upstream | None) -> TypeGuard[HttpUpstream]:
    """True when ``upstream`` speaks the OpenAI HTTP API itself (its ``http_api`` capability):
    the pass-through routes, the model list and the lean lane take only such upstreams."""
    return upstream is not None and upstream.http_api


@dataclass(slots=True)
class BoundUpstream:
    """An upstream bound to one request: ``await complete(body) -> dict`` and
    ``await open_stream(body) -> UpstreamStream`` use the request's pass-through credentials
    and add their waiting time to ``timing.upstream_s``. ``headers`` holds the relayable
    headers of the last completed call. Both raise :class:`proxy.wire.errors.UpstreamError`."""

    upstream: Upstream
    auth: str | None
    timing: Timing
    headers: dict[str, str] = field(default_factory=dict)
    #: the client's OpenAI-Organization/-Project (sent only with the client's own key)
    tenant: Tenant = ()

    @property
    def name(self) -> str:
        """The bound upstream's configured name."""
        return self.upstream.name

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """The upstream's ``chat.completion`` dict for ``body`` (its headers kept in ``headers``)."""
        out, self.headers = await self.upstream.complete(body, auth=self.auth, timing=self.timing,
                                                         tenant=self.tenant)
        return out

    async def open_stream(self, body: dict[str, Any]) -> UpstreamStream:
        """The upstream's opened stream for ``body`` (its headers kept in ``headers``)."""
        stream = await self.upstream.open_stream(body, auth=self.auth, timing=self.timing, tenant=self.tenant)
        self.headers = stream.headers
        return stream
