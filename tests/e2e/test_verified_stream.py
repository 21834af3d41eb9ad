"""The ``verified`` stream mode end to end: the ``openai`` SDK (``stream=True`` and the
``.stream()`` helper), LangChain's ``stream`` -> Veracity (``veracity serve``) -> the scripted
mock upstream, with the real verifiers.

The mock streams exact deltas (``raw_stream``), so every test chooses where a unit is cut
(``7,006,`` + ``552``, a code fence in two pieces, a Chinese sentence ending in ``。``). A
continuation round is recognised by its instruction (:data:`CONTINUE_INSTRUCTION`); the right
product is computed here, independently of the gateway.
"""

from __future__ import annotations

import json
from typing import Any

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from proxy.pipeline.verified_stream import CONTINUE_INSTRUCTION
from proxy.upstreams.mock import MockUpstream
from tests.fixtures.polling import wait_for

RIGHT = f"{1234 * 5678:,}"          # 7,006,652
WRONG = "7,006,552"
CONT = CONTINUE_INSTRUCTION.split(":")[0][:40]   # "The reader has already received your ans"
EVIDENCE = "Automatic verification found"


def sse(pieces: list[str], *, cid: str = "chatcmpl-up", index: int = 0, finish: str = "stop",
        usage: dict[str, int] | None = None) -> list[str]:
    """A raw SSE body: a role chunk, one content delta per piece, the finish chunk, [DONE]."""
    def chunk(delta: dict[str, Any], fin: str | None = None) -> str:
        return "data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": 1, "model": "gpt-test",
                                      "choices": [{"index": index, "delta": delta, "logprobs": None,
                                                   "finish_reason": fin}]}) + "\n\n"
    out = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": p}) for p in pieces]
    out.append(chunk({}, finish))
    if usage is not None:
        out.append("data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": 1,
                                          "model": "gpt-test", "choices": [], "usage": usage}) + "\n\n")
    return out + ["data: [DONE]\n\n"]


