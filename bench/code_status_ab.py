"""Report statuses of the code verifier on HumanEval (GPT-4 solutions), this tree against another.

    python bench/code_status_ab.py --base /tmp/base-tree [--backend bwrap] [--limit N] [--out FILE]

Data: ``$VERACITY_CASES/code/humaneval_py_gpt4_simple.jsonl`` (164 problems, Reflexion logs, MIT;
label ``is_solved``: the solution passes HumanEval's hidden tests). Each tree runs
``verifiers.run.run(answer, ["code"], question=prompt)`` -- the status the gateway's code
verifier gives, without a verifier model -- in a child process of its own (same module names),
on two variants of every problem:

* ``as given``: the prompt as the question, the solution in a ```python fence as the answer
  (the prompts' docstrings carry examples, which the verifier runs);
* ``no examples``: the same with every example removed from prompt and solution (the docstring
  from its first ``>>>``/"Example"/"For example"/``f(x) ==> y`` line on), the shape of a
  question that gives no example (issue: held-back GPT-4 solutions whose prompts give none).

Prints, per variant and tree, the statuses on solutions that pass their hidden tests and on
those that fail them, and which answers changed status. Writes ``bench/results/code-status-ab.md``
unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CASES = Path(os.environ.get("VERACITY_CASES", ROOT.parent / "shared" / "cases"))
DATA = CASES / "code" / "humaneval_py_gpt4_simple.jsonl"

_EXAMPLE_START = re.compile(r">>>|\bexamples?\b|\bfor (?:example|instance)\b|\be\.g\.|^\s*\w+\(.*\)\s*(?:==>?|->|=>|➞|➜|should return|returns?)\s",
                            re.I)


def strip_examples(text: str) -> str:
    """``text`` with each docstring cut from its first example line to its closing quotes."""
    out: list[str] = []
    in_doc = cutting = False
    quote = ""
    for line in text.split("\n"):
        if not in_doc:
            m = re.search(r'("""|\'\'\')', line)
            out.append(line)
            if m and line.count(m.group(1)) == 1:
                in_doc, quote, cutting = True, m.group(1), False
            continue
        if quote in line:
            in_doc = False
            if cutting:
                out.append(line[line.index(quote):] if line.strip() != quote else line)
            else:
                out.append(line)
            continue
        if not cutting and _EXAMPLE_START.search(line):
            cutting = True
        if not cutting:
            out.append(line)
    return "\n".join(out)


def answer_of(solution: str) -> str:
    return "Here is the implementation:\n\n```python\n" + solution.strip("\n") + "\n```\n"


def child(tree: str, backend: str, src: str, dst: str) -> None:
    """In a child process: status of every record of ``src`` with ``tree``'s verifiers."""
    sys.path.insert(0, tree)
    import asyncio

    from verifiers import sandbox
    from verifiers.run import run

    box = sandbox.get(backend)
    rows = json.loads(Path(src).read_text())

    async def one(r: dict[str, Any]) -> dict[str, Any]:
        rep = await run(r["answer"], ["code"], question=r["question"],
                        options={"code": {"sandbox": box, "timeout_s": 60}})
        return {"status": rep.status, "outcomes": [c.outcome for c in rep.checks],
                "notes": [c.note for c in rep.checks if c.outcome != "pass"][:3]}

    async def main() -> list[dict[str, Any]]:
        return [await one(r) for r in rows]

    Path(dst).write_text(json.dumps(asyncio.run(main())))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the other tree (e.g. `git archive` of a commit)")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--out", default=str(HERE / "results" / "code-status-ab.md"))
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return
    rows = [json.loads(x) for x in DATA.read_text().splitlines() if x.strip()][: a.limit or None]
    variants = {
        "as given": [{"question": r["prompt"], "answer": answer_of(r["solution"])} for r in rows],
        "no examples": [{"question": strip_examples(r["prompt"]), "answer": answer_of(strip_examples(r["solution"]))}
                        for r in rows],
    }
    trees = {"base": str(Path(a.base).resolve()), "this": str(ROOT)}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for vname, recs in variants.items():
            src = Path(tmp) / f"{vname.replace(' ', '_')}.json"
            src.write_text(json.dumps(recs))
            for tname, tree in trees.items():
                dst = Path(tmp) / f"{vname.replace(' ', '_')}-{tname}.out.json"
                env = {**os.environ, "PYTHONPATH": tree}
                subprocess.run([sys.executable, __file__, "--base", a.base, "--child", tree, a.backend, str(src),
                                str(dst)], check=True, env=env, cwd=tree)
                results[(vname, tname)] = json.loads(dst.read_text())
    label = ["passes hidden tests" if r["is_solved"] else "fails hidden tests" for r in rows]
    lines = [f"# Code verifier statuses on HumanEval (GPT-4 solutions): this tree vs `{a.base}`", "",
             "Generated by `bench/code_status_ab.py` "
             f"(backend `{a.backend}`; status of `verifiers.run.run(answer, ['code'], question=prompt)`, no verifier "
             "model). Label: `is_solved` (the solution passes HumanEval's hidden tests; it agrees with running them "
             "on 163/164, bench/results/code.md). *no examples*: every docstring cut from its first example line.", "",
             "| variant | label | answers | statuses base | statuses this |", "|---|---|---|---|---|"]
    for vname in variants:
        for lab in ("passes hidden tests", "fails hidden tests"):
            idx = [i for i, x in enumerate(label) if x == lab]
            cnt = {t: collections.Counter(results[(vname, t)][i]["status"] for i in idx) for t in trees}
            fmt = {t: ", ".join(f"{k} {v}" for k, v in sorted(c.items())) for t, c in cnt.items()}
            lines.append(f"| {vname} | {lab} | {len(idx)} | {fmt['base']} | {fmt['this']} |")
    lines += ["", "Status changes (base -> this), per variant and label:", ""]
    for vname in variants:
        moves = collections.Counter()
        for i, lab in enumerate(label):
            b, t = results[(vname, "base")][i]["status"], results[(vname, "this")][i]["status"]
            if b != t:
                moves[(lab, b, t)] += 1
        for (lab, b, t), n in sorted(moves.items()):
            lines.append(f"- {vname}, {lab}: {b} -> {t}: {n}")
        if not moves:
            lines.append(f"- {vname}: no change")
    lines += ["", "Why: a block that only ran without an exception, with nothing about its behaviour compared (no "
              "assert of its own, no stated output, no example from the question or its docstring), is now "
              "`unknown` (\"ran without errors; nothing about its behaviour was compared\"), not `pass`; a report "
              "with an `unknown` beside passes is `unverified`."]
    text = "\n".join(lines) + "\n"
    print(text)
    if not a.no_write:
        Path(a.out).write_text(text)


if __name__ == "__main__":
    main()
