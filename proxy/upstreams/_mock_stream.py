"""The mock upstream's chat stream framing (:mod:`proxy.upstreams.mock`): a completion as
``data:`` frames (OpenAI's "The chat completion chunk object", ``data: [DONE]`` last), the
scripted stream faults and raw streams, pacing, and the watch on a client that disconnects
mid-stream (noted as an event on the recorded request).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from proxy.upstreams._mock_bodies import _error_body, _openai_error
from proxy.upstreams._mock_script import Reply
from proxy.upstreams._mock_send import _cut
from proxy.wire.sse import DONE, encode_chunk, to_chunks


async def send_stream(send: Any, completion: dict, body: dict, reply: Reply, watch: Any, record: Any) -> None:
    """Send a chat completion as its SSE stream: ``to_chunks`` of ``completion`` at
    ``reply.stream.chunk_size`` (the usage chunk when ``body`` asks ``stream_options.include_usage``),
    or ``reply.raw_stream`` verbatim; the reply's faults (``id_retry_frames``, ``empty_data``,
    ``drop_mid_stream``, ``error_mid_stream``, ``no_done``) applied; ``reply.stream.delay_ms``
    between frames. Stops early when ``watch`` (the pending ``receive()``) completes, i.e. the
    client went away, and notes it as an event on ``record``."""
    opts = body.get("stream_options")
    include_usage = isinstance(opts, dict) and bool(opts.get("include_usage"))
    chunks: list[Any] = to_chunks(completion, chunk_size=reply.stream.chunk_size, include_usage=include_usage)
    faults = set(reply.fault)
    frames: list[bytes] = []
    for i, chunk in enumerate(chunks if reply.raw_stream is None else ()):
        if "id_retry_frames" in faults:
            frames.append(f"id: {i}\n\n".encode() if i % 2 == 0 else b"retry: 3000\n\n: keep-alive\n\n")
        if "empty_data" in faults:
            frames.append(b"data: \n\n" if i % 2 == 0 else b"data:\r\n\r\n")
        frames.append(encode_chunk(chunk))
    if reply.raw_stream is not None:
        frames = [f.encode("utf-8") for f in reply.raw_stream]
        faults.add("no_done")  # the script wrote the whole body, [DONE] included or not
    cut = reply.drop_after if reply.drop_after is not None else max(1, len(frames) // 2)
    if "drop_mid_stream" in faults or "error_mid_stream" in faults:
        frames = frames[:cut]
        if "error_mid_stream" in faults:
            err = _error_body(reply) if reply.error else _openai_error("The upstream failed mid-stream.", "server_error")
            frames.append(b"event: error\ndata: " + json.dumps(err).encode() + b"\n\n")
    elif "no_done" not in faults:
        frames.append(encode_chunk(DONE))
    headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    delay = reply.stream.delay_ms / 1000
    for i, frame in enumerate(frames):
        if watch.done():
            _event(record, "client_disconnected", phase="mid_stream", frames_sent=i)
            return
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        if delay and await _sleep_or_disconnect(delay, watch):
            _event(record, "client_disconnected", phase="mid_stream", frames_sent=i + 1)
            return
    if "drop_mid_stream" in faults:
        _event(record, "connection_dropped", phase="mid_stream", frames_sent=len(frames))
        await _cut(send)
        return
    if watch.done():
        _event(record, "client_disconnected", phase="mid_stream", frames_sent=len(frames))
        return
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def _event(record: dict | None, name: str, **fields: Any) -> None:
    if record is not None:
        record["events"].append({"event": name, "time": time.time(), **fields})


async def _sleep_or_disconnect(seconds: float, watch: asyncio.Future | None) -> bool:
    """Sleep; return True early if the client disconnected meanwhile."""
    if watch is None:
        await asyncio.sleep(seconds)
        return False
    done, _ = await asyncio.wait({watch}, timeout=seconds)
    return bool(done)
