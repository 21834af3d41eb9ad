"""Units of the gateway's relay: the incremental SSE splitter and connect-only retries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.upstreams import http1
from proxy.config import UpstreamConfig
from proxy.wire.errors import UpstreamError
from proxy.upstreams import OpenAIUpstream, Timing
from proxy.wire.relay import SSERelay


def _chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> bytes:
    delta = {} if content is None else {"content": content}
    obj = {"id": "c1", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


STREAM = (_chunk("Hel") + b"id: 7\n\n" + b"retry: 3000\n\n: keep-alive\n\n" + _chunk("lo")
          + b"data: \n\n" + b"data:\r\n\r\n" + _chunk(None, "stop") + b"data: [DONE]\n\n")
EXPECTED = _chunk("Hel") + _chunk("lo") + _chunk(None, "stop") + b"data: [DONE]\n\n"


def test_relay_drops_frames_without_data_and_tracks_end() -> None:
    r = SSERelay()
    assert r.feed(STREAM) + r.flush() == EXPECTED
    assert r.done and r.finished and not r.errored


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64])
def test_relay_output_independent_of_read_boundaries(size: int) -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    for data in (STREAM, crlf):
        r = SSERelay()
        out = b"".join(r.feed(data[i:i + size]) for i in range(0, len(data), size)) + r.flush()
        assert out == EXPECTED


def test_relay_emits_each_complete_event_immediately() -> None:
    r = SSERelay()
    first = _chunk("a")
    assert r.feed(first[:-1]) == b""  # incomplete: held
    assert r.feed(first[-1:]) == first  # complete: out at once


def test_done_without_finish_reason_is_held_back() -> None:
    r = SSERelay()
    out = r.feed(_chunk("x") + b"data: [DONE]\n\n")
    assert out == _chunk("x")
    assert r.done and not r.finished


def test_event_field_and_multiline_data_kept() -> None:
    r = SSERelay()
    out = r.feed(b'event: error\ndata: {"error": {"message": "boom"}}\n\n' + b"data: {\"a\":\ndata: 1}\n\n")
    assert out == b'event: error\ndata: {"error": {"message": "boom"}}\n\ndata: {"a":\ndata: 1}\n\n'
    assert r.errored


def test_nothing_after_done_and_unterminated_last_event() -> None:
    r = SSERelay()
    out = r.feed(_chunk("x", "stop") + b"data: [DONE]\n\n" + _chunk("late"))
    assert out == _chunk("x", "stop") + b"data: [DONE]\n\n"
    r2 = SSERelay()
    assert r2.feed(_chunk("x", "stop") + b"data: [DONE]") + r2.flush() == _chunk("x", "stop") + b"data: [DONE]\n\n"


def test_an_event_growing_past_max_event_is_refused_as_it_arrives() -> None:
    """A refused answer's memory is released: an unterminated event is refused once it holds more than
    ``max_event`` bytes -- not buffered up to the whole answer's limit; what is held never
    exceeds the limit (plus nothing: the read that crosses it is dropped with the event)."""
    from proxy.wire.relay import EventTooLarge

    r = SSERelay(max_event=1 << 20)
    assert r.feed(_chunk("ok")) == _chunk("ok")  # complete events pass as before
    read = b"data: " + b"a" * (64 * 1024 - 6)
    fed = 0
    with pytest.raises(EventTooLarge):
        for _ in range(1024):  # up to 64 MiB
            r.feed(read)
            fed += len(read)
            assert r._size <= r.max_event
            read = b"a" * (64 * 1024)
    assert fed <= r.max_event  # refused on the read that crossed 1 MiB, not at 64 MiB
    assert r._size == 0 and not r._parts  # and what it held is let go


@pytest.mark.parametrize("size", [1, 5, 4096])
def test_an_event_under_max_event_in_many_reads_is_relayed_whole(size: int) -> None:
    """The held tail is a list of reads: an event arriving in many reads (CRLF line ends cut
    anywhere) comes out whole and once, as from a single read."""
    big = _chunk("x" * 20000).replace(b"\n", b"\r\n") + _chunk("y", "stop") + b"data: [DONE]\r\n\r\n"
    r = SSERelay(max_event=64 * 1024)
    out = b"".join(r.feed(big[i:i + size]) for i in range(0, len(big), size)) + r.flush()
    assert out == _chunk("x" * 20000) + _chunk("y", "stop") + b"data: [DONE]\n\n"
    with pytest.raises(ValueError):
        small = SSERelay(max_event=1000)
        for i in range(0, len(big), size):
            small.feed(big[i:i + size])


# --------------------------------------------------------------------------- retries


class _Pool:
    """Stands in for an :class:`http1.Http1Pool`: raises the scripted failures, then answers."""

    BODY = b'{"id": "x", "choices": []}'
    HEADERS = [("x-request-id", "up-1"), ("x-ratelimit-remaining-requests", "9"), ("server", "x")]

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls = 0

    async def request(self, head: bytes, body: bytes, **kw: Any) -> http1.Http1Response:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return http1.Http1Response(200, self.HEADERS, self.BODY)


def _upstream(pool: _Pool, retries: int) -> OpenAIUpstream:
    up = OpenAIUpstream(UpstreamConfig(name="u", base_url="http://127.0.0.1:9/v1"), None,  # type: ignore[arg-type]
                        connect_timeout_s=1, read_timeout_s=1, connect_retries=retries)
    up._pool = pool  # type: ignore[assignment]
    return up


async def test_connect_failures_are_retried() -> None:
    s = _Pool([http1.ConnectFailed("t", timed_out=True), http1.ConnectFailed("refused")])
    out, headers = await _upstream(s, 2).complete({"model": "m"}, auth=None, timing=Timing())
    assert out["id"] == "x" and s.calls == 3
    assert headers == {"x-upstream-request-id": "up-1", "x-ratelimit-remaining-requests": "9"}


async def test_connect_failures_give_up_after_retries() -> None:
    s = _Pool([http1.ConnectFailed("t", timed_out=True) for _ in range(5)])
    with pytest.raises(UpstreamError) as ei:
        await _upstream(s, 2).complete({"model": "m"}, auth=None, timing=Timing())
    assert s.calls == 3 and ei.value.status == 504 and ei.value.reason == "timeout"
    s = _Pool([http1.ConnectFailed("refused") for _ in range(5)])
    with pytest.raises(UpstreamError) as ei:
        await _upstream(s, 1).complete({"model": "m"}, auth=None, timing=Timing())
    assert s.calls == 2 and ei.value.status == 502 and ei.value.reason == "connect"


@pytest.mark.parametrize("failure, status, reason", [
    (http1.Disconnected("gone"), 502, "disconnect"),
    (http1.ReadTimeout("slow"), 504, "timeout"),
    (http1.BadResponse("not http"), 502, "bad_response"),
    (http1.ResponseTooLarge("big"), 502, "too_large"),
])
async def test_request_that_reached_upstream_is_not_retried(failure: BaseException, status: int, reason: str) -> None:
    s = _Pool([failure])
    with pytest.raises(UpstreamError) as ei:
        await _upstream(s, 3).complete({"model": "m"}, auth=None, timing=Timing())
    assert s.calls == 1 and ei.value.status == status and ei.value.reason == reason


# --------------------------------------------------------------------------- memory


async def test_a_refusal_gives_memory_back_once_per_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory comes back: refusing an oversized answer schedules one ``malloc_trim`` (after a
    GC pass) shortly after; a storm of refusals is coalesced into one trim."""
    import asyncio

    from proxy._asgi import memory

    calls: list[int] = []
    monkeypatch.setattr(memory, "trim", lambda: calls.append(1) or True)
    monkeypatch.setattr(memory, "_state", {"scheduled": False, "last": 0.0, "trims": 0})
    up = OpenAIUpstream(UpstreamConfig(name="u", models=["*"], base_url="http://127.0.0.1:9/v1"), None,  # type: ignore[arg-type]
                        connect_timeout_s=1, read_timeout_s=1, connect_retries=0, max_response_bytes=10)
    for _ in range(20):
        err = up._too_large()
        assert err.status == 502 and err.code == "upstream_response_too_large"
    assert calls == []  # not inline: the refused request has not unwound yet
    await asyncio.sleep(memory.DELAY_S + 0.3)
    assert calls == [1]


@pytest.mark.parametrize("key", [r"finish\u005freason", r"\u0066inish_reason", r"finish_reaso\u006e"])
def test_a_finish_reason_written_with_json_escapes_ends_the_stream(key: str) -> None:
    # JSON allows any character of a key escaped (RFC 8259 §7): the stream finished, and its
    # [DONE] is relayed instead of being held back as a truncated stream
    r = SSERelay()
    out = r.feed(b'data: {"choices":[{"index":0,"delta":{},"' + key.encode() + b'":"stop"}]}\n\ndata: [DONE]\n\n')
    assert r.finished and r.done and out.endswith(b"data: [DONE]\n\n")


def test_escaped_content_without_a_finish_reason_does_not_end_the_stream() -> None:
    r = SSERelay()
    r.feed(b'data: {"choices":[{"index":0,"delta":{"content":"\\u00e9 finish_reason"},"finish_reason":null}]}\n\n')
    assert not r.finished
    assert r.feed(b"data: [DONE]\n\n") == b""  # held back: the relay reports the missing finish_reason
