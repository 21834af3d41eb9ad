"""The gateway's HTTP/1.1 server protocol: uvicorn's httptools one, with the request head bounded
and the writes of a busy server corked (:class:`CorkedTransport`).

uvicorn's httptools protocol has no limit on a request's head: llhttp keeps an unfinished URL
or header field and the protocol keeps every field, so one client sending an endless header
grows the gateway's memory for as long as it sends (measured before this module: 20 MB of
header lines were buffered and answered 200; uvicorn issue #157, PR #1684 closed without a
limit). uvicorn's h11 protocol has one: h11's ``max_incomplete_event_size``, 16 KiB by default.
:class:`BoundedHttpToolsProtocol` applies the same 16 KiB to a request head (request line and
header fields) and refuses a larger one with a 400 and the connection closed, as uvicorn's h11
protocol does when h11 refuses one.

Every request the server layer refuses before the app sees it -- malformed framing that llhttp
rejects (``Content-Length: abc``, ``-1``, two different values, ``Content-Length`` with
``Transfer-Encoding``, an obs-fold line, a bare CR, a NUL in a header), or a head over the limit
-- is answered in OpenAI's error shape (the product's rule for bad input; uvicorn writes ``400 text/plain``
"Invalid HTTP request received."): ``400 application/json``
``{"error": {"message", "type": "invalid_request_error", "param": null, "code":
"invalid_request"}}``, the message naming llhttp's reason (e.g. "Invalid character in
Content-Length"), and ``connection: close``, as before. A refusal that follows pipelined
requests read whole waits for their answers (uvicorn wrote it at once, ahead of them: the client
took it for the first request's answer), then goes out and the connection closes.

A client's FIN mid-answer lets the answer finish before the connection closes
(:meth:`BoundedHttpToolsProtocol.eof_received`); uvicorn cut it.

An HTTP/1.0 request's answer without ``Content-Length`` (a stream) runs to the connection's
close (:class:`Http10Cycle`); uvicorn chunked it, which HTTP/1.0 clients cannot read.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol, RequestResponseCycle

#: Largest request head (request line and header fields), bytes: h11's
#: ``DEFAULT_MAX_INCOMPLETE_EVENT_SIZE``, uvicorn's ``--h11-max-incomplete-event-size`` default.
MAX_REQUEST_HEAD = 16 * 1024

_TOO_LARGE = f"Request head (request line and header fields) larger than {MAX_REQUEST_HEAD} bytes."


def error_400(message: str) -> bytes:
    """The body of a server-layer 400: OpenAI's error object, ``code`` ``invalid_request``
    (https://platform.openai.com/docs/guides/error-codes)."""
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_request"}}).encode()


class CorkedTransport:
    """A server connection's transport whose writes, while other requests are in flight, are
    held until the event loop's next turn and then written as one: the status line and
    headers of an answer go out with its body in one ``write`` (one syscall, one segment)
    instead of two, and the answers finished in one turn of a busy gateway go out together
    after it, as ``TCP_CORK`` or Node's ``socket.cork()`` batch writes. With no other request in
    flight (``len(tasks) <= 1``) a write goes out at once, so a lone request waits for nothing.

    A write that finds the transport closed (the client's FIN or reset was handled, uvicorn's
    ``connection_lost`` -- which stops the request's writes -- not yet run) is dropped, as
    asyncio's transports drop it; uvloop's raised ``RuntimeError`` into the app, logged as
    "Exception in ASGI application".

    Measured (bench/results/gateway.md "fourth pass", wrk at 32 connections, checks off, three
    servers interleaved in one run): CPU per request 113 -> 93 us, requests/s 8,500 -> 10,600; at
    one connection unchanged (no write is held). Order is kept (a write
    while writes are held joins them); ``close()`` writes what is held first; what is held when
    the connection is already closing is dropped (the peer is gone). Every other transport
    method is the wrapped transport's.

    ``transport``: the connection's asyncio transport; ``loop``: its event loop; ``tasks``: the
    server's set of request tasks (uvicorn's ``ServerState.tasks``)."""

    __slots__ = ("transport", "loop", "tasks", "held")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop, tasks: set[Any]) -> None:
        self.transport = transport
        self.loop = loop
        self.tasks = tasks
        #: the writes held until :meth:`flush`, or None
        self.held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        """Write ``data`` now, or hold it for the loop's next turn (see the class doc)."""
        held = self.held
        if held is not None:
            held.append(data)
        elif len(self.tasks) > 1:
            self.held = [data]
            self.loop.call_soon(self.flush)
        else:
            try:
                self.transport.write(data)
            except RuntimeError:  # uvloop refuses a write to a closed transport; asyncio drops it
                if not self.transport.is_closing():
                    raise

    def flush(self) -> None:
        """Write what is held, as one ``write``."""
        held = self.held
        if held is not None:
            self.held = None
            if not self.transport.is_closing():
                self.transport.write(held[0] if len(held) == 1 else b"".join(held))

    def close(self) -> None:
        """Write what is held, then close."""
        self.flush()
        self.transport.close()

    def is_closing(self) -> bool:
        return self.transport.is_closing()

    def pause_reading(self) -> None:
        self.transport.pause_reading()

    def resume_reading(self) -> None:
        self.transport.resume_reading()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class Http10Cycle(RequestResponseCycle):
    """uvicorn's request-response cycle for an HTTP/1.0 request, whose answer without a
    ``Content-Length`` (a stream) is delimited by the connection's close instead of chunked:
    uvicorn chunks it whatever the request's version, and HTTP/1.0 has no chunked coding (RFC
    9112 section 6.1: a server MUST NOT send ``Transfer-Encoding`` unless the request is
    HTTP/1.1 or later; section 6.3 item 8: a body without a length runs to the close). uvicorn
    never keeps an HTTP/1.0 connection alive, so the close always comes. Set on the cycle by
    :meth:`BoundedHttpToolsProtocol.on_headers_complete`."""

    #: the body runs to the connection's close (no Content-Length was given)
    to_close = False

    async def send(self, message: Any) -> None:
        """uvicorn's ``send``, with a length-less body written bare (see the class doc)."""
        if message["type"] == "http.response.start":
            if not self.response_started and not any(
                    name.lower() == b"content-length" for name, _ in message.get("headers", ())):
                self.to_close, self.chunked_encoding = True, False
        elif self.to_close and message["type"] == "http.response.body":
            # uvicorn counts the body down from a Content-Length: give it the one it will see
            self.expected_content_length = sys.maxsize if message.get("more_body", False) else len(message.get("body", b""))
        await RequestResponseCycle.send(self, message)


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``HttpToolsProtocol`` refusing a request whose head is still unfinished after
    :data:`MAX_REQUEST_HEAD` bytes (so at most that plus one socket read is ever buffered).
    A head is unfinished while the request's scope has no ``method`` yet (uvicorn creates the
    scope when a message begins and sets ``method`` when its headers are complete), so a
    request costs one check per read (~0.3 us measured in a Python replica on this machine; the
    gateway spends ~80-250 us of CPU per request, bench/results/gateway.md). Also: a refusal
    after pipelined requests waits for their answers (:meth:`send_400_response`), a FIN
    mid-answer lets it finish (:meth:`eof_received`), an HTTP/1.0 answer is never chunked
    (:meth:`on_headers_complete`, the one parser callback overridden: a version check per
    request). Each case: tests/hostile/test_hostile_http_layer.py."""

    _head_scope: object = None
    _unfinished = 0
    #: a server-layer 400 waiting for the answers owed before it (:meth:`send_400_response`)
    _refusal: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """uvicorn's, with the transport wrapped in a :class:`CorkedTransport`."""
        HttpToolsProtocol.connection_made(self, CorkedTransport(transport, self.loop, self.tasks))  # type: ignore[arg-type]

    def eof_received(self) -> bool | None:
        """The client shut its sending side (FIN). Mid-answer (the last request's answer started,
        not finished) the answer is finished and then the connection closed: a FIN cannot tell a
        client that left from one that only finished sending (``shutdown(SHUT_WR)``, RFC 9112
        section 9.6), and a cut answer is the worse mistake -- a client that left is found at the
        next write (a reset). Otherwise, as uvicorn: the connection closes, and a request still
        waiting for its answer sees its client gone (its upstream call is cancelled,
        :mod:`proxy._asgi.disconnect`)."""
        cycle = self.cycle
        if cycle is not None and cycle.response_started and not cycle.response_complete and not self.pipeline:
            cycle.keep_alive = False
            return True
        return None

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown of this connection (closed now if idle, else after its
        answer); and, half a second before the server's graceful-shutdown limit
        (``timeout_graceful_shutdown``), a connection whose answer is still unfinished -- most
        often a client that stopped reading, its writes paused -- is aborted: its request sees
        the client gone and ends as a disconnect, where uvicorn's cancel at the limit ended it
        with a CancelledError logged as "Exception in ASGI application" and a traceback."""
        HttpToolsProtocol.shutdown(self)
        grace = self.config.timeout_graceful_shutdown
        if grace is not None and not self.transport.is_closing():
            self.loop.call_later(max(0.0, grace - 0.5), self._give_up)

    def _give_up(self) -> None:
        """Abort the connection if it is still open (see :meth:`shutdown`)."""
        if not self.transport.is_closing():
            self.transport.abort()

    def on_headers_complete(self) -> None:
        """uvicorn's; an HTTP/1.0 request's cycle becomes an :class:`Http10Cycle`."""
        HttpToolsProtocol.on_headers_complete(self)
        scope = self.scope
        if scope["http_version"] == "1.0" and self.cycle is not None and self.cycle.scope is scope:
            self.cycle.__class__ = Http10Cycle

    def data_received(self, data: bytes) -> None:
        if self._refusal is not None:  # the request stream is broken: nothing after it is read
            return
        HttpToolsProtocol.data_received(self, data)  # not super(): ~0.1 us less per read
        scope = self.scope
        if scope is not None and "method" not in scope and not self.transport.is_closing():
            if scope is not self._head_scope:  # a new request's head began in this read
                self._head_scope, self._unfinished = scope, 0
            self._unfinished += len(data)
            if self._unfinished > MAX_REQUEST_HEAD:
                self.logger.warning(_TOO_LARGE)
                self.send_400_response(_TOO_LARGE)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's refusal (malformed request, or the head limit above) in OpenAI's error
        shape. Called by uvicorn inside its ``except httptools.HttpParserError`` block: the
        parser's own reason, when there is one, replaces uvicorn's generic message."""
        exc = sys.exc_info()[1]
        if isinstance(exc, httptools.HttpParserError) and exc.args and isinstance(exc.args[0], str):
            msg = f"Invalid HTTP request: {exc.args[0].rstrip('.')}."
        body = error_400(msg)
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content += [b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode("ascii"),
                    b"\r\nconnection: close\r\n\r\n", body]
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete and not cycle.more_body:
            # earlier requests, read whole, are still owed their answers: the refusal waits for
            # them (RFC 9112 section 9.3.2), and nothing more is read
            self._refusal = b"".join(content)
            self.transport.pause_reading()
            cycle.on_response = self._refuse_after  # the last request read is the last answered
            return
        self.transport.write(b"".join(content))
        self.transport.close()

    def _refuse_after(self) -> None:
        """The last answer owed before a waiting refusal (:meth:`send_400_response`) is complete:
        uvicorn's ``on_response_complete``, then the refusal written and the connection closed.
        Set as that request's cycle's ``on_response`` only when a refusal waits, so an ordinary
        answer costs nothing."""
        HttpToolsProtocol.on_response_complete(self)
        if self._refusal is not None and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self.transport.write(self._refusal)
            self.transport.close()
