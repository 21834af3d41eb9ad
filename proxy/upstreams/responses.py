"""The upstream side of ``POST /v1/responses``: one request's upstream, as the chat pipeline sees it.

The verification pipeline (:mod:`proxy.pipeline.sequence`) speaks chat completions: it calls
``complete(chat_body) -> chat.completion`` and ``open_stream(chat_body) -> UpstreamStream``
(chat chunks) on ``ctx.upstream``. :class:`ResponsesUpstream` is that object for a Responses
request, in one of two modes per upstream (``upstreams[].responses`` in the config;
:func:`mode_of`):

* ``native`` (default for an OpenAI-compatible upstream): every call the pipeline makes for
  the client's conversation -- the first answer, a sentinel turn, a correction round -- is sent
  to the upstream's ``/v1/responses`` as a Responses request built from the client's own
  (:func:`proxy.wire.responses.native_request`: the client's items and fields as sent, the
  gateway's additions as new items, no ``previous_response_id`` unless the client sent one),
  and the upstream's response object is kept (:attr:`responses`) so the client gets it back
  with its ids, reasoning and built-in tool items. Calls that are not the client's
  conversation (the verifier model's plans and verdicts) go to chat completions.
* ``translated`` (``provider: litellm``, or set for servers that only speak chat
  completions: llama.cpp, older vLLM): every call goes to chat completions as the pipeline
  built it; the route turns the answer into a response object.

Both raise :class:`proxy.wire.errors.UpstreamError` as :class:`proxy.upstreams.protocol.BoundUpstream` does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from yarl import URL

from proxy.config import DEFAULT_MAX_EVENT_BYTES
from proxy.observability.log import scrub_secrets
from proxy.upstreams import http1
from proxy.upstreams.openai import ERROR_BODY_LIMIT, json_object, relay_headers
from proxy.upstreams.protocol import BoundUpstream, HttpUpstream, UpstreamStream, is_http_upstream
from proxy.wire.json import dumps
from proxy.wire.errors import UpstreamError
from proxy.wire.responses import Translation, completion_from_response, native_request
from proxy.wire.responses_stream import EventsToChat

__all__ = ["ResponsesUpstream", "mode_of"]

#: ``base_url`` -> its ``/responses`` URL, parsed once (bounded by the configured upstreams)
_RESPONSES_URLS: dict[str, URL] = {}

#: client headers sent on with a native Responses call (as the pass-through route does)
_CLIENT_HEADERS = ("openai-organization", "openai-project", "openai-beta", "user-agent")


def mode_of(upstream: Any) -> str:
    """``native`` or ``translated`` for ``upstream``: its config's ``responses`` when set, else
    ``native`` for an OpenAI-compatible HTTP upstream and ``translated`` for the others
    (litellm speaks chat completions only). A ``native`` setting on a non-HTTP upstream is
    served translated."""
    configured = getattr(getattr(upstream, "config", None), "responses", None)
    if configured == "translated" or not is_http_upstream(upstream):
        return "translated"
    return "native"


class ResponsesUpstream:
    """``ctx.upstream`` for one Responses request (see the module doc). ``bound``: the
    request's :class:`BoundUpstream`; ``request``: the client's Responses body; ``tr``: its chat
    translation; ``client_headers``: the request headers (lower-case names).

    Attributes: ``headers`` (relayable headers of the last call, as on ``BoundUpstream``),
    ``responses`` (native: upstream response objects by id, streamed ones updated as their
    items arrive), ``first`` (native: the first response object seen)."""

    def __init__(self, bound: BoundUpstream, request: dict[str, Any], tr: Translation, *, native: bool,
                 client_headers: Mapping[str, str]) -> None:
        self.bound = bound
        self.upstream = bound.upstream  # the verifier model compares upstreams by identity
        self.request = request
        self.tr = tr
        self.native = native
        self.headers: dict[str, str] = {}
        self.responses: dict[str, dict[str, Any]] = {}
        self.first: dict[str, Any] | None = None
        self._client = {k: client_headers[k] for k in _CLIENT_HEADERS if client_headers.get(k)}

    @property
    def name(self) -> str:
        return self.bound.name

    def _seen(self, resp: dict[str, Any]) -> None:
        rid = resp.get("id")
        if isinstance(rid, str):
            self.responses[rid] = resp
        if self.first is None:
            self.first = resp

    async def complete(self, body: dict[str, Any]) -> dict[str, Any]:
        """``chat.completion`` for the chat request ``body`` (see the module doc)."""
        req = native_request(body, self.request, self.tr) if self.native else None
        if req is None:
            out = await self.bound.complete(body)
            self.headers = self.bound.headers
            return out
        obj = await self._whole(req)
        if obj is None:  # no HTTP/1.1 client on this upstream: aiohttp
            obj = await self._read_json(await self._post(req))
        self._seen(obj)
        return completion_from_response(obj)

    async def _whole(self, req: dict[str, Any]) -> dict[str, Any] | None:
        """POST ``/responses`` (non-stream) through the upstream's HTTP/1.1 client
        (:mod:`proxy.upstreams.http1`, as its non-stream chat completions go: about a quarter of
        aiohttp's CPU per exchange), with its headers, timeouts, size limit and connect retries;
        None when the upstream has no such client. Raises :class:`UpstreamError` as
        :meth:`complete` does."""
        up = self.bound.upstream
        client, base_url, timeout = getattr(up, "http", None), getattr(up, "base_url", None), getattr(up, "timeout", None)
        if not isinstance(client, http1.Http1Client) or not base_url or timeout is None:
            return None
        url = _RESPONSES_URLS.get(base_url)
        if url is None:
            url = _RESPONSES_URLS[base_url] = URL(base_url + "/responses")
        headers = dict(up.headers(self.bound.auth, self.bound.tenant))
        headers.update((k, v) for k, v in self._client.items() if k in ("openai-beta", "user-agent"))
        head = http1.request_head("POST", url, headers.items())
        data = dumps(req)
        pool = client.pool(url)
        timing = self.bound.timing
        retries = int(getattr(up, "connect_retries", 0) or 0)
        t0 = time.perf_counter()
        try:
            for attempt in range(retries + 1):
                try:
                    resp = await pool.request(head, data, connect_s=timeout.sock_connect, read_s=timeout.sock_read,
                                              max_body=up.max_response_bytes)
                    break
                except http1.ConnectFailed as exc:  # the request never left: safe to try again
                    if attempt == retries:
                        if exc.timed_out:
                            raise UpstreamError(504, f"upstream {up.name!r} did not accept the connection in time",
                                                reason="timeout") from None
                        raise UpstreamError(502, f"cannot connect to upstream {up.name!r}", reason="connect") from None
                    await asyncio.sleep(min(1.0, 0.05 * 2 ** attempt))
        except http1.ResponseTooLarge:
            raise UpstreamError(502, f"upstream {up.name!r} sent an answer larger than limits.max_response_bytes "
                                f"({up.max_response_bytes} bytes)", reason="too_large") from None
        except http1.ReadTimeout:
            raise UpstreamError(504, f"upstream {up.name!r} timed out", reason="timeout") from None
        except http1.BadResponse as exc:
            raise UpstreamError(502, f"upstream {up.name!r} sent an invalid HTTP response: {exc}",
                                reason="bad_response") from None
        except http1.Http1Error:
            raise UpstreamError(502, f"connection to upstream {up.name!r} was lost", reason="disconnect") from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            timing.upstream_calls += 1
        self.headers = relay_headers(resp.headers)
        if not (200 <= resp.status < 300 or 400 <= resp.status < 600):
            raise UpstreamError(502, f"upstream {up.name!r} answered with HTTP status {resp.status}",
                                reason="bad_response")
        if resp.status >= 400:
            err = resp.body if 0 < len(resp.body) <= ERROR_BODY_LIMIT else None
            raise UpstreamError(resp.status, f"upstream {up.name!r} answered HTTP {resp.status}",
                                reason=f"http_{resp.status}", body=scrub_secrets(err) if err else None,
                                headers=self.headers)
        return json_object(resp.body, up.name)

    async def open_stream(self, body: dict[str, Any]) -> UpstreamStream:
        """A chat-chunk stream for the chat request ``body``: the upstream's own chat stream
        (translated), or its Responses stream converted as it arrives (native,
        :class:`proxy.wire.responses_stream.EventsToChat`)."""
        req = native_request(body, self.request, self.tr) if self.native else None
        if req is None:
            stream = await self.bound.open_stream(body)
            self.headers = self.bound.headers
            return stream
        resp = await self._post(req, stream=True)
        up: HttpUpstream = self.bound.upstream  # type: ignore[assignment]
        ctype = resp.headers.get("Content-Type", "")
        if "text/event-stream" not in ctype:
            resp.close()
            raise UpstreamError(502, f"upstream {up.name!r} answered a stream request with {ctype or 'no content type'}",
                                reason="bad_response")
        so = body.get("stream_options")
        conv = EventsToChat(include_usage=isinstance(so, dict) and so.get("include_usage") is True,
                            on_response=self._seen)
        return UpstreamStream(self._chat_frames(resp, conv), headers=self.headers, timing=self.bound.timing,
                              closer=resp.close, max_event=getattr(up, "max_event_bytes", DEFAULT_MAX_EVENT_BYTES),
                              name=up.name)

    async def _post(self, req: dict[str, Any], stream: bool = False) -> aiohttp.ClientResponse:
        up: HttpUpstream = self.bound.upstream  # type: ignore[assignment]
        headers = {"content-type": "application/json", "accept": "text/event-stream" if stream else "application/json",
                   **self._client}
        resp = await up.request("POST", "/responses", query="", body=dumps(req), headers=headers,
                                auth=self.bound.auth, timing=self.bound.timing)
        self.headers = relay_headers(resp.headers)
        if resp.status >= 400:
            raise await self._error(resp)
        return resp

    async def _error(self, resp: aiohttp.ClientResponse) -> UpstreamError:
        up: HttpUpstream = self.bound.upstream  # type: ignore[assignment]
        try:
            body: bytes | None = await up.read_capped(resp, min(up.max_response_bytes, ERROR_BODY_LIMIT))
        except (aiohttp.ClientError, asyncio.TimeoutError, UpstreamError):
            body = None
        finally:
            resp.release()
        return UpstreamError(resp.status, f"upstream {up.name!r} answered HTTP {resp.status}",
                             reason=f"http_{resp.status}", body=scrub_secrets(body) if body else None,
                             headers=relay_headers(resp.headers))

    async def _read_json(self, resp: aiohttp.ClientResponse) -> dict[str, Any]:
        up: HttpUpstream = self.bound.upstream  # type: ignore[assignment]
        timing = self.bound.timing
        t0 = time.perf_counter()
        try:
            raw = await up.read_capped(resp)
        except (asyncio.TimeoutError, aiohttp.ServerTimeoutError):
            raise UpstreamError(504, f"upstream {up.name!r} timed out", reason="timeout") from None
        except aiohttp.ClientError:
            raise UpstreamError(502, f"connection to upstream {up.name!r} was lost", reason="disconnect") from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            resp.release()
        return json_object(raw, up.name)

    async def _chat_frames(self, resp: aiohttp.ClientResponse, conv: EventsToChat) -> AsyncIterator[bytes]:
        up: HttpUpstream = self.bound.upstream  # type: ignore[assignment]
        async for data in up.stream_chunks(resp):  # capped, timeouts and lost connections mapped
            out = conv.feed(data)
            if out:
                yield out
        tail = conv.flush()
        if tail:
            yield tail
