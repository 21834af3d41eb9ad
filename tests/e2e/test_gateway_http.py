"""The running gateway driven with the real ``openai`` SDK (sync and async), against the
scripted upstream: fidelity both ways, streaming, every error mapping, client disconnects,
upstream faults, virtual-key auth, secrets kept out of logs/metrics/errors."""

from __future__ import annotations

import json
import secrets
import socket
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.config import hash_key
from tests.fixtures.mock import scripted_mock
from tests.fixtures.polling import wait_for

UPSTREAM_KEY = "sk-proj-" + secrets.token_urlsafe(36)  # key-shaped, must never leak
VIRTUAL_KEY = "vk-test-" + secrets.token_urlsafe(24)

SCRIPT: dict[str, Any] = {
    "models": ["gpt-4o", "gpt-4o-mini", "mock-model"],
    "rules": [
        {"name": "tool-single", "match": {"last_user": "^tool-single"},
         "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}],
                   "stream": {"chunk_size": 5}}},
        {"name": "tool-parallel", "match": {"last_user": "^tool-parallel"},
         "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}},
                                  {"name": "get_time", "arguments": {"tz": "Europe/Paris"}}],
                   "stream": {"chunk_size": 4}}},
        {"name": "n2", "match": {"last_user": "^n2"},
         "reply": {"choices": [{"content": "first answer"}, {"content": "second answer"}]}},
        {"name": "extra", "match": {"last_user": "^extra"},
         "reply": {"content": "with extras", "extra": {"vendor_meta": {"region": "eu", "tier": 2}},
                   "message_extra": {"vendor_note": "n"}, "choice_extra": {"vendor_score": 0.5}}},
        {"name": "json", "match": {"last_user": "^json"}, "reply": {"content": '{"answer": 42}'}},
        {"name": "err429", "match": {"last_user": "^err429"},
         "reply": {"status": 429, "error": "Rate limit reached for gpt-4o", "headers": {"Retry-After": "7"}}},
        {"name": "err500", "match": {"last_user": "^err500"}, "reply": {"status": 500, "error": "upstream broke"}},
        {"name": "err503", "match": {"last_user": "^err503"}, "reply": {"status": 503, "error": "overloaded"}},
        {"name": "slow", "match": {"last_user": "^slow"}, "reply": {"content": "late", "delay_ms": 3000}},
        {"name": "drop-mid", "match": {"last_user": "^drop-mid"},
         "reply": {"content": "a fairly long answer that will be cut in the middle", "fault": "drop_mid_stream",
                   "stream": {"chunk_size": 4}}},
        {"name": "drop-before", "match": {"last_user": "^drop-before"}, "reply": {"fault": "drop_before_headers"}},
        {"name": "no-done", "match": {"last_user": "^no-done"},
         "reply": {"content": "ends without done", "fault": "no_done"}},
        {"name": "no-finish", "match": {"last_user": "^no-finish"},
         "reply": {"content": "ends without finish", "fault": "no_finish_reason"}},
        {"name": "id-retry", "match": {"last_user": "^id-retry"},
         "reply": {"content": "frames with id and retry only", "fault": "id_retry_frames", "stream": {"chunk_size": 6}}},
        {"name": "empty-data", "match": {"last_user": "^empty-data"},
         "reply": {"content": "frames with empty data", "fault": "empty_data", "stream": {"chunk_size": 6}}},
        {"name": "error-mid", "match": {"last_user": "^error-mid"},
         "reply": {"content": "this stream fails halfway through", "fault": "error_mid_stream",
                   "error": "upstream exploded mid-stream", "stream": {"chunk_size": 4}}},
        {"name": "trickle", "match": {"last_user": "^trickle"},
         "reply": {"content": "x" * 200, "stream": {"chunk_size": 2, "delay_ms": 100}}},
    ],
}


