"""Fidelity bugs that public LLM gateways have shipped, each checked against Veracity.

Every test names the public thread where the kind of fault was reported (LiteLLM proxy, one-api /
new-api, vLLM, OpenRouter clients, ...) and drives the running gateway with the real ``openai``
SDK (raw ``httpx`` / sockets where the SDK cannot produce the input) against the scripted upstream
(``veracity mock-upstream``; ``raw_stream`` scripts wire shapes the chunk builder never makes).

Three policies: ``off`` (no verifier: the plain relay), ``default`` (the shipped default: verify,
correct, stream in ``passthrough`` mode) and ``buffer`` (the same, streams held, verified and
re-chunked by the gateway). A fidelity rule must hold in every mode the request can take.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from tests.fixtures.mock import scripted_mock

ROOT = Path(__file__).resolve().parents[2]
POLICY_NAMES = ["off", "default", "buffer"]
ANSWER = "The total is 12 * 3 = 36."   # arithmetic: the verifying policies check it (it passes)


def _chunk(delta: dict[str, Any] | None = None, finish: str | None = None, *, choices: Any = None,
           **top: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` (``choices`` given: used as is)."""
    base = {"id": "chatcmpl-raw", "object": "chat.completion.chunk", "created": 1700000000, "model": "gpt-4o"}
    if choices is None:
        choices = [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}]
    return {**base, "choices": choices, **top}


def _frames(chunks: list[dict[str, Any]], *, prefix: str = "data: ", eol: str = "\n",
            done: bool = True) -> list[str]:
    """SSE frames for ``chunks`` with the given field prefix and line end (one string per write)."""
    out = [f"{prefix}{json.dumps(c)}{eol}{eol}" for c in chunks]
    if done:
        out.append(f"{prefix}[DONE]{eol}{eol}")
    return out


TEXT_CHUNKS = [_chunk({"role": "assistant", "content": ""}), _chunk({"content": "The total is "}),
               _chunk({"content": "12 * 3 = 36."}), _chunk({}, "stop")]

