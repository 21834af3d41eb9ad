"""proxy/upstreams/http1.py against real loopback servers that answer with scripted bytes.

Each case is a kind of answer real upstreams (and the proxies in front of them) send: keep-alive
reuse, chunked and gzip bodies, bodies ended by closing, ``Connection: close``, idle connections
closed by the server, interim ``100 Continue``, and the failures (cut-off body, silence, garbage,
oversize and decompression bombs, cancellation by the gateway's client going away), plus TLS.
"""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import Awaitable, Callable

import pytest
import trustme
from yarl import URL

from proxy.upstreams import http1

BODY = b'{"id":"chatcmpl-1","object":"chat.completion","choices":[]}'
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class Server:
    """A loopback server running ``make(server)(reader, writer, connection_number)`` per
    connection; records the requests it read and whether the client closed a connection."""

    def __init__(self, make: "Callable[[Server], Handler]") -> None:
        self.handler = make(self)
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed_by_client = asyncio.Event()

    async def __aenter__(self) -> "Server":
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = URL(f"http://127.0.0.1:{self.port}/v1/chat/completions")
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.handler(reader, writer, self.connections)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        """One request (head + Content-Length body), or None at EOF."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            self.closed_by_client.set()
            return None
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        body = await reader.readexactly(length)
        self.requests.append(head + body)
        return head + body


def response(body: bytes = BODY, status: str = "200 OK", headers: tuple[bytes, ...] = ()) -> bytes:
    extra = b"".join(h + b"\r\n" for h in headers)
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        status.encode(), len(body), extra, body)


def keep_alive(answer: bytes) -> Callable[[Server], Handler]:
    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            while await srv.read_request(reader) is not None:
                writer.write(answer)
                await writer.drain()
        return handler
    return make


HEAD = http1.request_head("POST", URL("http://127.0.0.1/v1/chat/completions"),
                          [("Content-Type", "application/json"), ("Authorization", "Bearer sk-test")])


async def _request(pool: http1.Http1Pool, body: bytes = b'{"model":"m"}', *, read_s: float = 30.0,
                   max_body: int = 1 << 20) -> http1.Http1Response:
    return await pool.request(HEAD, body, connect_s=5.0, read_s=read_s, max_body=max_body)


def _pool(srv: Server, **kw: object) -> http1.Http1Pool:
    return http1.Http1Client(**kw).pool(srv.url)  # type: ignore[arg-type]


async def test_keep_alive_reuses_one_connection_and_sends_a_well_formed_request() -> None:
    async with Server(keep_alive(response(headers=(b"x-request-id: up-1",)))) as srv:
        pool = _pool(srv)
        for i in range(3):
            resp = await _request(pool, b'{"n":%d}' % i)
            assert resp.status == 200 and resp.body == BODY
            assert resp.header("x-request-id") == "up-1" and resp.header("content-type") == "application/json"
        assert srv.connections == 1
        first = srv.requests[0]
        assert first.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert b"\r\nHost: 127.0.0.1:%d\r\n" % srv.port in first
        assert b"\r\nAuthorization: Bearer sk-test\r\n" in first and b"\r\nContent-Length: 7\r\n" in first
        assert srv.requests[2].endswith(b'\r\n\r\n{"n":2}')
        pool.close()


async def test_chunked_gzip_body_is_decoded() -> None:
    packed = gzip.compress(BODY)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(packed[i:i + 7]), packed[i:i + 7]) for i in range(0, len(packed), 7))
    answer = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-encoding: gzip\r\n"
              b"transfer-encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n")
    async with Server(keep_alive(answer)) as srv:
        pool = _pool(srv)
        assert (await _request(pool)).body == BODY
        assert (await _request(pool)).body == BODY
        assert srv.connections == 1
        assert b"\r\nAccept-Encoding: gzip, deflate\r\n" in srv.requests[0]


@pytest.mark.parametrize("packed", [zlib.compress(BODY), zlib.compress(BODY)[2:-4]], ids=["zlib", "raw"])
async def test_deflate_in_both_wrappings_is_decoded(packed: bytes) -> None:
    async with Server(keep_alive(response(packed, headers=(b"content-encoding: deflate",)))) as srv:
        assert (await _request(_pool(srv))).body == BODY


async def test_body_delimited_by_close_and_connection_close_are_not_reused() -> None:
    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            if n == 1:  # no Content-Length, no chunking: the body ends when the connection does
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n" + BODY)
            else:
                writer.write(response(headers=(b"connection: close",)))
            await writer.drain()
        return handler
    async with Server(make) as srv:
        pool = _pool(srv)
        assert (await _request(pool)).body == BODY
        assert (await _request(pool)).body == BODY
        assert (await _request(pool)).body == BODY
        assert srv.connections == 3 and not pool.idle


async def test_idle_connection_closed_by_the_server_is_not_reused() -> None:
    closed = asyncio.Event()

    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            writer.write(response())
            await writer.drain()
            if n == 1:  # a server's idle timeout, as uvicorn's 5 s keep-alive
                writer.close()
                await writer.wait_closed()
                closed.set()
                return
            while await srv.read_request(reader) is not None:
                writer.write(response())
        return handler
    async with Server(make) as srv:
        pool = _pool(srv)
        await _request(pool)
        await closed.wait()
        conn = pool.idle[-1]
        while conn.transport is not None:  # the FIN reaches the client's loop
            await asyncio.sleep(0.01)
        assert (await _request(pool)).body == BODY
        assert srv.connections == 2


def _closes_after_each_answer(srv: Server, *, half: bool, delay: float = 0.0) -> Handler:
    """Answers one request per connection without ``Connection: close``, then closes the
    connection (``half``: only its sending side, reading on: whatever arrives later is
    recorded in ``srv.requests``, as if it had reached the application)."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await srv.read_request(reader)
        writer.write(response())
        await writer.drain()
        await asyncio.sleep(delay)
        if half:
            writer.write_eof()
            while await srv.read_request(reader) is not None:
                pass
        else:
            writer.close()
    return handler


