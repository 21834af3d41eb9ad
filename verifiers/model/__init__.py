"""The verifier-model protocol: how a check asks a model to plan or judge, without HTTP.

docs/design.md "The verifier model": checks that need a model (the AMTFV planner, claim splitting,
search queries, verdicts, citation relevance) receive a :class:`ChatModel` -- messages and an
optional JSON schema in, the parsed message and usage out. ``proxy/`` binds one to the
policy's ``verification.model`` on a configured upstream (charging the request budget,
counting metrics, recording the audit trail); tests and demos use :class:`ScriptedModel`,
which lives here next to the protocol (the role pydantic-ai's ``TestModel`` plays).

Structured output (docs/verifier-model.md, "Structured output"): a JSON schema for every
answer that is parsed, one repair attempt, then ``error`` (:func:`ask_json`). Whatever a
verifier model says is evidence to weigh, never code to run and never the value a claim is
compared against.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ValidationError

__all__ = ["ChatModel", "ModelReply", "ModelUnavailable", "ModelError", "ModelCall", "ask_json",
           "JsonAnswer", "ScriptedModel", "json_schema_of", "extract_json"]

M = TypeVar("M", bound=BaseModel)


class ModelUnavailable(Exception):
    """The verifier model cannot be asked: the request budget (calls, tokens, deadline) is
    spent, or no model is configured. Steps that needed it are ``unknown``, not ``error``.
    ``reason``: ``budget:extra_calls`` | ``budget:extra_tokens`` | ``deadline`` | ``no_model``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ModelError(Exception):
    """The verifier model was asked and failed (transport error, HTTP error, no text).
    Steps that needed it are ``error``."""


@dataclass(slots=True)
class ModelReply:
    """One answer of the verifier model.

    ``content``: the assistant message text (may be empty). ``usage``: OpenAI ``usage``
    (``prompt_tokens``, ``completion_tokens``); zeros when the server sent none.
    ``structured``: True when the server was asked with ``response_format: json_schema``.
    """

    content: str
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})
    structured: bool = False


@dataclass(slots=True)
class ModelCall:
    """The record of one verifier-model call (report ``verifier_model.calls`` and the audit
    trail): ``purpose`` (``plan``, ``claims``, ``queries``, ``verdict``, ``relevance``,
    ``repair``...), ``prompt_chars``, ``tokens`` (prompt + completion), ``ms`` wall time,
    ``outcome`` (``ok`` | ``invalid`` | ``error`` | ``unavailable``)."""

    purpose: str
    prompt_chars: int
    tokens: int
    ms: float
    outcome: str

    def to_dict(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "prompt_chars": self.prompt_chars, "tokens": self.tokens,
                "ms": round(self.ms, 1), "outcome": self.outcome}


@runtime_checkable
class ChatModel(Protocol):
    """A verifier model.

    ``await chat(messages, schema=..., schema_name=..., purpose=...) -> ModelReply``:
    ``messages`` are OpenAI chat messages (``role``/``content`` strings); ``schema`` is a
    JSON schema the answer must follow (the implementation uses ``response_format:
    {"type": "json_schema"}`` where the server accepts it, else asks for plain JSON);
    ``purpose`` labels the call in metrics and the audit trail.

    Raises :class:`ModelUnavailable` (budget/deadline/no model: nothing was sent) or
    :class:`ModelError` (the call failed). ``calls`` lists every call made so far.
    """

    calls: list[ModelCall]

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, schema: Mapping[str, Any] | None = None,
                   schema_name: str = "answer", purpose: str = "judge",
                   max_tokens: int | None = None) -> ModelReply: ...


