"""A small HTTP/1.1 client for the gateway's hot path: one whole request -> one whole response.

Why it exists (measured, bench/results/client.md and gateway.md "Fourth pass"): on this
machine aiohttp's ``ClientSession.post`` + ``read`` costs 266-326 us of CPU per chat
completion, the largest single item of the gateway's hop; an asyncio ``Protocol`` feeding the
response to ``httptools`` (the llhttp parser uvicorn already uses for the server side) costs
55-105 us for the same exchange. Other clients in the same runs: pyreqwest 141-216 us,
aiosonic ~500-530 us, curl_cffi ~565-595 us.
The issue's floor (added p50 <= 0.5 ms at one connection) is out of reach with aiohttp's
per-request cost, so non-stream chat completions -- the requests whose whole body the gateway
needs anyway -- go through this client. Streams and the other pass-through routes keep aiohttp,
whose incremental body reading they need.

What it does, and only that:

* ``http`` and ``https`` origins (TLS through :mod:`ssl`'s default context, SNI and hostname
  checks on), HTTP/1.1 with keep-alive; one request at a time per connection, idle connections
  kept per origin (last used first) for ``keepalive_s`` seconds; a connection the server closed
  or half-closed while idle -- also when its FIN is still unread in the kernel because the
  event loop was busy -- is dropped before it could be reused (one ``poll(2)``, ~1.5 us).
* An upstream seen closing a connection within ``CLOSES_AFTER_ANSWER_S`` of an answer that
  had no ``Connection: close`` closes after every answer: for ``NO_REUSE_S`` its connections
  are not kept (a FIN that trails the answer by a moment would lose a request written in it).
* A request is sent at most once; it goes again on a new connection, once, only when not a
  byte of it was written (the picked connection turned out closed). A request whose bytes left
  is never re-sent (POST is not idempotent, RFC 9110 section 9.2.2).
* Response framing by ``Content-Length``, chunked transfer coding, or connection close
  (RFC 9112 section 6.3); ``1xx`` interim responses are skipped (section 4 of RFC 9110, 15.2);
  ``Connection: close`` and HTTP/1.0 answers end the connection after the response.
* ``Content-Encoding`` ``gzip``/``deflate`` (what ``Accept-Encoding`` asks for) decoded with
  :mod:`zlib`, with the decoded size bounded too (a small compressed body cannot expand past
  ``max_body``).
* Timeouts: ``connect_s`` for TCP + TLS set-up, ``read_s`` for the longest silence while a
  response is awaited or read (aiohttp's ``sock_read`` meaning). No total timeout.
* Size of what is not body: the status lines and header fields of the answer (with any
  interim ``1xx`` heads before it) and its trailer fields, together at most :data:`MAX_HEAD`
  bytes (16 KiB) per request, as h11 (the HTTP/1.1 parser of the ``openai`` SDK's httpx) and
  Node.js (``--max-http-header-size``) allow; more is a :class:`BadResponse`, so an endless
  header cannot grow the gateway's memory (httptools buffers a field until its CRLF).
* Cancellation (the client of the gateway went away): the connection is aborted, so the
  upstream sees the close at once and stops generating.

Errors raised (all :class:`Http1Error`): :class:`ConnectFailed` (nothing was sent: DNS, refused,
TLS, connect timeout, a new connection closed before the request was written -- safe to
retry), :class:`ReadTimeout`, :class:`Disconnected` (the
connection ended before the response did), :class:`ResponseTooLarge`, :class:`BadResponse`
(not HTTP, or an unknown/corrupt content coding). The caller maps them to OpenAI error shapes.
"""

from __future__ import annotations

import asyncio
import base64
import select
import ssl
import time
import zlib
from collections.abc import Iterable
from typing import Any

import httptools
from yarl import URL

__all__ = ["Http1Client", "Http1Pool", "Http1Response", "Http1Error", "ConnectFailed", "NotSent", "ReadTimeout",
           "Disconnected", "ResponseTooLarge", "BadResponse"]


class Http1Error(Exception):
    """Base of the client's errors; ``str(exc)`` says what happened (never a header value)."""


