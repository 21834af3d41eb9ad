"""The floor for a Python pass-through proxy on this stack: a reference target for gateway_bench.py.

Raw ASGI on uvicorn (uvloop + httptools) forwarding ``POST /v1/chat/completions`` to one
upstream with a shared ``aiohttp.ClientSession`` -- no routing framework, no auth, no metrics,
no logging, no parsing of the JSON. Whatever Veracity adds on top of this row is the cost of
its own features; what this row adds over ``direct`` is the cost of one more hop through
uvicorn + aiohttp on this machine.

    python bench/floor_proxy.py --upstream http://127.0.0.1:PORT/v1 --port N
"""

from __future__ import annotations

import argparse

import aiohttp
import uvicorn


def make_app(upstream: str, veracity_session: bool = False):
    """ASGI app forwarding POST /v1/<path> bodies to ``upstream`` (ending in /v1).
    ``veracity_session``: the aiohttp session and timeout exactly as Veracity's
    :class:`proxy.upstreams.Upstreams` opens them (the ``floor_session`` diagnostic row)."""
    state: dict[str, aiohttp.ClientSession] = {}
    post_kw: dict = {}
    if veracity_session:
        post_kw["timeout"] = aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=600.0)

    def session() -> aiohttp.ClientSession:
        if veracity_session:
            return aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30),
                trust_env=False, skip_auto_headers=("User-Agent",), auto_decompress=True)
        return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trust_env=False,
                                     auto_decompress=False)

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    state["s"] = session()
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await state["s"].close()
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        more = True
        while more:
            msg = await receive()
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        if scope["path"] == "/healthz":
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
            await send({"type": "http.response.body", "body": b"ok"})
            return
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        async with state["s"].post(upstream + scope["path"][3:], data=body,
                                   headers={"content-type": "application/json", "authorization": auth},
                                   **post_kw) as r:
            data = await r.read()
            await send({"type": "http.response.start", "status": r.status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

    return app


def load_veracity_heap() -> None:
    """Import and warm up what a ``veracity serve`` process holds (the app, the policies of
    bench/policies_off, the verifier modules, the arithmetic unit registry), then
    ``gc.freeze()`` as Veracity does: for the ``floor_heavy`` diagnostic row, the floor's
    code in a process as big as Veracity's (is the remaining gap code or process size?)."""
    import gc
    import os
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    sys.path.insert(0, str(root))
    os.environ.setdefault("VERACITY_POLICIES", str(root / "bench" / "policies_off"))
    from proxy import app as _app  # noqa: F401
    from proxy.pipeline import sequence as pipeline
    from proxy.config import GatewayConfig, UpstreamConfig
    from verifiers import arithmetic

    cfg = GatewayConfig(upstreams=[UpstreamConfig(name="m", base_url="http://127.0.0.1:9/v1", models=["*"])],
                        policies={"dir": str(root / "bench" / "policies_off")}, verification={})
    state = _app.create_app(cfg).state  # FastPath's Gateway: the app's proxy.gateway.Gateway
    state.runtime  # noqa: B018 - builds the verification runtime (loads the policies)
    state.wait_warm_up()
    arithmetic.warm_up()
    pipeline.risk_mod.score("What is 2 + 2?", "2 + 2 = 4")
    gc.collect()
    gc.freeze()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--veracity-heap", action="store_true", help="load Veracity's modules first (floor_heavy)")
    p.add_argument("--veracity-session", action="store_true", help="Veracity's aiohttp session (floor_session)")
    a = p.parse_args()
    if a.veracity_heap:
        load_veracity_heap()
    uvicorn.run(make_app(a.upstream.rstrip("/"), a.veracity_session), host="127.0.0.1", port=a.port, loop="uvloop",
                http="httptools", access_log=False, log_level="warning", server_header=False,
                proxy_headers=False)


if __name__ == "__main__":
    main()
