"""Streams verified as they flow: the ``verified`` stream mode against ``passthrough`` and
``buffer``, in one run, over a scripted upstream that writes at a realistic pace.

The mock upstream (``proxy.upstreams.mock``, its own process) streams every answer 4
characters per delta, one delta every 20 ms (~200 characters a second, a fast chat model).
The gateway (``veracity serve``) runs the shipped ``default`` policy with only
``streaming.mode`` changed (and ``streaming.continuation`` for the ``verified-whole`` row).
A raw HTTP client stamps every content byte it receives. Three answers:

* low-risk: six sentences about Paris (nothing to check: risk below the threshold);
* risky-right: a product stated right (``1234 × 5678 = 7,006,652``), six sentences;
* risky-wrong: the same answer with ``7,006,552``; the scripted model answers a continuation
  round with the rest of the answer and an ordinary correction round with the whole corrected
  answer (prefix repeated word for word: the best case for ``whole``).

Measured per mode (median over ``--repeat`` runs):

* time to the first content byte (ms, from the request);
* hold-back per unit: for each unit of the answer (:func:`proxy.pipeline.units.split_units`),
  when the client had it in this mode minus when it had it in ``passthrough`` (same run
  order, same text); and *units behind*: how many later units ``passthrough`` had already
  delivered when this mode delivered a unit (0 = only the unit being checked was held);
* risky-wrong: whether the wrong value ever reached the client, the gap from the failed unit's
  arrival in ``passthrough`` to the first corrected byte, the continuation's completion tokens;
* a client that leaves mid-correction: ms from the client closing to each upstream call seeing
  its connection closed (the mock records the time).

Floors (issue "Streams verified as they flow"): low-risk first byte within +50 ms of
passthrough; risky-right median hold-back at most the unit being checked (units behind = 0);
risky-wrong never relays the failed claim.

    PYTHONPATH=. .venv/bin/python bench/verified_stream_bench.py [--repeat 5] [--out bench/results/verified-stream.md]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.pipeline.units import split_units  # noqa: E402
from proxy.pipeline.verified_stream import CONTINUE_INSTRUCTION  # noqa: E402
from proxy.upstreams.mock import MockUpstream  # noqa: E402
from tests.conftest import Gateway  # noqa: E402

CHUNK, PACE_MS = 4, 20
LOW = ("Paris is the capital of France. It lies on the Seine river in the north of the country. "
       "The city is known for its museums, its cafés and its long avenues. Many visitors start with a "
       "walk along the river. In spring the parks are full of people. Evenings are calm in most quarters.")
RIGHT_V, WRONG_V = f"{1234 * 5678:,}", "7,006,552"
RIGHT = ("Let me work it out step by step. We multiply the two numbers. 1234 × 5678 = {v}. So the product is {v}. "
         "Multiplying is easiest when you split one factor into thousands, hundreds, tens and ones. "
         "I hope this helps with your homework.")
CUT = RIGHT.index(" 1234 ×")
QUESTIONS = {"low-risk": "[b:low] Tell me about Paris.", "risky-right": "[b:right] What is 1234*5678?",
             "risky-wrong": "[b:wrong] What is 1234*5678?"}
MODES = {"passthrough": {"mode": "passthrough"}, "buffer": {"mode": "buffer"},
         "verified": {"mode": "verified", "continuation": "continue"},
         "verified-whole": {"mode": "verified", "continuation": "whole"}}


def _script() -> dict[str, Any]:
    pace = {"chunk_size": CHUNK, "delay_ms": PACE_MS}
    cont = CONTINUE_INSTRUCTION.split(":")[0][:40]
    right = RIGHT.format(v=RIGHT_V)
    rules = [
        {"name": "slow-cont", "match": {"any_message": r"\[b:slow\]", "last_user": cont},
         "reply": {"content": right[CUT:], "stream": pace, "delay_ms": 3000}},
        {"name": "wrong-cont", "match": {"any_message": r"\[b:wrong\]", "last_user": cont},
         "reply": {"content": right[CUT:], "stream": pace}},
        {"name": "wrong-whole", "match": {"any_message": r"\[b:wrong\]", "last_user": "Fix these errors"},
         "reply": {"content": right, "stream": pace}},
        {"name": "low", "match": {"last_user": r"\[b:low\]"}, "reply": {"content": LOW, "stream": pace}},
        {"name": "right", "match": {"last_user": r"\[b:right\]"}, "reply": {"content": right, "stream": pace}},
        {"name": "wrong", "match": {"last_user": r"\[b:(wrong|slow)\]"},
         "reply": {"content": RIGHT.format(v=WRONG_V), "stream": pace}},
    ]
    return {"rules": rules, "models": ["gpt-bench"], "record_requests": True, "max_recorded": 100000}


def _policies(pdir: Path) -> None:
    base = yaml.safe_load((ROOT / "policies" / "default.yaml").read_text())
    for name, streaming in MODES.items():
        doc = json.loads(json.dumps(base))
        doc["name"] = f"bench-{name}"
        doc["streaming"] = {**doc.get("streaming", {}), **streaming}
        (pdir / f"bench-{name}.yaml").write_text(yaml.safe_dump(doc))


def run_one(http: httpx.Client, url: str, mode: str, question: str) -> dict[str, Any]:
    """One streamed request: content arrival times (s from the request), text, report."""
    t0 = time.perf_counter()
    arrivals: list[tuple[float, int]] = []
    text, report, buf = "", None, b""
    with http.stream("POST", url + "/chat/completions",
                     headers={"authorization": "Bearer sk-bench", "x-veracity-policy": f"bench-{mode}"},
                     json={"model": "gpt-bench", "stream": True,
                           "messages": [{"role": "user", "content": question}]}) as r:
        for part in r.iter_raw():
            now = time.perf_counter() - t0
            buf += part
            while b"\n\n" in buf:
                frame, buf = buf.split(b"\n\n", 1)
                if not frame.startswith(b"data: ") or frame == b"data: [DONE]":
                    continue
                chunk = json.loads(frame[6:])
                report = chunk.get("veracity") or report
                for ch in chunk.get("choices") or []:
                    piece = (ch.get("delta") or {}).get("content")
                    if piece:
                        text += piece
                        arrivals.append((now, len(text)))
    return {"arrivals": arrivals, "text": text, "report": report, "end": time.perf_counter() - t0}


def _at(arrivals: list[tuple[float, int]], offset: int) -> float:
    for t, n in arrivals:
        if n >= offset:
            return t
    return float("nan")


def _unit_ends(text: str) -> list[int]:
    ends, pos = [], 0
    for u in split_units(text):
        pos += len(u.text)
        if u.checkable:
            ends.append(pos)
    return ends


def _med(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def _p90(xs: list[float]) -> float:
    xs = sorted(x for x in xs if x == x)
    return xs[min(len(xs) - 1, int(0.9 * len(xs)))] if xs else float("nan")


def leave_mid_correction(http: httpx.Client, url: str, mock: MockUpstream) -> dict[str, float]:
    """A client that leaves while the continuation is awaited: how long before it the client's
    upstream stream was closed (at the failed unit) and how soon after it the continuation was
    (the mock records when it saw each connection close)."""
    mock.reset()
    with http.stream("POST", url + "/chat/completions",
                     headers={"authorization": "Bearer sk-bench", "x-veracity-policy": "bench-verified"},
                     json={"model": "gpt-bench", "stream": True,
                           "messages": [{"role": "user", "content": "[b:slow] What is 1234*5678?"}]}) as r:
        left = 0.0
        for _ in r.iter_raw():
            if any(q.get("rule") == "slow-cont" for q in mock.requests()):
                left = time.time()  # leaving the loop closes the response at once
                break
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reqs = {q.get("rule"): q for q in mock.requests() if q.get("rule") in ("wrong", "slow-cont")}
        evs = {k: [e for e in q["events"] if e.get("event") == "client_disconnected"] for k, q in reqs.items()}
        if len(evs) == 2 and all(evs.values()):
            return {"first stream closed before the client left (ms)": (left - evs["wrong"][0]["time"]) * 1000.0,
                    "continuation closed after the client left (ms)": (evs["slow-cont"][0]["time"] - left) * 1000.0}
        time.sleep(0.05)
    return {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="vstream-bench-"))
    pdir = tmp / "policies"
    pdir.mkdir()
    _policies(pdir)
    mock = MockUpstream(_script(), mode="subprocess").start()
    gw = Gateway({"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
                  "policies": {"dir": str(pdir), "check_interval_s": 0},
                  "verification": {"budget_db": str(tmp / "budget.sqlite3")}})
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        with httpx.Client(timeout=120, trust_env=False) as http:
            for q in QUESTIONS.values():  # warm-up: imports, first verifications
                for mode in MODES:
                    run_one(http, gw.base_url, mode, q)
            for _ in range(args.repeat):
                for answer, q in QUESTIONS.items():
                    for mode in MODES:  # interleaved: every mode sees the same machine load
                        runs.setdefault((answer, mode), []).append(run_one(http, gw.base_url, mode, q))
            leave = leave_mid_correction(http, gw.base_url, mock)
    finally:
        gw.stop()
        mock.stop()
    lines = table(runs, args.repeat, leave)
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


def table(runs: dict[tuple[str, str], list[dict[str, Any]]], repeat: int, leave: dict[str, float]) -> list[str]:
    out = ["# Verified streams: first byte and hold-back per unit (bench/verified_stream_bench.py)", "",
           f"Command: `PYTHONPATH=. .venv/bin/python bench/verified_stream_bench.py --repeat {repeat} "
           "--out bench/results/verified-stream.md` (2 shared cores, loopback).", "",
           f"Scripted upstream: {CHUNK} characters per delta every {PACE_MS} ms; shipped `default` policy, only "
           f"`streaming` changed; median of {repeat} interleaved runs per cell. Hold-back: when the client had "
           "a unit minus when it had it in `passthrough` (same run); units behind: later units `passthrough` "
           "had already delivered when this mode delivered a unit.", "",
           "| answer | mode | first content byte ms | vs passthrough | hold-back/unit median ms | p90 ms "
           "| units behind (median / max) | whole answer ms | status | wrong value relayed |",
           "|---|---|---:|---:|---:|---:|---|---:|---|---|"]
    floors = {}
    for answer in QUESTIONS:
        pt = runs[(answer, "passthrough")]
        for mode in MODES:
            rs = runs[(answer, mode)]
            first = [r["arrivals"][0][0] * 1000 if r["arrivals"] else float("nan") for r in rs]
            first_pt = [r["arrivals"][0][0] * 1000 for r in pt]
            holds, behind = [], []
            if answer != "risky-wrong" or mode == "passthrough":
                for r, p in zip(rs, pt):
                    ends = _unit_ends(p["text"])
                    if r["text"] != p["text"]:
                        continue
                    for k, e in enumerate(ends):
                        tv = _at(r["arrivals"], e)
                        holds.append((tv - _at(p["arrivals"], e)) * 1000)
                        behind.append(sum(1 for e2 in ends[k + 1:] if _at(p["arrivals"], e2) < tv))
            statuses = sorted({(r["report"] or {}).get("status", "?") for r in rs})
            wrong = sum(WRONG_V in r["text"] for r in rs)
            diff = _med(first) - _med(first_pt)
            out.append(f"| {answer} | {mode} | {_med(first):.0f} | {diff:+.0f} | "
                       + (f"{_med(holds):.0f} | {_p90(holds):.0f} | {_med(behind):.0f} / {max(behind)}" if holds
                          else "- | - | -")
                       + f" | {_med([r['end'] * 1000 for r in rs]):.0f} | {', '.join(statuses)} | {wrong}/{len(rs)} |")
            floors[(answer, mode)] = {"first_diff": diff, "behind": _med(behind) if behind else None, "wrong": wrong}
    out += ["", "## Risky-wrong: the correction", "",
            "| mode | gap: failed unit complete upstream -> first corrected byte, ms | continuation completion "
            "tokens | upstream calls | wrong value relayed |", "|---|---:|---:|---:|---|"]
    pt = runs[("risky-wrong", "passthrough")]
    for mode in ("buffer", "verified", "verified-whole"):
        rs = runs[("risky-wrong", mode)]
        gaps, toks, calls = [], [], []
        for r, p in zip(rs, pt):
            failed_end = _at(p["arrivals"], CUT + len(" 1234 × 5678 = 7,006,552."))
            gaps.append((_at(r["arrivals"], CUT + 1) - failed_end) * 1000)
            rep = r["report"] or {}
            cs = (rep.get("extra_calls") or (rep.get("stream") or {}).get("calls") or [])
            toks.append(sum(((c.get("usage") or {}).get("completion_tokens") or 0) for c in cs
                            if c.get("kind") == "continuation") if cs else float("nan"))
            calls.append((rep.get("cost") or {}).get("upstream_calls", 0))
        tok = f"{_med(toks):.0f}" if mode != "buffer" else "- (whole answer)"
        out.append(f"| {mode} | {_med(gaps):.0f} | {tok} | {_med(calls):.0f} | "
                   f"{sum(WRONG_V in r['text'] for r in rs)}/{len(rs)} |")
    out += ["", "## A client that leaves mid-correction", "",
            "A risky-wrong answer whose continuation is slow to start (3 s); the client leaves while it is "
            "awaited. Times as the mock upstream recorded the connections closing:", ""]
    out += [f"- {k}: {v:.1f}" for k, v in leave.items()] or ["- not measured (events missing)"]
    out.append("")
    ok_first = floors[("low-risk", "verified")]["first_diff"] <= 50
    ok_hold = floors[("risky-right", "verified")]["behind"] == 0
    ok_wrong = floors[("risky-wrong", "verified")]["wrong"] == 0 and floors[("risky-wrong", "verified-whole")]["wrong"] == 0
    out += ["## Floors", "",
            f"- low-risk first content byte within +50 ms of passthrough: "
            f"{floors[('low-risk', 'verified')]['first_diff']:+.0f} ms -> {'met' if ok_first else 'NOT met'}",
            f"- risky-right held back by at most the unit being checked (median units behind = 0): "
            f"{floors[('risky-right', 'verified')]['behind']} -> {'met' if ok_hold else 'NOT met'}",
            f"- risky-wrong never relays the failed claim: {'met' if ok_wrong else 'NOT met'}"]
    return out


if __name__ == "__main__":
    raise SystemExit(main())
