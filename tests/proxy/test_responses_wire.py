"""The Responses API wire translation (proxy/wire/responses.py, responses_stream.py), in-process.

Shapes are checked against openai-python's own types (``openai.types.responses``): every
synthesised event must validate as a ``ResponseStreamEvent`` and every response as a
``Response`` -- the SDK's models are the oracle, not this module's builders.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest
from openai.types.responses import Response, ResponseStreamEvent

from proxy.pipeline import correction, sentinel
from proxy.wire import responses as rw
from proxy.wire import responses_stream as rs
from proxy.wire.sse import SSEDecoder, encode_chunk, to_chunks
from verifiers._types import Check, Report

#: event type -> the SDK's model of that event (validated one by one: clearer failures than the union)
EVENTS = {cls.model_fields["type"].annotation.__args__[0]: cls
          for cls in typing.get_args(typing.get_args(ResponseStreamEvent)[0])}
TOOL = {"type": "function", "name": "get_weather", "description": "w", "strict": True,
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                       "additionalProperties": False}}


def decode(frames: list[bytes] | bytes) -> list[dict[str, Any]]:
    blob = frames if isinstance(frames, bytes) else b"".join(frames)
    dec = SSEDecoder()
    out = []
    for ev in dec.feed(blob):
        obj = json.loads(ev.data)
        assert ev.event == obj["type"]          # the `event:` line names the type, as OpenAI sends it
        out.append(obj)
    return out


def validate_stream(events: list[dict[str, Any]]) -> None:
    for e in events:
        EVENTS[e["type"]].model_validate(e)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))


def completion(content: str | None = "4", calls: list[dict[str, Any]] | None = None, finish: str = "stop",
               cid: str = "chatcmpl-1") -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = calls
    return {"id": cid, "object": "chat.completion", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13,
                      "prompt_tokens_details": {"cached_tokens": 2}}}


# --------------------------------------------------------------------------- requests


def test_to_chat_items_tools_format():
    req = {"model": "m", "instructions": "Be brief.", "temperature": 0.1, "max_output_tokens": 9,
           "input": [{"role": "user", "content": [{"type": "input_text", "text": "look"},
                                                   {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "low"}]},
                     {"type": "reasoning", "id": "rs_1", "summary": []},
                     {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{}"},
                     {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
                     {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]}],
           "tools": [{"type": "web_search_preview"}, TOOL], "tool_choice": "required",
           "text": {"format": {"type": "json_schema", "name": "W", "schema": {"type": "object"}, "strict": True}},
           "reasoning": {"effort": "low"}, "vendor_x": 1}
    tr = rw.to_chat(req)
    chat = tr.chat
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "look"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function",
                                                               "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."}]
    assert chat["tools"] == [{"type": "function", "function": {"name": "get_weather", "description": "w",
                                                               "parameters": TOOL["parameters"], "strict": True}}]
    assert chat["tool_choice"] == "required" and chat["max_tokens"] == 9 and chat["temperature"] == 0.1
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "W", "schema": {"type": "object"},
                                                                              "strict": True}}
    assert chat["reasoning_effort"] == "low"
    assert "vendor_x" in tr.dropped and "built-in tools" in tr.dropped


def test_native_request_unchanged_conversation_is_the_clients_request():
    req = {"model": "m", "input": "What is 2+2?", "store": False, "include": ["x"], "tools": [{"type": "file_search"}],
           "veracity": {"on_failure": "annotate"}, "vendor": {"a": [1]}}
    tr = rw.to_chat(req)
    out = rw.native_request(tr.chat, req, tr)
    assert out == {k: v for k, v in req.items() if k != "veracity"}


def test_native_request_correction_round_appends_evidence_items():
    req = {"model": "m", "instructions": "Be exact.", "previous_response_id": "resp_prev",
           "input": [{"role": "user", "content": [{"type": "input_text", "text": "What is 17*23?"}]},
                     {"type": "reasoning", "id": "rs_1", "summary": []}]}
    tr = rw.to_chat(req)
    report = Report(status="failed", checks=[Check(verifier="arithmetic", claim="17*23 = 381", outcome="fail",
                                                   expected="391", found="381")])
    body = correction.correction_body(tr.chat, completion("17*23 = 381"), report)
    out = rw.native_request(body, req, tr)
    assert out is not None
    assert out["instructions"] == "Be exact." and out["previous_response_id"] == "resp_prev"  # the client's, as sent
    assert out["input"][:2] == req["input"]             # the client's items, reasoning included, as sent
    assert out["input"][2]["role"] == "assistant" and out["input"][2]["content"][0]["text"] == "17*23 = 381"
    assert out["input"][3]["role"] == "user" and "391" in out["input"][3]["content"]
    assert "stream" not in out


def test_native_request_sentinel_rule_tool_and_turns():
    req = {"model": "m", "instructions": "Be exact.", "input": "Do A and B.", "tools": [TOOL, {"type": "web_search"}]}
    tr = rw.to_chat(req)
    injected = sentinel.inject(tr.chat)
    out = rw.native_request(injected, req, tr)
    assert out["instructions"] == "Be exact."
    assert out["input"][0] == {"type": "message", "role": "system", "content": sentinel.RULE}
    assert out["input"][1] == {"type": "message", "role": "user", "content": "Do A and B."}
    assert [t.get("name") for t in out["tools"]] == ["verify_result", "get_weather", None]  # ours first, client's as sent
    # a sentinel turn: the model's verify_result call and the gateway's tool answer
    call = {"id": "call_v", "type": "function", "function": {"name": "verify_result", "arguments": "{}"}}
    turn = dict(injected, messages=injected["messages"] + [
        {"role": "assistant", "content": "A.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_v", "content": "Do B."}], tool_choice={"type": "function", "function": {"name": "verify_result"}})
    out = rw.native_request(turn, req, tr)
    assert out["input"][2:] == [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "A.", "annotations": []}]},
        {"type": "function_call", "call_id": "call_v", "name": "verify_result", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_v", "output": "Do B."}]
    assert out["tool_choice"] == {"type": "function", "name": "verify_result"}


def test_native_request_refuses_the_verifier_models_calls():
    req = {"model": "m", "input": "What is 2+2?"}
    tr = rw.to_chat(req)
    plan_call = {"model": "m", "messages": [{"role": "system", "content": "You plan checks."},
                                            {"role": "user", "content": "Answer: 4"}],
                 "response_format": {"type": "json_schema", "json_schema": {"name": "Plan", "schema": {}}}}
    assert rw.native_request(plan_call, req, tr) is None


@pytest.mark.parametrize("req,param", [
    ({"model": "m", "input": 3}, "input"), ({"model": "m", "input": [1]}, "input[0]"),
    ({"model": "m"}, "input"), ({"model": "m", "input": "x", "instructions": 5}, "instructions"),
    ({"model": "m", "input": "x", "tools": {"type": "function"}}, "tools"),
])
def test_validate_names_the_param(req, param):
    with pytest.raises(rw.RequestError) as exc:
        rw.validate(req)
    assert exc.value.param == param


def test_validate_accepts_previous_response_id_without_input():
    rw.validate({"model": "m", "previous_response_id": "resp_1"})


# --------------------------------------------------------------------------- answers


def test_translated_response_validates_as_the_sdks_response():
    calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"P"}'}}]
    req = {"model": "m", "input": "x", "tools": [TOOL], "metadata": {"a": "b"}}
    for comp in (completion("The answer is 4."), completion(None, calls, "tool_calls"), completion("cut", finish="length")):
        resp = rw.response_from_completion(comp, req)
        parsed = Response.model_validate(resp)
        assert parsed.object == "response" and parsed.metadata == {"a": "b"}
        assert parsed.usage.input_tokens == 10 and parsed.usage.input_tokens_details.cached_tokens == 2
    assert Response.model_validate(rw.response_from_completion(completion("cut", finish="length"), req)).status == "incomplete"
    fc = Response.model_validate(rw.response_from_completion(completion(None, calls, "tool_calls"), req)).output[0]
    assert fc.type == "function_call" and fc.call_id == "call_1" and fc.arguments == '{"city":"P"}'


def upstream_response(text: str = "2 + 2 = 4.") -> dict[str, Any]:
    return {"id": "resp_up", "object": "response", "created_at": 1700000000, "status": "completed", "model": "m",
            "output": [{"type": "reasoning", "id": "rs_1", "summary": []},
                       {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "q"}},
                       {"type": "message", "id": "msg_up", "role": "assistant", "status": "completed",
                        "content": [{"type": "output_text", "text": text, "logprobs": [],
                                     "annotations": [{"type": "url_citation", "start_index": 0, "end_index": 3,
                                                      "url": "https://x", "title": "t"}]}]},
                       {"type": "function_call", "id": "fc_v", "call_id": "call_v", "name": "verify_result",
                        "arguments": "{}", "status": "completed"}],
            "usage": {"input_tokens": 5, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                      "output_tokens": 2, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 7},
            "tools": [TOOL],
            "tool_choice": "auto", "parallel_tool_calls": True, "vendor_field": 1}


def test_native_response_kept_as_sent_but_gateway_tools_removed():
    up = upstream_response()
    comp = rw.completion_from_response(up)
    assert comp["id"] == "resp_up" and comp["choices"][0]["message"]["content"] == "2 + 2 = 4."
    assert comp["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "verify_result"
    settled = sentinel.strip_sentinel(comp)
    out = rw.response_from_completion(settled, {"model": "m", "input": "x"}, base=up)
    assert [i["type"] for i in out["output"]] == ["reasoning", "web_search_call", "message"]
    assert out["output"][2] == up["output"][2]            # annotations and ids kept: the text is unchanged
    assert out["vendor_field"] == 1 and out["usage"] == up["usage"] and out["tools"] == []
    Response.model_validate(out)


def test_native_response_with_changed_text_drops_stale_annotations():
    up = upstream_response()
    comp = rw.completion_from_response(up)
    comp["choices"][0]["message"]["content"] = "2 + 2 = 4.\n\nNote: unconfirmed."
    out = rw.response_from_completion(comp, {"model": "m", "input": "x"}, base=up)
    msg = [i for i in out["output"] if i["type"] == "message"][0]
    assert msg["id"] == "msg_up" and msg["content"][0]["text"].endswith("unconfirmed.")
    assert msg["content"][0]["annotations"] == []
    ids = rw.response_from_completion(comp, {"model": "m", "input": "x"}, base=up, item_ids={"message": "msg_s"})
    assert [i["id"] for i in ids["output"] if i["type"] == "message"] == ["msg_s"]
    assert up == upstream_response()            # the upstream's object is shared, never changed in place


# --------------------------------------------------------------------------- streams


def test_response_events_of_a_whole_response_validate():
    resp = rw.response_from_completion(completion("Hello there, world."), {"model": "m", "input": "x"})
    events = decode(rs.response_events(resp, chunk_size=4))
    validate_stream(events)
    assert "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta") == "Hello there, world."
    assert events[-1]["type"] == "response.completed" and events[-1]["response"]["id"] == resp["id"]
    up = upstream_response()
    validate_stream(decode(rs.response_events(up, chunk_size=3)))


def test_chat_to_events_with_text_tool_call_and_report():
    calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]
    comp = completion("Let me check.", calls, "tool_calls")
    req = {"model": "m", "input": "x", "tools": [TOOL]}
    shell = rw.response_from_completion({"choices": [{"message": {}}], "model": "m"}, req, response_id="resp_s")
    w = rs.ChatToEvents(shell, lambda c, ids: rw.response_from_completion(c, req, item_ids=ids, response_id="resp_s"))
    out = w.start()
    for ch in to_chunks(comp, chunk_size=5, include_usage=True):
        out += w.feed(encode_chunk(ch))
    out += w.feed(b": keep-alive\n\n")
    out += w.feed(encode_chunk({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                "choices": [], "veracity": {"status": "skipped"}}))
    out += w.feed(encode_chunk("[DONE]"))
    out += w.end()
    assert b": keep-alive\n\n" in out
    events = decode(out.replace(b": keep-alive\n\n", b""))
    validate_stream(events)
    types = [e["type"] for e in events]
    assert types.count("response.output_item.added") == 2 and types[-1] == "response.completed"
    final = events[-1]["response"]
    assert final["veracity"] == {"status": "skipped"} and final["usage"]["total_tokens"] == 13
    added = [e["item"]["id"] for e in events if e["type"] == "response.output_item.added"]
    assert added == [i["id"] for i in final["output"]]
    assert final["output"][1]["arguments"] == '{"city":"Paris"}'
    assert Response.model_validate(final).output[0].content[0].text == "Let me check."


def test_chat_to_events_error_frame_ends_with_an_error_event():
    req = {"model": "m", "input": "x"}
    shell = rw.response_from_completion({"choices": [{"message": {}}], "model": "m"}, req, response_id="resp_e")
    w = rs.ChatToEvents(shell, lambda c, ids: rw.response_from_completion(c, req, item_ids=ids))
    out = w.start() + w.feed(encode_chunk(to_chunks(completion("partial"), chunk_size=3)[1]))
    out += w.feed(b'data: {"error": {"message": "upstream gone", "type": "upstream_error", "code": "disconnect"}}\n\n')
    out += w.end()
    events = decode(out)
    validate_stream(events)
    assert events[-1]["type"] == "error" and events[-1]["error"]["message"] == "upstream gone"
    assert not any(e["type"] == "response.completed" for e in events)


def test_events_to_chat_round_trip_through_the_chat_assembler():
    """An upstream Responses stream, read as chat chunks, adds up to the same answer."""
    from proxy.wire.sse import assemble, parse_stream

    up = upstream_response("The total is 6,312.38.")
    up["output"][3]["name"] = "get_weather"
    blob = b"".join(rs.response_events(up, chunk_size=4))
    conv = rs.EventsToChat(include_usage=True)
    chat = b"".join(conv.feed(blob[i:i + 7]) for i in range(0, len(blob), 7)) + conv.flush()
    parsed = parse_stream(chat)
    assert parsed.done
    comp = assemble(parsed.chunks)
    msg = comp["choices"][0]["message"]
    assert msg["content"] == "The total is 6,312.38."
    assert msg["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": "{}"}
    assert comp["choices"][0]["finish_reason"] == "tool_calls" and comp["usage"]["total_tokens"] == 7
    assert conv.response["id"] == "resp_up" and conv.response["output"] == up["output"]


def test_events_to_chat_failed_response_is_an_error_frame():
    conv = rs.EventsToChat()
    created = {"type": "response.created", "sequence_number": 0,
               "response": {"id": "resp_f", "created_at": 1, "model": "m", "output": []}}
    failed = {"type": "response.failed", "sequence_number": 1,
              "response": {"id": "resp_f", "error": {"code": "server_error", "message": "boom"}}}
    out = conv.feed(rs.event_frame(created) + rs.event_frame(failed))
    assert b'"error"' in out and b"boom" in out


def test_native_stream_relays_reasoning_and_builtin_items_at_their_index():
    """Native upstream stream -> chat chunks (what the pipeline reads) -> Responses events: the
    upstream's reasoning and web-search items are relayed whole, in their place, and every
    event's output_index is the item's index in response.completed."""
    up = upstream_response("The answer is 4.")
    up["output"] = up["output"][:3]                       # reasoning, web_search_call, message
    conv = rs.EventsToChat(include_usage=True)
    chat_frames = conv.feed(b"".join(rs.response_events(up, chunk_size=5)))
    req = {"model": "m", "input": "x"}
    shell = dict(up, output=[])

    def finalize(c, ids):
        return rw.response_from_completion(c, req, base=conv.response, item_ids=ids, response_id=up["id"])

    def item_id(kind, key, chat_id):
        return next((i["id"] for i in conv.response["output"] if i["type"] == "message"), None) if kind == "message" else None

    w = rs.ChatToEvents(shell, finalize, item_id, lambda chat_id: conv.response["output"])
    out = w.start()
    dec = SSEDecoder()
    for ev in dec.feed(chat_frames):                      # the pipeline relays frame by frame
        out += w.feed(b"data: " + ev.data.encode() + b"\n\n")
    out += w.end()
    events = decode(out)
    validate_stream(events)
    final = events[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["reasoning", "web_search_call", "message"]
    for e in events:
        if e["type"] in ("response.output_item.added", "response.output_item.done"):
            assert final["output"][e["output_index"]]["id"] == e["item"]["id"]
        if e["type"] == "response.output_text.delta":
            assert e["output_index"] == 2 and e["item_id"] == "msg_up"
    assert final["output"][2]["content"][0]["annotations"] == up["output"][2]["content"][0]["annotations"]


@pytest.mark.parametrize("inp", [
    [{"role": "user", "content": 5}], [{"role": "user", "content": {"a": 1}}], [{"type": "function_call"}],
    [{"type": "function_call_output", "output": None}], [{"type": "message"}], [{"role": "user", "content": [None, 3]}],
])
def test_odd_items_never_crash_the_translation(inp):
    req = {"model": "m", "input": inp, "tools": [{"type": "function"}, {}], "text": {"format": "x"}, "tool_choice": 7}
    tr = rw.to_chat(req)
    assert isinstance(tr.chat["messages"], list)
    out = rw.native_request(tr.chat, req, tr)
    assert out is not None and out.get("input", req["input"]) == req["input"]
