"""Hostile and unusual HTTP/1.1 clients against the real gateway's server layer, with other
requests in flight so that its corked transport (:class:`proxy._asgi.inbound.CorkedTransport`)
holds writes: pipelining, ``Connection: close``, HTTP/1.0, ``Expect: 100-continue``, HEAD,
chunked request bodies, readers that stop reading, clients that vanish mid-answer and
mid-stream, idle keep-alive connections, server-layer 400s, the keep-alive timeout, a
half-closed client, a WebSocket upgrade, and a graceful shutdown (SIGTERM) with answers in flight.

Each client speaks raw bytes over asyncio streams (no HTTP library on the client side: the
wire is what is under test); answers are parsed with ``h11`` (which checks framing and
``Content-Length``). What every case must keep: each answer whole, once, in the order asked;
no hang; the gateway's memory bounded; other clients unaffected; nothing in the log that looks
like an unhandled error (``Traceback``, ``Exception in ASGI application``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import struct
import time
from collections.abc import AsyncIterator
from typing import Any

import h11
import pytest

from tests.fixtures.mock import scripted_mock
from tests.fixtures.policies import checks_off

BIG = 256 * 1024  # characters of the "big" answer (a slow reader's pile)
SCRIPT = {
    "models": ["hl-model"],
    "rules": [
        # background load: streams that write a chunk every 10 ms, so the corked transport holds writes
        {"name": "bg", "match": {"last_user": "^bg"}, "reply": {"content": "b" * 60, "stream": {"chunk_size": 2, "delay_ms": 10}}},
        {"name": "slow", "match": {"last_user": "^slow"}, "reply": {"content": "late but whole", "delay_ms": 400}},
        {"name": "big", "match": {"last_user": "^big"}, "reply": {"content": "B" * BIG}},
        {"name": "long", "match": {"last_user": "^long"}, "reply": {"content": "L" * 4000, "stream": {"chunk_size": 8, "delay_ms": 5}}},
        {"name": "tick", "match": {"last_user": "^tick"}, "reply": {"content": "0123456789" * 3, "stream": {"chunk_size": 1, "delay_ms": 20}}},
    ],
}
mock, _reset_mock = scripted_mock(SCRIPT)
CHECKS_OFF = checks_off()
UNHANDLED = ("Traceback", "Exception in ASGI application", "Task exception was never retrieved",
             "socket.send() raised exception", "Unhandled", "ASGI callable returned without")


def _config(mock: Any, tmp: Any) -> dict[str, Any]:
    (tmp / "default.yaml").write_text(CHECKS_OFF)
    return {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
            "policies": {"dir": str(tmp), "check_interval_s": 0}}


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    return gateway_factory(_config(mock, tmp_path_factory.mktemp("hl-policies")))


@pytest.fixture(autouse=True)
def _clean_log(request: pytest.FixtureRequest) -> Any:
    """After each case on the shared gateway: nothing in its log looks like an unhandled error."""
    gw = request.getfixturevalue("gw") if "gw" in request.fixturenames else None
    start = len(gw.log()) if gw is not None else 0
    yield
    if gw is not None:
        log = gw.log()[start:]  # this case's lines only
        found = [m for m in UNHANDLED if m in log]
        assert not found, log[max(0, log.find(found[0]) - 2000):][:8000] if found else ""


# --------------------------------------------------------------------------- the raw client

def chat(content: str, *, stream: bool = False, method: str = "POST", version: str = "1.1",
         headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """The bytes of one chat-completions request (``Content-Length`` body)."""
    body = json.dumps({"model": "hl-model", "stream": stream, "messages": [{"role": "user", "content": content}]}).encode()
    head = [f"{method} /v1/chat/completions HTTP/{version}", "Host: gw", "Authorization: Bearer sk-test",
            "Content-Type: application/json", f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def get(path: str, *, method: str = "GET", version: str = "1.1", headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """The bytes of one body-less request."""
    head = [f"{method} {path} HTTP/{version}", "Host: gw", "Authorization: Bearer sk-test", *(f"{k}: {v}" for k, v in headers)]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


class Answer:
    """One parsed answer: ``status``, ``headers`` (lower-case names -> last value), ``body``,
    ``interim`` (the 1xx status codes before it)."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes, interim: list[int]) -> None:
        self.status, self.headers, self.body, self.interim = status, headers, body, interim

    def json(self) -> Any:
        return json.loads(self.body)

    def sse_text(self) -> str:
        """The concatenated ``delta.content`` of an SSE chat stream; asserts it ends with ``[DONE]``."""
        events = [line[6:] for line in self.body.decode().split("\n") if line.startswith("data: ")]
        assert events and events[-1] == "[DONE]", self.body[-300:]
        return "".join((json.loads(e)["choices"] or [{}])[0].get("delta", {}).get("content") or ""
                       for e in events[:-1] if json.loads(e).get("choices"))


