"""Memory benchmark: does the gateway give memory back after refusing oversized upstream answers?

Before the fix, repeated oversized answers were each refused with a correct 502 but the
gateway's RSS climbed from 181 MiB to 1.35 GB (1.7 GB with 20 concurrent) and stayed there; an
unterminated 64 MiB SSE event took 9 s to refuse and stalled the event loop. This bench starts a
real gateway (``python -m proxy serve``, one process) against a scripted raw-socket upstream and
repeats the oversized cases, sampling the gateway's RSS (``/proc/PID/status`` ``VmRSS``) every
20 ms:

* ``chunked``: a chunked 200 body that never ends (256 KiB chunks, past ``max_response_bytes``);
* ``gzip``: a gzip bomb (``Content-Encoding: gzip``; a few hundred KiB that inflate to 4x the limit);
* ``sse-open``: one unterminated SSE event (``data: aaaa...`` with no blank line) past the limit;

each on the routes that read upstream bodies: ``chat`` (non-stream: :mod:`proxy.upstreams.http1`),
``stream`` (``stream: true``: aiohttp + :class:`proxy.wire.relay.SSERelay`) and ``embeddings`` (a
pass-through route: aiohttp, the body relayed as it arrives). Phases: warm-up with normal
answers, then the baseline RSS; every case/route ``--repeat`` times sequentially; then
``--concurrency`` requests at once per case/route; after each phase 2 s idle and the RSS again.
While the ``sse-open`` cases run, ``/healthz`` is polled: its worst latency shows event-loop
stalls. Pass: the final idle RSS is within 20% of the baseline.

Several gateway checkouts can be measured in the same run (``--root DIR``, repeatable; e.g. this
tree and ``/work/main``), each its own process against the same upstream: the comparison is a
ratio from one run on one machine, never a timed assertion.

    .venv/bin/python bench/memory_bench.py [--root . --root /work/main] [--repeat 3]
        [--concurrency 20] [--limit-mib 64] [--out bench/results/memory.md]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parent.parent

CHUNK = 256 * 1024
CASES = ("chunked", "gzip", "sse-open")
ROUTES = ("chat", "stream", "embeddings")
_OK_COMPLETION = json.dumps({
    "id": "chatcmpl-mem", "object": "chat.completion", "created": 1, "model": "ok",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
_OK_STREAM = (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"ok","choices":[{"index":0,'
              b'"delta":{"role":"assistant","content":"fine"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
#: a stream that never ends: ~1 KiB content deltas (256 KiB a write)
_EVENT = (b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
          b'"delta":{"content":"' + b"a" * 900 + b'"},"finish_reason":null}]}\n\n')
_EVENTS = _EVENT * (CHUNK // len(_EVENT))
_OK_EMBED = b'{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"ok"}'


def _gzip_bomb(size: int) -> bytes:
    """gzip of ``size`` spaces (JSON whitespace), compressed in one go: ~1/1000 of ``size``."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1 << 20)
    parts = [c.compress(block) for _ in range(size >> 20)]
    return b"".join(parts) + c.flush()


