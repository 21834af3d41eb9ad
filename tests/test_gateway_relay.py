"""Units of the gateway's relay: the incremental SSE splitter and connect-only retries."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy import http1
from proxy.config import UpstreamConfig
from proxy.errors import UpstreamError
from proxy.upstream import OpenAIUpstream, SSERelay, Timing


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