# Gemini / some OpenAI-compatible servers: tool-call deltas without `index`
NO_INDEX_CALL = [
    _chunk({"role": "assistant", "content": None}),
    _chunk({"tool_calls": [{"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": ""}}]}),
    _chunk({"tool_calls": [{"function": {"arguments": '{"city": '}}]}),
    _chunk({"tool_calls": [{"function": {"arguments": '"Paris"}'}}]}),
    _chunk({}, "tool_calls"),
]
NO_INDEX_TWO_CALLS = [
    _chunk({"role": "assistant", "content": None}),
    _chunk({"tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}),
    _chunk({"tool_calls": [{"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz": "CET"}'}}]}),
    _chunk({}, "tool_calls"),
]

# DeepSeek-R1: the chain of thought in `reasoning_content` deltas, then the answer
REASONING_CHUNKS = [
    _chunk({"role": "assistant", "content": None, "reasoning_content": ""}),
    _chunk({"reasoning_content": "Twelve threes "}), _chunk({"reasoning_content": "make thirty-six."}),
    _chunk({"content": "The total is "}), _chunk({"content": "12 * 3 = 36."}), _chunk({}, "stop"),
]

# Azure OpenAI: a first chunk with `choices: []` and the prompt filter results, ids empty
AZURE_FILTER = {"id": "", "object": "", "created": 0, "model": "", "choices": [],
                "prompt_filter_results": [{"prompt_index": 0, "content_filter_results": {"hate": {"filtered": False, "severity": "safe"}}}]}

ANNOTATIONS = [{"type": "url_citation", "url_citation": {"url": "https://example.org/a", "title": "A",
                                                          "start_index": 0, "end_index": 9}}]
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
         "prompt_tokens_details": {"cached_tokens": 4, "audio_tokens": 0},
         "completion_tokens_details": {"reasoning_tokens": 3, "audio_tokens": 0,
                                       "accepted_prediction_tokens": 1, "rejected_prediction_tokens": 2}}

SCRIPT: dict[str, Any] = {
    "models": ["gpt-4o", "o3-mini"],
    "rules": [
        {"name": "raw-nospace", "match": {"last_user": "^raw-nospace"},
         "reply": {"raw_stream": _frames(TEXT_CHUNKS, prefix="data:")}},
        {"name": "raw-crlf", "match": {"last_user": "^raw-crlf"},
         "reply": {"raw_stream": _frames(TEXT_CHUNKS, eol="\r\n")}},
        {"name": "raw-cr", "match": {"last_user": "^raw-cr$"},
         "reply": {"raw_stream": _frames(TEXT_CHUNKS, eol="\r")}},
        {"name": "raw-crlf-split", "match": {"last_user": "^raw-split"},
         # a CRLF cut between two writes: "...\r" | "\n\r\n..."
         "reply": {"raw_stream": [x for f in _frames(TEXT_CHUNKS, eol="\r\n") for x in (f[:-3], f[-3:])]}},
        {"name": "raw-comments", "match": {"last_user": "^raw-comments"},
         "reply": {"raw_stream": [": OPENROUTER PROCESSING\n\n", "id: 1\n", ": ping\n\n"]
                   + [x for f in _frames(TEXT_CHUNKS) for x in (f, ": ping\n\n")]}},
        {"name": "raw-no-index", "match": {"last_user": "^raw-no-index"},
         "reply": {"raw_stream": _frames(NO_INDEX_CALL)}},
        {"name": "raw-no-index-two", "match": {"last_user": "^raw-two-calls"},
         "reply": {"raw_stream": _frames(NO_INDEX_TWO_CALLS)}},
        {"name": "raw-reasoning", "match": {"last_user": "^raw-reasoning"},
         "reply": {"raw_stream": _frames(REASONING_CHUNKS)}},
        {"name": "raw-azure", "match": {"last_user": "^raw-azure"},
         "reply": {"raw_stream": _frames([AZURE_FILTER] + TEXT_CHUNKS)}},
        {"name": "raw-azure-usage", "match": {"last_user": "^raw-usage-azure"},
         "reply": {"raw_stream": _frames([AZURE_FILTER] + TEXT_CHUNKS
                                         + [_chunk(choices=[], usage=USAGE)])}},
        {"name": "raw-finish-on-content", "match": {"last_user": "^raw-finish-on-content"},
         "reply": {"raw_stream": _frames([_chunk({"role": "assistant", "content": "The total is "}),
                                          _chunk({"content": "12 * 3 = 36."}, "length")])}},
        {"name": "tool-null", "match": {"last_user": "^tool-null"},
         "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
                   "message_extra": {"reasoning_content": "Need the weather first."}}},
        {"name": "rich", "match": {"last_user": "^rich"},
         "reply": {"content": ANSWER, "refusal": None, "usage": USAGE, "system_fingerprint": "fp_rich",
                   "message_extra": {"annotations": ANNOTATIONS,
                                     "audio": {"id": "audio_1", "data": "UklGRg==", "expires_at": 1700003600,
                                               "transcript": "twelve threes"}},
                   "extra": {"service_tier": "default"}}},
        {"name": "refusal", "match": {"last_user": "^refuse"},
         "reply": {"content": None, "refusal": "I can't help with that."}},
        {"name": "length", "match": {"last_user": "^length"},
         "reply": {"content": ANSWER, "finish_reason": "length"}},
        {"name": "logprobs", "match": {"last_user": "^logprobs"}, "reply": {"content": ANSWER}},
        {"name": "limited", "match": {"last_user": "^limited"},
         "reply": {"status": 429, "headers": {"Retry-After": "3", "retry-after-ms": "2500",
                                              "x-ratelimit-remaining-requests": "0",
                                              "x-request-id": "req_upstream_429"},
                   "error": {"error": {"message": "Rate limit reached for gpt-4o on requests per min (RPM)",
                                       "type": "requests", "param": None, "code": "rate_limit_exceeded"}}}},
        {"name": "ratelimit-headers", "match": {"last_user": "^headers"},
         "reply": {"content": ANSWER, "headers": {"x-ratelimit-remaining-tokens": "99", "openai-processing-ms": "12",
                                                   "x-request-id": "req_upstream_ok"}}},
        {"name": "gzip-chat", "match": {"last_user": "^gzip"}, "reply": {"content": ANSWER, "content_encoding": "gzip"}},
        {"name": "emb-gzip", "match": {"path": "/v1/embeddings", "model": "*-gzip"},
         "reply": {"content_encoding": "gzip"}},
        {"name": "emb-deflate", "match": {"path": "/v1/embeddings", "model": "*-deflate"},
         "reply": {"content_encoding": "deflate"}},
        {"name": "raw-error-data", "match": {"last_user": "^raw-error-data"},
         "reply": {"raw_stream": _frames(TEXT_CHUNKS[:2], done=False) + _frames([
             {"error": {"message": "The server had an error while processing your request.", "type": "server_error",
                        "param": None, "code": "server_error"}}], done=False)}},
        {"name": "raw-function-call", "match": {"last_user": "^raw-function-call"},
         "reply": {"raw_stream": _frames([
             _chunk({"role": "assistant", "content": None, "function_call": {"name": "get_weather", "arguments": ""}}),
             _chunk({"function_call": {"arguments": '{"city": '}}), _chunk({"function_call": {"arguments": '"Rome"}'}}),
             _chunk({}, "function_call")])}},
        {"name": "snapshot", "match": {"last_user": "^snapshot"},
         "reply": {"content": ANSWER, "model": "gpt-4o-2024-08-06", "id": "chatcmpl-upstream-1",
                   "system_fingerprint": "fp_snap"}},
        {"name": "too-long", "match": {"last_user": "^too-long"},
         "reply": {"status": 400, "error": {"error": {
             "message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
             "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}}},
        {"name": "raw-huge-line", "match": {"last_user": "^raw-huge-line"},
         "reply": {"raw_stream": _frames([
             _chunk({"role": "assistant", "content": None}),
             _chunk({"tool_calls": [{"index": 0, "id": "call_big", "type": "function",
                                     "function": {"name": "save", "arguments": json.dumps({"blob": "A" * 2_000_000})}}]}),
             _chunk({}, "tool_calls")])}},
        {"name": "long-stream", "match": {"last_user": "^long-stream"},
         "reply": {"content": "y" * 80, "stream": {"chunk_size": 1, "delay_ms": 50}}},
    ],
}


mock, _reset_mock = scripted_mock(SCRIPT)


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    tmp = tmp_path_factory.mktemp("compat")
    pdir = tmp / "policies"
    pdir.mkdir()
    default = yaml.safe_load((ROOT / "policies" / "default.yaml").read_text())
    default["verifiers"]["citations"]["enabled"] = False  # no bibliographic lookups: nothing offline to ask
    buffer = dict(default, name="buffer", streaming={"mode": "buffer", "keepalive_s": 5})
    off = dict(default, name="off", verifiers={"arithmetic": {"enabled": False}, "code": {"enabled": False},
                                              "citations": {"enabled": False}})
    for doc in (default, buffer, off):
        (pdir / f"{doc['name']}.yaml").write_text(yaml.safe_dump(doc))
    return gateway_factory({
        "upstreams": [
            {"name": "short-read", "models": ["*-short-read"], "base_url": mock.base_url, "api_key": "sk-up",
             "read_timeout_s": 2},
            {"name": "client-key", "models": ["*-passauth"], "base_url": mock.base_url},  # pass-through auth
            {"name": "mock", "models": ["*"], "base_url": mock.base_url, "api_key": "sk-up"},
        ],
        "policies": {"dir": str(pdir), "check_interval_s": 0},
        "verification": {"audit": str(tmp / "audit.jsonl"), "budget_db": str(tmp / "budget.sqlite3")},
        "limits": {"connect_retries": 0},
    })


def _client(gw: Any, policy: str = "off") -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=60,
                         default_headers={"x-veracity-policy": policy})


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _chat_bodies(mock: Any) -> list[dict[str, Any]]:
    return [r["body"] for r in mock.requests() if r["path"] == "/v1/chat/completions"]


def _stream(gw: Any, policy: str, text: str, **kw: Any) -> list[Any]:
    """The parsed chunks of a streamed answer (``openai`` SDK)."""
    return list(_client(gw, policy).chat.completions.create(model="gpt-4o", messages=_user(text), stream=True, **kw))


def _text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _raw_stream(gw: Any, policy: str, body: dict[str, Any]) -> list[dict[str, Any] | str]:
    """The ``data:`` payloads of a streamed answer, parsed (``[DONE]`` kept as a string)."""
    with httpx.stream("POST", gw.base_url + "/chat/completions", trust_env=False, timeout=60,
                      headers={"x-veracity-policy": policy, "Authorization": "Bearer sk-client"},
                      json={"stream": True, **body}) as r:
        assert r.status_code == 200, r.read()
        raw = r.read().decode()
    out: list[dict[str, Any] | str] = []
    for event in raw.split("\n\n"):
        data = [line[6:] for line in event.split("\n") if line.startswith("data: ")]
        if data:
            out.append("[DONE]" if data == ["[DONE]"] else json.loads("\n".join(data)))
    return out


# --------------------------------------------------------------------------- SSE wire shapes


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("text", ["raw-nospace", "raw-crlf", "raw-cr", "raw-split", "raw-comments"])
def test_sse_variants_the_spec_allows_reach_the_client_whole(gw: Any, policy: str, text: str) -> None:
    """openai/openai-python#559 and odysseus-dev/odysseus#1701 (``data:`` without the space),
    mnfst/llm-gateway#2053 (OpenRouter's ``: OPENROUTER PROCESSING`` comments re-emitted as data),
    theopenco/llmgateway#2334 (``id:`` then a comment frame: an empty event the SDK chokes on);
    CR and CRLF line ends (WHATWG "Server-sent events": CRLF, LF and CR all end a line)."""
    chunks = _stream(gw, policy, text)
    assert _text(chunks) == ANSWER
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    # on the wire: the stream ends cleanly ([DONE] last, no error event: the gateway saw the
    # upstream's end), and a verifying policy's report says the answer was checked
    events = _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user(text)})
    assert events[-1] == "[DONE]"
    assert not [e for e in events if isinstance(e, dict) and "error" in e]
    reports = [e["veracity"] for e in events if isinstance(e, dict) and "veracity" in e]
    assert all(r["status"] in ("passed", "skipped") for r in reports), reports


# --------------------------------------------------------------------------- tool calls


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_tool_call_deltas_without_index_assemble_into_one_call(gw: Any, policy: str) -> None:
    """AstrBotDevs/AstrBot#6661, openai/openai-python#3246: Gemini-style streams omit
    ``tool_calls[].index``; a gateway that re-chunks must keep the continuation deltas on the call
    they continue, and every delta it sends carries ``index`` (CaddyGlow/ccproxy-api#49)."""
    events = _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user("raw-no-index")})
    calls: list[dict[str, str]] = []
    for ev in events:
        if isinstance(ev, str) or not ev["choices"]:
            continue
        for d in ev["choices"][0]["delta"].get("tool_calls") or []:
            if policy == "buffer":  # the gateway re-chunked: it must say which call a delta belongs to
                assert isinstance(d.get("index"), int), d
            # a client's rule for index-less deltas (openai-python#3246): an id starts a call
            if d.get("id") or not calls if "index" not in d else d["index"] >= len(calls):
                calls.append({"name": "", "arguments": ""})
            call = calls[-1] if "index" not in d else calls[d["index"]]
            call["name"] += d.get("function", {}).get("name") or ""
            call["arguments"] += d.get("function", {}).get("arguments") or ""
    assert calls == [{"name": "get_weather", "arguments": '{"city": "Paris"}'}]


def test_buffered_tool_calls_without_index_but_with_ids_stay_apart(gw: Any) -> None:
    """The other half of openai/openai-python#3246: two calls without ``index`` but each with its
    own ``id`` are two calls, not one."""
    msg = _client(gw, "buffer").chat.completions.create(
        model="gpt-4o", messages=_user("raw-two-calls"), stream=True)
    calls: dict[int, dict[str, str]] = {}
    for chunk in msg:
        for d in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            c = calls.setdefault(d.index, {"id": "", "name": "", "arguments": ""})
            c["id"] += d.id or ""
            c["name"] += (d.function.name or "") if d.function else ""
            c["arguments"] += (d.function.arguments or "") if d.function else ""
    assert list(calls.values()) == [
        {"id": "call_a", "name": "get_weather", "arguments": '{"city": "Paris"}'},
        {"id": "call_b", "name": "get_time", "arguments": '{"tz": "CET"}'}]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_a_two_megabyte_sse_line_crosses_whole(gw: Any, policy: str) -> None:
    """achetronic/magec#45, nextlevelbuilder/goclaw#1349, TencentCloud/tencentcloud-sdk-go#315:
    line readers with a fixed cap (Go's ``bufio.Scanner``, 64 KiB / 1 MiB) drop streams whose one
    event is large (a tool call's arguments, base64 audio or images in one delta)."""
    events = [e for e in _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user("raw-huge-line")})
              if isinstance(e, dict) and e["choices"]]
    args = "".join(d["function"].get("arguments") or "" for e in events
                   for d in e["choices"][0]["delta"].get("tool_calls") or [])
    assert json.loads(args) == {"blob": "A" * 2_000_000}


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_tool_call_answer_keeps_content_null(gw: Any, policy: str) -> None:
    """BerriAI/litellm#39268 (``content: ""`` instead of ``null`` on a tool-call turn, which
    Gemini and Ollama then reject with 400 when the client sends the turn back) and
    cloudflare/ai#383 (assistant content overwritten next to a tool call)."""
    raw = _client(gw, policy).chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("tool-null"))
    message = json.loads(raw.http_response.content)["choices"][0]["message"]
    assert message["content"] is None
    assert message["reasoning_content"] == "Need the weather first."
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["get_weather"]


