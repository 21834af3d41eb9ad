"""``POST /v1/responses`` on the scripted mock upstream (:mod:`proxy.upstreams.mock`).

The mock answers the Responses API from the same script as chat completions: the request is
read as its chat translation (:func:`proxy.wire.responses.to_chat`: ``instructions`` a system
message, ``input`` the messages, ``function_call_output`` items ``tool`` messages, function
tools, ``text.format`` a ``response_format``), the first rule that matches answers
(a rule whose ``match.path`` names ``/v1/responses`` first, else the chat rules), and the
reply -- text, tool calls, ``usage``, ``status`` errors, ``delay_ms``, ``stream.chunk_size``,
``structured_output`` -- comes back as a response object or its event stream
(:func:`proxy.wire.responses_stream.response_events`). A test or a demo scripts one model for both
APIs. The request is recorded (``GET /_mock/requests``) with its Responses body as sent.
"""

from __future__ import annotations

import asyncio
from typing import Any

from proxy.upstreams._mock_bodies import _error_body, _openai_error, build_completion
from proxy.upstreams._mock_script import _ECHO
from proxy.upstreams._mock_send import _cut, _send_json
from proxy.wire.responses import RequestError, response_from_completion, to_chat, validate
from proxy.wire.responses_stream import response_events

__all__ = ["serve"]


def _select(app: Any, chat: dict[str, Any]) -> tuple[str | None, int, Any]:
    """The rule answering a Responses request (read as ``chat``): rules whose ``match.path``
    fits ``/v1/responses`` or, without a path, chat rules; replies counted as on chat."""
    for i, rule in enumerate(app.script.rules):
        m = rule.match
        hit = m.matches("/v1/responses", chat) if m.path is not None else m.matches("/v1/chat/completions", chat)
        if hit:
            if rule.reply is not None:
                return rule.name or f"rules.{i}", 0, rule.reply
            k = app._counters.get(i, 0)
            app._counters[i] = k + 1
            k = min(k, len(rule.replies) - 1)
            return rule.name or f"rules.{i}", k, rule.replies[k]
    return "default", 0, app.script.default


async def serve(app: Any, scope: dict[str, Any], raw: bytes, send: Any, receive: Any) -> None:
    """Answer one ``POST /v1/responses`` for the mock ``app`` (a :class:`proxy.upstreams.mock.MockApp`)."""
    path = "/v1/responses"
    body, record = await app._json_request(scope, path, raw, send)
    if body is None:
        return
    try:
        validate(body)
    except RequestError as exc:
        await _send_json(send, 400, _openai_error(str(exc), "invalid_request_error", exc.code, exc.param))
        return
    chat = to_chat(body).chat
    n_req = next(app._seq)
    rule, k, reply = _select(app, chat)
    if record is not None:
        record["rule"], record["reply"] = rule, k
    if reply is None and app.script.structured_output:
        sent, reply = await app._structured(chat, record, send, "text.format")
        if sent:
            return
    reply = reply or _ECHO
    if reply.delay_ms:
        await asyncio.sleep(reply.delay_ms / 1000)
    if "drop_before_headers" in reply.fault:
        await _cut(send)
        return
    if reply.status >= 400:
        await _send_json(send, reply.status, _error_body(reply), reply.headers)
        return
    completion = build_completion(chat, reply, n_req)
    response = response_from_completion(completion, body, response_id=f"resp_mock{n_req:06d}",
                                        item_ids={"message": f"msg_mock{n_req:06d}"})
    response.update(reply.extra)
    if not body.get("stream"):
        await _send_json(send, 200, response, reply.headers)
        return
    frames = response_events(response, chunk_size=reply.stream.chunk_size)
    if "drop_mid_stream" in reply.fault or "error_mid_stream" in reply.fault:
        frames = frames[: reply.drop_after if reply.drop_after is not None else max(1, len(frames) // 2)]
    headers = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
    headers += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    delay = reply.stream.delay_ms / 1000
    for frame in frames:
        await send({"type": "http.response.body", "body": frame, "more_body": True})
        if delay:
            await asyncio.sleep(delay)
    if "drop_mid_stream" in reply.fault:
        await _cut(send)
        return
    if "error_mid_stream" in reply.fault:
        err = b'event: error\ndata: {"type":"error","code":"server_error","message":"The upstream failed mid-stream.",' \
              b'"param":null,"sequence_number":' + str(len(frames)).encode() + b'}\n\n'
        await send({"type": "http.response.body", "body": err, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
