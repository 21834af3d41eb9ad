"""The sentinel on streams (docs/sentinel.md, streams): a ``stream: true`` request under a policy
that offers ``verify_result`` (the shipped ``agent`` policy, passthrough streaming) gets the tool;
its calls are intercepted (never relayed), its rounds run, and the final turn is relayed -- one
valid SSE stream with the report. The real gateway, the real ``openai`` SDK streaming client and
the scripted mock upstream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.pipeline.sentinel import DeltaFilter
from proxy.wire.sse import encode_chunks, parse_stream, to_chunks
from tests.conftest import ROOT
from tests.fixtures.mock import rule_bodies, scripted_mock, tool_names

BOTH = "Please answer both:\n1. What is the capital of France?\n2. What is the capital of Spain?"
FINAL = "The capital of France is Paris. The capital of Spain is Madrid."
HALF = "The capital of France is Paris."
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                                  "required": ["city"]}}}
WEATHER_CALL = {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}


def vr(ready: bool, call_id: str = "call_vr1") -> dict[str, Any]:
    return {"id": call_id, "name": "verify_result", "arguments": json.dumps({
        "task_goal": "capitals of France and Spain", "actual_result": HALF if not ready else FINAL,
        "missing_items": [] if ready else ["capital of Spain"], "errors_found": [], "is_ready": ready})}


def _raw(deltas: list[tuple[dict[str, Any], str | None]], escape: bool = True) -> list[str]:
    """An SSE body (one write per frame) of one choice's ``(delta, finish_reason)`` chunks, the
    tool name written ``verify\\u005fresult`` (the same JSON value, other bytes)."""
    out = []
    for delta, finish in deltas:
        text = json.dumps({"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        out.append("data: " + (text.replace("verify_result", "verify\\u005fresult") if escape else text) + "\n\n")
    return out + ["data: [DONE]\n\n"]


def _tc(index: int, call_id: str | None = None, name: str | None = None, arguments: str = "") -> dict[str, Any]:
    d: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        d.update(id=call_id, type="function")
    if name is not None:
        d["function"]["name"] = name
    return d


VR_ARGS = json.loads(vr(True)["arguments"])
#: the final live turn calls verify_result anyway, its name escaped in a frame of its own, beside
#: the client's call that reuses its id
ESCAPED_MIXED = _raw([
    ({"role": "assistant", "content": None}, None),
    ({"tool_calls": [_tc(0, "call_vr1", "verify_result")]}, None),
    ({"tool_calls": [_tc(0, arguments=json.dumps(VR_ARGS)[:20])]}, None),
    ({"tool_calls": [_tc(1, "call_vr1", "get_weather")]}, None),
    ({"tool_calls": [_tc(0, arguments=json.dumps(VR_ARGS)[20:])]}, None),
    ({"tool_calls": [_tc(1, arguments=WEATHER_CALL["arguments"])]}, None),
    ({}, "tool_calls"),
])
#: only ours, escaped, with the final text
ESCAPED_ALONE = _raw([
    ({"role": "assistant", "content": ""}, None),
    ({"content": FINAL}, None),
    ({"tool_calls": [_tc(0, "call_vr3", "verify_result")]}, None),
    ({"tool_calls": [_tc(0, arguments=json.dumps(VR_ARGS))]}, None),
    ({}, "tool_calls"),
])
#: the name split across frames ("verify" + "_result"), the client's call interleaved at index 0
SPLIT_INTERLEAVED = _raw([
    ({"role": "assistant", "content": None}, None),
    ({"tool_calls": [_tc(1, "call_vr4", "verify")]}, None),
    ({"tool_calls": [_tc(0, "call_w1", "get_")]}, None),
    ({"tool_calls": [_tc(1, name="_result")]}, None),
    ({"tool_calls": [_tc(0, name="weather")]}, None),
    ({"tool_calls": [_tc(1, arguments=json.dumps(VR_ARGS))]}, None),
    ({"tool_calls": [_tc(0, arguments=WEATHER_CALL["arguments"])]}, None),
    ({}, "stop"),
], escape=False)

RULES: list[dict[str, Any]] = [
    # the model finds itself ready, then calls the tool again in the live final turn, in wire
    # shapes a byte-level filter misses
    *({"name": f"{tag}-final", "match": {"any_message": rf"\[case:{tag}\]", "last_role": "tool"},
       "reply": {"raw_stream": raw}}
      for tag, raw in (("sesc", ESCAPED_MIXED), ("salone", ESCAPED_ALONE), ("ssplit", SPLIT_INTERLEAVED))),
    *({"name": f"{tag}-check", "match": {"last_user": rf"\[case:{tag}\]"},
       "reply": {"content": None, "tool_calls": [vr(True)]}} for tag in ("sesc", "salone", "ssplit")),
    # the model checks itself, finds the forgotten sub-task, then answers in full
    {"name": "sstream-final", "match": {"any_message": r"\[case:sstream\]", "last_role": "tool"},
     "reply": {"content": FINAL, "stream": {"chunk_size": 8}}},
    {"name": "sstream-check", "match": {"last_user": r"\[case:sstream\]", "tool": "verify_result"},
     "reply": {"content": HALF, "tool_calls": [vr(False)]}},
    # checks itself, finds the answer ready: the final turn (no tool offered) is streamed live
    {"name": "sready-final", "match": {"any_message": r"\[case:sready\]", "last_role": "tool"},
     "reply": {"content": FINAL, "stream": {"chunk_size": 8}}},
    {"name": "sready-check", "match": {"last_user": r"\[case:sready\]"},
     "reply": {"content": None, "tool_calls": [vr(True)]}},
    # not ready, then ready (held, the tool is still offered), then a final turn that calls the
    # tool again although it is no longer offered
    {"name": "stubborn-next", "match": {"any_message": r"\[case:stubborn\]", "last_role": "tool"},
     "replies": [{"content": None, "tool_calls": [vr(True, "call_vr2")]},
                 {"content": FINAL, "tool_calls": [vr(True, "call_vr3")]}]},
    {"name": "stubborn-check", "match": {"last_user": r"\[case:stubborn\]"},
     "reply": {"content": None, "tool_calls": [vr(False)]}},
    # the app's own tool, alone and beside verify_result
    {"name": "stool", "match": {"any_message": r"\[case:stool\]"}, "reply": {"content": None, "tool_calls": [WEATHER_CALL]}},
    {"name": "smixed", "match": {"any_message": r"\[case:smixed\]"},
     "reply": {"content": None, "tool_calls": [vr(True), WEATHER_CALL]}},
    # answers at once; when forced to check, finds it ready
    {"name": "sdirect-forced", "match": {"any_message": r"\[case:sdirect\]", "tool_choice": "verify_result"},
     "reply": {"content": None, "tool_calls": [vr(True)]}},
    {"name": "sdirect", "match": {"any_message": r"\[case:sdirect\]"}, "reply": {"content": FINAL}},
]

mock, _reset_mock = scripted_mock({"models": ["gpt-test"], "rules": RULES})

TEST_POLICY = {"name": "sent", "on_failure": "correct", "risk": {"threshold": 0.1},
               "sentinel": {"mode": "offered", "when": "always", "max_rounds": 3},
               "streaming": {"mode": "passthrough", "keepalive_s": 0.05},
               "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False},
                             "planner": {"enabled": False}}}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("stream-sentinel")
    pdir = tmp / "policies"
    pdir.mkdir()
    # the shipped agent policy as it is, beside a test policy with the sentinel offered
    (pdir / "agent.yaml").write_text((Path(ROOT) / "policies" / "agent.yaml").read_text())
    (pdir / "sent.yaml").write_text(yaml.safe_dump(TEST_POLICY))
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"review_db": str(tmp / "reviews.sqlite3"), "budget_db": str(tmp / "budget.sqlite3")}}
    return gateway_factory(cfg)


def stream(gw, policy: str, tag: str, **kw) -> dict[str, Any]:
    """Read one stream with the SDK: text, tool calls (merged by index), finish reasons, chunk
    ids, reports."""
    c = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, timeout=60,
                      default_headers={"x-veracity-policy": policy})
    out: dict[str, Any] = {"text": "", "calls": {}, "finishes": [], "ids": set(), "reports": []}
    for chunk in c.chat.completions.create(model="gpt-test", stream=True, **kw,
                                           messages=[{"role": "user", "content": f"[case:{tag}] {BOTH}"}]):
        out["ids"].add(chunk.id)
        if (chunk.model_extra or {}).get("veracity"):
            out["reports"].append(chunk.model_extra["veracity"])
        for ch in chunk.choices:
            out["text"] += ch.delta.content or ""
            for tc in ch.delta.tool_calls or []:
                call = out["calls"].setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                call["id"] += tc.id or ""
                call["name"] += (tc.function.name or "") if tc.function else ""
                call["arguments"] += (tc.function.arguments or "") if tc.function else ""
            if ch.finish_reason:
                out["finishes"].append(ch.finish_reason)
    return out


@pytest.mark.parametrize("policy", ["sent", "agent"])
def test_stream_offers_the_sentinel_and_its_rounds_run(gw, mock, policy):
    s = stream(gw, policy, "sstream")
    assert s["text"] == FINAL                      # the held turn's text ("Paris." alone) never went out
    assert s["calls"] == {} and s["finishes"] == ["stop"] and len(s["ids"]) == 1
    assert len(s["reports"]) == 1
    sent = s["reports"][0]["sentinel"]
    assert sent["injected"] and sent["called"] and sent["missing_items"] == ["capital of Spain"]
    assert sent["rounds"] == 1 and s["reports"][0]["cost"]["upstream_calls"] == 1
    first, final = rule_bodies(mock, "sstream-check"), rule_bodies(mock, "sstream-final")
    assert len(first) == 1 and first[0]["stream"] is True and "verify_result" in tool_names(first[0])
    # not ready: the next turn is offered the tool again, so it is held (a non-stream call)
    assert len(final) == 1 and not final[0].get("stream") and "verify_result" in tool_names(final[0])
    assert final[0]["messages"][-1]["role"] == "tool" and "capital of Spain" in final[0]["messages"][-1]["content"]


@pytest.mark.parametrize("policy", ["sent", "agent"])
def test_ready_answer_is_streamed_live_without_the_tool(gw, mock, policy):
    s = stream(gw, policy, "sready")
    assert s["text"] == FINAL and s["calls"] == {} and s["finishes"] == ["stop"] and len(s["ids"]) == 1
    assert s["reports"][0]["sentinel"]["result"] == "ready"
    final = rule_bodies(mock, "sready-final")
    assert len(final) == 1 and final[0]["stream"] is True and "verify_result" not in tool_names(final[0])


def test_raw_stream_is_one_valid_sse_stream(gw):
    body = {"model": "gpt-test", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": f"[case:sready] {BOTH}"}]}
    with httpx.stream("POST", gw.base_url + "/chat/completions", json=body, timeout=60, trust_env=False,
                      headers={"x-veracity-policy": "sent", "authorization": "Bearer sk-test"}) as r:
        raw = b"".join(r.iter_bytes())
    assert raw.startswith(b": keep-alive\n\n") and raw.endswith(b"data: [DONE]\n\n")
    assert b"verify_result" not in raw.split(b'"veracity"')[0]  # only the report may name it
    parsed = parse_stream(raw)
    assert parsed.done and not parsed.errors and not parsed.bad_data
    ids = {c["id"] for c in parsed.chunks}
    assert len(ids) == 1
    usage = [c for c in parsed.chunks if c.get("choices") == []]
    assert len(usage) == 1 and usage[0]["usage"] and usage[0]["veracity"]["sentinel"]["called"]
    assert "".join(ch["delta"].get("content") or "" for c in parsed.chunks for ch in c["choices"]) == FINAL
    finishes = [ch["finish_reason"] for c in parsed.chunks for ch in c["choices"] if ch.get("finish_reason")]
    assert finishes == ["stop"]


def test_verify_result_in_the_live_final_turn_is_not_relayed(gw, mock):
    s = stream(gw, "sent", "stubborn")
    assert s["text"] == FINAL and s["calls"] == {} and s["finishes"] == ["stop"] and len(s["ids"]) == 1
    assert s["reports"][0]["sentinel"]["missing_items"] == ["capital of Spain"]
    assert s["reports"][0]["sentinel"]["rounds"] == 2
    last = rule_bodies(mock, "stubborn-next")[-1]
    assert last["stream"] is True and "verify_result" not in tool_names(last)


def test_client_tool_calls_are_relayed(gw):
    s = stream(gw, "sent", "stool", tools=[WEATHER_TOOL])
    assert s["calls"] == {0: {"id": WEATHER_CALL["id"], "name": "get_weather", "arguments": WEATHER_CALL["arguments"]}}
    assert s["finishes"] == ["tool_calls"] and len(s["reports"]) == 1


def test_mixed_turn_relays_only_the_client_call(gw):
    s = stream(gw, "sent", "smixed", tools=[WEATHER_TOOL])
    assert s["calls"] == {0: {"id": WEATHER_CALL["id"], "name": "get_weather", "arguments": WEATHER_CALL["arguments"]}}
    assert s["finishes"] == ["tool_calls"]
    assert s["reports"][0]["sentinel"]["result"] == "mixed"


def test_answer_without_the_tool_is_streamed_and_forced_check_runs_under_agent(gw, mock):
    s = stream(gw, "sent", "sdirect")              # offered: the held answer is the final one
    assert s["text"] == FINAL and s["finishes"] == ["stop"]
    assert s["reports"][0]["sentinel"]["result"] == "not_called"
    s = stream(gw, "agent", "sdirect")             # forced: one non-stream check, found ready
    assert s["text"] == FINAL and s["finishes"] == ["stop"] and s["calls"] == {}
    assert s["reports"][0]["sentinel"]["result"] == "forced_ready"
    forced = rule_bodies(mock, "sdirect-forced")
    assert len(forced) == 1 and not forced[0].get("stream")


def raw_stream(gw, tag: str, **kw) -> bytes:
    body = {"model": "gpt-test", "stream": True, "tools": [WEATHER_TOOL], **kw,
            "messages": [{"role": "user", "content": f"[case:{tag}] {BOTH}"}]}
    with httpx.stream("POST", gw.base_url + "/chat/completions", json=body, timeout=60, trust_env=False,
                      headers={"x-veracity-policy": "sent", "authorization": "Bearer sk-test"}) as r:
        return b"".join(r.iter_bytes())


@pytest.mark.parametrize("tag", ["sesc", "ssplit"])
def test_escaped_or_split_sentinel_call_beside_a_client_call_is_not_relayed(gw, mock, tag):
    s = stream(gw, "sent", tag, tools=[WEATHER_TOOL])
    assert s["calls"] == {0: {"id": WEATHER_CALL["id"] if tag == "ssplit" else "call_vr1", "name": "get_weather",
                              "arguments": WEATHER_CALL["arguments"]}}
    assert s["finishes"] == ["tool_calls"] and len(s["ids"]) == 1 and len(s["reports"]) == 1
    assert rule_bodies(mock, f"{tag}-final")[-1]["stream"] is True
    raw = raw_stream(gw, tag)
    parsed = parse_stream(raw)
    assert parsed.done and not parsed.bad_data and not parsed.errors
    relayed = [ch for c in parsed.chunks for ch in c["choices"]]
    assert "is_ready" not in json.dumps(relayed)           # none of our call's arguments
    deltas = [tc for ch in relayed for tc in ch["delta"].get("tool_calls") or []]
    assert {tc["index"] for tc in deltas} == {0} and [tc["id"] for tc in deltas if tc.get("id")] == [s["calls"][0]["id"]]


def test_escaped_sentinel_call_alone_is_not_relayed(gw):
    s = stream(gw, "sent", "salone", tools=[WEATHER_TOOL])
    assert s["text"] == FINAL and s["calls"] == {} and s["finishes"] == ["stop"] and len(s["ids"]) == 1
    assert s["reports"][0]["sentinel"]["result"] == "ready"
    assert b"is_ready" not in raw_stream(gw, "salone").split(b'"veracity"')[0]


# ------------------------------------------------------------------------------ DeltaFilter

def _completion(calls: list[dict[str, Any]], content: str | None = None) -> dict[str, Any]:
    tc = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
          for c in calls]
    return {"id": "chatcmpl-f", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "tool_calls": tc},
                         "finish_reason": "tool_calls"}]}


def test_delta_filter_drops_our_deltas_and_renumbers_the_clients():
    from proxy.wire.sse import assemble

    wire = encode_chunks(to_chunks(_completion([vr(True), WEATHER_CALL]), chunk_size=5))
    f = DeltaFilter()
    out = b"".join(f(frame + b"\n\n") for frame in wire.split(b"\n\n") if frame)
    done = assemble(parse_stream(out).chunks)
    calls = done["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [(WEATHER_CALL["id"], "get_weather", WEATHER_CALL["arguments"])]
    assert b"verify_result" not in out and b'"index":1' not in out.replace(b" ", b"")
    # only ours: the choice finishes with stop, the text is kept
    out = DeltaFilter()(encode_chunks(to_chunks(_completion([vr(False)], content=FINAL), chunk_size=7)))
    done = assemble(parse_stream(out).chunks)
    assert done["choices"][0]["finish_reason"] == "stop" and done["choices"][0]["message"]["content"] == FINAL
    assert "tool_calls" not in done["choices"][0]["message"]
    # frames without our tool pass byte for byte
    plain = encode_chunks(to_chunks(_completion([WEATHER_CALL])))
    assert DeltaFilter()(plain) == plain
