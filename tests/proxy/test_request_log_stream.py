"""The request log line's ``stream`` field says whether the answer was a stream on every route
the app serves (chat completions log themselves; the others through
:class:`proxy.routes._respond.RequestRecord`): a Responses stream and a pass-through stream
(legacy ``/v1/completions``) say ``stream: true``, their non-stream requests ``false``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from proxy import app as app_mod
from proxy.config import GatewayConfig, UpstreamConfig
from proxy.routes import _respond
from proxy.upstreams import Upstreams
from proxy.upstreams.mock import MockUpstream

SCRIPT = {"models": ["log-model"], "rules": [{"reply": {"content": "Hello there."}}]}
POLICY = """name: default
verifiers:
  arithmetic: {enabled: false}
  code: {enabled: false}
  citations: {enabled: false}
sentinel: {mode: "off"}
correction: {max_rounds: 0}
"""


class _Lines:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    def info(self, event: str, **kw: Any) -> None:
        if event == "request":
            self.lines.append(kw)

    def warning(self, *a: Any, **kw: Any) -> None:
        pass

    error = warning


@pytest.mark.parametrize("path,body,stream", [
    ("/v1/responses", {"model": "log-model", "input": "hi", "stream": True}, True),
    ("/v1/responses", {"model": "log-model", "input": "hi"}, False),
    ("/v1/completions", {"model": "log-model", "prompt": "hi", "stream": True}, True),
    ("/v1/completions", {"model": "log-model", "prompt": "hi"}, False),
])
def test_request_line_says_whether_the_answer_was_a_stream(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           path: str, body: dict[str, Any], stream: bool) -> None:
    rec = _Lines()
    monkeypatch.setattr(_respond, "log", rec)
    monkeypatch.setattr(_respond, "info_enabled", lambda: True)
    (tmp_path / "default.yaml").write_text(POLICY)
    with MockUpstream(SCRIPT) as mock:
        cfg = GatewayConfig(upstreams=[UpstreamConfig(name="up", base_url=mock.base_url, models=["log-*"])],
                            policies={"dir": str(tmp_path)}, verification={})
        app = app_mod.create_app(cfg)

        async def go() -> httpx.Response:
            state = app.app.state.gw if hasattr(app, "app") else app.state.gw
            state.upstreams = await Upstreams.start(state.cfg)
            try:
                async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
                    r = await c.post(path, json=body, headers={"authorization": "Bearer sk-client"})
                    await r.aread()
                    return r
            finally:
                await state.upstreams.close()

        r = asyncio.run(go())
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream") == stream
    [line] = [ln for ln in rec.lines if ln["route"] != "/v1/chat/completions"]
    assert line["stream"] is stream and line["status"] == 200