# --------------------------------------------------------------------------- reasoning, refusals, annotations


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_streamed_reasoning_content_reaches_the_client(gw: Any, policy: str) -> None:
    """karthink/gptel#592, ding113/claude-code-hub#1395: DeepSeek-R1's ``reasoning_content``
    deltas must cross the gateway (and come before the answer)."""
    events = [e for e in _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user("raw-reasoning")})
              if isinstance(e, dict) and e["choices"]]
    reasoning = "".join(e["choices"][0]["delta"].get("reasoning_content") or "" for e in events)
    content = "".join(e["choices"][0]["delta"].get("content") or "" for e in events)
    assert reasoning == "Twelve threes make thirty-six."
    assert content == ANSWER
    first_content = next(i for i, e in enumerate(events) if e["choices"][0]["delta"].get("content"))
    assert all(not e["choices"][0]["delta"].get("reasoning_content") for e in events[first_content:])


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_response_fields_a_gateway_tends_to_drop_survive(gw: Any, policy: str) -> None:
    """BerriAI/litellm#19126 (``annotations`` missing), sashabaranov/go-openai#844 (``refusal``),
    vekil#25 (``service_tier``), audio answers, usage details (cached / reasoning / prediction
    tokens) and ``system_fingerprint``: non-stream answers keep every upstream field."""
    raw = _client(gw, policy).chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("rich"))
    data = json.loads(raw.http_response.content)
    message = data["choices"][0]["message"]
    assert message["content"] == ANSWER
    assert "refusal" in message and message["refusal"] is None
    assert message["annotations"] == ANNOTATIONS
    assert message["audio"]["transcript"] == "twelve threes" and message["audio"]["id"] == "audio_1"
    assert data["service_tier"] == "default"
    assert data["usage"] == USAGE
    assert data["system_fingerprint"] == "fp_rich"


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_streamed_rich_fields_survive(gw: Any, policy: str) -> None:
    """The same fields through a stream (with ``include_usage``): the buffer mode re-chunks the
    answer and must not lose what it does not understand."""
    events = [e for e in _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user("rich"),
                                                  "stream_options": {"include_usage": True}})
              if isinstance(e, dict)]
    deltas = [e["choices"][0]["delta"] for e in events if e["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == ANSWER
    assert [d["annotations"] for d in deltas if d.get("annotations")] == [ANNOTATIONS]
    assert all(e.get("service_tier") == "default" for e in events if e["choices"])
    usage = [e["usage"] for e in events if e.get("usage")]
    assert usage == [USAGE]


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_refusal_is_relayed_as_refusal(gw: Any, policy: str, stream: bool) -> None:
    """Structured-output refusals (OpenAI "Refusals"; sashabaranov/go-openai#844): the refusal
    text stays in ``refusal`` with ``content: null``, streamed or not."""
    client = _client(gw, policy)
    if stream:
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=_user("refuse"), stream=True))
        assert "".join(c.choices[0].delta.refusal or "" for c in chunks if c.choices) == "I can't help with that."
        assert _text(chunks) == ""
    else:
        m = client.chat.completions.create(model="gpt-4o", messages=_user("refuse")).choices[0].message
        assert (m.content, m.refusal) == (None, "I can't help with that.")


