"""Hostile and malformed input, kept as regression tests (the "breaker" pass).

Rule under test (docs/errors.md): bad input gets a clear error in OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``) with a sensible status, never a stack
trace or a 500 for a client mistake; an odd upstream answer still reaches the user (a failing
verifier degrades to an ``unknown``/``error`` check); secrets never leak; the gateway keeps
serving. Each fault found once has a case here:

* ``/v1/../x`` (also ``%2e%2e``, ``..%2f``, ``%252e``) reached the upstream *outside* its
  ``/v1`` prefix with the upstream's own API key;
* ``"stream": "true"`` / ``1`` made the upstream stream while the gateway expected JSON (502);
* a gzip body was reported as "not JSON" (now 415);
* ``GET /v1/veracity/verify`` was forwarded upstream (now 405);
* an upstream answer with a lone-surrogate escape (``"\\ud800"``, valid JSON) was lost as 502;
* an answer with 10,000 code fences blocked the event loop for ~15 s (code verifier parsing
  on the loop, ~1.5 ms per block); citation extraction also ran on the loop;
* every made-up model name became a new Prometheus time series (unbounded memory).

The upstream here is a tiny scripted HTTP server that can send what the mock upstream cannot
(non-JSON 200 bodies, ``choices: null``, lone surrogates) and records every path it is asked
for, so "never forwarded" is checked, not assumed.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures.sandboxes import procs_with
from verifiers._types import Check

UPSTREAM_KEY = "sk-breaker-upstream-0123456789abcdef"


def _completion(content: Any) -> dict[str, Any]:
    return {"id": "chatcmpl-odd", "object": "chat.completion", "created": 1, "model": "odd",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


#: first word of the last user message -> raw 200 body of a non-stream answer
REPLIES: dict[str, bytes] = {
    "null": json.dumps(_completion(None)).encode(),
    "list": json.dumps(_completion([{"type": "text", "text": "2 + 2 = 5"}])).encode(),
    "nochoices": b'{"id": "x", "object": "chat.completion"}',
    "emptychoices": b'{"id": "x", "choices": []}',
    "choicesnull": b'{"id": "x", "choices": null}',
    "choicesstr": b'{"id": "x", "choices": "hi"}',
    "msgnull": b'{"id": "x", "choices": [{"index": 0, "message": null}]}',
    "choiceints": b'{"id": "x", "choices": [1, 2]}',
    "numcontent": json.dumps(_completion(12345)).encode(),
    "surrogate": json.dumps(_completion("2 + 2 = 4 \ud800 and 3 * 3 = 10")).encode(),  # "\ud800" escape
    "zerowidth": json.dumps(_completion("2\u200b+\u200b2 = \u202e5\u202c; 1 + 1 = 2\x00")).encode(),
    "fences": json.dumps(_completion("```python\nx = 1\n```\n" * 10_000)).encode(),
}
#: first word -> the SSE frames of a stream answer (malformed chunks among good ones)
STREAMS: dict[str, list[Any]] = {
    "badchunks": [
        {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {"id": "c1", "choices": [{"index": "0", "delta": "x"}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"content": "2 + 2 = 5", "tool_calls": 5},
                                  "logprobs": {"content": 3}}]},
        {"id": "c1", "choices": True}, 5, [1, 2], {"id": "c1", "choices": [None, 7]},
        {"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [None, {"index": [1], "function": "x"}]}}]},
        {"id": "c1", "choices": [{"index": 0, "delta": {}, "logprobs": {"content": [5, {"token": 3}]},
                                  "finish_reason": "stop"}]},
    ],
}
STREAMS["surrogatechunks"] = [
    {"id": "c2", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "3 * 3 = 10 \ud800"}}]},
    {"id": "c2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]
NOT_JSON = {"nonjson": b"<html>hello</html>", "jsonarray": b"[1, 2, 3]"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self) -> None:
        self.server.seen.append((self.command, self.path, self.headers.get("authorization")))  # type: ignore[attr-defined]

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self._record()
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        msgs = body.get("messages")
        last = msgs[-1] if isinstance(msgs, list) and msgs else None
        last = last.get("content") if isinstance(last, dict) else ""
        key = last.split()[0] if isinstance(last, str) and last.strip() else ""
        if key in NOT_JSON:
            return self._send(200, NOT_JSON[key], "text/html")
        if key == "echo401" or self.path.endswith("/embeddings"):  # a careless upstream echoes the key
            echo = {"error": {"message": f"Incorrect API key provided: {self.headers.get('authorization')}",
                              "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}
            return self._send(401, json.dumps(echo).encode())
        reply = REPLIES.get(key, json.dumps(_completion("ok")).encode())
        if body.get("stream") is True and key in STREAMS:
            frames = b"".join(b"data: " + (c if isinstance(c, bytes) else json.dumps(c).encode()) + b"\n\n"
                              for c in STREAMS[key])
            return self._send(200, frames + b"data: [DONE]\n\n", "text/event-stream")
        if body.get("stream") is True:  # the same object as one SSE frame, then [DONE]
            return self._send(200, b"data: " + reply + b"\n\ndata: [DONE]\n\n", "text/event-stream")
        self._send(200, reply)

    def do_GET(self) -> None:
        self._record()
        self._send(200, b'{"object": "list", "data": [{"id": "odd", "object": "model"}]}')

    do_PUT = do_DELETE = do_GET


@pytest.fixture(scope="module")
def upstream() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.seen = []  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture(scope="module")
def gw(upstream: ThreadingHTTPServer, gateway_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Gateway with one keyed upstream (the odd server, every model) and an offline policy:
    threshold 0, code sandbox ``none``, citations against an empty local index only."""
    pol = tmp_path_factory.mktemp("policies")
    (pol / "default.yaml").write_text(
        "name: default\n"
        "verifiers:\n"
        # verifier clocks generous for a loaded CI machine (the tests assert outcomes, not times)
        "  arithmetic: {enabled: true, timeout_ms: 20000}\n"
        "  code: {enabled: true, timeout_ms: 40000, sandbox: {backend: none}}\n"
        f"  citations: {{enabled: true, timeout_ms: 20000, sources: {{use: [local], local_index: "
        f"{{path: '{pol / 'idx.sqlite3'}', authoritative: false}}}}}}\n"
        "risk: {threshold: 0.0}\n"
        "on_failure: annotate\n"
        "budgets: {request: {extra_calls: 2, extra_tokens: 8000, deadline_ms: 50000}}\n"
        "audit: {enabled: true, include_text: true}\n"
        "overridable: [on_failure, risk.threshold, sentinel, streaming]\n")
    return gateway_factory({
        "upstreams": [{"name": "odd", "models": ["*"], "base_url": f"http://127.0.0.1:{upstream.server_address[1]}/v1",
                       "api_key": UPSTREAM_KEY}],
        "policies": {"dir": str(pol)},
        "limits": {"max_body_bytes": 262144, "read_timeout_s": 60},
        "logging": {"log_content": True},  # prompt/answer text in the log line: every sink sees model text
        "verification": {"audit": str(pol / "audit.jsonl")},
    })


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60, trust_env=False) as c:
        yield c


def _assert_openai_error(r: httpx.Response, status: int, code: str | None = None, param: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) >= {"message", "type", "param", "code"}, body
    assert "Traceback" not in r.text
    if code is not None:
        assert body["error"]["code"] == code, body
    if param is not None:
        assert body["error"]["param"] == param, body
    return body["error"]


