"""Verified streams on real answers: unit-by-unit verification against whole-answer verification,
and where the first failing unit lies (what a whole-answer correction round would write again).

Data: ProcessBench GSM8K (``$VERACITY_CASES/math/processbench_gsm8k.json``; 400 step-by-step
solutions by Qwen and Llama models, ``label`` = the first wrong step, -1 when every step is
right). Each solution is the steps joined by blank lines, checked with the shipped ``default``
policy (:func:`proxy.pipeline.verify.verify_text`, the call every path makes) twice:

* whole: the answer at once (``buffer`` and ``passthrough`` streams, non-stream requests);
* unit by unit: each unit of :func:`proxy.pipeline.units.split_units` on its own, in order, as
  the ``verified`` stream mode checks them (the early-flowing part of a unit is verified with it).

Reported: wrong solutions flagged (a check failed), right solutions flagged (false alarms: each
would start a correction round in a verified stream), and for flagged wrong solutions the prefix
before the first failing unit -- the text a ``whole`` continuation round generates again before
anything new reaches the reader (at 200 characters a second, a fast chat model) and pays for in
completion tokens (~4 characters a token), while a ``continue`` round starts at the failed unit.

    PYTHONPATH=. .venv/bin/python bench/verified_units_cases.py [--limit N] [--out bench/results/verified-units-cases.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.pipeline.verify import verify_text  # noqa: E402
from proxy.pipeline.units import split_units  # noqa: E402
from proxy.pipeline.verified_stream import unit_policy  # noqa: E402
from proxy.policy import PolicyStore  # noqa: E402
from proxy.stores.budget import RequestBudget  # noqa: E402

CHARS_PER_S = 200


def _cases() -> Path:
    return Path(os.environ.get("VERACITY_CASES") or ROOT.parent / "shared" / "cases")


async def _first_failing(policy, question: str, answer: str, *, answer_risk: bool) -> tuple[int | None, int]:
    """Offset of the first unit with a failed check (None: none) and the units checked, verifying
    unit by unit as the verified stream does; ``answer_risk``: the unit's risk is the answer's so
    far, with the arithmetic check on every unit (:func:`proxy.pipeline.verified_stream.unit_policy`,
    shipped) or the unit's own risk alone (the policy as it is)."""
    pos, n_units, cache = 0, 0, {}
    for unit in split_units(answer):
        if unit.checkable:
            n_units += 1
            pol = unit_policy(policy, question, answer[:pos + len(unit.text)], cache) if answer_risk else policy
            rep = await verify_text(pol, question, unit.text, RequestBudget.from_policy(policy.budgets.request))
            if rep.failed_checks:
                return pos, n_units  # the stream stops reading here and asks for the rest
        pos += len(unit.text)
    return None, n_units


async def _run(limit: int | None) -> dict:
    policy = PolicyStore(str(ROOT / "policies")).get("default")
    data = json.loads((_cases() / "math" / "processbench_gsm8k.json").read_text())[:limit]
    out = {"n": len(data), "wrong": 0, "right": 0, "prefix": [], "prefix_share": [], "units": [], "only_whole": [],
           "whole_ms": [], "unit_ms": []}
    for key in ("whole", "unit", "alone"):
        out[f"{key}_flag_wrong"] = out[f"{key}_flag_right"] = 0
    for case in data:
        steps = case["steps"] if isinstance(case["steps"], list) else eval_steps(case["steps"])
        answer = "\n\n".join(steps)
        wrong = int(case["label"]) >= 0
        key = "wrong" if wrong else "right"
        out[key] += 1
        t0 = time.perf_counter()
        whole = await verify_text(policy, case["problem"], answer, RequestBudget.from_policy(policy.budgets.request))
        out["whole_ms"].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        first_fail, n_units = await _first_failing(policy, case["problem"], answer, answer_risk=True)
        out["unit_ms"].append((time.perf_counter() - t0) * 1000)
        alone, _ = await _first_failing(policy, case["problem"], answer, answer_risk=False)
        out["units"].append(n_units)
        out[f"whole_flag_{key}"] += bool(whole.failed_checks)
        out[f"unit_flag_{key}"] += first_fail is not None
        out[f"alone_flag_{key}"] += alone is not None
        if whole.failed_checks and first_fail is None:
            out["only_whole"].append(str(whole.failed_checks[0].claim)[:160])
        if first_fail is not None and wrong:
            out["prefix"].append(first_fail)
            out["prefix_share"].append(first_fail / max(1, len(answer)))
    return out


def eval_steps(raw: str) -> list[str]:
    """The ``steps`` field as stored (a Python list literal in a string)."""
    import ast

    return [str(s) for s in ast.literal_eval(raw)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    r = asyncio.run(_run(args.limit))
    med = statistics.median
    pre = r["prefix"] or [0]
    lines = [
        "# Verified streams on real answers: unit by unit vs whole answer (bench/verified_units_cases.py)", "",
        f"Command: `PYTHONPATH=. .venv/bin/python bench/verified_units_cases.py"
        f"{' --limit ' + str(args.limit) if args.limit else ''} --out bench/results/verified-units-cases.md`. "
        f"ProcessBench GSM8K, {r['n']} solutions ({r['wrong']} with a wrong step, {r['right']} all right); "
        "the shipped `default` policy.", "",
        "| | whole answer | unit by unit, `unit_policy` (shipped) | unit by unit, the policy as it is (the unit's own risk) |",
        "|---|---:|---:|---:|",
        f"| wrong solutions flagged | {r['whole_flag_wrong']} / {r['wrong']} | {r['unit_flag_wrong']} / {r['wrong']} "
        f"| {r['alone_flag_wrong']} / {r['wrong']} |",
        f"| right solutions flagged (false alarms) | {r['whole_flag_right']} / {r['right']} | "
        f"{r['unit_flag_right']} / {r['right']} | {r['alone_flag_right']} / {r['right']} |",
        f"| verification ms per answer, median | {med(r['whole_ms']):.1f} | {med(r['unit_ms']):.1f} "
        f"(units checked, median {med(r['units']):.0f}) | |", "",
        "Flagged wrong solutions: the prefix already relayed when the first unit fails, which a `whole` "
        "correction round writes again before the reader gets anything new:", "",
        f"- characters: median {med(pre):.0f}, p90 {sorted(pre)[int(0.9 * (len(pre) - 1))]:.0f} "
        f"(median {100 * med(r['prefix_share'] or [0]):.0f}% of the answer)",
        f"- at {CHARS_PER_S} characters a second: median {1000 * med(pre) / CHARS_PER_S:.0f} ms more before the "
        f"first corrected byte than a `continue` round; ~{med(pre) / 4:.0f} completion tokens more per round",
        "", "Failed claims only the whole-answer check found (no unit holds them whole):", "",
        *[f"- `{c}`" for c in r["only_whole"]],
    ]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