# --------------------------------------------------------------------------- finish_reason, logprobs, usage


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_finish_reason_length_is_not_turned_into_stop(gw: Any, policy: str, stream: bool) -> None:
    """BerriAI/liteLLM-proxy#19, maximhq/bifrost#4963: the upstream's ``finish_reason`` is the
    client's only sign that an answer was cut; ``length`` must arrive as ``length``."""
    client = _client(gw, policy)
    if stream:
        chunks = list(client.chat.completions.create(model="gpt-4o", messages=_user("length"), stream=True))
        assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]
    else:
        assert client.chat.completions.create(model="gpt-4o", messages=_user("length")).choices[0].finish_reason == "length"


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_finish_reason_on_the_last_content_chunk_is_kept(gw: Any, policy: str) -> None:
    """vllm-project/vllm#36944, maximhq/bifrost#4963: some servers put ``finish_reason`` on the
    last content chunk (no empty-delta finish chunk, and here no ``[DONE]``-less tail either)."""
    chunks = _stream(gw, policy, "raw-finish-on-content")
    assert _text(chunks) == ANSWER
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["length"]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_streamed_logprobs_survive(gw: Any, policy: str) -> None:
    """BerriAI/litellm#21932 (``top_logprobs: null`` instead of a list), linagora/openrag#574
    (streamed ``logprobs: true`` broke the proxy), bifrost#6529 (logprobs dropped)."""
    chunks = _stream(gw, policy, "logprobs", logprobs=True, top_logprobs=2)
    tokens = [t for c in chunks if c.choices and c.choices[0].logprobs for t in c.choices[0].logprobs.content or []]
    assert "".join(t.token for t in tokens) == ANSWER
    assert all(isinstance(t.top_logprobs, list) and len(t.top_logprobs) == 2 for t in tokens)


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_usage_chunk_only_when_asked_and_never_injected_upstream(gw: Any, mock: Any, policy: str) -> None:
    """nguyenphutrong/quotio#460 (usage chunk sent although the client did not ask),
    ding113/claude-code-hub#1166 and BENCH-NOTES (LiteLLM adds ``stream_options`` upstream):
    the request goes upstream as sent; ``usage`` arrives only under ``include_usage``."""
    chunks = _stream(gw, policy, "logprobs")
    assert all(c.usage is None for c in chunks)
    assert "stream_options" not in _chat_bodies(mock)[-1]
    chunks = _stream(gw, policy, "rich", stream_options={"include_usage": True})
    with_usage = [c for c in chunks if c.usage is not None]
    assert len(with_usage) == 1 and with_usage[0].choices == []
    assert with_usage[0].usage.prompt_tokens_details.cached_tokens == 4
    assert with_usage[0].usage.completion_tokens_details.reasoning_tokens == 3
    assert _chat_bodies(mock)[-1]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("text", ["logprobs", "raw-finish-on-content", "raw-crlf"])
