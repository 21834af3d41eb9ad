"""The JSON objects a mock upstream reply becomes (:mod:`proxy.upstreams.mock`): the
``chat.completion`` object (choices, tool calls, generated logprobs, estimated usage),
embeddings, and OpenAI's error object for a scripted error status.

Pure functions of the request body and the :class:`~proxy.upstreams._mock_script.Reply`; how
they are sent (whole, compressed, or framed as a stream) is :mod:`proxy.upstreams._mock_send`
and :mod:`proxy.upstreams._mock_stream`. Shapes follow OpenAI's API reference ("The chat
completion object", "Create embeddings", "Error codes").
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import struct
import time
from typing import Any

from proxy.upstreams._mock_script import _ECHO, ChoiceSpec, Reply
from proxy.wire.messages import last_user_message_text, message_text


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


def _error_body(reply: Reply) -> dict[str, Any]:
    if isinstance(reply.error, dict):
        return reply.error
    type_, code = _ERROR_TYPES.get(reply.status, ("server_error" if reply.status >= 500 else "invalid_request_error", None))
    message = reply.error or f"Mock upstream error {reply.status}"
    return _openai_error(message, type_, code)


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