class ConnectFailed(Http1Error):
    """No connection could be set up (DNS, refused, TLS handshake, ``connect_s`` elapsed):
    the request was never sent. ``timed_out`` tells a timeout from a refusal."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class NotSent(Http1Error):
    """The connection was closed when the request was to be written: no byte of it left the
    gateway (the pool sends it again on a new connection, once)."""


class ReadTimeout(Http1Error):
    """No byte of the response arrived for ``read_s`` seconds."""


class Disconnected(Http1Error):
    """The connection ended (closed, reset) before the whole response was received."""


class ResponseTooLarge(Http1Error):
    """The response body (after content decoding) is larger than ``max_body`` bytes."""


class BadResponse(Http1Error):
    """The bytes are not a valid HTTP/1.x response, or its content coding cannot be decoded."""


class Http1Response:
    """A whole response: ``status`` (int), ``headers`` (list of ``(name, value)`` str pairs,
    names lower-cased, in arrival order, repeats kept), ``body`` (bytes, content-decoded)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def header(self, name: str) -> str | None:
        """The last value of header ``name`` (lower-case), or None."""
        for k, v in reversed(self.headers):
            if k == name:
                return v
        return None


#: Largest sum of response head bytes (status line, header and trailer fields, interim heads)
#: per request: h11's ``DEFAULT_MAX_INCOMPLETE_EVENT_SIZE`` and Node.js's default
#: ``--max-http-header-size``, both 16 KiB. aiohttp allows 8190 bytes per line.
MAX_HEAD = 16 * 1024

_FORBIDDEN = (b"\r", b"\n", b"\0")

#: An idle connection closed by the upstream this soon after its answer (seconds) marks an
#: upstream that closes after every answer (keep-alive idle timeouts are seconds: uvicorn 5 s,
#: Node.js 5 s, nginx 75 s).
CLOSES_AFTER_ANSWER_S = 1.0
#: How long connections to such an upstream are not reused (seconds).
NO_REUSE_S = 60.0

#: readable (bytes or EOF), peer hung up / half-closed, error
_POLL_EVENTS = select.POLLIN | select.POLLPRI | getattr(select, "POLLRDHUP", 0)


def _check_header(name: bytes, value: bytes) -> None:
    """Refuse CR, LF and NUL in a header (RFC 9110 section 5.5): they would split the request."""
    for c in _FORBIDDEN:
        if c in name or c in value:
            raise ValueError("header field contains CR, LF or NUL")


