"""A scripted, OpenAI-compatible upstream: the model the tests, the benchmarks and the demo talk to.

Like pydantic-ai's ``TestModel``, this is a first-class part of the library, not a test helper:
``veracity mock-upstream --script FILE`` serves it on 127.0.0.1, and :class:`MockUpstream`
runs it from Python (a thread or a subprocess) for tests and demos.

Endpoints (raw ASGI on uvicorn with uvloop + httptools, so its per-request cost stays tiny;
it is also the load benchmark's upstream):

* ``POST /v1/chat/completions`` -- stream and non-stream, answered from the script;
* ``POST /v1/responses`` -- the Responses API (stream and not), answered from the same script
  (:mod:`proxy.upstreams.mock_responses`);
* ``GET /v1/models``, ``GET /v1/models/{id}``;
* ``POST /v1/embeddings`` (deterministic vectors; ``encoding_format: base64`` honoured) and
  ``POST /v1/completions`` (legacy text completions, stream and not) -- canned answers, to
  test the gateway's pass-through;
* introspection: ``GET /_mock/requests`` (every request received: method, path, headers,
  JSON body, matched rule, and events such as ``client_disconnected``), ``DELETE
  /_mock/requests`` (forget them and restart every rule's ``replies``), ``PUT /_mock/script``
  (replace the script), ``GET /_mock/healthz``.

The script (YAML/JSON file, a dict, or a :class:`Script`) is an ordered list of rules; the
first rule whose ``match`` fits the request answers it. See :class:`Match` and :class:`Reply`
for every field, and docs/mock-upstream.md for an example. A script that does not validate
raises :class:`ScriptError` naming the field (``rules.0.reply.finish_reason: ...``).

Wire shapes follow OpenAI's API reference ("The chat completion object", "The chat
completion chunk object", "Create embeddings", "Error codes").
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import fnmatch
import functools
import gzip
import hashlib
import itertools
import json
import logging
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

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
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proxy.upstreams.mock_structured import SchemaTooLarge, structured_reply
from proxy.wire.sse import DONE, encode_chunk, to_chunks
from proxy.wire.json import has_long_digit_run
from proxy.wire.messages import last_user_message_text, message_text

__all__ = [
    "Match",
    "ToolCallSpec",
    "ChoiceSpec",
    "StreamSpec",
    "Reply",
    "Rule",
    "Script",
    "ScriptError",
    "load_script",
    "MockApp",
    "MockUpstream",
    "DEMO_SCRIPT",
    "main",
]

#: The demo script shipped with the package (used by ``veracity serve`` in demo mode).
DEMO_SCRIPT = Path(__file__).resolve().parents[1] / "demo_script.yaml"

Fault = Literal[
    "drop_mid_stream",
    "drop_before_headers",
    "no_done",
    "no_finish_reason",
    "id_retry_frames",
    "empty_data",
    "error_mid_stream",
]


# --------------------------------------------------------------------------- the script


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, populate_by_name=True)


@functools.lru_cache(maxsize=1024)
def _compile(value: str | None) -> re.Pattern[str] | None:
    """Compile a script regex (``re.S``); cached, so matching looks it up instead of compiling."""
    if value is None:
        return None
    try:
        return re.compile(value, re.S)
    except re.error as exc:
        raise ValueError(f"invalid regular expression {value!r}: {exc}") from None


class Match(_Strict):
    """When a rule applies. Every given condition must hold; an empty match always holds.

    * ``model``: glob on the request's ``model`` (``fnmatch``, e.g. ``gpt-4o*``);
      ``model_regex``: regular expression (``re.search``) on it.
    * ``last_user``: regex searched in the text of the last ``user`` message;
      ``any_message``: regex searched in the text of any message (system, developer, user,
      assistant, tool). Text of array content is its ``text`` parts joined by newlines.
      Regexes use Python syntax with ``re.S``; write ``(?i)`` for case-insensitive.
    * ``last_role``: role of the last message (``user``, ``tool``, ``assistant`` ...).
    * ``tool``: a tool of this name is offered in ``tools``.
    * ``tool_choice``: ``auto`` | ``none`` | ``required`` or the forced function's name.
    * ``stream``: true/false to match only streamed / non-streamed requests.
    * ``schema``: glob on the structured-output schema name the request asks for
      (``response_format.json_schema.name``, e.g. ``Plan`` for the verifier model's plans);
      ``"-"`` matches requests without one. This is how a script answers verifier-model calls
      (planner, claims, verdicts) by their structure.
    * ``path``: glob on the request path; rules without it answer only
      ``/v1/chat/completions`` (give ``/v1/embeddings`` or ``/v1/completions`` to script
      errors and delays on those).
    """

    model: str | None = None
    model_regex: str | None = None
    last_user: str | None = None
    any_message: str | None = None
    last_role: str | None = None
    tool: str | None = None
    tool_choice: str | None = None
    stream: bool | None = None
    path: str | None = None
    schema_name: str | None = Field(default=None, alias="schema")

    @field_validator("model_regex", "last_user", "any_message")
    @classmethod
    def _valid_regex(cls, v: str | None) -> str | None:
        _compile(v)
        return v

    def matches(self, path: str, body: dict[str, Any]) -> bool:
        """True when every condition given holds for this request."""
        if self.path is None:
            if path != "/v1/chat/completions":
                return False
        elif not fnmatch.fnmatchcase(path, self.path):
            return False
        model = body.get("model")
        model = model if isinstance(model, str) else ""
        if self.model is not None and not fnmatch.fnmatchcase(model, self.model):
            return False
        if self.model_regex is not None and not _compile(self.model_regex).search(model):
            return False
        if self.stream is not None and bool(body.get("stream")) != self.stream:
            return False
        messages = body.get("messages")
        messages = [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []
        if self.last_user is not None:
            users = [m for m in messages if m.get("role") == "user"]
            if not users or not _compile(self.last_user).search(message_text(users[-1])):
                return False
        if self.any_message is not None:
            rx = _compile(self.any_message)
            if not any(rx.search(message_text(m)) for m in messages):
                return False
        if self.last_role is not None and (not messages or messages[-1].get("role") != self.last_role):
            return False
        if self.tool is not None and self.tool not in _tool_names(body.get("tools")):
            return False
        if self.tool_choice is not None and _tool_choice_name(body.get("tool_choice")) != self.tool_choice:
            return False
        if self.schema_name is not None:
            name = _schema_name(body.get("response_format"))
            if not fnmatch.fnmatchcase(name or "-", self.schema_name):
                return False
        return True


def _schema_name(response_format: Any) -> str | None:
    """``response_format.json_schema.name`` of a request, or None."""
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        js = response_format.get("json_schema")
        if isinstance(js, dict) and isinstance(js.get("name"), str):
            return js["name"]
    return None


class ToolCallSpec(_Strict):
    """One tool call in a reply: ``name``, ``arguments`` (a JSON string, or an object/list that
    is serialised), optional ``id`` (default ``call_<request#>_<i>``), ``extra`` fields added to
    the call object."""

    name: str
    arguments: str | dict[str, Any] | list[Any] = "{}"
    id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ChoiceSpec(_Strict):
    """The content of one choice.

    * ``content``: the assistant text (``null``: none); ``refusal``: refusal text.
    * ``tool_calls``: list of :class:`ToolCallSpec` (several = parallel calls).
    * ``finish_reason``: default ``tool_calls`` when there are tool calls, else ``stop``;
      ``null`` sends none.
    * ``logprobs``: ``auto`` (generated when the request sets ``logprobs: true``), ``null``,
      or the literal ``{"content": [...]}`` object.
    * ``message_extra`` / ``choice_extra``: unknown fields added to the message / choice.
    """

    content: str | None = None
    refusal: str | None = None
    tool_calls: list[ToolCallSpec] | None = None
    finish_reason: str | None = "auto"
    logprobs: Literal["auto"] | dict[str, Any] | None = "auto"
    message_extra: dict[str, Any] = Field(default_factory=dict)
    choice_extra: dict[str, Any] = Field(default_factory=dict)


class StreamSpec(_Strict):
    """Streaming shape: ``chunk_size`` characters per content/arguments delta (0: one delta),
    ``delay_ms`` sleep between frames."""

    chunk_size: int = Field(default=16, ge=0)
    delay_ms: float = Field(default=0.0, ge=0)


class Reply(ChoiceSpec):
    """What a rule answers (fields of :class:`ChoiceSpec` for the first/only choice, plus):

    * ``choices``: per-choice specs for ``n > 1`` (choice *i* uses ``choices[i]``, the last
      one repeating); without it every choice gets the top-level content.
    * ``usage``: ``auto`` (estimated, ~4 characters a token), ``null``, or a literal object.
    * ``id``, ``model`` (default: the request's), ``system_fingerprint`` (default
      ``fp_mock``), ``extra``: unknown top-level fields (repeated on every stream chunk).
    * ``delay_ms``: sleep before the first byte (status line) is sent.
    * ``stream``: :class:`StreamSpec`.
    * ``status``: an HTTP error status (e.g. 429, 500, 503) answered with ``error`` as the body
      (a string becomes OpenAI's ``{"error": {"message", "type", "param", "code"}}``; an
      object is sent as is) and ``headers`` (e.g. ``Retry-After: "2"``).
    * ``headers``: extra response headers (also on 200 answers).
    * ``fault``: one or more of ``drop_mid_stream`` (the connection is cut after
      ``drop_after`` frames, default half of them; non-stream: half the body), ``drop_before_headers``
      (the connection is closed with no response), ``no_done`` (the stream ends without
      ``data: [DONE]``), ``no_finish_reason`` (no choice gets a ``finish_reason``),
      ``id_retry_frames`` (frames with only ``id:``/``retry:`` lines and a ``:`` comment between
      chunks), ``empty_data`` (empty ``data:`` frames between chunks), ``error_mid_stream`` (after
      ``drop_after`` frames an ``event: error`` frame with an OpenAI error object, then the end).
    * ``raw_stream``: for stream requests, the SSE body sent verbatim instead of the generated
      chunks, one string per write (to script wire shapes the chunk builder never makes:
      ``data:`` without a space, CR or CRLF line ends, comments, chunks without ``index``).
    * ``content_encoding``: ``gzip`` or ``deflate``: a non-stream JSON answer (chat,
      embeddings) is sent compressed, with that ``Content-Encoding`` and the compressed
      ``Content-Length``.
    """

    choices: list[ChoiceSpec] | None = None
    usage: Literal["auto"] | dict[str, Any] | None = "auto"
    id: str | None = None
    model: str | None = None
    system_fingerprint: str | None = "fp_mock"
    extra: dict[str, Any] = Field(default_factory=dict)
    delay_ms: float = Field(default=0.0, ge=0)
    stream: StreamSpec = Field(default_factory=StreamSpec)
    status: int = Field(default=200, ge=200, le=599)
    error: str | dict[str, Any] | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    fault: list[Fault] = Field(default_factory=list)
    drop_after: int | None = Field(default=None, ge=0)
    raw_stream: list[str] | None = None
    content_encoding: Literal["gzip", "deflate"] | None = None

    @field_validator("fault", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("headers", mode="before")
    @classmethod
    def _header_values_as_text(cls, v: Any) -> Any:
        return {k: str(x) for k, x in v.items()} if isinstance(v, dict) else v


class Rule(_Strict):
    """``match`` (default: everything) -> ``reply``, or ``replies`` answered in order (per rule;
    the last one repeats), e.g. a wrong answer first and the right one after a correction."""

    name: str | None = None
    match: Match = Field(default_factory=Match)
    reply: Reply | None = None
    replies: list[Reply] | None = None

    @model_validator(mode="after")
    def _one_reply(self) -> Rule:
        if (self.reply is None) == (self.replies is None):
            raise ValueError("give exactly one of 'reply' or 'replies'")
        if self.replies is not None and not self.replies:
            raise ValueError("'replies' must not be empty")
        return self


class Script(_Strict):
    """A mock upstream script.

    * ``rules``: ordered :class:`Rule` list, first match wins; when none matches the
      ``default`` reply answers (without one: content ``"Mock reply to: <last user text>"``).
    * ``models``: ids listed by ``GET /v1/models``.
    * ``record_requests``: keep requests for ``GET /_mock/requests`` (``max_recorded``, oldest
      dropped first); benchmarks turn it off.
    * ``structured_output``: when no rule matches a chat request that asks for structure
      (``response_format`` ``json_schema`` / ``json_object``, a ``tool_choice`` forcing a
      function or ``required``), answer with JSON valid for its schema, or a call of the forced
      tool with valid arguments, instead of the echo (:mod:`proxy.upstreams.mock_structured`); the demo
      script turns it on.
    """

    rules: list[Rule] = Field(default_factory=list)
    default: Reply | None = None
    models: list[str] = Field(default_factory=lambda: ["mock-model", "gpt-4o-mini", "gpt-4o"])
    record_requests: bool = True
    max_recorded: int = Field(default=10_000, ge=0)
    structured_output: bool = False


class ScriptError(ValueError):
    """A script that cannot be read or does not validate; the message names the source and
    every wrong field as a dotted path (``rules.0.reply.status: ...``)."""


def load_script(source: Script | dict[str, Any] | str | os.PathLike[str] | None) -> Script:
    """Load a script from a :class:`Script`, a dict, or a YAML/JSON file path (``None``: empty
    script, i.e. the echo default). Raises :class:`ScriptError`."""
    if source is None:
        return Script()
    if isinstance(source, Script):
        return source
    where = "script"
    if isinstance(source, (str, os.PathLike)):
        where = str(source)
        try:
            text = Path(source).read_text(encoding="utf-8")
            data = yaml.safe_load(text)  # YAML 1.1 is a superset of JSON for our purposes
        except OSError as exc:
            raise ScriptError(f"{where}: cannot read: {exc.strerror or exc}") from None
        except yaml.YAMLError as exc:
            raise ScriptError(f"{where}: not valid YAML/JSON: {exc}") from None
        if data is None:
            data = {}
    else:
        data = source
    if not isinstance(data, dict):
        raise ScriptError(f"{where}: the top level must be a mapping with 'rules'")
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            lines.append(f"  {loc}: {err['msg']}")
        raise ScriptError(f"{where}: invalid mock script:\n" + "\n".join(lines)) from None


# --------------------------------------------------------------------------- request helpers


def _tool_names(tools: Any) -> set[str]:
    names = set()
    if isinstance(tools, list):
        for tool in tools:
            fn = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                names.add(fn["name"])
    return names


def _tool_choice_name(choice: Any) -> str | None:
    if isinstance(choice, str):
        return choice
    if isinstance(choice, dict):
        fn = choice.get("function")
        if isinstance(fn, dict):
            return fn.get("name")
    return None


def _openai_error(message: str, type_: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", None),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", None),
}

_TOKEN_RE = re.compile(r"\s*\S+|\s+")


def _estimate_tokens(text: str) -> int:
    """~4 characters per token (OpenAI's rule of thumb, "What are tokens")."""
    return max(1, (len(text) + 3) // 4) if text else 0


def _logprobs_for(text: str, top: int) -> dict[str, Any]:
    tokens = []
    for i, tok in enumerate(_TOKEN_RE.findall(text)):
        lp = -round(0.01 * (1 + i % 7), 4)
        entry = {"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8"))}
        entry["top_logprobs"] = [
            {"token": tok, "logprob": lp, "bytes": list(tok.encode("utf-8"))}
        ] + [
            {"token": f"alt{k}", "logprob": lp - 2.0 * k, "bytes": list(f"alt{k}".encode())}
            for k in range(1, max(0, top))
        ] if top else []
        tokens.append(entry)
    return {"content": tokens, "refusal": None}


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


# --------------------------------------------------------------------------- the ASGI app


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
        try:
            body = _loads(raw) if raw else None
        except ValueError:
            body = None
        record = self._record(scope, path, body if body is not None else raw.decode("utf-8", "replace"))
        if not isinstance(body, dict):
            await _send_json(send, 400, _openai_error("We could not parse the JSON body of your request.", "invalid_request_error"))
            return
        if not isinstance(body.get("model"), str):
            await _send_json(send, 400, _openai_error("you must provide a model parameter", "invalid_request_error", None, "model"))
            return
        n_req = next(self._seq)
        rule, k, reply = self.select(path, body)
        if record is not None:
            record["rule"] = rule
            record["reply"] = k
        if reply is None and self.script.structured_output and path == "/v1/chat/completions":
            try:
                fields = structured_reply(body)
            except SchemaTooLarge as exc:  # OpenAI's answer to a schema it does not support: a 400
                param = "tools" if body.get("tool_choice") not in (None, "auto", "none") else "response_format"
                await _send_json(send, 400, _openai_error(f"Invalid schema: {exc}.", "invalid_request_error",
                                                          "invalid_schema", param))
                return
            if fields is not None:
                reply = Reply.model_validate(fields)
                if record is not None:
                    record["rule"] = "structured_output"
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
                    await self._stream(send, completion, body, reply, watch, record)
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

    async def _stream(self, send: Any, completion: dict, body: dict, reply: Reply, watch: Any, record: Any) -> None:
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


_ECHO = Reply()


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


def _error_body(reply: Reply) -> dict[str, Any]:
    if isinstance(reply.error, dict):
        return reply.error
    type_, code = _ERROR_TYPES.get(reply.status, ("server_error" if reply.status >= 500 else "invalid_request_error", None))
    message = reply.error or f"Mock upstream error {reply.status}"
    return _openai_error(message, type_, code)


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


def build_completion(body: dict[str, Any], reply: Reply, n_req: int = 0) -> dict[str, Any]:
    """The ``chat.completion`` object a reply gives for a request (also the stream's content).

    ``n`` choices (capped at 128); ``logprobs: auto`` yields per-token logprobs only when the
    request sets ``logprobs: true`` (``top_logprobs`` alternatives when asked); ``usage: auto``
    estimates tokens at ~4 characters each."""
    n = body.get("n")
    n = n if isinstance(n, int) and 1 <= n <= 128 else 1
    want_lp = bool(body.get("logprobs"))
    top = body.get("top_logprobs") if isinstance(body.get("top_logprobs"), int) else 0
    faults = reply.fault
    choices = []
    out_text = ""
    for i in range(n):
        spec: ChoiceSpec = reply.choices[min(i, len(reply.choices) - 1)] if reply.choices else reply
        content = spec.content
        if reply is _ECHO:
            content = f"Mock reply to: {last_user_message_text(body.get('messages'))[:500]}"
        message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": spec.refusal}
        if spec.tool_calls:
            calls = []
            for j, tc in enumerate(spec.tool_calls):
                args = tc.arguments if isinstance(tc.arguments, str) else json.dumps(tc.arguments)
                call = {"id": tc.id or f"call_{n_req}_{i}_{j}", "type": "function", "function": {"name": tc.name, "arguments": args}}
                call.update(tc.extra)
                calls.append(call)
                out_text += tc.name + args
            message["tool_calls"] = calls
        message.update(spec.message_extra)
        if spec.finish_reason == "auto":
            finish = "tool_calls" if spec.tool_calls else "stop"
        else:
            finish = spec.finish_reason
        if "no_finish_reason" in faults:
            finish = None
        if spec.logprobs == "auto":
            lp = _logprobs_for(content or "", top) if want_lp else None
        else:
            lp = spec.logprobs
        choice = {"index": i, "message": message, "logprobs": lp, "finish_reason": finish}
        choice.update(spec.choice_extra)
        choices.append(choice)
        out_text += (content or "") + (spec.refusal or "")
    if reply.usage == "auto":
        prompt_chars = sum(len(message_text(m)) for m in body.get("messages") or () if isinstance(m, dict))
        usage = _usage(max(1, prompt_chars // 4), _estimate_tokens(out_text))
    else:
        usage = reply.usage
    completion: dict[str, Any] = {
        "id": reply.id or f"chatcmpl-mock{n_req:06d}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model or body.get("model"),
        "choices": choices,
        "usage": usage,
        "system_fingerprint": reply.system_fingerprint,
    }
    completion.update(reply.extra)
    return completion


def _embeddings(body: dict[str, Any]) -> dict[str, Any]:
    inputs = body.get("input")
    items = inputs if isinstance(inputs, list) and inputs and not isinstance(inputs[0], int) else [inputs]
    dims = body.get("dimensions") if isinstance(body.get("dimensions"), int) else 8
    dims = max(1, min(dims, 4096))
    data = []
    total = 0
    for i, item in enumerate(items):
        text = json.dumps(item)
        total += _estimate_tokens(text)
        seed = hashlib.sha256(text.encode()).digest()
        vec = [((seed[k % 32] + k) % 255) / 255.0 - 0.5 for k in range(dims)]
        if body.get("encoding_format") == "base64":
            emb: Any = base64.b64encode(struct.pack(f"<{dims}f", *vec)).decode()
        else:
            emb = vec
        data.append({"object": "embedding", "index": i, "embedding": emb})
    return {"object": "list", "data": data, "model": body.get("model"),
            "usage": {"prompt_tokens": total, "total_tokens": total}}


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


# --------------------------------------------------------------------------- serving


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_server(app: MockApp, *, in_thread: bool) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        loop="asyncio" if in_thread else "auto",  # uvloop in its own process; plain in a thread
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
        backlog=2048,
    )
    logging.getLogger("uvicorn.error").addFilter(_DROP_FILTER)  # once: addFilter ignores repeats
    server = uvicorn.Server(config)
    if in_thread:
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    return server


class MockUpstream:
    """Run the mock upstream for tests and demos: ``with MockUpstream(script) as mock: ...``.

    Args:
        script: a :class:`Script`, dict, or YAML/JSON path (``None``: echo everything).
        host: interface to bind (loopback by default); the port is chosen by the OS.
        mode: ``"thread"`` (uvicorn in a daemon thread of this process; starts in ~10 ms) or
            ``"subprocess"`` (``python -m proxy.upstreams.mock``; its own GIL and uvloop, as
            the benchmark wants).
        startup_timeout: seconds to wait for the server; ``RuntimeError`` past it.

    Attributes: ``url`` (``http://127.0.0.1:PORT``), ``base_url`` (``url + "/v1"``, what an
    ``openai`` client takes). ``requests()`` returns the recorded requests, ``reset()``
    forgets them and restarts every rule's ``replies``, ``set_script()`` swaps the script.
    Stopping is clean: the thread is joined / the process terminated and reaped.
    """

    def __init__(self, script: Script | dict[str, Any] | str | os.PathLike[str] | None = None, *,
                 host: str = "127.0.0.1", mode: Literal["thread", "subprocess"] = "thread",
                 startup_timeout: float = 20.0) -> None:
        self._script = load_script(script)  # validate early, in the caller's process
        self.host = host
        self.mode = mode
        self.startup_timeout = startup_timeout
        self.url = ""
        self.app: MockApp | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._tmp: str | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ending in ``/v1``."""
        return self.url + "/v1"

    def start(self) -> MockUpstream:
        """Start serving; returns ``self``."""
        if self.mode == "thread":
            self._start_thread()
        elif self.mode == "subprocess":
            self._start_subprocess()
        else:
            raise ValueError(f"mode must be 'thread' or 'subprocess', not {self.mode!r}")
        return self

    def _start_thread(self) -> None:
        self.app = MockApp(self._script)
        sock = _bind(self.host, 0)
        self.url = _url(sock)
        self._server = _uvicorn_server(self.app, in_thread=True)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="veracity-mock-upstream", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("mock upstream thread did not start")
            time.sleep(0.005)

    def _start_subprocess(self) -> None:
        fd, self._tmp = tempfile.mkstemp(prefix="veracity-mock-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(self._script.model_dump(mode="json", by_alias=True), fh)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.upstreams.mock", "--script", self._tmp, "--host", self.host, "--port", "0"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(self.startup_timeout)
        first = line[0].strip() if line else ""
        if not first.startswith("listening "):
            self.stop()
            raise RuntimeError(f"mock upstream subprocess did not start (first line: {first!r})")
        self.url = first.split(" ", 1)[1]

    def stop(self) -> None:
        """Stop the server and release everything (idempotent)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = None
            self._thread = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(5)
            if self._proc.stdout:
                self._proc.stdout.close()
            self._proc = None
        if self._tmp:
            Path(self._tmp).unlink(missing_ok=True)
            self._tmp = None

    def __enter__(self) -> MockUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- introspection (over HTTP, so both modes behave alike)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        with httpx.Client(trust_env=False, timeout=10) as client:
            resp = client.request(method, self.url + path, json=body)
        if resp.status_code >= 400:
            raise ValueError(resp.json().get("error", {}).get("message", resp.text))
        return resp.json()

    def requests(self) -> list[dict[str, Any]]:
        """Recorded requests, oldest first: ``method``, ``path``, ``query``, ``headers``
        (lower-case names), ``body`` (parsed JSON), ``rule`` (name or ``rules.N`` or
        ``default``), ``reply`` (index in ``replies``), ``events`` (e.g. ``{"event":
        "client_disconnected", "phase": "mid_stream", "frames_sent": 3}``)."""
        return self._call("GET", "/_mock/requests")["data"]

    def reset(self) -> None:
        """Forget recorded requests and restart every rule's ``replies``."""
        self._call("DELETE", "/_mock/requests")

    def set_script(self, script: Script | dict[str, Any] | str | os.PathLike[str]) -> None:
        """Replace the running server's script (validated here first; raises ScriptError)."""
        self._call("PUT", "/_mock/script", load_script(script).model_dump(mode="json", by_alias=True))


def main(argv: Sequence[str] | None = None) -> int:
    """``veracity mock-upstream --script FILE [--host 127.0.0.1] [--port N] [--no-record]``.

    Prints ``listening http://HOST:PORT`` as its first stdout line once the socket is bound
    (``--port 0`` lets the OS choose), then serves until SIGINT/SIGTERM. Without ``--script``
    the shipped demo script answers. Exit status 2 on a bad script (message names the field)."""
    parser = argparse.ArgumentParser(prog="veracity mock-upstream", description="Scripted OpenAI-compatible upstream.")
    parser.add_argument("--script", help="YAML/JSON script (default: the demo script)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001, help="0: any free port")
    parser.add_argument("--no-record", action="store_true", help="do not keep requests (benchmarks)")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script or DEMO_SCRIPT)
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.no_record:
        script = script.model_copy(update={"record_requests": False})
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"listening {_url(sock)}", flush=True)
    server = _uvicorn_server(MockApp(script), in_thread=False)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