def _closed_port() -> socket.socket:
    """A socket bound to a loopback port and never listening: connecting to it is refused for
    as long as the socket is open (a port closed again could be taken by another server)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s



mock, _reset_mock = scripted_mock(SCRIPT)


@pytest.fixture(scope="module")
def dead_port() -> Any:
    with _closed_port() as s:
        yield s.getsockname()[1]


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, dead_port: int) -> Any:
    """Gateway with virtual keys; upstreams: dead (closed port), slow (0.5 s read timeout), mock."""
    return gateway_factory({
        "upstreams": [
            {"name": "dead", "models": ["dead-*"], "base_url": f"http://127.0.0.1:{dead_port}/v1",
             "api_key": "${TEST_UPSTREAM_KEY}"},
            {"name": "slow", "models": ["slow-*"], "base_url": mock.base_url, "api_key": "${TEST_UPSTREAM_KEY}",
             "read_timeout_s": 0.5},
            {"name": "mock", "models": ["gpt-*", "mock-model"], "base_url": mock.base_url,
             "api_key": "${TEST_UPSTREAM_KEY}"},
        ],
        "keys": [{"name": "alice", "hash": hash_key(VIRTUAL_KEY), "team": "research", "policy": "default"}],
        "limits": {"max_body_bytes": 65536, "connect_timeout_s": 1, "connect_retries": 1},
    }, env={"TEST_UPSTREAM_KEY": UPSTREAM_KEY})


@pytest.fixture
def client(gw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=VIRTUAL_KEY, max_retries=0, timeout=20)


@pytest.fixture
def aclient(gw: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url, api_key=VIRTUAL_KEY, max_retries=0, timeout=20)


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _last_chat_request(mock: Any) -> dict[str, Any]:
    reqs = [r for r in mock.requests() if r["path"] == "/v1/chat/completions"]
    assert reqs, "the upstream received no chat request"
    return reqs[-1]


# --------------------------------------------------------------------------- fidelity, non-stream


def test_plain_answer_keeps_upstream_fields_and_adds_veracity(client: openai.OpenAI, mock: Any) -> None:
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("hello there"))
    resp = raw.parse()
    assert resp.choices[0].message.content == "Mock reply to: hello there"
    assert resp.id.startswith("chatcmpl-mock") and resp.system_fingerprint == "fp_mock"
    assert resp.usage is not None and resp.usage.total_tokens > 0
    data = json.loads(raw.http_response.content)
    assert data["veracity"]["status"] == "skipped"
    assert raw.headers["x-veracity-status"] == "skipped"
    assert float(raw.headers["x-veracity-overhead-ms"]) >= 0
    assert raw.headers["x-request-id"].startswith("req_")
    # the upstream saw its own key, not the client's virtual key
    assert _last_chat_request(mock)["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"


def test_request_fields_forwarded_unchanged(client: openai.OpenAI, mock: Any) -> None:
    messages = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is in this image?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "look", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "user", "content": "and so?"},
    ]
    tools = [{"type": "function", "function": {"name": "look", "description": "d", "strict": True,
                                               "parameters": {"type": "object", "properties": {},
                                                              "additionalProperties": False}}}]
    client.chat.completions.create(
        model="gpt-4o", messages=messages, n=1, logprobs=True, top_logprobs=2, seed=7, user="u-1",
        tools=tools, tool_choice="auto", parallel_tool_calls=False, max_completion_tokens=50,
        response_format={"type": "json_object"},
        extra_body={"vendor_knob": {"depth": 3, "list": [1, 2.5, None]}, "store": False})
    body = _last_chat_request(mock)["body"]
    assert body["messages"] == messages
    assert body["tools"] == tools
    for k, v in {"n": 1, "logprobs": True, "top_logprobs": 2, "seed": 7, "user": "u-1", "tool_choice": "auto",
                 "parallel_tool_calls": False, "max_completion_tokens": 50,
                 "response_format": {"type": "json_object"},
                 "vendor_knob": {"depth": 3, "list": [1, 2.5, None]}, "store": False}.items():
        assert body[k] == v, k


def test_unknown_response_fields_kept(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("extra please"))
    data = json.loads(raw.http_response.content)
    assert data["vendor_meta"] == {"region": "eu", "tier": 2}
    assert data["choices"][0]["vendor_score"] == 0.5
    assert data["choices"][0]["message"]["vendor_note"] == "n"
    resp = raw.parse()
    assert resp.model_extra["vendor_meta"] == {"region": "eu", "tier": 2}


def test_tool_calls_single_and_parallel(client: openai.OpenAI) -> None:
    one = client.chat.completions.create(model="gpt-4o", messages=_user("tool-single"))
    assert one.choices[0].finish_reason == "tool_calls"
    (call,) = one.choices[0].message.tool_calls
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}
    two = client.chat.completions.create(model="gpt-4o", messages=_user("tool-parallel"))
    assert [c.function.name for c in two.choices[0].message.tool_calls] == ["get_weather", "get_time"]


def test_n2_logprobs_response_format(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(model="gpt-4o", messages=_user("n2"), n=2, logprobs=True, top_logprobs=1)
    assert [c.index for c in r.choices] == [0, 1]
    assert [c.message.content for c in r.choices] == ["first answer", "second answer"]
    assert r.choices[0].logprobs is not None and r.choices[0].logprobs.content
    j = client.chat.completions.create(model="gpt-4o", messages=_user("json"),
                                       response_format={"type": "json_object"})
    assert json.loads(j.choices[0].message.content) == {"answer": 42}


async def test_async_client_plain_and_stream(aclient: openai.AsyncOpenAI) -> None:
    r = await aclient.chat.completions.create(model="gpt-4o-mini", messages=_user("async hello"))
    assert r.choices[0].message.content == "Mock reply to: async hello"
    stream = await aclient.chat.completions.create(model="gpt-4o-mini", messages=_user("async stream"),
                                                   stream=True, stream_options={"include_usage": True})
    text, usage = "", None
    async for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert text == "Mock reply to: async stream"
    assert usage is not None and usage.total_tokens > 0


# --------------------------------------------------------------------------- streaming


def test_stream_plain_with_usage_chunk_and_headers(client: openai.OpenAI, mock: Any) -> None:
    with client.chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=_user("stream me"), stream=True,
            stream_options={"include_usage": True}) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        assert raw.headers["x-veracity-status"] in ("skipped", "pending")  # pending: report in the last chunk
        assert raw.headers["x-request-id"].startswith("req_")
        chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Mock reply to: stream me"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert _last_chat_request(mock)["body"]["stream_options"] == {"include_usage": True}


def test_stream_raw_bytes_end_with_done(gw: Any) -> None:
    with httpx.stream("POST", gw.base_url + "/chat/completions", trust_env=False, timeout=10,
                      headers={"Authorization": f"Bearer {VIRTUAL_KEY}"},
                      json={"model": "gpt-4o", "stream": True, "messages": _user("raw stream")}) as r:
        body = r.read()
    events = [e for e in body.split(b"\n\n") if e]
    assert events[-1] == b"data: [DONE]"
    assert all(e.startswith(b"data: ") for e in events)


def test_stream_tool_call_deltas(client: openai.OpenAI) -> None:
    calls: dict[int, dict[str, Any]] = {}
    ids_seen: dict[int, int] = {}
    finish = None
    for chunk in client.chat.completions.create(model="gpt-4o", messages=_user("tool-parallel"), stream=True):
        for ch in chunk.choices:
            for d in ch.delta.tool_calls or []:
                c = calls.setdefault(d.index, {"name": "", "args": ""})
                if d.id:
                    ids_seen[d.index] = ids_seen.get(d.index, 0) + 1
                if d.function and d.function.name:
                    c["name"] += d.function.name
                if d.function and d.function.arguments:
                    c["args"] += d.function.arguments
            finish = ch.finish_reason or finish
    assert finish == "tool_calls"
    assert {i: c["name"] for i, c in calls.items()} == {0: "get_weather", 1: "get_time"}
    assert json.loads(calls[1]["args"]) == {"tz": "Europe/Paris"}
    assert ids_seen == {0: 1, 1: 1}  # ids only on the first delta of each call


def test_stream_n2_choice_indexes(client: openai.OpenAI) -> None:
    texts: dict[int, str] = {}
    for chunk in client.chat.completions.create(model="gpt-4o", messages=_user("n2"), n=2, stream=True):
        for ch in chunk.choices:
            texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
    assert texts == {0: "first answer", 1: "second answer"}


@pytest.mark.parametrize("fault", ["id-retry", "empty-data"])
def test_stream_frames_without_data_are_dropped(client: openai.OpenAI, fault: str) -> None:
    """The openai SDK would json-decode these empty frames and crash; the gateway drops them."""
    chunks = list(client.chat.completions.create(model="gpt-4o", messages=_user(fault), stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text in ("frames with id and retry only", "frames with empty data")


@pytest.mark.parametrize("fault,code", [("drop-mid", "upstream_disconnected"),
                                        ("no-done", "upstream_stream_truncated"),
                                        ("no-finish", "upstream_stream_truncated")])
def test_stream_failures_surface_as_sdk_errors(client: openai.OpenAI, gw: Any, fault: str, code: str) -> None:
    got = ""
    with pytest.raises(openai.APIError) as ei:
        for chunk in client.chat.completions.create(model="gpt-4o", messages=_user(fault), stream=True):
            got += "".join(ch.delta.content or "" for ch in chunk.choices)
    assert ei.value.body["code"] == code
    assert got  # some content was relayed before the failure
    # the request's log line is written after the client saw the error: wait for it (a loaded
    # machine wrote it after the assertion ran)
    wait_for(lambda: code in gw.log(), f"the {code} log line")


def test_stream_upstream_error_event_relayed(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIError) as ei:
        for _ in client.chat.completions.create(model="gpt-4o", messages=_user("error-mid"), stream=True):
            pass
    assert "upstream exploded mid-stream" in str(ei.value)


def test_stream_error_before_first_byte_is_json(client: openai.OpenAI) -> None:
    with pytest.raises(openai.RateLimitError) as ei:
        client.chat.completions.create(model="gpt-4o", messages=_user("err429"), stream=True)
    assert ei.value.response.headers["retry-after"] == "7"
    with pytest.raises(openai.APIStatusError) as ei2:
        client.chat.completions.create(model="gpt-4o", messages=_user("drop-before"), stream=True)
    assert ei2.value.status_code == 502


def test_client_disconnect_closes_upstream(gw: Any, mock: Any) -> None:
    with httpx.stream("POST", gw.base_url + "/chat/completions", trust_env=False, timeout=10,
                      headers={"Authorization": f"Bearer {VIRTUAL_KEY}"},
                      json={"model": "gpt-4o", "stream": True, "messages": _user("trickle")}) as r:
        it = r.iter_bytes()
        next(it)
        next(it)
    # 100 frames at 100 ms: a full relay takes 10 s; the upstream must see the close before its
    # end (a relay that kept reading would record no disconnect; the bound leaves a loaded
    # machine seconds to propagate the close)
    events = wait_for(lambda: _last_chat_request(mock)["events"], "the upstream to see an event")
    assert events[0]["event"] == "client_disconnected"
    assert events[0]["frames_sent"] < 90
    # the request line is written after the upstream was closed: wait for it, do not sleep
    wait_for(lambda: [r for r in gw.log_records() if r.get("event") == "request" and r.get("client_disconnected")],
              "the request log line recording the disconnect")


# --------------------------------------------------------------------------- errors


def test_utf8_bom_before_the_json_is_accepted(gw: Any, mock: Any) -> None:
    """RFC 8259 section 8.1 lets a parser ignore a leading byte order mark; .NET and PowerShell
    clients send one. The upstream gets the body as JSON without it."""
    body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "bom"}]}).encode()
    r = httpx.post(gw.base_url + "/chat/completions", content=b"\xef\xbb\xbf" + body, trust_env=False,
                   headers={"Authorization": f"Bearer {VIRTUAL_KEY}", "Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"]
    sent = [q for q in mock.requests() if q["path"] == "/v1/chat/completions"]
    assert sent and sent[-1]["body"]["messages"][0]["content"] == "bom"


def test_invalid_json_400(gw: Any) -> None:
    r = httpx.post(gw.base_url + "/chat/completions", content=b"{not json", trust_env=False,
                   headers={"Authorization": f"Bearer {VIRTUAL_KEY}", "Content-Type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == "invalid_json"
    r2 = httpx.post(gw.base_url + "/chat/completions", json=[1, 2], trust_env=False,
                    headers={"Authorization": f"Bearer {VIRTUAL_KEY}"})
    assert r2.status_code == 400


def test_missing_model_400(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as ei:
        client.chat.completions.create(model="", messages=_user("x"))
    assert ei.value.body["param"] == "model"


def test_body_too_large_413(client: openai.OpenAI, mock: Any) -> None:
    with pytest.raises(openai.APIStatusError) as ei:
        client.chat.completions.create(model="gpt-4o", messages=_user("x" * 70_000))
    assert ei.value.status_code == 413
    assert ei.value.body["code"] == "request_too_large"
    assert not [r for r in mock.requests() if r["path"] == "/v1/chat/completions"]


def test_chunked_body_too_large_413(gw: Any) -> None:
    def parts():  # no Content-Length: the limit is enforced while reading
        yield b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "'
        for _ in range(10):
            yield b"x" * 10_000
        yield b'"}]}'

    r = httpx.post(gw.base_url + "/chat/completions", content=parts(), trust_env=False, timeout=10,
                   headers={"Authorization": f"Bearer {VIRTUAL_KEY}", "Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"


def test_client_request_id_is_kept(client: openai.OpenAI) -> None:
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=_user("id please"), extra_headers={"x-request-id": "trace-42.a"})
    assert raw.headers["x-request-id"] == "trace-42.a"
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o", messages=_user("id please"), extra_headers={"x-request-id": "bad id\twith spaces"})
    assert raw.headers["x-request-id"].startswith("req_")


def test_unknown_model_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as ei:
        client.chat.completions.create(model="llama-unknown", messages=_user("x"))
    assert ei.value.body["code"] == "model_not_found"


def test_bad_or_missing_key_401(gw: Any) -> None:
    bad = openai.OpenAI(base_url=gw.base_url, api_key="sk-proj-not-a-real-key-1234567890", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as ei:
        bad.chat.completions.create(model="gpt-4o", messages=_user("x"))
    assert "sk-proj-not-a-real-key" not in json.dumps(ei.value.body)
    r = httpx.post(gw.base_url + "/chat/completions", json={"model": "gpt-4o", "messages": _user("x")},
                   trust_env=False)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    r = httpx.get(gw.base_url + "/models", trust_env=False)
    assert r.status_code == 401


def test_upstream_429_relayed_with_retry_after(client: openai.OpenAI, mock: Any) -> None:
    with pytest.raises(openai.RateLimitError) as ei:
        client.chat.completions.create(model="gpt-4o", messages=_user("err429"))
    assert ei.value.response.headers["retry-after"] == "7"
    assert ei.value.body["message"] == "Rate limit reached for gpt-4o"
    assert len([r for r in mock.requests() if r["path"] == "/v1/chat/completions"]) == 1


@pytest.mark.parametrize("text,status", [("err500", 500), ("err503", 503)])
def test_upstream_5xx_relayed_not_retried(client: openai.OpenAI, mock: Any, text: str, status: int) -> None:
    with pytest.raises(openai.InternalServerError) as ei:
        client.chat.completions.create(model="gpt-4o", messages=_user(text))
    assert ei.value.status_code == status
    assert len([r for r in mock.requests() if r["path"] == "/v1/chat/completions"]) == 1


def test_connection_dropped_before_headers_502_not_retried(client: openai.OpenAI, mock: Any) -> None:
    with pytest.raises(openai.APIStatusError) as ei:
        client.chat.completions.create(model="gpt-4o", messages=_user("drop-before"))
    assert ei.value.status_code == 502
    assert len([r for r in mock.requests() if r["path"] == "/v1/chat/completions"]) == 1


def test_connect_failure_502(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as ei:
        client.chat.completions.create(model="dead-model", messages=_user("x"))
    assert ei.value.status_code == 502
    assert ei.value.body["code"] == "upstream_connect_error"


def test_timeout_504(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as ei:
        client.chat.completions.create(model="slow-model", messages=_user("slow"))
    assert ei.value.status_code == 504
    assert ei.value.body["code"] == "upstream_timeout"


def test_unknown_route_is_openai_shaped(gw: Any) -> None:
    r = httpx.get(gw.url + "/nope", trust_env=False)
    assert r.status_code == 404 and "error" in r.json()


# --------------------------------------------------------------------------- other routes


def test_models_union_and_passthrough(client: openai.OpenAI, mock: Any) -> None:
    ids = {m.id for m in client.models.list()}
    assert ids == {"gpt-4o", "gpt-4o-mini", "mock-model"}  # routed to "mock"; none match dead-/slow-
    emb = client.embeddings.create(model="gpt-4o", input="hello")
    assert len(emb.data[0].embedding) > 0
    rec = [r for r in mock.requests() if r["path"] == "/v1/embeddings"][-1]
    assert rec["body"] == {"model": "gpt-4o", "input": "hello", "encoding_format": "base64"}
    assert rec["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"
    comp = client.completions.create(model="gpt-4o", prompt="Say hi")
    assert comp.choices[0].text == "Mock completion of: Say hi"


def _sample(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` with exactly ``labels`` in the exposition ``text``."""
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and s.labels == labels:
                return s.value
    return None


