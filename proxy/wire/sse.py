"""Server-sent events for OpenAI chat-completion streams: parse, assemble, and the inverse.

Three pieces, used by the mock upstream today and by the buffered-verification mode later:

* :class:`SSEDecoder` -- an incremental parser of an ``text/event-stream`` body, fed the raw
  bytes as they arrive (frames split across reads, CRLF/CR/LF line ends, ``:`` comments,
  ``id:``/``retry:``-only frames, empty ``data:``).  It follows the WHATWG HTML "Server-sent
  events" parsing rules (section 9.2.6, "Interpreting an event stream").  A small own parser
  rather than ``httpx-sse``: that library's public API is bound to an ``httpx.Response`` while
  the gateway's hot path reads aiohttp bytes, and the rules fit in fifty lines.
* :func:`assemble` -- ``chat.completion.chunk`` dicts -> one ``chat.completion`` dict, merging
  deltas per choice ``index`` the way the ``openai`` SDK's ``ChatCompletionStreamState`` does
  (strings concatenated, tool-call deltas merged by their ``index``), except that a new ``id``
  on an ``index`` already in use starts a new call, and a delta without ``index`` continues
  the last call unless it brings a new ``id``.  An incomplete stream (a choice without
  ``finish_reason``, no ``data: [DONE]``) is reported, never dressed up as a normal stop.
* :func:`frame`, :data:`DONE_FRAME`, :func:`encode_chunk`, :func:`encode_chunk_lenient` -- the
  gateway's one way of writing an event: ``data: <payload>\n\n`` (the relay of an upstream's
  stream, :class:`proxy.wire.relay.SSERelay`, re-frames to the same shape).
* :func:`to_chunks` / :func:`encode_chunks` -- the inverse: a ``chat.completion`` dict -> a
  valid chunk sequence (role first, content deltas, tool-call deltas with ``index`` and the
  ``id`` only on a call's first delta, a ``finish_reason`` chunk, the usage chunk with
  ``choices: []`` when asked, then ``data: [DONE]``), in the shape of OpenAI's API reference
  ("The chat completion chunk object").

Round trip: ``assemble(to_chunks(c, include_usage=True)) == c`` for every field a client
reads (ids, model, created, system_fingerprint, message content/refusal/tool_calls, finish
reason, logprobs, usage, unknown fields); only stream-only fields such as ``obfuscation``
are dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:  # a dependency of the gateway; stdlib json keeps this module usable on its own
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

__all__ = [
    "DONE",
    "DONE_FRAME",
    "IncompleteStream",
    "ServerSentEvent",
    "SSEDecoder",
    "ParsedStream",
    "parse_stream",
    "assemble",
    "to_chunks",
    "frame",
    "encode_chunk",
    "encode_chunk_lenient",
    "encode_chunks",
]

#: The data line that ends an OpenAI stream.
DONE = "[DONE]"
#: The whole event that ends an OpenAI stream.
DONE_FRAME = b"data: [DONE]\n\n"

# Fields of a chunk that describe the stream, not the completion; dropped on assembly.
# `obfuscation`: random padding OpenAI adds per chunk (stream_options.include_obfuscation).
_STREAM_ONLY_FIELDS = frozenset({"obfuscation"})


# --------------------------------------------------------------------------- parsing


@dataclass(slots=True)
class ServerSentEvent:
    """One dispatched event: ``event`` type (``None`` means the default ``message``),
    ``data`` (the ``data:`` lines joined by ``\\n``), last ``id`` seen, ``retry`` in ms."""

    data: str
    event: str | None = None
    id: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        """``json.loads(self.data)``; raises ``json.JSONDecodeError`` on bad data."""
        return json.loads(self.data)


class SSEDecoder:
    """Incremental ``text/event-stream`` parser (WHATWG HTML, 9.2.6).

    ``feed(bytes)`` returns the events completed by those bytes; ``flush()`` ends the stream
    (a trailing event without its blank line is discarded, as the spec says). Bytes may be
    split anywhere, including inside a UTF-8 sequence or between ``\\r`` and ``\\n``.
    Frames with only ``id:``/``retry:`` lines or comments dispatch nothing but update
    :attr:`last_event_id` / :attr:`retry`; an empty ``data:`` line dispatches ``data == ""``.
    :attr:`comments` counts comment lines (keep-alives).
    """

    def __init__(self) -> None:
        self._buf = b""
        self._data: list[str] = []
        self._event: str | None = None
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self.comments = 0
        self._first_line = True

    def feed(self, data: bytes) -> list[ServerSentEvent]:
        """Parse ``data``; return the events whose terminating blank line it contained."""
        buf = self._buf + data if self._buf else data
        lines = buf.splitlines(keepends=True)  # bytes.splitlines: only \r, \n, \r\n
        self._buf = b""
        # Hold back an unterminated line, and a line ending in a lone \r: it may be the
        # first half of a \r\n split across reads; the next feed() or flush() decides.
        if lines and (lines[-1].endswith(b"\r") or not lines[-1].endswith(b"\n")):
            self._buf = lines.pop()
        events: list[ServerSentEvent] = []
        for raw in lines:
            ev = self._line(raw.rstrip(b"\r\n"))
            if ev is not None:
                events.append(ev)
        return events

    def flush(self) -> list[ServerSentEvent]:
        """End of stream: process a held line ending in ``\\r``; drop an unfinished event."""
        events: list[ServerSentEvent] = []
        if self._buf.endswith(b"\r"):
            ev = self._line(self._buf.rstrip(b"\r"))
            if ev is not None:
                events.append(ev)
        self._buf = b""
        self._data = []
        self._event = None
        return events

    def _line(self, raw: bytes) -> ServerSentEvent | None:
        line = raw.decode("utf-8", errors="replace")
        if self._first_line:
            self._first_line = False
            if line.startswith("\ufeff"):  # the spec strips one leading BOM
                line = line[1:]
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry":
            if value.isascii() and value.isdigit():
                self.retry = int(value)
        # other field names are ignored (spec)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = None
            return None
        ev = ServerSentEvent(
            data="\n".join(self._data), event=self._event, id=self.last_event_id, retry=self.retry
        )
        self._data = []
        self._event = None
        return ev


@dataclass(slots=True)
class ParsedStream:
    """The chunks of one OpenAI stream body.

    ``chunks``: decoded JSON objects in order; ``done``: whether ``data: [DONE]`` was seen;
    ``errors``: JSON objects carrying a top-level ``error`` (an in-stream error event);
    ``bad_data``: data payloads that were not JSON (kept verbatim, not raised);
    ``empty_data``: events whose data was empty."""

    chunks: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    errors: list[dict[str, Any]] = field(default_factory=list)
    bad_data: list[str] = field(default_factory=list)
    empty_data: int = 0


def parse_stream(body: bytes | Iterable[bytes]) -> ParsedStream:
    """Parse a whole OpenAI SSE body (or an iterable of its reads) into chunk dicts.

    Never raises on bad input: non-JSON payloads go to ``bad_data``; events after
    ``[DONE]`` are ignored (the ``openai`` SDK stops reading there too)."""
    decoder = SSEDecoder()
    out = ParsedStream()
    reads = [body] if isinstance(body, (bytes, bytearray)) else body
    for events in _decode_all(decoder, reads):
        for ev in events:
            if out.done:
                continue
            data = ev.data
            if data == "":
                out.empty_data += 1
                continue
            if data.strip() == DONE:
                out.done = True
                continue
            try:
                obj = json.loads(data)
            except (ValueError, RecursionError):  # RecursionError: nested ~1,000 levels deep
                out.bad_data.append(data)
                continue
            if not isinstance(obj, dict):
                out.bad_data.append(data)
            elif "error" in obj and "choices" not in obj:
                out.errors.append(obj)
            else:
                out.chunks.append(obj)
    return out


def _decode_all(decoder: SSEDecoder, reads: Iterable[bytes]) -> Iterator[list[ServerSentEvent]]:
    for piece in reads:
        yield decoder.feed(bytes(piece))
    yield decoder.flush()


# --------------------------------------------------------------------------- assembly


class IncompleteStream(ValueError):
    """The stream ended without what a complete one has.

    ``problems``: human-readable reasons (``"no [DONE]"``, ``"choice 0 has no
    finish_reason"``, ``"no chunks"``); ``partial``: the completion assembled so far, its
    missing ``finish_reason`` left ``None``."""

    def __init__(self, problems: list[str], partial: dict[str, Any]) -> None:
        super().__init__("incomplete stream: " + "; ".join(problems))
        self.problems = problems
        self.partial = partial


_CHOICE_KNOWN = frozenset({"index", "delta", "finish_reason", "logprobs"})
_TOP_KNOWN = frozenset({"choices", "object", "usage"})


def _merge_value(target: dict[str, Any], key: str, value: Any) -> None:
    """Strings concatenate, dicts merge recursively, anything else: last non-None wins."""
    if value is None:
        target.setdefault(key, None)
        return
    old = target.get(key)
    if isinstance(value, str) and isinstance(old, str):
        target[key] = old + value
    elif isinstance(value, dict) and isinstance(old, dict):
        for k, v in value.items():
            _merge_value(old, k, v)
    elif isinstance(value, dict):
        target[key] = {}
        for k, v in value.items():
            _merge_value(target[key], k, v)
    else:
        target[key] = value


class _ChoiceState:
    __slots__ = ("index", "message", "calls", "by_index", "finish_reason", "logprobs", "extra")

    def __init__(self, index: int) -> None:
        self.index = index
        self.message: dict[str, Any] = {"role": None, "content": None, "refusal": None}
        self.calls: list[dict[str, Any]] = []
        self.by_index: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.logprobs: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}

    def add(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta")
        if not isinstance(delta, dict):  # malformed upstream chunk: nothing to merge
            delta = {}
        for key, value in delta.items():
            if key == "tool_calls":
                for call_delta in value if isinstance(value, list) else ():
                    if isinstance(call_delta, dict):
                        self._add_call(call_delta)
            elif key == "role":
                if value is not None:
                    self.message["role"] = value
            else:
                _merge_value(self.message, key, value)
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
        lp = choice.get("logprobs")
        if isinstance(lp, dict):
            if self.logprobs is None:
                self.logprobs = {}
            for k, v in lp.items():
                if isinstance(v, list):
                    prev = self.logprobs.get(k)
                    self.logprobs[k] = (prev if isinstance(prev, list) else []) + v
                else:
                    self.logprobs.setdefault(k, v)
        for key, value in choice.items():
            if key not in _CHOICE_KNOWN and value is not None:
                self.extra[key] = value
            elif key not in _CHOICE_KNOWN:
                self.extra.setdefault(key, None)

    def _add_call(self, delta: dict[str, Any]) -> None:
        idx = delta.get("index")
        call_id = delta.get("id")
        if not isinstance(idx, int):
            # no index (Gemini and some OpenAI-compatible servers): a delta without an id, or
            # with the id of the last call, continues the last call; any other id starts a new
            # one (openai-python#3246 infers indexes the same way)
            last = self.calls[-1] if self.calls else None
            if last is not None and (not call_id or call_id == last.get("id")):
                idx = next(i for i, c in self.by_index.items() if c is last)
            else:
                idx = max(self.by_index, default=-1) + 1
        call = self.by_index.get(idx)
        if call is None or (call_id and call.get("id") and call_id != call["id"]):
            call = {"id": call_id, "type": "function", "function": {"name": "", "arguments": ""}}
            self.by_index[idx] = call
            self.calls.append(call)
        for key, value in delta.items():
            if key == "index":
                continue
            if key == "id":
                if value:
                    call["id"] = value
            elif key == "type":
                if value:
                    call["type"] = value
            else:
                _merge_value(call, key, value)

    def result(self) -> dict[str, Any]:
        message = dict(self.message)
        if message["role"] is None:
            message["role"] = "assistant"
        if self.calls:
            message["tool_calls"] = self.calls
        out: dict[str, Any] = {
            "index": self.index,
            "message": message,
            "logprobs": self.logprobs,
            "finish_reason": self.finish_reason,
        }
        out.update(self.extra)
        return out


def assemble(
    chunks: Iterable[dict[str, Any]], *, done: bool = True, strict: bool = True
) -> dict[str, Any]:
    """Merge ``chat.completion.chunk`` dicts into one ``chat.completion`` dict.

    Args:
        chunks: decoded chunk objects in stream order (see :func:`parse_stream`).
        done: whether the stream ended with ``data: [DONE]``.
        strict: raise :class:`IncompleteStream` when the stream is incomplete (no chunks,
            ``done`` false, or a choice without ``finish_reason``); when false, return the
            partial completion with ``finish_reason: None`` -- never an invented ``stop``.

    Top-level ``id``/``created``/``model``/``system_fingerprint``/``service_tier`` and unknown
    fields: last non-null value; ``usage``: the last non-null ``usage`` (the usage chunk has
    ``choices: []``); per choice: ``role``, ``content``/``refusal`` concatenated (``None``
    when never sent), tool calls merged by ``index`` (a new ``id`` on a used ``index`` starts
    a new call; ``name``/``arguments`` concatenated), ``logprobs`` lists concatenated,
    last ``finish_reason``. Choices are returned sorted by ``index``.
    """
    top: dict[str, Any] = {}
    usage: Any = None
    choices: dict[int, _ChoiceState] = {}
    seen = 0
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        seen += 1
        for key, value in chunk.items():
            if key in _TOP_KNOWN or key in _STREAM_ONLY_FIELDS:
                continue
            if value is not None or key not in top:
                top[key] = value
        if chunk.get("usage") is not None:
            usage = chunk["usage"]
        raw_choices = chunk.get("choices")
        for choice in raw_choices if isinstance(raw_choices, list) else ():
            # malformed pieces of an upstream chunk (a choice that is not an object, an index
            # that is not an integer) are skipped: never a crash mid-stream
            if not isinstance(choice, dict):
                continue
            idx = choice.get("index", 0)
            if idx is None:
                idx = 0
            if not isinstance(idx, int):
                continue
            state = choices.get(idx)
            if state is None:
                state = choices[idx] = _ChoiceState(idx)
            state.add(choice)
    completion: dict[str, Any] = {
        "id": top.pop("id", None),
        "object": "chat.completion",
        "created": top.pop("created", None),
        "model": top.pop("model", None),
        "choices": [choices[i].result() for i in sorted(choices)],
        "usage": usage,
    }
    completion.update(top)
    problems: list[str] = []
    if not seen:
        problems.append("no chunks")
    if not done:
        problems.append("no [DONE]")
    for c in completion["choices"]:
        if c["finish_reason"] is None:
            problems.append(f"choice {c['index']} has no finish_reason")
    if problems and strict:
        raise IncompleteStream(problems, completion)
    return completion


# --------------------------------------------------------------------------- the inverse


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text]
    return [text[i : i + size] for i in range(0, len(text), size)]


def _content_deltas(
    text: str, logprob_tokens: list[dict[str, Any]] | None, size: int
) -> list[tuple[str, list[dict[str, Any]] | None]]:
    """Split content into deltas; attach each logprob token to the delta it ends in.

    When the tokens spell the content exactly, deltas follow token boundaries (grouping
    tokens up to ``size`` characters) so each delta carries its own tokens, as OpenAI does.
    Otherwise fixed ``size`` pieces, all tokens on the first delta."""
    if not isinstance(logprob_tokens, list):  # malformed logprobs: no per-token alignment
        logprob_tokens = None
    if logprob_tokens and all(isinstance(t, dict) and isinstance(t.get("token"), str) for t in logprob_tokens) \
            and "".join(t["token"] for t in logprob_tokens) == text:
        out: list[tuple[str, list[dict[str, Any]] | None]] = []
        buf, toks = "", []
        for tok in logprob_tokens:
            buf += tok["token"]
            toks.append(tok)
            if size <= 0 or len(buf) >= size:
                out.append((buf, toks))
                buf, toks = "", []
        if toks:
            out.append((buf, toks))
        return out
    parts = _pieces(text, size)
    return [(p, logprob_tokens if i == 0 else None) for i, p in enumerate(parts)]


def to_chunks(
    completion: dict[str, Any], *, chunk_size: int = 16, include_usage: bool | None = None
) -> list[dict[str, Any]]:
    """Turn a ``chat.completion`` dict into the ``chat.completion.chunk`` dicts of its stream.

    Args:
        completion: a chat completion (``choices[].message`` with ``content``, ``refusal``,
            ``tool_calls``; ``finish_reason``; optional ``logprobs``, ``usage``).
        chunk_size: characters per content/refusal/arguments delta (``<= 0``: one delta).
        include_usage: append the usage chunk (``choices: []``) and put ``usage: null`` on
            every other chunk, as OpenAI does under ``stream_options.include_usage``;
            ``None`` means "when the completion has a usage".

    Returns chunks in wire order, without the ``[DONE]`` sentinel (see
    :func:`encode_chunks`). Per choice: a role chunk (``content: ""`` for text, ``null`` when
    the message has no text), content deltas with their ``logprobs``, refusal deltas, per
    tool call a first delta with ``index``, ``id``, ``type``, ``name`` and empty
    ``arguments`` then argument deltas with ``index`` only, and a final chunk with an empty
    delta and ``finish_reason`` (omitted when it is ``None``). Choices of ``n > 1`` are
    interleaved round-robin, one choice per chunk. Unknown top-level fields are repeated
    on every chunk; unknown message fields ride on the role delta, unknown choice fields on
    the finish chunk.
    """
    usage = completion.get("usage")
    if include_usage is None:
        include_usage = usage is not None
    base: dict[str, Any] = {}
    for key, value in completion.items():
        if key in ("choices", "usage", "object"):
            continue
        base[key] = value
    base["object"] = "chat.completion.chunk"
    for key in ("id", "created", "model"):
        base.setdefault(key, None)

    per_choice: list[list[dict[str, Any]]] = []
    raw_choices = completion.get("choices")
    for choice in raw_choices if isinstance(raw_choices, list) else ():
        if isinstance(choice, dict):  # a malformed choice cannot be streamed: skipped
            per_choice.append(_choice_deltas(choice, chunk_size))

    chunks: list[dict[str, Any]] = []
    longest = max((len(p) for p in per_choice), default=0)
    for step in range(longest):
        for deltas in per_choice:
            if step < len(deltas):
                chunk = dict(base)
                chunk["choices"] = [deltas[step]]
                if include_usage:
                    chunk["usage"] = None
                chunks.append(chunk)
    if include_usage:
        last = dict(base)
        last["choices"] = []
        last["usage"] = usage
        chunks.append(last)
    return chunks


def _choice_deltas(choice: dict[str, Any], size: int) -> list[dict[str, Any]]:
    idx = choice.get("index", 0)
    message = choice.get("message")
    if not isinstance(message, dict):
        message = {}
    content = message.get("content")
    refusal = message.get("refusal")
    calls = message.get("tool_calls")
    calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
    logprobs = choice.get("logprobs")
    lp_content = logprobs.get("content") if isinstance(logprobs, dict) else None
    lp_refusal = logprobs.get("refusal") if isinstance(logprobs, dict) else None

    def mk(delta: dict[str, Any], lp: Any = None) -> dict[str, Any]:
        return {"index": idx, "delta": delta, "logprobs": lp, "finish_reason": None}

    out: list[dict[str, Any]] = []
    first: dict[str, Any] = {"role": message.get("role") or "assistant"}
    first["content"] = "" if isinstance(content, str) else None
    if "refusal" in message:
        first["refusal"] = None
    for key, value in message.items():
        if key not in ("role", "content", "refusal", "tool_calls"):
            first[key] = value
    out.append(mk(first))
    if isinstance(content, str) and content:
        for text, toks in _content_deltas(content, lp_content, size):
            lp = {"content": toks, "refusal": None} if toks is not None else None
            out.append(mk({"content": text}, lp))
    elif lp_content:
        out.append(mk({}, {"content": lp_content, "refusal": None}))
    if isinstance(refusal, str) and refusal:
        for text, toks in _content_deltas(refusal, lp_refusal, size):
            lp = {"content": None, "refusal": toks} if toks is not None else None
            out.append(mk({"refusal": text}, lp))
    for call_index, call in enumerate(calls):
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments") or ""
        if not isinstance(args, str):  # arguments are a JSON string on the wire
            args = json.dumps(args)
        head: dict[str, Any] = {"index": call_index}
        head.update({k: v for k, v in call.items() if k != "function"})
        head.setdefault("type", "function")
        head_fn = {k: v for k, v in fn.items() if k != "arguments"}
        head_fn["arguments"] = ""
        head["function"] = head_fn
        out.append(mk({"tool_calls": [head]}))
        if args:
            for piece in _pieces(args, size):
                out.append(mk({"tool_calls": [{"index": call_index, "function": {"arguments": piece}}]}))
    tail = mk({})
    tail["finish_reason"] = choice.get("finish_reason")
    for key, value in choice.items():
        if key not in ("index", "message", "finish_reason", "logprobs"):
            tail[key] = value
    if tail["finish_reason"] is not None or len(tail) > 4:
        out.append(tail)
    return out


def frame(payload: bytes) -> bytes:
    """One SSE event carrying ``payload`` (one line: compact JSON, or ``[DONE]``):
    ``data: <payload>\\n\\n``. Every event the gateway writes goes through here."""
    return b"data: " + payload + b"\n\n"


def encode_chunk(chunk: dict[str, Any] | str) -> bytes:
    """One SSE frame: ``data: <compact JSON>\\n\\n`` (a ``str`` is sent verbatim, e.g. ``[DONE]``)."""
    if isinstance(chunk, str):
        return frame(chunk.encode("utf-8"))
    if orjson is not None:
        try:
            return frame(orjson.dumps(chunk))
        except TypeError:  # an integer beyond 64 bits, a lone surrogate: fall back to the stdlib
            pass
    # ASCII escapes keep any str (even a lone surrogate from a \ud800 escape) encodable
    return frame(json.dumps(chunk, separators=(",", ":")).encode("ascii"))


def encode_chunk_lenient(chunk: dict[str, Any]) -> bytes:
    """One SSE frame for a chunk the gateway built or edited (the ``veracity`` report rides on
    it): the stdlib's compact JSON, non-ASCII written as UTF-8, a value JSON has no type for
    written as its ``str()``; a lone surrogate quoted from model text makes it fall back to
    ASCII escapes."""
    text = json.dumps(chunk, separators=(",", ":"), ensure_ascii=False, default=str)
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate quoted from model text: ASCII escapes instead
        data = json.dumps(chunk, separators=(",", ":"), default=str).encode()
    return frame(data)


def encode_chunks(chunks: Iterable[dict[str, Any]], *, done: bool = True) -> bytes:
    """A whole SSE body: every chunk as a ``data:`` frame, then ``data: [DONE]`` if ``done``."""
    body = b"".join(encode_chunk(c) for c in chunks)
    return body + encode_chunk(DONE) if done else body
