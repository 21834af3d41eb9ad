"""proxy.wire.sse: the SSE parser, the stream assembler and its inverse, checked against each other,
against hand-written OpenAI-shaped streams, and against the real ``openai`` SDK's stream parser."""

from __future__ import annotations

import json

import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.upstreams.mock import MockUpstream
from proxy.wire.sse import (
    IncompleteStream,
    SSEDecoder,
    assemble,
    encode_chunks,
    parse_stream,
    to_chunks,
)

# ---------------------------------------------------------------- parser


def feed_all(pieces):
    d = SSEDecoder()
    out = []
    for p in pieces:
        out += d.feed(p)
    out += d.flush()
    return d, out


def test_parser_handles_comments_ids_retry_and_multiline_data():
    body = b": hello\n\nid: 7\n\nretry: 1500\n\nevent: error\ndata: {\"a\":\ndata: 1}\n\ndata:x\n\n"
    d, events = feed_all([body])
    assert [(e.event, e.data) for e in events] == [("error", '{"a":\n1}'), (None, "x")]
    assert d.comments == 1 and d.last_event_id == "7" and d.retry == 1500
    assert events[0].id == "7" and events[0].json() == {"a": 1}


def test_parser_line_endings_and_splits_anywhere():
    body = "data: héllo\r\n\r\ndata: a\rdata: b\r\rdata: c\n\n".encode()
    _, whole = feed_all([body])
    assert [e.data for e in whole] == ["héllo", "a\nb", "c"]
    for cut in range(1, len(body)):  # every split point, including inside é and between \r and \n
        _, parts = feed_all([body[:cut], body[cut:]])
        assert [e.data for e in parts] == ["héllo", "a\nb", "c"], cut
    _, bytewise = feed_all([body[i:i + 1] for i in range(len(body))])
    assert [e.data for e in bytewise] == ["héllo", "a\nb", "c"]


def test_parser_empty_data_dispatches_and_unfinished_event_is_dropped():
    _, events = feed_all([b"data:\n\ndata: \n\ndata: tail-without-blank-line\n"])
    assert [e.data for e in events] == ["", ""]


def test_parse_stream_collects_chunks_errors_and_done():
    body = (b'data: {"id":"a","choices":[]}\n\n: ping\n\ndata: \n\ndata: not json\n\n'
            b'event: error\ndata: {"error":{"message":"x"}}\n\ndata: [DONE]\n\ndata: {"late":1}\n\n')
    p = parse_stream([body[:17], body[17:]])
    assert p.chunks == [{"id": "a", "choices": []}] and p.done
    assert p.errors == [{"error": {"message": "x"}}] and p.bad_data == ["not json"] and p.empty_data == 1


# ---------------------------------------------------------------- assembler on OpenAI-shaped streams


def _chunk(choices, **top):
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-x",
            "system_fingerprint": "fp_1"}
    base.update(top)
    base["choices"] = choices
    return base


def test_assemble_merges_tool_call_deltas_by_index():
    chunks = [
        _chunk([{"index": 0, "delta": {"role": "assistant", "content": None, "tool_calls": [
            {"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]},
            "finish_reason": None}]),
        _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}}]),
        _chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 1, "id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]}}]),
        _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}}]),
        _chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    ]
    out = assemble(chunks)
    msg = out["choices"][0]["message"]
    assert msg["content"] is None and msg["role"] == "assistant"
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in msg["tool_calls"]] == [
        ("call_a", "get_weather", '{"city": "Paris"}'), ("call_b", "get_time", "{}")]
    assert out["choices"][0]["finish_reason"] == "tool_calls"
    assert out["object"] == "chat.completion" and out["id"] == "chatcmpl-1" and out["system_fingerprint"] == "fp_1"


