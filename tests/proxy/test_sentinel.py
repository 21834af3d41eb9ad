"""The sentinel: injection rules, the settle loop, forced mode, mixed turns (no HTTP)."""

import json

import pytest

from proxy.stores.budget import RequestBudget
from proxy.pipeline.sentinel import (EXHAUSTED_REASON, RULE, TOOL, TOOL_NAME, exhaustion_check, exhaustion_reason,
                            exhaustion_verdict, inject, overhead_tokens, settle, should_inject, strip_sentinel)
from verifiers._types import Check, Report

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
    assert "must never call a tool more than twice in a row" in RULE  # docs/sentinel.md's rule
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
    # the third call (past max_rounds) is not executed: the loop ends as exhausted (was "max_rounds")
    assert len(up.bodies) == 2 and res.info["result"] == "exhausted"
    assert res.info["exhausted"]["by"] == "max_rounds" and res.info["exhausted"]["errors_found"] == ["e"]
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
    # the one round ran out unready: exhausted (was "not_ready"); the gateway's "not valid JSON"
    # is recorded, but it is not an error the model listed
    assert res.info["result"] == "exhausted" and res.info["errors_found"]
    assert res.info["exhausted"]["errors_found"] == [] and res.info["exhausted"]["malformed"] == 1
    assert exhaustion_check(res.info).outcome == "unknown"
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

    from proxy.pipeline import sentinel

    sentinel._OVERHEAD.pop("cl100k_base", None)
    first = sentinel.overhead_tokens_cached("cl100k_base")
    deadline = time.monotonic() + 30
    while sentinel.overhead_tokens_cached("cl100k_base") is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert first is None or first > 0
    assert sentinel.overhead_tokens_cached("cl100k_base") == sentinel.overhead_tokens("cl100k_base")[0]


# ------------------------------------------------------------------ exhaustion (rounds run out)

async def test_no_more_than_two_consecutive_calls_whatever_max_rounds():
    up = Upstream(comp(None, [vr_call("s2", ready=False, missing=["Spain"])]), comp("Paris."))
    res = await settle(inject(BODY), comp(None, [vr_call(ready=False, missing=["Spain"])]), up, max_rounds=5)
    assert len(up.bodies) == 2
    assert any(t["function"]["name"] == TOOL_NAME for t in up.bodies[0]["tools"])
    assert "tools" not in up.bodies[1]  # after two consecutive calls the tool is withdrawn
    assert res.info["result"] == "exhausted" and res.info["rounds"] == 2
    ex = res.info["exhausted"]
    assert ex["by"] == "consecutive_calls" and ex["limit"] == 2 and ex["missing_items"] == ["Spain"]
    assert res.completion["choices"][0]["message"]["content"] == "Paris."


async def test_a_third_consecutive_call_is_not_executed():
    third = comp("Paris. Madrid.", [vr_call("s3", ready=True)])
    up = Upstream(comp(None, [vr_call("s2", ready=False, errors=["wrong city"])]), third)
    res = await settle(inject(BODY), comp(None, [vr_call(ready=False, errors=["wrong city"])]), up, max_rounds=3)
    assert len(up.bodies) == 2  # the third call got no reply and no further request
    assert res.info["result"] == "exhausted" and res.info["exhausted"]["by"] == "consecutive_calls"
    assert res.completion["choices"][0]["message"] == {"role": "assistant", "content": "Paris. Madrid."}
    assert res.completion["choices"][0]["finish_reason"] == "stop"


async def test_answer_while_the_tool_is_still_offered_is_not_exhausted():
    up = Upstream(comp("Paris. Madrid."))
    res = await settle(inject(BODY), comp(None, [vr_call(ready=False, missing=["Spain"])]), up, max_rounds=3)
    assert res.info["result"] == "not_ready" and "exhausted" not in res.info
    assert exhaustion_check(res.info) is None


async def test_ready_in_the_last_round_is_not_exhausted():
    up = Upstream(comp(None, [vr_call("s2", ready=True)]), comp("Paris. Madrid."))
    res = await settle(inject(BODY), comp(None, [vr_call(ready=False, missing=["Spain"])]), up, max_rounds=2)
    assert res.info["result"] == "ready" and "exhausted" not in res.info


