"""In-process micro-benchmark of the gateway's own per-request work (no sockets).

Drives the ASGI app directly with a fake upstream that answers instantly, so what is timed
is exactly the gateway's Python work per chat completion: auth, body parse, routing, pipeline,
response serialisation, metrics, the request log line (to /dev/null). Reports CPU microseconds
per request (``time.process_time``; least affected by other load on a shared machine) for:

* ``fastapi``: the request through the full FastAPI/Starlette stack (middleware + router);
* ``fastpath``: the same through :class:`proxy.app.FastPath` (what ``veracity serve`` runs);
* ``core``: fastpath with :mod:`proxy.pipeline` replaced by a bare forward + ``skipped``
  report: the cost of the gateway core alone, without policy resolution or verification.

    .venv/bin/python bench/gateway_inproc.py [N]
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from proxy import app as app_mod  # noqa: E402
from proxy.config import GatewayConfig, UpstreamConfig  # noqa: E402

BODY = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}'
ANSWER = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
          "choices": [{"index": 0, "message": {"role": "assistant", "content": "Mock reply to: hello there"},
                       "logprobs": None, "finish_reason": "stop"}],
          "usage": {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}, "system_fingerprint": "fp"}


class FakeUpstream:
    def __init__(self, cfg: UpstreamConfig) -> None:
        self.name, self.config = cfg.name, cfg

    async def complete(self, body, *, auth, timing):  # noqa: ANN001, ANN201
        return dict(ANSWER), {}


class FakeUpstreams:
    def __init__(self, u: FakeUpstream) -> None:
        self.u, self.all = u, [u]

    def route(self, model: str) -> FakeUpstream:
        return self.u


async def run(asgi, n: int) -> float:  # noqa: ANN001
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
             "query_string": b"", "root_path": "", "scheme": "http", "server": ("127.0.0.1", 8080),
             "client": ("127.0.0.1", 5000), "http_version": "1.1", "asgi": {"version": "3.0", "spec_version": "2.3"},
             "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode()),
                         (b"authorization", b"Bearer sk-test")]}
    sent = []

    async def receive():  # noqa: ANN202
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(msg):  # noqa: ANN001, ANN202
        sent.append(msg["type"])

    for _ in range(200):  # warm-up
        await asgi(dict(scope), receive, send)
    t0 = time.process_time()
    for _ in range(n):
        await asgi(dict(scope), receive, send)
    return (time.process_time() - t0) / n * 1e6


_real_pipeline = app_mod.pipeline.chat_completion


async def _bare_pipeline(ctx, body):  # noqa: ANN001, ANN202
    from verifiers._types import Report

    draft = await ctx.upstream.complete(body)
    report = Report(status="skipped", reason="no verification configured")
    draft["veracity"] = report.to_dict()
    return app_mod.pipeline.PipelineResult(response=draft, report=report, headers=ctx.upstream.headers)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    from proxy.log import configure

    sys.stdout = open(os.devnull, "w")  # the request log lines
    configure("info")
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="m", base_url="http://127.0.0.1:9/v1")])
    fast = app_mod.create_app(cfg)
    fast.app.state.gw.upstreams = FakeUpstreams(FakeUpstream(cfg.upstreams[0]))
    full = fast.app
    res: dict[str, float] = {}
    for name, asgi in (("fastapi", full), ("fastpath", fast), ("core", fast)) * 2:
        if name == "core":
            app_mod.pipeline.chat_completion = _bare_pipeline
        else:
            app_mod.pipeline.chat_completion = _real_pipeline
        us = asyncio.run(run(asgi, n))
        res[name] = min(us, res.get(name, us))
    sys.stdout = sys.__stdout__
    for name, us in res.items():
        print(f"{name:9s} {us:7.1f} us CPU per request (best of 2 x {n})")


if __name__ == "__main__":
    main()
