"""The sentinel's stream filter (:class:`proxy.pipeline.sentinel.DeltaFilter`) on generated wire shapes.

The filter must decide on the decoded JSON of each chunk, as the client's parser reads it: the
tool name written with ``\\u`` escapes, split over several deltas and frames, several calls
interleaved by ``index``, ``id`` values shared by our call and the client's, deltas without
``index``, our call beside the client's. The oracle is the generated call list itself (which
calls are the client's, their ids, names and arguments), never the filter's own reading; the
output is read back with the ``openai`` SDK's own stream accumulator.
"""

from __future__ import annotations

import pytest

import json
import random
import re
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from proxy.pipeline.sentinel import TOOL_NAME, DeltaFilter
from proxy.wire.sse import parse_stream
from proxy.wire.relay import SSERelay

CLIENT_NAMES = ["get_weather", "verify", "verify_resul", "verify_result_v2", "lookup"]
ID_POOL = ["call_1", "call_2", "call_3"]


def escape_json(text: str, rnd: random.Random, p: float, keep: frozenset[str] = frozenset()) -> str:
    """``text`` (compact JSON) with characters inside its strings written as ``\\uXXXX``
    escapes with probability ``p`` (the same JSON values: every parser decodes them back);
    strings in ``keep`` are left as they are."""
    def one(m: re.Match[str]) -> str:
        tok = m.group(0)
        if tok[1:-1] in keep:
            return tok
        out = ['"']
        for unit in re.findall(r"\\u[0-9a-fA-F]{4}|\\.|.", tok[1:-1], re.S):
            out.append("\\u%04x" % ord(unit) if len(unit) == 1 and rnd.random() < p else unit)
        return "".join(out) + '"'

    return re.sub(r'"(?:[^"\\]|\\.)*"', one, text)


