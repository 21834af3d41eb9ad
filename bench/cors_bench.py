"""CPU cost of the ``cors:`` section on the chat fast path, in process (no client sockets).

The lean lane (bench/policies_off, non-stream) with real aiohttp calls to a
``veracity mock-upstream`` subprocess, driven as ASGI like bench/gateway_inproc.py, in three
variants interleaved round by round (best of ``--repeat``):

* ``no_section``: no ``cors:`` section (the app is not wrapped: what every deployment without
  browser clients runs);
* ``cors_no_origin``: ``cors:`` configured, a request without ``Origin`` (server-side clients);
* ``cors_origin``: ``cors:`` configured, a browser request from an allowed ``Origin``.

Prints CPU microseconds per request (``time.process_time``) and the ratio to ``no_section``;
then the middleware alone: the same three variants around a no-op ASGI app that sends the
lean lane's header list (no upstream, no gateway work: the wrapper's own cost, steadier on a
loaded machine than the difference of two gateway runs).

    .venv/bin/python bench/cors_bench.py [N] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import uvloop

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import gateway_inproc as inproc  # noqa: E402

from proxy import app as app_mod  # noqa: E402
from proxy.config import CORSConfig, GatewayConfig, UpstreamConfig  # noqa: E402
from proxy.upstreams import Upstreams  # noqa: E402

ORIGIN = b"https://app.example.com"
VARIANTS = ("no_section", "cors_no_origin", "cors_origin")


async def measure(variant: str, n: int, mock_url: str) -> float:
    cors = None if variant == "no_section" else CORSConfig(allow_origins=[ORIGIN.decode()])
    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="m", base_url=mock_url, models=["*"])],
                        policies={"dir": str(inproc.POLICIES["off"])}, verification={}, cors=cors)
    asgi = app_mod.create_app(cfg)
    state = asgi.state  # FastPath's Gateway (through the CORS wrapper when there is one)
    state.upstreams = await Upstreams.start(cfg)
    headers = list(inproc.SCOPE["headers"])
    if variant == "cors_origin":
        headers.append((b"origin", ORIGIN))
    saved = inproc.SCOPE
    inproc.SCOPE = {**saved, "headers": headers}
    try:
        return await inproc.drive(asgi, n)
    finally:
        inproc.SCOPE = saved
        await state.upstreams.close()


#: the header list the lean lane sends (relayed upstream headers, Veracity's, length, type)
_REPLY_HEADERS = [(b"openai-processing-ms", b"12"), (b"x-ratelimit-remaining-requests", b"99"),
                  (b"x-upstream-request-id", b"req_up"), (b"x-request-id", b"req_0123456789abcdef01234567"),
                  (b"x-veracity-status", b"skipped"), (b"x-veracity-overhead-ms", b"0.123"),
                  (b"content-length", b"512"), (b"content-type", b"application/json")]


async def _noop_app(scope, receive, send) -> None:  # noqa: ANN001
    await send({"type": "http.response.start", "status": 200, "headers": list(_REPLY_HEADERS)})
    await send({"type": "http.response.body", "body": b"{}"})


async def measure_wrapper(variant: str, n: int) -> float:
    from proxy._asgi import cors

    asgi = cors.wrap(_noop_app, None if variant == "no_section" else CORSConfig(allow_origins=[ORIGIN.decode()]))
    headers = list(inproc.SCOPE["headers"]) + ([(b"origin", ORIGIN)] if variant == "cors_origin" else [])
    saved = inproc.SCOPE
    inproc.SCOPE = {**saved, "headers": headers}
    try:
        return await inproc.drive(asgi, n)
    finally:
        inproc.SCOPE = saved


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", type=int, default=3000, help="requests per measurement")
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    from proxy.observability.log import configure

    sys.stdout = open(os.devnull, "w")  # the request log lines
    configure("info")
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = inproc.start_mock(inproc.RISKY, Path(tmp))
        try:
            for _ in range(a.repeat):  # interleaved: machine load drifts across all variants alike
                for v in VARIANTS:
                    us = uvloop.run(measure(v, a.n, url))
                    best[v] = min(best.get(v, us), us)
        finally:
            proc.terminate()
            proc.wait(10)
        wrapper: dict[str, float] = {}
        for _ in range(a.repeat):
            for v in VARIANTS:
                us = uvloop.run(measure_wrapper(v, a.n * 10))
                wrapper[v] = min(wrapper.get(v, us), us)
    sys.stdout = sys.__stdout__
    print(f"lean lane CPU us per request, best of {a.repeat} x {a.n} (real aiohttp calls to a mock subprocess, "
          "uvloop):")
    for v in VARIANTS:
        print(f"  {v:15s} {best[v]:8.1f}   x{best[v] / best['no_section']:.3f}")
    print(f"middleware alone around a no-op ASGI app, CPU us per request, best of {a.repeat} x {a.n * 10}:")
    for v in VARIANTS:
        print(f"  {v:15s} {wrapper[v]:8.2f}   +{wrapper[v] - wrapper['no_section']:.2f}")


if __name__ == "__main__":
    main()
