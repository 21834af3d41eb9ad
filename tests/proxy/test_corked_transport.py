"""The server connection's corked transport (:class:`proxy._asgi.inbound.CorkedTransport`).

Writes go out at once while a connection's request is the only one in flight; with others in
flight they are held until the event loop's next turn and written as one, in order. A unit
test per rule with a recording transport, then the real server: many concurrent answers --
lean-lane completions, normal-path streams, errors -- each arrive whole and in order.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from proxy._asgi.inbound import CorkedTransport
from tests.fixtures.mock import scripted_mock
from tests.fixtures.policies import checks_off


class _Recorder:
    """An asyncio transport stand-in: records each ``write`` (one per syscall in a real one)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False
        self.closed = False
        self.read_calls: list[str] = []

    def write(self, data: bytes) -> None:
        assert not self.closed, "write after close"
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing or self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        self.read_calls.append("pause")

    def resume_reading(self) -> None:
        self.read_calls.append("resume")

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


async def test_lone_request_writes_at_once() -> None:
    t = _Recorder()
    c = CorkedTransport(t, asyncio.get_running_loop(), {"the one task"})  # type: ignore[arg-type]
    c.write(b"HTTP/1.1 200 OK\r\n\r\n")
    assert t.writes == [b"HTTP/1.1 200 OK\r\n\r\n"]  # nothing waits for the loop's next turn
    c.write(b"body")
    assert t.writes == [b"HTTP/1.1 200 OK\r\n\r\n", b"body"]


async def test_busy_server_joins_the_writes_of_one_turn_in_order() -> None:
    t = _Recorder()
    tasks = {"a", "b"}
    c = CorkedTransport(t, asyncio.get_running_loop(), tasks)  # type: ignore[arg-type]
    c.write(b"head|")
    c.write(b"body|")
    tasks.discard("b")  # the other request ended: a write now still joins the held ones (order)
    c.write(b"tail")
    assert t.writes == []
    await asyncio.sleep(0)  # the loop's next turn
    assert t.writes == [b"head|body|tail"]
    c.write(b"next")  # not busy any more: at once
    assert t.writes == [b"head|body|tail", b"next"]


async def test_close_writes_what_is_held_first() -> None:
    t = _Recorder()
    c = CorkedTransport(t, asyncio.get_running_loop(), {"a", "b"})  # type: ignore[arg-type]
    c.write(b"last answer")
    c.close()
    assert t.writes == [b"last answer"] and t.closed
    await asyncio.sleep(0)  # the scheduled flush finds nothing left
    assert t.writes == [b"last answer"]


async def test_held_writes_are_dropped_when_the_peer_is_gone() -> None:
    t = _Recorder()
    c = CorkedTransport(t, asyncio.get_running_loop(), {"a", "b"})  # type: ignore[arg-type]
    c.write(b"answer")
    t.closing = True  # connection lost before the loop's next turn
    await asyncio.sleep(0)
    assert t.writes == [] and c.held is None


class _ClosedUvloopLike(_Recorder):
    """A transport closed under the writer, refusing writes as uvloop's does (RuntimeError)."""

    def write(self, data: bytes) -> None:
        if self.closed:
            raise RuntimeError("unable to perform operation on <TCPTransport closed=True>; the handler is closed")
        super().write(data)


def test_write_to_a_transport_closed_under_it_is_dropped() -> None:
    """The client's FIN or reset closed the transport and uvicorn's ``connection_lost`` (which
    stops the request's writes) has not run yet: the write is dropped, as asyncio's transports
    drop it -- not raised into the app (uvicorn logged "Exception in ASGI application")."""
    t = _ClosedUvloopLike()
    c = CorkedTransport(t, None, set())  # type: ignore[arg-type]
    c.write(b"before")
    t.closed = True
    c.write(b"after the close")
    assert t.writes == [b"before"]
    t2 = _ClosedUvloopLike()
    t2.write = lambda data: (_ for _ in ()).throw(RuntimeError("another fault"))  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):  # on an open transport a RuntimeError is a real fault
        CorkedTransport(t2, None, set()).write(b"x")  # type: ignore[arg-type]


def test_other_transport_methods_are_the_wrapped_ones() -> None:
    t = _Recorder()
    c = CorkedTransport(t, None, set())  # type: ignore[arg-type]
    c.pause_reading()
    c.resume_reading()
    assert t.read_calls == ["pause", "resume"]
    assert c.get_extra_info("peername") == ("127.0.0.1", 1) and not c.is_closing()


# --------------------------------------------------------------------------- the real server

SCRIPT = {
    "models": ["cork-model"],
    "rules": [
        {"name": "slowish", "match": {"last_user": "^slow"}, "reply": {"content": "late but whole", "delay_ms": 50, "stream": {"chunk_size": 3, "delay_ms": 2}}},
        {"name": "err", "match": {"last_user": "^err"}, "reply": {"status": 429, "error": "Rate limit reached"}},
    ],
}
mock, _reset_mock = scripted_mock(SCRIPT)
CHECKS_OFF = checks_off()


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    pol = tmp_path_factory.mktemp("cork-policies")
    (pol / "default.yaml").write_text(CHECKS_OFF)
    return gateway_factory({"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
                            "policies": {"dir": str(pol), "check_interval_s": 0}})


async def test_concurrent_answers_arrive_whole_and_in_order(gw: Any) -> None:
    """60 requests at once over 20 connections: lean-lane completions (two ASGI sends each,
    joined when corked), streams, slow answers and upstream errors interleave; every client
    must get its own whole answer, headers included, and every stream its events in order."""
    limits = httpx.Limits(max_connections=20, max_keepalive_connections=20)
    async with httpx.AsyncClient(limits=limits, timeout=30) as http:
        client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, http_client=http)

        async def plain(i: int) -> None:
            raw = await client.chat.completions.with_raw_response.create(
                model="cork-model", messages=[{"role": "user", "content": f"q{i}."}])
            out = raw.parse()
            assert f"q{i}." in out.choices[0].message.content  # the mock's echo of this request
            assert raw.headers["x-veracity-status"] == "skipped" and raw.headers["x-request-id"].startswith("req_")

        async def slow(i: int) -> None:
            out = await client.chat.completions.create(model="cork-model", messages=[{"role": "user", "content": f"slow {i}"}])
            assert out.choices[0].message.content == "late but whole"

        async def stream(i: int) -> None:
            s = await client.chat.completions.create(model="cork-model", stream=True,
                                                     messages=[{"role": "user", "content": f"s{i}."}])
            text = "".join([c.choices[0].delta.content or "" async for c in s if c.choices])
            assert f"s{i}." in text and text.count(f"s{i}.") == 1

        async def error(i: int) -> None:
            with pytest.raises(openai.RateLimitError) as ei:
                await client.chat.completions.create(model="cork-model", messages=[{"role": "user", "content": f"err {i}"}])
            assert ei.value.status_code == 429

        kinds = (plain, stream, slow, error)
        await asyncio.gather(*(kinds[i % 4](i) for i in range(60)))
