"""Sentinel exhaustion through the real gateway (``veracity serve``) with the real ``openai`` SDK
and the scripted mock upstream: a model that keeps answering ``verify_result`` with ``is_ready:
false`` until the rounds run out is no longer ``skipped``/``passed``. Its own ``errors_found`` make
the answer ``failed``, its ``missing_items`` alone ``unverified``; the sentinel check rests on the
model's word (basis ``model``); the report's ``reason`` is the exhaustion message of
docs/sentinel.md in the answer's language; no tool is called more than twice in a row
(docs/sentinel.md's rule, stated in the sentinel rule and enforced for ``verify_result``).
Non-stream, ``buffer`` and ``passthrough`` streams.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import yaml

from proxy.pipeline.sentinel import EXHAUSTED_REASON
from tests.fixtures.mock import rule_bodies, scripted_mock, tool_names

QUESTION = "Please answer both:\n1. What is the capital of France?\n2. What is 17 * 23?"
FINAL_EN = "The capital of France is Paris. 17 * 23 = 391."
FINAL_ZH = "法国的首都是巴黎。第二题：17 * 23 = 391。"
ERRORS = ["the product 17 * 23 was not checked"]
MISSING = ["第二题的验算"]


def vr(ready: bool, *, missing: list[str] = (), errors: list[str] = (), call_id: str = "call_vr") -> dict[str, Any]:
    return {"id": call_id, "name": "verify_result", "arguments": json.dumps({
        "task_goal": "capital of France and 17 * 23", "actual_result": "Paris; 391",
        "missing_items": list(missing), "errors_found": list(errors), "is_ready": ready})}


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []

    def case(tag: str, check: dict[str, Any], final: dict[str, Any]) -> None:
        # offered the tool: the model's self-check; not offered (ready or the last round): the answer
        r.append({"name": f"{tag}-check", "match": {"any_message": rf"\[case:{tag}\]", "tool": "verify_result"},
                  **check})
        r.append({"name": f"{tag}-final", "match": {"any_message": rf"\[case:{tag}\]"}, **final})

    case("exerr", {"reply": {"content": None, "tool_calls": [vr(False, errors=ERRORS)]}},
         {"reply": {"content": FINAL_EN, "stream": {"chunk_size": 8}}})
    case("exmiss", {"reply": {"content": None, "tool_calls": [vr(False, missing=MISSING)]}},
         {"reply": {"content": FINAL_ZH, "stream": {"chunk_size": 8}}})
    # not ready twice, then (the tool no longer offered) an answer that calls it a third time anyway
    case("exstray", {"reply": {"content": None, "tool_calls": [vr(False, missing=["the product"])]}},
         {"reply": {"content": FINAL_EN, "tool_calls": [vr(True, call_id="call_vr3")]}})
    # not ready, then ready: not exhausted, the sentinel adds no check and the arithmetic pass stands
    case("exready", {"replies": [{"content": None, "tool_calls": [vr(False, missing=["the product"])]},
                                 {"content": None, "tool_calls": [vr(True, call_id="call_vr2")]}]},
         {"reply": {"content": FINAL_EN, "stream": {"chunk_size": 8}}})
    return r


mock, _reset_mock = scripted_mock({"models": ["gpt-test"], "rules": _rules()})

_OFF = {"code": {"enabled": False}, "citations": {"enabled": False}, "planner": {"enabled": False}}
POLICIES = {
    "exh": {"on_failure": "annotate", "risk": {"threshold": 0.1}, "verifiers": _OFF,
            "sentinel": {"mode": "offered", "when": "always", "max_rounds": 3},
            "streaming": {"mode": "passthrough", "keepalive_s": 0.05}, "overridable": ["streaming.mode"]},
    "exh1": {"on_failure": "annotate", "risk": {"threshold": 0.1}, "verifiers": _OFF,
             "sentinel": {"mode": "offered", "when": "always", "max_rounds": 1}},
    "exhblock": {"on_failure": "block", "risk": {"threshold": 0.1}, "verifiers": _OFF,
                 "correction": {"max_rounds": 0}, "sentinel": {"mode": "offered", "when": "always", "max_rounds": 3}},
}


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sentinel-exhaustion")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump({"name": name, **doc}))
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"review_db": str(tmp / "reviews.sqlite3"), "budget_db": str(tmp / "budget.sqlite3")}}
    return gateway_factory(cfg)


def client(gw, policy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, timeout=60,
                         default_headers={"x-veracity-policy": policy})


def ask(gw, policy: str, tag: str):
    raw = client(gw, policy).chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": f"[case:{tag}] {QUESTION}"}])
    resp = raw.parse()
    return raw.headers, resp, resp.model_extra["veracity"]


def stream(gw, policy: str, tag: str, mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"text": "", "tool_deltas": 0, "finishes": [], "reports": []}
    for chunk in client(gw, policy).chat.completions.create(
            model="gpt-test", stream=True, messages=[{"role": "user", "content": f"[case:{tag}] {QUESTION}"}],
            extra_body={"veracity": {"streaming": {"mode": mode}}}):
        if (chunk.model_extra or {}).get("veracity"):
            out["reports"].append(chunk.model_extra["veracity"])
        for ch in chunk.choices:
            out["text"] += ch.delta.content or ""
            out["tool_deltas"] += len(ch.delta.tool_calls or [])
            if ch.finish_reason:
                out["finishes"].append(ch.finish_reason)
    return out


def sentinel_checks(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rep["checks"] if c["verifier"] == "sentinel"]


def arithmetic_passes(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rep["checks"] if c["verifier"] == "arithmetic" and c["outcome"] == "pass"]


def test_errors_found_until_the_rounds_run_out_is_failed(gw, mock):
    headers, resp, rep = ask(gw, "exh", "exerr")
    assert resp.choices[0].message.content == FINAL_EN and not resp.choices[0].message.tool_calls
    assert rep["status"] == "failed" and headers["x-veracity-status"] == "failed"
    assert rep["reason"] == EXHAUSTED_REASON["en"] == "[verification did not pass, steps exhausted]"
    [s] = sentinel_checks(rep)
    assert (s["outcome"], s["basis"]) == ("fail", "model")
    assert s["evidence"]["errors_found"] == ERRORS and s["evidence"]["by"] == "consecutive_calls"
    assert arithmetic_passes(rep)  # the arithmetic pass alone would have made it `passed`
    assert rep["sentinel"]["result"] == "exhausted" and rep["sentinel"]["rounds"] == 2
    # max_rounds is 3, but no tool is called more than twice in a row: the third turn is asked
    # without verify_result, and the rule says so
    checks, finals = rule_bodies(mock, "exerr-check"), rule_bodies(mock, "exerr-final")
    assert len(checks) == 2 and len(finals) == 1 and "verify_result" not in tool_names(finals[0])
    assert "must never call a tool more than twice in a row" in checks[0]["messages"][0]["content"]


def test_missing_items_until_the_rounds_run_out_is_unverified_in_chinese(gw):
    headers, resp, rep = ask(gw, "exh", "exmiss")
    assert resp.choices[0].message.content == FINAL_ZH
    assert rep["status"] == "unverified" and headers["x-veracity-status"] == "unverified"
    assert rep["reason"] == "[验证未通过但已耗尽步数]"
    [s] = sentinel_checks(rep)
    assert (s["outcome"], s["basis"]) == ("unknown", "model") and s["evidence"]["missing_items"] == MISSING
    assert arithmetic_passes(rep)
    assert rep["coverage"]["by_verifier"]["sentinel"]["unknown"] == 1


def test_a_third_consecutive_call_is_not_executed(gw, mock):
    headers, resp, rep = ask(gw, "exh", "exstray")
    msg = resp.choices[0].message
    assert msg.content == FINAL_EN and not msg.tool_calls and resp.choices[0].finish_reason == "stop"
    # two checks answered, the answer that calls it a third time is not answered: no fourth request
    assert len(rule_bodies(mock, "exstray-check")) == 2 and len(rule_bodies(mock, "exstray-final")) == 1
    assert rep["sentinel"]["result"] == "exhausted" and rep["sentinel"]["rounds"] == 2
    assert rep["sentinel"]["extra_calls"] == 2
    assert rep["status"] == "unverified" and rep["reason"] == EXHAUSTED_REASON["en"]
    [s] = sentinel_checks(rep)
    assert s["outcome"] == "unknown" and s["basis"] == "model"


def test_max_rounds_runs_out_first(gw, mock):
    headers, resp, rep = ask(gw, "exh1", "exerr")
    assert rep["status"] == "failed" and rep["sentinel"]["exhausted"]["by"] == "max_rounds"
    assert len(rule_bodies(mock, "exerr-check")) == 1 and len(rule_bodies(mock, "exerr-final")) == 1


def test_ready_in_the_last_round_is_not_exhausted_and_never_a_sentinel_pass(gw):
    headers, resp, rep = ask(gw, "exh", "exready")
    assert rep["sentinel"]["result"] == "ready" and "exhausted" not in rep["sentinel"]
    assert sentinel_checks(rep) == [] and rep["status"] == "passed"   # passed on the arithmetic alone
    assert rep.get("reason") != EXHAUSTED_REASON["en"]


def test_block_policy_withholds_an_answer_the_model_called_wrong(gw):
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        ask(gw, "exhblock", "exerr")
    rep = ei.value.body["veracity"]
    assert rep["status"] == "failed" and rep["reason"] == EXHAUSTED_REASON["en"]
    assert [c["outcome"] for c in sentinel_checks(rep)] == ["fail"]


@pytest.mark.parametrize("mode", ["buffer", "passthrough"])
@pytest.mark.parametrize("tag,final,status,outcome,reason", [
    ("exerr", FINAL_EN, "failed", "fail", EXHAUSTED_REASON["en"]),
    ("exmiss", FINAL_ZH, "unverified", "unknown", EXHAUSTED_REASON["zh"]),
])
def test_streams_carry_the_exhausted_verdict(gw, mock, mode, tag, final, status, outcome, reason):
    s = stream(gw, "exh", tag, mode)
    assert s["text"] == final and s["tool_deltas"] == 0 and s["finishes"] == ["stop"]
    [rep] = s["reports"]
    assert rep["status"] == status and rep["reason"].startswith(reason)
    assert [(c["outcome"], c["basis"]) for c in sentinel_checks(rep)] == [(outcome, "model")]
    assert rep["sentinel"]["result"] == "exhausted"
    assert len(rule_bodies(mock, f"{tag}-check")) == 2