MULT_Q = "[case:{tag}] What is 1234*5678?"
MULT_PIECES = ["Let me compute it. 1234 × 5678 = 7,006,", "552. That is the product", " you asked for."]
MULT_FIX = [" 1234 × 5678 = ", RIGHT[:5], RIGHT[5:] + ".", " That is the product you asked for."]


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []

    def case(tag: str, first: list[str], cont: list[str] | dict[str, Any] | None = None, pace_ms: float = 0,
             **first_kw: Any) -> None:
        if cont is not None:
            reply = {"raw_stream": sse(cont, cid="chatcmpl-cont")} if isinstance(cont, list) else cont
            r.append({"name": f"{tag}-cont", "match": {"any_message": rf"\[case:{tag}\]", "last_user": CONT},
                      "reply": reply})
        r.append({"name": tag, "match": {"last_user": rf"\[case:{tag}\]"},
                  "reply": {"raw_stream": sse(first, **first_kw), "stream": {"delay_ms": pace_ms}}})

    case("mult", MULT_PIECES, MULT_FIX)
    case("helper", MULT_PIECES, MULT_FIX)
    case("lc", MULT_PIECES, MULT_FIX)
    case("node", MULT_PIECES, MULT_FIX)
    case("usage", MULT_PIECES, {"raw_stream": sse(MULT_FIX, cid="chatcmpl-cont", usage={
        "prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52})}, pace_ms=100, usage={"prompt_tokens": 11, "completion_tokens": 22, "total_tokens": 33})
    case("block", MULT_PIECES, [" 1234 × 5678 = 7,006,552. That is the product."])  # wrong again
    case("annotate", MULT_PIECES)
    case("tight", MULT_PIECES, MULT_FIX)
    case("span", ["Add them up. Total = 3 + 3 + 1.5 + 1.5.", " Total = 8.", " Done."])
    case("zh", ["北京是中国的首都", "。计算：1234 × 5678 = 7,006,", "552。上海是最大的城市。"],
         ["计算：1234 × 5678 = " + RIGHT + "。上海是最大的城市。"])
    case("list", ["Products:\n- 2 × 3 = 6\n- 3 × 7 = 2", "4\n- 4 × 5 = 20\n"], ["- 3 × 7 = 21\n- 4 × 5 = 20\n"])
    case("code", ["Run this:\n\n``", "`python\nprint(sum(range(10)))\n`", "``\nIt prints 45."])
    case("slowfix", MULT_PIECES, {"raw_stream": sse(MULT_FIX, cid="chatcmpl-cont"), "delay_ms": 4000}, pace_ms=300)
    case("cuterr", MULT_PIECES, {"raw_stream": sse(MULT_FIX, cid="chatcmpl-cont")[:2] + [
        'event: error\ndata: {"error": {"message": "The upstream failed mid-stream.", "type": "server_error"}}\n\n']})
    case("whole", MULT_PIECES)
    r.insert(0, {"name": "whole-fix", "match": {"any_message": r"\[case:whole\]", "last_user": EVIDENCE},
                 "reply": {"raw_stream": sse(["Let me compute it.", MULT_FIX[0], RIGHT + ".", MULT_FIX[3]],
                                             cid="chatcmpl-cont")}})
    # n = 2: choice 0 wrong, choice 1 right, interleaved
    two = []
    for i, (a, b) in enumerate(zip(MULT_PIECES, ["Sure. ", "1234 × 5678 = " + RIGHT + ".", " Done."])):
        two += [sse([a], index=0)[1 if i else 0:-2], sse([b], index=1)[1 if i else 0:-2]]
    flat = [f for part in two for f in part]
    flat += [sse([], index=0)[-2], sse([], index=1)[-2], "data: [DONE]\n\n"]
    for tag, fix in (("two", MULT_FIX), ("twoblk", [" 1234 × 5678 = 7,006,552. Sure."])):
        r.append({"name": f"{tag}-cont", "match": {"any_message": rf"\[case:{tag}\]", "last_user": CONT},
                  "reply": {"raw_stream": sse(fix, cid="chatcmpl-cont")}})
        r.append({"name": tag, "match": {"last_user": rf"\[case:{tag}\]"}, "reply": {"raw_stream": flat}})
    # the sentinel offered: the model checks itself (held turn), then the live final turn states
    # the wrong product, which is corrected in the same stream
    ready = {"task_goal": "the product", "actual_result": "7,006,652", "missing_items": [], "errors_found": [],
             "is_ready": True}
    r.append({"name": "vsent-cont", "match": {"any_message": r"\[case:vsent\]", "last_user": CONT},
              "reply": {"raw_stream": sse(MULT_FIX, cid="chatcmpl-cont")}})
    r.append({"name": "vsent-final", "match": {"any_message": r"\[case:vsent\]", "last_role": "tool"},
              "reply": {"raw_stream": sse(MULT_PIECES, cid="chatcmpl-final")}})
    r.append({"name": "vsent-check", "match": {"last_user": r"\[case:vsent\]"},
              "reply": {"content": None, "tool_calls": [{"id": "call_vr1", "name": "verify_result",
                                                         "arguments": json.dumps(ready)}]}})
    r.append({"name": "lp", "match": {"last_user": r"\[case:lp\]"},
              "reply": {"content": "Paris is the capital of France. It lies on the Seine.", "stream": {"chunk_size": 5}}})
    r.append({"name": "tool", "match": {"last_user": r"\[case:tool\]"},
              "reply": {"tool_calls": [{"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]}})
    return r


POLICY = {"on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 2},
          "streaming": {"mode": "verified", "keepalive_s": 0.2},
          "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}}}
POLICIES = {
    "verified": POLICY,
    "vblock": {**POLICY, "on_failure": "block"},
    "vannotate": {**POLICY, "on_failure": "annotate"},
    "vwhole": {**POLICY, "streaming": {"mode": "verified", "continuation": "whole"}},
    "vtight": {**POLICY, "budgets": {"request": {"extra_calls": 0}}},
    "vsent": {**POLICY, "sentinel": {"mode": "offered", "when": "always", "max_rounds": 2}},
}


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("verified-stream")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(dict(doc, name=name)))
    mock = MockUpstream({"rules": _rules(), "models": ["gpt-test"]}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock}
    mock.stop()


def client(env, policy: str = "verified") -> openai.OpenAI:
    return openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=60,
                         default_headers={"x-veracity-policy": policy})


def stream(env, tag: str, policy: str = "verified", **kw: Any) -> tuple[dict[int, list[str]], list[Any]]:
    """Content deltas per choice index, and every chunk, as the SDK parsed them."""
    texts: dict[int, list[str]] = {}
    chunks = []
    for chunk in client(env, policy).chat.completions.create(
            model="gpt-test", stream=True, messages=[{"role": "user", "content": MULT_Q.format(tag=tag)}], **kw):
        chunks.append(chunk)
        for ch in chunk.choices:
            if ch.delta.content:
                texts.setdefault(ch.index, []).append(ch.delta.content)
    return texts, chunks


def report_of(chunks: list[Any]) -> dict[str, Any]:
    reps = [c.model_extra["veracity"] for c in chunks if (c.model_extra or {}).get("veracity")]
    assert len(reps) == 1
    return reps[0]


def requests(env, rule: str) -> list[dict[str, Any]]:
    return [r for r in env["mock"].requests() if r.get("rule") == rule]


# ------------------------------------------------------------------------------ the cases


def test_wrong_product_never_reaches_the_reader_and_the_correction_continues_the_stream(env):
    texts, chunks = stream(env, "mult")
    text = "".join(texts[0])
    assert not any("7,006,5" in t or "552" in t for t in texts[0])  # no piece of the wrong value went out
    assert text == "Let me compute it. 1234 × 5678 = " + RIGHT + ". That is the product you asked for."
    assert texts[0][0] == "Let me compute it."  # relayed as a unit before the risky one was checked
    assert {c.id for c in chunks} == {"chatcmpl-up"}  # one stream for the client: the first call's id
    rep = report_of(chunks)
    assert rep["status"] == "corrected" and len(rep["rounds"]) == 1
    assert rep["replaced"][0]["text"] == " 1234 × 5678 = 7,006,552." and rep["replaced"][0]["offset"] == 18
    assert rep["corrected_checks"][0]["outcome"] == "fail"
    assert [c["outcome"] for c in rep["checks"]] == ["pass"]
    # the continuation: the answer so far as the assistant turn, the evidence, the prefix quoted
    cont = requests(env, "mult-cont")[-1]["body"]
    assert cont["stream"] is True and cont["messages"][-2] == {
        "role": "assistant", "content": "Let me compute it. 1234 × 5678 = 7,006,552."}
    assert EVIDENCE in cont["messages"][-1]["content"] and "Let me compute it." in cont["messages"][-1]["content"]


def test_openai_stream_helper_sees_the_corrected_answer(env):
    with client(env).chat.completions.stream(
            model="gpt-test", messages=[{"role": "user", "content": MULT_Q.format(tag="helper")}]) as s:
        deltas = [e.delta for e in s if e.type == "content.delta"]
        final = s.get_final_completion()
    assert "".join(deltas) == final.choices[0].message.content
    assert RIGHT in final.choices[0].message.content and WRONG not in final.choices[0].message.content


def test_langchain_stream(env):
    lc = pytest.importorskip("langchain_openai")
    llm = lc.ChatOpenAI(model="gpt-test", base_url=env["gw"].base_url, api_key="sk-test", max_retries=0,
                        default_headers={"x-veracity-policy": "verified"})
    text = "".join(str(part.content) for part in llm.stream(MULT_Q.format(tag="lc")))
    assert RIGHT in text and WRONG not in text


def test_include_usage_sums_every_upstream_call_and_lists_them(env):
    texts, chunks = stream(env, "usage", stream_options={"include_usage": True})
    assert WRONG not in "".join(texts[0])
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == 1 and usage_chunks[0].choices == []
    rep = report_of(chunks)
    assert (usage_chunks[0].model_extra or {}).get("veracity") == rep  # the report rides on the usage chunk
    calls = rep["stream"]["calls"]
    assert [c["kind"] for c in calls] == ["client", "continuation"]
    assert calls[0]["usage"] is None and calls[0]["closed_early"]  # closed before its usage chunk
    cont_usage = calls[1]["usage"]
    assert cont_usage is not None and usage_chunks[0].usage.total_tokens == cont_usage["total_tokens"]


def test_block_ends_with_the_error_event_after_the_relayed_prefix(env):
    got: list[str] = []
    with pytest.raises(openai.APIError) as ei:
        for chunk in client(env, "vblock").chat.completions.create(
                model="gpt-test", stream=True, messages=[{"role": "user", "content": MULT_Q.format(tag="block")}]):
            got += [ch.delta.content for ch in chunk.choices if ch.delta.content]
    assert "".join(got) == "Let me compute it."
    assert "Veracity blocked the answer" in str(ei.value)


def test_annotate_relays_the_failed_unit_and_says_so(env):
    texts, chunks = stream(env, "annotate", policy="vannotate")
    assert "".join(texts[0]) == "".join(MULT_PIECES)
    rep = report_of(chunks)
    assert rep["status"] == "failed" and rep["rounds"] == [] and "relayed" in rep["reason"]
    assert not requests(env, "annotate-cont")


def test_chinese_sentences_are_units_and_the_wrong_one_is_replaced(env):
    texts, chunks = stream(env, "zh")
    # low-risk prose flows before its unit ends; the mark waits for the unit's end, and the
    # risky sentence is held whole (it is cut across deltas: `7,006,` + `552。`)
    assert texts[0][:2] == ["北京是中国的首都", "。"]
    assert texts[0][2].startswith("计算：1234 × 5678 = " + RIGHT)  # the held sentence, corrected
    assert "".join(texts[0]) == "北京是中国的首都。计算：1234 × 5678 = " + RIGHT + "。上海是最大的城市。"
    assert report_of(chunks)["status"] == "corrected"


def test_list_lines_are_units(env):
    texts, chunks = stream(env, "list")
    assert texts[0][:3] == ["Products:\n", "- 2 × 3 = 6\n", "- 3 × 7 = 21\n"]
    assert "".join(texts[0]) == "Products:\n- 2 × 3 = 6\n- 3 × 7 = 21\n- 4 × 5 = 20\n"
    assert report_of(chunks)["status"] == "corrected"


def test_a_split_code_fence_is_relayed_as_one_closed_block(env):
    texts, chunks = stream(env, "code")
    assert "```python\nprint(sum(range(10)))\n```\n" in texts[0]
    assert "".join(texts[0]) == "Run this:\n\n```python\nprint(sum(range(10)))\n```\nIt prints 45."


def test_n2_corrects_only_the_wrong_choice(env):
    texts, chunks = stream(env, "two", n=2)
    assert "".join(texts[0]) == "Let me compute it. 1234 × 5678 = " + RIGHT + ". That is the product you asked for."
    assert "".join(texts[1]) == "Sure. 1234 × 5678 = " + RIGHT + ". Done."
    finishes = {ch.index: ch.finish_reason for c in chunks for ch in c.choices if ch.finish_reason}
    assert finishes == {0: "stop", 1: "stop"}
    rep = report_of(chunks)
    by = {e["index"]: e["status"] for e in rep["choices"]}
    assert by == {0: "corrected", 1: "passed"}
    cont = requests(env, "two-cont")[-1]["body"]
    assert "n" not in cont


def test_whole_answer_strategy_uses_the_part_after_the_prefix(env):
    texts, chunks = stream(env, "whole", policy="vwhole")
    assert "".join(texts[0]) == "Let me compute it. 1234 × 5678 = " + RIGHT + ". That is the product you asked for."
    assert report_of(chunks)["status"] == "corrected"


def test_upstream_error_mid_continuation_ends_with_an_error_event(env):
    got: list[str] = []
    with pytest.raises(openai.APIError):
        for chunk in client(env).chat.completions.create(
                model="gpt-test", stream=True, messages=[{"role": "user", "content": MULT_Q.format(tag="cuterr")}]):
            got += [ch.delta.content for ch in chunk.choices if ch.delta.content]
    assert WRONG not in "".join(got) and "".join(got).startswith("Let me compute it.")


def test_client_leaving_mid_correction_closes_every_upstream_call(env):
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", env["gw"].base_url + "/chat/completions",
                         headers={"authorization": "Bearer sk-test", "x-veracity-policy": "verified"},
                         json={"model": "gpt-test", "stream": True,
                               "messages": [{"role": "user", "content": MULT_Q.format(tag="slowfix")}]}) as r:
            seen = b""
            for part in r.iter_bytes():  # keep-alive comments come while the continuation is awaited
                seen += part
                if requests(env, "slowfix-cont"):
                    break  # asked (it answers only after 4 s): the client leaves mid-correction
    assert b"Let me compute it." in seen and b"7,006,552" not in seen
    wait_for(lambda: any(e.get("event") == "client_disconnected"
                         for e in requests(env, "slowfix-cont")[-1]["events"]),
             "the continuation closed", timeout=10)
    first = requests(env, "slowfix")[-1]["events"]
    assert [e.get("phase") for e in first if e.get("event") == "client_disconnected"] == ["mid_stream"]


def test_client_tool_calls_relayed(env):
    s = client(env).chat.completions.create(
        model="gpt-test", stream=True, messages=[{"role": "user", "content": "[case:tool] weather in Paris?"}],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}])
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in s:
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                c["id"] += tc.id or ""
                c["name"] += (tc.function.name or "") if tc.function else ""
                c["arguments"] += (tc.function.arguments or "") if tc.function else ""
            finish = ch.finish_reason or finish
    assert finish == "tool_calls"
    assert calls == {0: {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}}



def test_logprobs_ride_along_with_the_text_they_describe(env):
    tokens, text = [], ""
    for chunk in client(env).chat.completions.create(
            model="gpt-test", stream=True, logprobs=True,
            messages=[{"role": "user", "content": "[case:lp] Tell me about Paris."}]):
        for ch in chunk.choices:
            text += ch.delta.content or ""
            tokens += [t.token for t in (ch.logprobs.content or [])] if ch.logprobs else []
            assert "".join(tokens) == text[:len("".join(tokens))]  # never ahead of the text
    assert text == "Paris is the capital of France. It lies on the Seine." == "".join(tokens)


def test_sentinel_turns_are_held_and_the_live_final_turn_is_verified_as_it_flows(env):
    texts, chunks = stream(env, "vsent", policy="vsent")
    assert "".join(texts[0]) == "Let me compute it. 1234 × 5678 = " + RIGHT + ". That is the product you asked for."
    assert not any(ch.delta.tool_calls for c in chunks for ch in c.choices)  # verify_result never relayed
    assert len({c.id for c in chunks}) == 1
    rep = report_of(chunks)
    assert rep["status"] == "corrected" and rep["sentinel"]["injected"] and rep["sentinel"]["called"]
    final = requests(env, "vsent-final")[-1]["body"]
    assert final["stream"] is True and final["messages"][-1]["role"] == "tool"


NODE_DIR = Path(__file__).resolve().parent / "node"


@pytest.mark.node
def test_openai_node_stream_and_stream_helper(env):
    if shutil.which("node") is None or not (NODE_DIR / "node_modules" / "openai").is_dir():
        pytest.skip("openai-node not installed (npm install --prefix tests/e2e/node)")
    out = subprocess.run(["node", str(NODE_DIR / "stream.mjs")], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "BASE_URL": env["gw"].base_url, "POLICY": "verified",
                              "QUESTION": MULT_Q.format(tag="node")})
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    want = "Let me compute it. 1234 × 5678 = " + RIGHT + ". That is the product you asked for."
    assert got["text"] == want and got["helper_text"] == want
    assert got["report"]["status"] == "corrected"


def test_n2_block_withholds_only_the_choice_that_stays_wrong(env):
    texts, chunks = stream(env, "twoblk", policy="vblock", n=2)
    assert "".join(texts[0]) == "Let me compute it." and WRONG not in "".join(texts[0])
    assert "".join(texts[1]) == "Sure. 1234 × 5678 = " + RIGHT + ". Done."
    finishes = {ch.index: ch.finish_reason for c in chunks for ch in c.choices if ch.finish_reason}
    assert finishes == {0: "content_filter", 1: "stop"}
    refusal = "".join(ch.delta.refusal or "" for c in chunks for ch in c.choices if ch.index == 0)
    assert "Veracity withheld" in refusal
    rep = report_of(chunks)
    by = {e["index"]: e for e in rep["choices"]}
    assert by[0]["status"] == "failed" and by[1]["status"] == "passed" and rep["status"] == "failed"
    # the continuation failed the same way: the rounds stop (oscillation) and the choice is withheld
    assert len(by[0]["rounds"]) == 1 and by[0]["correction"]["stop_reason"] == "oscillation"


def test_no_budget_for_a_correction_relays_the_unit_and_the_report_says_why(env):
    texts, chunks = stream(env, "tight", policy="vtight")
    assert "".join(texts[0]) == "".join(MULT_PIECES)
    rep = report_of(chunks)
    assert rep["status"] == "failed" and rep["correction"]["stop_reason"] == "budget:extra_calls"
    assert "no correction passed (budget:extra_calls)" in rep["reason"] and not requests(env, "tight-cont")
    metrics = httpx.get(env["gw"].url + "/metrics", timeout=10).text
    assert 'veracity_budget_exhausted_total{scope="request"}' in metrics


def test_a_claim_spanning_two_sentences_is_reported_once_relayed(env):
    # the sum in one sentence, its total in the next: no unit holds the claim, the whole answer does
    texts, chunks = stream(env, "span")
    assert "".join(texts[0]) == "Add them up. Total = 3 + 3 + 1.5 + 1.5. Total = 8. Done."
    rep = report_of(chunks)
    failed = [c for c in rep["checks"] if c["outcome"] == "fail"]
    assert rep["status"] == "failed" and len(failed) == 1 and "spans units" in failed[0]["note"]
    assert "spanning units" in rep["reason"] and rep["rounds"] == []
