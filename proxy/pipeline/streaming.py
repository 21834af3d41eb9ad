"""SSE helpers for the verifying stream modes (``buffer`` and ``passthrough``).

- :func:`hold` yields SSE comment keep-alives (``: keep-alive``) while a piece of work runs,
  then the frames the work produced: clients and proxies see bytes every ``keepalive_s``
  seconds while the gateway holds the answer to verify it. Comment lines are ignored by SSE
  parsers (WHATWG HTML "Server-sent events", "Lines starting with ':'"), the ``openai`` SDK
  included.
- :func:`completion_frames` turns a verified ``chat.completion`` into valid chunk frames
  (:func:`proxy.wire.sse.to_chunks`), with the usage chunk only when the client asked for it.
- :func:`report_frame` is the last chunk before ``[DONE]``: ``choices: []`` plus the
  ``veracity`` report (the same shape as OpenAI's usage chunk, so the SDK parses it). It is
  used when the client asked for the usage chunk (such clients expect ``choices: []``) or for
  ``n > 1``; otherwise :func:`with_report` puts the report on the answer's last chunk (the one
  with ``finish_reason``): the common client loop ``chunk.choices[0].delta`` raises
  ``IndexError`` on a ``choices: []`` chunk it never asked for (BerriAI/litellm#30870).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from proxy.wire.sse import DONE_FRAME, encode_chunk, encode_chunk_lenient, to_chunks

__all__ = ["hold", "completion_frames", "report_frame", "with_report", "has_finish", "report_on_last_chunk",
           "DONE_FRAME", "KEEPALIVE", "include_usage", "without_upstream_report"]

KEEPALIVE = b": keep-alive\n\n"


_FINISH_RE = re.compile(rb'"finish_reason"\s*:\s*"')


def include_usage(body: dict[str, Any]) -> bool:
    """Whether the client asked for the usage chunk (``stream_options.include_usage``)."""
    so = body.get("stream_options")
    return isinstance(so, dict) and so.get("include_usage") is True


def report_on_last_chunk(body: dict[str, Any]) -> bool:
    """Whether the report rides on the answer's last chunk (:func:`with_report`) rather than in
    a ``choices: []`` chunk: when the client did not ask for the usage chunk and wants one
    choice (``n`` absent or 1)."""
    n = body.get("n")
    return not include_usage(body) and (n is None or n == 1)


def has_finish(frame: bytes) -> bool:
    """Whether an SSE frame carries a (non-null) ``finish_reason``."""
    return _FINISH_RE.search(frame) is not None


def with_report(frame: bytes, report: dict[str, Any]) -> bytes | None:
    """``frame`` (one ``data:`` chunk event, as relayed) with ``"veracity": report`` added to
    its chunk object; ``None`` when the frame is not a JSON object chunk (the caller then sends
    :func:`report_frame`)."""
    lines = frame.strip(b"\n").split(b"\n")
    if not lines or any(not line.startswith(b"data: ") for line in lines):
        return None
    try:
        chunk = json.loads(b"\n".join(line[6:] for line in lines))
    except (ValueError, RecursionError):
        return None
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
        return None
    chunk["veracity"] = report
    return encode_chunk_lenient(chunk)


def without_upstream_report(blob: bytes) -> bytes:
    """``blob`` (whole SSE frames as the upstream sent them) with any top-level ``veracity``
    key removed from its chunk objects. The ``veracity`` field is the gateway's report: an
    upstream (or anything between it and the gateway) that writes one -- ``"status": "passed"``
    on every chunk of a wrong answer -- must not reach a client that reads the report from the
    chunks. Frames are decoded only when the bytes could hold the key (``eracity``, or a JSON
    ``\\u00`` escape that could spell it); other frames pass through byte for byte."""
    if b"eracity" not in blob and b"\\u00" not in blob:
        return blob
    out: list[bytes] = []
    for frame in blob.split(b"\n\n"):
        lines = frame.split(b"\n")
        data = [ln for ln in lines if ln.startswith(b"data:")]
        if data and len(data) == len(lines):
            try:
                chunk = json.loads(b"\n".join(ln[5:].lstrip(b" ") for ln in data))
            except (ValueError, RecursionError):
                chunk = None
            if isinstance(chunk, dict) and "veracity" in chunk:
                del chunk["veracity"]
                out.append(encode_chunk_lenient(chunk)[: -2])
                continue
        out.append(frame)
    return b"\n\n".join(out)


async def hold(work: Awaitable[list[bytes]], keepalive_s: float, *, first: bytes = KEEPALIVE,
               stats: dict[str, Any] | None = None) -> AsyncIterator[bytes]:
    """Yield ``first`` at once (time to first byte stays small), then a keep-alive comment
    every ``keepalive_s`` seconds until ``work`` finishes, then its frames. Closing the
    generator (client gone) cancels the work. ``stats["keepalives"]`` counts comments sent."""
    task = asyncio.ensure_future(work)
    sent = 0
    try:
        if first:
            yield first
        while True:
            done, _ = await asyncio.wait({task}, timeout=keepalive_s)
            if done:
                break
            sent += 1
            yield KEEPALIVE
        for frame in task.result():
            yield frame
    finally:
        if stats is not None:
            stats["keepalives"] = sent
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # noqa: BLE001 - the client is gone; nothing to report to
                pass


def completion_frames(completion: dict[str, Any], *, usage: bool, chunk_size: int = 64) -> list[bytes]:
    """The SSE frames of ``completion`` as a stream (no ``[DONE]``)."""
    comp = {k: v for k, v in completion.items() if k != "veracity"}
    if not usage:
        comp.pop("usage", None)
    return [encode_chunk(c) for c in to_chunks(comp, chunk_size=chunk_size, include_usage=usage)]


def report_frame(completion: dict[str, Any] | None, report: dict[str, Any], model: str) -> bytes:
    """The ``choices: []`` chunk carrying the ``veracity`` report."""
    comp = completion or {}
    chunk = {
        "id": comp.get("id") or "chatcmpl-veracity",
        "object": "chat.completion.chunk",
        "created": comp.get("created") or int(time.time()),
        "model": comp.get("model") or model,
        "choices": [],
        "veracity": report,
    }
    return encode_chunk_lenient(chunk)