@pytest.mark.parametrize("half", [False, True], ids=["closed", "half-closed"])
async def test_a_connection_closed_after_its_answer_is_never_reused(half: bool) -> None:
    """An upstream that closes (or half-closes) after every answer without
    ``Connection: close``. When its FIN is in the kernel but the event loop has not read it yet
    (the loop was busy: ``time.sleep`` stands for CPU-bound work), the connection is not
    reused: the next request goes on a new connection, and reaches the upstream once."""
    import time

    async with Server(lambda srv: _closes_after_each_answer(srv, half=half)) as srv:
        pool = _pool(srv)
        for i in range(5):
            resp = await _request(pool, b'{"n":%d}' % i)
            assert resp.status == 200 and resp.body == BODY
            time.sleep(0.05)  # the FIN arrives while the loop is blocked
        assert srv.connections == 5
        assert [r.rsplit(b"\r\n\r\n", 1)[1] for r in srv.requests] == [b'{"n":%d}' % i for i in range(5)]


async def test_an_upstream_seen_closing_after_answers_gets_no_reuse() -> None:
    """When the FIN trails the answer by a moment, a request written in that moment is lost
    (and may not be re-sent): once an upstream was seen closing a connection right after its
    answer, connections to it are not kept for reuse (for ``NO_REUSE_S``)."""
    async with Server(lambda srv: _closes_after_each_answer(srv, half=False, delay=0.02)) as srv:
        pool = _pool(srv)
        assert (await _request(pool)).body == BODY
        assert len(pool.idle) == 1  # not known yet
        await asyncio.sleep(0.2)  # the FIN arrives and is read while idle
        assert not pool.idle and pool.no_reuse_until > 0
        for _ in range(3):
            assert (await _request(pool)).body == BODY
            assert not pool.idle  # each answer's connection is closed by the gateway at once
        assert srv.connections == 4


async def test_a_request_that_reached_the_upstream_is_never_sent_again() -> None:
    """The other half of the rule: the FIN arrives after the request was written (the upstream
    read it, then closed without answering): Disconnected, and the request is not re-sent."""
    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            writer.write(response())
            await writer.drain()
            await srv.read_request(reader)  # the reuse: read, then close without an answer
        return handler
    async with Server(make) as srv:
        pool = _pool(srv)
        assert (await _request(pool)).body == BODY
        with pytest.raises(http1.Disconnected):
            await _request(pool)
        assert len(srv.requests) == 2 and srv.connections == 1


async def test_interim_100_continue_is_skipped() -> None:
    async with Server(keep_alive(b"HTTP/1.1 100 Continue\r\n\r\n" + response())) as srv:
        pool = _pool(srv)
        resp = await _request(pool)
        assert resp.status == 200 and resp.body == BODY
        assert (await _request(pool)).body == BODY


