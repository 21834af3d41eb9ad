"""A/B: the gateway core against a minimal aiohttp proxy on the same stack, same run.

``minproxy``: a raw-ASGI proxy (uvicorn uvloop+httptools, one shared aiohttp session, orjson,
adds a ``veracity`` field): the floor for this server/client stack. ``core``: ``proxy.app`` with
the pipeline replaced by a bare forward + ``skipped`` report. ``full`` (optional): ``proxy.app``
as served (default policy). All against one ``veracity mock-upstream`` process; wrk -t1 rounds
interleaved so that machine load hits every target alike.

    .venv/bin/python bench/core_ab.py [--rounds 3] [--duration 3] [--targets minproxy,core,full]

Needs ``wrk``. Prints one Markdown table row per (round, conns, target).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

MINPROXY = r'''
import sys, aiohttp, uvicorn, orjson
UP = sys.argv[1] + "/chat/completions"
S = None
async def app(scope, receive, send):
    global S
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                S = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), trust_env=False)
                await send({"type": "lifespan.startup.complete"})
            else:
                await S.close(); await send({"type": "lifespan.shutdown.complete"}); return
    body, more = b"", True
    while more:
        m = await receive(); body += m.get("body", b""); more = m.get("more_body", False)
    async with S.post(UP, data=body, headers={"Content-Type": "application/json"}) as r:
        data = await r.read()
    d = orjson.loads(data); d["veracity"] = {"status": "skipped"}
    out = orjson.dumps(d)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(out)).encode())]})
    await send({"type": "http.response.body", "body": out})
uvicorn.run(app, host="127.0.0.1", port=0, loop="uvloop", http="httptools", access_log=False)
'''

GATEWAY = r'''
import os, sys
sys.path.insert(0, sys.argv[2]); sys.path.insert(0, os.path.join(sys.argv[2], "bench"))
os.environ["VERACITY_CONFIG"] = sys.argv[1]
import uvicorn
from proxy import app as app_mod
try:
    from proxy.pipeline import sequence
except ImportError:  # a tree before proxy/ was split by concern: proxy/pipeline.py
    sequence = app_mod.pipeline
if sys.argv[3] == "core":
    import gateway_inproc
    sequence.chat_completion = gateway_inproc._bare_pipeline
app = app_mod.app_from_env()
uvicorn.run(app, host="127.0.0.1", port=0, loop="uvloop", http="httptools", access_log=False,
            log_config=None, log_level="info", proxy_headers=False)
'''

LUA = '''wrk.method = "POST"
wrk.body = '{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}'
wrk.headers["Content-Type"] = "application/json"
'''


def _port(log: Path, proc: subprocess.Popen, timeout: float = 60) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"running on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"), re.I)
        if m:
            return int(m.group(1))
        if proc.poll() is not None:
            raise RuntimeError(log.read_text())
        time.sleep(0.1)
    raise RuntimeError(f"no port in {log}")


def _wrk(url: str, conns: int, duration: int, lua: Path) -> tuple[str, str]:
    out = subprocess.run(["wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--latency", "-s", str(lua),
                          url + "/v1/chat/completions"], capture_output=True, text=True).stdout
    p50 = re.search(r"\s50%\s+(\S+)", out)
    rps = re.search(r"Requests/sec:\s+(\S+)", out)
    return (p50.group(1) if p50 else "?"), (rps.group(1) if rps else "?")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--targets", default="minproxy,core")
    args = ap.parse_args()
    from proxy.upstreams.mock import MockUpstream

    tmp = Path(tempfile.mkdtemp(prefix="veracity-ab-"))
    lua = tmp / "post.lua"
    lua.write_text(LUA)
    procs: list[subprocess.Popen] = []
    with MockUpstream({"record_requests": False}, mode="subprocess") as mock:
        cfg = tmp / "gw.yaml"
        cfg.write_text(f'upstreams: [{{name: m, base_url: "{mock.base_url}"}}]\n')
        urls = {}
        try:
            for t in args.targets.split(","):
                log = tmp / f"{t}.log"
                if t == "minproxy":
                    cmd = [PY, "-c", MINPROXY, mock.base_url]
                else:
                    cmd = [PY, "-c", GATEWAY, str(cfg), str(ROOT), t]
                p = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT,
                                     env={**os.environ, "PYTHONPATH": str(ROOT)})
                procs.append(p)
                urls[t] = f"http://127.0.0.1:{_port(log, p)}"
            for u in urls.values():  # warm-up
                _wrk(u, 4, 1, lua)
            print("| round | conns | target | p50 | req/s |\n| ---: | ---: | --- | ---: | ---: |")
            for r in range(1, args.rounds + 1):
                for c in (1, 32):
                    for t, u in urls.items():
                        p50, rps = _wrk(u, c, args.duration, lua)
                        print(f"| {r} | {c} | {t} | {p50} | {rps} |", flush=True)
        finally:
            for p in procs:
                p.terminate()
            for p in procs:
                p.wait(10)


if __name__ == "__main__":
    main()
