"""Arithmetic verifier, this tree against another (e.g. a main worktree), in one run.

    python bench/arithmetic_ab.py --base /work/main [--limit N] [--budget-ms MS] [--no-write]

Every answer of ``../shared/cases/math`` (GSM8K references with calculator notes kept and
stripped, the GPT-3 example solutions labelled by ``is_correct``, ProcessBench GSM8K and
Omni-MATH solutions labelled by ``label == -1``) is checked by both verifiers in one process,
alternating which runs first, so both see the same machine load (``arithmetic_bench._load_other``
imports the other tree's ``verifiers/arithmetic`` under another name). Prints and writes
``bench/results/arithmetic-ab.md``: per set, the answers with at least one ``fail`` among those
labelled correct (false alarms, or a real slip the graders let pass: read them) and among those
labelled wrong, the claims decided, the p95 time per answer of each tree and their ratio; then
every answer whose flags differ, and every answer whose checks differ at all (``--budget-ms
10000`` keeps a budget reached under load in one tree only from counting; the times are then
not the shipped budget's).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from arithmetic_bench import NOTE, SYSTEMS, _jsonl, _load_other, cases_dir  # noqa: E402

from verifiers.arithmetic import check, warm_up  # noqa: E402


def items(base: Path, limit: int | None) -> list[tuple[str, str, str, bool, str]]:
    """``(set, name, answer, labelled correct, question)`` for every case answer."""
    out = []
    for i, r in enumerate(_jsonl(base / "test.jsonl")[:limit]):
        out.append(("gsm8k_reference", f"#{i} notes kept", r["answer"], True, r["question"]))
        out.append(("gsm8k_reference_stripped", f"#{i}", NOTE.sub("", r["answer"]), True, r["question"]))
    for i, r in enumerate(_jsonl(base / "example_model_solutions.jsonl")[:limit]):
        for s in SYSTEMS:
            out.append(("gsm8k_gpt3", f"#{i} {s}", NOTE.sub("", r[s]["solution"]), bool(r[s]["is_correct"]),
                        r["question"]))
    for name in ("processbench_gsm8k", "processbench_omnimath"):
        for d in json.loads((base / f"{name}.json").read_text(encoding="utf-8"))[:limit]:
            out.append((name, str(d["id"]), "\n\n".join(d["steps"]), d["label"] == -1, d["problem"]))
    return out


def p95(x: list[float]) -> float:
    x = sorted(x)
    return x[int(0.95 * (len(x) - 1))] if x else 0.0


def run(other_root: Path, base: Path, limit: int | None, only: list[str] | None = None,
        budget_ms: float | None = None) -> dict[str, Any]:
    """Both trees' checks of every case answer; ``budget_ms`` (default: ``check``'s own) set high
    keeps the time budget, which a loaded machine reaches in one tree and not the other, from
    showing as a difference."""
    kw = {} if budget_ms is None else {"budget_ms": budget_ms}
    other = _load_other(other_root)
    other.warm_up()
    warm_up()
    check("\\[ (a+b)^2 = a^2 + 2ab + b^2 \\]")  # first SymPy import outside the timings
    other.check("1 + 1 = 2")
    rows = [r for r in items(base, limit) if only is None or r[0] in only]
    sets: dict[str, dict[str, Any]] = collections.defaultdict(lambda: {
        "answers": 0, "correct": 0, "flag_correct": {"base": 0, "this": 0}, "flag_wrong": {"base": 0, "this": 0},
        "decided": {"base": 0, "this": 0}, "ms": {"base": [], "this": []}})
    changed = []
    differ = []  # answers whose check lists (outcome, claim, expected) differ, budget notes aside
    all_ms: dict[str, list[float]] = {"base": [], "this": []}
    for k, (s, name, answer, ok, q) in enumerate(rows):
        st = sets[s]
        st["answers"] += 1
        st["correct"] += ok
        got = {}
        every = {}
        for who in (("this", "base") if k % 2 == 0 else ("base", "this")):
            fn = check if who == "this" else other.check
            t0 = time.perf_counter()
            cs = fn(answer, q, **kw)
            ms = (time.perf_counter() - t0) * 1000
            st["ms"][who].append(ms)
            all_ms[who].append(ms)
            got[who] = sorted(c.claim for c in cs if c.outcome == "fail")
            every[who] = [(c.outcome, c.claim, c.expected) for c in cs if c.evidence.get("kind") != "budget"]
            st["decided"][who] += sum(1 for c in cs if c.outcome in ("pass", "fail"))
            if got[who]:
                st["flag_correct" if ok else "flag_wrong"][who] += 1
        if got["this"] != got["base"]:
            changed.append((s, name, ok, got["base"], got["this"]))
        if every["this"] != every["base"]:
            differ.append((s, name, ok, [x for x in every["base"] if x not in every["this"]],
                           [x for x in every["this"] if x not in every["base"]]))
    return {"sets": sets, "changed": changed, "differ": differ, "all_ms": all_ms, "budget_ms": budget_ms}


def report(res: dict[str, Any], other_root: Path) -> str:
    lines = [f"# Arithmetic verifier: this tree vs `{other_root}` (same run)", "",
             "Generated by `bench/arithmetic_ab.py`. Both verifiers check every answer in one process, "
             "alternating order. *flagged correct* = answers labelled correct with at least one `fail` "
             "(false alarms, or a real slip the graders let pass); *flagged wrong* = answers labelled wrong "
             "with at least one `fail`.", "",
             "| set | answers | labelled correct | flagged correct base -> this | flagged wrong base -> this | "
             "claims decided base -> this | p95 ms base / this (ratio) |",
             "|---|---|---|---|---|---|---|"]
    for s, st in res["sets"].items():
        b, t = p95(st["ms"]["base"]), p95(st["ms"]["this"])
        n_ok, n_bad = st["correct"], st["answers"] - st["correct"]
        lines.append(
            f"| {s} | {st['answers']} | {n_ok} | {st['flag_correct']['base']} -> {st['flag_correct']['this']} "
            f"({st['flag_correct']['this'] / max(1, n_ok):.1%}) | {st['flag_wrong']['base']} -> "
            f"{st['flag_wrong']['this']} of {n_bad} | {st['decided']['base']} -> {st['decided']['this']} | "
            f"{b:.2f} / {t:.2f} ({t / max(1e-9, b):.2f}x) |")
    b, t = p95(res["all_ms"]["base"]), p95(res["all_ms"]["this"])
    lines += ["", f"p95 per answer over all {len(res['all_ms']['this'])} answers: base {b:.2f} ms, this {t:.2f} ms "
              f"({t / max(1e-9, b):.2f}x).", "", f"Answers whose flags differ: {len(res['changed'])}", ""]
    for s, name, ok, fb, ft in res["changed"]:
        lines.append(f"- {s} {name} labelled {'correct' if ok else 'wrong'}: base {fb} -> this {ft}")
    budget = "each tree's default" if res["budget_ms"] is None else f"{res['budget_ms']:g} ms"
    lines += ["", f"Answers whose checks differ in any outcome, claim or `expected` (budget {budget}; the note "
              f"of a reached budget aside): {len(res['differ'])}", ""]
    for s, name, ok, only_b, only_t in res["differ"][:40]:
        lines.append(f"- {s} {name} labelled {'correct' if ok else 'wrong'}: base only {only_b} -> this only {only_t}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other tree (a git worktree of main)")
    ap.add_argument("--limit", type=int, default=None, help="records per case file")
    ap.add_argument("--sets", default=None, help="comma-separated set names to run (default: all)")
    ap.add_argument("--out", default="arithmetic-ab.md", help="file name under bench/results")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--budget-ms", type=float, default=None,
                    help="time budget per answer for both trees (default: check's own, 250 ms)")
    a = ap.parse_args()
    res = run(Path(a.base), cases_dir(), a.limit, a.sets.split(",") if a.sets else None, a.budget_ms)
    text = report(res, Path(a.base))
    print(text)
    if not a.no_write:
        (HERE / "results" / a.out).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
