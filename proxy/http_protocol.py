"""uvicorn's httptools HTTP/1.1 protocol with one change: a response head and the bytes
written right after it leave in one ``write()`` (see :class:`CoalescingTransport`).

``veracity serve`` runs uvicorn with ``http="proxy.http_protocol:CoalescingHttpToolsProtocol"``
(an import string, so ``--workers N`` processes load it too). Why: at one connection a
non-stream answer was two syscalls and two TCP segments (head, then body), and the client
woke up twice; numbers in bench/results/gateway.md.
"""

from __future__ import annotations

from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class CoalescingTransport:
    """An ``asyncio.Transport`` wrapper that sends a response head together with the bytes
    written right after it: uvicorn writes the status line + headers and then the body as two
    ``write()`` calls, i.e. two syscalls and two TCP segments, so the client wakes up for the
    head alone and again for the body. Here the head (a write starting with ``HTTP/``) is held
    until the next write (joined: one syscall) or, at the latest, the end of the current
    event-loop iteration (``call_soon``), or until ``close()`` / ``write_eof()``; bytes are
    never reordered or dropped. Everything else is delegated to the real transport."""

    __slots__ = ("_transport", "_loop", "_held", "_flush_scheduled")

    def __init__(self, transport: Any, loop: Any) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self._flush_scheduled = False

    def write(self, data: bytes) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._transport.write(held + bytes(data))
        elif data[:5] == b"HTTP/":
            self._held = bytes(data)
            if not self._flush_scheduled:
                self._flush_scheduled = True
                self._loop.call_soon(self._flush)
        else:
            self._transport.write(data)

    def _flush(self) -> None:
        self._flush_scheduled = False
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(lines))

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class CoalescingHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``HttpToolsProtocol`` writing through a :class:`CoalescingTransport`."""

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        super().connection_made(CoalescingTransport(transport, self.loop))  # type: ignore[arg-type]