def test_the_common_choices_0_loop_survives_the_whole_stream(gw: Any, policy: str, text: str) -> None:
    """BerriAI/litellm#30870, AbanteAI/mentat#430, datawhalechina/hello-agents#377: the loop of
    OpenAI's own streaming example, ``chunk.choices[0].delta.content``, raises ``IndexError`` on a
    ``choices: []`` chunk. Without ``include_usage`` (and with one choice) the gateway sends none:
    the ``veracity`` report rides on the chunk with the ``finish_reason``."""
    text_out = ""
    reports = []
    for chunk in _client(gw, policy).chat.completions.create(model="gpt-4o", messages=_user(text), stream=True):
        text_out += chunk.choices[0].delta.content or ""
        if "veracity" in (chunk.model_extra or {}):
            assert chunk.choices[0].finish_reason is not None
            reports.append(chunk.model_extra["veracity"])
    assert text_out == ANSWER
    assert len(reports) == 1 and reports[0]["status"] in ("passed", "skipped")
    if policy == "default":  # the arithmetic was checked, not only relayed
        assert [c["outcome"] for c in reports[0]["checks"]] == ["pass"]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_report_chunk_is_separate_for_usage_or_several_choices(gw: Any, policy: str) -> None:
    """Clients that ask for the usage chunk, or for ``n > 1``, already handle ``choices: []``:
    the report goes on the usage chunk / an own chunk there, never on a choice's chunk."""
    chunks = _stream(gw, policy, "logprobs", stream_options={"include_usage": True})
    (rep,) = [c for c in chunks if "veracity" in (c.model_extra or {})]
    assert rep.choices == [] and rep.usage is not None
    chunks = _stream(gw, policy, "logprobs", n=2)
    (rep,) = [c for c in chunks if "veracity" in (c.model_extra or {})]
    assert rep.choices == []


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("text", ["raw-azure", "raw-usage-azure"])
def test_empty_choices_chunks_that_are_not_usage_are_relayed_in_place(gw: Any, policy: str, text: str) -> None:
    """BerriAI/litellm#30761, AbanteAI/mentat#430: Azure's first chunk has ``choices: []`` and
    the ``prompt_filter_results``; it is not the usage chunk and must not be held back, merged
    with it or lost."""
    events = [e for e in _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user(text),
                                                  "stream_options": {"include_usage": True}})
              if isinstance(e, dict)]
    assert _text_of(events) == ANSWER
    filters = [e["prompt_filter_results"] for e in events if e.get("prompt_filter_results")]
    assert filters and filters[0] == AZURE_FILTER["prompt_filter_results"]
    if policy != "buffer":  # relayed live: in its place, first
        assert events[0].get("prompt_filter_results") == AZURE_FILTER["prompt_filter_results"]
    usage = [e["usage"] for e in events if e.get("usage")]
    assert usage == ([USAGE] if text == "raw-usage-azure" else [])


