"""A/B of the Azure OpenAI request shape against the plain ``/v1`` one, in-process.

One gateway app (:class:`proxy._asgi.fastpath.FastPath`, bench/policies_off: every check off, so the
lean lane answers), real :class:`proxy.upstreams.OpenAIUpstream` calls over loopback to a
``veracity mock-upstream`` subprocess, and the same request sent alternately as

* ``v1``: ``POST /v1/chat/completions`` with ``Authorization: Bearer``;
* ``azure``: ``POST /openai/deployments/mock-model/chat/completions?api-version=2024-10-21``
  with the key in ``api-key`` (what ``openai.AzureOpenAI`` sends; :mod:`proxy.wire.azure`).

Prints CPU microseconds per request (``time.process_time``, see bench/gateway_inproc.py) of
each of ``--rounds`` alternating measurements of N requests: min, median and the ratio
azure/v1 of the minima. Alternating in one process keeps the two sides under the same load.

    .venv/bin/python bench/azure_ab.py [N] [--rounds 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway_inproc as g  # noqa: E402

from proxy.config import GatewayConfig, UpstreamConfig  # noqa: E402
from proxy.upstreams import Upstreams  # noqa: E402

_PATH = "/openai/deployments/mock-model/chat/completions"
AZURE_SCOPE = {**g.SCOPE, "path": _PATH, "raw_path": _PATH.encode(), "query_string": b"api-version=2024-10-21",
               "headers": [h for h in g.SCOPE["headers"] if h[0] != b"authorization"] + [(b"api-key", b"sk-test")]}


async def drive(asgi, n: int, scope: dict) -> float:  # noqa: ANN001
    """CPU us per request over ``n`` sequential requests of ``scope`` (after 200 warm-up
    requests); bench/gateway_inproc.py's ``drive`` with the scope as a parameter."""
    status: list[int] = []

    async def receive():  # noqa: ANN202
        return {"type": "http.request", "body": g.BODY, "more_body": False}

    async def send(msg):  # noqa: ANN001, ANN202
        if msg["type"] == "http.response.start":
            status.append(msg["status"])

    for _ in range(200):
        await asgi(dict(scope), receive, send)
    if set(status) != {200}:
        raise SystemExit(f"the gateway answered {sorted(set(status))}")
    t0 = time.process_time()
    for _ in range(n):
        await asgi(dict(scope), receive, send)
    return (time.process_time() - t0) / n * 1e6


async def run(url: str, n: int, rounds: int) -> dict[str, list[float]]:
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="m", base_url=url, models=["*"])],
                        policies={"dir": str(g.POLICIES["off"])}, verification={})
    fast = g.app_mod.create_app(cfg)
    state = fast.app.state.gw
    state.upstreams = await Upstreams.start(cfg)
    out: dict[str, list[float]] = {"v1": [], "azure": []}
    real = g.sequence.chat_completion

    async def normal_path(ctx, body):  # noqa: ANN001, ANN202 - the lane must answer both shapes
        raise SystemExit("a request left the lean lane: the A/B would compare different paths")

    g.sequence.chat_completion = normal_path
    try:
        for _ in range(rounds):
            out["v1"].append(await drive(fast, n, g.SCOPE))
            out["azure"].append(await drive(fast, n, AZURE_SCOPE))
    finally:
        g.sequence.chat_completion = real
        await state.upstreams.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", type=int, default=2000, help="requests per measurement")
    p.add_argument("--rounds", type=int, default=8)
    a = p.parse_args()
    from proxy.observability.log import configure

    sys.stdout = open(os.devnull, "w")  # the request log lines
    configure("info")
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = g.start_mock(g.RISKY, Path(tmp))
        try:
            res = uvloop.run(run(url, a.n, a.rounds))
        finally:
            proc.terminate()
            proc.wait(10)
    sys.stdout = sys.__stdout__
    print(f"gateway CPU us per request, lean lane, {a.rounds} alternating rounds x {a.n} requests:")
    for name, v in res.items():
        print(f"  {name:6s} min {min(v):7.1f}  median {statistics.median(v):7.1f}  rounds {[round(x) for x in v]}")
    print(f"  azure/v1 (minima): {min(res['azure']) / min(res['v1']):.3f}")


if __name__ == "__main__":
    main()
