"""In-process micro-benchmark of the gateway's own per-request work (no client sockets).

Drives the ASGI app directly, so what is timed is the gateway's Python work per chat
completion: auth, body parse, routing, pipeline, response serialisation, metrics, the request
log line (to /dev/null). Reports CPU microseconds per request (``time.process_time``; least
affected by other load on a shared machine), best of ``--repeat`` x N requests, for:

* ``core``: :class:`proxy._asgi.fastpath.FastPath` with :mod:`proxy.pipeline.sequence` replaced by a bare forward
  + ``skipped`` report: the gateway core alone, without policy resolution or verification;
* ``off``: FastPath (what ``veracity serve`` runs) with bench/policies_off (every check off),
  the answer of bench/gateway_bench.py (a worked multiplication, risk 0.70); with ``--mock``
  this takes :class:`proxy._asgi.fastpath.LeanLane` (the fake upstream is not an ``OpenAIUpstream``, so
  without ``--mock`` it does not);
* ``off_normal``: the same with the lean lane switched off (the normal path, for A/B);
* ``floor`` (``--mock`` only): bench/floor_proxy.py's ASGI app (bare relay, no feature) against
  the same mock: the reference Veracity's lean lane is measured against;
* ``default_low``: the shipped default policy, a low-risk answer ("Mock reply to: ..."): what
  the "low-risk added latency" floor of bench/RESULTS.md is about;
* ``default_risky``: the shipped default policy, the benchmark's worked multiplication: the
  arithmetic verifier runs (in a worker thread) and passes;
* ``fastapi`` (``--fastapi``): ``default_low`` through the full FastAPI/Starlette stack.

By default the upstream is a fake that answers at once (the gateway's Python work only). With
``--mock`` the real :class:`proxy.upstreams.OpenAIUpstream` talks over loopback to a
``veracity mock-upstream`` subprocess, so the aiohttp client's cost is included (the mock's
own CPU is not: it is another process). ``--profile SCENARIO`` prints a cProfile of that
scenario measured with a CPU clock (``time.process_time``; wall-clock profiles charge the
time spent waiting to be scheduled on a busy machine to whatever line was running).

    .venv/bin/python bench/gateway_inproc.py [N] [--mock] [--profile default_risky] [--loop asyncio]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import app as app_mod  # noqa: E402
from proxy.pipeline import sequence  # noqa: E402
from proxy.config import GatewayConfig, UpstreamConfig  # noqa: E402

LOW = "Mock reply to: hello there"
RISKY = ("The product of 17 and 23 is 391. To check: 17 x 20 = 340 and 17 x 3 = 51, "
         "and 340 + 51 = 391. So the answer is 391.")  # = bench/gateway_bench.py MOCK_SCRIPT
BODY = json.dumps({"model": "mock-model", "messages": [
    {"role": "system", "content": "You are a careful assistant."},
    {"role": "user", "content": "What is 17 * 23? Show your work."}], "temperature": 0}).encode()
POLICIES = {"off": ROOT / "bench" / "policies_off", "default": ROOT / "policies"}
#: scenario -> (policy folder, answer)
SCENARIOS = {"core": ("off", RISKY), "off": ("off", RISKY), "off_normal": ("off", RISKY), "floor": ("off", RISKY), "default_low": ("default", LOW),
             "default_risky": ("default", RISKY), "fastapi": ("default", LOW)}


def answer(content: str) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "mock-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "logprobs": None, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 24, "completion_tokens": 38, "total_tokens": 62}, "system_fingerprint": "fp"}


class FakeUpstream:
    def __init__(self, cfg: UpstreamConfig, content: str) -> None:
        self.name, self.config, self.content = cfg.name, cfg, content

    async def complete(self, body, *, auth, timing):  # noqa: ANN001, ANN201
        return answer(self.content), {}


class FakeUpstreams:
    def __init__(self, u: FakeUpstream) -> None:
        self.u, self.all = u, [u]

    def route(self, model: str) -> FakeUpstream:
        return self.u

    async def close(self) -> None:
        pass


SCOPE = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
         "query_string": b"", "root_path": "", "scheme": "http", "server": ("127.0.0.1", 8080),
         "client": ("127.0.0.1", 5000), "http_version": "1.1", "asgi": {"version": "3.0", "spec_version": "2.3"},
         "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode()),
                     (b"authorization", b"Bearer sk-test")]}


async def drive(asgi, n: int) -> float:  # noqa: ANN001
    """CPU us per request over ``n`` sequential requests (after 200 warm-up requests)."""
    status: list[int] = []

    async def receive():  # noqa: ANN202
        return {"type": "http.request", "body": BODY, "more_body": False}

    async def send(msg):  # noqa: ANN001, ANN202
        if msg["type"] == "http.response.start":
            status.append(msg["status"])

    for _ in range(200):
        await asgi(dict(SCOPE), receive, send)
    if set(status) != {200}:
        raise SystemExit(f"the gateway answered {sorted(set(status))}")
    t0 = time.process_time()
    for _ in range(n):
        await asgi(dict(SCOPE), receive, send)
    return (time.process_time() - t0) / n * 1e6


_real_pipeline = sequence.chat_completion


async def _bare_pipeline(ctx, body):  # noqa: ANN001, ANN202
    from verifiers._types import Report

    draft = await ctx.upstream.complete(body)
    report = Report(status="skipped", reason="no verification configured")
    draft["veracity"] = report.to_dict()
    return sequence.PipelineResult(response=draft, report=report, headers=ctx.upstream.headers)


def start_mock(content: str, workdir: Path) -> tuple[subprocess.Popen, str]:
    import socket

    import httpx

    script = workdir / f"mock-{abs(hash(content))}.json"
    script.write_text(json.dumps({"record_requests": False, "models": ["mock-model"],
                                  "rules": [{"reply": {"content": content, "usage": answer(content)["usage"]}}]}))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "proxy.upstreams.mock", "--script", str(script), "--port",
                             str(port), "--no-record"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            if httpx.get(url + "/v1/models", trust_env=False).status_code == 200:
                return proc, url + "/v1"
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("mock upstream did not start")


async def _floor(n: int, repeat: int, mock_url: str) -> float:
    """bench/floor_proxy.py's app, its lifespan driven by hand, timed like the gateway."""
    sys.path.insert(0, str(ROOT / "bench"))
    from floor_proxy import make_app

    app = make_app(mock_url.rstrip("/"))
    inbox: asyncio.Queue = asyncio.Queue()
    started = asyncio.Event()

    async def lreceive():  # noqa: ANN202
        return await inbox.get()

    async def lsend(msg):  # noqa: ANN001, ANN202
        if msg["type"] == "lifespan.startup.complete":
            started.set()

    life = asyncio.create_task(app({"type": "lifespan"}, lreceive, lsend))
    await inbox.put({"type": "lifespan.startup"})
    await started.wait()
    try:
        return min([await drive(app, n) for _ in range(repeat)])
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await life