async def test_error_status_keeps_its_body_and_headers() -> None:
    err = b'{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}'
    async with Server(keep_alive(response(err, "429 Too Many Requests", (b"retry-after: 7",)))) as srv:
        resp = await _request(_pool(srv))
        assert resp.status == 429 and resp.body == err and resp.header("retry-after") == "7"


async def test_connection_cut_mid_body_is_disconnected() -> None:
    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            writer.write(response()[:-10])
            await writer.drain()
        return handler
    async with Server(make) as srv:
        with pytest.raises(http1.Disconnected):
            await _request(_pool(srv))


async def test_silence_is_a_read_timeout_and_the_connection_is_dropped() -> None:
    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{")  # then nothing
            await writer.drain()
            await srv.read_request(reader)  # returns at the client's close
        return handler
    async with Server(make) as srv:
        pool = _pool(srv)
        with pytest.raises(http1.ReadTimeout):
            await _request(pool, read_s=0.3)
        await srv.closed_by_client.wait()
        assert not pool.idle


@pytest.mark.parametrize("answer", [
    response(b"x" * 5000),  # Content-Length over the limit: refused before the body is read
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
    + b"".join(b"400\r\n" + b"x" * 1024 + b"\r\n" for _ in range(6)) + b"0\r\n\r\n",  # grows past it
    response(gzip.compress(b"x" * 1_000_000), headers=(b"content-encoding: gzip",)),  # ~1 kB that decodes to 1 MB
], ids=["content-length", "chunked", "gzip-bomb"])
async def test_answers_over_max_body_are_refused(answer: bytes) -> None:
    async with Server(keep_alive(answer)) as srv:
        pool = _pool(srv)
        with pytest.raises(http1.ResponseTooLarge):
            await _request(pool, max_body=4096)
        assert not pool.idle


@pytest.mark.parametrize("coding", ["identity", "gzip"])
async def test_a_refused_answer_is_let_go_at_once(coding: str) -> None:
    """Memory comes back: what a refused answer sent is freed when it is refused -- not kept
    by the connection object, which the exception's traceback keeps alive in a cycle only the
    cyclic GC frees (RSS grew by the limit on every refusal). The caller keeps the exception,
    as a log or an error handler may; the GC is off: only what is still referenced counts."""
    import gc
    import tracemalloc

    piece = b"x" * 65536
    if coding == "gzip":  # a bomb: ~24 KiB that decodes to 24 MiB, in 1 KiB chunks (~1 MiB decoded each)
        body = gzip.compress(b" " * (24 << 20))
        chunks = [body[i:i + 1024] for i in range(0, len(body), 1024)]
    else:
        chunks = [piece] * 384  # 24 MiB, chunked
    answer = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n"
              + (b"content-encoding: gzip\r\n" if coding == "gzip" else b"") + b"\r\n"
              + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n")
    async with Server(keep_alive(answer)) as srv:
        pool = _pool(srv)
        gc.disable()
        tracemalloc.start()
        try:
            with pytest.raises(http1.ResponseTooLarge) as info:
                await _request(pool, max_body=16 << 20)
            await asyncio.sleep(0.05)  # connection_lost
            held, _peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
            gc.enable()
        assert info.value is not None
        assert held < 2 << 20, f"{held / 2**20:.1f} MiB of the refused answer still referenced"


async def test_an_idle_keep_alive_connection_holds_no_answer() -> None:
    """After a chunked answer the pooled connection keeps no reference to its reads."""
    big = b"y" * 100_000
    answer = (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
              + b"".join(b"%x\r\n%s\r\n" % (len(big), big) for _ in range(3)) + b"0\r\n\r\n")
    async with Server(keep_alive(answer)) as srv:
        pool = _pool(srv)
        assert (await _request(pool)).body == big * 3
        assert len(pool.idle) == 1 and pool.idle[0].body == []


async def test_garbage_is_a_bad_response() -> None:
    async with Server(keep_alive(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")) as srv:
        with pytest.raises(http1.BadResponse):
            await _request(_pool(srv))


async def test_unknown_content_coding_is_a_bad_response() -> None:
    async with Server(keep_alive(response(b"\x00\x01", headers=(b"content-encoding: zstd",)))) as srv:
        with pytest.raises(http1.BadResponse):
            await _request(_pool(srv))


async def test_cancelled_request_closes_the_connection_at_once() -> None:
    answered = asyncio.Event()

    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            answered.set()
            await srv.read_request(reader)  # the model is "thinking"; EOF when the client goes
        return handler
    async with Server(make) as srv:
        pool = _pool(srv)
        task = asyncio.create_task(_request(pool))
        await answered.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(srv.closed_by_client.wait(), 30)
        assert not pool.idle


async def test_bytes_past_the_response_drop_the_connection() -> None:
    stray = asyncio.Event()

    def make(srv: Server) -> Handler:
        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
            await srv.read_request(reader)
            if n == 1:  # a second answer glued to the first
                writer.write(response() + b"HTTP/1.1 200 OK\r\n")
            elif n == 2:  # an answer nobody asked for, on an idle connection
                writer.write(response())
                await writer.drain()
                await stray.wait()
                writer.write(response())
            else:
                writer.write(response())
            await writer.drain()
            while await srv.read_request(reader) is not None:
                writer.write(response())
        return handler
    async with Server(make) as srv:
        pool = _pool(srv)
        assert (await _request(pool)).body == BODY
        assert (await _request(pool)).body == BODY
        assert srv.connections == 2
        idle = pool.idle[-1]
        stray.set()
        while idle.transport is not None:  # the stray bytes reach the client's loop
            await asyncio.sleep(0.01)
        assert (await _request(pool)).body == BODY
        assert srv.connections == 3


async def test_idle_connections_left_by_a_burst_are_closed_past_keepalive() -> None:
    async with Server(keep_alive(response())) as srv:
        pool = _pool(srv, keepalive_s=3600.0)
        await asyncio.gather(*(_request(pool) for _ in range(5)))
        assert srv.connections == 5 and len(pool.idle) == 5
        for conn in pool.idle[:4]:
            conn.idle_since -= 7200  # the burst was two hours ago
        burst = pool.idle[:4]
        await _request(pool)  # reuses the newest; the four stale ones are closed
        assert len(pool.idle) == 1 and all(c.transport is None for c in burst)


async def test_connections_idle_past_keepalive_are_not_reused() -> None:
    async with Server(keep_alive(response())) as srv:
        pool = _pool(srv, keepalive_s=0.0)
        await _request(pool)
        await _request(pool)
        assert srv.connections == 2


async def test_refused_connection_is_connect_failed() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    pool = http1.Http1Client().pool(URL(f"http://127.0.0.1:{port}/v1/chat/completions"))
    with pytest.raises(http1.ConnectFailed) as ei:
        await _request(pool)
    assert not ei.value.timed_out


async def test_https_with_hostname_check() -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(response())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        good = http1.Http1Client(ssl_context=client_ctx).pool(URL(f"https://localhost:{port}/v1/chat/completions"))
        assert (await pool_request(good)).body == BODY
        # the certificate names "localhost", not 127.0.0.1: refused, and nothing was sent
        bad = http1.Http1Client(ssl_context=client_ctx).pool(URL(f"https://127.0.0.1:{port}/v1/chat/completions"))
        with pytest.raises(http1.ConnectFailed):
            await pool_request(bad)
        # a certificate from a CA the client does not trust
        untrusted = http1.Http1Client().pool(URL(f"https://localhost:{port}/v1/chat/completions"))
        with pytest.raises(http1.ConnectFailed):
            await pool_request(untrusted)
    finally:
        server.close()


async def pool_request(pool: http1.Http1Pool) -> http1.Http1Response:
    return await pool.request(HEAD, b"{}", connect_s=10.0, read_s=30.0, max_body=1 << 20)


def test_request_head_refuses_header_splitting_and_adds_basic_auth() -> None:
    with pytest.raises(ValueError):
        http1.request_head("POST", URL("http://h/v1"), [("Authorization", "Bearer x\r\nX-Evil: 1")])
    with pytest.raises(ValueError):
        http1.header_line("Authorization", "Bearer x\nX-Evil: 1")
    head = http1.request_head("POST", URL("http://user:p%40ss@h/v1/chat/completions?api-version=1"), [])
    assert head.startswith(b"POST /v1/chat/completions?api-version=1 HTTP/1.1\r\n")
    assert b"\r\nAuthorization: Basic dXNlcjpwQHNz\r\n" in head  # base64("user:p@ss")
    own = http1.request_head("POST", URL("http://user:pw@h/v1"), [("Authorization", "Bearer k")])
    assert b"Basic" not in own


async def test_ipv6_literal_host_header() -> None:
    pool = http1.Http1Client().pool(URL("http://[::1]:8123/v1/chat/completions"))
    assert pool.host_header == b"[::1]:8123" and pool.host == "::1"
    default_port = http1.Http1Client().pool(URL("https://api.openai.com/v1/chat/completions"))
    assert default_port.host_header == b"api.openai.com" and default_port.port == 443
