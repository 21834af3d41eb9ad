"""The verifier model bound to one request: :class:`verifiers.model.ChatModel` over an upstream.

The policy's ``verification.model`` names the model that plans and judges (default: the
client's model on the client's upstream). :class:`GatewayChatModel` sends each call as a
non-streaming ``chat.completion`` through the gateway's own upstream clients and

* charges the request budget before the call (one extra call) and after it (its tokens), so a
  planner or fact checker can never spend more than ``budgets.request`` allows; over budget or
  past the deadline it raises :class:`~verifiers.model.ModelUnavailable` without sending;
* asks for ``response_format: {"type": "json_schema", ...}`` (OpenAI "Structured Outputs")
  and falls back to plain JSON once the upstream refuses that parameter (HTTP 400/422 that
  names ``response_format``/``json_schema``), remembered per upstream and model;
* counts ``veracity_verifier_model_calls_total{purpose,outcome}`` and
  ``veracity_verifier_model_tokens_total{purpose}`` and keeps a :class:`~verifiers.model.ModelCall`
  record per call (prompt size, tokens, latency) for the report and the audit trail.

:class:`OpenAIChatModel` is the same thing over plain httpx for tools outside the gateway
(``bench/*.py --model URL``): any OpenAI-compatible endpoint, no budget.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from prometheus_client import Counter

from proxy.stores.budget import RequestBudget, is_token_count, usage_tokens
from proxy.wire.errors import UpstreamError
from proxy.wire.messages import model_reply_text
from verifiers.model import ModelCall, ModelError, ModelReply, ModelUnavailable

__all__ = ["GatewayChatModel", "OpenAIChatModel", "request_body", "MODEL_CALLS", "MODEL_TOKENS", "PURPOSES"]

#: ``purpose`` label values (bounded; anything else is counted as ``other``).
PURPOSES = frozenset({"plan", "plan_repair", "claims", "claims_repair", "queries", "queries_repair",
                      "verdict", "verdict_repair", "relevance", "relevance_repair", "judge", "judge_repair"})

MODEL_CALLS = Counter("veracity_verifier_model_calls_total",
                      "Calls to the verifier model by purpose (plan, claims, queries, verdict, relevance) and "
                      "outcome (ok|error|unavailable).", ["purpose", "outcome"])
MODEL_TOKENS = Counter("veracity_verifier_model_tokens_total",
                       "Tokens (prompt + completion) spent on verifier-model calls by purpose.", ["purpose"])

#: Plain-JSON fallback instruction (must-wording, as in the planner prompt, verifiers/planner/_prompt.py).
_PLAIN_JSON = ("You must answer with one JSON object only, no prose and no code fence. "
               "It must follow this JSON schema:\n")

Complete = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

#: (upstream name, model) pairs whose server refused ``response_format: json_schema``.
_NO_JSON_SCHEMA: set[tuple[str, str]] = set()


def _label(purpose: str) -> str:
    return purpose if purpose in PURPOSES else "other"


def request_body(model: str, messages: Sequence[Mapping[str, Any]], schema: Mapping[str, Any] | None,
                 schema_name: str, *, structured: bool, max_tokens: int | None,
                 temperature: float | None = 0.0) -> dict[str, Any]:
    """The ``chat.completion`` request of one verifier-model call.

    ``structured``: send ``response_format: {"type": "json_schema", "json_schema": {"name",
    "schema", "strict": false}}`` (OpenAI API reference, "Structured Outputs"); otherwise the
    schema is appended to the first system message (or a new one) as a plain-JSON instruction.
    ``strict`` stays false: strict mode rejects schemas with optional fields and defaults,
    which pydantic models have.
    """
    msgs = [dict(m) for m in messages]
    body: dict[str, Any] = {"model": model, "messages": msgs, "stream": False}
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens:
        body["max_tokens"] = max_tokens
    if schema is not None:
        if structured:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": schema_name[:64] or "answer",
                                                       "schema": dict(schema), "strict": False}}
        else:
            import json

            note = _PLAIN_JSON + json.dumps(schema, separators=(",", ":"))
            if msgs and msgs[0].get("role") == "system":
                msgs[0]["content"] = f"{msgs[0].get('content') or ''}\n\n{note}"
            else:
                msgs.insert(0, {"role": "system", "content": note})
    return body


def _refuses_response_format(exc: UpstreamError) -> bool:
    """True when the upstream's error names the structured-output request: a 400/422, or a
    500 whose body names it (llama-cpp-python's server answers ``response_format:
    json_schema`` with HTTP 500 and a validation error naming ``response_format``, measured
    with 0.3.x). Any other failure is a real error."""
    if exc.status not in (400, 422, 500):
        return False
    text = (exc.body or b"").decode("utf-8", "replace").lower() + " " + exc.message.lower()
    return "response_format" in text or "json_schema" in text or "structured output" in text


def _usage(completion: Any) -> dict[str, int]:
    u = completion.get("usage") if isinstance(completion, dict) else None
    u = u if isinstance(u, dict) else {}
    p, c = u.get("prompt_tokens"), u.get("completion_tokens")
    return {"prompt_tokens": p if is_token_count(p) else 0, "completion_tokens": c if is_token_count(c) else 0}


class GatewayChatModel:
    """A :class:`verifiers.model.ChatModel` bound to one request.

    Args:
        complete: ``(chat request body) -> chat.completion dict`` on the chosen upstream
            (raises :class:`proxy.wire.errors.UpstreamError`).
        model: the model name sent upstream (policy ``verification.model`` or the client's).
        budget: the request budget; each call is charged before it is sent (one call) and
            after (its tokens); ``None`` = unlimited.
        upstream: the upstream's name (remembers a refused ``response_format`` per upstream).
        max_tokens: per-call completion cap (policy ``verification.max_tokens``).
        unavailable: when set, every call raises ModelUnavailable with this reason (e.g. the
            named model has no upstream the gateway may use).

    ``calls``: one :class:`~verifiers.model.ModelCall` per call; ``tokens``: their total.
    """

    def __init__(self, complete: Complete | None, model: str, budget: RequestBudget | None, *,
                 upstream: str = "", max_tokens: int | None = 1024, unavailable: str | None = None,
                 on_usage: Callable[[dict[str, int]], None] | None = None) -> None:
        self._complete = complete
        self.model = model
        self.budget = budget
        self.upstream = upstream
        self.max_tokens = max_tokens
        self.unavailable = unavailable
        self.on_usage = on_usage
        self.calls: list[ModelCall] = []
        self.tokens = 0

    def _record(self, purpose: str, chars: int, tokens: int, t0: float, outcome: str) -> None:
        self.calls.append(ModelCall(purpose, chars, tokens, (time.perf_counter() - t0) * 1000.0, outcome))
        MODEL_CALLS.labels(_label(purpose), outcome).inc()
        if tokens:
            MODEL_TOKENS.labels(_label(purpose)).inc(tokens)

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, schema: Mapping[str, Any] | None = None,
                   schema_name: str = "answer", purpose: str = "judge",
                   max_tokens: int | None = None) -> ModelReply:
        """One call; see :class:`verifiers.model.ChatModel`. Raises ModelUnavailable (nothing
        sent: no model, budget or deadline spent) or ModelError (the call failed)."""
        t0 = time.perf_counter()
        chars = sum(len(str(m.get("content") or "")) for m in messages)
        if self.unavailable or self._complete is None:
            self._record(purpose, chars, 0, t0, "unavailable")
            raise ModelUnavailable(self.unavailable or "no_model")
        b = self.budget
        if b is not None:
            if not b.allow_call():
                self._record(purpose, chars, 0, t0, "unavailable")
                raise ModelUnavailable("deadline" if b.exhausted == "deadline" else f"budget:{b.exhausted}")
            b.charge(0)  # the call is charged before it is made (concurrent steps share the budget)
        key = (self.upstream, self.model)
        structured = schema is not None and key not in _NO_JSON_SCHEMA
        body = request_body(self.model, messages, schema, schema_name, structured=structured,
                            max_tokens=max_tokens or self.max_tokens)
        try:
            try:
                out = await self._send(body)
            except UpstreamError as exc:
                if not (structured and _refuses_response_format(exc)):
                    raise
                _NO_JSON_SCHEMA.add(key)  # this server has no structured outputs: plain JSON from now on
                structured = False
                body = request_body(self.model, messages, schema, schema_name, structured=False,
                                    max_tokens=max_tokens or self.max_tokens)
                out = await self._send(body)
        except ModelUnavailable:
            self._record(purpose, chars, 0, t0, "unavailable")
            raise
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # upstream HTTP error, transport failure
            self._record(purpose, chars, 0, t0, "error")
            what = f"{exc.status} {exc.reason}" if isinstance(exc, UpstreamError) else type(exc).__name__
            raise ModelError(f"verifier model call failed: {what}") from None
        usage = _usage(out)
        tokens = usage_tokens(out)
        self.tokens += tokens
        if b is not None:
            b.charge(tokens, calls=0)
        if self.on_usage is not None:
            self.on_usage(usage)
        text = model_reply_text(out)
        if text is None:
            self._record(purpose, chars, tokens, t0, "error")
            raise ModelError("verifier model answered without text")
        self._record(purpose, chars, tokens, t0, "ok")
        return ModelReply(text, usage, structured=structured)

    async def _send(self, body: dict[str, Any]) -> dict[str, Any]:
        assert self._complete is not None
        if self.budget is None:
            return await self._complete(body)
        left = self.budget.remaining_s()
        if left <= 0:
            raise ModelUnavailable("deadline")
        try:
            return await asyncio.wait_for(self._complete(body), left)
        except asyncio.TimeoutError:
            raise ModelUnavailable("deadline") from None

    def summary(self) -> dict[str, Any]:
        """``{"model", "calls": [...], "tokens"}`` for the report's ``verifier_model`` entry."""
        return {"model": self.model, "tokens": self.tokens, "calls": [c.to_dict() for c in self.calls]}


class OpenAIChatModel(GatewayChatModel):
    """A :class:`verifiers.model.ChatModel` on any OpenAI-compatible endpoint over httpx, for
    benchmarks and scripts (``--model URL``): ``base_url`` like ``http://127.0.0.1:8000/v1``,
    ``model`` the model name, ``api_key`` sent as a Bearer token. No budget; ``calls`` and
    ``tokens`` count what was spent. Close with :meth:`aclose`."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout_s: float = 120.0,
                 max_tokens: int | None = 1024) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s,
                                         trust_env=False)
        super().__init__(self._post, model, None, upstream=base_url, max_tokens=max_tokens)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        import httpx

        try:
            r = await self._client.post("/chat/completions", json=body)
        except httpx.TimeoutException:
            raise UpstreamError(504, "verifier model timed out", reason="timeout") from None
        except httpx.HTTPError as exc:
            raise UpstreamError(502, f"verifier model unreachable: {type(exc).__name__}", reason="connect") from None
        if r.status_code >= 400:
            raise UpstreamError(r.status_code, f"verifier model answered {r.status_code}",
                                reason=f"http_{r.status_code}", body=r.content[:2000])
        try:
            return r.json()
        except ValueError:
            raise UpstreamError(502, "verifier model answered non-JSON", reason="bad_response") from None

    async def aclose(self) -> None:
        await self._client.aclose()