def parse(data: bytes, methods: list[str], *, eof: bool = True) -> list[Answer]:
    """The answers in ``data`` to requests with ``methods``, in order (``h11`` checks the framing:
    with ``eof`` -- the server closed after ``data`` -- a cut answer raises). Returns fewer when
    ``data`` holds fewer whole answers."""
    conn = h11.Connection(h11.CLIENT)
    if data:
        conn.receive_data(data)
    if eof:
        conn.receive_data(b"")
    out: list[Answer] = []
    for m in methods:
        if conn.our_state is h11.MUST_CLOSE or conn.their_state in (h11.MUST_CLOSE, h11.CLOSED):
            break
        conn.send(h11.Request(method=m, target="/", headers=[("Host", "gw")] + ([("Content-Length", "0")] if m == "POST" else [])))
        conn.send(h11.EndOfMessage())
        status, hdrs, body, interim = 0, {}, b"", []
        while True:
            try:
                ev = conn.next_event()
            except h11.RemoteProtocolError:
                if status or conn.trailing_data[0]:
                    raise  # an answer cut or garbled
                return out  # the server closed before this answer began
            if ev is h11.NEED_DATA or isinstance(ev, h11.ConnectionClosed):
                return out
            if isinstance(ev, h11.InformationalResponse):
                interim.append(ev.status_code)
            elif isinstance(ev, h11.Response):
                status, hdrs = ev.status_code, {k.decode(): v.decode() for k, v in ev.headers}
            elif isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                break
        out.append(Answer(status, hdrs, body, interim))
        if conn.our_state is h11.DONE and conn.their_state is h11.DONE:
            conn.start_next_cycle()
    return out


async def read_all(reader: asyncio.StreamReader, timeout: float = 30) -> bytes:
    """Everything until the server closes (a hang fails the test at ``timeout`` seconds)."""
    return await asyncio.wait_for(reader.read(-1), timeout)


async def read_answers(reader: asyncio.StreamReader, methods: list[str], timeout: float = 30) -> tuple[list[Answer], bytes]:
    """Read until ``len(methods)`` whole answers are in (keep-alive: the server does not close)."""
    data = b""
    deadline = time.monotonic() + timeout
    while True:
        got = parse(data, methods, eof=False)
        if len(got) == len(methods):
            return got, data
        left = deadline - time.monotonic()
        assert left > 0, f"hung: {len(got)}/{len(methods)} answers after {timeout}s: {data[-400:]!r}"
        chunk = await asyncio.wait_for(reader.read(65536), left)
        assert chunk, f"closed early: {len(got)}/{len(methods)} answers: {data[-400:]!r}"
        data += chunk


async def connect(gw: Any) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", gw.port)


