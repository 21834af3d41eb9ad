"""``make demo``: the main job on real input.

Starts a scripted upstream that replays real model answers, starts the gateway (``veracity
serve``) in front of it, sends every case through the real ``openai`` SDK, and prints what
Veracity did: caught, corrected, passed, false alarms, added latency.

Cases (``$VERACITY_CASES``, default ``<repo>/../shared/cases``; see each folder's SOURCE.md):

- math: GSM8K questions with GPT-3 solutions labelled ``is_correct`` (calculator notes
  ``<<...>>`` stripped, so the answer is plain model text). Wrong solutions are mostly
  reasoning errors, which an arithmetic check cannot see; the table shows that honestly.
- code: HumanEval problems with GPT-4 solutions (Reflexion logs), labelled by ``is_solved``.
- citations: ChatGPT references hand-labelled real or fabricated (Walters & Wilder 2023); the
  offline library is the real bibliographic records of the same folder plus the real labelled
  entries (so a real reference can be found; coverage is not what this measures).

When the model is re-asked with evidence, the scripted upstream replays a known-good answer
(GSM8K's reference solution, HumanEval's canonical solution, a real reference): the demo shows
the gateway's loop end to end, not a live model's ability to fix itself.

Without a cases folder (a fresh clone), the examples shipped in ``proxy/demo/examples.jsonl``
run instead. Options: ``--per-label N`` (cases per kind and label, default 8), ``--kinds``,
``--seed``, ``--out FILE`` (also write the table as Markdown).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXAMPLES = ROOT / "proxy" / "demo" / "examples.jsonl"
_NOTE = re.compile(r"<<[^>]*>>")


def cases_dir() -> Path:
    return Path(os.environ.get("VERACITY_CASES") or ROOT.parent / "shared" / "cases")


# ----------------------------------------------------------------------------- case loading


def _math(d: Path, n: int, rng: random.Random) -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in (d / "math" / "example_model_solutions.jsonl").open()]
    wrong, right = [], []
    for i, r in enumerate(rows):
        for sysname in ("175b_verification", "6b_verification", "175b_finetuning", "6b_finetuning"):
            s = r.get(sysname) or {}
            item = {"kind": "math", "id": f"gsm8k-{i}-{sysname}", "question": r["question"],
                    "answer": _NOTE.sub("", s.get("solution", "")),
                    "fix": _NOTE.sub("", r["ground_truth"]), "wrong": not s.get("is_correct")}
            (wrong if item["wrong"] else right).append(item)
    return rng.sample(wrong, min(n, len(wrong))) + rng.sample(right, min(n, len(right)))


def _code(d: Path, n: int, rng: random.Random) -> list[dict[str, Any]]:
    canon = {}
    with gzip.open(d / "code" / "HumanEval.jsonl.gz", "rt") as fh:
        for line in fh:
            r = json.loads(line)
            canon[r["task_id"]] = r["prompt"] + r["canonical_solution"]
    rows = [json.loads(x) for x in (d / "code" / "humaneval_py_gpt4_simple.jsonl").open()]
    wrong, right = [], []
    for r in rows:
        item = {"kind": "code", "id": r["task_id"], "question": "Complete this function:\n\n" + r["prompt"],
                "answer": f"```python\n{r['solution']}\n```", "fix": f"```python\n{canon.get(r['task_id'], '')}\n```",
                "wrong": str(r["is_solved"]).lower() != "true"}
        (wrong if item["wrong"] else right).append(item)
    return rng.sample(wrong, min(n, len(wrong))) + rng.sample(right, min(n, len(right)))


def _citations(d: Path, n: int, rng: random.Random, tmp: Path) -> tuple[list[dict[str, Any]], str]:
    from verifiers.citations import build_index
    from verifiers.citations.sources.local_index import _from_fields
    from verifiers.citations._styles import render

    entries = [json.loads(x) for x in (d / "citations" / "supplement_chatgpt_citations.jsonl").open()]
    valid = [e for e in entries if e["label"] == "VALID"]
    fake = [e for e in entries if e["label"] == "HALLUCINATED"]
    index = tmp / "library.sqlite3"
    own = [r for e in valid for r in [_from_fields(e["fields"], "own")] if r]
    files = [d / "citations" / f for f in ("valid_entries_dblp.jsonl", "raw_crossdomain_valid.jsonl",
                                            "journal_articles.jsonl")]
    build_index([f for f in files if f.exists()], index, records=own)

    def answer(e: dict[str, Any]) -> str:
        return f"This is discussed in the literature.\n\nReferences\n\n1. {render(e['fields'], 'apa')}\n"

    picked_fake = rng.sample(fake, min(n, len(fake)))
    picked_valid = rng.sample(valid, min(n, len(valid)))
    out = []
    for e in picked_fake + picked_valid:
        out.append({"kind": "citations", "id": e["bibtex_key"], "question": "Give me a reference on "
                    + (e["fields"].get("title") or "this topic") + ".", "answer": answer(e),
                    "fix": answer(rng.choice(valid)), "wrong": e["label"] == "HALLUCINATED"})
    return out, str(index)


def load_cases(per_label: int, kinds: list[str], seed: int, tmp: Path) -> tuple[list[dict[str, Any]], str, str]:
    """(cases, citation index path, where they came from)."""
    d = cases_dir()
    rng = random.Random(seed)
    if (d / "math").is_dir() or (d / "code").is_dir() or (d / "citations").is_dir():
        cases: list[dict[str, Any]] = []
        index = ""
        if "math" in kinds and (d / "math").is_dir():
            cases += _math(d, per_label, rng)
        if "code" in kinds and (d / "code").is_dir():
            cases += _code(d, per_label, rng)
        if "citations" in kinds and (d / "citations").is_dir():
            cit, index = _citations(d, per_label, rng, tmp)
            cases += cit
        return cases, index, str(d)
    return _shipped(kinds, tmp)


def _shipped(kinds: list[str], tmp: Path) -> tuple[list[dict[str, Any]], str, str]:
    from verifiers.citations import Record, build_index

    rows = [json.loads(x) for x in EXAMPLES.open() if x.strip()]
    records = [Record(**r["record"]) for r in rows if r.get("kind") == "record"]
    index = tmp / "library.sqlite3"
    build_index([], index, records=records)
    cases = [r for r in rows if r.get("kind") in kinds]
    return cases, str(index), f"shipped examples ({EXAMPLES.relative_to(ROOT)})"


# --------------------------------------------------------------------------------- running


def _script(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """One rule per case, matched on its model name: the real answer, then the fix."""
    return {"models": [c["model"] for c in cases],
            "rules": [{"name": c["model"], "match": {"model": c["model"]},
                       "replies": [{"content": c["answer"]}, {"content": c["fix"]}]} for c in cases]}


def _policy(index: str) -> dict[str, Any]:
    return {"name": "demo", "description": "make demo: verify, correct once with evidence, annotate",
            "on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 1},
            "verifiers": {"code": {"timeout_ms": 30000, "sandbox": {"backend": os.environ.get("VERACITY_DEMO_SANDBOX", "auto")}},
                          "citations": {"sources": {"use": [], "local_index": {"path": index},
                                                    "cache": {"backend": "none"}, "deadline": 5.0}}},
            "budgets": {"request": {"extra_calls": 2, "extra_tokens": 20000, "deadline_ms": 60000}}}


def _start_gateway(cfg: dict[str, Any], tmp: Path) -> tuple[subprocess.Popen, str, Any]:
    import yaml

    path = tmp / "veracity.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = open(tmp / "gateway.log", "w")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VERACITY_CONFIG")}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--config", str(path), "--host", "127.0.0.1",
                             "--port", "0"], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            cwd=tmp)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        m = re.search(r"Uvicorn running on http://[\d.]+:(\d+)", (tmp / "gateway.log").read_text(errors="replace"))
        if m:
            return proc, f"http://127.0.0.1:{m.group(1)}", log
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.terminate()
    raise SystemExit("gateway did not start:\n" + (tmp / "gateway.log").read_text(errors="replace")[-3000:])


def run(cases: list[dict[str, Any]], index: str, tmp: Path) -> list[dict[str, Any]]:
    import httpx
    import openai
    import yaml

    from proxy.upstreams.mock import MockUpstream

    for i, c in enumerate(cases):
        c["model"] = f"demo-{i}"
    pdir = tmp / "policies"
    pdir.mkdir()
    (pdir / "demo.yaml").write_text(yaml.safe_dump(_policy(index)))
    mock = MockUpstream(_script(cases)).start()
    proc = log = None
    try:
        cfg = {"upstreams": [{"name": "replay", "models": ["*"], "base_url": mock.base_url}],
               "policies": {"dir": str(pdir)}, "keys": [],
               "verification": {"audit": str(tmp / "audit.jsonl")}}
        proc, url, log = _start_gateway(cfg, tmp)
        for _ in range(200):
            try:
                if httpx.get(url + "/readyz", timeout=2, trust_env=False).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        client = openai.OpenAI(base_url=url + "/v1", api_key="sk-demo", max_retries=0, timeout=120,
                               default_headers={"x-veracity-policy": "demo"})
        results = []
        for c in cases:
            t0 = time.perf_counter()
            raw = client.chat.completions.with_raw_response.create(
                model=c["model"], messages=[{"role": "user", "content": c["question"]}])
            wall = (time.perf_counter() - t0) * 1000
            resp = raw.parse()
            rep = resp.model_extra.get("veracity") or {}
            results.append({**c, "status": rep.get("status"), "report": rep, "wall_ms": wall,
                            "overhead_ms": float(raw.headers.get("x-veracity-overhead-ms", "nan")),
                            "final": resp.choices[0].message.content})
        return results
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        if log is not None:
            log.close()
        mock.stop()


# --------------------------------------------------------------------------------- reporting


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def table(results: list[dict[str, Any]]) -> str:
    """Markdown table per kind: caught = wrong answers whose checks failed (status failed or
    corrected); corrected = status corrected; passed = right answers with no failed check;
    false alarms = right answers flagged; added latency = gateway time excluding upstream
    (``x-veracity-overhead-ms``: risk, verifiers, correction bookkeeping), p50/p95."""
    by = defaultdict(list)
    for r in results:
        by[r["kind"]].append(r)
    lines = ["| kind | cases | wrong | caught | corrected | right | passed | false alarms | not checkable (right/wrong) | added ms p50 | p95 |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for kind in ("math", "code", "citations"):
        rs = by.get(kind)
        if not rs:
            continue
        wrong = [r for r in rs if r["wrong"]]
        right = [r for r in rs if not r["wrong"]]
        flagged = lambda r: r["status"] in ("failed", "corrected")  # noqa: E731
        caught = sum(flagged(r) for r in wrong)
        corrected = sum(r["status"] == "corrected" for r in rs)
        passed = sum(not flagged(r) for r in right)
        fa = sum(flagged(r) for r in right)
        skipped_r = sum(r["status"] in ("skipped", "error") for r in right)
        skipped_w = sum(r["status"] in ("skipped", "error") for r in wrong)
        lat = [r["overhead_ms"] for r in rs]
        lines.append(f"| {kind} | {len(rs)} | {len(wrong)} | {caught} | {corrected} | {len(right)} | {passed} | {fa} | "
                     f"{skipped_r}/{skipped_w} | {_pct(lat, 0.5):.1f} | {_pct(lat, 0.95):.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-label", type=int, default=int(os.environ.get("VERACITY_DEMO_N", "8")))
    ap.add_argument("--kinds", default="math,code,citations")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=None, help="also write the Markdown table (and per-case lines) here")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="veracity-demo-") as t:
        tmp = Path(t)
        cases, index, source = load_cases(args.per_label, args.kinds.split(","), args.seed, tmp)
        print(f"veracity demo: {len(cases)} cases from {source}", flush=True)
        t0 = time.perf_counter()
        results = run(cases, index, tmp)
        took = time.perf_counter() - t0
    out = table(results)
    print()
    print(out)
    print(f"\n{len(results)} requests in {took:.1f} s through the real openai SDK -> veracity serve -> replaying upstream.")
    print("caught = wrong answers whose checks failed; corrected = re-asked with evidence and the new answer passed;"
          "\nfalse alarms = right answers flagged; added ms = gateway time excluding upstream (x-veracity-overhead-ms).")
    if args.out:
        detail = "\n".join(f"- {r['kind']} {r['id']}: label={'wrong' if r['wrong'] else 'right'} status={r['status']} "
                           f"checks={[c['outcome'] for c in r['report'].get('checks', [])]}" for r in results)
        Path(args.out).write_text(f"# make demo\n\nSource: {source}\n\n{out}\n\n## Cases\n\n{detail}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