def pieces(text: str, rnd: random.Random, most: int) -> list[str]:
    """``text`` cut into 1..``most`` consecutive pieces (some may be empty)."""
    cuts = sorted(rnd.randint(0, len(text)) for _ in range(rnd.randint(0, most - 1)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


@st.composite
def streams(draw: Any) -> dict[str, Any]:
    """A generated upstream stream: calls (ours and the client's), how their deltas are cut,
    interleaved, indexed and escaped, and how the bytes are cut into reads."""
    seed = draw(st.integers(0, 2**32 - 1))
    rnd = random.Random(seed)
    n_ours = draw(st.integers(0, 2))
    n_theirs = draw(st.integers(0, 3))
    if n_ours + n_theirs == 0:
        n_ours = 1
    kinds = [True] * n_ours + [False] * n_theirs
    rnd.shuffle(kinds)
    # index modes: distinct indexes (interleaving allowed, ids may collide), one index for all
    # (calls one after the other, distinct ids: a new id starts a new call), no index at all
    mode = draw(st.sampled_from(["distinct", "same", "none"]))
    calls = []
    for i, ours in enumerate(kinds):
        name = TOOL_NAME if ours else rnd.choice(CLIENT_NAMES)
        city = rnd.choice(["Paris", "Zürich", "a\"b"])
        args = json.dumps({"is_ready": True, "n": i} if ours else {"city": city, "n": i})
        cid = rnd.choice(ID_POOL) if mode == "distinct" else f"call_{i}_{rnd.randint(0, 999)}"
        calls.append({"ours": ours, "name": name, "args": args, "id": cid})
    indexes = rnd.sample(range(0, 9), len(calls)) if mode == "distinct" else [0] * len(calls)
    seqs = []
    for k, (call, idx) in enumerate(zip(calls, indexes)):
        names = pieces(call["name"], rnd, 3)
        seq: list[dict[str, Any]] = [{"id": call["id"], "type": "function",
                                      "function": {"name": names[0], "arguments": ""}}]
        seq += [{"function": {"name": p}} for p in names[1:]]
        seq += [{"function": {"arguments": p}} for p in pieces(call["args"], rnd, 4) if p]
        for d in seq:
            if mode != "none":
                d["index"] = idx
        seqs.append([(k, d) for d in seq])
    # the order of deltas: interleaved (distinct indexes only) or one call after the other
    order: list[dict[str, Any]] = []
    if mode == "distinct" and draw(st.booleans()):
        queues = [list(s) for s in seqs]
        while any(queues):
            q = rnd.choice([q for q in queues if q])
            order.append(q.pop(0))
    else:
        order = [d for s in seqs for d in s]
    first_seen = list(dict.fromkeys(k for k, _ in order))   # calls in order of their first delta
    order = [d for _, d in order]
    content = draw(st.sampled_from([None, "Checking the weather."]))
    finish = draw(st.sampled_from(["tool_calls", "tool_calls", "stop"]))
    base = {"id": "chatcmpl-g", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [dict(base, choices=[{"index": 0, "delta": {"role": "assistant", "content": content and ""},
                                   "finish_reason": None}])]
    if content:
        chunks.append(dict(base, choices=[{"index": 0, "delta": {"content": content}, "finish_reason": None}]))
    i = 0
    while i < len(order):
        k = rnd.randint(1, 3)
        chunks.append(dict(base, choices=[{"index": 0, "delta": {"tool_calls": order[i:i + k]},
                                           "finish_reason": None}]))
        i += k
    chunks.append(dict(base, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]))
    p = draw(st.sampled_from([0.0, 0.1, 1.0]))
    # escaped keys too: proxy.wire.relay.SSERelay spots finish_reason by its bytes, so a stream
    # with that key escaped goes to the filter straight, the others through the relay first
    keys = draw(st.booleans())
    keep = frozenset() if keys else frozenset({"finish_reason"})
    wire = "".join("data: " + escape_json(json.dumps(c, separators=(",", ":"), ensure_ascii=False), rnd, p, keep)
                   + "\n\n" for c in chunks) + "data: [DONE]\n\n"
    data = wire.encode()
    cuts = sorted(rnd.randint(0, len(data)) for _ in range(rnd.randint(0, 12)))
    reads = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
    return {"calls": [calls[k] for k in first_seen], "reads": reads, "finish": finish, "content": content,
            "seed": seed, "mode": mode, "relay": not keys}


def run_filter(reads: list[bytes], relay: bool = True) -> bytes:
    """The gateway's path: the upstream's reads through :class:`SSERelay` (when ``relay``),
    then the filter."""
    f = DeltaFilter()
    if not relay:
        return b"".join(f(r) for r in reads) + f.flush()
    sse = SSERelay()
    out = [f(sse.feed(r)) for r in reads]
    out.append(f(sse.flush()))
    out.append(f.flush())
    return b"".join(out)


def sdk_read(body: bytes) -> tuple[Any, list[dict[str, Any]]]:
    """The final completion as the ``openai`` SDK's stream accumulator builds it, and the raw
    tool-call deltas the client received."""
    parsed = parse_stream(body)
    assert parsed.done and not parsed.bad_data and not parsed.errors
    state = ChatCompletionStreamState()
    deltas = []
    for c in parsed.chunks:
        for ch in c["choices"]:
            deltas += ch["delta"].get("tool_calls") or []
        state.handle_chunk(ChatCompletionChunk.model_validate(c))
    return state.get_final_completion(), deltas


@settings(max_examples=400, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(streams())
@pytest.mark.slow
def test_only_the_clients_calls_reach_the_client(s):
    out = run_filter(s["reads"], s["relay"])
    final, deltas = sdk_read(out)
    want = [c for c in s["calls"] if not c["ours"]]
    choice = final.choices[0]
    got = [(tc.id, tc.function.name, tc.function.arguments) for tc in choice.message.tool_calls or []]
    assert got == [(c["id"], c["name"], c["args"]) for c in want], s["seed"]
    # every relayed delta has an index, numbered 0.. in order of first appearance
    seen: list[int] = []
    for d in deltas:
        assert isinstance(d.get("index"), int)
        if d["index"] not in seen:
            assert d["index"] == len(seen)
            seen.append(d["index"])
    assert "is_ready" not in json.dumps(parse_stream(out).chunks)   # none of our arguments
    assert choice.finish_reason == ("tool_calls" if want else "stop")
    assert (choice.message.content or None) == s["content"]


def test_escaped_name_in_a_frame_of_its_own_is_dropped():
    """The case seen: ``verify\\u005fresult`` alone in its frame, its arguments in later ones,
    beside the client's call with the same id."""
    base = '{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    frames = [
        base + '"delta":{"role":"assistant","content":null},"finish_reason":null}]}',
        base + '"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"verify\\u005fresult","arguments":""}}]},"finish_reason":null}]}',
        base + '"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"is_ready\\": true}"}}]},"finish_reason":null}]}',
        base + '"delta":{"tool_calls":[{"index":1,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":null}]}',
        base + '"delta":{},"finish_reason":"tool_calls"}]}',
    ]
    out = run_filter([("".join(f"data: {f}\n\n" for f in frames) + "data: [DONE]\n\n").encode()])
    final, deltas = sdk_read(out)
    assert [(tc.index, tc.id, tc.function.name) for tc in final.choices[0].message.tool_calls] == \
        [(0, "call_1", "get_weather")]
    assert [d["index"] for d in deltas] == [0] and final.choices[0].finish_reason == "tool_calls"
    assert b"is_ready" not in out


def test_name_split_across_frames_is_held_until_decided():
    """``verify`` + ``_result`` in two frames: the first frame is held (it may be ours), and
    released once the name is known; a client name that only starts like ours is relayed."""
    def frame(delta, finish=None):
        return ("data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                                       "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
                + "\n\n").encode()

    f = DeltaFilter()
    assert f(frame({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "verify", "arguments": ""}}]})) == b""
    assert f(frame({"tool_calls": [{"index": 0, "function": {"name": "_result"}}]})) == b""
    assert f(frame({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})) == b""  # decided: ours
    out = f(frame({}, "tool_calls")) + f(b"data: [DONE]\n\n")
    assert parse_stream(out).chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert b"tool_calls\":[" not in out
    g = DeltaFilter()
    assert g(frame({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "verify", "arguments": ""}}]})) == b""
    out = g(frame({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}))   # "verify" is the client's
    final, _ = sdk_read(out + g(frame({}, "tool_calls")) + g(b"data: [DONE]\n\n"))
    assert [(tc.id, tc.function.name, tc.function.arguments) for tc in final.choices[0].message.tool_calls] == \
        [("a", "verify", "{}")]


def test_frames_without_our_tool_pass_byte_for_byte():
    body = (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
            b'"delta":{"tool_calls":[{"index":0,"id":"w","type":"function","function":{"name":"get_weather",'
            b'"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\n: keep-alive\n\ndata: [DONE]\n\n')
    assert DeltaFilter()(body) == body
