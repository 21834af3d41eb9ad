"""The mock upstream's script (:mod:`proxy.upstreams.mock`): its rules as pydantic models, which
request a rule's ``match`` fits, and loading a script from a dict or a YAML/JSON file.

A script is an ordered list of :class:`Rule` (``match`` -> ``reply`` or ``replies``); the first
rule whose :class:`Match` fits a request answers it with a :class:`Reply`. A script that does
not validate raises :class:`ScriptError` naming every wrong field as a dotted path. Nothing here
serves HTTP or writes bytes: the app (:mod:`proxy.upstreams._mock_app`) selects the reply, the
body builders (:mod:`proxy.upstreams._mock_bodies`) turn it into OpenAI's wire objects.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from proxy.wire.messages import message_text


Fault = Literal[
    "drop_mid_stream",
    "drop_before_headers",
    "no_done",
    "no_finish_reason",
    "id_retry_frames",
    "empty_data",
    "error_mid_stream",
]


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


#: The reply when neither a rule nor the script's ``default`` answers: echo the last user text.
_ECHO = Reply()
