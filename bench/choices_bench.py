"""``n > 1`` benchmark: what verifying and correcting every choice costs, ratios against ``n = 1``
measured in the same run.

Drives the ASGI app in process (as ``bench/gateway_inproc.py``) with a fake upstream that sleeps
``--delay`` seconds per call (a model's latency) and answers every choice with a wrong
compound-interest total, or the right one after the gateway's evidence prompt. Policy: correct,
arithmetic only, risk threshold 0.1.

1. Wall time per request, wrong answers corrected: ``n = 1`` (one draft + one correction call)
   vs ``n = 3`` (one draft + three correction calls, made side by side). A gateway correcting
   the choices one after another would take ``(1 + n) / 2`` times the ``n = 1`` time.
2. Gateway CPU per request (``time.process_time``, upstream instant), right answers (verified,
   nothing to correct): ``n = 1`` vs ``n = 3``.

    .venv/bin/python bench/choices_bench.py [--delay 0.2] [--runs 10] [--out bench/results/choices.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from proxy import app as app_mod  # noqa: E402
from proxy.config import GatewayConfig, UpstreamConfig  # noqa: E402
from gateway_inproc import FakeUpstreams  # noqa: E402  (bench/ is the script's folder)

RIGHT_TXT = f"{5000 * 1.06 ** 4:,.2f}"
QUESTION = "I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"
POLICY = {"name": "default", "on_failure": "correct", "risk": {"threshold": 0.1},
          "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}}}


def answer(text: str, n: int) -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "mock-model",
            "choices": [{"index": i, "message": {"role": "assistant", "content": text},
                         "logprobs": None, "finish_reason": "stop"} for i in range(n)],
            "usage": {"prompt_tokens": 30, "completion_tokens": 20 * n, "total_tokens": 30 + 20 * n}}


class FakeUpstream:
    """Sleeps ``delay`` s per call; wrong first, right after the evidence prompt (or always right)."""

    def __init__(self, cfg: UpstreamConfig, delay: float, wrong: bool) -> None:
        self.name, self.config, self.delay, self.wrong = cfg.name, cfg, delay, wrong
        self.calls = 0

    async def complete(self, body, *, auth, timing):  # noqa: ANN001, ANN201
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        evidence = str(body["messages"][-1].get("content", "")).startswith("Automatic verification")
        value = RIGHT_TXT if evidence or not self.wrong else "6,200.00"
        return answer(f"The total is 5000 * 1.06^4 = ${value}.", body.get("n") or 1), {}


def scope(body: bytes) -> dict:
    return {"type": "http", "method": "POST", "path": "/v1/chat/completions", "raw_path": b"/v1/chat/completions",
            "query_string": b"", "root_path": "", "scheme": "http", "server": ("127.0.0.1", 8080),
            "client": ("127.0.0.1", 5000), "http_version": "1.1", "asgi": {"version": "3.0", "spec_version": "2.3"},
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                        (b"authorization", b"Bearer sk-test")]}


async def measure(pdir: Path, n: int, delay: float, wrong: bool, runs: int, clock) -> tuple[float, str]:
    """Median seconds per request (``clock``) and the last report's status."""
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="m", base_url="http://127.0.0.1:9/v1", models=["*"])],
                        policies={"dir": str(pdir)}, verification={})
    fast = app_mod.create_app(cfg)
    state = fast.app.state.gw
    up = FakeUpstream(cfg.upstreams[0], delay, wrong)
    state.upstreams = FakeUpstreams(up)
    body = json.dumps({"model": "mock-model", "n": n, "messages": [{"role": "user", "content": QUESTION}]}).encode()
    out: list[bytes] = []

    async def receive():  # noqa: ANN202
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(msg):  # noqa: ANN001, ANN202
        if msg["type"] == "http.response.body":
            out.append(msg.get("body", b""))

    times = []
    for i in range(runs + 3):  # 3 warm-up requests
        out.clear()
        t0 = clock()
        await fast(scope(body), receive, send)
        if i >= 3:
            times.append(clock() - t0)
    resp = json.loads(b"".join(out))
    return statistics.median(times), resp["veracity"]["status"]


async def run(a: argparse.Namespace) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        pdir = Path(tmp)
        (pdir / "default.yaml").write_text(json.dumps(POLICY))
        w1, s1 = await measure(pdir, 1, a.delay, True, a.runs, time.perf_counter)
        w3, s3 = await measure(pdir, 3, a.delay, True, a.runs, time.perf_counter)
        c1, r1 = await measure(pdir, 1, 0.0, False, a.runs * 20, time.process_time)
        c3, r3 = await measure(pdir, 3, 0.0, False, a.runs * 20, time.process_time)
    assert (s1, s3, r1, r3) == ("corrected", "corrected", "passed", "passed"), (s1, s3, r1, r3)
    return "\n".join([
        "# n > 1: every choice verified and corrected (bench/choices_bench.py)",
        "",
        f"Fake upstream in process, {a.delay * 1000:.0f} ms per call; median of {a.runs} requests "
        f"(CPU: {a.runs * 20}). One run; quote the ratios.",
        "",
        "| what | n = 1 | n = 3 | n = 3 / n = 1 |",
        "|---|---|---|---|",
        f"| wall ms, wrong answers corrected (1 + n upstream calls) | {w1 * 1000:.1f} | {w3 * 1000:.1f} | "
        f"{w3 / w1:.2f} (one after another: {(1 + 3) / 2:.2f}) |",
        f"| gateway CPU ms, right answers verified (upstream instant) | {c1 * 1000:.2f} | {c3 * 1000:.2f} | "
        f"{c3 / c1:.2f} |",
        "",
    ])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--delay", type=float, default=0.2, help="upstream latency per call, seconds")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--out", default="")
    a = p.parse_args()
    from proxy.observability.log import configure

    real_stdout = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the request log lines
    configure("info")
    text = asyncio.run(run(a))
    sys.stdout = real_stdout
    print(text)
    if a.out:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
