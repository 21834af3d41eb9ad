"""The lean lane of ``POST /v1/chat/completions`` (:class:`proxy._asgi.fastpath.LeanLane`).

The same request, with the same scripted upstream answer, is sent through the app with the
lane on and with it off (the normal path, :func:`proxy.routes.chat._chat` + the pipeline). What the
client sees (status, headers in order, body bytes), the metrics and the request log line must
be the same; only the measured durations differ. The lane must not be taken when the policy
verifies something, for streams, or when the request names a policy.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import openai
import orjson
import pytest
from prometheus_client import REGISTRY

from proxy import app as app_mod
from proxy.observability import metrics
from proxy.pipeline import sequence
from proxy.routes import _respond
from proxy.config import GatewayConfig, UpstreamConfig
from proxy.upstreams.mock import MockUpstream
from proxy.upstreams import Upstreams
from tests.fixtures.polling import wait_for
from tests.fixtures.policies import checks_off

SCRIPT: dict[str, Any] = {
    "models": ["lean-model"],
    "rules": [
        {"name": "extra", "match": {"last_user": "^extra"},
         "reply": {"content": "with extras: caf\u00e9 \u2713", "extra": {"vendor_meta": {"region": "eu"}},
                   "message_extra": {"vendor_note": "n"}, "choice_extra": {"vendor_score": 0.5},
                   "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}}},
        {"name": "err429", "match": {"last_user": "^err429"},
         "reply": {"status": 429, "error": "Rate limit reached", "headers": {"Retry-After": "7"}}},
        {"name": "slow", "match": {"last_user": "^slow"}, "reply": {"content": "late", "delay_ms": 30000}},
        {"name": "math", "match": {"last_user": "^math"},
         "reply": {"content": "17 * 23 = 391, so the answer is 391."}},
    ],
}

CHECKS_OFF = checks_off()
VERIFYING = """name: default
verifiers:
  arithmetic: {enabled: true}
  code: {enabled: false}
  citations: {enabled: false}
sentinel: {mode: "off"}
"""


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockUpstream(SCRIPT) as m:
        yield m


class _LogRecorder:
    """Stands in for the request log line's logger (proxy.routes._respond.log): keeps the keyword arguments of every ``info`` line."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))

    def error(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))

    warning = error


def _app(mock: Any, tmp_path: Path, policy_yaml: str) -> Any:
    pol = tmp_path / "policies"
    pol.mkdir(exist_ok=True)
    (pol / "default.yaml").write_text(policy_yaml)
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="lean-up", base_url=mock.base_url, models=["lean-*"])],
                        policies={"dir": str(pol)}, verification={})
    return app_mod.create_app(cfg)


