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


def make_app(upstream: str):
    """ASGI app forwarding POST /v1/<path> bodies to ``upstream`` (ending in /v1)."""
    state: dict[str, aiohttp.ClientSession] = {}

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    state["s"] = aiohttp.ClientSession(
                        connector=aiohttp.TCPConnector(limit=0), trust_env=False, auto_decompress=False)
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
                                   headers={"content-type": "application/json", "authorization": auth}) as r:
            data = await r.read()
            await send({"type": "http.response.start", "status": r.status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(data)).encode())]})
            await send({"type": "http.response.body", "body": data})

    return app


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--upstream", required=True)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args()
    uvicorn.run(make_app(a.upstream.rstrip("/")), host="127.0.0.1", port=a.port, loop="uvloop",
                http="httptools", access_log=False, log_level="warning", server_header=False,
                proxy_headers=False)


if __name__ == "__main__":
    main()