def test_health_ready(gw: Any) -> None:
    assert httpx.get(gw.url + "/healthz", trust_env=False).json() == {"status": "ok"}
    ready = httpx.get(gw.url + "/readyz", trust_env=False).json()
    assert ready["status"] == "ready" and ready["auth"] == "virtual_keys"


# --------------------------------------------------------------------------- observability


def test_metrics_and_request_log(client: openai.OpenAI, gw: Any) -> None:
    raw = client.chat.completions.with_raw_response.create(model="mock-model", messages=_user("metrics probe"))
    rid = raw.headers["x-request-id"]
    text = gw.metrics()
    who = {"model": "mock-model", "team": "research"}  # the key's team, as on the verification metrics
    assert _sample(text, "veracity_requests_total", route="/v1/chat/completions", status="200", **who) == 1.0
    assert _sample(text, "veracity_overhead_seconds_count", route="/v1/chat/completions", **who) == 1.0
    for name in ("veracity_request_duration_seconds_bucket", "veracity_upstream_duration_seconds_bucket",
                 "veracity_overhead_seconds_bucket", "veracity_in_flight_requests",
                 "veracity_upstream_errors_total"):
        assert name in text, name
    wait_for(lambda: [r for r in gw.log_records() if r.get("request_id") == rid], "the request log line")
    lines = [r for r in gw.log_records() if r.get("request_id") == rid]
    assert len(lines) == 1
    line = lines[0]
    assert line["event"] == "request" and line["team"] == "research" and line["key"] == "alice"
    assert line["model"] == "mock-model" and line["status"] == 200
    assert line["duration_ms"] >= line["upstream_ms"] > 0
    assert "metrics probe" not in gw.log()  # no prompt text unless configured