class _Connection(asyncio.Protocol):
    """One keep-alive connection; receives one response at a time into ``waiter``."""

    __slots__ = ("pool", "transport", "parser", "waiter", "status", "headers", "body", "size",
                 "max_body", "decoder", "framed", "last_read", "timer", "read_s", "idle_since",
                 "complete", "keep_alive", "head_size", "field_size", "got_body", "fd", "poller", "aborted")

    def __init__(self, pool: "Http1Pool") -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Http1Response] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.idle_since = 0.0
        self.aborted = False  # closed by the gateway, not by the upstream
        self.head_size = self.field_size = 0
        self.got_body = False
        self._reset()

    def _reset(self) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.body: list[bytes] = []
        self.size = 0
        self.decoder: Any = None
        self.framed = False
        self.complete = False
        self.keep_alive = False

    # ---- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        self.fd = sock.fileno() if sock is not None else -1
        #: a poll object with this socket registered, made once (:meth:`quiet` polls it per reuse)
        self.poller: Any = None
        if self.fd >= 0:
            try:
                self.poller = select.poll()
                self.poller.register(self.fd, _POLL_EVENTS)
            except (OSError, ValueError):
                self.poller = None

    def quiet(self) -> bool:
        """Whether this idle connection can carry a request: open, and nothing waiting in the
        kernel that the event loop has not read yet -- a FIN (the server closed or half-closed
        it), a reset, or bytes no request asked for. One ``poll(2)`` with a zero timeout
        (~1.5 us). Without it, a connection the server closed right after its last answer was
        reused whenever its FIN had not been processed yet (tests/hostile/test_hostile_upstream.py)."""
        t = self.transport
        if t is None or t.is_closing():
            return False
        if self.fd < 0:
            return True
        p = self.poller
        if p is None:  # the socket could not be registered: not known to be quiet
            return False
        try:
            return not p.poll(0)
        except (OSError, ValueError):
            return False

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes while idle: the connection is out of step, drop it
            self.close()
            return
        self.last_read = self.pool.loop.time()
        self.got_body = False
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError:
            # a callback failed the waiter with its own error already; anything else it raised
            # must not leave the request waiting for the read timeout
            self._fail(BadResponse("invalid HTTP response"))
        except httptools.HttpParserUpgrade:  # 101 (or CONNECT) though no upgrade was asked for
            self._fail(BadResponse("the upstream switched protocols unasked (HTTP 101)"))
        except httptools.HttpParserError as exc:
            self._fail(BadResponse(f"invalid HTTP response: {exc}"))
        else:
            # bytes that carried no body byte and did not end the answer: a head or trailer
            # still incomplete (httptools keeps the open field), or framing; bounded by MAX_HEAD
            if not self.got_body and self.waiter is not None and not self.waiter.done():
                self.head_size += len(data)
                if self.head_size > MAX_HEAD:
                    self._fail(BadResponse(f"response head or trailers larger than {MAX_HEAD} bytes"))

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost settles the waiter

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            if (waiter is None and not self.aborted and self.idle_since
                    and time.monotonic() - self.idle_since < CLOSES_AFTER_ANSWER_S):
                self.pool.saw_close_after_answer()  # closed by the upstream right after an answer
            return
        if self.status and not self.framed and not self.complete:
            self._finish()  # a body delimited by the connection's close (RFC 9112 section 6.3 item 8)
            return
        self._fail(Disconnected("the upstream closed the connection before the response ended"
                                if exc is None else f"connection lost: {type(exc).__name__}"))

    # ---- httptools callbacks
    def on_message_begin(self) -> None:
        if self.waiter is None or self.waiter.done():  # bytes past the awaited response
            self.close()
            raise httptools.HttpParserCallbackError("unexpected response")
        self._reset()

    def on_header(self, name: bytes, value: bytes) -> None:
        self.field_size += len(name) + len(value) + 4
        if self.field_size > MAX_HEAD:  # many fields that arrived in one read
            self._fail(BadResponse(f"response head or trailers larger than {MAX_HEAD} bytes"))
            raise httptools.HttpParserCallbackError("head too large")
        self.headers.append((name.decode("latin-1").lower(), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self.status = status
        enc = None
        for k, v in self.headers:
            if k == "content-length":
                self.framed = True
                if v.strip().isdigit() and int(v) > self.max_body:  # as aiohttp's Content-Length check did
                    self._fail(ResponseTooLarge(f"response body larger than {self.max_body} bytes"))
                    raise httptools.HttpParserCallbackError("too large")
            elif k == "transfer-encoding" and "chunked" in v.lower():
                self.framed = True
            elif k == "content-encoding":
                enc = v.strip().lower()
        if status in (204, 304) or 100 <= status < 200:
            self.framed = True
        if enc and enc != "identity":
            if enc in ("gzip", "x-gzip"):
                self.decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
            elif enc == "deflate":
                self.decoder = _Deflate()
            else:
                self._fail(BadResponse(f"unsupported content coding {enc[:40]!r}"))
                raise httptools.HttpParserCallbackError("unsupported content coding")

    def on_body(self, chunk: bytes) -> None:
        self.got_body = True
        if self.decoder is not None:
            try:  # at most one byte past the limit is decoded (max_length >= 1 here: 0 means no limit)
                chunk = self.decoder.decompress(chunk, self.max_body + 1 - self.size)
            except zlib.error:
                self._fail(BadResponse("corrupt compressed body"))
                raise httptools.HttpParserCallbackError("corrupt body") from None
        self.size += len(chunk)
        if self.size > self.max_body:
            self._fail(ResponseTooLarge(f"response body larger than {self.max_body} bytes"))
            raise httptools.HttpParserCallbackError("too large")
        self.body.append(chunk)

    def on_message_complete(self) -> None:
        if 100 <= self.status < 200:  # interim response: the real one follows
            self._reset()
            return
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()
        self._finish()

    # ---- settling
    def _finish(self) -> None:
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        if self.decoder is not None:
            try:
                tail = self.decoder.flush()
            except zlib.error:
                self._fail(BadResponse("corrupt compressed body"))
                return
            if not self.decoder.eof and (self.size or tail):
                # the compressed stream was cut: the body is incomplete (an empty body under a
                # Content-Encoding header, as some servers send with errors, is not cut)
                self._fail(BadResponse("truncated compressed body"))
                return
            if tail:
                self.size += len(tail)
                if self.size > self.max_body:
                    self._fail(ResponseTooLarge(f"response body larger than {self.max_body} bytes"))
                    return
                self.body.append(tail)
        parts, self.body = self.body, []  # an idle keep-alive connection holds no answer
        body = parts[0] if len(parts) == 1 else b"".join(parts)
        waiter.set_result(Http1Response(self.status, self.headers, body))

    def _fail(self, exc: Http1Error) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)
        # what was received is dropped now, not when the connection object is collected: the
        # exception's traceback references this connection (a cycle the GC may keep for long)
        self.body, self.decoder = [], None
        self.close()

    def _on_timer(self) -> None:
        self.timer = None
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        loop = self.pool.loop
        due = self.last_read + self.read_s
        if loop.time() >= due:
            self._fail(ReadTimeout(f"no data from the upstream for {self.read_s:g} s"))
        else:
            self.timer = loop.call_at(due, self._on_timer)

    def close(self) -> None:
        """Abort the connection (no graceful shutdown: a half-read answer is worthless)."""
        t = self.transport
        self.aborted = True
        if t is not None:
            self.transport = None
            t.abort()

    async def exchange(self, data: bytes, read_s: float, max_body: int) -> Http1Response:
        """Send ``data`` (a whole request) and await the whole response."""
        loop = self.pool.loop
        self.max_body = max_body
        self.read_s = read_s
        self.head_size = self.field_size = 0
        self.last_read = loop.time()
        self.waiter = waiter = loop.create_future()
        t = self.transport
        if t is None or t.is_closing():  # closed since it was picked: not a byte written
            self.waiter = None
            raise NotSent("the connection closed before the request was written")
        self.timer = loop.call_at(self.last_read + read_s, self._on_timer)
        t.write(data)
        try:
            return await waiter
        except BaseException:
            self.close()
            raise
        finally:
            self.waiter = None
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None


class _Deflate:
    """``Content-Encoding: deflate``: RFC 9110 section 8.4.1.2 says zlib format (RFC 1950), but
    some servers send raw deflate (RFC 1951); the first bytes decide, as browsers do."""

    __slots__ = ("obj",)

    def __init__(self) -> None:
        self.obj: Any = None

    @property
    def eof(self) -> bool:
        """The end of the compressed stream was reached."""
        return self.obj is not None and self.obj.eof

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self.obj is None:
            raw = not (len(data) >= 2 and (data[0] & 0x0F) == 8 and ((data[0] << 8) | data[1]) % 31 == 0)
            self.obj = zlib.decompressobj(-zlib.MAX_WBITS if raw else zlib.MAX_WBITS)
        return self.obj.decompress(data, max_length)

    def flush(self) -> bytes:
        return self.obj.flush() if self.obj is not None else b""


class Http1Pool:
    """Keep-alive connections to one origin (``scheme://host:port``).

    ``keepalive_s``: an idle connection older than this is closed instead of reused (seconds).
    Not thread-safe; use from the event loop that created it.
    """

    def __init__(self, url: URL, *, ssl_context: ssl.SSLContext | None, keepalive_s: float) -> None:
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"unsupported upstream URL scheme {url.scheme!r}")
        self.host = url.host
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.ssl = (ssl_context or ssl.create_default_context()) if url.scheme == "https" else None
        self.keepalive_s = keepalive_s
        self.loop = asyncio.get_running_loop()
        self.idle: list[_Connection] = []
        #: until when (time.monotonic) answers are taken as ending their connection: the
        #: upstream was seen closing connections right after answering (see saw_close_after_answer)
        self.no_reuse_until = 0.0
        host = url.raw_host or ""
        if ":" in host:  # IPv6 literal
            host = f"[{host}]"
        if not url.is_default_port():
            host = f"{host}:{self.port}"
        self.host_header = host.encode("ascii")

    async def _connect(self, connect_s: float) -> _Connection:
        try:
            async with asyncio.timeout(connect_s):
                _, conn = await self.loop.create_connection(
                    lambda: _Connection(self), self.host, self.port, ssl=self.ssl,
                    server_hostname=self.host if self.ssl else None)
        except TimeoutError:
            raise ConnectFailed(f"no connection within {connect_s:g} s", timed_out=True) from None
        except (OSError, ssl.SSLError) as exc:  # refused, unreachable, DNS (gaierror), TLS
            raise ConnectFailed(f"cannot connect: {type(exc).__name__}") from None
        return conn

    def _idle_connection(self) -> _Connection | None:
        now = time.monotonic()
        while self.idle:
            conn = self.idle.pop()
            if now - conn.idle_since < self.keepalive_s:
                if conn.quiet():
                    return conn
                if now - conn.idle_since < CLOSES_AFTER_ANSWER_S:  # its FIN (or junk) right behind the answer
                    self.saw_close_after_answer()
            conn.close()
        return None

    async def request(self, head: bytes, body: bytes, *, connect_s: float, read_s: float,
                      max_body: int) -> Http1Response:
        """Send ``head`` (request line and header lines, each ending in CRLF, without the
        ``Host``/``Content-Length`` lines and the blank line) and ``body``; return the whole
        response. Raises the module's :class:`Http1Error` subclasses (see the module doc).

        An idle connection is reused only when :meth:`_Connection.quiet` (nothing from the
        server since its last answer). The request is sent at most once: it is sent again, on a
        new connection and only once, when no byte of it was written (the connection turned out
        closed when it was to be written); a request whose bytes were written is never re-sent,
        whatever happens next (RFC 9110 section 9.2.2: POST is not idempotent)."""
        data = b"%sHost: %s\r\nContent-Length: %d\r\n\r\n%s" % (head, self.host_header, len(body), body)
        conn = self._idle_connection()
        if conn is not None:
            try:
                return self._settle(conn, await conn.exchange(data, read_s, max_body))
            except NotSent:
                pass  # nothing was written: a new connection, once
        conn = await self._connect(connect_s)
        try:
            resp = await conn.exchange(data, read_s, max_body)
        except NotSent:
            raise ConnectFailed("the new connection closed before the request could be sent") from None
        return self._settle(conn, resp)

    def saw_close_after_answer(self) -> None:
        """An idle connection was closed by the upstream within :data:`CLOSES_AFTER_ANSWER_S`
        of its answer, which had no ``Connection: close``: such an upstream closes after every
        answer, and its FIN may trail the answer by a moment -- a request written in that
        moment is lost and may not be re-sent. For :data:`NO_REUSE_S` no connection to it is
        reused (each request opens its own), then reuse is tried again."""
        self.no_reuse_until = time.monotonic() + NO_REUSE_S
        while self.idle:
            self.idle.pop().close()

    def _settle(self, conn: _Connection, resp: Http1Response) -> Http1Response:
        """Keep ``conn`` for reuse when the answer allows it; return ``resp``."""
        if conn.keep_alive and conn.transport is not None and time.monotonic() >= self.no_reuse_until:
            conn.idle_since = now = time.monotonic()
            self.idle.append(conn)
            # the oldest idle connections (left by a past burst) are closed once past keepalive_s
            while self.idle and now - self.idle[0].idle_since >= self.keepalive_s:
                self.idle.pop(0).close()
        else:
            conn.close()
        return resp

    def close(self) -> None:
        """Close every idle connection."""
        while self.idle:
            self.idle.pop().close()


