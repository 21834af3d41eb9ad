"""The scripted mock upstream: script validation, matching, replies, streaming, errors, faults,
introspection and the runner. Driven over real HTTP with httpx and the real ``openai`` SDK."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import openai
import pytest

from proxy.upstreams.mock import DEMO_SCRIPT, MockUpstream, ScriptError, load_script, main
from proxy.wire.sse import assemble, parse_stream

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
SEARCH_TOOL = {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}

SCRIPT = {
    "models": ["mock-model", "other-model"],
    "rules": [
        {"name": "glob", "match": {"model": "special-*"}, "reply": {"content": "special model"}},
        {"name": "regex-model", "match": {"model_regex": "^re-\\d+$"}, "reply": {"content": "regex model"}},
        {"name": "tool-result", "match": {"last_role": "tool"}, "reply": {"content": "used the tool result"}},
        {"name": "forced", "match": {"tool_choice": "search"}, "reply": {
            "tool_calls": [{"name": "search", "arguments": {"q": "forced"}}]}},
        {"name": "parallel", "match": {"tool": "get_weather", "last_user": "(?i)paris and rome"}, "reply": {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "call_paris"},
                {"name": "get_weather", "arguments": '{"city": "Rome"}'},
            ],
            "stream": {"chunk_size": 5}}},
        {"name": "system-says", "match": {"any_message": "PIRATE"}, "reply": {"content": "Arr."}},
        {"name": "wrong-then-right", "match": {"last_user": "1234 \\* 5678"}, "replies": [
            {"content": "7,006,552"}, {"content": "7,006,652"}]},
        {"name": "n-choices", "match": {"last_user": "^two choices$"}, "reply": {
            "choices": [{"content": "first"}, {"content": "second", "finish_reason": "length"}]}},
        {"name": "extras", "match": {"last_user": "^extras$"}, "reply": {
            "content": "with extras", "system_fingerprint": "fp_test", "id": "chatcmpl-fixed",
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
            "extra": {"x_top": 1}, "choice_extra": {"x_choice": "c"}, "message_extra": {"x_msg": [1, 2]}}},
        {"name": "long", "match": {"last_user": "^long$"}, "reply": {
            "content": "abcdefghijklmnopqrstuvwxyz", "stream": {"chunk_size": 4}}},
        {"name": "rate-limited", "match": {"last_user": "^429$"}, "reply": {
            "status": 429, "error": "Slow down", "headers": {"Retry-After": 7}}},
        {"name": "e500", "match": {"last_user": "^500$"}, "reply": {"status": 500}},
        {"name": "e503", "match": {"last_user": "^503$"}, "reply": {
            "status": 503, "error": {"error": {"message": "overloaded", "type": "x", "param": None, "code": "o"}}}},
        {"name": "drop", "match": {"last_user": "^drop$"}, "reply": {
            "content": "abcdefghijklmnopqrstuvwxyz", "stream": {"chunk_size": 2}, "fault": "drop_mid_stream"}},
        {"name": "drop-headers", "match": {"last_user": "^drop headers$"}, "reply": {"fault": "drop_before_headers"}},
        {"name": "no-done", "match": {"last_user": "^no done$"}, "reply": {"content": "abc", "fault": "no_done"}},
        {"name": "no-finish", "match": {"last_user": "^no finish$"}, "reply": {
            "content": "abc", "fault": ["no_finish_reason"]}},
        {"name": "odd-frames", "match": {"last_user": "^odd frames$"}, "reply": {
            "content": "hello world", "stream": {"chunk_size": 3}, "fault": ["id_retry_frames", "empty_data"]}},
        {"name": "error-event", "match": {"last_user": "^error event$"}, "reply": {
            "content": "abcdefgh", "stream": {"chunk_size": 1}, "fault": "error_mid_stream", "drop_after": 3,
            "error": "boom"}},
        # 50 frames over 10 s: the close must be seen before the end even on a loaded machine
        {"name": "slow-stream", "match": {"last_user": "^slow$"}, "reply": {
            "content": "x" * 50, "stream": {"chunk_size": 1, "delay_ms": 200}}},
        {"name": "slow-start", "match": {"last_user": "^sleepy$"}, "reply": {"content": "late", "delay_ms": 1500}},
        {"name": "stream-only", "match": {"stream": True, "last_user": "^which$"}, "reply": {"content": "streamed"}},
        {"name": "embedding-error", "match": {"path": "/v1/embeddings", "model": "bad-embed"}, "reply": {
            "status": 400, "error": "bad input"}},
    ],
}


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mock():
    with MockUpstream(SCRIPT) as m:
        yield m


@pytest.fixture()
def client(mock):
    mock.reset()
    return openai.OpenAI(base_url=mock.base_url, api_key="sk-test", max_retries=0, timeout=10)


def ask(client, text, **kw):
    kw.setdefault("model", "mock-model")
    return client.chat.completions.create(messages=[{"role": "user", "content": text}], **kw)


def raw_stream(mock, text, **kw) -> bytes:
    body = {"model": "mock-model", "messages": [{"role": "user", "content": text}], "stream": True, **kw}
    with httpx.Client(trust_env=False, timeout=10) as h:
        return h.post(mock.base_url + "/chat/completions", json=body).content


# ---------------------------------------------------------------- script validation


def test_wrong_field_is_named():
    with pytest.raises(ScriptError) as exc:
        load_script({"rules": [{"match": {}, "reply": {"contnet": "x"}}]})
    assert "rules.0.reply.contnet" in str(exc.value)


def test_bad_regex_and_reply_count_are_named(tmp_path):
    with pytest.raises(ScriptError, match=r"rules\.0\.match\.last_user"):
        load_script({"rules": [{"match": {"last_user": "("}, "reply": {}}]})
    with pytest.raises(ScriptError, match="exactly one of 'reply' or 'replies'"):
        load_script({"rules": [{"match": {}}]})
    bad = tmp_path / "s.yaml"
    bad.write_text("rules: [\n")
    with pytest.raises(ScriptError, match="s.yaml"):
        load_script(bad)
    with pytest.raises(ScriptError, match="fault"):
        load_script({"rules": [{"reply": {"fault": "explode"}}]})


def test_cli_rejects_bad_script_with_status_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"rules": [{"reply": {"status": "soon"}}]}))
    assert main(["--script", str(bad), "--port", "0"]) == 2
    assert "rules.0.reply.status" in capsys.readouterr().err


# ---------------------------------------------------------------- matching and replies


def test_rules_match_on_model_glob_and_regex(client):
    assert ask(client, "hi", model="special-7").choices[0].message.content == "special model"
    assert ask(client, "hi", model="re-42").choices[0].message.content == "regex model"
    assert ask(client, "hi", model="re-4x").choices[0].message.content == "Mock reply to: hi"


def test_rules_match_on_roles_tools_and_any_message(client):
    msgs = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    r = client.chat.completions.create(model="mock-model", messages=msgs, tools=[WEATHER_TOOL])
    assert r.choices[0].message.content == "used the tool result"
    r = client.chat.completions.create(
        model="mock-model", messages=[{"role": "user", "content": "x"}], tools=[SEARCH_TOOL],
        tool_choice={"type": "function", "function": {"name": "search"}})
    assert r.choices[0].message.tool_calls[0].function.name == "search"
    assert r.choices[0].finish_reason == "tool_calls"
    r = client.chat.completions.create(model="mock-model", messages=[
        {"role": "system", "content": "Talk like a PIRATE"},
        {"role": "user", "content": [{"type": "text", "text": "hello"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}])
    assert r.choices[0].message.content == "Arr."


def test_default_echoes_last_user_text(client):
    r = ask(client, "what is the capital of France?")
    assert r.choices[0].message.content == "Mock reply to: what is the capital of France?"
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens > 0


def test_replies_are_consumed_in_order_and_reset_restarts(client, mock):
    got = [ask(client, "1234 * 5678").choices[0].message.content for _ in range(3)]
    assert got == ["7,006,552", "7,006,652", "7,006,652"]
    mock.reset()
    assert ask(client, "1234 * 5678").choices[0].message.content == "7,006,552"


def test_stream_condition(client):
    assert ask(client, "which").choices[0].message.content == "Mock reply to: which"
    text = "".join(c.choices[0].delta.content or "" for c in ask(client, "which", stream=True))
    assert text == "streamed"


# ---------------------------------------------------------------- response features


def test_parallel_tool_calls_non_stream(client):
    r = ask(client, "Weather in Paris and Rome?", tools=[WEATHER_TOOL])
    calls = r.choices[0].message.tool_calls
    assert [c.id for c in calls][0] == "call_paris"
    assert [json.loads(c.function.arguments)["city"] for c in calls] == ["Paris", "Rome"]
    assert calls[1].id and calls[1].id != calls[0].id
    assert r.choices[0].message.content is None


def test_n_choices_have_their_own_content_and_finish_reason(client):
    r = ask(client, "two choices", n=3)
    assert [c.message.content for c in r.choices] == ["first", "second", "second"]
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert [c.finish_reason for c in r.choices] == ["stop", "length", "length"]


def test_logprobs_only_when_asked(client):
    assert ask(client, "long").choices[0].logprobs is None
    r = ask(client, "long", logprobs=True, top_logprobs=2)
    toks = r.choices[0].logprobs.content
    assert "".join(t.token for t in toks) == "abcdefghijklmnopqrstuvwxyz"
    assert all(len(t.top_logprobs) == 2 and t.logprob < 0 for t in toks)


def test_fixed_fields_and_unknown_fields_survive_the_sdk(client):
    r = ask(client, "extras")
    assert r.id == "chatcmpl-fixed" and r.system_fingerprint == "fp_test"
    assert r.usage.total_tokens == 5
    assert r.model_extra == {"x_top": 1}
    assert r.choices[0].model_extra == {"x_choice": "c"}
    assert r.choices[0].message.model_extra == {"x_msg": [1, 2]}


def test_unknown_fields_ride_on_stream_chunks(mock, client):
    chunks = list(ask(client, "extras", stream=True))
    assert chunks and all(c.model_extra == {"x_top": 1} for c in chunks)
    assert all(c.system_fingerprint == "fp_test" and c.id == "chatcmpl-fixed" for c in chunks)
    done = assemble(parse_stream(raw_stream(mock, "extras")).chunks)
    assert done["choices"][0]["message"]["x_msg"] == [1, 2] and done["choices"][0]["x_choice"] == "c"


def test_stream_chunk_size_and_usage_chunk(client):
    chunks = list(ask(client, "long", stream=True, stream_options={"include_usage": True}))
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert deltas == ["abcd", "efgh", "ijkl", "mnop", "qrst", "uvwx", "yz"]
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    plain = list(ask(client, "long", stream=True))
    assert all(c.usage is None for c in plain) and plain[-1].choices[0].finish_reason == "stop"


def test_streamed_tool_call_deltas_carry_index_and_id_only_first(mock, client):
    body = raw_stream(mock, "Weather in Paris and Rome?", tools=[WEATHER_TOOL])
    parsed = parse_stream(body)
    assert parsed.done
    call_deltas = [tc for ch in parsed.chunks for c in ch["choices"] for tc in c["delta"].get("tool_calls") or ()]
    assert all("index" in d for d in call_deltas)
    with_id = [d for d in call_deltas if d.get("id")]
    assert [(d["index"], d["id"]) for d in with_id][0] == (0, "call_paris") and len(with_id) == 2
    assert len(call_deltas) > 4  # arguments arrive in 5-character pieces
    # The SDK's own accumulator rebuilds both calls.
    with client.chat.completions.stream(model="mock-model", tools=[WEATHER_TOOL],
                                        messages=[{"role": "user", "content": "Weather in Paris and Rome?"}]) as s:
        final = s.get_final_completion()
    calls = final.choices[0].message.tool_calls
    assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Paris"}, {"city": "Rome"}]


def test_streamed_n_choices_interleave(mock):
    parsed = parse_stream(raw_stream(mock, "two choices", n=2))
    indexes = [ch["choices"][0]["index"] for ch in parsed.chunks]
    assert indexes[:4] == [0, 1, 0, 1]
    done = assemble(parsed.chunks)
    assert [c["message"]["content"] for c in done["choices"]] == ["first", "second"]


# ---------------------------------------------------------------- errors and faults


def test_http_errors_with_body_and_headers(client):
    with pytest.raises(openai.RateLimitError) as exc:
        ask(client, "429")
    assert exc.value.response.headers["retry-after"] == "7"
    assert exc.value.body["message"] == "Slow down"
    assert exc.value.body["code"] == "rate_limit_exceeded"
    with pytest.raises(openai.InternalServerError) as exc:
        ask(client, "500")
    assert exc.value.status_code == 500
    with pytest.raises(openai.InternalServerError) as exc:
        ask(client, "503")
    assert exc.value.status_code == 503 and exc.value.body["message"] == "overloaded"


def test_bad_requests_get_openai_shaped_errors(mock):
    with httpx.Client(trust_env=False) as h:
        r = h.post(mock.base_url + "/chat/completions", content=b"{not json")
        assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}
        r = h.post(mock.base_url + "/chat/completions", json={"messages": []})
        assert r.status_code == 400 and r.json()["error"]["param"] == "model"
        assert h.get(mock.url + "/v2/nothing").status_code == 404


def test_drop_mid_stream_cuts_the_connection(mock):
    body = {"model": "mock-model", "messages": [{"role": "user", "content": "drop"}], "stream": True}
    received = b""
    with httpx.Client(trust_env=False, timeout=10) as h, pytest.raises(httpx.RemoteProtocolError):
        with h.stream("POST", mock.base_url + "/chat/completions", json=body) as r:
            for part in r.iter_bytes():
                received += part
    assert b"[DONE]" not in received
    parsed = parse_stream(received)
    assert 0 < len(parsed.chunks) and not parsed.done
    events = [e["event"] for rec in mock.requests() for e in rec["events"]]
    assert "connection_dropped" in events


def test_drop_mid_body_non_stream(client):
    with pytest.raises(openai.APIConnectionError):
        ask(client, "drop")


def test_drop_before_headers(client):
    with pytest.raises(openai.APIConnectionError):
        ask(client, "drop headers")


def test_stream_without_done_and_without_finish_reason(mock):
    parsed = parse_stream(raw_stream(mock, "no done"))
    assert not parsed.done and assemble(parsed.chunks, done=False, strict=False)["choices"][0]["finish_reason"] == "stop"
    parsed = parse_stream(raw_stream(mock, "no finish"))
    assert parsed.done
    assert all(c["finish_reason"] is None for ch in parsed.chunks for c in ch["choices"])


def test_id_retry_and_empty_data_frames(mock):
    body = raw_stream(mock, "odd frames")
    assert b"\nretry: 3000\n" in body and b"id: 0\n\n" in body and b"data: \n\n" in body and b": keep-alive" in body
    parsed = parse_stream(body)
    assert parsed.empty_data > 0 and parsed.done
    assert assemble(parsed.chunks)["choices"][0]["message"]["content"] == "hello world"


def test_error_event_mid_stream_raises_in_the_sdk(client):
    got = []
    with pytest.raises(openai.APIError, match="boom"):
        for chunk in ask(client, "error event", stream=True):
            got.append(chunk)
    assert 0 < len(got) < 8


def test_delay_before_first_byte_lets_a_client_time_out(mock):
    c = openai.OpenAI(base_url=mock.base_url, api_key="sk-test", max_retries=0, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        ask(c, "sleepy")


def test_client_disconnect_mid_stream_is_recorded(mock, client):
    stream = ask(client, "slow", stream=True)
    first = next(iter(stream))
    assert first.choices[0].delta.role == "assistant"
    stream.close()
    deadline = time.monotonic() + 60  # generous for a loaded CI machine; a pass returns at once
    events = []
    while time.monotonic() < deadline and not events:
        events = [e for rec in mock.requests() for e in rec["events"] if e["event"] == "client_disconnected"]
        time.sleep(0.05)
    assert events and events[0]["phase"] == "mid_stream" and events[0]["frames_sent"] < 50


# ---------------------------------------------------------------- other endpoints and introspection


def test_requests_are_recorded_with_headers_and_body(client, mock):
    ask(client, "hello", temperature=0.2, extra_body={"vendor_field": {"a": 1}},
        extra_headers={"X-Custom": "yes"})
    (rec,) = mock.requests()
    assert rec["path"] == "/v1/chat/completions" and rec["method"] == "POST"
    assert rec["headers"]["authorization"] == "Bearer sk-test" and rec["headers"]["x-custom"] == "yes"
    assert rec["body"]["vendor_field"] == {"a": 1} and rec["body"]["temperature"] == 0.2
    assert rec["rule"] == "default"


def test_models_embeddings_and_text_completions(client):
    assert [m.id for m in client.models.list().data] == ["mock-model", "other-model"]
    floats = client.embeddings.create(model="e", input=["a", "b"], encoding_format="float")
    b64 = client.embeddings.create(model="e", input=["a", "b"])  # the SDK asks for base64
    assert len(floats.data) == 2 and floats.data[0].embedding != floats.data[1].embedding
    assert b64.data[0].embedding == pytest.approx(floats.data[0].embedding)
    with pytest.raises(openai.BadRequestError, match="bad input"):
        client.embeddings.create(model="bad-embed", input="x")
    done = client.completions.create(model="m", prompt="Say hi")
    assert done.choices[0].text == "Mock completion of: Say hi"
    text = "".join(c.choices[0].text for c in client.completions.create(model="m", prompt="Say hi", stream=True))
    assert text == "Mock completion of: Say hi"


def test_set_script_replaces_rules(mock, client):
    try:
        mock.set_script({"rules": [{"reply": {"content": "swapped"}}]})
        assert ask(client, "anything").choices[0].message.content == "swapped"
        with pytest.raises(ScriptError):
            mock.set_script({"rules": [{"reply": {"nope": 1}}]})
    finally:
        mock.set_script(SCRIPT)


# ---------------------------------------------------------------- runner, CLI, demo script


def test_subprocess_mode_serves_and_leaves_no_process():
    m = MockUpstream({"rules": [{"reply": {"content": "from a subprocess"}}]}, mode="subprocess")
    with m:
        proc = m._proc
        c = openai.OpenAI(base_url=m.base_url, api_key="k", max_retries=0)
        assert ask(c, "x").choices[0].message.content == "from a subprocess"
        assert len(m.requests()) == 1
    assert proc.poll() is not None


@pytest.mark.parametrize("entry", [["proxy.upstreams.mock"], ["proxy.cli.main", "mock-upstream"]])
def test_cli_prints_listening_line_first(entry):
    proc = subprocess.Popen([sys.executable, "-m", *entry, "--port", "0", "--script", str(DEMO_SCRIPT)],
                            stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("listening http://127.0.0.1:")
        r = httpx.get(line.split(" ", 1)[1] + "/v1/models", trust_env=False, timeout=10)
        assert "mock-model" in r.text
    finally:
        proc.terminate()
        proc.wait(10)
        proc.stdout.close()


def test_demo_script_answers_the_four_demo_kinds():
    with MockUpstream(DEMO_SCRIPT) as m:
        c = openai.OpenAI(base_url=m.base_url, api_key="k", max_retries=0)
        assert "391" in ask(c, "What is 17 * 23?").choices[0].message.content
        # wrong on every first ask (not only the first request), right when the gateway's
        # correction prompt (proxy.pipeline.correction.evidence_prompt) asks again
        first, second = (ask(c, "What is 1234 * 5678?").choices[0].message.content for _ in range(2))
        assert "7,006,552" in first and "7,006,552" in second
        from proxy.pipeline.correction import evidence_prompt
        from verifiers._types import Check, Report

        failed = Report(checks=[Check("arithmetic", "1234 × 5678 = 7,006,552", "fail",
                                      expected="7006652", found="7006552")])
        fixed = c.chat.completions.create(model="mock-model", messages=[
            {"role": "user", "content": "What is 1234 * 5678?"},
            {"role": "assistant", "content": first},
            {"role": "user", "content": evidence_prompt(failed)}]).choices[0].message.content
        assert "7,006,652" in fixed and "7,006,552" not in fixed
        assert "```python" in ask(c, "Write a Python function for Fibonacci").choices[0].message.content
        refs = ask(c, "Give me references on transformers").choices[0].message.content
        assert "arXiv:1706.03762" in refs and "doi:" in refs


async def test_mock_sockets_get_tcp_nodelay_on_a_plain_asyncio_loop() -> None:
    """The mock's listening socket says TCP (proto ``IPPROTO_TCP``), so asyncio's loop -- the
    thread-mode mock's, demo mode's -- sets ``TCP_NODELAY`` on each connection it accepts
    (``base_events._set_nodelay`` skips a socket whose proto is 0); without it a body written
    after its head waited ~40 ms on a reused connection (Nagle + the client's delayed ACK)."""
    import asyncio
    import socket

    from proxy.upstreams.mock import _bind

    sock = _bind("127.0.0.1", 0)
    seen: list[int] = []

    class P(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            s = transport.get_extra_info("socket")
            seen.append(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await asyncio.get_running_loop().create_server(P, sock=sock)
    try:
        _r, w = await asyncio.open_connection(*sock.getsockname()[:2])
        for _ in range(100):
            if seen:
                break
            await asyncio.sleep(0.01)
        w.close()
    finally:
        server.close()
    assert sock.proto == socket.IPPROTO_TCP and seen == [1]
