"""proxy.http_protocol.CoalescingTransport: a response head leaves with the bytes written
right after it, or alone at the end of the loop iteration; never reordered, never lost.
(The integration tests run every request through it: ``veracity serve`` uses it.)"""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.http_protocol import CoalescingTransport


class _Recorder:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed
        self.writes.append(bytes(data))

    def write_eof(self) -> None:
        self.writes.append(b"<eof>")

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


def test_head_and_body_written_together() -> None:
    async def run() -> _Recorder:
        rec = _Recorder()
        t = CoalescingTransport(rec, asyncio.get_running_loop())
        t.write(HEAD)
        assert rec.writes == [] and t.get_write_buffer_size() == len(HEAD)
        t.write(b"ok")
        await asyncio.sleep(0)
        return rec

    assert asyncio.run(run()).writes == [HEAD + b"ok"]


def test_head_alone_is_flushed_at_the_end_of_the_loop_iteration() -> None:
    async def run() -> tuple[list[bytes], _Recorder]:
        rec = _Recorder()
        t = CoalescingTransport(rec, asyncio.get_running_loop())
        t.write(HEAD)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        seen = list(rec.writes)
        t.write(b"data: 1\n\n")  # a later stream chunk goes out on its own
        return seen, rec

    seen, rec = asyncio.run(run())
    assert seen == [HEAD]
    assert rec.writes == [HEAD, b"data: 1\n\n"]


def test_close_and_write_eof_flush_the_held_head_first() -> None:
    async def run() -> tuple[_Recorder, _Recorder]:
        loop = asyncio.get_running_loop()
        a, b = _Recorder(), _Recorder()
        ta, tb = CoalescingTransport(a, loop), CoalescingTransport(b, loop)
        ta.write(HEAD)
        ta.close()
        tb.write(HEAD)
        tb.write_eof()
        await asyncio.sleep(0)
        return a, b

    a, b = asyncio.run(run())
    assert a.writes == [HEAD] and a.closed
    assert b.writes == [HEAD, b"<eof>"]


def test_other_writes_pass_straight_through_and_attributes_delegate() -> None:
    async def run() -> _Recorder:
        rec = _Recorder()
        t = CoalescingTransport(rec, asyncio.get_running_loop())
        t.write(b"chunk-1")
        t.writelines([b"chunk-", b"2"])
        assert t.get_extra_info("peername") == ("127.0.0.1", 1)
        return rec

    assert asyncio.run(run()).writes == [b"chunk-1", b"chunk-2"]