def test_new_id_on_reused_index_starts_a_new_call():
    chunks = [
        _chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}]),
        _chunk([{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "call_2", "function": {"name": "g", "arguments": "{"}}]}}]),
        _chunk([{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "}"}}]}}]),
        _chunk([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]),
    ]
    calls = assemble(chunks)["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("call_1", "f", '{"a":1}'), ("call_2", "g", "{}")]


def test_assemble_n_choices_usage_logprobs_and_unknown_fields():
    tok = lambda t: {"token": t, "logprob": -0.1, "bytes": list(t.encode()), "top_logprobs": []}  # noqa: E731
    chunks = [
        _chunk([{"index": 1, "delta": {"role": "assistant", "content": ""}, "logprobs": None}], usage=None, x_vendor="v"),
        _chunk([{"index": 0, "delta": {"role": "assistant", "content": "Hel", "reasoning_content": "th"},
                 "logprobs": {"content": [tok("Hel")], "refusal": None}}], usage=None, obfuscation="zz"),
        _chunk([{"index": 1, "delta": {"content": "Bye"}}], usage=None),
        _chunk([{"index": 0, "delta": {"content": "lo", "reasoning_content": "ink"},
                 "logprobs": {"content": [tok("lo")], "refusal": None}}], usage=None),
        _chunk([{"index": 0, "delta": {}, "finish_reason": "stop", "x_choice": 1}], usage=None),
        _chunk([{"index": 1, "delta": {}, "finish_reason": "length"}], usage=None),
        _chunk([], usage={"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}),
    ]
    out = assemble(chunks)
    c0, c1 = out["choices"]
    assert (c0["message"]["content"], c1["message"]["content"]) == ("Hello", "Bye")
    assert c0["message"]["reasoning_content"] == "think"
    assert [t["token"] for t in c0["logprobs"]["content"]] == ["Hel", "lo"] and c1["logprobs"] is None
    assert (c0["finish_reason"], c1["finish_reason"]) == ("stop", "length")
    assert c0["x_choice"] == 1 and out["x_vendor"] == "v" and "obfuscation" not in out
    assert out["usage"]["total_tokens"] == 5


def test_incomplete_streams_are_reported_not_dressed_up():
    chunks = [_chunk([{"index": 0, "delta": {"role": "assistant", "content": "partial"}}])]
    with pytest.raises(IncompleteStream) as exc:
        assemble(chunks)
    assert "choice 0 has no finish_reason" in exc.value.problems
    assert exc.value.partial["choices"][0]["message"]["content"] == "partial"
    assert exc.value.partial["choices"][0]["finish_reason"] is None
    done_chunks = chunks + [_chunk([{"index": 0, "delta": {}, "finish_reason": "stop"}])]
    with pytest.raises(IncompleteStream, match=r"no \[DONE\]"):
        assemble(done_chunks, done=False)
    with pytest.raises(IncompleteStream, match="no chunks"):
        assemble([])
    assert assemble(chunks, strict=False)["choices"][0]["finish_reason"] is None


# ---------------------------------------------------------------- the inverse


def _completion(**over):
    c = {
        "id": "chatcmpl-x", "object": "chat.completion", "created": 1700000000, "model": "gpt-x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there, world!", "refusal": None},
                     "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        "system_fingerprint": "fp_x",
    }
    c.update(over)
    return c


def test_to_chunks_shape_follows_openai():
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 12345}'}}
    comp = _completion(choices=[{"index": 0, "message": {"role": "assistant", "content": None, "refusal": None,
                                                         "tool_calls": [call]},
                                 "logprobs": None, "finish_reason": "tool_calls"}])
    chunks = to_chunks(comp, chunk_size=4, include_usage=True)
    first = chunks[0]["choices"][0]["delta"]
    assert first == {"role": "assistant", "content": None, "refusal": None}
    call_deltas = [c["choices"][0]["delta"]["tool_calls"][0] for c in chunks if c["choices"]
                   and "tool_calls" in c["choices"][0]["delta"]]
    assert call_deltas[0]["id"] == "call_1" and call_deltas[0]["function"] == {"name": "f", "arguments": ""}
    assert all("id" not in d and d["index"] == 0 for d in call_deltas[1:])
    assert "".join(d["function"]["arguments"] for d in call_deltas) == '{"a": 12345}'
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 3
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == "chatcmpl-x" for c in chunks)
    body = encode_chunks(chunks)
    assert body.endswith(b"data: [DONE]\n\n") and body.count(b"\n\n") == len(chunks) + 1


def test_encoding_survives_what_orjson_refuses():
    chunk = {"id": "x", "choices": [], "big": 2**70, "text": "lone \ud800 surrogate"}
    assert parse_stream(encode_chunks([chunk])).chunks == [chunk]


