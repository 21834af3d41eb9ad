"""Generated statements after a sentence end or a list label, this tree against another.

    python bench/arithmetic_sentences_bench.py --base /tmp/base-tree [--texts N] [--seed S] [--write]

The generator and the invariants are those of ``tests/verifiers/test_arithmetic_sentences.py``
(an expression tree from ``tests/arith_oracle_gen.py`` rendered in plain notations or LaTeX,
stated right or wrong, after one of its ``BEFORE`` contexts -- "We multiply 1234 by 5678. ",
"5678.) ", "3.14. ", "e.g. 5. ", "1. ", "(2) ", "2) " ... -- and before one of its ``AFTER``
sentences), here with a seeded ``random.Random`` for as many texts as asked. The oracle is the
tree evaluated with ``fractions.Fraction``. Counted per tree, in a child process each (the
two trees have the same module names; the test module is read from this tree by path):

* false alarm: a right statement judged ``fail``;
* wrong passed: a wrong statement judged ``pass``;
* fail with a wrong expected: a ``fail`` whose ``expected`` is not the oracle's value;
* fails alone, not in context: the statement is ``fail`` on its own and not after the context.

Prints a Markdown table; ``--write`` writes ``bench/results/arithmetic-sentences.md``.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import random
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TEST = ROOT / "tests" / "verifiers" / "test_arithmetic_sentences.py"


def child(tree: str, n: int, seed: int) -> dict[str, object]:
    """In a child process: ``n`` texts checked by ``tree``'s verifier; the counts."""
    sys.path.insert(0, tree)
    spec = importlib.util.spec_from_file_location("sentences", TEST)
    t = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(t)  # type: ignore[union-attr]
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = {}
    t0 = time.perf_counter()
    for k in range(n):
        rng = random.Random(seed * 10**7 + k)
        notation = rng.choice(t.NOTATIONS + ("latex",))
        before, after, right = rng.choice(t.BEFORE), rng.choice(t.AFTER), rng.random() < 0.5
        got = t.case(rng, notation, before, after, right)
        if got is None:
            continue
        text, found = got
        counts["texts"] += 1
        counts["with a violation"] += bool(found)
        for x in found:
            key = ("false alarm" if x.startswith("false alarm") else "fail with a wrong expected"
                   if x.startswith("fail with") else "wrong passed" if x.startswith("wrong statement passed")
                   else x.split(":")[0])
            counts[key] += 1
            lst = examples.setdefault(key, [])
            if len(lst) < 3:
                lst.append(f"{text!r}: {x[:160]}")
    return {"counts": dict(counts), "examples": examples, "seconds": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other tree (a git worktree of main)")
    ap.add_argument("--texts", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(a.child, a.texts, a.seed)))
        return
    got = {}
    for name, tree in (("base", a.base), ("this", str(ROOT))):
        out = subprocess.run([sys.executable, __file__, "--base", a.base, "--texts", str(a.texts), "--seed",
                              str(a.seed), "--child", tree], check=True, capture_output=True, text=True, cwd=tree)
        got[name] = json.loads(out.stdout)
    keys = ["texts", "with a violation", "false alarm", "wrong passed", "fail with a wrong expected",
            "fails alone, not in context"]
    lines = ["# Statements after a sentence end or a list label: this tree vs the base", "",
             f"Command: `python bench/arithmetic_sentences_bench.py --base {a.base} --texts {a.texts} --seed {a.seed}"
             f"{' --write' if a.write else ''}`. Generator, contexts and invariants: "
             "`tests/verifiers/test_arithmetic_sentences.py`; oracle: the generated tree evaluated with `Fraction`.",
             "", "| | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for name in ("base", "this"):
        c = got[name]["counts"]
        lines.append(f"| {name} | " + " | ".join(str(c.get(k, 0)) for k in keys) + " |")
    for name in ("base", "this"):
        for key, ex in got[name]["examples"].items():
            lines.append("")
            lines.append(f"- {name}, {key}:")
            lines += [f"  - `{x}`" for x in ex]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.write:
        (HERE / "results" / "arithmetic-sentences.md").write_text(text)


if __name__ == "__main__":
    main()
