"""Relaying an upstream's event stream to the client: :class:`SSERelay` re-frames the bytes of a
``chat.completion.chunk`` stream event by event, bounded in memory, and remembers what a
complete stream has (``[DONE]``, a ``finish_reason``) or an error event. Framing follows the
WHATWG HTML "Server-sent events" section (9.2.6, "Interpreting an event stream");
:mod:`proxy.wire.sse` holds the parser and the frame encoders.
"""

from __future__ import annotations

import json
import re

from proxy.config import DEFAULT_MAX_EVENT_BYTES
from proxy.observability.log import scrub_secrets
from proxy.wire.sse import DONE_FRAME

__all__ = ["EventTooLarge", "SSERelay"]


_FINISH_RE = re.compile(rb'"finish_reason"\s*:\s*"')
_ERROR_RE = re.compile(rb'^\s*\{\s*"error"\s*:')


def _escaped_finish(data: bytes) -> bool:
    """True when the JSON ``data`` has a choice with a string ``finish_reason`` written with
    ``\\u`` escapes that the byte pattern :data:`_FINISH_RE` cannot see (``"finish\\u005freason"``:
    JSON allows any character escaped, RFC 8259 §7). Only called for data holding ``\\u``."""
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    choices = doc.get("choices") if isinstance(doc, dict) else None
    return isinstance(choices, list) and any(
        isinstance(c, dict) and isinstance(c.get("finish_reason"), str) for c in choices)


class EventTooLarge(ValueError):
    """An SSE event grew past :attr:`SSERelay.max_event` bytes without its terminating blank line."""


class SSERelay:
    """Incremental SSE splitter for relaying ``chat.completion.chunk`` streams.

    ``feed(bytes) -> bytes`` returns every *complete* event received so far, re-framed as
    ``data: ...\\n\\n`` (``event:`` kept), and keeps any incomplete tail for the next call, so
    nothing is held back longer than one event. Frames without data (``id:``/``retry:``-only,
    comments, empty ``data:``) are dropped: the ``openai`` SDK would otherwise try to
    ``json.loads("")`` them (``openai/_streaming.py``, ``SSEDecoder.decode``). CRLF and a lone CR
    (both end a line in the SSE format) become LF; a CR that ends a read waits for the next one.

    Bounded: the incomplete tail is kept as a list of reads (each read is scanned once, so an
    event arriving in N reads costs O(its size), not O(N x size)), and when it exceeds
    ``max_event`` bytes ``feed`` raises :class:`EventTooLarge` (the caller closes the stream).

    State: ``done`` (``data: [DONE]`` seen), ``finished`` (a ``finish_reason`` string seen),
    ``errored`` (the upstream sent a ``data: {"error": ...}`` event). Error events (that
    shape, or ``event: error``) are relayed with the configured upstream keys replaced by
    ``[REDACTED]`` (:func:`proxy.observability.log.scrub_secrets`), as upstream error bodies are.
    Event format: https://html.spec.whatwg.org/multipage/server-sent-events.html
    """

    __slots__ = ("_parts", "_size", "_cr", "max_event", "done", "finished", "errored", "events")

    def __init__(self, max_event: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._parts: list[bytes] = []  # the incomplete tail (LF line ends only), in reads
        self._size = 0
        self._cr = False  # the last read ended in CR: maybe half of a CRLF
        self.max_event = max_event
        self.done = False
        self.finished = False
        self.errored = False
        self.events = 0

    def feed(self, chunk: bytes) -> bytes:
        """Add raw bytes; return the complete events among them (possibly ``b""``). Raises
        :class:`EventTooLarge` when the incomplete event grows past ``max_event`` bytes."""
        if self._cr:
            chunk, self._cr = b"\r" + chunk, False
        if b"\r" in chunk:
            if chunk.endswith(b"\r"):  # maybe half of a CRLF cut between reads: decided on the next one
                chunk, self._cr = chunk[:-1], True
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")  # CRLF, LF and CR all end a line
        parts = self._parts
        if parts:
            if b"\n\n" not in chunk and not (chunk[:1] == b"\n" and parts[-1].endswith(b"\n")):
                return self._hold(chunk)
            buf = b"".join(parts) + chunk
        else:
            buf = chunk
        end = buf.rfind(b"\n\n")
        if end < 0:
            return self._hold(buf, fresh=True)
        self._parts, self._size = [], 0
        if end + 2 < len(buf):
            self._hold(buf[end + 2:], fresh=True)
        return self._events(buf[:end].split(b"\n\n"))

    def _hold(self, data: bytes, fresh: bool = False) -> bytes:
        if fresh:
            self._parts, self._size = [], 0
        if data:
            self._parts.append(data)
            self._size += len(data)
            if self._size > self.max_event:
                self._parts, self._size = [], 0
                raise EventTooLarge(f"an SSE event larger than {self.max_event} bytes")
        return b""

    def flush(self) -> bytes:
        """At end of input: the last event if the upstream omitted its final blank line."""
        buf = b"".join(self._parts) + (b"\n" if self._cr else b"")
        self._parts, self._size, self._cr = [], 0, False
        return self._events([e for e in buf.split(b"\n\n") if e.strip()]) if buf.strip() else b""

    def _events(self, raw_events: list[bytes]) -> bytes:
        out: list[bytes] = []
        for ev in raw_events:
            if ev.startswith(b"data: ") and b"\n" not in ev:  # the common case: one data line
                data = ev[6:]
                framed = ev + b"\n\n"
                event_line = b""
            else:
                data_lines: list[bytes] = []
                event_line = b""
                for line in ev.split(b"\n"):
                    name, _, value = line.partition(b":")
                    if value.startswith(b" "):
                        value = value[1:]
                    if name == b"data":
                        data_lines.append(value)
                    elif name == b"event" and value:
                        event_line = b"event: " + value + b"\n"
                data = b"\n".join(data_lines)
                framed = event_line + b"".join(b"data: " + d + b"\n" for d in data_lines) + b"\n"
            if not data.strip():
                continue
            if self.done:  # nothing may follow [DONE]
                continue
            if data.strip() == b"[DONE]":
                self.done = True
                if not (self.finished or self.errored):
                    continue  # held back: the relay reports the missing finish_reason instead
                framed = DONE_FRAME
            elif not self.finished and (_FINISH_RE.search(data) or (b"\\u" in data and _escaped_finish(data))):
                self.finished = True
            elif _ERROR_RE.match(data):
                self.errored = True
                framed = scrub_secrets(framed)  # an upstream may echo the key it was sent
            elif event_line == b"event: error\n":
                framed = scrub_secrets(framed)
            self.events += 1
            out.append(framed)
        return b"".join(out)