def _text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["choices"][0]["delta"].get("content") or "" for e in events if e["choices"])


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_error_object_mid_stream_reaches_the_sdk_as_an_error(gw: Any, policy: str) -> None:
    """OpenAI sends a failure mid-stream as ``data: {"error": {...}}`` (no ``event:`` line);
    yuki-uix/agent-cost-lab#12 and apache/apisix#13565 (upstream failures laundered into a
    clean 200): the client must see an error with the upstream's message, not a short answer."""
    with pytest.raises(openai.APIError) as ei:
        _stream(gw, policy, "raw-error-data")
    assert "error while processing your request" in str(ei.value)


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_legacy_function_call_stream_is_kept(gw: Any, policy: str) -> None:
    """Deprecated ``functions``/``function_call`` answers still come from older deployments and
    OpenAI-compatible servers: the streamed ``function_call`` must arrive whole."""
    events = [e for e in _raw_stream(gw, policy, {"model": "gpt-4o", "messages": _user("raw-function-call")})
              if isinstance(e, dict) and e["choices"]]
    fc = [e["choices"][0]["delta"].get("function_call") for e in events]
    name = "".join(f.get("name") or "" for f in fc if f)
    args = "".join(f.get("arguments") or "" for f in fc if f)
    assert (name, json.loads(args)) == ("get_weather", {"city": "Rome"})
    assert [e["choices"][0]["finish_reason"] for e in events if e["choices"][0]["finish_reason"]] == ["function_call"]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_upstream_model_id_and_fingerprint_are_kept_streamed_or_not(gw: Any, policy: str) -> None:
    """BerriAI/litellm#38810 (streamed and non-streamed answers disagree on ``model``), #19943
    (internal model names leaked): Veracity does not alias, so the upstream's own ``model``
    snapshot, ``id`` and ``system_fingerprint`` arrive unchanged, on every chunk."""
    client = _client(gw, policy)
    r = client.chat.completions.create(model="gpt-4o", messages=_user("snapshot"))
    assert (r.model, r.id, r.system_fingerprint) == ("gpt-4o-2024-08-06", "chatcmpl-upstream-1", "fp_snap")
    chunks = [c for c in client.chat.completions.create(model="gpt-4o", messages=_user("snapshot"), stream=True)
              if c.choices]
    assert {(c.model, c.id, c.system_fingerprint) for c in chunks} == {("gpt-4o-2024-08-06", "chatcmpl-upstream-1", "fp_snap")}


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_client_errors_are_relayed_with_their_code_and_param(gw: Any, policy: str, stream: bool) -> None:
    """lingyuins/octopus#152 (``context_length_exceeded`` rewritten into a 502, so clients could
    not compact their context), james-6-23/codex2api#310 (the same error retried as a 500)."""
    with pytest.raises(openai.BadRequestError) as ei:
        _client(gw, policy).chat.completions.create(model="gpt-4o", messages=_user("too-long"), stream=stream)
    assert ei.value.status_code == 400
    assert (ei.value.code, ei.value.param, ei.value.type) == ("context_length_exceeded", "messages", "invalid_request_error")
    assert "maximum context length" in ei.value.message


# --------------------------------------------------------------------------- request fields


NEW_FIELDS: dict[str, Any] = {
    "max_completion_tokens": 64, "reasoning_effort": "low", "verbosity": "low", "store": True,
    "metadata": {"team": "qa"}, "service_tier": "flex", "seed": 7, "prediction": {"type": "content", "content": "The total"},
    "modalities": ["text"], "web_search_options": {"search_context_size": "low"},
    "prompt_cache_key": "k-1", "safety_identifier": "u-hash", "logit_bias": {"1734": -100},
    "stop": ["\n\n", "END"], "parallel_tool_calls": True, "top_p": 0.5, "frequency_penalty": 0.0,
    "response_format": {"type": "json_schema", "json_schema": {"name": "total", "strict": True, "schema": {
        "type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"],
        "additionalProperties": False}}},
    "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}],
    "tool_choice": {"type": "function", "function": {"name": "lookup"}},
}
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": [{"type": "text", "text": "Be brief."}], "name": "ops"},
    {"role": "user", "name": "alice", "content": [
        {"type": "text", "text": "What is on these?"},
        {"type": "image_url", "image_url": {"url": "https://example.org/a.png", "detail": "high"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
        {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}}]},
    {"role": "assistant", "content": None, "refusal": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "12 * 3"}]},
    {"role": "assistant", "content": "", "audio": {"id": "audio_prev"}},
    {"role": "user", "content": "logprobs and so?"},
]


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_newer_request_fields_and_content_parts_reach_the_upstream_unchanged(
        gw: Any, mock: Any, policy: str, stream: bool) -> None:
    """obsidian-copilot#1477 / LibreChat#4349 (``max_completion_tokens`` of o-series models turned
    into ``max_tokens``), sozercan/vekil#25 (``service_tier`` stripped), QuantumNous/new-api#1182
    (assistant content next to tool calls dropped), and the newer fields a gateway's allow-list
    lags behind: ``prediction``, ``modalities``, ``store``/``metadata``, ``reasoning_effort``,
    ``input_audio``/``file`` parts, ``image_url.detail``, ``name`` on messages, array content
    on ``tool`` messages."""
    _client(gw, policy).chat.completions.create(model="o3-mini", messages=MESSAGES, stream=stream, **NEW_FIELDS)
    sent = _chat_bodies(mock)[-1]
    assert sent["messages"] == MESSAGES
    for key, value in NEW_FIELDS.items():
        assert sent[key] == value, key
    assert "max_tokens" not in sent


# --------------------------------------------------------------------------- headers and errors


@pytest.mark.parametrize("stream", [False, True])
def test_rate_limit_answer_keeps_its_body_and_retry_headers(gw: Any, stream: bool) -> None:
    """BerriAI/litellm#21553 (upstream ``retry-after`` renamed ``llm_provider-retry-after``, so
    the SDK never waits) and #27823: a 429 reaches the client with ``Retry-After``,
    ``retry-after-ms``, ``x-ratelimit-*`` and the upstream's error object (type, code)."""
    with pytest.raises(openai.RateLimitError) as ei:
        _client(gw, "default").chat.completions.create(model="gpt-4o", messages=_user("limited"), stream=stream)
    resp = ei.value.response
    assert resp.headers["retry-after"] == "3" and resp.headers["retry-after-ms"] == "2500"
    assert resp.headers["x-ratelimit-remaining-requests"] == "0"
    assert resp.headers["x-upstream-request-id"] == "req_upstream_429"
    assert ei.value.code == "rate_limit_exceeded" and ei.value.type == "requests"


