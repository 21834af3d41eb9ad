"""The gateway's sockets and memory under a hostile upstream (Linux: reads /proc/<pid>).

One gateway (``veracity serve``, 1 worker) in front of the raw loopback upstream of
tests/hostile/test_hostile_upstream.py; prints a Markdown table:

* burst: ``N`` concurrent non-stream chat requests to an upstream answering after 2 s --
  answers by status, peak and final open fds of the gateway, upstream connections left open;
* cancellation storm: ``N`` requests to a silent upstream, all clients gone at once -- fds and
  upstream connections after;
* head bombs: gateway RSS before/after 10 answers with a 2 MiB header / trailer each;
* ``--nofile K``: the burst again with the gateway's ``RLIMIT_NOFILE`` lowered to ``K``.

    .venv/bin/python bench/upstream_storm.py [N] [--nofile 512]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tests.hostile.test_hostile_upstream as T  # noqa: E402  (the raw upstream and its cases)
from tests.conftest import Gateway  # noqa: E402


@T.case
async def slow_2s(srv: T.RawUpstream, r: T.Reader, w: T.Writer, head: bytes) -> None:
    await srv.body(r, head)
    await asyncio.sleep(2)
    w.write(T.response())


def fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS"):
            return int(line.split()[1]) / 1024
    return 0.0


async def burst(gw: Gateway, raw: T.RawUpstream, n: int, model: str) -> tuple[Counter, int]:
    pid, peak = gw.proc.pid, 0
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=300, limits=limits) as c:
        async def one() -> object:
            try:
                r = await c.post(gw.base_url + "/chat/completions",
                                 json={"model": model, "messages": [{"role": "user", "content": "hi"}]})
                return r.status_code
            except httpx.HTTPError as exc:
                return type(exc).__name__
        task = asyncio.gather(*[one() for _ in range(n)])
        while not task.done():
            await asyncio.sleep(0.2)
            peak = max(peak, fds(pid))
        return Counter(await task), peak


async def storm(gw: Gateway, raw: T.RawUpstream, n: int) -> None:
    seen = raw.seen.get("silent", 0)
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(timeout=300, limits=limits) as c:
        tasks = [asyncio.create_task(c.post(gw.base_url + "/chat/completions",
                                            json={"model": "silent", "messages": [{"role": "user", "content": "x"}]}))
                 for _ in range(n)]
        while raw.seen.get("silent", 0) < seen + n:
            await asyncio.sleep(0.2)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def wait_until(probe, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while not probe() and time.monotonic() < end:
        time.sleep(0.1)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("n", nargs="?", type=int, default=2000)
    ap.add_argument("--nofile", type=int, default=512)
    args = ap.parse_args()
    rows = []
    with T.RawUpstream() as raw:
        names = ["slow-2s", "silent", "header-bomb", "trailer-bomb"]
        gw = Gateway({"upstreams": [{"name": x, "models": [x], "base_url": raw.url(x), "api_key": "k"} for x in names],
                      "limits": {"connect_retries": 0}})
        pid = gw.proc.pid
        try:
            start = fds(pid)
            got, peak = asyncio.run(burst(gw, raw, args.n, "slow-2s"))
            rows.append((f"burst of {args.n} to a 2 s upstream", dict(got), f"{start} -> peak {peak} -> {fds(pid)}",
                         raw.open_connections()))
            asyncio.run(storm(gw, raw, args.n))
            wait_until(lambda: raw.open_connections() == 0)
            rows.append((f"{args.n} clients gone while the upstream is silent", "-", f"after: {fds(pid)}",
                         raw.open_connections()))
            for name in ("header-bomb", "trailer-bomb"):
                before = rss_mb(pid)
                got, _ = asyncio.run(burst(gw, raw, 10, name))
                rows.append((f"10 answers with a 2 MiB {name.split('-')[0]}", dict(got),
                             f"RSS {before:.0f} -> {rss_mb(pid):.0f} MB", raw.open_connections()))
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (args.nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
            n2 = args.nofile + args.nofile // 4
            got, peak = asyncio.run(burst(gw, raw, n2, "slow-2s"))
            rows.append((f"burst of {n2} with ulimit -n {args.nofile}", dict(got), f"peak {peak} -> {fds(pid)}",
                         raw.open_connections()))
            tracebacks = gw.log().count("Traceback")
        finally:
            gw.cleanup()
    print("| case | answers (status: count) | gateway fds / memory | upstream connections left |")
    print("|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(str(x) for x in r) + " |")
    print(f"\ntracebacks in the gateway log: {tracebacks}")


if __name__ == "__main__":
    main()
