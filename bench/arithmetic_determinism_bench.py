"""The arithmetic verifier's trust measures, this tree against another, in one run.

    python bench/arithmetic_determinism_bench.py --base /tmp/base-tree [--n 2000]

Per tree (a child process each; the trees share module names):

* **load**: every math case answer (``../shared/cases``, as ``bench/planner_bench.py`` loads
  them) checked twice, once with the real clock and once with ``time.perf_counter`` running 10
  times fast (a machine ten times slower, as an eval under load sees itself); answers whose
  checks differ between the two.
* **locale**: ``tests/arith_locale_gen.py`` statements (English and continental grouping among
  versions, dates, sections, standards, clock times), judged by its ``Fraction`` oracle: right
  statements failed (false alarms), statements wrong in both readings failed (catches).
* **unread**: case answers with a calculation written in numbers alone that no check covers
  (``evidence.kind == "unread"`` in this tree; found by the same pattern in the other).

Prints both trees' numbers as JSON; ``bench/results/arithmetic-determinism.md`` reports them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def child(tree: str, n: int) -> dict:
    """In a child process: the three measures for ``tree``'s verifier."""
    sys.path.insert(0, tree)
    sys.path.append(str(ROOT))
    import importlib.util
    import time

    from verifiers import arithmetic

    spec = importlib.util.spec_from_file_location("arith_locale_gen", ROOT / "tests" / "arith_locale_gen.py")
    gen = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["arith_locale_gen"] = gen
    spec.loader.exec_module(gen)  # type: ignore[union-attr]
    sys.path.insert(0, str(ROOT))
    from bench.planner_bench import load

    arithmetic.warm_up()
    cases = Path(os.environ.get("VERACITY_CASES", ROOT.parent / "shared" / "cases"))
    recs = [r for r in load(cases, None) if r.get("kind") != "code"]
    out: dict = {"answers": len(recs)}
    real = time.perf_counter

    def verdicts(r):  # type: ignore[no-untyped-def]
        return [(c.outcome, c.claim) for c in arithmetic.check(r["answer"], r.get("question"))]

    quiet = [verdicts(r) for r in recs]
    t0 = real()
    time.perf_counter = lambda: t0 + (real() - t0) * 10  # type: ignore[assignment]
    try:
        loaded = [verdicts(r) for r in recs]
    finally:
        time.perf_counter = real  # type: ignore[assignment]
    diff = [k for k, (a, b) in enumerate(zip(quiet, loaded)) if a != b]
    flips = sum(1 for k in diff if ({o for o, _ in quiet[k]} & {"pass", "fail"}) != ({o for o, _ in loaded[k]} & {"pass", "fail"}))
    out["load_differ"] = len(diff)
    out["load_failed_differs"] = sum(1 for k in diff if ("fail" in {o for o, _ in quiet[k]}) != ("fail" in {o for o, _ in loaded[k]}))
    out["load_passfail_set_differs"] = flips
    # locale
    cnt: dict[str, int] = {}
    for c in gen.cases(n, seed=1):
        outs = [k.outcome for k in arithmetic.check(c.text) if k.evidence.get("kind") in ("equation", "natural_language")]
        v = "fail" if "fail" in outs else "pass" if "pass" in outs else "unknown" if outs else "none"
        cls = "right" if c.right else ("wrong_both" if not c.right_other else "wrong_other_holds")
        cnt[f"{cls}/{v}"] = cnt.get(f"{cls}/{v}", 0) + 1
    out["locale"] = cnt
    # unread
    out["unread_answers"] = sum(1 for r in recs if any(c.evidence.get("kind") == "unread"
                                                        for c in arithmetic.check(r["answer"], r.get("question"))))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child[0], int(a.child[1]))))
        return
    res = {}
    for name, tree in (("base", a.base), ("this", str(ROOT))):
        p = subprocess.run([sys.executable, __file__, "--base", a.base, "--child", tree, str(a.n)],
                           capture_output=True, text=True, check=True)
        res[name] = json.loads(p.stdout.strip().splitlines()[-1])
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
