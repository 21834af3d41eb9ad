"""End to end: the real ``openai`` SDK -> Veracity (``veracity serve`` subprocess) -> the
scripted mock upstream, with the real verifiers.

Each case tags its question (``[case:NAME]``) so one mock script serves the whole module; the
mock's ``replies`` lists play a model that is wrong first and right after the evidence prompt.
Right values are computed here independently of the gateway.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.upstreams.mock import MockUpstream
from tests.fixtures.sandboxes import missing, sandbox_with_pandas
from tests.fixtures.polling import wait_for

RIGHT = 5000 * 1.06 ** 4                       # $5,000 at 6% compounded yearly for 4 years
RIGHT_TXT = f"{RIGHT:,.2f}"                    # "6,312.38"
WRONG_TXT = "6,200.00"
EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()


def ci_question(tag: str) -> str:
    return f"[case:{tag}] I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"


def ci_answer(value: str) -> str:
    return f"With annual compounding the total is 5000 * 1.06^4 = ${value}."


WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                                  "required": ["city"]}}}
WEATHER_CALL = {"id": "call_w1", "name": "get_weather", "arguments": '{"city": "Paris"}'}

PANDAS_Q = "[case:pandas] Filter my DataFrame to people older than 30 who live in Paris."
PANDAS_BAD = """Here you go:

```python
import pandas as pd

df = pd.DataFrame({"age": [25, 35, 45], "city": ["Paris", "Paris", "Rome"]})
result = df[(df["age"] > 30) and (df["city"] == "Paris")]
print(result)
```
"""
PANDAS_GOOD = PANDAS_BAD.replace(" and ", " & ")

CITE_Q = "[case:cite] Give me two references on transformer models."
CITE_ANSWER = """Two references:

References
1. Vaswani, A., Shazeer, N., & Parmar, N. (2017). Attention Is All You Need. Advances in Neural Information Processing Systems.
2. Smith, J., & Lee, K. (2019). Quantum Gradient Transformers for Protein Folding Dynamics. Journal of Machine Learning Research, 20(4), 1-25.
"""


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []

    def correctable(tag: str, fixed: str, first: str) -> None:
        r.append({"name": f"{tag}-fix", "match": {"any_message": rf"\[case:{tag}\]", "last_user": EVIDENCE},
                  "reply": {"content": fixed}})
        r.append({"name": tag, "match": {"last_user": rf"\[case:{tag}\]"}, "reply": {"content": first}})

    for tag in ("compound", "stream-buffer", "daily", "tight"):
        correctable(tag, ci_answer(RIGHT_TXT), ci_answer(WRONG_TXT))
    correctable("pandas", PANDAS_GOOD, PANDAS_BAD)
    # always wrong: oscillation, block, passthrough, observe
    for tag in ("osc", "block", "passthrough", "observe"):
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]"}, "reply": {"content": ci_answer(WRONG_TXT)}})
    r.append({"name": "cite", "match": {"any_message": r"\[case:cite\]"}, "reply": {"content": CITE_ANSWER}})
    r.append({"name": "crash", "match": {"any_message": r"\[case:crash\]"},
              "reply": {"content": "Run this:\n```python\nprint(sum(range(10)))\n```\n"}})
    # sentinel: first the model checks itself and finds the forgotten sub-task, then completes it
    r.append({"name": "sentinel-final", "match": {"any_message": r"\[case:sentinel\]", "last_role": "tool"},
              "reply": {"content": "The capital of France is Paris. The capital of Spain is Madrid."}})
    r.append({"name": "sentinel-check", "match": {"last_user": r"\[case:sentinel\]", "tool": "verify_result"},
              "reply": {"content": "The capital of France is Paris.", "tool_calls": [{
                  "id": "call_vr1", "name": "verify_result", "arguments": json.dumps({
                      "task_goal": "capitals of France and Spain", "actual_result": "capital of France",
                      "missing_items": ["capital of Spain"], "errors_found": [], "is_ready": False})}]}})
    # client tools: the model calls the app's own tool
    r.append({"name": "client-tool", "match": {"any_message": r"\[case:tool\]"},
              "reply": {"content": None, "tool_calls": [WEATHER_CALL]}})
    return r


POLICIES = {
    # wall clocks generous for a loaded CI machine (pandas in a fresh container: seconds)
    "correct": {"on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 3},
                "verifiers": {"code": {"timeout_ms": 60000, "sandbox": {"limits": {"timeout_s": 30}}}},
                "budgets": {"request": {"deadline_ms": 150000}}},
    "annotate": {"on_failure": "annotate", "risk": {"threshold": 0.1}},
    "block": {"on_failure": "block", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 0}},
    "observe": {"on_failure": "observe", "risk": {"threshold": 0.1}},
    "tight": {"on_failure": "correct", "risk": {"threshold": 0.1}, "budgets": {"request": {"extra_calls": 0}}},
    "daily": {"on_failure": "correct", "risk": {"threshold": 0.1}, "budgets": {"key_daily": {"extra_tokens": 1}}},
    "passthrough": {"on_failure": "correct", "risk": {"threshold": 0.1}, "streaming": {"mode": "passthrough"}},
    "buffer": {"on_failure": "correct", "risk": {"threshold": 0.1},
               "streaming": {"mode": "buffer", "keepalive_s": 0.05}},
    "sentinel": {"on_failure": "correct", "risk": {"threshold": 0.1},
                 "sentinel": {"mode": "offered", "when": "multi_part", "max_rounds": 3}},
    "crash": {"on_failure": "correct", "risk": {"threshold": 0.1},
              "verifiers": {"code": {"sandbox": {"backend": "no-such-backend"}}}},
}


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("pipeline-e2e")
    from verifiers.citations import Record, build_index

    index = tmp / "library.sqlite3"
    build_index([], index, records=[
        Record(title="Attention Is All You Need", authors=["Ashish Vaswani", "Noam Shazeer", "Niki Parmar"],
               year=2017, venue="Advances in Neural Information Processing Systems", arxiv_id="1706.03762"),
    ])
    sources = {"use": [], "local_index": {"path": str(index)}, "cache": {"backend": "none"}}
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        doc = json.loads(json.dumps(doc))
        doc.setdefault("verifiers", {}).setdefault("citations", {})["sources"] = sources
        doc.setdefault("overridable", ["on_failure", "streaming.mode"])
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(dict(doc, name=name)))
    mock = MockUpstream({"rules": _rules(), "models": ["gpt-test"]}).start()
    audit = tmp / "audit.jsonl"
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"audit": str(audit), "budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock, "audit": audit, "pdir": pdir}
    mock.stop()


def client(env, policy: str, api_key: str = "sk-test-pipeline") -> openai.OpenAI:
    return openai.OpenAI(base_url=env["gw"].base_url, api_key=api_key, max_retries=0, timeout=240,
                         default_headers={"x-veracity-policy": policy})


def ask(env, policy: str, question: str, api_key: str = "sk-test-pipeline", **kw):
    raw = client(env, policy, api_key).chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": question}], **kw)
    resp = raw.parse()
    return raw.headers, resp, resp.model_extra["veracity"]


def mock_bodies(env, rule_prefix: str) -> list[dict[str, Any]]:
    return [r["body"] for r in env["mock"].requests() if str(r.get("rule", "")).startswith(rule_prefix)]


# ------------------------------------------------------------------------------ the cases


def test_wrong_compound_interest_total_corrected_in_one_round(env):
    before = len(mock_bodies(env, "compound-fix"))  # other tests of this module ask it too
    headers, resp, rep = ask(env, "correct", ci_question("compound"))
    assert RIGHT_TXT in resp.choices[0].message.content
    assert rep["status"] == "corrected" and headers["x-veracity-status"] == "corrected"
    assert len(rep["rounds"]) == 1 and rep["cost"]["upstream_calls"] == 1
    assert float(headers["x-veracity-risk"]) >= 0.3
    first = rep["corrected_checks"]  # what the first draft got wrong stays visible
    assert first[0]["outcome"] == "fail" and first[0]["expected"] == RIGHT_TXT.replace(",", "")
    fixed = mock_bodies(env, "compound-fix")[before:]
    assert len(fixed) == 1
    evidence = fixed[0]["messages"][-1]["content"]
    assert "6312.38" in evidence and WRONG_TXT in evidence  # computed value and the stated one
    assert fixed[0]["messages"][0]["content"] == ci_question("compound")
    assert fixed[0]["model"] == "gpt-test"


def test_pandas_and_bug_caught_by_code_check_and_fixed(env):
    why = sandbox_with_pandas()
    if why:
        missing(why)
    headers, resp, rep = ask(env, "correct", PANDAS_Q)
    assert " & " in resp.choices[0].message.content  # the re-asked, fixed code is returned
    # ... but it only ran: nothing about its behaviour was compared, so the fix is not verified
    # (docs/design.md "Asymmetric trust": a run is not a behaviour check) -- unverified, not corrected
    assert rep["status"] == "unverified" == headers["x-veracity-status"], rep
    assert rep["correction"]["stop_reason"] == "unverified"
    assert [c["outcome"] for c in rep["checks"] if c["verifier"] == "code"] == ["unknown"]
    assert "nothing about its behaviour was compared" in rep["checks"][0]["note"]
    assert rep["corrected_checks"][0]["outcome"] == "fail"  # what the first draft got wrong
    ev = mock_bodies(env, "pandas-fix")[0]["messages"][-1]["content"]
    assert "truth value of a Series is ambiguous" in ev


def test_fabricated_reference_flagged_real_one_verified(env):
    headers, resp, rep = ask(env, "annotate", CITE_Q)
    assert resp.choices[0].message.content == CITE_ANSWER  # annotate never changes the answer
    cites = {c["evidence"].get("status"): c for c in rep["checks"] if c["verifier"] == "citations"}
    assert cites["VERIFIED"]["outcome"] == "pass" and "Attention" in cites["VERIFIED"]["claim"]
    fabricated = [c for c in rep["checks"] if "Quantum Gradient" in c["claim"]]
    assert fabricated and fabricated[0]["outcome"] == "fail"
    assert fabricated[0]["evidence"]["status"] in ("NOT_FOUND", "LIKELY_HALLUCINATION")
    assert rep["status"] == "failed"


def test_sentinel_catches_forgotten_subtask(env):
    q = "[case:sentinel] Please answer both:\n1. What is the capital of France?\n2. What is the capital of Spain?"
    raw = client(env, "sentinel").chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": q}], tools=[WEATHER_TOOL])
    resp = raw.parse()
    msg = resp.choices[0].message
    assert "Madrid" in msg.content and not msg.tool_calls
    rep = resp.model_extra["veracity"]
    s = rep["sentinel"]
    assert s["called"] and s["missing_items"] == ["capital of Spain"] and s["rounds"] >= 1
    # measured at start-up: the first sentinel request of a gateway said null before
    from proxy.pipeline.sentinel import overhead_tokens
    assert s["schema_tokens"] == overhead_tokens()[0]
    assert "reason" not in s  # only a sentinel that was not injected says why (docs/report.md, `sentinel`)
    first = mock_bodies(env, "sentinel-check")[0]
    names = [t["function"]["name"] for t in first["tools"]]
    assert names.index("verify_result") != len(names) - 1  # never last
    assert "must call verify_result" in first["messages"][0]["content"]
    final = mock_bodies(env, "sentinel-final")[0]
    assert "capital of Spain" in final["messages"][-1]["content"]


def test_oscillation_stops_after_two_identical_failures(env):
    before = len(mock_bodies(env, "osc"))  # other tests of this module ask it too
    headers, resp, rep = ask(env, "correct", ci_question("osc"))
    assert rep["status"] == "failed" and rep["correction"]["stop_reason"] == "oscillation"
    assert len(mock_bodies(env, "osc")) - before == 2  # the draft and one correction, not max_rounds
    assert WRONG_TXT in resp.choices[0].message.content  # the best draft is returned


def test_request_budget_exhaustion_returns_annotated_answer(env):
    headers, resp, rep = ask(env, "tight", ci_question("tight"))
    assert rep["status"] == "failed" and "budget:extra_calls" in rep["reason"]
    assert WRONG_TXT in resp.choices[0].message.content
    assert mock_bodies(env, "tight-fix") == []


def test_daily_budget_exhaustion_skips_verification(env):
    # in pass-through auth each client key has its own daily budget: use a fresh one
    _, first, rep1 = ask(env, "daily", ci_question("daily"), api_key="sk-daily-budget-key")
    assert rep1["status"] == "corrected" and rep1["cost"]["tokens"] > 1
    headers, second, rep2 = ask(env, "daily", ci_question("daily"), api_key="sk-daily-budget-key")
    assert rep2["status"] == "skipped" and "key daily extra_tokens budget exhausted" in rep2["reason"]
    assert headers["x-veracity-status"] == "skipped"
    assert "veracity_budget_exhausted_total" in env["gw"].metrics()


def test_block_mode_raises_in_the_sdk_with_the_report(env):
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        ask(env, "block", ci_question("block"))
    err = ei.value.body
    assert err["type"] == "veracity_blocked" and err["code"] == "verification_failed"
    assert err["veracity"]["status"] == "failed"
    assert any(c["outcome"] == "fail" for c in err["veracity"]["checks"])
    # the request's log line names the error like any other error line (newcomer finding)
    rid = ei.value.response.headers["x-request-id"]
    lines = wait_for(lambda: [r for r in env["gw"].log_records()
                              if r.get("request_id") == rid and r.get("event") == "request"], "the request's log line")
    assert lines[0]["status"] == 422 and lines[0]["error_code"] == "verification_failed"


def test_observe_mode_answers_at_once_and_verifies_in_background(env):
    before = len(mock_bodies(env, "observe"))
    headers, resp, rep = ask(env, "observe", ci_question("observe"))
    assert WRONG_TXT in resp.choices[0].message.content
    assert rep["status"] == "skipped" and "observe" in rep["reason"] and rep["policy"] == "observe"
    assert len(mock_bodies(env, "observe")) - before == 1
    rid = headers["x-request-id"]  # other observe-policy requests of this module are audited too
    deadline = time.monotonic() + 60  # generous for a loaded CI machine; a pass returns at once
    while time.monotonic() < deadline:
        # complete lines only: the background job may be writing the record right now
        recs = [json.loads(line) for line in env["audit"].read_text().split("\n")[:-1] if line.strip()] \
            if env["audit"].exists() else []
        obs = [r for r in recs if r["policy"] == "observe" and r["request_id"] == rid]
        if obs:
            break
        time.sleep(0.1)
    assert obs and obs[0]["report"]["status"] == "failed" and obs[0]["report"]["observe"] is True
    assert "prompt" not in obs[0]  # include_text off by default
    # observe traffic is told apart by the policy label
    from prometheus_client.parser import text_string_to_metric_families
    observed = [smp for fam in text_string_to_metric_families(env["gw"].metrics()) for smp in fam.samples
                if smp.name == "veracity_checks_total" and smp.labels.get("policy") == "observe"
                and smp.labels.get("verifier") == "arithmetic" and smp.labels.get("outcome") == "fail"]
    assert observed and observed[0].labels["model"] == "gpt-test" and observed[0].labels["team"] == "default"


def _stream(env, policy: str, question: str, **kw):
    stream = client(env, policy).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": question}], stream=True, **kw)
    text, reports, finishes, usage = "", [], [], None
    for chunk in stream:
        extra = chunk.model_extra or {}
        if "veracity" in extra:
            reports.append(extra["veracity"])
        for ch in chunk.choices:
            text += ch.delta.content or ""
            if ch.finish_reason:
                finishes.append(ch.finish_reason)
        if chunk.usage:
            usage = chunk.usage
    return text, reports, finishes, usage


def test_buffer_streaming_streams_the_corrected_answer(env):
    text, reports, finishes, usage = _stream(env, "buffer", ci_question("stream-buffer"),
                                             stream_options={"include_usage": True})
    assert RIGHT_TXT in text and WRONG_TXT not in text
    assert finishes == ["stop"] and usage is not None
    assert len(reports) == 1 and reports[0]["status"] == "corrected"


def test_buffer_streaming_sends_keepalives_while_holding(env):
    body = {"model": "gpt-test", "stream": True, "messages": [{"role": "user", "content": ci_question("stream-buffer")}]}
    with httpx.stream("POST", env["gw"].base_url + "/chat/completions", json=body, timeout=60, trust_env=False,
                      headers={"x-veracity-policy": "buffer", "authorization": "Bearer sk-test"}) as r:
        raw = b"".join(r.iter_bytes())
    assert raw.startswith(b": keep-alive\n\n")
    assert raw.endswith(b"data: [DONE]\n\n")
    frames = [f for f in raw.split(b"\n\n") if f.startswith(b"data: {")]
    last = json.loads(frames[-1][6:])  # no usage asked: the report rides on the finish chunk
    assert last["choices"][0]["finish_reason"] == "stop" and last["veracity"]["status"] == "corrected"


def test_passthrough_streaming_relays_live_and_appends_report(env):
    text, reports, finishes, _ = _stream(env, "passthrough", ci_question("passthrough"))
    assert WRONG_TXT in text  # relayed as the model said it
    assert len(reports) == 1 and reports[0]["status"] == "failed"
    assert any(c["outcome"] == "fail" for c in reports[0]["checks"])


def test_verifier_crash_leaves_the_answer_intact(env):
    headers, resp, rep = ask(env, "crash", "[case:crash] Show me a one-liner that sums 0..9.")
    assert resp.choices[0].message.content == "Run this:\n```python\nprint(sum(range(10)))\n```\n"
    code = [c for c in rep["checks"] if c["verifier"] == "code"]
    assert code and code[0]["outcome"] == "error"
    assert rep["status"] == "error" and headers["x-veracity-status"] == "error"


@pytest.mark.parametrize("policy", ["correct", "block", "observe", "sentinel", "annotate"])
def test_client_tool_calls_untouched_non_stream(env, policy):
    raw = client(env, policy).chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": "[case:tool] 1. weather in Paris?\n2. and also in Rome?"}],
        tools=[WEATHER_TOOL])
    resp = raw.parse()
    ch = resp.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert [(t.id, t.function.name, t.function.arguments) for t in ch.message.tool_calls] == \
        [(WEATHER_CALL["id"], "get_weather", WEATHER_CALL["arguments"])]


@pytest.mark.parametrize("policy", ["buffer", "passthrough", "observe"])
def test_client_tool_calls_untouched_streaming(env, policy):
    stream = client(env, policy).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": "[case:tool] weather in Paris?"}],
        tools=[WEATHER_TOOL], stream=True)
    calls: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream:
        for ch in chunk.choices:
            for tc in ch.delta.tool_calls or []:
                c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                c["id"] += tc.id or ""
                c["name"] += (tc.function.name or "") if tc.function else ""
                c["arguments"] += (tc.function.arguments or "") if tc.function else ""
            finish = ch.finish_reason or finish
    assert finish == "tool_calls"
    assert calls == {0: {"id": WEATHER_CALL["id"], "name": "get_weather", "arguments": WEATHER_CALL["arguments"]}}


def test_policy_header_and_overrides(env):
    # pass-through auth allows choosing a policy; an unknown one is a clear 400
    with pytest.raises(openai.BadRequestError) as ei:
        ask(env, "no-such-policy", ci_question("compound"))
    assert "unknown policy" in str(ei.value)
    # overrides within the policy's `overridable`: annotate instead of correct -> no correction round
    headers, resp, rep = ask(env, "correct", ci_question("osc"), extra_body={"veracity": {"on_failure": "annotate"}})
    assert rep["status"] == "failed" and rep["rounds"] == []
    with pytest.raises(openai.PermissionDeniedError):
        ask(env, "correct", ci_question("osc"), extra_body={"veracity": {"verifiers": {"code": {"enabled": False}}}})
    # the veracity field never reaches the upstream
    assert all("veracity" not in b for b in mock_bodies(env, "osc"))


def test_policy_reload_without_restart(env):
    p = env["pdir"] / "annotate.yaml"
    doc = yaml.safe_load(p.read_text())
    doc["on_failure"] = "block"
    doc["correction"] = {"max_rounds": 0}
    p.write_text(yaml.safe_dump(doc))
    st = p.stat()
    os.utime(p, (st.st_atime + 10, st.st_mtime + 10))
    try:
        with pytest.raises(openai.UnprocessableEntityError):
            ask(env, "annotate", ci_question("osc"))
    finally:
        doc["on_failure"] = "annotate"
        p.write_text(yaml.safe_dump(doc))
        os.utime(p, (st.st_atime + 20, st.st_mtime + 20))


def test_verify_endpoint_checks_without_upstream(env):
    before = len(env["mock"].requests())
    r = httpx.post(env["gw"].base_url + "/veracity/verify", trust_env=False, timeout=30,
                   headers={"x-veracity-policy": "annotate"},
                   json={"messages": [{"role": "user", "content": ci_question("offline")}],
                         "answer": ci_answer(WRONG_TXT)})
    assert r.status_code == 200 and r.headers["x-veracity-status"] == "failed"
    rep = r.json()["veracity"]
    # the verdict headers of a chat completion, here too
    cov = rep["coverage"]
    assert r.headers["x-veracity-coverage"] == f"{cov['decided']}/{cov['units']}" and cov["failed"] >= 1
    assert abs(float(r.headers["x-veracity-risk"]) - rep["risk"]["score"]) <= 0.0005  # 3 decimals
    assert rep["checks"][0]["outcome"] == "fail" and rep["checks"][0]["expected"] == RIGHT_TXT.replace(",", "")
    assert len(env["mock"].requests()) == before  # no upstream call
    assert rep["states"] == ["INITIAL_GENERATION", "EXECUTING_VERIFICATION", "VERIFICATION_FAILED"]
    bad = httpx.post(env["gw"].base_url + "/veracity/verify", trust_env=False, timeout=30, json={"answer": 3})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "answer"


def test_cli_verify_and_policy_check(tmp_path, env):
    import subprocess
    import sys

    f = tmp_path / "cases.jsonl"
    f.write_text("\n".join(json.dumps({"question": ci_question("cli"), "answer": ci_answer(v)})
                           for v in (WRONG_TXT, RIGHT_TXT)) + "\n")
    run = subprocess.run([sys.executable, "-m", "proxy", "verify", str(f), "--policies", str(env["pdir"]),
                          "--policy", "annotate"], capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in run.stdout.splitlines()]
    assert run.returncode == 1, run.stderr
    assert [x["veracity"]["status"] for x in lines] == ["failed", "passed"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("on_failure: sometimes\n")
    chk = subprocess.run([sys.executable, "-m", "proxy", "policy", "check", str(bad), str(env["pdir"] / "block.yaml")],
                         capture_output=True, text=True, timeout=60)
    assert chk.returncode == 1 and f"{bad}:1: on_failure:" in chk.stderr and "block.yaml: ok" in chk.stdout


def test_verification_metrics_exposed_with_issue_names(env):
    ask(env, "correct", ci_question("compound"))  # at least one check, correction and risk observation
    # and one sentinel call of its own (in random order no sentinel test may have run before)
    q = "[case:sentinel] Please answer both:\n1. What is the capital of France?\n2. What is the capital of Spain?"
    client(env, "sentinel").chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": q}],
                                                     tools=[WEATHER_TOOL])
    text = env["gw"].metrics()
    for name in ("veracity_checks_total", "veracity_first_draft_failures_total", "veracity_correction_rounds_total",
                 "veracity_final_answer_failures_total", "veracity_corrections_total",
                 "veracity_sentinel_calls_total", "veracity_verification_duration_seconds",
                 "veracity_extra_tokens_total", "veracity_risk_score", "veracity_budget_exhausted_total"):
        assert f"# TYPE {name.removesuffix('_total')}" in text or f"# TYPE {name}" in text, name
    assert "veracity_hallucinations_total" not in text        # it counted every round's failures: replaced
    assert re.search(r'veracity_checks_total\{[^}]*outcome="fail"[^}]*verifier="arithmetic"', text) or \
        re.search(r'veracity_checks_total\{verifier="arithmetic",outcome="fail"', text)
    assert re.search(r'veracity_corrections_total\{[^}]*outcome="corrected"', text)
    assert 'veracity_sentinel_calls_total{result="not_ready"}' in text or \
        'veracity_sentinel_calls_total{result="ready"}' in text


@pytest.mark.redis
def test_daily_budget_shared_by_two_replicas_through_redis(env, gateway_factory, tmp_path):
    url = os.environ.get("VERACITY_TEST_REDIS_URL")
    if not url:
        missing("VERACITY_TEST_REDIS_URL not set")
    import uuid

    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": env["mock"].base_url}],
           "policies": {"dir": str(env["pdir"]), "check_interval_s": 0},
           "verification": {"redis_url": url}}
    a, b = gateway_factory(cfg), gateway_factory(cfg)
    key = f"sk-redis-{uuid.uuid4().hex}"

    def via(gw):
        c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60,
                          default_headers={"x-veracity-policy": "daily"})
        return c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": ci_question("daily")}]
                                         ).model_extra["veracity"]

    assert via(a)["status"] == "corrected"       # replica A spends the key's daily budget
    rep = via(b)                                  # replica B sees it through Redis
    assert rep["status"] == "skipped" and "key daily" in rep["reason"]


def test_block_in_buffer_streaming_ends_with_an_error_event_the_sdk_raises(env):
    stream = client(env, "block").chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": ci_question("block")}], stream=True,
        extra_body={"veracity": {"streaming": {"mode": "buffer"}}})
    with pytest.raises(openai.APIError) as ei:
        for _ in stream:
            pass
    assert "Veracity blocked the answer" in str(ei.value)


def test_virtual_keys_policy_selection(env, gateway_factory):
    from proxy.config import hash_key

    locked, free = "vk-locked-" + "a" * 24, "vk-free-" + "b" * 24
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": env["mock"].base_url}],
           "policies": {"dir": str(env["pdir"]), "check_interval_s": 0},
           "keys": [{"name": "locked", "hash": hash_key(locked), "team": "red", "policy": "annotate"},
                    {"name": "free", "hash": hash_key(free), "team": "blue", "policy": "annotate",
                     "allow_policy_header": True}]}
    gw = gateway_factory(cfg)

    def call(key, policy=None):
        c = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=60,
                          default_headers={"x-veracity-policy": policy} if policy else None)
        return c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": ci_question("osc")}])

    rep = call(locked).model_extra["veracity"]
    assert rep["policy"] == "annotate" and rep["status"] == "failed" and rep["rounds"] == []  # the key's policy
    with pytest.raises(openai.PermissionDeniedError) as ei:
        call(locked, "block")  # the header may not pick another policy for this key
    assert "may not choose policy" in str(ei.value)
    with pytest.raises(openai.UnprocessableEntityError):
        call(free, "block")    # ... but may for a key that allows it
    assert 'team="red"' in gw.metrics()


def test_bad_verification_config_stops_the_gateway(env, gateway_factory):
    """A typo in the `verification:` section stops `veracity serve` with exit status 2 naming the
    field (it used to start, say ready, and answer every chat request with a 500)."""
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": env["mock"].base_url}],
           "verification": {"audit_path_typo": "x"}}
    with pytest.raises(RuntimeError) as ei:
        gateway_factory(cfg)
    assert "gateway exited with 2" in str(ei.value)
    assert "veracity.yaml:7: verification.audit_path_typo: Extra inputs are not permitted" in str(ei.value)


def test_sentinel_in_buffer_streaming_never_leaks_verify_result(env):
    q = "[case:sentinel] Please answer both:\n1. What is the capital of France?\n2. What is the capital of Spain?"
    stream = client(env, "sentinel").chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": q}], tools=[WEATHER_TOOL], stream=True,
        extra_body={"veracity": {"streaming": {"mode": "buffer"}}})
    text, tool_deltas, reports = "", 0, []
    for chunk in stream:
        if (chunk.model_extra or {}).get("veracity"):
            reports.append(chunk.model_extra["veracity"])
        for ch in chunk.choices:
            text += ch.delta.content or ""
            tool_deltas += len(ch.delta.tool_calls or [])
    assert "Madrid" in text and tool_deltas == 0
    assert reports and reports[0]["sentinel"]["missing_items"] == ["capital of Spain"]
