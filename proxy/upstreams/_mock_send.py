"""Bytes out of the mock upstream (:mod:`proxy.upstreams.mock`): its JSON codec, compressed
bodies, the ASGI ``http.response.*`` messages of a whole answer, and the connection cut that
fault injection uses (``drop_mid_stream``, ``drop_before_headers``).
"""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import zlib
from typing import Any

from proxy.upstreams._mock_script import Reply
from proxy.wire.json import has_long_digit_run


try:  # the gateway depends on orjson; keep the mock usable without it
    import orjson

    def _dumps(obj: Any) -> bytes:
        try:
            return orjson.dumps(obj, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # integers beyond 64 bits, lone surrogates: stdlib with ASCII escapes
            return json.dumps(obj, separators=(",", ":")).encode("ascii")

    def _loads(raw: bytes) -> Any:
        """orjson's parse; the stdlib's when ``raw`` may hold an integer beyond 64 bits
        (orjson would return a float: the recorded body must show what was sent)."""
        obj = orjson.loads(raw)
        if isinstance(obj, dict) and has_long_digit_run(raw):
            try:
                return json.loads(raw)
            except (ValueError, RecursionError):
                pass
        return obj
except ImportError:  # pragma: no cover
    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    _loads = json.loads


def _compress(payload: bytes, encoding: str | None) -> tuple[bytes, dict[str, str]]:
    """``payload`` encoded per ``encoding`` (``gzip``/``deflate``/None) and the header saying so."""
    if encoding == "gzip":
        return gzip.compress(payload), {"content-encoding": "gzip"}
    if encoding == "deflate":
        return zlib.compress(payload), {"content-encoding": "deflate"}
    return payload, {}


async def _send(send: Any, status: int, payload: bytes, headers: dict[str, str] | None = None,
                content_type: bytes = b"application/json") -> None:
    hdrs = [(b"content-type", content_type), (b"content-length", str(len(payload)).encode())]
    if headers:
        hdrs += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": payload})


async def _send_json(send: Any, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
    await _send(send, status, _dumps(obj), headers)


async def _send_body(send: Any, completion: dict, reply: Reply) -> None:
    payload = _dumps(completion)
    if "drop_mid_stream" in reply.fault:
        hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": hdrs})
        await send({"type": "http.response.body", "body": payload[: len(payload) // 2], "more_body": True})
        await _cut(send)
        return
    payload, enc = _compress(payload, reply.content_encoding)
    await _send(send, 200, payload, {**reply.headers, **enc})


class _Drop(Exception):
    """Raised inside the app to make uvicorn cut the connection (fault injection)."""


async def _cut(send: Any) -> None:
    """Close the client connection now, without finishing the response (fault injection).

    uvicorn's ``send`` is a bound method of its per-request cycle, which holds the asyncio
    transport; closing it makes the client see a connection cut, not an HTTP error. Without
    that handle, raise :class:`_Drop` (uvicorn then answers 500 if nothing was sent yet)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:
        raise _Drop
    transport.close()
    for _ in range(3):  # let connection_lost() run so uvicorn sees a disconnect, not an app bug
        await asyncio.sleep(0)


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, _Drop) and "_Drop" not in record.getMessage()


_DROP_FILTER = _DropFilter()