async def scenario(name: str, n: int, repeat: int, mock_url: str | None, profile: bool) -> float:
    if name == "floor":
        if not mock_url:
            raise SystemExit("the floor scenario needs --mock")
        return await _floor(n, repeat, mock_url)
    policy, content = SCENARIOS[name]
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="m", base_url=mock_url or "http://127.0.0.1:9/v1",
                                                  models=["*"])],
                        policies={"dir": str(POLICIES[policy])}, verification={})
    fast = app_mod.create_app(cfg)
    state = fast.app.state.gw
    if mock_url:
        from proxy.upstreams import Upstreams

        state.upstreams = await Upstreams.start(cfg)
    else:
        state.upstreams = FakeUpstreams(FakeUpstream(cfg.upstreams[0], content))
    sequence.chat_completion = _bare_pipeline if name == "core" else _real_pipeline
    fast.lean.enabled = name not in ("core", "off_normal")  # core: the normal path, bare pipeline
    asgi = fast.app if name == "fastapi" else fast
    try:
        best = min([await drive(asgi, n) for _ in range(repeat)])
        if profile:
            prof = cProfile.Profile(time.process_time)
            prof.enable()
            await drive(asgi, n)
            prof.disable()
            out = io.StringIO()
            st = pstats.Stats(prof, stream=out)
            st.sort_stats("tottime").print_stats(35)
            st.sort_stats("cumulative").print_stats(45)
            sys.__stderr__.write(out.getvalue())
    finally:
        await state.upstreams.close()
        sequence.chat_completion = _real_pipeline
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", type=int, default=3000, help="requests per measurement")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--mock", action="store_true", help="real aiohttp upstream calls to a mock subprocess")
    p.add_argument("--scenarios", default="core,off,default_low,default_risky")
    p.add_argument("--fastapi", action="store_true", help="also the full FastAPI stack (default_low)")
    p.add_argument("--profile", default="", help="print a CPU-clock cProfile of this scenario (stderr)")
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                   help="event loop (default uvloop, as `veracity serve` runs)")
    a = p.parse_args()
    names = a.scenarios.split(",") + (["fastapi"] if a.fastapi else [])
    if a.profile and a.profile not in names:
        names.append(a.profile)
    from proxy.observability.log import configure

    sys.stdout = open(os.devnull, "w")  # the request log lines
    configure("info")
    res: dict[str, float] = {}
    mocks: dict[str, tuple[subprocess.Popen, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name in names:
                url = None
                if a.mock:
                    content = SCENARIOS[name][1]
                    if content not in mocks:
                        mocks[content] = start_mock(content, Path(tmp))
                    url = mocks[content][1]
                coro = scenario(name, a.n, a.repeat, url, profile=name == a.profile)
                res[name] = uvloop.run(coro) if a.loop == "uvloop" else asyncio.run(coro)
        finally:
            for proc, _ in mocks.values():
                proc.terminate()
                proc.wait(10)
    sys.stdout = sys.__stdout__
    where = ("real aiohttp calls to a mock subprocess" if a.mock else "instant fake upstream") + f", {a.loop}"
    print(f"gateway CPU us per request, best of {a.repeat} x {a.n} ({where}):")
    for name, us in res.items():
        print(f"  {name:14s} {us:8.1f}")


if __name__ == "__main__":
    main()
