"""The OpenAI Responses API wire format (``POST /v1/responses``) and its translation to and from
chat completions, so that one verification pipeline (:mod:`proxy.pipeline.sequence`, which
speaks chat completions) serves both APIs.

Shapes follow OpenAI's API reference ("Responses": create, the response object) as typed in
``openai-python`` (``openai/types/responses/``): a ``response`` object has ``id``,
``object: "response"``, ``created_at``, ``status``, ``model``, ``output`` (items: ``message``
with ``output_text``/``refusal`` parts, ``function_call``, ``reasoning``, built-in tool calls),
``usage`` (``input_tokens``, ``output_tokens``, ``total_tokens`` and their ``*_details``) and
the request's settings echoed.

What lives here (pure functions and small state machines, no I/O):

* :func:`to_chat` -- a Responses request as a chat-completion request (:class:`Translation`,
  which remembers which chat message came from which input items);
* :func:`native_request` -- a chat request the pipeline built (first call, sentinel turn,
  correction round) back as a Responses request: the client's own items and fields verbatim,
  the gateway's additions (evidence, ``verify_result``) as new items and tools;
* :func:`completion_from_response` / :func:`response_from_completion` -- the answer both ways.

Streams, both ways, are :mod:`proxy.wire.responses_stream`.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RESPONSES_ROUTE", "RequestError", "Translation", "validate", "to_chat", "native_request",
           "completion_from_response", "response_from_completion", "response_text", "new_id",
           "usage_to_chat", "usage_from_chat", "tool_to_chat", "tool_from_chat"]

RESPONSES_ROUTE = "/v1/responses"

#: Responses request fields with the same name and meaning on chat completions (translated mode)
_SAME_ON_CHAT = ("temperature", "top_p", "user", "store", "metadata", "service_tier", "parallel_tool_calls",
                 "prompt_cache_key", "safety_identifier", "seed", "stream", "veracity")
#: Responses request fields the translated mode maps (below) or that only the Responses API knows
_MAPPED = frozenset({"model", "input", "instructions", "tools", "tool_choice", "text", "max_output_tokens",
                     "reasoning", "top_logprobs", "stream_options", "include", "truncation", "background",
                     "previous_response_id", "conversation", "prompt", "max_tool_calls"})


class RequestError(ValueError):
    """A Responses request the gateway cannot read: ``message`` and the offending ``param``
    (OpenAI's 400 ``invalid_request_error``)."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param = param
        self.code = code


def new_id(prefix: str) -> str:
    """An id shaped like OpenAI's (``resp_``, ``msg_``, ``fc_`` + 48 hex digits)."""
    return f"{prefix}_{os.urandom(24).hex()}"


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


# ---------------------------------------------------------------------------- requests


def validate(req: dict[str, Any]) -> None:
    """Reject what no upstream could answer, as OpenAI does (400, ``param`` named): ``input``
    neither a string nor a list of objects, ``instructions`` not a string, ``tools`` not a list
    of objects. Everything else is the upstream's to judge (forwarded as sent)."""
    inp = req.get("input")
    if inp is not None and not isinstance(inp, (str, list)):
        raise RequestError(f"Invalid type for 'input': expected a string or an array of input items, "
                           f"but got {_json_type(inp)} instead.", "input", "invalid_type")
    if isinstance(inp, list):
        for i, item in enumerate(inp):
            if not isinstance(item, dict):
                raise RequestError(f"Invalid type for 'input[{i}]': expected an object, but got "
                                   f"{_json_type(item)} instead.", f"input[{i}]", "invalid_type")
    if req.get("instructions") is not None and not isinstance(req["instructions"], (str, list)):
        raise RequestError("Invalid type for 'instructions': expected a string.", "instructions", "invalid_type")
    tools = req.get("tools")
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise RequestError("Invalid type for 'tools': expected an array of tool objects.", "tools", "invalid_type")
    if inp is None and req.get("previous_response_id") is None and req.get("prompt") is None \
            and req.get("conversation") is None:
        raise RequestError("Missing required parameter: 'input'.", "input", "missing_required_parameter")


def _json_type(v: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(v), "a value")


@dataclass(slots=True)
class Translation:
    """A Responses request as a chat request. ``chat``: the chat-completion body; ``origins``:
    per chat message (canonical JSON) the input items it came from (``None``: the
    ``instructions``), in order; ``dropped``: request fields the chat body cannot carry (the
    translated mode loses them; the native mode forwards them)."""

    chat: dict[str, Any]
    origins: list[tuple[str, list[dict[str, Any]] | None]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)


def _part_to_chat(part: dict[str, Any]) -> dict[str, Any] | None:
    t = part.get("type")
    if t in ("input_text", "output_text", "text"):
        return {"type": "text", "text": part.get("text") or ""}
    if t == "input_image":
        url = part.get("image_url") or part.get("file_id")
        if not url:
            return None
        img: dict[str, Any] = {"url": url}
        if part.get("detail"):
            img["detail"] = part["detail"]
        return {"type": "image_url", "image_url": img}
    if t == "input_file":
        f = {k: part[k] for k in ("file_id", "file_data", "filename") if part.get(k) is not None}
        return {"type": "file", "file": f} if f else None
    if t == "refusal":
        return {"type": "text", "text": part.get("refusal") or ""}
    if t == "input_audio":
        return {"type": "input_audio", "input_audio": part.get("input_audio")}
    return None


def _content_to_chat(content: Any, role: str) -> Any:
    if isinstance(content, str) or content is None:
        return content or ""
    if not isinstance(content, list):
        return ""  # not a Responses content shape: forwarded as sent in native mode, the upstream judges it
    parts = [p for p in (_part_to_chat(x) for x in content if isinstance(x, dict)) if p is not None]
    if role in ("assistant", "system", "developer") or all(p["type"] == "text" for p in parts):
        texts = [p["text"] for p in parts if p["type"] == "text"]
        if len(texts) == len(parts):
            return "".join(texts) if role == "assistant" else "\n".join(texts)
    return parts


def _text_of_output(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(p.get("text") or "" for p in output if isinstance(p, dict) and "text" in p)
    return "" if output is None else json.dumps(output)


def tool_to_chat(tool: dict[str, Any]) -> dict[str, Any] | None:
    """A Responses function tool as a chat tool (None: a built-in tool, which chat cannot carry)."""
    if tool.get("type") != "function" or not isinstance(tool.get("name"), str):
        return None
    fn: dict[str, Any] = {"name": tool["name"]}
    for k in ("description", "parameters", "strict"):
        if tool.get(k) is not None:
            fn[k] = tool[k]
    return {"type": "function", "function": fn}


def tool_from_chat(tool: dict[str, Any]) -> dict[str, Any] | None:
    """A chat function tool as a Responses function tool (the gateway's ``verify_result``)."""
    fn = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        return None
    out: dict[str, Any] = {"type": "function", "name": fn["name"]}
    for k in ("description", "parameters", "strict"):
        if fn.get(k) is not None:
            out[k] = fn[k]
    if "strict" not in out:
        out["strict"] = False
    return out


def _tool_choice_to_chat(tc: Any) -> Any:
    if isinstance(tc, str):
        return tc if tc in ("auto", "none", "required") else None
    if isinstance(tc, dict):
        if tc.get("type") == "function" and isinstance(tc.get("name"), str):
            return {"type": "function", "function": {"name": tc["name"]}}
        if tc.get("type") == "allowed_tools" and tc.get("mode") in ("auto", "required"):
            return tc.get("mode")
    return None


def _tool_choice_from_chat(tc: Any) -> Any:
    if isinstance(tc, dict):
        fn = tc.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return {"type": "function", "name": fn["name"]}
    return tc


def _format_to_chat(text: Any) -> dict[str, Any] | None:
    fmt = text.get("format") if isinstance(text, dict) else None
    if not isinstance(fmt, dict):
        return None
    if fmt.get("type") == "json_schema":
        js = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        return {"type": "json_schema", "json_schema": js}
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    return None


def to_chat(req: dict[str, Any]) -> Translation:
    """The chat-completion request of a Responses request ``req`` (not modified).

    ``instructions`` -> a first ``system`` message; ``input`` (a string: one ``user`` message;
    items: ``message`` items by role with ``input_text``/``output_text`` -> text,
    ``input_image`` -> ``image_url``, ``input_file`` -> ``file``; ``function_call`` items ->
    the assistant's ``tool_calls`` (merged into the assistant message before them);
    ``function_call_output`` -> ``tool`` messages; ``reasoning`` and built-in tool items have no
    chat form and are left out); function tools and ``tool_choice``; ``text.format`` ->
    ``response_format``; ``max_output_tokens`` -> ``max_tokens``; ``reasoning.effort`` ->
    ``reasoning_effort``; ``top_logprobs`` -> ``logprobs`` + ``top_logprobs``; fields with the
    same meaning on chat (``temperature``, ``top_p``, ``user``, ``store``, ``metadata``,
    ``parallel_tool_calls``, ``stream``, the gateway's ``veracity``...) as they are."""
    chat: dict[str, Any] = {"model": req.get("model")}
    tr = Translation(chat=chat)
    messages: list[dict[str, Any]] = []
    origins: list[tuple[dict[str, Any], list[dict[str, Any]] | None]] = []
    instr = req.get("instructions")
    if isinstance(instr, list):  # a prompt template's instructions: input items
        instr = "\n".join(_text_of_output(i.get("content")) for i in instr if isinstance(i, dict))
    if isinstance(instr, str) and instr:
        m = {"role": "system", "content": instr}
        messages.append(m)
        origins.append((m, None))
    inp = req.get("input")
    items: list[Any] = [{"type": "message", "role": "user", "content": inp}] if isinstance(inp, str) else \
        (inp if isinstance(inp, list) else [])
    for item in items:
        if not isinstance(item, dict):
            continue
        t = item.get("type")
        if t in (None, "message") and isinstance(item.get("role"), str):
            role = item["role"]
            m = {"role": role, "content": _content_to_chat(item.get("content"), role)}
            messages.append(m)
            origins.append((m, [item]))
        elif t == "function_call":
            call = {"id": item.get("call_id") or item.get("id") or "", "type": "function",
                    "function": {"name": item.get("name") or "", "arguments": item.get("arguments") or ""}}
            last = messages[-1] if messages else None
            if last is not None and last.get("role") == "assistant" and origins[-1][1] is not None:
                last.setdefault("tool_calls", []).append(call)
                if not last.get("content"):
                    last["content"] = None
                origins[-1][1].append(item)  # type: ignore[union-attr]
            else:
                m = {"role": "assistant", "content": None, "tool_calls": [call]}
                messages.append(m)
                origins.append((m, [item]))
        elif t == "function_call_output":
            m = {"role": "tool", "tool_call_id": item.get("call_id") or "", "content": _text_of_output(item.get("output"))}
            messages.append(m)
            origins.append((m, [item]))
        elif origins and origins[-1][1] is not None:
            origins[-1][1].append(item)  # reasoning, built-in tool items: ride with the message before them
        else:
            tr.dropped.append(f"input item {t}")
            origins.append(({}, [item]))  # an item before any message: kept for the native request
    chat["messages"] = messages
    tr.origins = [(_canon(m) if m else "", src) for m, src in origins]
    for k in _SAME_ON_CHAT:
        if k in req:
            chat[k] = req[k]
    tools = req.get("tools")
    if isinstance(tools, list):
        ctools = [c for c in (tool_to_chat(t) for t in tools if isinstance(t, dict)) if c is not None]
        if len(ctools) < len(tools):
            tr.dropped.append("built-in tools")
        if ctools:
            chat["tools"] = ctools
        elif "parallel_tool_calls" in chat:
            chat.pop("parallel_tool_calls")
    if "tool_choice" in req and chat.get("tools"):
        tc = _tool_choice_to_chat(req["tool_choice"])
        if tc is not None:
            chat["tool_choice"] = tc
    rf = _format_to_chat(req.get("text"))
    if rf is not None:
        chat["response_format"] = rf
    if isinstance(req.get("max_output_tokens"), int):
        chat["max_tokens"] = req["max_output_tokens"]
    reasoning = req.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort"):
        chat["reasoning_effort"] = reasoning["effort"]
    if isinstance(req.get("top_logprobs"), int):
        chat["logprobs"] = True
        chat["top_logprobs"] = req["top_logprobs"]
    if req.get("stream") is True:
        chat["stream_options"] = {"include_usage": True}  # the usage of response.completed
    for k in req:
        if k not in _MAPPED and k not in _SAME_ON_CHAT:
            tr.dropped.append(k)
    if req.get("previous_response_id") is not None:
        tr.dropped.append("previous_response_id")
    return tr


def native_request(chat: dict[str, Any], req: dict[str, Any], tr: Translation) -> dict[str, Any] | None:
    """The Responses request for a chat request ``chat`` the pipeline built from the client's
    Responses request ``req`` (translated as ``tr``), or None when ``chat`` is not the
    client's conversation (the verifier model's own calls: sent as chat completions).

    The client's request is the base, byte for byte (unknown fields, built-in tools,
    ``previous_response_id``, ``store``, ``include``...): its input items are kept as sent, in
    order; chat messages the pipeline added (the sentinel's rule, the draft and the evidence of
    a correction round, a ``verify_result`` turn and its tool answer) become new input items at
    their place; function tools the pipeline added (``verify_result``) go first, as the sentinel
    puts them, while it offers them (the client's tools are always sent as given); a
    ``tool_choice`` the pipeline set (forcing ``verify_result``) replaces the client's.
    ``stream`` follows ``chat`` (``stream_options`` only with a stream)."""
    msgs = chat.get("messages")
    if not isinstance(msgs, list):
        return None
    origins = tr.origins
    j = 0
    items: list[dict[str, Any]] = []
    lead_system: list[dict[str, Any]] = []
    for m in msgs:
        while j < len(origins) and origins[j][0] == "":  # items that had no chat form
            items.extend(origins[j][1] or [])
            j += 1
        if not isinstance(m, dict):
            return None
        if j < len(origins) and _canon(m) == origins[j][0]:
            src = origins[j][1]
            if src is not None:
                items.extend(src)
            j += 1
            continue
        if j < len(origins) and origins[j][1] is None and m.get("role") == "system" \
                and isinstance(m.get("content"), str):
            orig = json.loads(origins[j][0]).get("content", "")
            if m["content"].startswith(orig):  # the sentinel's rule appended to the instructions
                extra = m["content"][len(orig):].strip()
                if extra:
                    lead_system.append({"type": "message", "role": "system", "content": extra})
                j += 1
                continue
        items.extend(_message_to_items(m))
    while j < len(origins) and origins[j][0] == "":
        items.extend(origins[j][1] or [])
        j += 1
    if j < len(origins):
        return None  # not the client's conversation
    out = {k: v for k, v in req.items() if k != "veracity"}
    unchanged = len(items) == 1 and items[0] is _first_item(tr) and not lead_system
    if not (isinstance(req.get("input"), str) and unchanged):  # else the client's string stays a string
        out["input"] = lead_system + items
    # tools: the client's as sent, plus function tools the pipeline added (verify_result)
    client_names = {t.get("name") for t in req.get("tools") or () if isinstance(t, dict)}
    chat_names = set()
    added = []
    for t in chat.get("tools") or ():
        fn = t.get("function") if isinstance(t, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        chat_names.add(name)
        if name not in client_names:
            rt = tool_from_chat(t)
            if rt is not None:
                added.append(rt)
    if added:
        out["tools"] = added + list(req.get("tools") or [])
    tc = chat.get("tool_choice")
    if tc is not None and _canon(tc) != _canon(tr.chat.get("tool_choice")):
        out["tool_choice"] = _tool_choice_from_chat(tc)
    if chat.get("stream") is True:
        out["stream"] = True
    else:
        out.pop("stream", None)
        out.pop("stream_options", None)
    if chat.get("model") and chat["model"] != req.get("model"):
        out["model"] = chat["model"]
    return out


def _first_item(tr: Translation) -> Any:
    for _, src in tr.origins:
        if src:
            return src[0]
    return None


def _message_to_items(m: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat message the gateway added, as Responses input items."""
    role = m.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": m.get("tool_call_id") or "",
                 "output": _text_of_output(m.get("content"))}]
    out: list[dict[str, Any]] = []
    content = m.get("content")
    text = content if isinstance(content, str) else _text_of_output(content)
    if role == "assistant":
        if text:
            out.append({"type": "message", "role": "assistant",
                        "content": [{"type": "output_text", "text": text, "annotations": []}]})
        for c in m.get("tool_calls") or ():
            fn = c.get("function") or {}
            out.append({"type": "function_call", "call_id": c.get("id") or "", "name": fn.get("name") or "",
                        "arguments": fn.get("arguments") or ""})
        return out
    return [{"type": "message", "role": role if role in ("user", "system", "developer") else "user",
             "content": text}]


# ---------------------------------------------------------------------------- answers


def usage_to_chat(u: Any) -> dict[str, Any] | None:
    """Responses ``usage`` as chat-completion ``usage``."""
    if not isinstance(u, dict):
        return None
    out: dict[str, Any] = {"prompt_tokens": u.get("input_tokens") or 0,
                           "completion_tokens": u.get("output_tokens") or 0,
                           "total_tokens": u.get("total_tokens") or 0}
    det = u.get("input_tokens_details")
    if isinstance(det, dict) and "cached_tokens" in det:
        out["prompt_tokens_details"] = {"cached_tokens": det["cached_tokens"]}
    det = u.get("output_tokens_details")
    if isinstance(det, dict) and "reasoning_tokens" in det:
        out["completion_tokens_details"] = {"reasoning_tokens": det["reasoning_tokens"]}
    return out


def usage_from_chat(u: Any) -> dict[str, Any] | None:
    """Chat-completion ``usage`` as Responses ``usage``."""
    if not isinstance(u, dict):
        return None
    pt, ct = u.get("prompt_tokens") or 0, u.get("completion_tokens") or 0
    pdet = u.get("prompt_tokens_details") if isinstance(u.get("prompt_tokens_details"), dict) else {}
    cdet = u.get("completion_tokens_details") if isinstance(u.get("completion_tokens_details"), dict) else {}
    return {"input_tokens": pt, "input_tokens_details": {"cached_tokens": pdet.get("cached_tokens") or 0,
                                                         "cache_write_tokens": pdet.get("cache_write_tokens") or 0},
            "output_tokens": ct, "output_tokens_details": {"reasoning_tokens": cdet.get("reasoning_tokens") or 0},
            "total_tokens": u.get("total_tokens") or pt + ct}


def response_text(resp: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(text, refusal)`` of a response's ``message`` output items (``None`` when absent)."""
    texts: list[str] = []
    refusals: list[str] = []
    for item in resp.get("output") or ():
        if isinstance(item, dict) and item.get("type") == "message":
            for part in item.get("content") or ():
                if isinstance(part, dict) and part.get("type") == "output_text":
                    texts.append(part.get("text") or "")
                elif isinstance(part, dict) and part.get("type") == "refusal":
                    refusals.append(part.get("refusal") or "")
    return ("".join(texts) if texts else None), ("".join(refusals) if refusals else None)


def _finish_reason(resp: dict[str, Any], calls: bool) -> str:
    if calls:
        return "tool_calls"
    if resp.get("status") == "incomplete":
        det = resp.get("incomplete_details")
        reason = det.get("reason") if isinstance(det, dict) else None
        return "content_filter" if reason == "content_filter" else "length"
    return "stop"


def completion_from_response(resp: dict[str, Any]) -> dict[str, Any]:
    """A response object as the ``chat.completion`` the pipeline verifies: the ``message``
    items' ``output_text`` as ``content``, ``refusal`` parts as ``refusal``, ``function_call``
    items as ``tool_calls`` (``id`` = ``call_id``); ``finish_reason`` from the calls and the
    status; the response's ``id`` kept (:func:`response_from_completion` finds it again)."""
    text, refusal = response_text(resp)
    calls = [{"id": i.get("call_id") or i.get("id") or "", "type": "function",
              "function": {"name": i.get("name") or "", "arguments": i.get("arguments") or ""}}
             for i in resp.get("output") or () if isinstance(i, dict) and i.get("type") == "function_call"]
    msg: dict[str, Any] = {"role": "assistant", "content": text, "refusal": refusal}
    if calls:
        msg["tool_calls"] = calls
    out = {"id": resp.get("id") or "", "object": "chat.completion", "created": int(resp.get("created_at") or 0),
           "model": resp.get("model"), "choices": [{"index": 0, "message": msg, "logprobs": None,
                                                     "finish_reason": _finish_reason(resp, bool(calls))}]}
    usage = usage_to_chat(resp.get("usage"))
    if usage is not None:
        out["usage"] = usage
    return out


def _choice_message(completion: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    try:
        choice = completion["choices"][0]
        msg = choice.get("message") or {}
        return (msg if isinstance(msg, dict) else {}), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        return {}, None


def _message_item(text: str | None, refusal: str | None, item_id: str | None = None,
                  annotations: list[Any] | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "output_text", "text": text, "annotations": annotations or [], "logprobs": []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    return {"id": item_id or new_id("msg"), "type": "message", "role": "assistant", "status": "completed",
            "content": content}


def _call_item(call: dict[str, Any], item_id: str | None = None) -> dict[str, Any]:
    fn = call.get("function") or {}
    return {"id": item_id or new_id("fc"), "type": "function_call", "status": "completed",
            "call_id": call.get("id") or "", "name": fn.get("name") or "", "arguments": fn.get("arguments") or ""}


def _echo(req: dict[str, Any]) -> dict[str, Any]:
    """The request settings a response object repeats (OpenAI's defaults where not given)."""
    return {
        "instructions": req.get("instructions"),
        "max_output_tokens": req.get("max_output_tokens"),
        "metadata": req.get("metadata") or {},
        "parallel_tool_calls": req.get("parallel_tool_calls", True),
        "previous_response_id": req.get("previous_response_id"),
        "reasoning": req.get("reasoning") or {"effort": None, "summary": None},
        "store": req.get("store", True),
        "temperature": req.get("temperature", 1.0),
        "text": req.get("text") or {"format": {"type": "text"}},
        "tool_choice": req.get("tool_choice", "auto"),
        "tools": req.get("tools") or [],
        "top_p": req.get("top_p", 1.0),
        "truncation": req.get("truncation", "disabled"),
        "user": req.get("user"),
        "background": req.get("background", False),
    }


def response_from_completion(completion: dict[str, Any], req: dict[str, Any], *,
                             base: dict[str, Any] | None = None, response_id: str | None = None,
                             item_ids: dict[str, str] | None = None) -> dict[str, Any]:
    """The response object for the verified ``completion`` of Responses request ``req``.

    ``base``: the upstream's own response this completion was made from (native mode): kept
    as sent -- ids, reasoning items, built-in tool items, annotations, ``usage`` -- except
    that ``function_call`` items the completion no longer has (``verify_result``) are left out
    and, when the gateway changed the text (a note appended, a corrected answer from another
    round), the message item carries the completion's text (annotations then dropped: their
    offsets were for the old text). Without ``base`` (translated mode) the response is built:
    one ``message`` item (``output_text``, ``refusal``) and one ``function_call`` item per
    tool call, ``status`` ``incomplete`` for a cut answer, ``usage`` mapped, the request's
    settings echoed. ``item_ids``: ids to use (``"message"`` and per ``call_id``; a stream's
    items keep the ids its events used). The completion's ``veracity`` is not copied here."""
    msg, finish = _choice_message(completion)
    text = msg.get("content") if isinstance(msg.get("content"), str) else None
    refusal = msg.get("refusal") if isinstance(msg.get("refusal"), str) else None
    calls = [c for c in msg.get("tool_calls") or () if isinstance(c, dict)]
    ids = item_ids or {}
    if base is not None:
        # shallow: the base's items are shared, never changed in place (a changed one is a new dict)
        out = {k: v for k, v in base.items() if k != "veracity"}
        keep_ids = {c.get("id") for c in calls}
        btext, brefusal = response_text(base)
        same = (btext or None) == (text or None) and (brefusal or None) == (refusal or None)
        output: list[Any] = []
        placed = False
        for item in base.get("output") or ():
            if not isinstance(item, dict):
                output.append(item)
                continue
            t = item.get("type")
            if t == "function_call":
                if item.get("call_id") in keep_ids:
                    output.append(item)
            elif t == "message":
                if same:
                    output.append(item)
                elif not placed:
                    output.append(_message_item(text, refusal, item.get("id")))
                placed = True
            else:
                output.append(item)
        if not placed and not same and (text or refusal):
            output.append(_message_item(text, refusal, ids.get("message")))
        have = {i.get("call_id") for i in output if isinstance(i, dict) and i.get("type") == "function_call"}
        output.extend(_call_item(c, ids.get(c.get("id") or "")) for c in calls if c.get("id") not in have)
        out["output"] = output
        _client_settings(out, req)
        _apply_ids(out, ids)
        if response_id:
            out["id"] = response_id
        return out
    output = []
    if text is not None or refusal:
        output.append(_message_item(text, refusal, ids.get("message")))
    output.extend(_call_item(c, ids.get(c.get("id") or "")) for c in calls)
    status, incomplete = "completed", None
    if finish in ("length", "content_filter") and not calls:
        status = "incomplete"
        incomplete = {"reason": "max_output_tokens" if finish == "length" else "content_filter"}
        for item in output:
            item["status"] = "incomplete"
    created = completion.get("created") or int(time.time())
    out = {"id": response_id or new_id("resp"), "object": "response", "created_at": created, "status": status,
           "error": None, "incomplete_details": incomplete, "model": completion.get("model") or req.get("model"),
           "output": output, **_echo(req), "usage": usage_from_chat(completion.get("usage"))}
    if status == "completed":
        out["completed_at"] = created
    return out


def _client_settings(resp: dict[str, Any], req: dict[str, Any]) -> None:
    """An upstream response's echo of the request as the client sent it: function tools the
    gateway added (``verify_result``) and a ``tool_choice`` forcing one of them are removed."""
    names = {t.get("name") for t in req.get("tools") or () if isinstance(t, dict) and t.get("type") == "function"}
    if isinstance(resp.get("tools"), list):
        resp["tools"] = [t for t in resp["tools"] if not (isinstance(t, dict) and t.get("type") == "function"
                                                          and t.get("name") not in names)]
    tc = resp.get("tool_choice")
    if isinstance(tc, dict) and tc.get("type") == "function" and tc.get("name") not in names:
        resp["tool_choice"] = req.get("tool_choice", "auto")


def _apply_ids(resp: dict[str, Any], ids: dict[str, str]) -> None:
    if not ids:
        return
    first_msg = True
    output = list(resp.get("output") or ())
    for i, item in enumerate(output):
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message" and first_msg and "message" in ids:
            output[i] = dict(item, id=ids["message"])   # a new dict: the base's items are shared
            first_msg = False
        elif item.get("type") == "function_call" and item.get("call_id") in ids:
            output[i] = dict(item, id=ids[item["call_id"]])
    resp["output"] = output
