"""What a credulous verifier model can pass on the grounding sets (docs/design.md "Asymmetric trust").

The verifier model here says ``supported`` to every claim the deterministic tier leaves open,
quoting the passage sentence that shares most key terms with the claim (copied exactly, so every
quote check holds): the worst case of a model that the checked text talked into anything. Each
answer goes through ``verifiers.facts.acheck`` as the ``rag`` policy runs it (the source in the
system message, the ``context`` backend, ``grounding=True``, 16 claims, 2 rounds). What the model
can then make ``passed`` rests only on the rules that confirm a model ``supported``
(``verifiers.facts._compare.confirm_support``): the share of *inconsistent* answers passed is
what such a model gets through; the *consistent* answers passed are what the model tier still
adds over the deterministic tier.

    python bench/credulous_bench.py --tree /path/to/other/tree --out before.json   # run a tree
    python bench/credulous_bench.py --out after.json                               # this tree
    python bench/credulous_bench.py --compare before.json after.json               # the table

Cases: ``$VERACITY_CASES/grounding`` (SummEdits, HaluEval-qa, BEGIN; ``--limit`` records per
file, as ``veracity eval``). No network.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _verdict(messages: Any, schema: str, purpose: str) -> dict[str, Any]:
    """``supported``, quoting the passage sentence with most of the claim's key terms."""
    from verifiers.facts._text import key_set, sentences

    text = messages[-1]["content"]
    m = re.search(r"^Claim: (.*)$", text, re.M)
    ck = key_set(m.group(1) if m else "")
    best = (-1, 1, "")
    for n, body in re.findall(r"^\[(\d+)\] \([^)]*\) (.*)$", text, re.M):
        for a, b in sentences(body):
            s = body[a:b]
            score = len(ck & key_set(s))
            if score > best[0]:
                best = (score, int(n), s.strip().rstrip("."))
    return {"verdict": "supported", "passages": [best[1]], "quote": best[2], "source_says": "", "confidence": 0.99,
            "questions": []}


async def run(limit: int, out: str) -> None:
    """Check every grounding answer with the credulous model; write one record per answer."""
    from proxy.cli.cases import read
    from verifiers.facts import ContextBackend, acheck
    from verifiers.model import ScriptedModel
    from verifiers.run import status_of

    items = read(Path(os.environ.get("VERACITY_CASES", ROOT.parent / "shared" / "cases")) / "grounding", limit=limit)
    res = []
    t0 = time.perf_counter()
    for it in items:
        model = ScriptedModel([(lambda m, s, p: p == "claims", {"claims": []}),
                               (lambda m, s, p: p.startswith("verdict"), _verdict)],
                              default=lambda m, s, p: {"queries": []})
        msgs = [{"role": "system", "content": "Answer from the documents below.\n\n" + it["context"]}]
        o = await acheck(it["answer"], it["question"], model=model, backends=[ContextBackend(msgs)], grounding=True,
                         max_claims=16, max_rounds=2, deadline_s=20)
        res.append({"id": it["id"], "set": it["set"], "label": it["label"], "status": status_of(o.checks),
                    "checks": [[c.outcome, c.basis, (c.evidence or {}).get("method"), c.claim[:200], c.note[:200]]
                               for c in o.checks]})
    Path(out).write_text(json.dumps(res))
    print(f"{len(res)} answers in {time.perf_counter() - t0:.0f} s -> {out}")


def _family(name: str) -> str:
    return "SummEdits" if name.startswith("summedits") else "BEGIN" if name.startswith("begin") else name


def compare(before: str, after: str) -> str:
    """A markdown table of the two runs per family."""
    def count(path: str) -> dict[str, collections.Counter]:
        out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        for r in json.loads(Path(path).read_text()):
            f, lab = _family(r["set"]), "right" if r["label"] else "wrong"
            out[f][lab] += 1
            out[f][f"{lab}:{r['status']}"] += 1
            for c in r["checks"]:
                if c[2] == "model":
                    out[f][f"{lab}:model:{c[0]}"] += 1
        return out

    b, a = count(before), count(after)
    rows = ["| set | answers (inconsistent / consistent) | inconsistent `passed` | consistent `passed` | "
            "`passed` that are consistent | model-judged claims passed (inconsistent / consistent) |",
            "|---|---|---|---|---|---|"]
    for f in sorted(b):
        def prec(c: collections.Counter) -> str:
            n = c["right:passed"] + c["wrong:passed"]
            return f"{100 * c['right:passed'] / n:.1f}%" if n else "n/a"
        rows.append(f"| {f} | {b[f]['wrong']} / {b[f]['right']} | {b[f]['wrong:passed']} -> {a[f]['wrong:passed']} | "
                    f"{b[f]['right:passed']} -> {a[f]['right:passed']} | {prec(b[f])} -> {prec(a[f])} | "
                    f"{b[f]['wrong:model:pass']} / {b[f]['right:model:pass']} -> "
                    f"{a[f]['wrong:model:pass']} / {a[f]['right:model:pass']} |")
    return "\n".join(rows) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", default=str(ROOT), help="the source tree whose verifiers run (default: this one)")
    ap.add_argument("--limit", type=int, default=60, help="records per case file")
    ap.add_argument("--out", help="write the per-answer records here")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), help="print the table of two runs")
    a = ap.parse_args()
    if a.compare:
        print(compare(*a.compare), end="")
        return
    if not a.out:
        ap.error("--out is required to run")
    sys.path.insert(0, a.tree)
    asyncio.run(run(a.limit, a.out))


if __name__ == "__main__":
    main()