async def test_forced_not_ready_is_exhausted_after_its_one_round():
    up = Upstream(comp(None, [vr_call(ready=False, errors=["Madrid is missing"])]), comp("Paris. Madrid."))
    res = await settle(inject(BODY), comp("Paris."), up, mode="forced")
    assert res.info["result"] == "forced_not_ready"
    assert res.info["exhausted"]["by"] == "forced" and res.info["exhausted"]["errors_found"] == ["Madrid is missing"]


@pytest.mark.parametrize("ready,missing,errors,outcome", [
    (False, [], ["wrong"], "fail"), (False, ["Spain"], [], "unknown"), (False, [], [], "unknown"),
    (True, [], [], "unknown"), (False, ["Spain"], ["wrong"], "fail"),
])
async def test_exhaustion_check_is_the_models_word_and_never_a_pass(ready, missing, errors, outcome):
    up = Upstream(*[comp(None, [vr_call(f"s{i}", ready=ready, missing=missing, errors=errors)]) for i in range(3)])
    res = await settle(inject(BODY), comp(None, [vr_call(ready=ready, missing=missing, errors=errors)]), up,
                       max_rounds=0 if ready else 2)
    c = exhaustion_check(res.info)
    assert (c.verifier, c.outcome, c.basis) == ("sentinel", outcome, "model")
    assert c.evidence["missing_items"] == missing and c.evidence["errors_found"] == errors


@pytest.mark.parametrize("before,outcome,after", [
    ("passed", "unknown", "unverified"), ("corrected", "unknown", "unverified"), ("skipped", "unknown", "unverified"),
    ("unverified", "unknown", "unverified"), ("failed", "unknown", "failed"), ("error", "unknown", "error"),
    ("passed", "fail", "failed"), ("skipped", "fail", "failed"), ("corrected", "fail", "failed"),
])
def test_exhaustion_verdict_status(before, outcome, after):
    info = {"rounds": 2, "exhausted": {"by": "max_rounds", "limit": 2, "task_goal": "g", "actual_result": "",
                                       "missing_items": ["m"], "errors_found": ["e"] if outcome == "fail" else [],
                                       "malformed": 0}}
    rep = Report(status=before, checks=[Check("arithmetic", "1+1=2", "pass", basis="recomputed")],
                 reason="low risk" if before == "skipped" else None)
    added = exhaustion_verdict(rep, info, "The answer is 2.")
    assert added is rep.checks[-1] and added.outcome == outcome and rep.status == after
    assert rep.reason.startswith(EXHAUSTED_REASON["en"])
    assert exhaustion_verdict(Report(status="passed"), {"rounds": 1}, "x") is None  # not exhausted: no change


@pytest.mark.parametrize("answer,question,lang", [
    ("复利计算的结果约为11614.80元，使用Python计算。", None, "zh"),
    ("The total is $6,312.38.", "本金5000元", "en"),
    ("", "请计算本金5000元的复利", "zh"),
    ("6312.38", None, "en"),
    ("Use x = 5. Then 北京 is the capital.", None, "en"),
])
def test_exhaustion_reason_in_the_answers_language(answer, question, lang):
    assert exhaustion_reason(answer, question) == EXHAUSTED_REASON[lang]


def test_exhaustion_verdict_on_a_multi_choice_report_tags_choice_0():
    from proxy.pipeline.choices import combine

    info = {"rounds": 2, "exhausted": {"by": "consecutive_calls", "limit": 2, "task_goal": "g", "actual_result": "",
                                       "missing_items": [], "errors_found": ["wrong"], "malformed": 0}}
    rep = combine([(0, Report(status="passed", checks=[Check("arithmetic", "1+1=2", "pass", basis="recomputed")])),
                   (1, Report(status="skipped"))])
    exhaustion_verdict(rep, info, "答案是2。")
    d = rep.to_dict()
    assert d["status"] == "failed" and d["reason"] == EXHAUSTED_REASON["zh"]
    assert [(c["verifier"], c["choice"]) for c in d["checks"]] == [("arithmetic", 0), ("sentinel", 0)]
