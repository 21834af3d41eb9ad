"""The verifier-model plumbing: ``verifiers.model`` (ask_json, ScriptedModel) and
``proxy.pipeline.verifier_model`` (the budget-charged gateway binding, the plain-JSON fallback, and
``OpenAIChatModel`` against the real scripted upstream over HTTP)."""

from __future__ import annotations

import asyncio
import json

import pytest
from prometheus_client import REGISTRY
from pydantic import BaseModel

from proxy.stores.budget import RequestBudget
from proxy.wire.errors import UpstreamError
from proxy.upstreams.mock import MockUpstream
from proxy.pipeline.verifier_model import GatewayChatModel, OpenAIChatModel, request_body
from verifiers.model import ModelError, ModelUnavailable, ScriptedModel, ask_json, extract_json


class Verdict(BaseModel):
    verdict: str
    confidence: float


MSGS = [{"role": "system", "content": "You are a rigorous verification expert."},
        {"role": "user", "content": "Judge the claim."}]


def completion(content: str | None, prompt: int = 30, comp: int = 10) -> dict:
    return {"id": "x", "object": "chat.completion", "choices": [
        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": comp, "total_tokens": prompt + comp}}


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# ----------------------------------------------------------------------------- ask_json


async def test_ask_json_repairs_once_then_errors():
    good = {"verdict": "supported", "confidence": 0.9}
    m = ScriptedModel([("Judge", ScriptedModel.seq("not json at all", good))])
    ans = await ask_json(m, MSGS, Verdict, purpose="verdict")
    assert ans.value == Verdict(**good) and ans.repaired
    assert [c.purpose for c in m.calls] == ["verdict", "verdict_repair"]
    # the repair turn quotes what was wrong
    assert "not valid" in m.seen[1]["messages"][-1]["content"]

    bad = ScriptedModel([("Judge", {"verdict": "supported"})])  # confidence missing, twice
    ans = await ask_json(bad, MSGS, Verdict, purpose="verdict")
    assert ans.value is None and ans.error.startswith("invalid:") and "confidence" in ans.error
    assert len(bad.calls) == 2  # one repair attempt, then error


async def test_ask_json_unavailable_and_model_error_never_raise():
    ans = await ask_json(ScriptedModel([("x", "{}")], max_calls=0), MSGS, Verdict, purpose="verdict")
    assert ans.unavailable and ans.value is None
    ans = await ask_json(ScriptedModel([("Judge", ModelError("boom"))]), MSGS, Verdict, purpose="verdict")
    assert ans.error.startswith("model_error") and not ans.unavailable


def test_extract_json_from_fences_and_prose():
    assert extract_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert extract_json('Sure! Here it is: {"a": [1, 2]} Hope it helps.') == {"a": [1, 2]}
    with pytest.raises(ValueError):
        extract_json("no json here")


# ------------------------------------------------------------------------- gateway binding


async def test_budget_is_charged_and_exhaustion_sends_nothing():
    sent = []

    async def complete(body):
        sent.append(body)
        return completion('{"verdict": "refuted", "confidence": 0.8}', 100, 20)

    budget = RequestBudget(extra_calls=1, extra_tokens=10_000, deadline_ms=10_000)
    m = GatewayChatModel(complete, "judge-model", budget, upstream="u1")
    before = metric("veracity_verifier_model_calls_total", purpose="verdict", outcome="ok")
    ans = await ask_json(m, MSGS, Verdict, purpose="verdict")
    assert ans.value.verdict == "refuted"
    assert budget.calls == 1 and budget.tokens == 120 and m.tokens == 120
    assert sent[0]["model"] == "judge-model" and sent[0]["stream"] is False
    assert sent[0]["response_format"]["type"] == "json_schema"
    assert sent[0]["response_format"]["json_schema"]["name"] == "Verdict"
    assert metric("veracity_verifier_model_calls_total", purpose="verdict", outcome="ok") == before + 1

    with pytest.raises(ModelUnavailable) as exc:  # second call: over extra_calls, nothing sent
        await m.chat(MSGS, purpose="verdict")
    assert exc.value.reason == "budget:extra_calls" and len(sent) == 1
    assert m.calls[-1].outcome == "unavailable"


async def test_deadline_turns_a_slow_model_into_unavailable():
    async def slow(body):
        await asyncio.sleep(5)
        return completion("{}")

    m = GatewayChatModel(slow, "m", RequestBudget(extra_calls=5, extra_tokens=1000, deadline_ms=100))
    with pytest.raises(ModelUnavailable) as exc:
        await m.chat(MSGS, purpose="plan")
    assert exc.value.reason == "deadline"


async def test_refused_response_format_falls_back_to_plain_json_and_is_remembered():
    sent = []

    async def complete(body):
        sent.append(body)
        if "response_format" in body:
            raise UpstreamError(400, "bad request", reason="http_400",
                                body=b'{"error": {"message": "Unrecognized request argument: response_format"}}')
        return completion('{"verdict": "supported", "confidence": 1}')

    m = GatewayChatModel(complete, "m-plain", None, upstream="old-server")
    ans = await ask_json(m, MSGS, Verdict, purpose="verdict")
    assert ans.value.verdict == "supported"
    assert "response_format" not in sent[1]
    system = sent[1]["messages"][0]["content"]
    assert "must answer with one JSON object" in system and '"confidence"' in system
    await m.chat(MSGS, schema=Verdict.model_json_schema(), purpose="verdict")
    assert "response_format" not in sent[2]  # remembered: no second refused attempt
    assert len(sent) == 3


async def test_a_server_error_naming_response_format_falls_back_too():
    """llama-cpp-python's server answers a json_schema response_format with HTTP 500 and a
    pydantic error naming the field (seen with a real one, Gemma 3 270M): plain JSON then."""
    sent = []
    body_500 = (b'{"error":{"message":"1 validation error:\n  {\'type\': \'literal_error\', \'loc\': '
                b'(\'body\', \'response_format\', \'type\'), \'msg\': \"Input should be \'text\' or '
                b'\'json_object\'\"}","type":"internal_server_error","param":null,"code":null}}')

    async def complete(body):
        sent.append(body)
        if "response_format" in body:
            raise UpstreamError(500, "server error", reason="http_500", body=body_500)
        return completion('{"verdict": "refuted", "confidence": 0.5}')

    m = GatewayChatModel(complete, "m-llama", None, upstream="llama-server")
    ans = await ask_json(m, MSGS, Verdict, purpose="verdict")
    assert ans.value.verdict == "refuted" and len(sent) == 2 and "response_format" not in sent[1]


async def test_a_server_error_that_names_nothing_is_a_model_error():
    async def complete(body):
        raise UpstreamError(500, "server error", reason="http_500", body=b'{"error":{"message":"CUDA out of memory"}}')

    m = GatewayChatModel(complete, "m-oom", None, upstream="gpu-server")
    with pytest.raises(ModelError):
        await m.chat(MSGS, schema=Verdict.model_json_schema(), purpose="verdict")


async def test_upstream_failure_is_model_error_without_secrets():
    async def complete(body):
        raise UpstreamError(500, "upstream said sk-secret", reason="http_500")

    m = GatewayChatModel(complete, "m", None)
    with pytest.raises(ModelError) as exc:
        await m.chat(MSGS, purpose="plan")
    assert "sk-secret" not in str(exc.value) and "500" in str(exc.value)


async def test_no_model_is_unavailable():
    m = GatewayChatModel(None, "elsewhere", None, unavailable="no_model")
    with pytest.raises(ModelUnavailable) as exc:
        await m.chat(MSGS)
    assert exc.value.reason == "no_model"


def test_plain_body_adds_a_system_message_when_there_is_none():
    body = request_body("m", [{"role": "user", "content": "hi"}], {"type": "object"}, "X",
                        structured=False, max_tokens=5)
    assert body["messages"][0]["role"] == "system" and body["max_tokens"] == 5
    assert body["messages"][1] == {"role": "user", "content": "hi"}


# --------------------------------------------------------------- over HTTP: the scripted upstream


def test_openai_chat_model_against_the_scripted_upstream():
    script = {"rules": [{"match": {"schema": "Verdict"},
                         "reply": {"content": json.dumps({"verdict": "refuted", "confidence": 0.7})}}],
              "default": {"content": "plain"}}
    with MockUpstream(script) as up:
        async def go():
            m = OpenAIChatModel(up.base_url, "mock-model")
            try:
                ans = await ask_json(m, MSGS, Verdict, purpose="verdict")
                plain = await m.chat(MSGS, purpose="judge")
            finally:
                await m.aclose()
            return ans, plain, m

        ans, plain, m = asyncio.run(go())
    assert ans.value == Verdict(verdict="refuted", confidence=0.7)
    assert plain.content == "plain"
    assert m.tokens > 0 and [c.outcome for c in m.calls] == ["ok", "ok"]
