"""Grounding benchmark: the shipped ``rag`` policy, no verifier model, on human-labelled sets.

Each case is verified the way the gateway verifies a RAG answer: the source text goes in the
system message ("Answer from the documents below ..."), the question or previous turn in the
user message, and the answer through :func:`proxy.pipeline.sequence.verify_text` with
``policies/rag.yaml`` and ``model=None`` (every verifier the policy enables, its risk gate, its
budgets). Per answer:

* *flagged* -- the report has a failed check (status ``failed``);
* *passed* -- the report status is ``passed``;
* anything else (``unverified``, ``skipped``) is neither.

Per set and pooled it prints **flag precision** (of flagged answers, the share labelled
inconsistent), **flag recall** (of inconsistent answers, the share flagged) and **passed
precision** (of passed answers, the share labelled consistent). The floors (docs/design.md "False alarms
cost more than misses"): flag precision >= 90 % on every set with >= 20 flags and pooled;
passed precision >= 90 % on every set with >= 20 passes.

Sets (``../shared/cases/grounding``, each folder's SOURCE.md): SummEdits per domain (Laban et
al., EMNLP 2023), HaluEval-qa (Li et al., EMNLP 2023; right answer consistent, hallucinated
answer inconsistent), BEGIN per file (Dziri et al., TACL 2022; Fully attributable consistent, Not
fully attributable inconsistent, Generic left out).

Usage::

    python bench/grounding_bench.py                     # all sets, prints the tables
    python bench/grounding_bench.py --limit 100 --show-errors 20 --sets SummEdits
    python bench/grounding_bench.py --label after --out bench/results/grounding-after.md
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import glob
import json
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(os.environ.get("VERACITY_ROOT") or Path(__file__).resolve().parent.parent)
sys.path.insert(0, str(ROOT))

CASES = Path(os.environ.get("VERACITY_CASES", "/work/shared/cases"))
csv.field_size_limit(10_000_000)

SYSTEM = "Answer from the documents below.\n\n<documents>\n{doc}\n</documents>"


@dataclass(slots=True)
class Case:
    family: str    # SummEdits | HaluEval-qa | BEGIN
    set: str       # the set reported on (a SummEdits domain, a BEGIN file)
    doc: str
    user: str
    answer: str
    consistent: bool
    cid: str


def load_summedits() -> list[Case]:
    out = []
    for f in sorted(glob.glob(str(CASES / "grounding/SummEdits/data/summedits/*.json"))):
        dom = Path(f).stem.removeprefix("summedits_")
        for r in json.load(open(f)):
            out.append(Case("SummEdits", f"SummEdits/{dom}", r["doc"], "Summarise the document.", r["summary"],
                            r["label"] == 1, r["id"]))
    return out


def load_halueval() -> list[Case]:
    text = (CASES / "grounding/HaluEval-qa/qa_data.json").read_text()
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    out = []
    for i, r in enumerate(rows):
        out.append(Case("HaluEval-qa", "HaluEval-qa", r["knowledge"], r["question"], r["right_answer"], True, f"{i}r"))
        out.append(Case("HaluEval-qa", "HaluEval-qa", r["knowledge"], r["question"], r["hallucinated_answer"], False,
                        f"{i}h"))
    return out


def load_begin() -> list[Case]:
    out = []
    for f in sorted(glob.glob(str(CASES / "grounding/BEGIN/*/begin_*.tsv"))):
        name = f"BEGIN/{Path(f).stem.removeprefix('begin_')}"
        with open(f, newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh, delimiter="\t")):
                if r["begin_label"] == "Generic":
                    continue
                out.append(Case("BEGIN", name, r["knowledge"], r["message"], r["response"],
                                r["begin_label"] == "Fully attributable", f"{name}:{i}"))
    return out


LOADERS = {"SummEdits": load_summedits, "HaluEval-qa": load_halueval, "BEGIN": load_begin}


async def verify(policy: Any, case: Case) -> Any:
    from proxy.stores.budget import RequestBudget
    from proxy.pipeline.sequence import verify_text

    messages = [{"role": "system", "content": SYSTEM.format(doc=case.doc)}, {"role": "user", "content": case.user}]
    return await verify_text(policy, case.user, case.answer, RequestBudget.from_policy(policy.budgets.request),
                             model=None, messages=messages)


def stats(rows: list[tuple[Case, str]]) -> dict[str, Any]:
    flags = [c for c, s in rows if s == "failed"]
    passes = [c for c, s in rows if s == "passed"]
    incons = [c for c, _ in rows if not c.consistent]
    ftp = sum(1 for c in flags if not c.consistent)
    ptp = sum(1 for c in passes if c.consistent)
    return {"n": len(rows), "flags": len(flags), "flag_right": ftp, "inconsistent": len(incons),
            "passes": len(passes), "pass_right": ptp,
            "flag_p": ftp / len(flags) if flags else float("nan"),
            "flag_r": ftp / len(incons) if incons else float("nan"),
            "pass_p": ptp / len(passes) if passes else float("nan")}


def pct(x: float) -> str:
    return "n/a" if x != x else f"{x:.1%}"


def floor_mark(s: dict[str, Any], pooled: bool = False) -> str:
    bad = []
    if (s["flags"] >= 20 or (pooled and s["flags"])) and s["flag_p"] < 0.9:
        bad.append("flag precision < 90%")
    if s["passes"] >= 20 and s["pass_p"] < 0.9:
        bad.append("passed precision < 90%")
    return "; ".join(bad) if bad else "ok"


def table(rows: dict[str, list[tuple[Case, str]]]) -> list[str]:
    lines = ["| set | answers | inconsistent | flagged (right) | flag precision | flag recall | passed (right) "
             "| passed precision | floors |", "|---|---|---|---|---|---|---|---|---|"]
    fams: dict[str, list[tuple[Case, str]]] = defaultdict(list)
    for name in sorted(rows):
        s = stats(rows[name])
        fams[rows[name][0][0].family].extend(rows[name])
        lines.append(f"| {name} | {s['n']} | {s['inconsistent']} | {s['flags']} ({s['flag_right']}) | {pct(s['flag_p'])} "
                     f"| {pct(s['flag_r'])} | {s['passes']} ({s['pass_right']}) | {pct(s['pass_p'])} | {floor_mark(s)} |")
    for fam in sorted(fams):
        s = stats(fams[fam])
        lines.append(f"| **{fam} pooled** | {s['n']} | {s['inconsistent']} | {s['flags']} ({s['flag_right']}) "
                     f"| {pct(s['flag_p'])} | {pct(s['flag_r'])} | {s['passes']} ({s['pass_right']}) "
                     f"| {pct(s['pass_p'])} | {floor_mark(s, True)} |")
    s = stats([x for r in rows.values() for x in r])
    lines.append(f"| **all pooled** | {s['n']} | {s['inconsistent']} | {s['flags']} ({s['flag_right']}) "
                 f"| {pct(s['flag_p'])} | {pct(s['flag_r'])} | {s['passes']} ({s['pass_right']}) "
                 f"| {pct(s['pass_p'])} | {floor_mark(s, True)} |")
    return lines


#: (rule of the flagged answer's first failed check, answer labelled inconsistent) -> count
RULES: dict[tuple[str, bool], int] = defaultdict(int)


async def run(cases: list[Case], show_errors: int) -> dict[str, list[tuple[Case, str]]]:
    from proxy.policy import load_file

    policy = load_file(ROOT / "policies" / "rag.yaml")
    rows: dict[str, list[tuple[Case, str]]] = defaultdict(list)
    shown = 0
    for c in cases:
        rep = await verify(policy, c)
        rows[c.set].append((c, rep.status))
        if rep.status == "failed":
            first = next((ch for ch in rep.checks if ch.outcome == "fail"), None)
            rule = f"{first.verifier}:{(first.evidence or {}).get('rule') or '-'}" if first else "?"
            RULES[(rule, not c.consistent)] += 1
        wrong = (rep.status == "failed" and c.consistent) or (rep.status == "passed" and not c.consistent)
        if wrong and shown < show_errors:
            shown += 1
            print(f"--- {c.cid} consistent={c.consistent} status={rep.status}\n    answer={c.answer[:300]!r}")
            for ch in rep.checks:
                if ch.outcome in ("fail", "pass"):
                    print(f"    {ch.outcome} {ch.verifier} [{(ch.evidence or {}).get('rule')}] {ch.claim[:160]!r}\n"
                          f"       note={ch.note[:200]!r}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=",".join(LOADERS), help="families: SummEdits,HaluEval-qa,BEGIN")
    ap.add_argument("--limit", type=int, default=0, help="answers per set (0 = all)")
    ap.add_argument("--show-errors", type=int, default=0)
    ap.add_argument("--label", default="", help="a heading for the printed table (e.g. the commit)")
    ap.add_argument("--out", help="also write the table to this Markdown file")
    args = ap.parse_args()
    cases: list[Case] = []
    for fam in args.sets.split(","):
        per: dict[str, list[Case]] = defaultdict(list)
        for c in LOADERS[fam]():
            per[c.set].append(c)
        for v in per.values():
            cases += v[: args.limit or None]
    t0 = time.perf_counter()
    rows = asyncio.run(run(cases, args.show_errors))
    secs = time.perf_counter() - t0
    lines = [f"### {args.label or 'grounding'}", "",
             f"{len(cases)} answers, shipped `policies/rag.yaml`, no verifier model, {secs:.0f} s "
             f"({1000 * secs / max(1, len(cases)):.1f} ms per answer).", "", *table(rows), "",
             "Flags by the rule of their first failed check (right = labelled inconsistent): "
             + ", ".join(f"`{r}` {RULES[(r, True)]} right / {RULES[(r, False)]} wrong"
                         for r in sorted({k for k, _ in RULES})) + ".", ""]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
