"""Stream latency under load: does the corked transport (proxy/_asgi/inbound.py ``CorkedTransport``,
writes held to the event loop's next turn while other requests are in flight) delay a streamed
answer's chunks?

One mock upstream (its own process) scripts a probe stream: 40 one-character chunks, one every
20 ms. ``veracity serve`` (bench/veracity_bench.yaml, every check off) relays it to a raw-socket
client that stamps each SSE event's arrival. Measured for this tree and, with ``--base-tree DIR``,
another checkout (e.g. the tree before the cork: ``git archive d32b318^ | tar -x -C DIR``), each
idle and under background load (wrk at ``--load`` connections posting non-stream chat
completions to the same gateway, so the server is busy and the cork active). Reported per
(tree, load): time to the first event (request written -> first ``data:`` event read), and the gap
between consecutive events (20 ms scripted: the excess over 20 ms is delay added on the way),
p50 / p99 / max over ``--probes`` streams (the last event, the gateway's report after the
upstream's end, is left out: the mock paces that end too), plus the background requests/s.

Usage::

    .venv/bin/python bench/cork_latency.py --base-tree /tmp/precork --out bench/results/cork_latency.md

Numbers depend on the machine and its other load (2 shared cores here): compare rows of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gateway_bench as gb  # noqa: E402

GAP_MS = 20
PROBE_SCRIPT = {
    "record_requests": False,
    "models": ["mock-model"],
    "rules": [{"match": {"last_user": "^probe"}, "reply": {"content": "x" * 40, "stream": {"chunk_size": 1, "delay_ms": GAP_MS}}},
              gb.MOCK_SCRIPT["rules"][1]],
}


def probe(port: int) -> tuple[float, list[float]]:
    """One stream: (ms to the first event, [ms between consecutive events])."""
    body = json.dumps({"model": "mock-model", "stream": True, "messages": [{"role": "user", "content": "probe"}]}).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: b\r\nAuthorization: Bearer sk-bench\r\n"
           b"Content-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(body)) + body
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        t0 = time.perf_counter()
        s.sendall(req)
        stamps: list[float] = []
        seen = 0
        data = b""
        while True:
            chunk = s.recv(65536)
            now = time.perf_counter()
            if not chunk:
                break
            data += chunk
            n = data.count(b"data: {")
            stamps += [now] * (n - seen)
            seen = n
    assert b"data: [DONE]" in data, data[-300:]
    ms = [(t - t0) * 1000 for t in stamps]
    # the last event (the gateway's report) follows the upstream's end, which the mock paces too
    # ([DONE] and the body's end, 20 ms each): its gap is the mock's, left out
    return ms[0], [b - a for a, b in zip(ms, ms[1:-1])]


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-tree", type=Path, help="another checkout to measure beside this one")
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--load", type=int, default=32, help="wrk connections of background load")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "cork_latency.md")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="cork-lat-"))
    script = work / "mock.json"
    script.write_text(json.dumps(PROBE_SCRIPT))
    mport = gb.free_port()
    proc, log = gb._spawn("mock", [gb.PY, "-m", "proxy.upstreams.mock", "--script", str(script), "--port", str(mport),
                                   "--no-record"], dict(os.environ, PYTHONPATH=str(gb.ROOT)), work)
    mock = gb.Server("mock", proc, f"http://127.0.0.1:{mport}", log)
    if not gb._wait_ready(mock.url + "/v1/models", proc, 20):
        raise SystemExit(f"mock did not start: {log}")
    body_file = work / "body.json"
    body_file.write_text(json.dumps(gb.REQUEST_BODY))
    trees = [("this tree", gb.ROOT)] + ([("base tree", args.base_tree.resolve())] if args.base_tree else [])
    rows = []
    try:
        for name, tree in trees:
            srv = gb.start_veracity(work, mock, tree / "bench" / "veracity_bench.yaml", name=name.replace(" ", "_"),
                                    policies=tree / "bench" / "policies_off", tree=tree)
            if isinstance(srv, str):
                raise SystemExit(f"{name}: {srv}")
            port = int(srv.url.rsplit(":", 1)[1])
            try:
                for _ in range(3):
                    probe(port)  # warm-up
                for load in (0, args.load):
                    wrk = None
                    if load:
                        env = dict(os.environ, WRK_BODY_FILE=str(body_file), WRK_AUTH="Bearer sk-bench")
                        wrk = subprocess.Popen(["wrk", "-t1", f"-c{load}", "-d600s", "--timeout", "10s", "-s",
                                                str(gb.BENCH / "wrk_post.lua"), srv.url + "/v1/chat/completions"],
                                               env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
                        time.sleep(1.0)
                    firsts, gaps = [], []
                    for _ in range(args.probes):
                        f, g = probe(port)
                        firsts.append(f)
                        gaps += g
                    rps = ""
                    if wrk is not None:
                        wrk.send_signal(2)  # SIGINT: wrk prints its summary
                        out = wrk.communicate(timeout=30)[0]
                        line = next((x for x in out.splitlines() if x.startswith("WRKJSON ")), None)
                        if line:
                            r = json.loads(line[8:])
                            rps = f"{r['requests'] / (r['duration_us'] / 1e6):,.0f}"
                    rows.append((name, load, firsts, gaps, rps))
                    print(name, load, f"first p50 {statistics.median(firsts):.1f} ms, gap p50 {statistics.median(gaps):.1f}"
                          f" p99 {pct(gaps, 0.99):.1f} max {max(gaps):.1f} ms, load {rps} req/s", flush=True)
            finally:
                srv.stop()
    finally:
        mock.stop()
    lines = ["# Stream latency with the corked transport", "",
             f"`bench/cork_latency.py` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
             f"{os.getloadavg()[0]:.2f} at the end): {args.probes} probe streams per row, 40 events each, "
             f"scripted {GAP_MS} ms apart; background load: wrk -t1 at the given connections posting non-stream "
             "chat completions to the same gateway (checks off)."
             + (f" Base tree: `{args.base_tree}`." if args.base_tree else ""), "",
             "| tree | load conns | first event p50 / p99 ms | gap p50 / p99 / max ms | load req/s |",
             "|---|---|---|---|---|"]
    for name, load, firsts, gaps, rps in rows:
        lines.append(f"| {name} | {load} | {statistics.median(firsts):.1f} / {pct(firsts, 0.99):.1f} | "
                     f"{statistics.median(gaps):.1f} / {pct(gaps, 0.99):.1f} / {max(gaps):.1f} | {rps or '-'} |")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
