"""Real data: GPT-4's HumanEval solutions (VERACITY_CASES/code, see SOURCE.md).

Fails CI when the code verifier raises a false alarm on a solution that passes its hidden
tests. A ``fail`` on such a solution is only accepted when it is provably not ours:

- the hidden test asserts a different value for the very call the prompt's example uses (the
  question's example is wrong: HumanEval/47 and /116 today), or
- HumanEval's canonical solution passes the same claim (the solution really contradicts the
  problem; the hidden tests missed it: HumanEval/10 today).

Also guards recall: the failing solutions flagged from the prompt and answer alone.
"""

from __future__ import annotations

import importlib.util
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from verifiers import code, sandbox

ROOT = Path(__file__).resolve().parents[2]
CASES = Path(os.environ.get("VERACITY_CASES", ROOT.parent / "shared" / "cases"))
DATA = CASES / "code" / "humaneval_py_gpt4_simple.jsonl"

pytestmark = [pytest.mark.slow, pytest.mark.cases, pytest.mark.skipif(not DATA.exists(), reason=f"no cases at {DATA}")]


def _bench():
    spec = importlib.util.spec_from_file_location("code_bench", ROOT / "bench" / "code_bench.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def box():
    required = {b.strip() for b in os.environ.get("VERACITY_REQUIRE_SANDBOX", "").split(",") if b.strip()}
    if os.environ.get("VERACITY_CI") == "1":
        required |= {"docker", "bwrap"}
    for name in ("bwrap", "docker"):  # bwrap first: ~2.5x faster per check here
        # 30 s wall (default 10 s): a loaded CI machine must not turn a slow run into an unknown
        b = sandbox.get(name, sandbox.Limits(timeout_s=30))
        if b.unavailable_reason() is None:
            if b.run("import numpy").ok or name == "docker":
                yield b
                b.close()
                return
    if required:
        pytest.fail(f"a sandbox is required ({required}) but none is available")
    pytest.skip("no sandbox available")


def test_no_false_alarms_on_passing_humaneval_solutions(box):
    bench = _bench()
    rows = bench.load()
    with ThreadPoolExecutor(sandbox.max_concurrency()) as pool:
        labels = dict(zip([r["task_id"] for r in rows], pool.map(lambda r: bench.truth(box, r), rows)))
        results = dict(zip([r["task_id"] for r in rows],
                           pool.map(lambda r: code.check(bench.answer_of(r), r["prompt"], sandbox=box), rows)))
    assert sum(labels.values()) >= 130, "ground truth run broke (sandbox?)"
    false_alarms, accepted, flagged = [], [], []
    for r in rows:
        tid, checks = r["task_id"], results[r["task_id"]]
        assert all(c.outcome != "error" for c in checks)
        fails = [c for c in checks if c.outcome == "fail"]
        if not labels[tid]:
            flagged += [tid] if fails else []
            continue
        if not fails:
            continue
        verdicts = bench.adjudicate(box, r, checks)
        for c in fails:
            if verdicts[c.claim] == "false-alarm":
                false_alarms.append(f"{tid}: {c.claim} — {c.note}")
            else:
                accepted.append((tid, verdicts[c.claim]))
    assert false_alarms == []
    assert len({t for t, _ in accepted}) <= 3, accepted  # today: 47, 116 (errata), 10 (missed by tests)
    # recall floor: today 4 of 24 failing solutions are flagged from the prompt's examples alone
    assert len(flagged) >= 4, flagged  # 93, 121, 145, 163
