"""The three ways into ``POST /v1/chat/completions`` answer alike for the same upstream outcome.

A chat completion reaches the gateway's handler by one of three entry points: the lean lane
(:class:`proxy._asgi.fastpath.LeanLane`, a checks-off policy), the normal path under the fast path
(:class:`proxy._asgi.fastpath.FastPath` -> :func:`proxy.routes.chat.chat_asgi`), and the FastAPI
route table's endpoint (:func:`proxy.routes.chat.chat_completions`, a Starlette ``Response``).
All three answer through :mod:`proxy.routes._respond`; for one scripted upstream outcome (a
normal answer, a 429 with ``Retry-After``, a 500, a connection dropped before the status line,
and the gateway's own unexpected failure) the client must get the same status, the same
headers in the same order, the same body and the same request log line from each.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy import app as app_mod
from proxy.config import GatewayConfig, UpstreamConfig
from proxy.pipeline import sequence
from proxy.routes import _respond
from proxy.upstreams import Upstreams
from proxy.upstreams.openai import OpenAIUpstream
from proxy.upstreams.mock import MockUpstream
from tests.fixtures.policies import checks_off

RATE_HEADERS = {"x-ratelimit-remaining-requests": "99", "x-ratelimit-reset-requests": "1s",
                "openai-processing-ms": "12", "x-request-id": "upstream-id-1"}
SCRIPT: dict[str, Any] = {
    "models": ["lanes-model"],
    "rules": [
        {"name": "ok", "match": {"last_user": "^ok"},
         "reply": {"content": "fine: caf\u00e9", "id": "chatcmpl-lanes", "headers": RATE_HEADERS}},
        {"name": "err429", "match": {"last_user": "^err429"},
         "reply": {"status": 429, "error": "Rate limit reached for requests",
                   "headers": {"Retry-After": "7", "x-ratelimit-remaining-requests": "0"}}},
        {"name": "err500", "match": {"last_user": "^err500"},
         "reply": {"status": 500, "error": "The server had an error while processing your request."}},
        {"name": "drop", "match": {"last_user": "^drop"}, "reply": {"fault": "drop_before_headers"}},
    ],
}
CHECKS_OFF = checks_off()
LANES = ("lean", "fastpath", "endpoint")
#: header values that differ per answer however the gateway behaves (time spent)
_VARYING = (b"x-veracity-overhead-ms",)
_TIMED_LOG_FIELDS = ("duration_ms", "upstream_ms", "overhead_ms")


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockUpstream(SCRIPT) as m:
        yield m


class _Log:
    """Stands in for :data:`proxy.routes._respond.log` (the request line, the error lines)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))

    def error(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))

    warning = error


def _app(mock: Any, tmp_path: Path) -> Any:
    pol = tmp_path / "policies"
    pol.mkdir(exist_ok=True)
    (pol / "default.yaml").write_text(CHECKS_OFF)
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="lanes-up", base_url=mock.base_url, models=["lanes-*"])],
                        policies={"dir": str(pol)}, verification={})
    return app_mod.create_app(cfg)


def _serve(fast: Any, lane: str, prompt: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """One request through ``lane``: status, headers (in order), body, log lines, pipeline calls."""
    log = _Log()
    monkeypatch.setattr(_respond, "log", log)
    monkeypatch.setattr(_respond, "info_enabled", lambda: True)
    calls: list[int] = []
    real = sequence.chat_completion

    async def spy(ctx: Any, b: dict[str, Any]) -> Any:
        calls.append(1)
        return await real(ctx, b)

    monkeypatch.setattr(sequence, "chat_completion", spy)
    raw = orjson.dumps({"model": "lanes-model", "messages": [{"role": "user", "content": prompt}], "seed": 3})
    scope = {"type": "http", "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions", "query_string": b"",
             "server": ("127.0.0.1", 8000), "client": ("127.0.0.1", 50000),
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode()),
                         (b"authorization", b"Bearer sk-client"), (b"x-request-id", b"req-lanes-1")]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": raw, "more_body": False}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    async def go() -> None:
        state = fast.app.state.gw
        state.upstreams = await Upstreams.start(state.cfg)
        try:
            if lane == "endpoint":  # the route table's entry: FastAPI routing, a Starlette Response
                await fast.app(scope, receive, send)
            else:
                fast.lean.enabled = lane == "lean"
                await fast(scope, receive, send)
        finally:
            await state.upstreams.close()

    asyncio.run(go())
    start = next(m for m in sent if m["type"] == "http.response.start")
    return {"status": start["status"], "headers": [tuple(h) for h in start["headers"]],
            "body": b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"),
            "log": log.lines, "pipeline_calls": len(calls)}


