"""``POST /v1/responses`` against ``POST /v1/chat/completions`` through the same gateway, in one run.

One mock upstream (``veracity mock-upstream``, request recording off; it answers both APIs from
one script), two gateways (``veracity serve``): ``off`` with bench/policies_off (every check
disabled: the cost of the route and the translation alone) and ``default`` with the shipped
policies/ (the default policy: a low-risk greeting is ``skipped``, the worked multiplication
``17 * 23 = 391`` is risk-scored and its arithmetic checked). Each gateway has two upstreams that
are the same mock: ``gpt-native`` (``responses: native``: the gateway calls the mock's
``/v1/responses``) and ``gpt-tr`` (``responses: translated``: the mock's chat completions).

Rows: ``chat`` (``/v1/chat/completions``), ``responses-native`` and ``responses-translated``
(``/v1/responses``, non-stream), the same conversation in each; ``direct-chat`` and
``direct-responses`` are the mock itself (the baselines "added" subtracts). Load: wrk (-t1,
keep-alive) at 1 and 8 connections, ``--repeat`` interleaved rounds; reported: p50 latency, added
p50 (target minus the direct row of its API, same round), requests/s and the gateway's CPU per
request (user + system from /proc), medians over the rounds.

Usage::

    .venv/bin/python bench/responses_bench.py             # writes bench/results/responses.md
    .venv/bin/python bench/responses_bench.py --seconds 2 --repeat 1 --conns 1

Needs ``wrk``. Absolute numbers depend on the machine; quote the differences between rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.gateway_bench import (BENCH, LOW_RISK_BODY, REQUEST_BODY, Server, machine_note, _load, start_mock,  # noqa: E402
                                 start_veracity, wrk)

CONFIG = """\
upstreams:
  - {name: native, models: ["gpt-native"], base_url: "${BENCH_MOCK_BASE_URL}", api_key: sk-mock-upstream}
  - {name: translated, models: ["gpt-tr"], base_url: "${BENCH_MOCK_BASE_URL}", api_key: sk-mock-upstream,
     responses: translated}
"""


def responses_body(chat: dict, model: str) -> dict:
    """The Responses request of the same conversation as the chat body ``chat``."""
    system, user = chat["messages"][0]["content"], chat["messages"][1]["content"]
    return {"model": model, "instructions": system, "input": user, "temperature": 0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=4.0, help="measured seconds per point (after a 2 s warm-up)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved rounds per point")
    ap.add_argument("--conns", default="1,8", help="connection counts, comma-separated")
    ap.add_argument("--out", type=Path, default=BENCH / "results" / "responses.md")
    args = ap.parse_args(argv)
    conns = [int(c) for c in args.conns.split(",")]
    load_start = _load()
    work = Path(tempfile.mkdtemp(prefix="responses-bench-"))
    cfg = work / "veracity.yaml"
    cfg.write_text(CONFIG)
    mock = start_mock(work)
    servers: dict[str, Server] = {}
    try:
        for name, policies in (("off", BENCH / "policies_off"), ("default", None)):
            srv = start_veracity(work, mock, cfg, name=f"veracity-{name}", policies=policies)
            if isinstance(srv, str):
                raise SystemExit(f"gateway {name}: {srv}")
            servers[name] = srv
        bodies: dict[str, Path] = {}

        def body(key: str, obj: dict) -> Path:
            p = work / f"{key}.json"
            p.write_text(json.dumps(obj))
            bodies[key] = p
            return p

        cases = []   # (gateway, question, target, url-path, body file, direct baseline key)
        for q, chat in (("low-risk", LOW_RISK_BODY), ("risky", REQUEST_BODY)):
            chat_b = body(f"chat-{q}", dict(chat, model="gpt-native"))
            nat_b = body(f"native-{q}", responses_body(chat, "gpt-native"))
            tr_b = body(f"tr-{q}", responses_body(chat, "gpt-tr"))
            for gw in ("off", "default"):
                if gw == "off" and q == "risky":
                    continue  # nothing is verified with checks off: the low-risk row says it all
                cases += [(gw, q, "chat", "/v1/chat/completions", chat_b, "direct-chat"),
                          (gw, q, "responses-native", "/v1/responses", nat_b, "direct-responses"),
                          (gw, q, "responses-translated", "/v1/responses", tr_b, "direct-responses")]
            cases += [("direct", q, "direct-chat", "/v1/chat/completions", chat_b, ""),
                      ("direct", q, "direct-responses", "/v1/responses", nat_b, "")]
        auth = "Bearer sk-bench"
        results: dict[tuple, list[dict]] = {}
        for rnd in range(args.repeat):
            for c in conns:
                for gw, q, target, path, bfile, _ in cases:
                    srv = mock if gw == "direct" else servers[gw]
                    url = srv.url + path
                    wrk(url, c, 2, bfile, auth)   # warm-up
                    cpu0 = srv.cpu_s()
                    r = wrk(url, c, args.seconds, bfile, auth)
                    cpu = srv.cpu_s() - cpu0
                    r["cpu_us"] = cpu / max(1, r["requests"]) * 1e6
                    r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
                    r["round"] = rnd
                    results.setdefault((gw, q, target, c), []).append(r)
                    print(f"round {rnd} c={c} {gw:8s} {q:9s} {target:21s} p50 {r['p50_us'] / 1000:7.3f} ms "
                          f"{r['rps']:8.0f} req/s cpu {r['cpu_us']:7.0f} us errors {r['status_errors']}", flush=True)
        lines = ["# /v1/responses against /v1/chat/completions (bench/responses_bench.py)", "",
                 f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {machine_note(load_start)}; "
                 f"{args.repeat} rounds x {args.seconds:g} s per point, wrk -t1; medians over rounds.", "",
                 "| gateway policies | question | target | conns | p50 ms | added p50 ms | req/s | gateway CPU us/req | errors |",
                 "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for c in conns:
            for gw, q, target, path, bfile, base in cases:
                runs = results[(gw, q, target, c)]
                p50 = statistics.median(r["p50_us"] / 1000 for r in runs)
                if base:
                    direct = {r["round"]: r["p50_us"] / 1000 for r in results[("direct", q, base, c)]}
                    added = statistics.median(r["p50_us"] / 1000 - direct[r["round"]] for r in runs)
                    added_s = f"{added:.3f}"
                else:
                    added_s = "-"
                cpu = "-" if gw == "direct" else f"{statistics.median(r['cpu_us'] for r in runs):,.0f}"
                errs = sum(r["status_errors"] + r["timeouts"] + r["read_errors"] for r in runs)
                lines.append(f"| {gw} | {q} | {target} | {c} | {p50:.3f} | {added_s} | "
                             f"{statistics.median(r['rps'] for r in runs):,.0f} | {cpu} | {errs} |")
        lines += ["", "`off`: bench/policies_off (checks off; chat completions then take the gateway's lean lane, "
                  "/v1/responses the normal route). `default`: the shipped default policy. `direct-*`: the mock "
                  "itself (the mock's Responses route translates its script's chat answer, so its own cost differs "
                  "from its chat route). Non-stream requests only."]
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
    finally:
        for s in servers.values():
            s.stop()
        mock.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
