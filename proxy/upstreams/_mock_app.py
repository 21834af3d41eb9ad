"""The mock upstream's ASGI application (:mod:`proxy.upstreams.mock`): routes, request
recording, the ``/_mock/*`` introspection routes, and which scripted reply answers a request.

:class:`MockApp` reads a request, records it, selects the rule (:mod:`proxy.upstreams._mock_script`)
and answers with the bodies of :mod:`proxy.upstreams._mock_bodies`, sent whole
(:mod:`proxy.upstreams._mock_send`) or as a stream (:mod:`proxy.upstreams._mock_stream`);
``POST /v1/responses`` goes to :mod:`proxy.upstreams.mock_responses`. Running it on a socket
is :mod:`proxy.upstreams.mock`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import time
from collections import deque
from typing import Any

from proxy.upstreams._mock_bodies import _embeddings, _error_body, _estimate_tokens, _openai_error, _usage, build_completion
from proxy.upstreams._mock_script import _ECHO, Reply, Script, ScriptError, load_script
from proxy.upstreams._mock_send import _compress, _cut, _dumps, _loads, _send, _send_body, _send_json
from proxy.upstreams._mock_stream import _event, _sleep_or_disconnect, send_stream
from proxy.upstreams.mock_structured import SchemaTooLarge, structured_reply
from proxy.wire.sse import DONE, encode_chunk


class MockApp:
    """The ASGI application serving a :class:`Script` (see the module docstring for routes)."""

    def __init__(self, script: Script | dict[str, Any] | str | os.PathLike[str] | None = None) -> None:
        self.set_script(load_script(script))
        self._seq = itertools.count(1)

    def set_script(self, script: Script) -> None:
        """Replace the script; restarts every rule's ``replies`` and keeps no request."""
        self.script = script
        self.recorded: deque[dict[str, Any]] = deque(maxlen=script.max_recorded or None)
        self._counters: dict[int, int] = {}
        models = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "veracity-mock"} for m in script.models]
        self._models_body = json.dumps({"object": "list", "data": models}).encode()

    def reset(self) -> None:
        """Forget recorded requests and restart every rule's ``replies``."""
        self.recorded.clear()
        self._counters.clear()

    # -- selection

    def select(self, path: str, body: dict[str, Any]) -> tuple[str | None, int, Reply | None]:
        """The (rule name, reply number, reply) answering this request; reply ``None``: echo."""
        for i, rule in enumerate(self.script.rules):
            if rule.match.matches(path, body):
                if rule.reply is not None:
                    return rule.name or f"rules.{i}", 0, rule.reply
                k = self._counters.get(i, 0)
                self._counters[i] = k + 1
                k = min(k, len(rule.replies) - 1)  # type: ignore[arg-type]
                return rule.name or f"rules.{i}", k, rule.replies[k]  # type: ignore[index]
        return "default", 0, self.script.default

    # -- ASGI

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        method: str = scope["method"]
        raw = b""
        more = True
        while more:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            raw += msg.get("body", b"")
            more = msg.get("more_body", False)

        if path.startswith("/_mock/"):
            await self._introspect(method, path, raw, send)
            return
        if method == "GET" and path in ("/v1/models", "/models"):
            self._record(scope, path, None)
            await _send(send, 200, self._models_body)
            return
        if method == "GET" and path.startswith("/v1/models/"):
            self._record(scope, path, None)
            mid = path[len("/v1/models/"):]
            if mid in self.script.models:
                await _send_json(send, 200, {"id": mid, "object": "model", "created": 1700000000, "owned_by": "veracity-mock"})
            else:
                await _send_json(send, 404, _openai_error(f"The model '{mid}' does not exist", "invalid_request_error", "model_not_found", "model"))
            return
        if method == "POST" and path == "/v1/responses":  # the Responses API, from the same script
            from proxy.upstreams import mock_responses
            await mock_responses.serve(self, scope, raw, send, receive)
            return
        if method != "POST" or path not in ("/v1/chat/completions", "/v1/embeddings", "/v1/completions"):
            self._record(scope, path, None)
            await _send_json(send, 404, _openai_error(f"Unknown request URL: {method} {path}.", "invalid_request_error", "unknown_url"))
            return
        body, record = await self._json_request(scope, path, raw, send)
        if body is None:
            return
        n_req = next(self._seq)
        rule, k, reply = self.select(path, body)
        if record is not None:
            record["rule"] = rule
            record["reply"] = k
        if reply is None and self.script.structured_output and path == "/v1/chat/completions":
            param = "tools" if body.get("tool_choice") not in (None, "auto", "none") else "response_format"
            sent, reply = await self._structured(body, record, send, param)
            if sent:
                return
        reply = reply or _ECHO
        stream = bool(body.get("stream"))
        watch: asyncio.Future | None = None
        if stream or reply.delay_ms:
            watch = asyncio.ensure_future(receive())
        try:
            if reply.delay_ms:
                if await _sleep_or_disconnect(reply.delay_ms / 1000, watch):
                    _event(record, "client_disconnected", phase="before_headers")
                    return
            if "drop_before_headers" in reply.fault:
                _event(record, "connection_dropped", phase="before_headers")
                await _cut(send)
                return
            if reply.status >= 400:
                await _send_json(send, reply.status, _error_body(reply), reply.headers)
                return
            if path == "/v1/chat/completions":
                completion = build_completion(body, reply, n_req)
                if stream:
                    await send_stream(send, completion, body, reply, watch, record)
                else:
                    await _send_body(send, completion, reply)
            elif path == "/v1/embeddings":
                payload, enc = _compress(_dumps(_embeddings(body)), reply.content_encoding)
                await _send(send, 200, payload, {**reply.headers, **enc})
            else:
                await self._text_completion(send, body, reply, n_req, stream)
        finally:
            if watch is not None and not watch.done():
                watch.cancel()

    async def _json_request(self, scope: dict, path: str, raw: bytes,
                            send: Any) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        """Parse and record a POST's JSON body: ``(body, record)``; ``body`` is None when the
        body is not a JSON object with a string ``model`` and the 400 has been sent."""
        try:
            body = _loads(raw) if raw else None
        except ValueError:
            body = None
        record = self._record(scope, path, body if body is not None else raw.decode("utf-8", "replace"))
        if not isinstance(body, dict):
            await _send_json(send, 400, _openai_error("We could not parse the JSON body of your request.", "invalid_request_error"))
            return None, record
        if not isinstance(body.get("model"), str):
            await _send_json(send, 400, _openai_error("you must provide a model parameter", "invalid_request_error", None, "model"))
            return None, record
        return body, record

    async def _structured(self, chat: dict[str, Any], record: dict[str, Any] | None, send: Any,
                          param: str) -> tuple[bool, Reply | None]:
        """The schema-valid answer to a chat request that asks for structure and no rule
        answered (:mod:`proxy.upstreams.mock_structured`): ``(sent, reply)``. ``sent``: the
        schema was too large and OpenAI's 400 ``invalid_schema`` (naming ``param``) has been
        sent; ``reply`` None: the request asks for no structure (the echo answers)."""
        try:
            fields = structured_reply(chat)
        except SchemaTooLarge as exc:  # OpenAI's answer to a schema it does not support: a 400
            await _send_json(send, 400, _openai_error(f"Invalid schema: {exc}.", "invalid_request_error",
                                                      "invalid_schema", param))
            return True, None
        if fields is None:
            return False, None
        reply = Reply.model_validate(fields)
        if record is not None:
            record["rule"] = "structured_output"
        return False, reply

    def _record(self, scope: dict, path: str, body: Any) -> dict[str, Any] | None:
        if not self.script.record_requests:
            return None
        headers: dict[str, str] = {}
        for k, v in scope["headers"]:
            name = k.decode("latin-1").lower()
            value = v.decode("latin-1")
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        record = {
            "method": scope["method"],
            "path": path,
            "query": scope.get("query_string", b"").decode("latin-1"),
            "headers": headers,
            "body": body,
            "events": [],
            "time": time.time(),
        }
        self.recorded.append(record)
        return record

    async def _introspect(self, method: str, path: str, raw: bytes, send: Any) -> None:
        if path == "/_mock/requests" and method == "GET":
            await _send_json(send, 200, {"object": "list", "data": list(self.recorded)})
        elif path == "/_mock/requests" and method == "DELETE":
            self.reset()
            await _send_json(send, 200, {"deleted": True})
        elif path == "/_mock/script" and method == "PUT":
            try:
                self.set_script(load_script(json.loads(raw or b"{}")))
            except (ScriptError, ValueError) as exc:
                await _send_json(send, 400, _openai_error(str(exc), "invalid_request_error"))
                return
            await _send_json(send, 200, {"ok": True, "rules": len(self.script.rules)})
        elif path == "/_mock/healthz":
            await _send_json(send, 200, {"ok": True})
        else:
            await _send_json(send, 404, _openai_error(f"Unknown mock route: {method} {path}", "invalid_request_error"))

    async def _text_completion(self, send: Any, body: dict, reply: Reply, n_req: int, stream: bool) -> None:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt_text = " ".join(p for p in prompt if isinstance(p, str))
        else:
            prompt_text = prompt if isinstance(prompt, str) else ""
        if reply is not _ECHO and reply.content is not None:
            text = reply.content
        else:
            text = f"Mock completion of: {prompt_text[:200]}"
        base = {"id": f"cmpl-mock{n_req:06d}", "object": "text_completion", "created": int(time.time()), "model": body["model"]}
        if not stream:
            out = dict(base, choices=[{"text": text, "index": 0, "logprobs": None, "finish_reason": "stop"}],
                       usage=_usage(_estimate_tokens(prompt_text), _estimate_tokens(text)))
            await _send_json(send, 200, out, reply.headers)
            return
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/event-stream; charset=utf-8")]})
        size = reply.stream.chunk_size or len(text) or 1
        pieces = [text[i:i + size] for i in range(0, len(text), size)] or [""]
        for i, piece in enumerate(pieces):
            fr = "stop" if i == len(pieces) - 1 else None
            chunk = dict(base, choices=[{"text": piece, "index": 0, "logprobs": None, "finish_reason": fr}])
            await send({"type": "http.response.body", "body": encode_chunk(chunk), "more_body": True})
        await send({"type": "http.response.body", "body": encode_chunk(DONE), "more_body": False})