def _same_created(body: bytes, created: Any) -> bytes:
    """``body`` with its ``created`` timestamp (the mock's clock, seconds) set to ``created``."""
    out = orjson.loads(body)
    if isinstance(out, dict) and "created" in out:
        return body.replace(b'"created":%s' % orjson.dumps(out["created"]), b'"created":%s' % orjson.dumps(created), 1)
    return body


@pytest.mark.parametrize("prompt,status", [("ok please", 200), ("err429 now", 429), ("err500 now", 500),
                                           ("drop now", 502), ("internal", 500)])
def test_the_three_chat_entry_points_answer_alike(mock: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  prompt: str, status: int) -> None:
    if prompt == "internal":  # the gateway's own failure while the upstream call runs
        async def broken(self: Any, *a: Any, **kw: Any) -> Any:
            raise RuntimeError("scripted failure")

        monkeypatch.setattr(OpenAIUpstream, "complete", broken)
    fast = _app(mock, tmp_path)
    out = {lane: _serve(fast, lane, prompt, monkeypatch) for lane in LANES}

    # the lean lane really answered, and the two others really were the normal path
    assert [out[lane]["pipeline_calls"] for lane in LANES] == [0, 1, 1]
    ref = out["lean"]
    assert ref["status"] == status
    created = orjson.loads(ref["body"]).get("created") if status == 200 else None
    for lane in LANES:
        got = out[lane]
        assert got["status"] == status, lane
        assert [(k, b"~" if k in _VARYING else v) for k, v in got["headers"]] == \
            [(k, b"~" if k in _VARYING else v) for k, v in ref["headers"]], lane
        assert _same_created(got["body"], created) == _same_created(ref["body"], created), lane
        assert [(e, {k: v for k, v in kw.items() if k not in _TIMED_LOG_FIELDS}) for e, kw in got["log"]] == \
            [(e, {k: v for k, v in kw.items() if k not in _TIMED_LOG_FIELDS}) for e, kw in ref["log"]], lane
        assert [list(kw) for _, kw in got["log"]] == [list(kw) for _, kw in ref["log"]], lane  # same field order

    headers = dict(ref["headers"])
    assert headers[b"x-request-id"] == b"req-lanes-1" and float(headers[b"x-veracity-overhead-ms"]) >= 0
    assert headers[b"content-length"] == str(len(ref["body"])).encode()
    assert headers[b"content-type"] == b"application/json"
    request_line = ref["log"][-1][1]
    assert ref["log"][-1][0] == "request" and request_line["status"] == status
    assert request_line["route"] == "/v1/chat/completions" and request_line["policy"] == "default"
    body = orjson.loads(ref["body"])
    if status == 200:
        assert body["choices"][0]["message"]["content"] == "fine: caf\u00e9"
        assert body["veracity"]["status"] == "skipped" and headers[b"x-veracity-status"] == b"skipped"
        # relayed upstream headers first, in the upstream's order; its own request id renamed
        assert [k for k, _ in ref["headers"]][:4] == [b"x-ratelimit-remaining-requests", b"x-ratelimit-reset-requests",
                                                    b"openai-processing-ms", b"x-upstream-request-id"]
        assert headers[b"x-upstream-request-id"] == b"upstream-id-1"
        assert b"x-veracity-summary" in headers and b"x-veracity-report-url" in headers
    else:
        assert set(body) == {"error"} and b"x-veracity-status" not in headers
        assert "error_code" in request_line
    if status == 429:
        assert headers[b"retry-after"] == b"7" and headers[b"x-ratelimit-remaining-requests"] == b"0"
        assert body["error"]["message"] == "Rate limit reached for requests"
    if prompt == "err500 now":
        assert body["error"]["message"] == "The server had an error while processing your request."
    if prompt == "internal":
        assert body["error"]["code"] == "internal_error" and "req-lanes-1" in body["error"]["message"]
        assert "scripted failure" not in ref["body"].decode()  # never the exception's text to the client
        assert request_line["exception"] == "RuntimeError"
        assert ref["log"][0][0] == "unhandled error"