def _raw_get(port: int, path: bytes) -> tuple[int, bytes]:
    """Send ``GET path`` byte for byte (httpx would normalise ``..`` away)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def _chat(http: httpx.Client, gw: Any, text: str, **extra: Any) -> httpx.Response:
    return http.post(gw.base_url + "/chat/completions",
                     json={"model": "odd", "messages": [{"role": "user", "content": text}], **extra})


# ------------------------------------------------------------------------------ requests


@pytest.mark.parametrize("path", [
    b"/v1/../secret", b"/v1/%2e%2e/secret", b"/v1/..%2fsecret", b"/v1/%2E%2E%2Fsecret", b"/v1//..//secret",
    b"/v1/models/..%2F..%2Fsecret", b"/v1/%252e%252e/secret", b"/v1/./../secret", b"/v1/..\\secret",
    # Azure-shaped paths map onto /v1 (proxy.wire.azure): the same check applies after the mapping
    b"/openai/v1/../secret", b"/openai/deployments/odd/%2e%2e/secret", b"/openai/..%2fsecret",
    b"/openai/deployments/odd/..%252f..%252fsecret?api-version=2024-10-21",
])
def test_path_traversal_never_leaves_the_upstream_api_prefix(gw: Any, upstream: Any, path: bytes) -> None:
    """Fault: ``GET /v1/../x`` was forwarded to ``<upstream>/x`` (outside its ``/v1``) with
    the upstream's API key. Now 404 in OpenAI's shape and nothing reaches the upstream."""
    upstream.seen.clear()
    status, body = _raw_get(gw.port, path)
    assert status == 404, body
    err = json.loads(body)["error"]
    assert err["code"] == "unknown_url" and UPSTREAM_KEY not in body.decode()
    assert upstream.seen == []


def test_normal_passthrough_paths_still_reach_the_upstream(gw: Any, upstream: Any) -> None:
    upstream.seen.clear()
    status, _ = _raw_get(gw.port, b"/v1/models/odd")
    assert status == 200
    assert upstream.seen == [("GET", "/v1/models/odd", f"Bearer {UPSTREAM_KEY}")]


@pytest.mark.parametrize("value,kind", [("true", "a string"), (1, "an integer"), ([True], "an array")])
def test_stream_must_be_a_boolean(gw: Any, http: httpx.Client, upstream: Any, value: Any, kind: str) -> None:
    """Fault: ``"stream": "true"`` reached the upstream, which streamed; the gateway expected
    JSON and answered 502. Now 400 ``invalid_type`` (OpenAI's wording) before any upstream call."""
    upstream.seen.clear()
    err = _assert_openai_error(_chat(http, gw, "hi", stream=value), 400, "invalid_type", "stream")
    assert kind in err["message"]
    assert upstream.seen == []
    assert _chat(http, gw, "hi", stream=None).status_code == 200  # null is "not streaming"


def test_compressed_body_is_415_not_invalid_json(gw: Any, http: httpx.Client) -> None:
    import gzip

    raw = gzip.compress(json.dumps({"model": "odd", "messages": [{"role": "user", "content": "hi"}]}).encode())
    for url in (gw.base_url + "/chat/completions", gw.base_url + "/veracity/verify"):
        r = http.post(url, content=raw, headers={"content-type": "application/json", "content-encoding": "gzip"})
        _assert_openai_error(r, 415, "unsupported_content_encoding")
    r = http.post(gw.base_url + "/chat/completions", headers={"content-encoding": "identity"},
                  json={"model": "odd", "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_veracity_routes_are_never_forwarded(gw: Any, http: httpx.Client, upstream: Any, method: str) -> None:
    upstream.seen.clear()
    r = http.request(method, gw.base_url + "/veracity/verify")
    _assert_openai_error(r, 405, "method_not_allowed")
    assert r.headers["allow"] == "POST"
    _assert_openai_error(http.request(method, gw.base_url + "/veracity/other"), 404, "unknown_url")
    assert upstream.seen == []


@pytest.mark.parametrize("raw", [
    b"hello", b"", b"[1, 2]", b'"x"', b"3", b"null", b"[" * 50_000 + b"]" * 50_000,
    b'{"model": "odd", "x": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
    b'{"model": "odd", "messages": [{"role": "user", "content": "\xff\xfe"}]}',
    b'{"model": "odd", "messages": [], "temperature": NaN}',
    b'{"model": "odd", "messages": [], "temperature": Infinity}',
    b'{"model": "odd\\ud800", "messages": []}',  # lone surrogates cannot be logged/labelled as UTF-8
    b'{"model": "odd", "messages": [{"role": "user", "content": "\\udfff 2 + 2 = 5"}]}',
])
def test_bodies_that_are_not_a_json_object(gw: Any, http: httpx.Client, raw: bytes) -> None:
    for url in (gw.base_url + "/chat/completions", gw.base_url + "/veracity/verify"):
        r = http.post(url, content=raw, headers={"content-type": "application/json"})
        _assert_openai_error(r, 400, "invalid_json")


@pytest.mark.parametrize("depth,status", [(200, 200), (256, 400), (1000, 400)])
def test_deeply_nested_bodies(gw: Any, http: httpx.Client, depth: int, status: int) -> None:
    """Fault: orjson parses up to 1,024 levels but serialises only 255: a ``veracity`` object
    nested 1,000 deep raised RecursionError in the override walk (500). Bodies deeper than
    255 levels are now a 400 ``invalid_json``; 200 levels still go through."""
    nested = b'{"a":' * depth + b"1" + b"}" * depth
    for url, body in ((gw.base_url + "/chat/completions",
                       b'{"model": "odd", "messages": [{"role": "user", "content": "hi"}], "metadata_x": '
                       + nested[5:-1] + b"}" if depth < 250 else
                       b'{"model": "odd", "messages": [], "veracity": ' + nested + b"}"),
                      (gw.base_url + "/veracity/verify", b'{"answer": "2 + 2 = 4", "extra": ' + nested + b"}")):
        r = http.post(url, content=body, headers={"content-type": "application/json"})
        if status == 200:
            assert r.status_code == 200, r.text
        else:
            err = _assert_openai_error(r, 400, "invalid_json")
            assert "nested" in err["message"]


@pytest.mark.parametrize("model", [5, "", None, ["odd"], {"a": 1}])
def test_model_of_the_wrong_type(gw: Any, http: httpx.Client, model: Any) -> None:
    r = http.post(gw.base_url + "/chat/completions", json={"model": model, "messages": []})
    _assert_openai_error(r, 400, "missing_model", "model")


@pytest.mark.parametrize("overrides,status,param", [
    ("x", 400, "veracity"), ([], 400, "veracity"), ({"nope": 1}, 400, "veracity.nope"),
    ({"risk": {"threshold": "hi"}}, 400, "veracity.risk.threshold"),
    ({"risk": {"threshold": 1e308}}, 400, "veracity.risk.threshold"),
    ({"budgets": {"request": {"extra_calls": -5}}}, 400, "veracity.budgets.request.extra_calls"),
    ({"budgets": {"request": {"deadline_ms": -1}}}, 400, "veracity.budgets.request.deadline_ms"),
    ({"budgets": {"request": {"extra_tokens": True}}}, 400, "veracity.budgets.request.extra_tokens"),
    ({"budgets": {"request": {"extra_tokens": 1.5}}}, 400, "veracity.budgets.request.extra_tokens"),
    ({"verifiers": {"code": {"sandbox": {"backend": "docker"}}}}, 403, "veracity.verifiers.code.sandbox.backend"),
    ({"name": "x"}, 403, "veracity.name"), ({"overridable": ["verifiers"]}, 403, "veracity.overridable"),
])
def test_bad_veracity_overrides(gw: Any, http: httpx.Client, overrides: Any, status: int, param: str) -> None:
    _assert_openai_error(_chat(http, gw, "2 + 2 = 5", veracity=overrides), status, "veracity_policy", param)


def test_huge_budget_override_is_a_403_naming_the_cap(gw: Any, http: httpx.Client) -> None:
    r = _chat(http, gw, "hi", veracity={"budgets": {"request": {"deadline_ms": 10**30, "extra_calls": 10**30}}})
    err = _assert_openai_error(r, 403, "veracity_policy", "veracity.budgets.request.deadline_ms")
    assert err["type"] == "permission_error"
    assert err["message"] == (f"veracity.budgets.request.deadline_ms: {10**30} is above the cap of this key's "
                              "policy 'default', 50000; an override may only lower budgets and round limits")
    r = _chat(http, gw, "hi", veracity={"budgets": {"request": {"deadline_ms": 50000, "extra_calls": 1}}})
    assert r.status_code == 200 and r.json()["veracity"]["policy"] == "default"  # at or under the cap: fine


@pytest.mark.parametrize("name", ["nope", "../../etc/passwd", "/etc/passwd", "default/../strict", "x" * 5000])
def test_unknown_or_path_like_policy_names(gw: Any, http: httpx.Client, name: str) -> None:
    r = http.post(gw.base_url + "/chat/completions", headers={"x-veracity-policy": name},
                  json={"model": "odd", "messages": [{"role": "user", "content": "hi"}]})
    err = _assert_openai_error(r, 400, "veracity_policy", "x-veracity-policy")
    assert "root:" not in err["message"]
    r = _chat(http, gw, "hi", veracity={"policy": name})
    _assert_openai_error(r, 400, "veracity_policy")


@pytest.mark.parametrize("messages", [
    "hi", None, ["hi", 5], [{"content": "hi"}], [{"role": "user"}], [{"role": 5, "content": "2+2=5"}],
    [{"role": "wizard", "content": "2+2=5"}],
    [{"role": "user", "content": [{"type": "zzz"}, 5, None, {"type": "text", "text": 7}]}],
    [{"role": "user", "content": {"a": 1}}],
])
def test_malformed_messages_are_forwarded_not_crashed_on(gw: Any, http: httpx.Client, upstream: Any,
                                                          messages: Any) -> None:
    """``messages`` belongs to the upstream (fidelity): the gateway forwards it unchanged and
    lets the upstream judge it; its own question extraction must not crash on it."""
    upstream.seen.clear()
    r = http.post(gw.base_url + "/chat/completions", json={"model": "odd", "messages": messages})
    assert r.status_code == 200, r.text
    assert "veracity" in r.json() and len(upstream.seen) == 1


SENTINEL_ON = {"sentinel": {"mode": "offered", "when": "always"}}


@pytest.mark.parametrize("fields", [
    {"tools": 5}, {"tools": "x"}, {"tools": {"a": 1}}, {"messages": 5}, {"messages": "do a and b"},
    {"messages": {"role": "user"}}, {"tools": [5, None]}, {"tool_choice": 5},
])
def test_sentinel_leaves_malformed_tools_and_messages_to_the_upstream(gw: Any, http: httpx.Client, upstream: Any,
                                                                       fields: dict[str, Any]) -> None:
    """Fault: with the sentinel on, ``"tools": 5`` or ``"messages": 5`` raised TypeError in
    ``sentinel.inject`` (a 500 for a client mistake) and ``"messages": "text"`` was turned
    into a list of characters. Now such a body is forwarded as sent (the upstream judges it)."""
    upstream.seen.clear()
    body = {"model": "odd", "messages": [{"role": "user", "content": "do a and b"}], "veracity": SENTINEL_ON, **fields}
    r = http.post(gw.base_url + "/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["veracity"]["sentinel"]["injected"] in (False, True)
    assert len(upstream.seen) >= 1


def test_sentinel_never_shadows_a_client_tool_with_its_name() -> None:
    from proxy.pipeline import sentinel

    client_tool = {"type": "function", "function": {"name": sentinel.TOOL_NAME, "parameters": {"type": "object"}}}
    body = {"model": "m", "messages": [{"role": "user", "content": "do a and b"}], "tools": [client_tool]}
    ok, why = sentinel.should_inject(body, "forced")
    assert not ok and sentinel.TOOL_NAME in why


def test_sentinel_fuzzed_bodies_never_raise() -> None:
    from proxy.pipeline import sentinel

    values = {"messages": ["hi", None, 5, [], ["x"], [{"role": 5}], [{"role": "system", "content": None}]],
              "tools": [None, "x", 5, [], [5], [{"type": "function", "function": None}], {"a": 1}],
              "tool_choice": [None, "none", "auto", "required", 5, {"type": "function", "function": None}, []]}
    for msgs in values["messages"]:
        for tools in values["tools"]:
            for tc in values["tool_choice"]:
                body = {"model": "m", "messages": msgs, "tools": tools, "tool_choice": tc}
                ok, why = sentinel.should_inject(body, "forced")
                if ok:
                    new = sentinel.inject(body)
                    assert isinstance(new["messages"], list) and new["messages"][1:] == msgs
                else:
                    assert why


@pytest.mark.parametrize("messages", [5, "2 + 2?", {"role": "user"}, None, [5, "x"]])
@pytest.mark.parametrize("message", [{"content": "2 + 2 = 5"}, "2 + 2 = 5", None])
def test_correction_round_survives_malformed_messages(messages: Any, message: Any) -> None:
    """Fault: ``correction_body`` did ``list(messages)``: a number raised TypeError outside the
    loop's error handling (a 500) and a string became a list of characters."""
    from proxy.pipeline import correction
    from verifiers._types import Report

    failed = Report(status="failed", checks=[Check(verifier="arithmetic", claim="2 + 2 = 5", outcome="fail")])
    sent: list[dict[str, Any]] = []

    async def complete(req: dict[str, Any]) -> dict[str, Any]:
        sent.append(req)
        return {"choices": [{"message": {"role": "assistant", "content": "2 + 2 = 4"}}]}

    async def verify(text: str) -> Report:  # the claim that failed passes again (a `corrected` needs it)
        return Report(status="passed", checks=[Check(verifier="arithmetic", claim="2 + 2 = 4", outcome="pass")]) \
            if "= 4" in text else failed

    draft = {"choices": [{"message": message}]}
    result = asyncio.run(correction.correct({"model": "m", "messages": messages}, draft, complete=complete,
                                            verify=verify, max_rounds=1, initial_report=failed))
    assert result.stop_reason == "passed" and len(sent) == 1
    msgs = sent[0]["messages"]
    assert all(isinstance(m, (dict, int, str)) for m in msgs) and msgs[-1]["role"] == "user"
    if isinstance(messages, list):
        assert msgs[:-2] == messages
    else:
        assert len(msgs) == 2


def test_request_id_header_injection_is_replaced(gw: Any, http: httpx.Client) -> None:
    for rid in ("abc\tdef", "a" * 500, "x y", "<script>"):
        r = http.post(
            gw.base_url + "/chat/completions", headers={"x-request-id": rid},
            json={"model": "odd", "messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 200 and r.headers["x-request-id"].startswith("req_")


def test_oversized_body_is_413(gw: Any, http: httpx.Client) -> None:
    big = b'{"model": "odd", "messages": [], "x": "' + b"a" * 300_000 + b'"}'
    _assert_openai_error(http.post(gw.base_url + "/chat/completions", content=big), 413, "request_too_large")

    def chunks() -> Iterator[bytes]:  # chunked: no Content-Length to check up front
        for _ in range(300):
            yield b"a" * 1000

    _assert_openai_error(http.post(gw.base_url + "/chat/completions", content=chunks()), 413, "request_too_large")


# ----------------------------------------------------------------------- upstream answers


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("key", ["null", "list", "nochoices", "emptychoices", "choicesnull", "choicesstr",
                                 "msgnull", "choiceints", "numcontent"])
def test_odd_upstream_answers_are_relayed_with_a_report(gw: Any, http: httpx.Client, key: str, stream: bool) -> None:
    r = _chat(http, gw, f"{key} what is 2+2?", stream=stream)
    assert r.status_code == 200, r.text
    if stream:  # the odd server sends its JSON as one SSE frame: relayed, never a 500
        assert r.text.startswith("data: ") and "Traceback" not in r.text
        return
    body = r.json()
    assert body["veracity"]["status"] in ("skipped", "passed", "failed")
    assert r.headers["x-veracity-status"] == body["veracity"]["status"]


@pytest.mark.parametrize("mode", ["passthrough", "buffer"])
def test_malformed_stream_chunks_end_in_a_report_not_a_broken_stream(gw: Any, http: httpx.Client, mode: str) -> None:
    """Fault: ``sse.assemble`` raised on a chunk whose ``choices`` is not a list, a ``delta``
    that is a string, ``tool_calls: 5``, non-list logprobs...: after relaying, the gateway's
    stream broke off (no report, no ``[DONE]``). Now malformed pieces are skipped, the good
    text is verified and the stream ends normally."""
    r = _chat(http, gw, "badchunks 2+2?", stream=True, veracity={"streaming": {"mode": mode}})
    _assert_stream_reports_failure(r, "2 + 2 = 5")


@pytest.mark.parametrize("mode", ["passthrough", "buffer"])
def test_lone_surrogate_in_a_streamed_answer(gw: Any, http: httpx.Client, mode: str) -> None:
    r = _chat(http, gw, "surrogatechunks", stream=True, veracity={"streaming": {"mode": mode}})
    _assert_stream_reports_failure(r, "3 * 3 = 10")
    text = "".join(json.loads(f[6:])["choices"][0]["delta"].get("content") or "" for f in r.text.split("\n\n")
                   if f.startswith("data: {") and '"delta"' in f)
    assert text == "3 * 3 = 10 \ud800"


def _assert_stream_reports_failure(r: httpx.Response, claim: str) -> None:
    assert r.status_code == 200
    frames = [f[6:] for f in r.text.split("\n\n") if f.startswith("data: ")]
    assert frames[-1] == "[DONE]", r.text[-500:]
    report = [json.loads(f)["veracity"] for f in frames[:-1] if '"veracity"' in f]
    assert report and report[-1]["status"] == "failed"
    assert any(c["claim"] == claim and c["outcome"] == "fail" for c in report[-1]["checks"])


def test_list_content_is_verified(gw: Any, http: httpx.Client) -> None:
    body = _chat(http, gw, "list what is 2+2?").json()
    assert body["choices"][0]["message"]["content"] == [{"type": "text", "text": "2 + 2 = 5"}]
    assert body["veracity"]["status"] == "failed"


@pytest.mark.parametrize("key", ["nonjson", "jsonarray"])
def test_upstream_body_that_is_not_a_json_object_is_502(gw: Any, http: httpx.Client, key: str) -> None:
    _assert_openai_error(_chat(http, gw, key), 502, "upstream_bad_response")


def test_lone_surrogate_in_an_upstream_answer_is_not_lost(gw: Any, http: httpx.Client) -> None:
    """Fault: orjson refuses ``"\\ud800"`` (valid JSON, RFC 8259 section 8.2), so the answer
    became a 502 ``upstream_bad_response``. Now it reaches the client and is verified."""
    r = _chat(http, gw, "surrogate")
    assert r.status_code == 200, r.text
    body = json.loads(r.content)
    assert body["choices"][0]["message"]["content"] == "2 + 2 = 4 \ud800 and 3 * 3 = 10"
    outcomes = {c["claim"].replace(" ", ""): c["outcome"] for c in body["veracity"]["checks"]}
    assert outcomes.get("3*3=10") == "fail" and outcomes.get("2+2=4") == "pass"
    # the log line (log_content: true) and the audit record (include_text) were written too
    rid = r.headers["x-request-id"]
    line = [rec for rec in gw.log_records() if rec.get("request_id") == rid and rec.get("event") == "request"]
    assert line and line[0]["status"] == 200 and line[0]["choices"][0]["message"]["content"].startswith("2 + 2 = 4 \ud800")
    import yaml

    audit = yaml.safe_load((gw.log_path.parent / "veracity.yaml").read_text())["verification"]["audit"]
    records = [json.loads(x) for x in Path(audit).read_text().splitlines()]
    assert any(rec.get("request_id") == rid for rec in records)


def test_zero_width_and_bidi_controls_do_not_hide_a_wrong_sum(gw: Any, http: httpx.Client) -> None:
    """Fault (a miss): "2\u200b+\u200b2 = 5" was not seen as a claim at all; the arithmetic
    normaliser now drops invisible format characters (spans still point at the original)."""
    body = _chat(http, gw, "zerowidth").json()
    assert body["choices"][0]["message"]["content"].endswith("\x00")  # relayed byte for byte
    assert body["veracity"]["status"] == "failed"


def test_ten_thousand_code_fences_are_bounded(gw: Any, http: httpx.Client) -> None:
    """Fault: tiers 1-2 of the code verifier ran on the event loop, ~1.5 ms per block: an
    answer of 10,000 fences stalled every request for ~15 s and overran the deadline. Now
    the first ``MAX_BLOCKS`` are checked and the rest get one ``unknown`` check."""
    from verifiers.code import MAX_BLOCKS

    body = _chat(http, gw, "fences").json()
    assert len(body["choices"][0]["message"]["content"]) == len("```python\nx = 1\n```\n") * 10_000
    checks = [c for c in body["veracity"]["checks"] if c["verifier"] == "code"]
    rest = [c for c in checks if c["evidence"].get("reason") == "too many code blocks"]
    assert len(rest) == 1 and rest[0]["outcome"] == "unknown"
    assert rest[0]["evidence"]["unchecked_blocks"] == 10_000 - MAX_BLOCKS
    assert len(checks) <= MAX_BLOCKS + 1


def test_made_up_model_names_do_not_grow_the_metrics(gw: Any, http: httpx.Client) -> None:
    long_name = "m" + "x" * 300
    assert http.post(gw.base_url + "/chat/completions",
                     json={"model": long_name, "messages": [{"role": "user", "content": "hi"}]}).status_code == 200
    assert long_name not in gw.metrics()


@pytest.mark.parametrize("stream", [False, True])
def test_upstream_echoing_its_key_in_an_error_does_not_leak_it(gw: Any, http: httpx.Client, stream: bool) -> None:
    """Fault: an upstream error body is relayed unchanged, so an upstream that echoes the
    Authorization header handed the gateway's upstream key to the client. Registered secrets
    are now replaced by ``[REDACTED]`` in relayed error bodies (chat and pass-through)."""
    r = _chat(http, gw, "echo401", stream=stream)
    err = _assert_openai_error(r, 401, "invalid_api_key")
    assert UPSTREAM_KEY not in r.text and "[REDACTED]" in err["message"]
    r = http.post(gw.base_url + "/embeddings", json={"model": "odd", "input": "x"})
    assert r.status_code == 401 and UPSTREAM_KEY not in r.text and "[REDACTED]" in r.text
    # the Azure client's shape (proxy.wire.azure): deployment paths, key in an api-key header
    azure = {"api-key": "client-azure-key-0123456789"}
    r = http.post(gw.url + "/openai/deployments/odd/chat/completions?api-version=2024-10-21", headers=azure,
                  json={"messages": [{"role": "user", "content": "echo401"}], "stream": stream})
    err = _assert_openai_error(r, 401, "invalid_api_key")
    assert UPSTREAM_KEY not in r.text and "[REDACTED]" in err["message"]
    r = http.post(gw.url + "/openai/deployments/odd/embeddings?api-version=2024-10-21", headers=azure,
                  json={"input": "x"})
    assert r.status_code == 401 and UPSTREAM_KEY not in r.text and "[REDACTED]" in r.text


def test_gateway_still_serves_and_logged_no_traceback(gw: Any, http: httpx.Client) -> None:
    assert http.get(gw.url + "/healthz").status_code == 200
    assert "Traceback" not in gw.log() and UPSTREAM_KEY not in gw.log()


# ------------------------------------------------------------------------- in-process


def test_model_label_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from proxy.observability import metrics

    # a private copy of the process-wide label set: filling it here must not turn the model
    # names of tests that run later in this process into "_other" (nor depend on earlier ones)
    monkeypatch.setattr(metrics, "_model_labels", set(metrics._model_labels))
    metrics.observe_request("/test", "breaker-known", 200, 0.001, 0.0001, None, 0.0)
    assert metrics.model_label("breaker-known", 404) == "breaker-known"   # known names keep their label
    assert metrics.model_label("breaker-404-name", 404) == "_other"       # a rejected name never gets one
    assert metrics.model_label("y" * 500) == "_other"
    names = [f"breaker-{i}" for i in range(metrics.MAX_MODEL_LABELS + 10)]
    labels = {metrics.model_label(n) for n in names}
    assert "_other" in labels and len(labels) <= metrics.MAX_MODEL_LABELS + 1


def test_upstream_json_codec_round_trips_what_orjson_refuses() -> None:
    from proxy.wire.json import dumps, loads

    assert loads(b'{"a": "\\ud800x"}') == {"a": "\ud800x"}
    assert json.loads(dumps({"a": "\ud800x", "n": 10**30})) == {"a": "\ud800x", "n": 10**30}
    for bad in (b"nope", b'{"a": "\\ud800", "b": NaN}', b'{"a": "\\u12"}'):
        with pytest.raises(ValueError):
            loads(bad)


def test_code_acheck_parses_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    from verifiers import code
    from verifiers.code import _entry

    seen: list[int] = []
    real = _entry.plan

    def spy(*a: Any, **kw: Any) -> Any:
        seen.append(threading.get_ident())
        return real(*a, **kw)

    monkeypatch.setattr(_entry, "plan", spy)
    checks = asyncio.run(code.acheck("```python\nprint(1)\n```", sandbox="none"))
    assert checks and all(isinstance(c, Check) for c in checks)
    assert seen and seen[0] != threading.get_ident()


def test_citations_acheck_extracts_long_answers_off_the_event_loop(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    from verifiers.citations import _verify as cverify

    seen: list[int] = []
    real = cverify.extract

    def spy(text: str) -> Any:
        seen.append(threading.get_ident())
        return real(text)

    monkeypatch.setattr(cverify, "extract", spy)
    answer = "".join(f"{i + 1}. Smith, J., & Doe, A. (2020). A made-up title number {i}. Journal of Things, "
                     "12(3), 45-67.\n" for i in range(300))
    sources = {"use": ["local"], "local_index": {"path": str(tmp_path / "idx.sqlite3"), "authoritative": False}}
    checks = cverify.check(answer, sources=sources, deadline=5.0)
    assert seen and seen[0] != threading.get_ident()
    assert checks and all(c.outcome in ("unknown", "fail", "pass", "error") for c in checks)


PATHOLOGICAL = {
    "digits": "1" * 100_000,
    "digits_equation": "1" * 50_000 + " = " + "2" * 49_997,
    "spaces": "1 " + " " * 100_000 + "= 2",
    "parens": "(" * 50_000 + ")" * 50_000,
    "stars": "2" + "*" * 100_000 + "2 = 4",
    "brackets": "[" * 50_000 + "]" * 50_000,
    "plus_chain": "1+" * 50_000 + "1 = 3",
    "latex_nested": "$" + "\\frac{" * 3000 + "1" + "}{2}" * 3000 + "$ = 1",
    "sqrt_nested": "\\(" + "\\sqrt{" * 5000 + "4" + "}" * 5000 + "\\)",
    "backticks": "`" * 100_000,
    "unclosed_fence": "```python\n" + "x = (" * 20_000,
    "doi_run": "doi:10." + "1" * 100_000,
    "quotes": '"' * 100_000,
    "author_year": "Smith, " * 14_000 + "(2020)",
    "nul": "\x00" * 100_000,
    "power_tower": "9^9^9^9 = 1 and 2^100000 = 5 and 1e999999 * 1e999999 = 1",
    "bibtex": "@article{" + "{" * 30_000 + "}" * 30_000,
}


@pytest.mark.parametrize("text,claim,outcome", [
    ("2\u200b+\u200b2 = 5", "2\u200b+\u200b2 = 5", "fail"), ("2+2 = \u202e5\u202c", "2+2 = \u202e5", "fail"),
    ("\ufeff3 * 4 = 12", "3 * 4 = 12", "pass"), ("２＋２＝５", "２＋２＝５", "fail"), ("１２×３＝３６", "１２×３＝３６", "pass"),
    ("答案是３，４＋５＝９", "４＋５＝９", "pass"), ("1\u00ad000 + 1 = 1001", "1\u00ad000 + 1 = 1001", "pass"),
])
def test_arithmetic_sees_through_invisible_and_fullwidth_characters(text: str, claim: str, outcome: str) -> None:
    from verifiers import arithmetic

    checks = arithmetic.check(text)
    assert [(c.claim, c.outcome) for c in checks] == [(claim, outcome)]
    s, e = checks[0].span
    assert text[s:e] == claim  # the span points at the original text


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_verifiers_survive_pathological_text(name: str, tmp_path: Path) -> None:
    """Every verifier returns checks (never raises) on 100 kB of backtracking bait; their
    times are in bench/results/breaker.md (no timed assertion here)."""
    from verifiers import arithmetic, code
    from verifiers.citations import check as ccheck

    text = PATHOLOGICAL[name]
    for checks in (arithmetic.check(text), code.check(text, sandbox="none"),
                   ccheck(text, sources={"use": ["local"], "local_index": {"path": str(tmp_path / "i.sqlite3")}})):
        assert isinstance(checks, list) and all(isinstance(c, Check) for c in checks)
        assert all(c.outcome in ("pass", "fail", "unknown", "error") for c in checks)
    assert not any(c.outcome == "fail" for c in arithmetic.check(text) if name in ("digits", "nul", "backticks"))


def test_sse_assembler_and_inverse_never_raise_on_fuzzed_chunks() -> None:
    """Seeded fuzz of ``sse.assemble`` and ``sse.completion_frames`` (the buffer mode's
    re-streaming) with wrong types at every level; only ``IncompleteStream`` may be raised."""
    import random

    from proxy.wire.sse import IncompleteStream, assemble
    from proxy.pipeline.streams import completion_frames, report_frame

    rnd = random.Random(7)
    junk = [None, 0, -1, "x", "", [], {}, [None], [1], {"a": 1}, True, 1.5, [{"index": "a"}]]

    def pick(*extra: Any) -> Any:
        return rnd.choice(junk + list(extra))

    def chunk() -> Any:
        call = {"index": pick(0, 1), "id": pick("c"), "type": pick("function"),
                "function": pick({"name": pick("f"), "arguments": pick('{"a"', "1}")})}
        delta = {k: pick("text") for k in ("role", "content", "refusal", "reasoning_content") if rnd.random() < 0.5}
        if rnd.random() < 0.4:
            delta["tool_calls"] = pick([call], [call, call])
        choice = {"index": pick(0, 0, 1), "delta": pick(delta, delta), "finish_reason": pick(None, "stop"),
                  "logprobs": pick({"content": pick([{"token": pick("ab"), "logprob": pick(-0.1)}])})}
        return pick({"id": pick("x"), "choices": pick([choice], [choice, choice]), "usage": pick({"total_tokens": 3})})

    for _ in range(3000):
        chunks = [chunk() for _ in range(rnd.randint(0, 4))]
        for strict in (True, False):
            try:
                completion = assemble(chunks, done=rnd.random() < 0.8, strict=strict)
            except IncompleteStream as exc:
                completion = exc.partial
            if isinstance(completion, dict):
                assert isinstance(completion_frames(completion, usage=True), list)
                assert report_frame(completion, {"status": "passed"}, "m").startswith(b"data: ")
    frame = report_frame({}, {"checks": [{"claim": "Smith (2020). A title \ud800"}]}, "m")  # quoted model text
    assert json.loads(frame[6:])["veracity"]["checks"][0]["claim"].endswith("\ud800")


def test_citation_extraction_of_thousands_of_reference_lines() -> None:
    """Fault: ``extract`` checked each candidate span against every span already taken
    (quadratic: 4,000 reference lines took 3.7 s, now ~0.6 s; bench/results/breaker.md). The
    spans are now bisected; the result must be the same: one claim per line, none overlapping."""
    from verifiers.citations import extract

    lines = [f"[{i}] A. Author and B. Writer. A made-up title number {i}. Journal of Things, 2020.\n"
             for i in range(2000)]
    text = "".join(lines) + 'Also see doi:10.1000/xyz123 and "An Entirely Quoted Title Here" (Smith, 2020).'
    claims = extract(text)
    starts = {c.span[0] for c in claims if c.kind == "entry"}
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    for i in range(0, 2000, 23):  # each line is read as it is when alone
        alone = any(c.kind == "entry" for c in extract(lines[i]))
        assert (offsets[i] in starts) == alone, lines[i]
    assert len(starts) > 1500 and len(text) < 200_000  # all within extract.MAX_TEXT
    spans = sorted(c.span for c in claims)
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # nothing claimed twice
    assert any(c.doi == "10.1000/xyz123" for c in claims)


def test_code_block_line_numbers_with_thousands_of_fences() -> None:
    """Fault: each block's line number was ``text.count("\\n", 0, start)`` (quadratic: 5,000
    fences ~0.4 s of the code verifier's time); now counted incrementally. Same numbers."""
    from verifiers.code._extract import fenced_blocks

    text = "intro\n" + "```python\nx = 1\n```\n" * 3000
    blocks = fenced_blocks(text)
    assert len(blocks) == 3000
    assert [b.line for b in blocks] == [3 + 3 * i for i in range(3000)]  # the body's first line
    assert all(b.code == "x = 1\n" or b.code == "x = 1" for b in blocks)


def test_background_verifications_are_bounded(tmp_path: Path) -> None:
    """A burst of observe-mode requests spawned one background verification each, without
    limit. Past ``MAX_BACKGROUND_TASKS`` new ones are dropped (closed, never run, counted)."""
    from proxy import runtime

    rt = runtime.VerificationRuntime(runtime.PoliciesSettings(dir=str(tmp_path)), runtime.VerificationSettings())
    ran: list[int] = []

    async def job(i: int, gate: asyncio.Event) -> None:
        await gate.wait()
        ran.append(i)

    async def burst() -> None:
        gate = asyncio.Event()
        coros = [job(i, gate) for i in range(runtime.MAX_BACKGROUND_TASKS + 50)]
        tasks = [rt.spawn(c) for c in coros]
        assert sum(t is None for t in tasks) == 50 and rt.dropped == 50
        assert all(c.cr_frame is None for c, t in zip(coros, tasks) if t is None)  # closed, not leaked
        gate.set()
        await rt.drain()

    asyncio.run(burst())
    assert sorted(ran) == list(range(runtime.MAX_BACKGROUND_TASKS))


def test_risk_scoring_of_a_huge_answer_scans_a_bounded_prefix() -> None:
    """A 10 MB answer cost ~0.4 s of event-loop time in ``risk.score``; signals now come from
    the first ``MAX_SCAN_CHARS`` (what the verifiers read), ``length`` from the whole answer."""
    from verifiers import risk

    head = "The total is 12 * 4 = 48 dollars. " * 100
    huge = head + "x" * 10_000_000
    r_huge, r_head = risk.score(None, huge), risk.score(None, head + "x" * (risk.MAX_SCAN_CHARS - len(head)))
    assert r_huge.signals["length"] == len(huge)
    assert {k: v for k, v in r_huge.signals.items() if k != "length"} == \
        {k: v for k, v in r_head.signals.items() if k != "length"}
    assert r_huge.verifiers == r_head.verifiers == ["arithmetic"]


@pytest.mark.parametrize("case", ["code_after_200k", "claim_after_60k", "hyphen_before_claim"])
def test_what_lies_past_a_limit_or_behind_a_hyphen_is_never_silently_skipped(case: str) -> None:
    """Never silently skipped: a code block ending after 200,000 characters and a wrong claim after 60,000
    came out ``skipped`` / "no checkable claims" with ``checks: []``; "Version 2-beta and 3 * 4 =
    13." was ``skipped`` while "Version 2-beta. 3 * 4 = 13." was ``failed``. A limit is fine,
    silence is not: an ``unknown`` check names it (tests/proxy/test_silent_limits.py has each limit)."""
    from proxy.stores.budget import RequestBudget
    from proxy.pipeline.sequence import verify_text
    from proxy.policy import PolicyStore
    from verifiers import risk

    text, status, limit = {
        "code_after_200k": ("Some words here. " * (risk.MAX_SCAN_CHARS // 17 + 100)
                            + "\n\n```python\ndef add(a, b):\n    return a - b\n\nprint(add(2, 2))  # 4\n```\n",
                            "unverified", ("risk", "MAX_SCAN_CHARS")),
        "claim_after_60k": ("Lorem ipsum dolor sit amet. " * 2200 + "\n\n3 * 4 = 13.", "unverified",
                            ("arithmetic", "MAX_CHARS")),
        "hyphen_before_claim": ("Version 2-beta and 3 * 4 = 13.", "failed", None),
    }[case]
    pol = PolicyStore(None).get("default")
    rep = asyncio.run(verify_text(pol, None, text, RequestBudget.from_policy(pol.budgets.request)))
    assert rep.status == status and rep.checks, rep
    cut = [(c.verifier, c.evidence.get("limit")) for c in rep.checks if c.evidence.get("kind") == "truncated"]
    assert (limit in cut) if limit else cut == []


def test_correction_prompt_is_bounded_for_thousands_of_failed_checks() -> None:
    from proxy.pipeline import correction
    from verifiers._types import Report

    checks = [Check(verifier="arithmetic", claim=f"{i} + 1 = {i + 2}", outcome="fail", expected=str(i + 1),
                    found=str(i + 2), note="off by one") for i in range(3000)]
    prompt = correction.evidence_prompt(Report(status="failed", checks=checks))
    assert "3000 error(s)" in prompt and "2980 more" in prompt
    assert "19 + 1 = 21" in prompt and "20 + 1 = 22" not in prompt
    assert len(prompt) < 10_000


@pytest.mark.parametrize("rewrite", ["same", "other_numbers"])
def test_divergence_check_of_thousands_of_failed_claims_is_bounded(monkeypatch: pytest.MonkeyPatch,
                                                                   rewrite: str) -> None:
    """hostile1: the divergence pre-check compared every failed claim with every number of the
    correction (claims x numbers, on the event loop): an upstream answer of 20,000 wrong sums held
    the gateway for minutes (no /healthz answer). Its work is now bounded; past the bound the
    draft is not judged (None: the loop verifies it as usual), never a false divergence."""
    from proxy.pipeline import divergence

    calls = 0
    states = divergence._states

    def counted(n: Any, value: Any) -> bool:
        nonlocal calls
        calls += 1
        return states(n, value)

    monkeypatch.setattr(divergence, "_states", counted)
    old = " ".join(f"{i} + {i} = {2 * i + 1}." for i in range(3000))
    failed = [Check(verifier="arithmetic", claim=f"{i} + {i} = {2 * i + 1}", outcome="fail", expected=str(2 * i),
                    found=str(2 * i + 1), evidence={"expression": f"{i} + {i}"}) for i in range(500)]
    new = old if rewrite == "same" else " ".join(str(10**6 + i) for i in range(9000))
    assert divergence.diverged(failed, new, old) is None
    assert calls <= 100_000 + 9000            # MAX_WORK, plus the one scan that went past it
    # a small draft is still judged as before
    small = divergence.diverged(failed[:2], "The answer is 1000007.", "0 + 0 = 1. 1 + 1 = 3.")
    assert small is not None and small.kind == "dropped"


def test_citations_looked_up_per_answer_are_bounded(tmp_path: Path) -> None:
    from verifiers.citations import _verify as cverify

    answer = "".join(f"{i + 1}. Smith, J., & Doe, A. (2020). A made-up title number {i}. Journal of Things, "
                     "12(3), 45-67.\n" for i in range(cverify.MAX_CLAIMS + 40))
    sources = {"use": ["local"], "local_index": {"path": str(tmp_path / "idx.sqlite3"), "authoritative": False}}
    checks = cverify.check(answer, sources=sources, deadline=10.0)
    assert len(checks) == cverify.MAX_CLAIMS + 1
    last = checks[-1]
    assert last.outcome == "unknown" and last.evidence == {
        "reason": "too many references", "unchecked": 40, "kind": "truncated", "limit": "MAX_CLAIMS",
        "limit_value": 200, "checked": 200, "total": 240, "unit": "references"}
    assert answer[last.span[0]:].startswith(f"{cverify.MAX_CLAIMS + 1}. Smith")


def test_thousands_of_stated_outputs_in_one_block() -> None:
    """Fault: each ``# Output:`` comment called ``ast.get_source_segment``, which re-splits the
    whole block: 5,000 such lines took 177 s in the code verifier (now ~0.5 s). The source
    segments must be exactly the stdlib's."""
    import ast

    from verifiers import code
    from verifiers.code._extract import _SOURCE_LINE, _source_segment

    src = 'x = (1,\r\n  2)\nprint("é", x)  # Output: (1, 2)\rdef f():\n    return "ü"\nf()  # -> \'ü\'\n'
    tree = ast.parse(src)
    lines = _SOURCE_LINE.findall(src)
    for node in ast.walk(tree):
        if hasattr(node, "lineno"):
            assert _source_segment(lines, node) == ast.get_source_segment(src, node)
    answer = "```python\n" + "".join(f"print({i})  # Output: {i}\n" for i in range(3000)) + "```"
    checks = code.check(answer, sandbox="none")
    assert len(checks) == 3001 and all(c.outcome in ("unknown", "pass") for c in checks)


def test_thousands_of_undefined_names_in_one_block() -> None:
    """Fault: each undefined name ran difflib against every known name (and re-sorted them):
    1,000 ``def fi(): return gi()`` took 2.4 s. Near-miss search now stops after
    ``NEAR_MISS_LOOKUPS`` names; the rest are context names (``unknown``), never failures."""
    from verifiers import code
    from verifiers.code._static import NEAR_MISS_LOOKUPS

    src = "def greet():\n    pritn('hi')\n" + "".join(f"def f{i}():\n    return g{i}()\n" for i in range(1000))
    checks = code.check(f"```python\n{src}```", sandbox="none")
    assert checks[0].outcome == "fail" and "pritn" in checks[0].note  # the first near-miss still caught
    src = "".join(f"def f{i}():\n    return g{i}()\n" for i in range(1000)) + "x = lenght([1])\n"
    checks = code.check(f"```python\n{src}```", sandbox="none")
    assert not any(c.outcome == "fail" for c in checks)  # past the lookup budget: not judged
    assert NEAR_MISS_LOOKUPS < 1000


def test_thousands_of_author_year_citations() -> None:
    """Fault: each narrative citation ("Smith et al. (2001)") was checked against every
    parenthetical one found before (4,000 took 2.5 s, now ~0.08 s). Same claims."""
    from verifiers.citations import extract

    text = " ".join(f"Smith et al. ({1900 + i % 100}) showed (Doe, {1900 + i % 100}; Roe, 2001)." for i in range(2000))
    claims = [c for c in extract(text) if c.kind == "in_text"]
    narrative = [c for c in claims if c.raw.startswith("Smith")]
    assert len(narrative) == 2000 and len(claims) == 6000
    assert narrative[5].year == 1905 and narrative[5].et_al


def test_thousands_of_quoted_titles_without_sentence_ends() -> None:
    """Fault: the end of each quoted title's sentence was searched to the end of the text
    (quadratic when the text has no ". " and no newline). Now within 400 characters; a
    citation in the same sentence is still linked to the title."""
    from verifiers.citations import extract

    text = " ".join(f"*A Title Here Number {i}* (2020)" for i in range(3000))
    assert len([c for c in extract(text) if c.kind == "title"]) > 1000
    linked = extract('As shown in "Attention Is All You Need Again" by Vaswani et al. (2017), it works. Next.')
    title = [c for c in linked if c.kind == "title"][0]
    assert title.year == 2017 and title.authors == ["Vaswani"]


# ------------------------------------------------- second breaker pass (sentinel, depth, ReDoS)
#
# Faults found by driving `veracity serve` against `veracity mock-upstream` and this file's odd
# upstream: a model's verify_result arguments nested deeply were a 500 (and a stream cut off
# mid-body in buffer mode); 50,000 listed "missing items" came back three times in the report;
# an upstream body nested ~1,000 levels deep was a 500; `veracity verify` printed tracebacks
# for a binary file and deeply nested JSON; and three citation-extraction regexes backtracked
# quadratically over the whole answer, holding the GIL: one 100 kB answer ("A-A-A-...")
# froze every request of the gateway for many minutes (`bench/hostile_bench.py` rows).


def _tool_completion(name: str, arguments: str) -> dict[str, Any]:
    msg = {"role": "assistant", "content": None,
           "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}}]}
    return {"id": "chatcmpl-tool", "object": "chat.completion", "created": 1, "model": "odd",
            "choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


_DEEP = 1100  # deeper than the stdlib json's recursion and orjson's 1,024-level limit
REPLIES.update({
    "sentdeep": json.dumps(_tool_completion("verify_result", "[" * 100_000)).encode(),
    "senthuge": json.dumps(_tool_completion("verify_result", json.dumps(
        {"task_goal": "x" * 100_000, "actual_result": ["nested"], "missing_items": [f"item {i}" for i in range(20_000)],
         "errors_found": [None, {"x": 1}, "a real error"], "is_ready": False}))).encode(),
    "sentcalls5": json.dumps(dict(_completion(None), choices=[{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "2 + 2 = 4", "tool_calls": 5}}])).encode(),
    # "\\u00e9" sends orjson's refusal (depth) to the stdlib fallback, which recursed
    "deepescape": (b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "\\u00e9"}}], "x": '
                   + b"[" * _DEEP + b"]" * _DEEP + b"}"),
    # parsed by orjson, but could not be written back (the stdlib's encoder recursed)
    "deepnest": (json.dumps(_completion("2 + 2 = 4"))[:-1] + ', "x": ' + "[" * 1000 + "]" * 1000 + "}").encode(),
})
STREAMS["deepchunks"] = [
    {"id": "c3", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "3 * 3 = 10"}}]},
    # raw bytes, sent as they are: a chunk nested _DEEP levels (the stdlib cannot write it)
    b'{"id": "c3", "choices": [{"index": 0, "delta": {}}], "x": ' + b"[" * _DEEP + b"]" * _DEEP + b"}",
    {"id": "c3", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
]


def _sentinel_chat(http: httpx.Client, gw: Any, text: str, **extra: Any) -> httpx.Response:
    return _chat(http, gw, text, veracity={"sentinel": {"mode": "offered", "when": "always"}, **extra.pop("veracity", {})},
                 **extra)


def test_deeply_nested_verify_result_arguments_count_as_not_ready(gw: Any, http: httpx.Client) -> None:
    """Fault: ``json.loads`` of the model's ``verify_result`` arguments raised RecursionError
    (not a ValueError), a 500 that lost the answer. Now they are malformed arguments: not
    ready, the model is asked again, and its next answer reaches the client."""
    r = _sentinel_chat(http, gw, "sentdeep check A and B")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["choices"][0]["message"]["content"] == "ok"   # the answer after the sentinel's reply
    assert "tool_calls" not in body["choices"][0]["message"]
    s = body["veracity"]["sentinel"]
    assert s["called"] is True and "verify_result arguments were not valid JSON" in s["errors_found"]


def test_deeply_nested_verify_result_arguments_in_a_buffered_stream(gw: Any, http: httpx.Client) -> None:
    """Same fault in ``streaming.mode: buffer``: the stream broke off mid-body (no error
    event, no ``[DONE]``). The openai SDK now reads a complete stream with the report."""
    import openai

    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0)
    stream = client.chat.completions.create(
        model="odd", messages=[{"role": "user", "content": "sentdeep check A and B"}], stream=True,
        extra_body={"veracity": {"sentinel": {"mode": "offered", "when": "always"}, "streaming": {"mode": "buffer"}}})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "ok"
    reports = [c.model_extra["veracity"] for c in chunks if (c.model_extra or {}).get("veracity")]
    assert reports and reports[-1]["sentinel"]["called"] is True


def test_verify_result_arguments_are_bounded_in_the_report(gw: Any, http: httpx.Client) -> None:
    """Fault: a model listing 20,000 missing items (and a 100 kB goal) had every one copied
    into the tool reply sent back upstream and into the report once per round (megabytes
    per response); ``None`` and objects became the items "None" and "{'x': 1}"."""
    from proxy.pipeline import sentinel

    r = _sentinel_chat(http, gw, "senthuge check A and B")
    assert r.status_code == 200, r.text
    s = r.json()["veracity"]["sentinel"]
    assert len(s["missing_items"]) <= sentinel.MAX_ITEMS and len(s["calls"]) <= sentinel.MAX_ITEMS
    assert s["missing_items"][0] == "item 0" and s["missing_items"][-1].startswith("... and")
    assert s["errors_found"][:1] == ["a real error"]   # None and {"x": 1} are not errors
    assert len(s["calls"][0]["task_goal"]) <= sentinel.MAX_CHARS + 3 and s["calls"][0]["actual_result"] == ""
    assert len(r.content) < 200_000
    # the instruction sent back to the model is bounded too
    sent = [a for a in s["calls"]]
    assert len(sentinel._instruction(sent)) <= sentinel.MAX_REPLY_CHARS + 100


def test_tool_calls_that_are_not_a_list_do_not_break_the_sentinel(gw: Any, http: httpx.Client) -> None:
    """An upstream message with ``"tool_calls": 5`` (TypeError in the sentinel loop, a 500) is
    relayed as sent and the content still verified."""
    r = _sentinel_chat(http, gw, "sentcalls5 check A and B")
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["tool_calls"] == 5


@pytest.mark.parametrize("key", ["deepescape", "deepnest"])
def test_upstream_answer_nested_too_deep_is_502_not_500(gw: Any, http: httpx.Client, key: str) -> None:
    """Fault: the stdlib fallback parser (``deepescape``) or the stdlib fallback writer
    (``deepnest``: orjson parses 1,024 levels but writes 255) raised RecursionError: a 500
    ``internal_error``. Such an answer is unusable: 502 ``upstream_bad_response``."""
    _assert_openai_error(_chat(http, gw, key), 502, "upstream_bad_response")


@pytest.mark.parametrize("mode", ["passthrough", "buffer"])
def test_deeply_nested_stream_chunk_is_skipped(gw: Any, http: httpx.Client, mode: str) -> None:
    """A stream chunk nested 1,100 levels deep made the stream parser raise RecursionError
    (stream cut off without the report); now it counts as a malformed chunk."""
    r = _chat(http, gw, "deepchunks", stream=True, veracity={"streaming": {"mode": mode}})
    _assert_stream_reports_failure(r, "3 * 3 = 10")


def test_redos_shaped_references_do_not_freeze_the_gateway(gw: Any, http: httpx.Client) -> None:
    """Fault: three citation regexes (narrative "Surname (2020)" citations, arXiv ids) had
    unbounded repeats that backtracked quadratically over the whole answer; ``re`` holds the
    GIL, so 100 kB of "A-A-A-..." under a References heading stopped every request of the
    gateway for many minutes (see bench/results/breaker.md). With bounded repeats the
    verification finishes and the gateway answers other requests."""
    for pump in ("A-" * 50_000, "van " * 25_000, "arXiv-" * 16_000):
        r = http.post(gw.base_url + "/veracity/verify",
                      json={"question": "Give me references", "answer": "References:\n1. " + pump})
        assert r.status_code == 200, r.text
        assert r.json()["veracity"]["status"] in ("skipped", "passed", "failed", "error")
    assert http.get(gw.url + "/healthz").status_code == 200


def test_citation_extraction_of_backtracking_bait_in_a_subprocess() -> None:
    """The same inputs straight into ``verifiers.citations._extract`` in a child process, with a
    generous limit (minutes; the fixed patterns take well under a second, the old ones ran
    for tens of minutes on 100 kB)."""
    import subprocess
    import sys

    code = ("from verifiers.citations._extract import extract\n"
            "for pump in ('A-' * 50_000, 'van ' * 25_000, 'arXiv-' * 16_000, 'Smith (' * 14_000):\n"
            "    extract('References:\\n' + pump)\n")
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], cwd=root, check=True, timeout=600)


def test_verify_cli_with_binary_and_deeply_nested_files(tmp_path: Path) -> None:
    """Fault: ``veracity verify`` printed a UnicodeDecodeError traceback for a binary file and a
    RecursionError traceback for JSON nested 100,000 levels deep. Now: exit 2 with one line
    for the binary file; the deep file is verified as plain text."""
    import subprocess
    import sys

    binary = tmp_path / "answer.bin"
    binary.write_bytes(b"x\xff\xfe\x00 2 + 2 = 5")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "\n2 + 2 = 5\n")
    cli = [sys.executable, "-m", "proxy", "verify"]
    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([*cli, str(binary)], cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "not UTF-8" in r.stderr, r.stderr
    r = subprocess.run([*cli, str(deep)], cwd=root, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in r.stderr, r.stderr[-2000:]
    report = json.loads(r.stdout.splitlines()[0])["veracity"]
    # 100,000 characters: longer than the arithmetic verifier reads, which the report says
    # (nothing is silently unverified), so never a silent `skipped`
    assert r.returncode in (0, 1) and report["status"] in ("unverified", "passed", "failed")
    assert any(c["evidence"].get("kind") == "truncated" for c in report["checks"])


def test_parse_args_of_hostile_verify_result_calls() -> None:
    from proxy.pipeline import sentinel

    for raw in ("[" * 50_000, "{" * 50_000, '{"is_ready": true', "null", "5", '"x"', None, 5, [1], {"is_ready": 1}):
        args = sentinel._parse_args({"function": {"name": "verify_result", "arguments": raw}})
        assert args["is_ready"] is False and set(args) == {"task_goal", "actual_result", "missing_items",
                                                           "errors_found", "is_ready"}


@pytest.mark.parametrize("path", ["/chat/completions", "/v1/chat/completions/", "/chat/completions/"])
def test_chat_completions_without_v1_or_with_a_trailing_slash(gw: Any, http: httpx.Client, path: str) -> None:
    """Fault (a common misconfiguration, e.g. BadgerHobbs/OpenAI-API-Gateway#1): a client
    whose ``base_url`` is the bare host posts to ``/chat/completions`` and got a 404. These
    paths are now the chat completions route, verification included."""
    r = http.post(gw.url + path, json={"model": "odd", "messages": [{"role": "user", "content": "list 2+2?"}]})
    assert r.status_code == 200, r.text
    assert r.json()["veracity"]["status"] == "failed"


def test_openai_sdk_with_the_bare_host_as_base_url(gw: Any) -> None:
    import openai

    client = openai.OpenAI(base_url=gw.url, api_key="sk-test", max_retries=0)
    r = client.chat.completions.create(model="odd", messages=[{"role": "user", "content": "list 2+2?"}])
    assert r.model_extra["veracity"]["status"] == "failed"


# ------------------------------------------------------------------------------ verdict forging
# docs/design.md "A verdict rests on what the checked content cannot write". Before the fix, the
# checked code ran in the same interpreter as the harness that judged it, so a
# prelude could rewrite the harness's comparison/reporting, its builtins or stdout, or print
# the harness's own result lines (its nonce sat in /proc/self/cmdline) -- and a wrong answer
# came back `passed`. Each case below did that on the code before the fix; now every one stays
# `failed` or `unknown` (never `pass`), on both sandbox backends and through the chat route.

WRONG_OUTPUT = "def add(a, b):\n    return a - b\n\nprint(add(2, 2))  # Output: 4\n"
WRONG_ASSERT = "def add(a, b):\n    return a - b\n\nassert add(2, 2) == 4\nprint('all tests pass')\n"

FRAME_WALK = '''import sys
_f = sys._getframe()
while _f is not None:
    _g = _f.f_globals
    if "emit" in _g and "compare" in _g and "_forged" not in _g:
        _g["_forged"] = _real = _g["emit"]
        def _emit(**rec):
            if rec.get("status") in ("error", "mismatch"):
                rec["status"] = "ok" if rec.get("kind") == "block" else "pass"
            return _real(**rec)
        _g["emit"] = _emit
        _g["compare"] = lambda *a, **k: "pass"
    _f = _f.f_back
'''
# the same walk from a frame a signal handler is handed, with a fresh `_signal` module (one the
# lockdown did not touch) made through importlib
SIGNAL_FRAME = '''import importlib.util, os
_spec = importlib.util.find_spec("_signal")
_sig = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_sig)
def _handler(signum, _f):
    while _f is not None:
        _g = _f.f_globals
        if "emit" in _g and "compare" in _g and "_forged" not in _g:
            _g["_forged"] = _real = _g["emit"]
            def _emit(**rec):
                if rec.get("status") in ("error", "mismatch"):
                    rec["status"] = "ok" if rec.get("kind") == "block" else "pass"
                return _real(**rec)
            _g["emit"] = _emit
            _g["compare"] = lambda *a, **k: "pass"
        _f = _f.f_back
_sig.signal(_sig.SIGUSR1, _handler)
os.kill(os.getpid(), _sig.SIGUSR1)
'''
BUILTINS = '''import builtins
builtins.eval = lambda *a, **k: print(4)
builtins.exec = lambda *a, **k: None
'''
STDOUT = '''import contextlib, sys
class _W:
    def __init__(self, inner):
        self.inner = inner
    def write(self, s):
        return self.inner.write("4" if s.strip().lstrip("-").isdigit() else s)
    def flush(self):
        pass
class _R:
    def __init__(self, buf):
        self.buf = buf
    def __enter__(self):
        self.old = sys.stdout
        sys.stdout = _W(self.buf)
    def __exit__(self, *a):
        sys.stdout = self.old
contextlib.redirect_stdout = _R
sys.stdout = _W(sys.stdout)
'''
# the harness's result lines, forged: nonce read from /proc/self/cmdline (where the old harness
# had it), records written to the real stdout fd, then the process ends -- at exit (atexit) or
# at once (os._exit) -- before the wrong code runs
_FAKE_RECORDS = '''import json, os, re
_src = open("/proc/self/cmdline", "rb").read().decode("utf-8", "replace")
_n = "\\x1e@veracity-" + re.search(r"@veracity-([0-9a-f]{{16}})@", _src).group(1) + "@"
def _forge():
    for rec in ({{"kind": "stmt", "index": 0, "line": {line}, "status": "pass", "got": "4"}},
                {{"kind": "block", "index": 0, "status": "ok", "stdout": "4\\\\n"}}, {{"kind": "done"}}):
        os.write(1, (_n + json.dumps(rec) + "\\n").encode())
'''
ATEXIT = _FAKE_RECORDS + "import atexit\natexit.register(_forge)\n"
MARKERS_THEN_EXIT = _FAKE_RECORDS + "_forge()\nos._exit(0)\n"
# an early end that hides a failing assert, next to a true stated output that passed
EXIT_HIDES_ASSERT = ("def add(a, b):\n    return a - b\n\nprint(add(2, 2))  # Output: 0\n"
                     "import os\nos._exit(0)\nassert add(2, 2) == 4\n")
SYS_EXIT_IN_TRY = ("def add(a, b):\n    return a - b\n\nprint(add(2, 2))  # Output: 0\n"
                   "try:\n    assert add(2, 2) == 4\nexcept AssertionError:\n    import sys\n    sys.exit(0)\n")


def _forged(prelude: str, wrong: str) -> str:
    line = (prelude + wrong).splitlines().index("print(add(2, 2))  # Output: 4") + 1 if "Output: 4" in wrong else 0
    return "Here you go:\n\n```python\n" + prelude.format(line=line) + wrong + "```\n"


FORGERIES = {
    "frames-output": _forged(FRAME_WALK.replace("{", "{{").replace("}", "}}"), WRONG_OUTPUT),
    "frames-assert": _forged(FRAME_WALK.replace("{", "{{").replace("}", "}}"), WRONG_ASSERT),
    "signal-output": _forged(SIGNAL_FRAME.replace("{", "{{").replace("}", "}}"), WRONG_OUTPUT),
    "signal-assert": _forged(SIGNAL_FRAME.replace("{", "{{").replace("}", "}}"), WRONG_ASSERT),
    "builtins-output": _forged(BUILTINS, WRONG_OUTPUT),
    "builtins-assert": _forged(BUILTINS, WRONG_ASSERT),
    "stdout-output": _forged(STDOUT, WRONG_OUTPUT),
    "atexit-output": _forged(ATEXIT, WRONG_OUTPUT),
    "atexit-assert": _forged(ATEXIT, WRONG_ASSERT),
    "markers-output": _forged(MARKERS_THEN_EXIT, WRONG_OUTPUT),
    "markers-assert": _forged(MARKERS_THEN_EXIT, WRONG_ASSERT),
    "osexit-assert": "```python\n" + EXIT_HIDES_ASSERT + "```\n",
    "sysexit-assert": "```python\n" + SYS_EXIT_IN_TRY + "```\n",
}
for _k, _v in FORGERIES.items():
    REPLIES[f"forge-{_k}"] = json.dumps(_completion(_v)).encode()
SLEEPER_TOKEN = "veracity-abandoned-0c0ffee"
REPLIES["sleeper"] = json.dumps(_completion(
    f"```python\n# {SLEEPER_TOKEN}\nimport time\ntime.sleep(10**6)\nprint(1)  # Output: 1\n```\n")).encode()
REPLIES["honest"] = json.dumps(_completion(
    "```python\ndef add(a, b):\n    return a + b\n\nprint(add(2, 2))  # Output: 4\n```\n")).encode()


def _backend_or_skip(name: str) -> Any:
    import os

    from verifiers import sandbox

    box = sandbox.get(name, sandbox.Limits(timeout_s=60, cpu_s=10))
    reason = box.unavailable_reason()
    if reason is not None:
        required = {b.strip() for b in os.environ.get("VERACITY_REQUIRE_SANDBOX", "").split(",") if b.strip()}
        if os.environ.get("VERACITY_CI") == "1" or name in required:
            pytest.fail(f"{name} backend required but unavailable: {reason}")
        pytest.skip(f"{name} backend unavailable: {reason}")
    return box


@pytest.fixture(scope="module", params=[pytest.param("bwrap", marks=pytest.mark.bwrap),
                                        pytest.param("docker", marks=pytest.mark.docker)])
def forge_box(request: pytest.FixtureRequest) -> Iterator[Any]:
    box = _backend_or_skip(request.param)
    yield box
    box.close()


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_checked_code_cannot_write_its_own_verdict(forge_box: Any, case: str) -> None:
    from verifiers import code

    checks = code.check(FORGERIES[case], sandbox=forge_box)
    assert checks and all(c.outcome in ("fail", "unknown") for c in checks), \
        [(c.claim, c.outcome, c.note) for c in checks]


def test_honest_code_still_passes(forge_box: Any) -> None:
    """The control: the same answer without a forging prelude and with a right `add`."""
    from verifiers import code

    checks = code.check("```python\n" + WRONG_OUTPUT.replace("a - b", "a + b") + "```\n", sandbox=forge_box)
    assert [c.outcome for c in checks] == ["pass", "pass"], [(c.claim, c.note) for c in checks]
    checks = code.check("```python\n" + WRONG_ASSERT.replace("a - b", "a + b") + "```\n", sandbox=forge_box)
    assert [c.outcome for c in checks] == ["pass"], [(c.claim, c.note) for c in checks]


def test_the_checked_process_is_not_dumpable(forge_box: Any) -> None:
    """Layer 3 of docs/security.md ("No way to the nonce or the harness"): the harness makes its
    process non-dumpable before the answer's code runs, so /proc/<pid>/mem belongs to root (a
    process of uid 65534 that stayed dumpable owns it) and no sandboxed program can read the
    harness's memory."""
    import os
    import time

    from verifiers import code

    token = "veracity-dumpable-probe-5e1f"
    out: list = []
    t = threading.Thread(target=lambda: out.append(code.check(
        f"```python\n# {token}\nimport time\ntime.sleep(6)\n```\n", sandbox=forge_box)))
    t.start()
    owners: dict[int, int] = {}  # latest owner seen per process; the harness seals itself
    deadline = time.monotonic() + 30  # within its first moments, the code then sleeps 6 s
    while not (owners and set(owners.values()) == {0}) and t.is_alive() and time.monotonic() < deadline:
        for pid in procs_with(token):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv0 = f.read().split(b"\0")[0]
                # the interpreter, not bwrap or the shell around it: /usr/bin/python3 on the
                # host, a runtime's <venv>/bin/python, or python3.X in a rootfs
                if os.path.basename(argv0).startswith(b"python"):
                    owners[pid] = os.stat(f"/proc/{pid}/mem").st_uid
            except OSError:
                continue
        time.sleep(0.1)
    t.join(60)
    assert owners and set(owners.values()) == {0}, owners
    # the run ended normally and was trusted; with nothing about its behaviour compared a clean
    # run is `unknown`, not `pass` (docs/design.md "Asymmetric trust": a run is not a behaviour check)
    assert [(c.outcome, c.note) for c in out[0]] == [("unknown", "ran without errors; nothing about its behaviour "
                                                                 "was compared")]


def test_forged_harness_marks_are_seen_as_forged() -> None:
    """A mark-shaped line with another nonce, or output with no announcement, is an anomaly."""
    from verifiers.code._harness import MARK_PREFIX, observe

    real = "ab" * 16
    good = f"{MARK_PREFIX}{real}\x1f{{'k': 'hello'}}\nhi\n{MARK_PREFIX}{real}\x1f{{'k': 'done', 'tamper': 0}}\n"
    assert observe(good).untrusted() is None and observe(good).segments[1] == "hi\n"
    fake = good.replace("hi\n", f"{MARK_PREFIX}{'cd' * 16}\x1f{{'k': 'E', 'b': 0, 'st': 'ok'}}\n")
    assert "forged" in (observe(fake).untrusted() or "")
    assert observe("hi\n" + good).untrusted() is not None
    assert observe(good + "late\n").untrusted() is not None


@pytest.fixture(scope="module", params=[pytest.param("bwrap", marks=pytest.mark.bwrap),
                                        pytest.param("docker", marks=pytest.mark.docker)])
def code_gw(request: pytest.FixtureRequest, upstream: ThreadingHTTPServer, gateway_factory: Any,
            tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The gateway with the odd upstream and a real sandbox (each backend in turn). The wall
    limit of a run is 120 s: far longer than anything here may take, so a run that is still
    there when it should be gone is seen as such, not as a slow machine."""
    _backend_or_skip(request.param).close()
    pol = tmp_path_factory.mktemp(f"policies-{request.param}")
    (pol / "default.yaml").write_text(
        "name: default\n"
        "verifiers:\n"
        f"  code: {{enabled: true, timeout_ms: 200000, sandbox: {{backend: {request.param}, "
        "limits: {timeout_s: 120, cpu_s: 120}}}\n"
        "risk: {threshold: 0.0}\n"
        "on_failure: annotate\n"
        "budgets: {request: {deadline_ms: 250000}}\n")
    gw = gateway_factory({
        "upstreams": [{"name": "odd", "models": ["*"], "base_url": f"http://127.0.0.1:{upstream.server_address[1]}/v1",
                       "api_key": UPSTREAM_KEY}],
        "policies": {"dir": str(pol)},
        "limits": {"read_timeout_s": 300},
    })
    gw.backend = request.param
    return gw


@pytest.mark.parametrize("case", sorted(FORGERIES))
def test_forged_verdicts_through_the_chat_route(code_gw: Any, http: httpx.Client, case: str) -> None:
    r = _chat(http, code_gw, f"forge-{case} add two numbers")
    assert r.status_code == 200, r.text
    report = r.json()["veracity"]
    assert r.headers["x-veracity-status"] != "passed" and report["status"] != "passed", report
    assert not [c for c in report["checks"] if c["verifier"] == "code" and c["outcome"] == "pass"], report["checks"]


def test_abandoned_requests_release_their_sandboxes(code_gw: Any, http: httpx.Client) -> None:
    """When the client leaves, the run is killed (docs/design.md "Untrusted code runs only in a
    sandbox"): clients that leave while their code sleeps (`time.sleep(10**6)`, more of
    them than there are sandbox slots) take their sandbox runs with them: no sandbox process
    remains (process table, container list) and the next request gets a slot at once instead
    of after the 120 s wall limit."""
    import time

    from verifiers import sandbox

    def abandon() -> None:
        try:
            with httpx.Client(timeout=httpx.Timeout(60, read=4), trust_env=False) as c:
                _chat(c, code_gw, "sleeper please")
        except httpx.TimeoutException:
            pass  # the client gives up and closes its connection

    n = sandbox.max_concurrency() + 2
    threads = [threading.Thread(target=abandon) for _ in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(procs_with(SLEEPER_TOKEN)) < sandbox.max_concurrency() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert procs_with(SLEEPER_TOKEN), "the sleepers never reached the sandbox"
    for t in threads:
        t.join(60)
    deadline = time.monotonic() + 30  # << the 120 s wall limit
    while (left := procs_with(SLEEPER_TOKEN)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == [], "sandbox processes of abandoned requests are still running"
    if code_gw.backend == "docker":
        api = sandbox.get("docker")._api()

        def sleepers() -> list:
            found = []
            for c in api.containers(all=True, filters={"label": "veracity.sandbox"}):
                try:
                    cfg = api.inspect_container(c["Id"])
                except Exception:  # noqa: BLE001 - removed meanwhile
                    continue
                if SLEEPER_TOKEN in json.dumps(cfg["Config"]["Cmd"]):
                    found.append((c["Id"][:12], cfg["State"]["Status"], cfg["Created"], cfg["State"].get("StartedAt")))
            return found
        while (containers := sleepers()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert containers == [], (containers, time.time())
    with httpx.Client(timeout=100, trust_env=False) as c:  # < 120 s: a held slot would time it out
        r = _chat(c, code_gw, "honest add")
    assert r.status_code == 200 and r.headers["x-veracity-status"] == "passed", r.text
    assert "499" in code_gw.log() and "client_disconnected" in code_gw.log()