def test_upstream_error_metric_and_secrets_absent(client: openai.OpenAI, gw: Any) -> None:
    client.chat.completions.create(model="gpt-4o", messages=_user("hello there"))  # gpt-4o: a served name
    for text in ("err503", "drop-before"):
        with pytest.raises(openai.APIStatusError):
            client.chat.completions.create(model="gpt-4o", messages=_user(text))
    with pytest.raises(openai.APIStatusError) as ei:
        client.chat.completions.create(model="dead-model", messages=_user("x"))
    m = gw.metrics()
    assert "veracity_in_flight_requests 0.0" in m  # balanced after errors, faults and disconnects
    # by model and team (the key's): a served name keeps its label; a name only ever seen in
    # failed calls never gets one (metrics.model_label: "_other"), so made-up names stay bounded
    assert _sample(m, "veracity_upstream_errors_total", reason="http_503", model="gpt-4o", team="research") >= 1
    assert _sample(m, "veracity_upstream_errors_total", reason="connect", model="_other", team="research") >= 1
    assert not [s for f in text_string_to_metric_families(m) for s in f.samples if s.labels.get("model") == "dead-model"]
    everything = gw.log() + m + json.dumps(ei.value.body)
    assert UPSTREAM_KEY not in everything
    assert UPSTREAM_KEY[:20] not in everything
    assert VIRTUAL_KEY not in everything