@contextlib.asynccontextmanager
async def busy(gw: Any, n: int = 6) -> AsyncIterator[list[int]]:
    """``n`` clients streaming ``bg`` answers back to back (a chunk every 10 ms each) for the
    duration: the server has other requests in flight, so the corked transport holds writes.
    Yields a one-item list counting the background answers that arrived whole; on exit,
    asserts every one of them did (the load itself must be unaffected)."""
    done = [0]
    stop = asyncio.Event()

    async def loop() -> None:
        r, w = await connect(gw)
        try:
            while not stop.is_set():
                w.write(chat("bg", stream=True))
                (a,), _ = await read_answers(r, ["POST"])
                assert a.status == 200 and a.sse_text() == "b" * 60
                done[0] += 1
        finally:
            w.close()

    tasks = [asyncio.create_task(loop()) for _ in range(n)]
    await asyncio.sleep(0.15)
    try:
        yield done
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert done[0] >= n


def rss_kib(pid: int) -> int:
    """Resident memory of process ``pid`` (KiB, /proc)."""
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def echo_of(a: Answer) -> str:
    """The content of a chat completion answer (the mock echoes the question when no rule matches)."""
    assert a.status == 200, (a.status, a.body[:300])
    return a.json()["choices"][0]["message"]["content"]


# --------------------------------------------------------------------------- pipelining

async def test_pipelined_requests_in_one_write_answer_whole_and_in_order(gw: Any) -> None:
    """Twelve requests of four kinds in one TCP write (RFC 9112 section 9.3.2: answers in the
    order asked) while the server is busy: each answer whole, once, in order -- chat answers
    echo their own question, the stream is its own, HEAD has no body."""
    reqs = [chat("p0."), get("/v1/models"), chat("p2.", stream=True), get("/v1/models", method="HEAD"),
            chat("slow p4"), chat("p5."), get("/healthz"), chat("p7.", stream=True), chat("big p8"),
            get("/v1/models", method="HEAD"), chat("p10."), chat("p11.", headers=(("Connection", "close"),))]
    methods = ["POST", "GET", "POST", "HEAD", "POST", "POST", "GET", "POST", "POST", "HEAD", "POST", "POST"]
    async with busy(gw):
        for _round in range(3):
            r, w = await connect(gw)
            w.write(b"".join(reqs))
            data = await read_all(r)
            w.close()
            got = parse(data, methods)
            assert len(got) == 12, data[-500:]
            assert "p0." in echo_of(got[0]) and "p5." in echo_of(got[5]) and "p10." in echo_of(got[10])
            assert "p11." in echo_of(got[11]) and got[11].headers.get("connection") == "close"
            assert echo_of(got[4]) == "late but whole" and echo_of(got[8]) == "B" * BIG
            assert got[1].json()["data"][0]["id"] == "hl-model" and got[6].status == 200
            assert "p2." in got[2].sse_text() and "p7." in got[7].sse_text()
            for h in (3, 9):
                assert got[h].status == 200 and got[h].body == b"" and int(got[h].headers["content-length"]) > 0


async def test_pipelined_requests_byte_by_byte(gw: Any) -> None:
    """The same pipeline dribbled one byte per write: the parser's state carries across reads."""
    reqs = chat("d0.") + get("/v1/models", method="HEAD") + chat("d2.", stream=True) + chat("d3.")
    async with busy(gw, 3):
        r, w = await connect(gw)
        for i in range(len(reqs)):
            w.write(reqs[i:i + 1])
            if i % 64 == 0:
                await w.drain()
        got, _ = await read_answers(r, ["POST", "HEAD", "POST", "POST"])
        w.close()
    assert "d0." in echo_of(got[0]) and got[1].body == b"" and "d2." in got[2].sse_text() and "d3." in echo_of(got[3])


# --------------------------------------------------------------------------- framing variants