class Http1Client:
    """Pools per origin, shared by a process's upstreams (``pool(url)``); ``close()`` at shutdown.

    ``keepalive_s`` defaults to 30 s, as the aiohttp connector the gateway used before.
    """

    def __init__(self, *, keepalive_s: float = 30.0, ssl_context: ssl.SSLContext | None = None) -> None:
        self.keepalive_s = keepalive_s
        self.ssl_context = ssl_context
        self._pools: dict[tuple[str, str, int], Http1Pool] = {}

    def pool(self, url: URL) -> Http1Pool:
        """The pool for ``url``'s origin (created on first use; needs a running loop). The
        https pools share one TLS context (``ssl_context``, else the default one)."""
        key = (url.scheme, url.host or "", url.port or 0)
        pool = self._pools.get(key)
        if pool is None:
            if url.scheme == "https" and self.ssl_context is None:
                # once per client: loading the trust store is blocking disk I/O (~10 ms)
                self.ssl_context = ssl.create_default_context()
            pool = self._pools[key] = Http1Pool(url, ssl_context=self.ssl_context, keepalive_s=self.keepalive_s)
        return pool

    def close(self) -> None:
        """Close every pool's idle connections."""
        for p in self._pools.values():
            p.close()
        self._pools.clear()


def request_head(method: str, url: URL, headers: Iterable[tuple[str, str]]) -> bytes:
    """The request line and header lines for ``method url`` (without ``Host`` and
    ``Content-Length``, which the pool adds). ``Accept-Encoding: gzip, deflate`` is added;
    credentials in ``url`` become ``Authorization: Basic`` unless ``headers`` have one
    (RFC 7617). Raises ValueError on CR/LF/NUL in a header."""
    lines = [b"%s %s HTTP/1.1\r\n" % (method.encode("ascii"), (url.raw_path_qs or "/").encode("ascii"))]
    names = set()
    for k, v in headers:
        names.add(k.lower())
        lines.append(header_line(k, v))
    if "accept" not in names:
        lines.append(b"Accept: */*\r\n")
    if "accept-encoding" not in names:
        lines.append(b"Accept-Encoding: gzip, deflate\r\n")
    if url.raw_user and "authorization" not in names:
        cred = f"{url.user or ''}:{url.password or ''}".encode()
        lines.append(b"Authorization: Basic %s\r\n" % base64.b64encode(cred))
    return b"".join(lines)


def header_line(name: str, value: str) -> bytes:
    """One ``name: value`` CRLF line; raises ValueError on CR/LF/NUL."""
    kb, vb = name.encode("latin-1"), value.encode("latin-1")
    _check_header(kb, vb)
    return b"%s: %s\r\n" % (kb, vb)
