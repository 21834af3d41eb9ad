"""Does the gateway's event loop stay free while a search backend answers something huge?

Starts ``veracity serve`` (from ``--root``, default this checkout) with the scripted mock
upstream and a scripted SearXNG on 127.0.0.1, then for each answer kind sends ``--requests``
facts-checked chat requests one after the other while a second thread sends ``GET /healthz``
back to back (10 ms apart) and records how long each took:

* ``big``   -- one result whose snippet is 7 MB of prose (the body is just under 7.2 MB, under
  the 8 MB body cap);
* ``deep``  -- one result whose snippet is 50,000 nested ``<div><span>`` (2.7 MB);
* ``gzip``  -- ``big`` sent with ``Content-Encoding: gzip`` (27 kB on the wire);
* ``bomb``  -- a gzip body that inflates to 64 MB (the decoded-size cap must stop it);
* ``small`` -- an ordinary 2 kB answer (the baseline).

Printed (and written with ``--out``): per kind, the request wall time (p50, max), the facts
deadline of the policy (20 s), and the ``/healthz`` latency p50 / p99 / max over the probes
sent while a request was in flight. The issue's target: ``/healthz`` within 100 ms.

    python bench/loop_stall_bench.py --out bench/results/loop-stall.md
    python bench/loop_stall_bench.py --root /path/to/older/checkout --label before
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from proxy.upstreams.mock import MockUpstream  # noqa: E402
from tests.fixtures.oversized_bodies import ANSWER, bodies  # noqa: E402
from tests.fixtures.policies import rag_policy  # noqa: E402
from tests.fixtures.search_servers import FakeAPI  # noqa: E402


def start_gateway(root: Path, cfg: dict, tmp: Path) -> tuple[subprocess.Popen, str]:
    cfg_path = tmp / "veracity.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    log = open(tmp / "gateway.log", "w")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VERACITY_CONFIG")}
    env["PYTHONPATH"] = str(root)
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--config", str(cfg_path)], cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        m = re.search(r"Uvicorn running on http://[\d.]+:(\d+)", (tmp / "gateway.log").read_text(errors="replace"))
        if m:
            url = f"http://127.0.0.1:{m.group(1)}"
            while time.monotonic() < deadline:
                try:
                    if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                        return proc, url
                except httpx.HTTPError:
                    pass
                time.sleep(0.1)
        if proc.poll() is not None:
            break
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("gateway did not start:\n" + (tmp / "gateway.log").read_text(errors="replace"))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else float("nan")


def run_kind(url: str, kind: str, n: int) -> dict:
    probes: list[tuple[float, float]] = []
    windows: list[tuple[float, float]] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(timeout=300) as c:
            while not stop.is_set():
                t0 = time.monotonic()
                c.get(url + "/healthz")
                probes.append((t0, time.monotonic()))
                stop.wait(0.01)

    th = threading.Thread(target=probe, daemon=True)
    th.start()
    outcomes = []
    with httpx.Client(timeout=600) as c:
        for _ in range(n):
            t0 = time.monotonic()
            r = c.post(url + "/v1/chat/completions", headers={"Authorization": "Bearer sk-test",
                                                              "x-veracity-policy": f"web-{kind}"},
                       json={"model": "gpt-test", "messages": [{"role": "user", "content": "[case:web] Eiffel?"}]})
            windows.append((t0, time.monotonic()))
            rep = r.json().get("veracity", {})
            outcomes.append(",".join(ch["outcome"] for ch in rep.get("checks", []) if ch["verifier"] == "facts"))
    stop.set()
    th.join()
    inflight = [(b - a) * 1000 for a, b in probes if any(w0 <= a <= w1 for w0, w1 in windows)]
    req = [(b - a) for a, b in windows]
    return {"kind": kind, "requests": n, "req_p50_s": statistics.median(req), "req_max_s": max(req),
            "probes": len(inflight), "hz_p50_ms": pct(inflight, 0.5), "hz_p99_ms": pct(inflight, 0.99),
            "hz_max_ms": max(inflight) if inflight else float("nan"), "outcomes": sorted(set(outcomes))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=str(HERE.parent), help="checkout whose gateway runs (default: this one)")
    ap.add_argument("--label", default="after")
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--kinds", default="small,big,deep,gzip,bomb")
    ap.add_argument("--out", help="append the table to this Markdown file")
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    all_bodies = bodies()
    apis: dict[str, FakeAPI] = {}
    with tempfile.TemporaryDirectory(prefix="loop-stall-") as d:
        tmp = Path(d)
        (tmp / "policies").mkdir()
        for kind in kinds:
            data, headers = all_bodies[kind]
            api = apis[kind] = FakeAPI().__enter__()
            api.routes["/search"] = lambda p, q, h, dd=data, hd=headers: (200, "application/json", dd, hd)
            doc = rag_policy(f"web-{kind}", {"backends": {"use": ["searxng"], "timeout_s": 10,
                                                          "searxng": {"url": api.url + "/search"}},
                                             "cache": "off", "unconfirmed_note": False})
            (tmp / "policies" / f"web-{kind}.yaml").write_text(yaml.safe_dump(doc))
        mock = MockUpstream({"rules": [{"name": "web", "match": {"last_user": r"\[case:web\]"},
                                        "reply": {"content": ANSWER}}], "models": ["gpt-test"]}).start()
        cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
               "policies": {"dir": str(tmp / "policies"), "check_interval_s": 0},
               "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
        proc, url = start_gateway(Path(args.root), cfg, tmp)
        try:
            rows = [run_kind(url, kind, args.requests) for kind in kinds]
        finally:
            proc.terminate()
            proc.wait(30)
            mock.stop()
            for api in apis.values():
                api.__exit__(None, None, None)
    sizes = {k: len(v[0]) for k, v in all_bodies.items()}
    lines = [f"### {args.label} (`{Path(args.root).name}`, {args.requests} requests per kind, "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
             "| answer | bytes on the wire | request p50 s | request max s | /healthz probes in flight | "
             "/healthz p50 ms | p99 ms | max ms | facts outcomes |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {sizes[r['kind']]:,} | {r['req_p50_s']:.2f} | {r['req_max_s']:.2f} | "
                     f"{r['probes']} | {r['hz_p50_ms']:.1f} | {r['hz_p99_ms']:.1f} | {r['hz_max_ms']:.1f} | "
                     f"{' / '.join(r['outcomes'])} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