async def test_connection_close_and_http10_get_whole_answers_then_eof(gw: Any) -> None:
    """``Connection: close`` (HTTP/1.1) and HTTP/1.0 without keep-alive, answered while busy: the
    whole answer, then the server closes (the held write goes out before the close)."""
    async with busy(gw):
        for i in range(20):
            r, w = await connect(gw)
            req = (chat(f"c{i}.", headers=(("Connection", "close"),)) if i % 2 else chat(f"c{i}.", version="1.0"))
            w.write(req)
            data = await read_all(r)
            w.close()
            (a,) = parse(data, ["POST"])
            assert f"c{i}." in echo_of(a)
            # a stream to an HTTP/1.0 client: no chunked framing exists, so the body runs to the close
            r, w = await connect(gw)
            w.write(chat(f"s{i}.", stream=True, version="1.0"))
            data = await read_all(r)
            w.close()
            head, _, body = data.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and b"transfer-encoding" not in head.lower()
            assert f"s{i}." in Answer(200, {}, body, []).sse_text()  # whole, to [DONE], no chunk-size lines


async def test_http10_keep_alive_is_honoured_or_closed_cleanly(gw: Any) -> None:
    """HTTP/1.0 with ``Connection: keep-alive``: uvicorn closes after the answer (it does not keep
    HTTP/1.0 connections); the answer must still be whole and the second request not half-answered."""
    async with busy(gw, 3):
        r, w = await connect(gw)
        w.write(chat("k1.", version="1.0", headers=(("Connection", "keep-alive"),)) + chat("k2.", version="1.0"))
        data = await read_all(r)
        w.close()
    got = parse(data, ["POST", "POST"])
    assert got and "k1." in echo_of(got[0])
    if len(got) == 2:
        assert "k2." in echo_of(got[1])


async def test_expect_100_continue_while_busy(gw: Any) -> None:
    """``Expect: 100-continue``: the interim ``100 Continue`` (written by uvicorn when the app first
    reads the body, held by the cork while busy) must reach a client that waits for it before
    sending the body, and the final answer follows it."""
    async with busy(gw):
        for i in range(10):
            body = json.dumps({"model": "hl-model", "messages": [{"role": "user", "content": f"e{i}."}]}).encode()
            r, w = await connect(gw)
            w.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-test\r\n"
                    b"Content-Type: application/json\r\nExpect: 100-continue\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body))
            line = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
            assert line == b"HTTP/1.1 100 Continue\r\n\r\n"
            w.write(body)
            (a,), _ = await read_answers(r, ["POST"])
            assert f"e{i}." in echo_of(a)
            w.close()


