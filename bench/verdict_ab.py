"""Verdicts on the real case answers, this tree against another (e.g. main), in one run.

    python bench/verdict_ab.py --base /tmp/base-tree [--policy default] [--limit N]

Each tree verifies the same answers (``../shared/cases`` math and code, loaded as
``bench/planner_bench.py`` loads them, with their correctness labels) through its own
``proxy.pipeline.sequence.verify_text`` under its own shipped policy, in a child process per tree (the
two trees have the same module names). No model (what a gateway without a verifier model does),
citations off and the code sandbox ``none`` in both trees: those verifiers did not change, and
the public bibliographic APIs are not reachable here. Prints, per case set: ``failed`` on
answers labelled correct (false alarms), ``failed`` on answers labelled wrong (catches), and the
statuses; then every answer whose ``failed`` verdict differs between the trees, and how many
other answers changed status (e.g. ``passed -> skipped``). Each child warms the arithmetic
verifier up first, as the gateway does at start-up, so no answer's 250 ms budget pays for
importing SymPy. Writes ``bench/results/verdict-ab.md`` unless ``--no-write``; ``--dump FILE``
also keeps every answer with both verdicts and their non-passing checks, to read the ones that
differ.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def child(tree: str, policy: str, src: str, dst: str) -> None:
    """In a child process: verify every record of ``src`` with ``tree``'s code, write statuses."""
    sys.path.insert(0, tree)
    import yaml

    try:  # the layout by concern (proxy/stores/, proxy/pipeline/ a package)
        from proxy.pipeline.verify import verify_text
        from proxy.stores.budget import RequestBudget
    except ImportError:  # a tree from before it (proxy/pipeline.py, proxy/budget.py)
        from proxy.budget import RequestBudget  # type: ignore[no-redef]
        from proxy.pipeline import verify_text  # type: ignore[no-redef,attr-defined]
    from proxy.policy import load_file

    doc = yaml.safe_load((Path(tree) / "policies" / f"{policy}.yaml").read_text())
    v = doc.setdefault("verifiers", {})
    v.setdefault("citations", {})["enabled"] = False
    v.setdefault("code", {}).setdefault("sandbox", {})["backend"] = "none"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump(doc, fh)
    pol = load_file(fh.name)
    os.unlink(fh.name)
    records = json.loads(Path(src).read_text())
    from verifiers import arithmetic

    if hasattr(arithmetic, "warm_up"):  # as the gateway does at start-up (proxy/app.py): otherwise the
        arithmetic.warm_up()  # first answer needing pint/SymPy spends its 250 ms budget importing them

    async def run() -> list[dict[str, Any]]:
        out = []
        for r in records:
            rep = await verify_text(pol, r["question"], r["answer"], RequestBudget.from_policy(pol.budgets.request))
            out.append({"status": rep.status,
                        "failed": sorted({c.verifier for c in rep.checks if c.outcome == "fail"}),
                        "checks": len(rep.checks),
                        "detail": [[c.verifier, c.outcome, c.claim[:160], c.note[:200]] for c in rep.checks
                                   if c.outcome != "pass"]})
        return out

    Path(dst).write_text(json.dumps(asyncio.run(run())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other tree (a git worktree of main)")
    ap.add_argument("--policy", default="default")
    ap.add_argument("--limit", type=int, default=None, help="records per case file")
    ap.add_argument("--cases", default=os.environ.get("VERACITY_CASES", str(ROOT.parent / "shared" / "cases")))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--dump", help="also write every record with both trees' verdicts and non-passing checks "
                    "(claim, note) to this JSON file, to read the answers that differ")
    ap.add_argument("--child", nargs=2, metavar=("SRC", "DST"), help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.tree, a.policy, *a.child)
        return
    sys.path.insert(0, str(HERE))
    from planner_bench import load

    records = load(Path(a.cases), a.limit)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "records.json"
        src.write_text(json.dumps(records))
        got = {}
        for name, tree in (("base", a.base), ("this", str(ROOT))):
            dst = Path(tmp) / f"{name}.json"
            subprocess.run([sys.executable, __file__, "--base", a.base, "--policy", a.policy, "--tree", tree,
                            "--child", str(src), str(dst)], check=True, cwd=tree)
            got[name] = json.loads(dst.read_text())
    lines = [f"# Verdicts on the case answers: this tree vs `{a.base}` (policy `{a.policy}`, no model)", "",
             "Generated by `bench/verdict_ab.py`. *false alarms* = `failed` on an answer labelled correct; "
             "*catches* = `failed` on an answer labelled wrong.", "",
             "| set | answers | correct | false alarms base -> this | catches base -> this | statuses base | statuses this |",
             "|---|---|---|---|---|---|---|"]
    by_set: dict[str, list[int]] = collections.defaultdict(list)
    for i, r in enumerate(records):
        by_set[r["set"]].append(i)
    changed = []
    for s, idx in by_set.items():
        def count(tree: str, correct: bool) -> int:
            return sum(1 for i in idx if records[i]["correct"] is correct and got[tree][i]["status"] == "failed")

        def statuses(tree: str) -> str:
            c = collections.Counter(got[tree][i]["status"] for i in idx)
            return ", ".join(f"{k} {v}" for k, v in sorted(c.items()))

        n_ok = sum(1 for i in idx if records[i]["correct"] is True)
        lines.append(f"| {s} | {len(idx)} | {n_ok} | {count('base', True)} -> {count('this', True)} | "
                     f"{count('base', False)} -> {count('this', False)} | {statuses('base')} | {statuses('this')} |")
        for i in idx:
            b, t = got["base"][i], got["this"][i]
            if (b["status"] == "failed") != (t["status"] == "failed") or b["failed"] != t["failed"]:
                changed.append((s, i, records[i]["correct"], b, t))
    lines += ["", f"Answers whose `failed` verdict differs: {len(changed)}", ""]
    for s, i, ok, b, t in changed:
        lines.append(f"- {s} #{i} labelled {'correct' if ok else 'wrong'}: base {b['status']} {b['failed']} -> "
                     f"this {t['status']} {t['failed']}")
    moved = [(s, i, records[i]["correct"], got["base"][i], got["this"][i]) for s, idx in by_set.items() for i in idx
             if got["base"][i]["status"] != got["this"][i]["status"]
             and (got["base"][i]["status"] == "failed") == (got["this"][i]["status"] == "failed")]
    lines += ["", f"Other answers whose status differs (neither side `failed`): {len(moved)}", ""]
    for (fr, to), n in sorted(collections.Counter((b["status"], t["status"]) for *_, b, t in moved).items()):
        lines.append(f"- {fr} -> {to}: {n}")
    text = "\n".join(lines) + "\n"
    if a.dump:
        Path(a.dump).write_text(json.dumps([{**r, "base": got["base"][i], "this": got["this"][i]}
                                            for i, r in enumerate(records)]))
    print(text)
    if not a.no_write:
        (HERE / "results" / "verdict-ab.md").write_text(text)


if __name__ == "__main__":
    main()