@pytest.mark.parametrize("policy", POLICY_NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_success_answer_keeps_rate_limit_headers(gw: Any, policy: str, stream: bool) -> None:
    """Clients pace themselves on ``x-ratelimit-*`` of successful answers too (LiteLLM keeps
    them as ``llm_provider-*``, litellm#21553); the upstream's request id is kept next to the
    gateway's own."""
    client = _client(gw, policy)
    if stream:
        with client.chat.completions.with_streaming_response.create(
                model="gpt-4o", messages=_user("headers"), stream=True) as raw:
            headers = raw.headers
            list(raw.parse())
    else:
        headers = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("headers")).headers
    assert headers["x-ratelimit-remaining-tokens"] == "99"
    assert headers["openai-processing-ms"] == "12"
    assert headers["x-upstream-request-id"] == "req_upstream_ok"
    assert headers["x-request-id"].startswith("req_")


@pytest.mark.parametrize("model", ["text-embedding-gzip", "text-embedding-deflate"])
def test_compressed_passthrough_answer_has_no_stale_length_or_encoding(gw: Any, model: str) -> None:
    """BerriAI/litellm#25624 (pass-through forwarded the gzip ``Content-Length`` with the
    decompressed body), morcen/passage#125 (stale ``Content-Encoding``)."""
    with httpx.Client(trust_env=False, timeout=30) as http:
        r = http.post(gw.base_url + "/embeddings", json={"model": model, "input": "hello"},
                      headers={"Authorization": "Bearer sk-client", "Accept-Encoding": "identity"})
    assert r.status_code == 200
    assert "content-encoding" not in r.headers
    if "content-length" in r.headers:
        assert int(r.headers["content-length"]) == len(r.content)
    assert r.json()["data"][0]["object"] == "embedding"


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_compressed_chat_answer_is_decoded(gw: Any, policy: str) -> None:
    """The same fault on the chat route: a gzip answer is decoded once and sent plain."""
    with httpx.Client(trust_env=False, timeout=30) as http:
        r = http.post(gw.base_url + "/chat/completions", json={"model": "gpt-4o", "messages": _user("gzip")},
                      headers={"Authorization": "Bearer sk-client", "x-veracity-policy": policy,
                               "Accept-Encoding": "identity"})
    assert r.status_code == 200, r.text
    assert "content-encoding" not in r.headers
    assert int(r.headers["content-length"]) == len(r.content)
    assert r.json()["choices"][0]["message"]["content"] == ANSWER


def test_multipart_upload_keeps_its_content_type_and_boundary(gw: Any, mock: Any) -> None:
    """diegosouzapw/OmniRoute#2188 (``/v1/audio/transcriptions`` multipart refused by a
    gateway): the pass-through route sent the upstream's ``Content-Type: application/json``
    instead of the client's ``multipart/form-data; boundary=...``, so no upload could be parsed."""
    files = {"file": ("a.wav", b"RIFF\x00\x00\x00\x00WAVEfmt ", "audio/wav")}
    with httpx.Client(trust_env=False, timeout=30) as http:
        req = http.build_request("POST", gw.base_url + "/audio/transcriptions", files=files,
                                 data={"model": "whisper-1"}, headers={"Authorization": "Bearer sk-client"})
        http.send(req)
    (got,) = [r for r in mock.requests() if r["path"] == "/v1/audio/transcriptions"]
    assert got["headers"]["content-type"] == req.headers["content-type"]
    assert got["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert got["headers"]["content-length"] == req.headers["content-length"]
    assert got["headers"]["authorization"] == "Bearer sk-up"


@pytest.mark.parametrize("model,own_key", [("text-embedding-3-small", True), ("text-embedding-passauth", False)])
def test_tenant_headers_go_only_with_the_clients_own_key(gw: Any, mock: Any, model: str, own_key: bool) -> None:
    """NVIDIA-NeMo/Switchyard#419: a client's ``OpenAI-Organization``/``OpenAI-Project`` next to
    the gateway's own key bills (or breaks, 401 ``mismatched_organization``) another tenant; with
    the client's own key (pass-through auth) they are the client's to send (labring/aiproxy#638)."""
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=30,
                           organization="org-client", project="proj_client",
                           default_headers={"OpenAI-Beta": "assistants=v2"})
    client.embeddings.create(model=model, input="hello")
    (got,) = [r["headers"] for r in mock.requests() if r["path"] == "/v1/embeddings"]
    assert got["authorization"] == ("Bearer sk-up" if own_key else "Bearer sk-client")
    assert got.get("openai-organization") == (None if own_key else "org-client")
    assert got.get("openai-project") == (None if own_key else "proj_client")
    assert got["openai-beta"] == "assistants=v2"  # a feature flag, not a tenant: always forwarded
    assert got["content-type"] == "application/json"


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream"])
@pytest.mark.parametrize("model,own_key", [("gpt-4o", True), ("gpt-4o-passauth", False)])
def test_chat_tenant_headers_go_only_with_the_clients_own_key(gw: Any, mock: Any, model: str, own_key: bool,
                                                              stream: bool) -> None:
    """The same rule on the chat route (labring/aiproxy#638): with pass-through auth the
    client's organization/project reach the upstream, stream or not; next to the gateway's key,
    never."""
    mock.reset()
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=30,
                           organization="org-client", project="proj_client")
    out = client.chat.completions.create(model=model, messages=_user("hello tenant"), stream=stream)
    if stream:
        assert "".join(c.choices[0].delta.content or "" for c in out if c.choices)
    else:
        assert out.choices[0].message.content
    (got,) = [r["headers"] for r in mock.requests() if r["path"] == "/v1/chat/completions"]
    assert got["authorization"] == ("Bearer sk-up" if own_key else "Bearer sk-client")
    assert got.get("openai-organization") == (None if own_key else "org-client")
    assert got.get("openai-project") == (None if own_key else "proj_client")