async def test_head_answers_carry_no_body_even_pipelined(gw: Any) -> None:
    """HEAD on every GET route, pipelined with a GET after each: a HEAD answer with body bytes
    would shift every following answer (the GET would parse as garbage)."""
    paths = ["/v1/models", "/healthz", "/readyz", "/nope", "/v1/models?x=1"]
    reqs, methods = b"", []
    for p in paths:
        reqs += get(p, method="HEAD") + get(p)
        methods += ["HEAD", "GET"]
    async with busy(gw, 3):
        r, w = await connect(gw)
        w.write(reqs)
        got, data = await read_answers(r, methods)
        w.close()
    for i in range(0, len(got), 2):
        head, full = got[i], got[i + 1]
        assert head.body == b"" and head.status == full.status, (paths[i // 2], head.status, full.status)
        if "content-length" in head.headers and full.status != 404:
            assert int(head.headers["content-length"]) == len(full.body)


async def test_chunked_request_bodies_dribbled_while_busy(gw: Any) -> None:
    """A ``Transfer-Encoding: chunked`` request body, in odd-sized chunks with extensions and a
    trailer, sent over several writes with pauses: the answer is for the whole body."""
    async with busy(gw):
        for i in range(5):
            body = json.dumps({"model": "hl-model", "messages": [{"role": "user", "content": f"chunky {i}. " + "z" * 3000}]}).encode()
            r, w = await connect(gw)
            w.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-test\r\n"
                    b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
            pos, size = 0, 1
            while pos < len(body):
                piece = body[pos:pos + size]
                w.write(b"%x;ext=1\r\n" % len(piece) + piece + b"\r\n")
                await w.drain()
                pos, size = pos + len(piece), size * 3
                await asyncio.sleep(0.01)
            w.write(b"0\r\nX-Trailer: t\r\n\r\n")
            (a,), _ = await read_answers(r, ["POST"])
            assert f"chunky {i}." in echo_of(a)
            w.close()


# --------------------------------------------------------------------------- readers that stop

async def test_reader_that_stops_reading_keeps_memory_bounded_and_others_served(gw: Any) -> None:
    """A client pipelines 64 requests for a 256 KiB answer each (16 MiB of answers) and reads
    nothing: flow control (uvicorn pauses a cycle's writes above the transport's high-water mark,
    the cork holds at most one loop turn) must keep the gateway's memory far below the pile, other
    clients must be served meanwhile, and when the client finally reads, every answer arrives
    whole and in order."""
    n = 64
    pid = gw.proc.pid
    async with busy(gw, 3) as bg:
        before = rss_kib(pid)
        sock = socket.create_connection(("127.0.0.1", gw.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
        sock.sendall(b"".join(chat(f"big {i}") for i in range(n)))
        await asyncio.sleep(1.0)
        during = rss_kib(pid)
        # others are served meanwhile
        r, w = await connect(gw)
        for i in range(5):
            w.write(chat(f"other {i}."))
            (a,), _ = await read_answers(r, ["POST"])
            assert f"other {i}." in echo_of(a)
        w.close()
        served_meanwhile = bg[0]
    assert served_meanwhile > 0
    assert during - before < 8 * 1024, f"RSS grew {during - before} KiB with a 16 MiB pile unread"
    sock.setblocking(False)
    data = b""
    loop = asyncio.get_running_loop()
    deadline = time.monotonic() + 60
    while len(parse(data, ["POST"] * n, eof=False)) < n:
        assert time.monotonic() < deadline, "hung"
        data += await asyncio.wait_for(loop.sock_recv(sock, 1 << 20), 30)
    sock.close()
    assert all(echo_of(a) == "B" * BIG for a in parse(data, ["POST"] * n))


async def test_stream_whose_client_stops_reading_then_resumes(gw: Any) -> None:
    """A stream to a client that stops reading for a while (the gateway must pause, not pile up
    or drop), then resumes: the whole stream arrives, in order; other clients are unaffected."""
    async with busy(gw, 3):
        sock = socket.create_connection(("127.0.0.1", gw.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(chat("long stop", stream=True))
        await asyncio.sleep(1.5)
        r, w = await connect(gw)
        w.write(chat("meanwhile."))
        (a,), _ = await read_answers(r, ["POST"])
        assert "meanwhile." in echo_of(a)
        w.close()
        sock.setblocking(False)
        loop = asyncio.get_running_loop()
        data = b""
        while not parse(data, ["POST"], eof=False):
            chunk = await asyncio.wait_for(loop.sock_recv(sock, 65536), 30)
            assert chunk
            data += chunk
        sock.close()
    assert parse(data, ["POST"])[0].sse_text() == "L" * 4000


# --------------------------------------------------------------------------- vanishing clients

async def test_clients_vanishing_mid_answer_and_mid_stream_while_busy(gw: Any) -> None:
    """Forty clients leave at odd moments -- after the head, mid-stream, before a slow answer,
    with a reset (SO_LINGER 0) or a plain close -- while others are busy: the gateway keeps
    serving, logs no unhandled error, and a well-behaved client on a connection opened after
    them gets a whole answer."""
    async with busy(gw):
        async def vanish(i: int) -> None:
            r, w = await connect(gw)
            w.write(chat(["long v", "slow v", "big v", "tick v"][i % 4] + str(i), stream=i % 4 != 2))
            if i % 3 == 0:
                await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)  # the head arrived
            if i % 3 == 1:
                await asyncio.wait_for(r.read(200), 10)  # some bytes arrived
            sock = w.get_extra_info("socket")
            if i % 2:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            w.close()

        await asyncio.gather(*(vanish(i) for i in range(40)))
        await asyncio.sleep(0.5)
        r, w = await connect(gw)
        w.write(chat("after.") + chat("tick after", stream=True))
        got, _ = await read_answers(r, ["POST", "POST"])
        w.close()
    assert "after." in echo_of(got[0]) and got[1].sse_text() == "0123456789" * 3


async def test_half_closed_client_gets_a_whole_answer_or_none(gw: Any) -> None:
    """A client that sends its request and then shuts its sending side (``shutdown(SHUT_WR)``,
    as ``nc -N`` does) looks, to the server, exactly like a client that left (both send FIN).
    Before its answer starts the gateway takes it as gone -- so a client that gives up stops the
    upstream's billing (proxy/_asgi/disconnect.py); once the answer is being written, it is
    finished. What may never happen, busy or not, with answers held by the cork or not: half an
    answer (uvicorn cut a started stream at the FIN), a garbled one, a hang, or an unhandled
    error in the log (uvloop raised "the handler is closed" into the app when it wrote between
    the close and ``connection_lost``)."""
    async def one(req: bytes, methods: list[str]) -> list[Answer]:
        r, w = await connect(gw)
        w.write(req)
        await w.drain()
        w.write_eof()
        data = await read_all(r, 10)
        w.close()
        return parse(data, methods)  # raises on a cut or garbled answer

    for load in (0, 4):
        async with contextlib.AsyncExitStack() as stack:
            if load:
                await stack.enter_async_context(busy(gw, load))
            got = await one(chat("h1.", version="1.0"), ["POST"])
            assert not got or "h1." in echo_of(got[0])
            got = await one(chat("h4.") + chat("h5."), ["POST", "POST"])
            assert all(f"h{4 + i}." in echo_of(a) for i, a in enumerate(got))
            got = await one(chat("slow h2", headers=(("Connection", "close"),)), ["POST"])
            assert not got or echo_of(got[0]) == "late but whole"
            got = await one(chat("tick h3", stream=True), ["POST"])
            assert not got or got[0].sse_text() == "0123456789" * 3


# --------------------------------------------------------------------------- idle and refused

async def test_many_idle_keep_alive_connections_then_all_used(gw: Any) -> None:
    """200 keep-alive connections, each answered once and left idle while the server is busy;
    then each is used again: every one answers whole (none was corrupted or closed early)."""
    conns = [await connect(gw) for _ in range(200)]
    async with busy(gw):
        for i, (r, w) in enumerate(conns):
            w.write(get("/v1/models"))
        for r, w in conns:
            (a,), _ = await read_answers(r, ["GET"])
            assert a.status == 200
        await asyncio.sleep(0.5)

        async def again(i: int, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(chat(f"idle {i}."))
            (a,), _ = await read_answers(r, ["POST"])
            assert f"idle {i}." in echo_of(a)

        await asyncio.gather(*(again(i, r, w) for i, (r, w) in enumerate(conns)))
    for r, w in conns:
        w.close()


@pytest.mark.parametrize("bad", [
    b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Length: abc\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: gw\r\nX: a\x00b\r\n\r\n",
    b"NOT HTTP AT ALL\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"a" * 20000,  # a head still unfinished past the 16 KiB limit
])
async def test_server_layer_400_while_busy_is_whole_then_closed(gw: Any, bad: bytes) -> None:
    """A request the server layer refuses (llhttp's error, or the head limit) while others are in
    flight: the 400 (OpenAI's error shape) arrives whole and the connection closes after it."""
    async with busy(gw, 4):
        for _ in range(5):
            r, w = await connect(gw)
            w.write(bad)
            data = await read_all(r, 10)
            w.close()
            (a,) = parse(data, ["GET"])
            assert a.status == 400 and a.headers["connection"] == "close"
            assert a.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("bad", [b"GARBAGE\x01 / HTTP/1.1\r\n\r\n",
                                 b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                                 b"GET / HTTP/1.1\r\nX-Long: " + b"a" * 20000],  # unfinished past 16 KiB
                         ids=["garbage", "two-lengths", "head-too-large"])
async def test_refused_request_after_pipelined_ones_is_answered_after_them(gw: Any, bad: bytes) -> None:
    """Good requests followed in the same write by one the server layer refuses: the good ones'
    answers come first, whole and in order, then the 400, then the close -- an answer's position
    is its request's (RFC 9112 section 9.3.2); a 400 sent first (uvicorn did) is read by the
    client as the answer to its first request, and the answers owed were lost."""
    async with busy(gw, 3):
        for reqs in ([chat("slow g")], [chat("g1.")], [chat("tick g", stream=True)],
                     [chat("slow g"), chat("g2."), chat("tick g", stream=True)]):
            r, w = await connect(gw)
            w.write(b"".join(reqs) + bad)
            data = await read_all(r, 15)
            w.close()
            got = parse(data, ["POST"] * len(reqs) + ["GET"])
            assert [a.status for a in got] == [200] * len(reqs) + [400], data[:600]
            assert got[-1].headers["connection"] == "close" and got[-1].json()["error"]["code"] == "invalid_request"
            if len(reqs) == 3:
                assert echo_of(got[0]) == "late but whole" and "g2." in echo_of(got[1])
                assert got[2].sse_text() == "0123456789" * 3


async def test_request_with_a_broken_body_is_refused_at_once(gw: Any) -> None:
    """A request whose own chunked body turns malformed midway, while the app already waits for
    that body: nothing is owed before it, so the 400 goes out at once and the connection closes
    (the app sees the client gone) -- never a hang waiting for the rest of a body that cannot come."""
    async with busy(gw, 3):
        r, w = await connect(gw)
        w.write(b"POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer sk-test\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"mod\r\n")
        await w.drain()
        await asyncio.sleep(0.3)  # the app is reading the body
        w.write(b"zz-not-hex\r\n")
        data = await read_all(r, 10)
        w.close()
    (a,) = parse(data, ["POST"])
    assert a.status == 400 and a.headers["connection"] == "close"


async def test_keep_alive_timeout_closes_idle_connection_cleanly(gw: Any) -> None:
    """After an answer written while busy, an idle keep-alive connection is closed by the
    keep-alive timeout (uvicorn's 5 s) with no stray bytes: the held answer went out whole first."""
    async with busy(gw, 3):
        r, w = await connect(gw)
        w.write(chat("ka.") + chat("tick ka", stream=True))
        got, data = await read_answers(r, ["POST", "POST"])
        assert "ka." in echo_of(got[0])
        rest = await read_all(r, 20)  # the server closes at the keep-alive timeout
        w.close()
    assert rest == b""


async def test_websocket_upgrade_is_refused_cleanly(gw: Any) -> None:
    """A WebSocket upgrade to an HTTP-only gateway, while busy: refused (no 101 switching the
    connection into a protocol nobody serves), no unhandled error, the server keeps serving."""
    async with busy(gw, 3):
        r, w = await connect(gw)
        w.write(b"GET /v1/models HTTP/1.1\r\nHost: gw\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
        data = await asyncio.wait_for(r.read(65536), 10)
        w.close()
        assert data and not data.startswith(b"HTTP/1.1 101"), data[:300]
        r, w = await connect(gw)
        w.write(chat("ws after."))
        (a,), _ = await read_answers(r, ["POST"])
        assert "ws after." in echo_of(a)
        w.close()


# --------------------------------------------------------------------------- graceful shutdown

async def test_sigterm_with_answers_in_flight_loses_nothing(mock: Any, gateway_factory: Any, tmp_path: Any) -> None:
    """SIGTERM while 40 answers (streams, slow answers, pipelines, keep-alive idlers) are in
    flight: every request the server had read gets its whole answer, once, and the process exits
    0 with nothing unhandled in its log (uvicorn's graceful shutdown, 5 s here)."""
    g = gateway_factory(_config(mock, tmp_path))

    async def client(i: int) -> list[Answer]:
        r, w = await asyncio.open_connection("127.0.0.1", g.port)
        kind = i % 4
        if kind == 0:
            reqs, methods = chat(f"tick t{i}", stream=True), ["POST"]
        elif kind == 1:
            reqs, methods = chat(f"slow t{i}"), ["POST"]
        elif kind == 2:
            reqs, methods = chat(f"t{i}.") + chat(f"slow t{i}") + chat(f"tick t{i}", stream=True), ["POST"] * 3
        else:
            reqs, methods = chat(f"bg t{i}", stream=True), ["POST"]
        w.write(reqs)
        data = await read_all(r, 20)
        w.close()
        return parse(data, methods)

    tasks = [asyncio.create_task(client(i)) for i in range(40)]
    idle = [await asyncio.open_connection("127.0.0.1", g.port) for _ in range(10)]
    await asyncio.sleep(0.2)
    os.kill(g.proc.pid, signal.SIGTERM)
    results = await asyncio.gather(*tasks)
    for r, _w in idle:
        assert await read_all(r, 10) == b""  # idle keep-alive connections: closed, nothing stray
    rc = await asyncio.to_thread(g.proc.wait, 30)
    log = g.log()
    assert rc in (0, -signal.SIGTERM), log[-3000:]  # uvicorn re-raises the signal it handled
    assert not [m for m in UNHANDLED if m in log], log[-4000:]
    for i, got in enumerate(results):
        kind = i % 4
        if kind == 0:
            assert len(got) == 1 and got[0].sse_text() == "0123456789" * 3
        elif kind == 1:
            assert len(got) == 1 and echo_of(got[0]) == "late but whole"
        elif kind == 2:
            # a pipeline: answers in order; the server may stop after any whole answer (not mid-one)
            assert 1 <= len(got) <= 3 and f"t{i}." in echo_of(got[0])
            if len(got) > 1:
                assert echo_of(got[1]) == "late but whole"
            if len(got) > 2:
                assert got[2].sse_text() == "0123456789" * 3
        else:
            assert len(got) == 1 and got[0].sse_text() == "b" * 60


async def test_sigterm_with_a_reader_that_never_reads_does_not_hang(mock: Any, gateway_factory: Any, tmp_path: Any) -> None:
    """SIGTERM while one client has a pile of answers it never reads (its writes paused by flow
    control) and others stream: the streams finish whole, the stuck connection is given up at
    the graceful-shutdown limit (5 s), and the process exits -- no hang, no traceback."""
    g = gateway_factory(_config(mock, tmp_path))
    stuck = socket.create_connection(("127.0.0.1", g.port))
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    stuck.sendall(b"".join(chat(f"big {i}") for i in range(32)))

    async def stream(i: int) -> list[Answer]:
        r, w = await asyncio.open_connection("127.0.0.1", g.port)
        w.write(chat(f"tick s{i}", stream=True))
        data = await read_all(r, 30)
        w.close()
        return parse(data, ["POST"])

    tasks = [asyncio.create_task(stream(i)) for i in range(8)]
    await asyncio.sleep(0.5)
    os.kill(g.proc.pid, signal.SIGTERM)
    results = await asyncio.gather(*tasks)
    rc = await asyncio.to_thread(g.proc.wait, 30)  # a hang fails here
    stuck.close()
    log = g.log()
    assert rc in (0, -signal.SIGTERM), log[-3000:]
    assert not [m for m in ("Traceback", "Exception in ASGI application", "Task exception") if m in log], log[-4000:]
    assert all(len(got) == 1 and got[0].sse_text() == "0123456789" * 3 for got in results)