def json_schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a pydantic model, as sent in ``response_format.json_schema.schema``.
    Built once per model class (pydantic's generation took ~3 ms for the planner's ``Plan``, the
    largest part of a planner call's own overhead); a shallow copy is returned, so treat nested
    values as read-only."""
    return dict(_schema_cached(model))


@functools.lru_cache(maxsize=256)
def _schema_cached(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


def extract_json(text: str) -> Any:
    """The JSON value in a model's text: the whole text, else the first fenced block, else the
    span from the first ``{`` to the last ``}``. Raises ValueError when none parses.
    (Models asked for plain JSON often wrap it in a fence or a sentence.)"""
    s = text.strip()
    candidates = [s]
    m = _FENCE.search(s)
    if m:
        candidates.append(m.group(1).strip())
    i, j = s.find("{"), s.rfind("}")
    if 0 <= i < j:
        candidates.append(s[i:j + 1])
    for c in candidates:
        try:
            return json.loads(c)
        except (ValueError, RecursionError):
            continue
    raise ValueError("no JSON object in the model's answer")


@dataclass(slots=True)
class JsonAnswer(Generic[M]):
    """What :func:`ask_json` returns: ``value`` (the validated model, or None), ``error``
    (why there is none: ``unavailable:<reason>``, ``model_error: ...``, ``invalid: ...``),
    ``repaired`` (the first answer was invalid and the repair attempt fixed it)."""

    value: M | None
    error: str | None = None
    repaired: bool = False

    @property
    def unavailable(self) -> bool:
        return bool(self.error and self.error.startswith("unavailable"))


async def ask_json(model: ChatModel, messages: Sequence[Mapping[str, Any]], answer_type: type[M], *,
                   purpose: str, max_tokens: int | None = None) -> JsonAnswer[M]:
    """Ask ``model`` for an answer of ``answer_type`` (a pydantic model), with one repair.

    The schema of ``answer_type`` goes with the request. The answer is parsed
    (:func:`extract_json`) and validated; when that fails, the model gets one repair turn
    quoting the validation error (docs/verifier-model.md, "Structured output": one repair turn,
    then ``error``).
    Never raises: failures come back in :attr:`JsonAnswer.error`.
    """
    schema = json_schema_of(answer_type)
    name = answer_type.__name__
    msgs = [dict(m) for m in messages]
    err = ""
    for attempt in range(2):
        try:
            reply = await model.chat(msgs, schema=schema, schema_name=name,
                                     purpose=purpose if attempt == 0 else f"{purpose}_repair",
                                     max_tokens=max_tokens)
        except ModelUnavailable as exc:
            return JsonAnswer(None, f"unavailable:{exc.reason}")
        except ModelError as exc:
            return JsonAnswer(None, f"model_error: {exc}"[:300])
        except Exception as exc:  # noqa: BLE001 - a broken ChatModel is an error answer, never a raise
            return JsonAnswer(None, f"model_error: {type(exc).__name__}: {exc}"[:300])
        try:
            content = reply.content if isinstance(reply.content, str) else ""
            value = answer_type.model_validate(extract_json(content))
            return JsonAnswer(value, repaired=attempt == 1)
        except (ValueError, ValidationError, RecursionError, TypeError) as exc:
            err = _short_error(exc)
            if attempt == 0:
                msgs = msgs + [{"role": "assistant", "content": content[:4000]},
                               {"role": "user", "content": "Your answer was not valid: " + err +
                                "\nYou must answer again with only one JSON object that follows the schema."}]
    return JsonAnswer(None, f"invalid: {err}"[:300])


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(str(x) for x in e['loc']) or '(root)'}: {e['msg']}" for e in exc.errors()[:5]]
        return "; ".join(parts)
    return str(exc)[:300]


# ------------------------------------------------------------------------------ scripted model

#: A responder answers one call: ``(messages, schema_name, purpose) -> text | dict | Exception``
#: (a dict is sent as JSON; an exception instance is raised).
Responder = Callable[[list[dict[str, Any]], str, str], Any]


class ScriptedModel:
    """A :class:`ChatModel` that answers from a script, for tests, demos and benchmarks.

    ``rules``: ordered ``(when, answer)`` pairs. ``when`` is a regular expression searched in the
    concatenated message text, or a callable ``(messages, schema_name, purpose) -> bool``;
    ``answer`` is a string, a dict/list (sent as JSON), an exception instance (raised), a
    callable responder, or ``ScriptedModel.seq(a, b, ...)``: answers given in turn (the last repeats). The first rule
    that matches answers; with none, ``default`` (a responder or value; default: raise
    :class:`ModelError`). ``max_calls`` simulates a budget (:class:`ModelUnavailable` past it);
    ``delay_s`` sleeps before each answer (a slow model). Every call is recorded in ``calls``
    and its messages in ``seen``.
    """

    def __init__(self, rules: Sequence[tuple[Any, Any]] = (), *, default: Any = None,
                 max_calls: int | None = None, delay_s: float = 0.0,
                 tokens_per_char: float = 0.25) -> None:
        self.rules = [(w, a) for w, a in rules]
        self._turn = [0] * len(self.rules)
        self.default = default
        self.max_calls = max_calls
        self.delay_s = delay_s
        self.tokens_per_char = tokens_per_char
        self.calls: list[ModelCall] = []
        self.seen: list[dict[str, Any]] = []

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, schema: Mapping[str, Any] | None = None,
                   schema_name: str = "answer", purpose: str = "judge",
                   max_tokens: int | None = None) -> ModelReply:
        import asyncio

        msgs = [dict(m) for m in messages]
        prompt_chars = sum(len(str(m.get("content") or "")) for m in msgs)
        if self.max_calls is not None and len(self.calls) >= self.max_calls:
            self.calls.append(ModelCall(purpose, prompt_chars, 0, 0.0, "unavailable"))
            raise ModelUnavailable("budget:extra_calls")
        t0 = time.perf_counter()
        self.seen.append({"messages": msgs, "schema_name": schema_name, "purpose": purpose})
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        answer = self._answer(msgs, schema_name, purpose)
        if callable(answer) and not isinstance(answer, BaseException):
            answer = answer(msgs, schema_name, purpose)
        if isinstance(answer, BaseException):
            self.calls.append(ModelCall(purpose, prompt_chars, 0, (time.perf_counter() - t0) * 1000, "error"))
            raise answer
        text = answer if isinstance(answer, str) else json.dumps(answer)
        usage = {"prompt_tokens": int(prompt_chars * self.tokens_per_char),
                 "completion_tokens": int(len(text) * self.tokens_per_char)}
        self.calls.append(ModelCall(purpose, prompt_chars, sum(usage.values()),
                                    (time.perf_counter() - t0) * 1000, "ok"))
        return ModelReply(text, usage, structured=schema is not None)

    def _answer(self, msgs: list[dict[str, Any]], schema_name: str, purpose: str) -> Any:
        text = "\n".join(str(m.get("content") or "") for m in msgs)
        for i, (when, answer) in enumerate(self.rules):
            hit = when(msgs, schema_name, purpose) if callable(when) else re.search(when, text, re.S)
            if hit:
                if isinstance(answer, _Seq):
                    k = min(self._turn[i], len(answer.items) - 1)
                    self._turn[i] += 1
                    return answer.items[k]
                return answer
        if self.default is None:
            return ModelError("scripted model: no rule matched")
        return self.default

    @staticmethod
    def seq(*answers: Any) -> "_Seq":
        """Answers given in turn by one rule (the last repeats): ``ScriptedModel.seq(a, b)``."""
        return _Seq(list(answers))


@dataclass(slots=True)
class _Seq:
    items: list[Any]