async def _call(fast: Any, body: dict[str, Any], headers: list[tuple[bytes, bytes]],
                path: str = "/v1/chat/completions", query: bytes = b"") -> tuple[int, list, bytes]:
    raw = orjson.dumps(body)
    scope = {"type": "http", "method": "POST", "path": path, "raw_path": path.encode(),
             "query_string": query, "headers": [(b"content-type", b"application/json"),
                                               (b"content-length", str(len(raw)).encode()), *headers]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(msg: dict[str, Any]) -> None:
        if msg["type"] == "http.response.start":
            sent.append(msg)
        else:
            sent.append(msg)

    await fast(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    chunks = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], list(start["headers"]), chunks


def _samples(model: str, status: int) -> dict[str, float]:
    route = {"route": "/v1/chat/completions"}
    # the labels both lanes must give the request: its model (bounded as metrics.model_label
    # does for this status) and the caller's team (pass-through auth: "default")
    who = {"model": metrics.model_label(model, status), "team": "default"}
    g = REGISTRY.get_sample_value
    return {
        "requests": g("veracity_requests_total", {**route, **who, "status": str(status)}) or 0.0,
        "duration_count": g("veracity_request_duration_seconds_count", route) or 0.0,
        "overhead_count": g("veracity_overhead_seconds_count", {**route, **who}) or 0.0,
        "upstream_count": g("veracity_upstream_duration_seconds_count", {"upstream": "lean-up"}) or 0.0,
        "in_flight": g("veracity_in_flight_requests") or 0.0,
        "upstream_errors_429": g("veracity_upstream_errors_total", {"reason": "http_429", **who}) or 0.0,
    }


async def _once(fast: Any, body: dict[str, Any], headers: list, status_expected: int,
                path: str = "/v1/chat/completions", model: str | None = None) -> dict[str, Any]:
    model = model or body["model"]
    before = _samples(model, status_expected)
    query = b"api-version=2024-10-21" if path.startswith("/openai/") else b""  # what AzureOpenAI sends
    status, hdrs, payload = await _call(fast, body, headers, path, query)
    after = _samples(model, status_expected)
    return {"status": status, "headers": hdrs, "body": payload,
            "metrics": {k: after[k] - before[k] for k in before}}


_TIMED_LOG_FIELDS = ("duration_ms", "upstream_ms", "overhead_ms")


def _run(fast: Any, body: dict[str, Any], headers: list, status: int, monkeypatch: pytest.MonkeyPatch,
         lean: bool, path: str = "/v1/chat/completions", model: str | None = None) -> tuple[dict[str, Any], list, int]:
    """One request with the lane on or off: (result, log lines, pipeline calls)."""
    rec = _LogRecorder()
    monkeypatch.setattr(_respond, "log", rec)
    monkeypatch.setattr(_respond, "info_enabled", lambda: True)
    calls: list[int] = []
    real = sequence.chat_completion

    async def spy(ctx: Any, b: dict[str, Any]) -> Any:
        calls.append(1)
        return await real(ctx, b)

    monkeypatch.setattr(sequence, "chat_completion", spy)
    fast.lean.enabled = lean

    async def go() -> dict[str, Any]:
        state = fast.app.state.gw
        state.upstreams = await Upstreams.start(state.cfg)
        try:
            return await _once(fast, body, headers, status, path, model)
        finally:
            await state.upstreams.close()

    out = asyncio.run(go())
    return out, rec.lines, len(calls)


def _without_overhead(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """Headers with the values that differ per answer (time, the mock's own request id) masked."""
    return [(k, b"<varies>" if k in (b"x-veracity-overhead-ms", b"x-upstream-request-id") else v) for k, v in headers]


@pytest.mark.parametrize("prompt,status", [("extra fields please", 200), ("err429 now", 429)])
def test_lean_lane_answers_exactly_as_the_normal_path(mock: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      prompt: str, status: int) -> None:
    fast = _app(mock, tmp_path, CHECKS_OFF)
    body = {"model": "lean-model", "messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "seed": 7, "vendor_field": {"x": [1, 2]}}
    headers = [(b"authorization", b"Bearer sk-client"), (b"x-request-id", b"req-lean-test-1")]
    lean, lean_log, lean_calls = _run(fast, body, headers, status, monkeypatch, lean=True)
    normal, normal_log, normal_calls = _run(fast, body, headers, status, monkeypatch, lean=False)

    assert (lean_calls, normal_calls) == (0, 1)  # the lane really was taken, and then really not
    assert lean["status"] == normal["status"] == status
    # byte for byte, once the mock's per-answer id and timestamp are the same
    a, b = orjson.loads(lean["body"]), orjson.loads(normal["body"])
    same = lean["body"]
    for k in ("id", "created"):
        if k in a:
            same = same.replace(b'"%s":%s' % (k.encode(), orjson.dumps(a[k])), b'"%s":%s' % (k.encode(), orjson.dumps(b[k])), 1)
    assert same == normal["body"]
    assert _without_overhead(lean["headers"]) == _without_overhead(normal["headers"])
    assert float(dict(lean["headers"])[b"x-veracity-overhead-ms"]) >= 0
    assert lean["metrics"] == normal["metrics"]
    assert lean["metrics"]["requests"] == lean["metrics"]["overhead_count"] == 1 and lean["metrics"]["in_flight"] == 0
    strip = [(e, {k: v for k, v in kw.items() if k not in _TIMED_LOG_FIELDS}) for e, kw in lean_log]
    assert strip == [(e, {k: v for k, v in kw.items() if k not in _TIMED_LOG_FIELDS}) for e, kw in normal_log]
    assert [list(kw) for _, kw in lean_log] == [list(kw) for _, kw in normal_log]  # same fields, same order
    assert len(lean_log) == 1 and lean_log[0][1]["request_id"] == "req-lean-test-1"

    out = orjson.loads(lean["body"])
    if status == 200:
        assert out["veracity"] == {"status": "skipped", "risk": None, "checks": [], "rounds": [],
                                   "cost": {"tokens": 0, "upstream_calls": 0, "verifier_calls": 0, "searches": 0, "ms": 0.0},
                                   "reason": "no verifier enabled", "policy": "default",
                                   "states": ["INITIAL_GENERATION"]}
        assert out["vendor_meta"] == {"region": "eu"}  # upstream fields kept
        assert dict(lean["headers"])[b"x-veracity-status"] == b"skipped"
    else:
        assert dict(lean["headers"])[b"retry-after"] == b"7"
        assert lean["metrics"]["upstream_errors_429"] == 1


@pytest.mark.parametrize("prompt,status", [("extra fields please", 200), ("err429 now", 429)])
def test_lean_lane_azure_deployment_path_answers_as_the_normal_path(mock: Any, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   prompt: str, status: int) -> None:
    """``openai.AzureOpenAI``'s request: deployment in the path (it wins over the body's
    ``model``), ``api-version`` query, key in ``api-key``; taken by the lane, and the same
    answer, metrics and log line as on the normal path; the upstream gets the deployment as
    ``model`` and (pass-through auth) the key as ``Authorization: Bearer``."""
    fast = _app(mock, tmp_path, CHECKS_OFF)
    body = {"model": "some-other-name", "messages": [{"role": "user", "content": prompt}], "seed": 7}
    headers = [(b"api-key", b"azure-client-key-0123456789abcdef"), (b"x-request-id", b"req-lean-azure-1")]
    path = "/openai/deployments/lean-model/chat/completions"
    mock.reset()
    lean, lean_log, lean_calls = _run(fast, body, headers, status, monkeypatch, lean=True, path=path,
                                      model="lean-model")
    normal, normal_log, normal_calls = _run(fast, body, headers, status, monkeypatch, lean=False, path=path,
                                            model="lean-model")

    assert (lean_calls, normal_calls) == (0, 1)
    assert lean["status"] == normal["status"] == status
    a, b = orjson.loads(lean["body"]), orjson.loads(normal["body"])
    for k in ("id", "created"):
        a.pop(k, None), b.pop(k, None)
    assert a == b
    assert _without_overhead(lean["headers"]) == _without_overhead(normal["headers"])
    assert lean["metrics"] == normal["metrics"] and lean["metrics"]["requests"] == 1
    strip = [(e, {k: v for k, v in kw.items() if k not in _TIMED_LOG_FIELDS}) for e, kw in lean_log]
    assert strip == [(e, {k: v for k, v in kw.items() if k not in _TIMED_LOG_FIELDS}) for e, kw in normal_log]
    assert lean_log[0][1]["route"] == "/v1/chat/completions" and lean_log[0][1]["model"] == "lean-model"
    sent = [r for r in mock.requests() if r["path"] == "/v1/chat/completions"]
    assert len(sent) == 2
    for r in sent:
        assert r["body"]["model"] == "lean-model" and r["query"] == ""
        assert r["headers"]["authorization"] == "Bearer azure-client-key-0123456789abcdef"
        assert "api-key" not in r["headers"]
    if status == 200:
        assert a["veracity"]["status"] == "skipped"


def test_lean_lane_not_taken_when_the_policy_verifies(mock: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _app(mock, tmp_path, VERIFYING)
    body = {"model": "lean-model", "messages": [{"role": "user", "content": "math: what is 17 * 23?"}]}
    res, log_lines, calls = _run(fast, body, [(b"authorization", b"Bearer sk-client")], 200, monkeypatch, lean=True)
    assert calls == 1
    assert res["status"] == 200
    assert orjson.loads(res["body"])["veracity"].get("reason") != "no verifier enabled"
    assert fast.lean._policies and not any(v[1] for v in fast.lean._policies.values())  # verdict cached: not lean


@pytest.mark.parametrize("extra_body,extra_headers", [
    ({"veracity": {"policy": "default"}}, []),            # the request carries policy overrides
    ({}, [(b"x-veracity-policy", b"default")]),           # the request names a policy
    ({"stream": False}, [(b"x-request-id", b"a"), (b"x-request-id", b"b")]),  # repeated header
])
def test_lean_lane_leaves_other_requests_to_the_normal_path(mock: Any, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             extra_body: dict, extra_headers: list) -> None:
    fast = _app(mock, tmp_path, CHECKS_OFF)
    body = {"model": "lean-model", "messages": [{"role": "user", "content": "extra please"}], **extra_body}
    res, _, calls = _run(fast, body, [(b"authorization", b"Bearer sk-client"), *extra_headers], 200,
                         monkeypatch, lean=True)
    assert calls == 1
    assert res["status"] == 200
    assert orjson.loads(res["body"])["veracity"]["status"] == "skipped"


def test_lean_lane_leaves_tenant_headers_to_the_normal_path(mock: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A client's OpenAI-Organization/-Project (pass-through auth: this upstream has no key)
    are forwarded by the normal path; the lane steps aside rather than drop them."""
    fast = _app(mock, tmp_path, CHECKS_OFF)
    mock.reset()
    headers = [(b"authorization", b"Bearer sk-client"), (b"openai-organization", b"org-1"),
               (b"openai-project", b"proj-1")]
    out, _, calls = _run(fast, {"model": "lean-model", "messages": [{"role": "user", "content": "hi"}]},
                         headers, 200, monkeypatch, lean=True)
    assert out["status"] == 200 and calls == 1
    (got,) = [r["headers"] for r in mock.requests() if r["path"] == "/v1/chat/completions"]
    assert (got.get("openai-organization"), got.get("openai-project")) == ("org-1", "proj-1")


@pytest.mark.parametrize("raw, status", [
    (b'{"model":', 400),
    (b'\xef\xbb\xbf{"model":"lean-model","messages":[{"role":"user","content":"hi"}]}', 200),  # RFC 8259 8.1 BOM
], ids=["bad-json", "utf8-bom"])
def test_lean_lane_body_parse_as_the_normal_path(mock: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 raw: bytes, status: int) -> None:
    fast = _app(mock, tmp_path, CHECKS_OFF)
    fast.lean.enabled = True
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
             "query_string": b"", "headers": [(b"content-type", b"application/json"),
                                               (b"content-length", str(len(raw)).encode()),
                                               (b"authorization", b"Bearer sk-client")]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    async def go() -> None:
        state = fast.app.state.gw
        state.upstreams = await Upstreams.start(state.cfg)
        try:
            await fast(scope, receive, send)
        finally:
            await state.upstreams.close()

    asyncio.run(go())
    assert sent[0]["status"] == status
    out = orjson.loads(sent[1]["body"])
    if status == 400:
        assert out["error"]["code"] == "invalid_json"
    else:
        assert out["object"] == "chat.completion" and out["veracity"]["status"] == "skipped"


@pytest.mark.slow
async def test_lean_lane_client_leaving_closes_the_upstream(gateway_factory: Any, mock: Any, tmp_path: Path) -> None:
    """A checks-off, non-stream request without a policy header (the lean lane) whose client
    gives up while the upstream is still thinking: the upstream connection is closed and the
    request is logged as a 499 with ``client_disconnected`` (main's disconnect watch)."""
    pol = tmp_path / "policies"
    pol.mkdir()
    (pol / "default.yaml").write_text(CHECKS_OFF)
    gw = gateway_factory({"upstreams": [{"name": "lean-up", "models": ["lean-*"], "base_url": mock.base_url}],
                          "policies": {"dir": str(pol)}})
    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=60)

    def slow_requests() -> list[dict[str, Any]]:
        return [r for r in mock.requests() if r.get("rule") == "slow"]

    task = asyncio.ensure_future(client.chat.completions.create(
        model="lean-model", messages=[{"role": "user", "content": "slow please"}]))
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(slow_requests):
        assert not task.done(), f"the call ended before reaching the upstream: {task.result()!r}"
        assert time.monotonic() < deadline, "the upstream never received the request"
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    events = await asyncio.to_thread(wait_for, lambda: [
        e for r in slow_requests() for e in r["events"] if e["event"] == "client_disconnected"], "upstream closed")
    assert events[0]["phase"] == "before_headers"
    lines = await asyncio.to_thread(wait_for, lambda: [
        r for r in gw.log_records() if r.get("event") == "request" and r.get("client_disconnected")], "log line")
    assert lines[-1]["status"] == 499 and lines[-1]["policy"] == "default"
    await client.close()


async def _get(fast: Any, path: str, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": headers}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    await fast(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_lean_lane_report_is_fetched_as_the_normal_paths(mock: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The lane keeps its records apart (a ring, proxy.stores.reports.FixedRing); the report URL
    it sends must answer as the normal path's does: the same record for the key that asked,
    404 for another key, and the same after a later request reuses the id."""
    fast = _app(mock, tmp_path, CHECKS_OFF)
    body = {"model": "lean-model", "messages": [{"role": "user", "content": "extra fields please"}]}
    mine, other = (b"authorization", b"Bearer sk-client"), (b"authorization", b"Bearer sk-other")
    fetched: dict[bool, tuple[int, bytes]] = {}
    for lean in (True, False):
        rid = b"req-lean-report-%d" % lean
        out, _, _ = _run(fast, body, [mine, (b"x-request-id", rid)], 200, monkeypatch, lean=lean)
        url = dict(out["headers"])[b"x-veracity-report-url"].decode()
        assert url == "/v1/veracity/reports/" + rid.decode()

        async def read(who: tuple[bytes, bytes]) -> tuple[int, bytes]:
            return await _get(fast, url, [who])

        status, record = asyncio.run(read(mine))
        assert status == 200
        doc = orjson.loads(record)
        assert doc["id"] == rid.decode() and doc["model"] == "lean-model" and abs(doc["created"] - time.time()) < 60
        fetched[lean] = (status, {k: v for k, v in doc.items() if k not in ("id", "created")})
        assert asyncio.run(read(other))[0] == 404
    assert fetched[True] == fetched[False]
    assert fetched[True][1]["veracity"]["status"] == "skipped"
