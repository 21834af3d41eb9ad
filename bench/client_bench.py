"""Upstream HTTP clients compared on the gateway's hot-path exchange: one non-stream chat
completion POST (~60-byte request, ~0.9 kB JSON answer) over a keep-alive loopback connection.

Why: the client's CPU per exchange is the largest part of the gateway's added latency at one
connection (bench/results/gateway.md). This measures each candidate in its own process against
the same upstream (a raw uvloop + httptools server answering fixed bytes, so the upstream's cost
is the same for all), interleaved over ``--rounds``; reported: CPU us per request of the client
process (``time.process_time``, threads included) and wall p50/p99 latency.

Candidates: ``http1`` (proxy/upstreams/http1.py, what the gateway uses for non-stream chat completions),
``aiohttp`` (with the gateway's session options; streams and pass-through routes), and, when
installed in the running interpreter, ``pyreqwest``, ``aiosonic``, ``curl_cffi`` (not project
dependencies: ``pip install`` them into a scratch venv to include them).

    .venv/bin/python bench/client_bench.py [--requests 4000] [--rounds 3] [--out bench/results/client.md]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

BODY = (b'{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":'
        b'[{"index":0,"message":{"role":"assistant","content":"' + b"x" * 700 + b'"},"finish_reason":"stop"}],'
        b'"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":30}}')
REQUEST = b'{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}'
HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
WARM_UP = 300


def serve(port: int) -> None:
    """The upstream: fixed answer per request, keep-alive."""
    import httptools
    import uvloop

    resp = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(BODY), BODY)

    class Proto(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = transport
            self.parser = httptools.HttpRequestParser(self)

        def data_received(self, data: bytes) -> None:
            self.parser.feed_data(data)

        def on_message_complete(self) -> None:
            self.transport.write(resp)  # type: ignore[attr-defined]

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Proto, "127.0.0.1", port)
        await server.serve_forever()

    uvloop.run(main())


async def _measure(call, n: int) -> dict[str, float]:
    for _ in range(WARM_UP):
        await call()
    lat = []
    c0 = time.process_time()
    for _ in range(n):
        t = time.perf_counter()
        await call()
        lat.append(time.perf_counter() - t)
    cpu = time.process_time() - c0
    lat.sort()
    return {"cpu_us": cpu / n * 1e6, "p50_us": lat[n // 2] * 1e6, "p99_us": lat[int(n * 0.99)] * 1e6}


async def _client(which: str, url: str, n: int) -> dict[str, float]:
    if which == "http1":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from yarl import URL

        from proxy.upstreams import http1
        u = URL(url)
        pool = http1.Http1Client().pool(u)
        head = http1.request_head("POST", u, HEADERS.items())

        async def call() -> None:
            r = await pool.request(head, REQUEST, connect_s=5, read_s=600, max_body=64 << 20)
            assert r.status == 200 and len(r.body) == len(BODY)
        return await _measure(call, n)
    if which == "aiohttp":
        import aiohttp
        s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30),
                                  trust_env=False, skip_auto_headers=("User-Agent",), auto_decompress=True)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=600.0)

        async def call() -> None:
            async with s.post(url, data=REQUEST, headers=HEADERS, timeout=timeout) as r:
                body = await r.read()
                assert r.status == 200 and len(body) == len(BODY)
        try:
            return await _measure(call, n)
        finally:
            await s.close()
    if which == "aiosonic":
        import aiosonic
        c = aiosonic.HTTPClient()

        async def call() -> None:
            r = await c.post(url, data=REQUEST, headers=HEADERS)
            body = await r.content()
            assert r.status_code == 200 and len(body) == len(BODY)
        return await _measure(call, n)
    if which == "pyreqwest":
        from pyreqwest.client import ClientBuilder
        async with ClientBuilder().build() as c:
            async def call() -> None:
                r = await c.post(url).body_bytes(REQUEST).headers(HEADERS).build().send()
                body = await r.bytes()
                assert r.status == 200 and len(body) == len(BODY)
            return await _measure(call, n)
    if which == "curl_cffi":
        from curl_cffi.requests import AsyncSession
        async with AsyncSession() as s:
            async def call() -> None:
                r = await s.post(url, data=REQUEST, headers=HEADERS)
                assert r.status_code == 200 and len(r.content) == len(BODY)
            return await _measure(call, n)
    raise SystemExit(f"unknown client {which}")


def run_one(which: str, url: str, n: int) -> None:
    """Child process: measure one client, print its JSON line."""
    import uvloop
    print(json.dumps(uvloop.run(_client(which, url, n))))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=None, help="write a markdown table here")
    ap.add_argument("--_serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--_client", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args._serve:
        return serve(args._serve)
    if args._client:
        return run_one(args._client[0], args._client[1], args.requests)
    clients = ["http1", "aiohttp"] + [m for m in ("pyreqwest", "aiosonic", "curl_cffi")
                                      if importlib.util.find_spec(m) is not None]
    port = _free_port()
    up = subprocess.Popen([sys.executable, __file__, "--_serve", str(port)])
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        results: dict[str, list[dict[str, float]]] = {c: [] for c in clients}
        for r in range(args.rounds):
            for c in clients:
                out = subprocess.run([sys.executable, __file__, "--requests", str(args.requests),
                                      "--_client", c, url], capture_output=True, text=True, check=True)
                results[c].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"round {r + 1} {c:10s} " + "  ".join(f"{k} {v:8.1f}" for k, v in results[c][-1].items()),
                      flush=True)
    finally:
        up.terminate()
        up.wait()
    base = statistics.median(x["cpu_us"] for x in results["aiohttp"])
    rows = ["| client | CPU us/request (median) | CPU range | p50 us | p99 us | CPU vs aiohttp |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for c in clients:
        cpu = [x["cpu_us"] for x in results[c]]
        rows.append(f"| {c} | {statistics.median(cpu):.0f} | {min(cpu):.0f}-{max(cpu):.0f} | "
                    f"{statistics.median(x['p50_us'] for x in results[c]):.0f} | "
                    f"{statistics.median(x['p99_us'] for x in results[c]):.0f} | "
                    f"{statistics.median(cpu) / base:.2f}x |")
    load = os.getloadavg()
    text = (f"# Upstream HTTP client benchmark\n\nRun {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
            f"`bench/client_bench.py` ({args.rounds} interleaved rounds of {args.requests} sequential requests per "
            f"client, each in its own process, after {WARM_UP} warm-up requests; one keep-alive connection to a raw "
            f"uvloop + httptools upstream answering a {len(BODY)}-byte chat completion). Python "
            f"{platform.python_version()}, {os.cpu_count()} cores, load average {load[0]:.2f} at the end.\n\n"
            + "\n".join(rows) + "\n")
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
