"""The Responses API's event streams (``POST /v1/responses`` with ``stream: true``), both ways.

Shapes follow OpenAI's API reference ("Streaming events") as typed in ``openai-python``
(``openai/types/responses/*_event.py``): every event has a ``type`` and a ``sequence_number``
counting from 0; a stream is ``response.created``, ``response.in_progress``, then per output
item ``response.output_item.added`` -> (``response.content_part.added`` ->
``response.output_text.delta``... -> ``response.output_text.done`` ->
``response.content_part.done``) or ``response.function_call_arguments.delta``... -> ``.done``
-> ``response.output_item.done``, and ``response.completed`` (``response.incomplete`` for a cut
answer) carrying the whole response; an ``error`` event ends a failed stream; no ``[DONE]``.

* :class:`EventsToChat` -- an upstream's Responses stream as chat-completion chunks (what the
  pipeline's stream modes read);
* :class:`ChatToEvents` -- the pipeline's chat-completion chunks as a Responses stream;
* :func:`response_events` -- a whole response as its event sequence (the mock upstream).
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from typing import Any

from proxy.wire.responses import _finish_reason, new_id, usage_to_chat
from proxy.wire.sse import SSEDecoder, encode_chunk

__all__ = ["EventsToChat", "ChatToEvents", "response_events", "event_frame"]


def event_frame(event: dict[str, Any]) -> bytes:
    """One Responses SSE event: ``event: <type>`` and ``data: <json>`` lines."""
    return b"event: " + str(event.get("type")).encode() + b"\n" + encode_chunk(event)


class _Emitter:
    """Builds a valid Responses event sequence: ``sequence_number`` from 0, items opened and
    closed in order (one open at a time), the snapshot kept for ``response.completed``."""

    def __init__(self, response: dict[str, Any]) -> None:
        self.seq = 0
        self.response = response
        self.items: list[dict[str, Any]] = []
        self.open: dict[str, Any] | None = None  # {"item", "index", "kind", "text"}
        self.frames: list[bytes] = []

    def emit(self, event: dict[str, Any]) -> None:
        event["sequence_number"] = self.seq
        self.seq += 1
        self.frames.append(event_frame(event))

    def take(self) -> list[bytes]:
        out, self.frames = self.frames, []
        return out

    def start(self) -> None:
        shell = dict(self.response, status="in_progress", output=[], usage=None)
        shell.pop("veracity", None)
        shell.pop("completed_at", None)
        self.emit({"type": "response.created", "response": shell})
        self.emit({"type": "response.in_progress", "response": dict(shell)})

    def open_message(self, item_id: str) -> None:
        self.close()
        item = {"id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
        idx = len(self.items)
        self.items.append(item)
        self.emit({"type": "response.output_item.added", "output_index": idx, "item": copy.deepcopy(item)})
        self.open = {"item": item, "index": idx, "kind": "message", "text": None, "refusal": None}

    def _part(self, kind: str) -> None:
        o = self.open
        assert o is not None
        other = "refusal" if kind == "text" else "text"
        if o[other] is not None:
            self._close_part(other)
        if o[kind] is None:
            o[kind] = ""
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []} if kind == "text" \
                else {"type": "refusal", "refusal": ""}
            o["item"]["content"].append(part)
            o[kind + "_index"] = len(o["item"]["content"]) - 1
            self.emit({"type": "response.content_part.added", "item_id": o["item"]["id"], "output_index": o["index"],
                       "content_index": o[kind + "_index"], "part": copy.deepcopy(part)})

    def text(self, delta: str, item_id: str) -> None:
        if self.open is None or self.open["kind"] != "message":
            self.open_message(item_id)
        self._part("text")
        o = self.open
        assert o is not None
        o["text"] += delta
        self.emit({"type": "response.output_text.delta", "item_id": o["item"]["id"], "output_index": o["index"],
                   "content_index": o["text_index"], "delta": delta, "logprobs": []})

    def refusal(self, delta: str, item_id: str) -> None:
        if self.open is None or self.open["kind"] != "message":
            self.open_message(item_id)
        self._part("refusal")
        o = self.open
        assert o is not None
        o["refusal"] += delta
        self.emit({"type": "response.refusal.delta", "item_id": o["item"]["id"], "output_index": o["index"],
                   "content_index": o["refusal_index"], "delta": delta})

    def _close_part(self, kind: str) -> None:
        o = self.open
        assert o is not None
        idx = o[kind + "_index"]
        base = {"item_id": o["item"]["id"], "output_index": o["index"], "content_index": idx}
        if kind == "text":
            part = {"type": "output_text", "text": o["text"], "annotations": [], "logprobs": []}
            self.emit({"type": "response.output_text.done", **base, "text": o["text"], "logprobs": []})
        else:
            part = {"type": "refusal", "refusal": o["refusal"]}
            self.emit({"type": "response.refusal.done", **base, "refusal": o["refusal"]})
        o["item"]["content"][idx] = part
        self.emit({"type": "response.content_part.done", **base, "part": copy.deepcopy(part)})
        o[kind] = None

    def open_call(self, item_id: str, call_id: str, name: str) -> None:
        self.close()
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "call_id": call_id,
                "name": name, "arguments": ""}
        idx = len(self.items)
        self.items.append(item)
        self.emit({"type": "response.output_item.added", "output_index": idx, "item": copy.deepcopy(item)})
        self.open = {"item": item, "index": idx, "kind": "call"}

    def arguments(self, delta: str) -> None:
        o = self.open
        assert o is not None and o["kind"] == "call"
        o["item"]["arguments"] += delta
        self.emit({"type": "response.function_call_arguments.delta", "item_id": o["item"]["id"],
                   "output_index": o["index"], "delta": delta})

    def close(self, status: str = "completed") -> None:
        o = self.open
        if o is None:
            return
        if o["kind"] == "message":
            for kind in ("text", "refusal"):
                if o[kind] is not None:
                    self._close_part(kind)
        else:
            self.emit({"type": "response.function_call_arguments.done", "item_id": o["item"]["id"],
                       "output_index": o["index"], "name": o["item"]["name"], "arguments": o["item"]["arguments"]})
        o["item"]["status"] = status
        self.emit({"type": "response.output_item.done", "output_index": o["index"], "item": copy.deepcopy(o["item"])})
        self.open = None

    def whole_item(self, item: dict[str, Any]) -> None:
        """An item the gateway relays as it is (reasoning, a built-in tool call): added, then done."""
        self.close()
        idx = len(self.items)
        self.items.append(item)
        self.emit({"type": "response.output_item.added", "output_index": idx,
                   "item": dict(copy.deepcopy(item), status="in_progress") if "status" in item else copy.deepcopy(item)})
        self.emit({"type": "response.output_item.done", "output_index": idx, "item": copy.deepcopy(item)})

    def finish(self, response: dict[str, Any]) -> None:
        """Close the open item and send ``response.completed`` (``response.incomplete`` for a
        cut answer) with ``response``."""
        incomplete = response.get("status") == "incomplete"
        self.close("incomplete" if incomplete else "completed")
        self.emit({"type": "response.incomplete" if incomplete else "response.completed", "response": response})

    def error(self, message: str, code: str | None, type_: str = "server_error") -> None:
        """An ``error`` event (OpenAI's ``ResponseErrorEvent``, with the ``error`` object the
        ``openai`` SDK raises as ``APIError``); nothing follows it."""
        self.emit({"type": "error", "code": code, "message": message, "param": None,
                   "error": {"message": message, "type": type_, "code": code, "param": None}})


def _pieces(text: str, size: int) -> list[str]:
    if size <= 0 or len(text) <= size:
        return [text]
    return [text[i:i + size] for i in range(0, len(text), size)]


def response_events(response: dict[str, Any], *, chunk_size: int = 16) -> list[bytes]:
    """The whole event sequence of a finished ``response`` (message items' text in
    ``chunk_size``-character deltas, function-call arguments likewise; other items announced
    and completed as they are), ending with ``response.completed``/``.incomplete``."""
    em = _Emitter(response)
    em.start()
    for item in response.get("output") or ():
        if not isinstance(item, dict):
            continue
        t = item.get("type")
        if t == "message":
            em.open_message(item.get("id") or new_id("msg"))
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    for p in _pieces(part.get("text") or "", chunk_size):
                        em.text(p, "")
                    if em.open is not None and em.open["text"] is not None:
                        em._close_part("text")
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    for p in _pieces(part.get("refusal") or "", chunk_size):
                        em.refusal(p, "")
            assert em.open is not None
            em.open["item"]["content"] = copy.deepcopy(item.get("content") or [])  # annotations as sent
            em.close(item.get("status") or "completed")
        elif t == "function_call":
            em.open_call(item.get("id") or new_id("fc"), item.get("call_id") or "", item.get("name") or "")
            for p in _pieces(item.get("arguments") or "", chunk_size):
                em.arguments(p)
            em.close(item.get("status") or "completed")
        else:
            em.whole_item(item)
    em.finish(response)
    return em.frames


class EventsToChat:
    """An upstream's Responses stream (SSE bytes, fed as they arrive) as chat-completion chunk
    frames the pipeline's stream modes read: text deltas as ``delta.content``, refusal deltas
    as ``delta.refusal``, each ``function_call`` item as a ``tool_calls`` entry (its
    ``index`` in order, ``id`` = ``call_id``) with its argument deltas, then the last chunk
    with ``finish_reason``, the usage chunk when ``include_usage``, and ``[DONE]``. An ``error``
    event or ``response.failed`` becomes a ``data: {"error": ...}`` frame. ``response``:
    the upstream's response object as last seen (``response.created``, then items as added;
    the final one from ``response.completed``), for :func:`response_from_completion`."""

    def __init__(self, *, include_usage: bool = True, on_response: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.decoder = SSEDecoder()
        self.include_usage = include_usage
        self.response: dict[str, Any] = {}
        self.calls: dict[str, int] = {}   # item id -> tool_calls index
        self.started = False
        self.finished = False
        self.on_response = on_response

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, usage: Any = ...) -> bytes:
        r = self.response
        chunk: dict[str, Any] = {"id": r.get("id") or "", "object": "chat.completion.chunk",
                                 "created": int(r.get("created_at") or 0), "model": r.get("model"),
                                 "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if usage is not ...:
            chunk["usage"] = usage
        return encode_chunk(chunk)

    def feed(self, data: bytes) -> bytes:
        """Chat frames for ``data`` (any split of the upstream's bytes)."""
        return b"".join(self._event(ev.event, ev.data) for ev in self.decoder.feed(data))

    def flush(self) -> bytes:
        return b"".join(self._event(ev.event, ev.data) for ev in self.decoder.flush())

    def _event(self, name: str | None, data: str) -> bytes:
        if self.finished:
            return b""
        try:
            ev = json.loads(data)
        except ValueError:
            return b""
        if not isinstance(ev, dict):
            return b""
        t = ev.get("type") or name
        out = b""
        if t in ("response.created", "response.in_progress", "response.queued"):
            if isinstance(ev.get("response"), dict):
                self.response = copy.deepcopy(ev["response"])
                self.response.setdefault("output", [])
                if self.on_response is not None:
                    self.on_response(self.response)
            if not self.started:
                self.started = True
                out += self._chunk({"role": "assistant", "content": ""})
            return out
        if not self.started:
            self.started = True
            out += self._chunk({"role": "assistant", "content": ""})
        if t == "response.output_item.added" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            self.response.setdefault("output", []).append(copy.deepcopy(item))
            if item.get("type") == "function_call":
                k = len(self.calls)
                self.calls[item.get("id") or f"_{k}"] = k
                out += self._chunk({"tool_calls": [{"index": k, "id": item.get("call_id") or "", "type": "function",
                                                    "function": {"name": item.get("name") or "", "arguments": ""}}]})
                if item.get("arguments"):
                    out += self._chunk({"tool_calls": [{"index": k, "function": {"arguments": item["arguments"]}}]})
        elif t == "response.output_item.done" and isinstance(ev.get("item"), dict):
            output = self.response.setdefault("output", [])
            idx = ev.get("output_index")
            if isinstance(idx, int) and 0 <= idx < len(output):
                output[idx] = copy.deepcopy(ev["item"])  # the finished item (reasoning summary, encrypted content)
        elif t == "response.output_text.delta" and isinstance(ev.get("delta"), str):
            out += self._chunk({"content": ev["delta"]})
        elif t == "response.refusal.delta" and isinstance(ev.get("delta"), str):
            out += self._chunk({"refusal": ev["delta"]})
        elif t == "response.function_call_arguments.delta" and isinstance(ev.get("delta"), str):
            k = self.calls.get(ev.get("item_id") or "")
            if k is not None:
                out += self._chunk({"tool_calls": [{"index": k, "function": {"arguments": ev["delta"]}}]})
        elif t in ("response.completed", "response.incomplete"):
            resp = ev.get("response") if isinstance(ev.get("response"), dict) else self.response
            self.response = copy.deepcopy(resp)
            if self.on_response is not None:
                self.on_response(self.response)
            out += self._chunk({}, _finish_reason(resp, bool(self.calls)), None if self.include_usage else ...)
            if self.include_usage:
                r = self.response
                out += encode_chunk({"id": r.get("id") or "", "object": "chat.completion.chunk",
                                     "created": int(r.get("created_at") or 0), "model": r.get("model"),
                                     "choices": [], "usage": usage_to_chat(r.get("usage"))})
            out += encode_chunk("[DONE]")
            self.finished = True
        elif t in ("response.failed", "error"):
            err = None
            if t == "response.failed" and isinstance(ev.get("response"), dict):
                err = ev["response"].get("error")
            elif isinstance(ev.get("error"), dict):
                err = ev["error"]
            if not isinstance(err, dict):
                err = {"message": ev.get("message") or "the upstream's response failed", "code": ev.get("code")}
            body = {"error": {"message": err.get("message") or "the upstream's response failed",
                              "type": err.get("type") or "upstream_error", "param": err.get("param"),
                              "code": err.get("code")}}
            out += b"data: " + json.dumps(body).encode() + b"\n\n"
            self.finished = True
        return out


class ChatToEvents:
    """The pipeline's chat-completion stream (SSE frames, fed in order) as a Responses event
    stream. ``response_id`` and ``shell``: the id and settings of ``response.created`` (sent
    at once by :meth:`start`); ``finalize(completion, veracity)`` builds the response of
    ``response.completed`` (the caller's :func:`response_from_completion`, with the item ids
    used here). SSE comments (the buffer mode's keep-alives) pass through as they are; the
    report (``veracity`` on a chunk) is held for ``response.completed``; an error frame ends
    the stream with an ``error`` event. ``item_id(kind, key)`` picks item ids (the upstream's
    own in native mode)."""

    def __init__(self, shell: dict[str, Any],
                 finalize: Callable[[dict[str, Any], dict[str, str]], dict[str, Any]],
                 item_id: Callable[[str, str, str], str | None] | None = None,
                 base_items: Callable[[str], list[Any]] | None = None) -> None:
        self.em = _Emitter(shell)
        self.finalize = finalize
        self.item_id = item_id
        self.base_items = base_items
        self.relayed: set[str] = set()   # ids of items relayed whole (reasoning, built-in tool calls)
        self.decoder = SSEDecoder()
        self.chunks: list[dict[str, Any]] = []
        self.calls: dict[int, str] = {}    # tool_calls index -> call id
        self.ids: dict[str, str] = {}      # "message" / call_id -> item id
        self.veracity: Any = None
        self.done = False
        self.chat_id = ""
        self._msg: dict[str, Any] = {"content": None, "refusal": None, "tool_calls": []}
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.created: int | None = None
        self.model: str | None = None

    def start(self) -> bytes:
        self.em.start()
        return b"".join(self.em.take())

    def _pick(self, kind: str, key: str, prefix: str) -> str:
        got = self.item_id(kind, key, self.chat_id) if self.item_id is not None else None
        return got or new_id(prefix)

    def _others(self, items: list[Any], before: str | None) -> None:
        """Relay whole the upstream's items other than messages and function calls (reasoning,
        built-in tool calls) that come before item ``before`` (None: all), once each, so that
        the events' ``output_index`` is the item's index in ``response.completed``."""
        for it in items:
            if not isinstance(it, dict):
                continue
            if before is not None and it.get("id") == before:
                return
            if it.get("type") in ("message", "function_call") or not it.get("id") or it["id"] in self.relayed:
                continue
            self.relayed.add(it["id"])
            self.em.whole_item(it)

    def _open(self, item_id: str) -> None:
        if self.base_items is not None:
            self._others(self.base_items(self.chat_id), item_id)

    def feed(self, blob: bytes) -> bytes:
        """Responses frames for ``blob`` (whole SSE frames from the pipeline)."""
        if self.done:
            return b""
        if blob.startswith(b":"):
            return blob  # keep-alive comments, as they are
        for ev in self.decoder.feed(blob):
            if self.done:
                break
            if ev.data.strip() == "[DONE]":
                self._complete()
                continue
            try:
                chunk = json.loads(ev.data)
            except ValueError:
                continue
            if not isinstance(chunk, dict):
                continue
            if "error" in chunk and "choices" not in chunk:
                err = chunk["error"] if isinstance(chunk["error"], dict) else {"message": str(chunk["error"])}
                self.em.close("incomplete")
                self.em.error(str(err.get("message") or "the stream failed"), err.get("code"),
                              err.get("type") or "server_error")
                self.done = True
                break
            self._chunk(chunk)
        return b"".join(self.em.take())

    def _chunk(self, chunk: dict[str, Any]) -> None:
        if "veracity" in chunk:
            self.veracity = chunk["veracity"]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if chunk.get("id") and not self.chat_id:
            self.chat_id = str(chunk["id"])
        self.created = self.created or chunk.get("created")
        self.model = self.model or chunk.get("model")
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str) and delta["content"]:
                if "message" not in self.ids:
                    self.ids["message"] = self._pick("message", "", "msg")
                if self.em.open is None or self.em.open["kind"] != "message":
                    self._open(self.ids["message"])
                    self.em.open_message(self.ids["message"])
                self.em.text(delta["content"], self.ids["message"])
                self._msg["content"] = (self._msg["content"] or "") + delta["content"]
            if isinstance(delta.get("refusal"), str) and delta["refusal"]:
                if "message" not in self.ids:
                    self.ids["message"] = self._pick("message", "", "msg")
                if self.em.open is None or self.em.open["kind"] != "message":
                    self._open(self.ids["message"])
                self.em.refusal(delta["refusal"], self.ids["message"])
                self._msg["refusal"] = (self._msg["refusal"] or "") + delta["refusal"]
            for tc in delta.get("tool_calls") or ():
                if not isinstance(tc, dict):
                    continue
                k = tc.get("index", 0)
                fn = tc.get("function") or {}
                if k not in self.calls:
                    call_id = tc.get("id") or new_id("call")
                    self.calls[k] = call_id
                    self.ids[call_id] = self._pick("call", call_id, "fc")
                    self._msg["tool_calls"].append({"id": call_id, "type": "function",
                                                    "function": {"name": fn.get("name") or "", "arguments": ""}})
                    self._open(self.ids[call_id])
                    self.em.open_call(self.ids[call_id], call_id, fn.get("name") or "")
                call = next(c for c in self._msg["tool_calls"] if c["id"] == self.calls[k])
                if isinstance(fn.get("arguments"), str) and fn["arguments"]:
                    call["function"]["arguments"] += fn["arguments"]
                    if self.em.open is not None and self.em.open["kind"] == "call" \
                            and self.em.open["item"]["call_id"] == self.calls[k]:
                        self.em.arguments(fn["arguments"])
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    def completion(self) -> dict[str, Any]:
        """The chat completion the frames fed so far add up to."""
        msg = {"role": "assistant", "content": self._msg["content"], "refusal": self._msg["refusal"]}
        if self._msg["tool_calls"]:
            msg["tool_calls"] = self._msg["tool_calls"]
        return {"id": self.chat_id, "object": "chat.completion", "created": self.created or int(time.time()),
                "model": self.model, "usage": self.usage,
                "choices": [{"index": 0, "message": msg, "finish_reason": self.finish_reason or "stop"}]}

    def _complete(self) -> None:
        if self.done:
            return
        self.done = True
        resp = self.finalize(self.completion(), self.ids)
        if self.veracity is not None:
            resp["veracity"] = self.veracity
        self.em.close()
        if self.base_items is not None:
            streamed = {i.get("id") for i in self.em.items}
            self._others([i for i in resp.get("output") or () if isinstance(i, dict) and i.get("id") not in streamed],
                         None)
        self.em.finish(resp)

    def end(self) -> bytes:
        """The end of the pipeline's stream: ``response.completed`` if not sent yet."""
        for _ in self.decoder.flush():
            pass
        self._complete()
        return b"".join(self.em.take())