def test_stream_longer_than_the_read_timeout_is_not_cut(gw: Any) -> None:
    """AtomicBot-ai/Atomic-Chat#190, cloud-in-a-bottle#218: a total-request timeout cuts long,
    healthy streams. The upstream's ``read_timeout_s`` (2 s) bounds silence between reads; this
    stream sends a byte every 50 ms for about 4 s and must arrive whole."""
    chunks = list(_client(gw, "off").chat.completions.create(
        model="gpt-4o-short-read", messages=_user("long-stream"), stream=True))
    assert _text(chunks) == "y" * 80


# --------------------------------------------------------------------------- HTTP clients


def _raw_http(gw: Any, request: bytes, *, read_all: bool = True) -> bytes:
    with socket.create_connection(("127.0.0.1", gw.port), timeout=60) as s:
        s.sendall(request)
        data = b""
        while True:
            part = s.recv(65536)
            if not part:
                return data
            data += part
            if not read_all and b"\r\n\r\n" in data:
                return data


def _body(text: str) -> bytes:
    return json.dumps({"model": "gpt-4o", "messages": _user(text)}).encode()


def test_http_1_0_client_gets_a_whole_answer_and_a_close(gw: Any) -> None:
    """Old clients and health probes speak HTTP/1.0 (no chunked encoding, no keep-alive): the
    answer must be delimited by ``Content-Length`` or the close."""
    body = _body("hello http/1.0")
    raw = _raw_http(gw, b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\n"
                        b"Authorization: Bearer sk-client\r\nx-veracity-policy: off\r\n"
                        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"200"
    assert b"chunked" not in head.lower()
    assert json.loads(payload)["choices"][0]["message"]["content"] == "Mock reply to: hello http/1.0"


def test_connection_close_and_chunked_request_body(gw: Any) -> None:
    """A chunked request body (no ``Content-Length``; curl ``-H 'Transfer-Encoding: chunked'``,
    Node streams) with ``Connection: close``: read whole, answered, connection closed."""
    body = _body("hello chunked")
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:10], body[10:])) + b"0\r\n\r\n"
    raw = _raw_http(gw, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        b"Authorization: Bearer sk-client\r\nx-veracity-policy: default\r\n"
                        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + chunked)
    head, _, payload = raw.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"200"
    assert b"connection: close" in head.lower()
    assert json.loads(payload)["choices"][0]["message"]["content"] == "Mock reply to: hello chunked"


def test_expect_100_continue_is_answered(gw: Any) -> None:
    """curl sends ``Expect: 100-continue`` for bodies over 1 KiB and waits for the interim
    answer (RFC 9110, 10.1.1) before sending the body."""
    body = json.dumps({"model": "gpt-4o", "messages": _user("hello expect " + "x" * 2000)}).encode()
    with socket.create_connection(("127.0.0.1", gw.port), timeout=60) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Authorization: Bearer sk-client\r\nx-veracity-policy: off\r\nExpect: 100-continue\r\n"
                  b"Connection: close\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n")
        interim = s.recv(65536)
        assert interim.startswith(b"HTTP/1.1 100"), interim
        s.sendall(body)
        data = b""
        while part := s.recv(65536):
            data += part
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0].split(b" ")[1] == b"200"
    assert json.loads(payload)["choices"][0]["message"]["content"].startswith("Mock reply to: hello expect")


# --------------------------------------------------------------------------- the pieces, offline


def test_relay_reads_cr_and_crlf_line_ends_across_any_read_boundary() -> None:
    """The relay behind the CR cases above: CR, CRLF and LF streams give the same events,
    whatever the read boundaries (a CRLF cut between reads is one line end, not two)."""
    from proxy.wire.relay import SSERelay

    def relay(body: bytes, size: int) -> tuple[bytes, bool]:
        r = SSERelay()
        out = b"".join(r.feed(body[i:i + size]) for i in range(0, len(body), size)) + r.flush()
        return out, r.done

    lf = "".join(_frames(TEXT_CHUNKS)).encode()
    want = relay(lf, len(lf))
    assert want[1] and want[0].count(b"data: ") == len(TEXT_CHUNKS) + 1
    for eol in ("\r", "\r\n"):
        body = "".join(_frames(TEXT_CHUNKS, eol=eol)).encode()
        for size in (1, 2, 3, 7, len(body)):
            assert relay(body, size) == want, (eol, size)


def test_assemble_continues_the_last_call_for_deltas_without_index() -> None:
    """The assembler behind the buffer mode: index-less deltas continue the last call, a new
    ``id`` starts the next one (openai/openai-python#3246)."""
    from proxy.wire.sse import assemble

    one = assemble(NO_INDEX_CALL)["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]) for c in one] == [
        ("call_w", {"name": "get_weather", "arguments": '{"city": "Paris"}'})]
    two = assemble(NO_INDEX_TWO_CALLS)["choices"][0]["message"]["tool_calls"]
    assert [c["id"] for c in two] == ["call_a", "call_b"]


def test_mock_raw_stream_and_compressed_answers_are_sent_as_scripted(mock: Any) -> None:
    """The mock's ``raw_stream`` bytes arrive verbatim; ``content_encoding`` compresses."""
    with httpx.Client(trust_env=False, timeout=30) as http:
        with http.stream("POST", mock.base_url + "/chat/completions",
                         json={"model": "gpt-4o", "stream": True, "messages": _user("raw-cr")}) as r:
            assert r.read() == "".join(_frames(TEXT_CHUNKS, eol="\r")).encode()
        r = http.post(mock.base_url + "/chat/completions", json={"model": "gpt-4o", "messages": _user("gzip")},
                      headers={"Accept-Encoding": "gzip"})
        assert r.headers["content-encoding"] == "gzip"
        assert int(r.headers["content-length"]) < len(r.content)  # httpx decoded the gzip body
        assert r.json()["choices"][0]["message"]["content"] == ANSWER
