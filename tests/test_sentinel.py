"""The sentinel: injection rules, the settle loop, forced mode, mixed turns (no HTTP)."""

import json

import pytest

from proxy.budget import RequestBudget
from proxy.sentinel import RULE, TOOL, TOOL_NAME, inject, overhead_tokens, settle, should_inject, strip_sentinel

CLIENT_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
Q = "1. Give the capital of France\n2. Give the capital of Spain"
BODY = {"model": "m", "messages": [{"role": "user", "content": Q}]}


def vr_call(cid="s1", ready=True, missing=(), errors=()):
    args = {"task_goal": "two capitals", "actual_result": "Paris", "missing_items": list(missing),
            "errors_found": list(errors), "is_ready": ready}
    return {"id": cid, "type": "function", "function": {"name": TOOL_NAME, "arguments": json.dumps(args)}}


def client_call(cid="c1"):
    return {"id": cid, "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def comp(content=None, calls=None, finish=None, tokens=30):
    msg = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = calls
    return {"id": "x", "object": "chat.completion",
            "choices": [{"index": 0, "message": msg, "finish_reason": finish or ("tool_calls" if calls else "stop")}],
            "usage": {"prompt_tokens": tokens - 5, "completion_tokens": 5, "total_tokens": tokens}}


class Upstream:
    def __init__(self, *replies):
        self.replies = list(replies)
        self.bodies = []

    async def __call__(self, body):
        self.bodies.append(body)
        return self.replies.pop(0)


def test_rule_is_at_most_three_lines_with_must_wording():
    assert len(RULE.splitlines()) <= 3
    assert "must" in RULE and "explicitly asked" in RULE
    assert "Must be called before the final answer" in TOOL["function"]["description"]
    assert set(TOOL["function"]["parameters"]["required"]) == {
        "task_goal", "actual_result", "missing_items", "errors_found", "is_ready"}


@pytest.mark.parametrize("tc,ok", [
    (None, True), ("auto", True), ("none", False), ("required", False),
    ({"type": "function", "function": {"name": "get_weather"}}, False),
])
def test_should_inject_respects_client_tool_choice(tc, ok):
    body = dict(BODY, tools=[CLIENT_TOOL])
    if tc is not None:
        body["tool_choice"] = tc
    assert should_inject(body, "offered")[0] is ok
    assert should_inject(body, "off")[0] is False


def test_should_inject_multi_part_gate():
    assert should_inject(BODY, "offered", "multi_part", multi_part=False) == (False, "question not multi-part")
    assert should_inject(BODY, "forced", "multi_part", multi_part=True)[0]


def test_inject_not_last_and_rule_added_without_touching_client_body():
    body = dict(BODY, tools=[CLIENT_TOOL, dict(CLIENT_TOOL)],
                messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": Q}])
    new = inject(body)
    names = [t["function"]["name"] for t in new["tools"]]
    assert names.index(TOOL_NAME) != len(names) - 1 and len(names) == 3
    assert new["messages"][0]["content"].startswith("Be brief.") and RULE in new["messages"][0]["content"]
    assert body["messages"][0]["content"] == "Be brief." and len(body["tools"]) == 2
    plain = inject(BODY)
    assert plain["messages"][0] == {"role": "system", "content": RULE}
    assert plain["tools"] == [TOOL]


async def test_offered_ready_asks_for_final_answer_without_the_tool():
    up = Upstream(comp("Paris and Madrid."))
    body = inject(BODY)
    res = await settle(body, comp(None, [vr_call(ready=True)]), up, mode="offered")
    assert res.completion["choices"][0]["message"] == {"role": "assistant", "content": "Paris and Madrid."}
    assert res.info["called"] and res.info["result"] == "ready" and res.info["rounds"] == 1
    sent = up.bodies[0]
    assert "tools" not in sent  # no client tools left once ready
    assert sent["messages"][-2]["tool_calls"][0]["function"]["name"] == TOOL_NAME
    assert sent["messages"][-1]["role"] == "tool" and sent["messages"][-1]["tool_call_id"] == "s1"


async def test_forgotten_subtask_is_sent_back_with_missing_items():
    up = Upstream(comp(None, [vr_call("s2", ready=True)]), comp("Paris. Madrid."))
    res = await settle(inject(BODY), comp(None, [vr_call(ready=False, missing=["capital of Spain"])]), up,
                       mode="offered", max_rounds=3)
    first = up.bodies[0]
    assert "capital of Spain" in first["messages"][-1]["content"]
    assert any(t["function"]["name"] == TOOL_NAME for t in first["tools"])  # still offered until ready
    assert res.completion["choices"][0]["message"]["content"] == "Paris. Madrid."
    assert res.info["missing_items"] == ["capital of Spain"] and res.info["rounds"] == 2
    assert res.info["extra_calls"] == 2 and res.info["extra_tokens"] == 60


async def test_max_rounds_bounds_the_loop():
    up = Upstream(*[comp(None, [vr_call(f"s{i}", ready=False, errors=["e"])]) for i in range(5)])
    res = await settle(inject(BODY), comp("draft", [vr_call(ready=False, errors=["e"])]), up, max_rounds=2)
    assert len(up.bodies) == 2 and res.info["result"] == "max_rounds"
    assert "tool_calls" not in res.completion["choices"][0]["message"]
    # the last allowed call no longer offers the tool
    assert "tools" not in up.bodies[-1]


async def test_mixed_turn_returns_only_client_calls():
    draft = comp(None, [vr_call(ready=False, missing=["x"]), client_call()])
    up = Upstream()
    res = await settle(inject(dict(BODY, tools=[CLIENT_TOOL])), draft, up)
    msg = res.completion["choices"][0]["message"]
    assert msg["tool_calls"] == [client_call()]
    assert res.completion["choices"][0]["finish_reason"] == "tool_calls"
    assert res.info["result"] == "mixed" and res.info["calls"][0]["missing_items"] == ["x"]
    assert up.bodies == []


async def test_client_tool_calls_untouched_when_sentinel_not_called():
    draft = comp(None, [client_call()])
    res = await settle(inject(dict(BODY, tools=[CLIENT_TOOL])), draft, Upstream(), mode="forced")
    assert res.completion == draft and res.info["called"] is False


async def test_forced_ready_returns_the_draft_as_is_with_one_extra_call():
    up = Upstream(comp(None, [vr_call(ready=True)]))
    draft = comp("Paris. Madrid.")
    res = await settle(inject(BODY), draft, up, mode="forced")
    assert res.completion == draft and res.info["result"] == "forced_ready"
    assert len(up.bodies) == 1
    assert up.bodies[0]["tool_choice"] == {"type": "function", "function": {"name": TOOL_NAME}}
    assert up.bodies[0]["messages"][-1] == {"role": "assistant", "content": "Paris. Madrid."}


async def test_forced_not_ready_makes_a_third_call():
    up = Upstream(comp(None, [vr_call(ready=False, missing=["capital of Spain"])]), comp("Paris. Madrid."))
    res = await settle(inject(BODY), comp("Paris."), up, mode="forced")
    assert res.completion["choices"][0]["message"]["content"] == "Paris. Madrid."
    assert res.info["result"] == "forced_not_ready" and len(up.bodies) == 2
    assert "tools" not in up.bodies[1] and "tool_choice" not in up.bodies[1]


async def test_budget_exhausted_returns_current_without_sentinel_calls():
    budget = RequestBudget(extra_calls=0)
    res = await settle(inject(BODY), comp("partial", [vr_call(ready=False)]), Upstream(), budget=budget)
    assert res.info["result"] == "budget"
    assert res.completion["choices"][0]["message"] == {"role": "assistant", "content": "partial"}
    assert res.completion["choices"][0]["finish_reason"] == "stop"


async def test_malformed_arguments_count_as_not_ready():
    bad = {"id": "s1", "type": "function", "function": {"name": TOOL_NAME, "arguments": "{not json"}}
    up = Upstream(comp("final"))
    res = await settle(inject(BODY), comp(None, [bad]), up, max_rounds=1)
    assert res.info["result"] == "not_ready" and res.info["errors_found"]
    assert res.completion["choices"][0]["message"]["content"] == "final"


def test_strip_sentinel_keeps_other_choices():
    c = comp(None, [vr_call()])
    c["choices"].append({"index": 1, "message": {"role": "assistant", "content": "b"}, "finish_reason": "stop"})
    out = strip_sentinel(c)
    assert out["choices"][0]["message"]["content"] == "" and out["choices"][0]["finish_reason"] == "stop"
    assert out["choices"][1]["message"]["content"] == "b"


def test_overhead_tokens_measured():
    n, exact = overhead_tokens()
    assert 60 <= n <= 250


def test_overhead_tokens_cached_never_blocks():
    import time

    from proxy import sentinel

    sentinel._OVERHEAD.pop("cl100k_base", None)
    first = sentinel.overhead_tokens_cached("cl100k_base")
    deadline = time.monotonic() + 30
    while sentinel.overhead_tokens_cached("cl100k_base") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first is None or first > 0
    assert sentinel.overhead_tokens_cached("cl100k_base") == sentinel.overhead_tokens("cl100k_base")[0]