class Upstream:
    """A raw-socket upstream: the path's first segment picks the case (``/ok``, ``/ok-embed``,
    ``/chunked``, ``/gzip``, ``/sse-open``); a ``"stream": true`` body gets ``text/event-stream``.
    Oversized cases write until ``limit * 1.25`` bytes or the gateway closes the connection.
    Runs in its own process (``--serve-upstream``), so that its writing does not compete for
    the GIL with this process's clients and ``/healthz`` probe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.bomb = _gzip_bomb(4 * limit)

    @classmethod
    def spawn(cls, limit: int) -> "Upstream":
        up = cls.__new__(cls)
        up.limit = limit
        up.proc = subprocess.Popen([sys.executable, __file__, "--serve-upstream", str(limit)],
                                   stdout=subprocess.PIPE, text=True)
        up.port = int(up.proc.stdout.readline())
        return up

    def serve(self) -> None:
        async def main() -> None:
            srv = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            print(srv.sockets[0].getsockname()[1], flush=True)
            await srv.serve_forever()

        asyncio.run(main())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def url(self, case: str) -> str:
        return f"http://127.0.0.1:{self.port}/{case}/v1"

    async def _serve(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                n = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":", 1)[1])
                body = await r.readexactly(n)
                case = head.split(b" ", 2)[1].split(b"/")[1].decode()
                stream = b'"stream":true' in body.replace(b" ", b"")
                await self._answer(case, stream, w)
                await w.drain()
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            w.close()

    async def _answer(self, case: str, stream: bool, w: asyncio.StreamWriter) -> None:
        ctype = b"text/event-stream" if stream else b"application/json"
        if case == "ok":
            body = _OK_STREAM if stream else _OK_COMPLETION
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s" % (ctype, len(body), body))
            return
        if case == "ok-embed":
            w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                    % (len(_OK_EMBED), _OK_EMBED))
            return
        head = b"HTTP/1.1 200 OK\r\nContent-Type: %s\r\nTransfer-Encoding: chunked\r\n" % ctype
        if case == "gzip":
            w.write(head + b"Content-Encoding: gzip\r\n\r\n")
            data = self.bomb
            first = b""
        elif case == "sse-open":
            w.write(head + b"\r\n")
            data = None
            first = b"data: "
        else:  # chunked
            w.write(head + b"\r\n")
            data = None
            first = b""
        piece = _EVENTS if (case == "chunked" and stream) else b"a" * CHUNK
        sent, total = 0, int(self.limit * 1.25)
        if first:
            w.write(b"%x\r\n%s\r\n" % (len(first), first))
        while sent < total:
            if data is not None:
                chunk = data[sent:sent + CHUNK]
                if not chunk:
                    break
            else:
                chunk = piece
            w.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sent += len(chunk)
            await w.drain()
        w.write(b"0\r\n\r\n")


class Gateway:
    """``python -m proxy serve`` of the checkout ``root`` (one process), its RSS in bytes."""

    def __init__(self, root: Path, config: dict[str, Any]) -> None:
        self.root = root
        self.dir = tempfile.TemporaryDirectory(prefix="veracity-mem-")
        cfg = Path(self.dir.name) / "veracity.yaml"
        cfg.write_text(yaml.safe_dump(config))
        env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VERACITY_CONFIG")}
        env["PYTHONPATH"] = str(root)
        self.logf = open(Path(self.dir.name) / "gw.log", "w+")
        import socket

        with socket.socket() as s:  # a free port (the start-up line is off at --log-level warning)
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--port", str(port), "--config", str(cfg),
                                      "--log-level", "warning"], cwd=self.dir.name, env=env,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/readyz", timeout=10, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()  # never leave a half-started gateway behind
                raise SystemExit(f"gateway {root} did not start:\n{Path(self.logf.name).read_text()}")
            time.sleep(0.1)

    def rss(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.logf.close()
        self.dir.cleanup()


class Sampler:
    """Peak RSS of ``gw`` between ``reset()`` and ``peak()``, sampled every 20 ms."""

    def __init__(self, gw: Gateway) -> None:
        self.gw, self._peak, self._stop = gw, 0, False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop:
            try:
                self._peak = max(self._peak, self.gw.rss())
            except OSError:
                return
            time.sleep(0.02)

    def reset(self) -> None:
        self._peak = self.gw.rss()

    def peak(self) -> int:
        return self._peak

    def stop(self) -> None:
        self._stop = True


def _request(url: str, case: str, route: str) -> tuple[str, float]:
    """One request; returns (outcome, seconds): ``502 <code>``, ``200 error-event <code>``,
    ``aborted`` (the client connection was cut: a pass-through body over the limit), ..."""
    t0 = time.perf_counter()
    msgs = [{"role": "user", "content": "hi"}]
    try:
        with httpx.Client(timeout=300, trust_env=False) as c:
            if route == "embeddings":
                r = c.post(url + "/v1/embeddings", json={"model": case, "input": "x"})
            else:
                r = c.post(url + "/v1/chat/completions",
                           json={"model": case, "messages": msgs, "stream": route == "stream"})
            text = r.content[-2000:]
            code = ""
            m = re.search(rb'"code":\s*"([a-z_]+)"', text)
            if m:
                code = m.group(1).decode()
            if r.status_code == 200 and route == "stream":
                return f"200 error-event {code}".strip(), time.perf_counter() - t0
            return f"{r.status_code} {code}".strip(), time.perf_counter() - t0
    except httpx.HTTPError as exc:
        return f"aborted ({type(exc).__name__})", time.perf_counter() - t0


class HealthProbe:
    """Polls ``/healthz`` every 10 ms while running; ``worst`` latency in seconds."""

    def __init__(self, url: str) -> None:
        self.url, self.worst, self._stop = url, 0.0, False
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self) -> None:
        with httpx.Client(timeout=60, trust_env=False) as c:
            while not self._stop:
                t0 = time.perf_counter()
                try:
                    c.get(self.url + "/healthz")
                except httpx.HTTPError:
                    pass
                self.worst = max(self.worst, time.perf_counter() - t0)
                time.sleep(0.01)

    def stop(self) -> float:
        self._stop = True
        self.t.join(10)
        return self.worst


def _idle_rss(gw: Gateway, seconds: float = 2.0) -> int:
    time.sleep(seconds)
    return gw.rss()


def measure(root: Path, up: Upstream, limit: int, repeat: int, conc: int) -> dict[str, Any]:
    ups = [{"name": c, "models": [c], "base_url": up.url(c), "api_key": "sk-mem-bench-upstream"} for c in CASES]
    ups.append({"name": "ok", "models": ["ok"], "base_url": up.url("ok"), "api_key": "sk-mem-bench-upstream"})
    ups.append({"name": "ok-embed", "models": ["ok-embed"], "base_url": up.url("ok-embed"),
                "api_key": "sk-mem-bench-upstream"})
    cfg = {"upstreams": ups, "limits": {"max_response_bytes": limit, "connect_retries": 0}}
    gw = Gateway(root, cfg)
    sampler = Sampler(gw)
    out: dict[str, Any] = {"root": str(root), "rows": []}
    try:
        for _ in range(30):  # warm-up: imports, pools, first-request caches
            _request(gw.url, "ok", "chat")
            _request(gw.url, "ok", "stream")
            _request(gw.url, "ok-embed", "embeddings")
        out["start"] = _idle_rss(gw)
        for phase, n_at_once in (("sequential", 1), ("concurrent", conc)):
            for case in CASES:
                for route in ROUTES:
                    sampler.reset()
                    probe = HealthProbe(gw.url) if case == "sse-open" else None
                    outcomes: dict[str, int] = {}
                    times: list[float] = []
                    rounds = repeat if n_at_once == 1 else 1
                    with cf.ThreadPoolExecutor(n_at_once) as pool:
                        for _ in range(rounds):
                            for res, secs in pool.map(lambda _i: _request(gw.url, case, route), range(n_at_once)):
                                outcomes[res] = outcomes.get(res, 0) + 1
                                times.append(secs)
                    worst = probe.stop() if probe else None
                    row = {"phase": phase, "case": case, "route": route, "requests": rounds * n_at_once,
                           "outcomes": outcomes, "peak": sampler.peak(), "idle": _idle_rss(gw, 1.0),
                           "max_s": max(times), "healthz_worst_s": worst}
                    out["rows"].append(row)
                    print(f"  {Path(root).name or root} {phase} {case}/{route}: {outcomes} peak "
                          f"{row['peak'] / 2**20:.0f} MiB idle {row['idle'] / 2**20:.0f} MiB "
                          f"max {row['max_s']:.2f} s" + (f" healthz worst {worst * 1000:.0f} ms" if worst else ""),
                          flush=True)
            out[f"after_{phase}"] = _idle_rss(gw)
        # still serving normally
        out["after_ok"] = _request(gw.url, "ok", "chat")[0]
        out["end"] = _idle_rss(gw, 3.0)
    finally:
        sampler.stop()
        gw.stop()
    return out


def _mib(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def report(results: list[dict[str, Any]], args: argparse.Namespace, started: str, load: tuple[str, str]) -> str:
    lines = [
        "# Memory after oversized upstream answers (a refused answer's memory is released at once)",
        "",
        f"Run {started} UTC by `bench/memory_bench.py --repeat {args.repeat} --concurrency {args.concurrency} "
        f"--limit-mib {args.limit_mib}` on {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"load average {load[0]} at the start, {load[1]} at the end (the machine is shared: quote ratios "
        "from one run, not absolute numbers).",
        "",
        f"Each gateway is one `veracity serve` process with `limits.max_response_bytes` = {args.limit_mib} MiB "
        "against the same raw-socket upstream. RSS is `VmRSS` of the gateway process: `start` after a "
        "warm-up of 90 normal requests and 2 s idle, `peak` sampled every 20 ms during a row, `idle` 1 s "
        "after it. Cases: `chunked` (a chunked body that never ends), `gzip` (a gzip bomb: "
        f"{_mib(4 * args.limit_mib << 20)} MiB of spaces compressed), `sse-open` (one unterminated SSE event); routes: `chat` "
        "(non-stream chat completion), `stream` (`stream: true`), `embeddings` (a pass-through route). "
        "`healthz worst`: the slowest `/healthz` answer while the row ran (event-loop stalls).",
        "",
        "## Summary",
        "",
        "| gateway | start MiB | after sequential | after concurrent | end (3 s idle) | end / start | within 20%? |",
        "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        ratio = r["end"] / r["start"]
        lines.append(f"| `{r['label']}` | {_mib(r['start'])} | {_mib(r['after_sequential'])} | "
                     f"{_mib(r['after_concurrent'])} | {_mib(r['end'])} | {ratio:.2f} | "
                     f"{'yes' if ratio <= 1.2 else 'no'} |")
    for r in results:
        lines += ["", f"## `{r['label']}` ({r['root']})", "",
                  "| phase | case | route | requests | outcomes | peak MiB | idle MiB | slowest s | healthz worst ms |",
                  "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
        for row in r["rows"]:
            oc = ", ".join(f"{k} x{v}" for k, v in sorted(row["outcomes"].items()))
            hw = f"{row['healthz_worst_s'] * 1000:.0f}" if row["healthz_worst_s"] is not None else "-"
            lines.append(f"| {row['phase']} | {row['case']} | {row['route']} | {row['requests']} | {oc} | "
                         f"{_mib(row['peak'])} | {_mib(row['idle'])} | {row['max_s']:.2f} | {hw} |")
        lines.append(f"\nA normal request afterwards: `{r['after_ok']}`.")
    lines += ["", f"Reproduce: `.venv/bin/python bench/memory_bench.py --root . --root /path/to/other/checkout "
              f"--repeat {args.repeat} --concurrency {args.concurrency} --limit-mib {args.limit_mib}`", ""]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", action="append", help="gateway checkout(s) to measure (default: this one)")
    ap.add_argument("--label", action="append", help="a name per --root for the tables")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=20)
    ap.add_argument("--limit-mib", type=int, default=64)
    ap.add_argument("--out", default=None, help="write the Markdown report here")
    ap.add_argument("--serve-upstream", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_upstream:
        Upstream(args.serve_upstream).serve()
        return 0
    roots = [Path(r).resolve() for r in (args.root or [str(ROOT)])]
    labels = args.label or [r.name for r in roots]
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    load0 = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    limit = args.limit_mib << 20
    up = Upstream.spawn(limit)
    results = []
    for root, label in zip(roots, labels):
        print(f"measuring {label} ({root})", flush=True)
        res = measure(root, up, limit, args.repeat, args.concurrency)
        res["label"] = label
        results.append(res)
    up.stop()
    load1 = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report(results, args, started, (load0, load1))
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0 if all(r["end"] / r["start"] <= 1.2 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