# Strategies for the round-trip property: text, tool calls, n choices, logprobs, extras.
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_call = st.builds(
    lambda i, name, args: {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}},
    st.integers(0, 10**6), st.from_regex(r"[a-z_]{1,12}", fullmatch=True), _text)


@st.composite
def _choice(draw, index):
    content = draw(st.one_of(st.none(), _text))
    calls = draw(st.lists(_call, max_size=3, unique_by=lambda c: c["id"]))
    refusal = draw(st.one_of(st.none(), _text.filter(bool)))
    msg = {"role": "assistant", "content": content, "refusal": refusal}
    if calls:
        msg["tool_calls"] = calls
    if draw(st.booleans()):
        msg["x_msg"] = draw(st.integers())
    logprobs = None
    if content and draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(1, len(content) - 1), max_size=5))) if len(content) > 1 else []
        toks = [content[a:b] for a, b in zip([0, *cuts], [*cuts, len(content)])]
        logprobs = {"content": [{"token": t, "logprob": -0.5, "bytes": None, "top_logprobs": []} for t in toks],
                    "refusal": None}
    choice = {"index": index, "message": msg, "logprobs": logprobs,
              "finish_reason": draw(st.sampled_from(["stop", "length", "tool_calls", "content_filter"]))}
    if draw(st.booleans()):
        choice["x_choice"] = "c"
    return choice


@st.composite
def _completions(draw):
    n = draw(st.integers(1, 3))
    comp = _completion(choices=[draw(_choice(i)) for i in range(n)])
    if draw(st.booleans()):
        comp["x_top"] = {"nested": [1, 2]}
    if draw(st.booleans()):
        comp["usage"] = None
    return comp


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_completions(), st.integers(0, 7))
def test_round_trip_assemble_of_to_chunks(comp, size):
    chunks = to_chunks(comp, chunk_size=size)
    assert assemble(chunks) == comp
    # and through the wire encoding and the parser, split into awkward reads
    body = encode_chunks(chunks)
    parsed = parse_stream([body[i:i + 7] for i in range(0, len(body), 7)])
    assert parsed.done and assemble(parsed.chunks) == comp


# ---------------------------------------------------------------- the real SDK reads our streams


def test_openai_sdk_accepts_to_chunks_output():
    """Served by the mock (which streams with to_chunks) and read by the SDK's own parser and
    accumulator: content, parallel tool calls, n=2, logprobs and the usage chunk all survive."""
    script = {"rules": [
        {"match": {"last_user": "tools"}, "reply": {"stream": {"chunk_size": 3}, "content": "Checking.", "tool_calls": [
            {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_p"},
            {"name": "get_weather", "arguments": {"city": "Rome"}, "id": "call_r"}]}},
        {"match": {"last_user": "two"}, "reply": {"stream": {"chunk_size": 2},
                                                   "choices": [{"content": "alpha"}, {"content": "beta gamma"}]}},
    ]}
    with MockUpstream(script) as m:
        client = openai.OpenAI(base_url=m.base_url, api_key="k", max_retries=0, timeout=10)
        tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
        with client.chat.completions.stream(model="m", tools=tools, messages=[{"role": "user", "content": "tools"}],
                                            stream_options={"include_usage": True}) as s:
            final = s.get_final_completion()
        msg = final.choices[0].message
        assert msg.content == "Checking." and final.choices[0].finish_reason == "tool_calls"
        assert [(c.id, json.loads(c.function.arguments)["city"]) for c in msg.tool_calls] == [
            ("call_p", "Paris"), ("call_r", "Rome")]
        assert final.usage is not None and final.usage.total_tokens > 0

        texts: dict[int, str] = {}
        lp_tokens = []
        for chunk in client.chat.completions.create(model="m", n=2, stream=True, logprobs=True,
                                                     messages=[{"role": "user", "content": "two"}]):
            for ch in chunk.choices:
                texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
                if ch.index == 1 and ch.logprobs and ch.logprobs.content:
                    lp_tokens += [t.token for t in ch.logprobs.content]
        assert texts == {0: "alpha", 1: "beta gamma"}
        assert "".join(lp_tokens) == "beta gamma"
