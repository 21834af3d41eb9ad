"""Internal-consistency detector (``verifiers/arithmetic/_consistency.py``, docs/arithmetic.md) on
the labelled math cases: how many CORRECT answers it flags (false alarms; target 0) and how many
wrong ones.

Data: ``$VERACITY_CASES/math`` (default ``<repo>/../shared/cases/math``; see its SOURCE.md):
GSM8K ``test.jsonl`` reference solutions (all correct), ``example_model_solutions.jsonl`` (four
GPT-3 solutions per question, ``is_correct``; calculator notes stripped as SOURCE.md says),
ProcessBench ``processbench_gsm8k.json`` and ``processbench_omnimath.json`` (steps joined by blank
lines; correct = ``label == -1``, every step right).

Run: ``.venv/bin/python bench/consistency_bench.py`` (prints the table and every flag, writes
``bench/results/consistency.md``).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from verifiers.arithmetic import _consistency  # noqa: E402

NOTE = re.compile(r"<<[^<>]*>>")
SYSTEMS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")


def cases_dir() -> Path:
    """``$VERACITY_CASES/math`` or ``<repo>/../shared/cases/math``."""
    base = os.environ.get("VERACITY_CASES") or str(ROOT.parent / "shared" / "cases")
    return Path(base) / "math"


def answers(d: Path) -> dict[str, list[tuple[str, str, str | None, bool]]]:
    """Per set: ``(id, answer, question, correct)``."""
    out: dict[str, list[tuple[str, str, str | None, bool]]] = {}
    rows = [json.loads(line) for line in (d / "test.jsonl").read_text().splitlines() if line.strip()]
    out["GSM8K reference solutions"] = [(f"ref#{i}", NOTE.sub("", r["answer"]), r["question"], True)
                                        for i, r in enumerate(rows)]
    sols = []
    for i, line in enumerate((d / "example_model_solutions.jsonl").read_text().splitlines()):
        if not line.strip():
            continue
        r = json.loads(line)
        for s in SYSTEMS:
            if isinstance(r.get(s), dict):
                sols.append((f"gpt3#{i}/{s}", NOTE.sub("", r[s]["solution"]), r["question"], bool(r[s]["is_correct"])))
    out["GSM8K GPT-3 solutions"] = sols
    for name, f in (("ProcessBench GSM8K", "processbench_gsm8k.json"), ("ProcessBench Omni-MATH", "processbench_omnimath.json")):
        out[name] = [(str(r["id"]), "\n\n".join(r["steps"]), r["problem"], r["label"] == -1)
                     for r in json.loads((d / f).read_text())]
    return out


def non_math(d: Path) -> list[tuple[str, str]]:
    """Text that is not a math answer, none of it inconsistent by construction (``(id, text)``):
    GPT-4 HumanEval prompts and solutions (``code/``), the SummEdits documents and their
    consistent summaries (``grounding/SummEdits``; earnings calls, sales emails: prices), when
    present."""
    root, out = d.parent, []
    code = root / "code" / "humaneval_py_gpt4_simple.jsonl"
    if code.is_file():
        for line in code.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out += [(f"{r['task_id']}/prompt", r["prompt"]), (f"{r['task_id']}/solution", r["solution"])]
    seen: set[str] = set()
    for f in sorted((root / "grounding" / "SummEdits" / "data" / "summedits").glob("*.json")):
        for r in json.loads(f.read_text()):
            if r["doc"] not in seen:
                seen.add(r["doc"])
                out.append((f"{r['id']}/doc", r["doc"]))
            if str(r.get("label")) == "1":
                out.append((f"{r['id']}/summary", r["summary"]))
    return out


def run(d: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], float]:
    rows, flags, times = [], [], []
    for name, items in answers(d).items():
        row = {"set": name, "correct": 0, "wrong": 0, "flag_correct": 0, "flag_wrong": 0}
        for ident, text, question, correct in items:
            t0 = time.perf_counter()
            checks = _consistency.check(text, question)
            times.append((time.perf_counter() - t0) * 1000)
            row["correct" if correct else "wrong"] += 1
            if checks:
                row["flag_correct" if correct else "flag_wrong"] += 1
                flags.extend({"set": name, "id": ident, "correct": correct, "note": c.note} for c in checks)
        rows.append(row)
    planted = {"answers": 0, "flagged": 0}
    for name, items in answers(d).items():
        for ident, text, question, correct in items:
            sentence = _plant(text)
            if correct and sentence:
                planted["answers"] += 1
                planted["flagged"] += bool(_consistency.check(text + sentence, question))
    texts = non_math(d)
    row = {"set": "non-math text (HumanEval, SummEdits; all consistent)", "correct": len(texts), "wrong": 0,
           "flag_correct": 0, "flag_wrong": 0}
    for ident, text in texts:
        checks = _consistency.check(text)
        if checks:
            row["flag_correct"] += 1
            flags.extend({"set": row["set"], "id": ident, "correct": True, "note": c.note} for c in checks)
    rows.append(row)
    times.sort()
    return rows, flags, times[int(0.95 * (len(times) - 1))] if times else 0.0, planted


def _plant(text: str) -> str | None:
    """A sentence that uses the answer's first defined variable with another value ("Using x =
    11, the result follows."), or None when the answer defines none: planted recall, the
    detector in the context of real answers (their cases, updates and loops included)."""
    clean = _consistency._clean(text)
    for o in _consistency._occurrences(clean):
        if not o.use:
            other = o.value + 1
            shown = str(other.numerator) if other.denominator == 1 else format(float(other), "g")
            return f"\n\nUsing {o.var} = {shown}{'%' if o.percent else ''}, the result follows."
    return None


def main() -> None:
    d = cases_dir()
    rows, flags, p95, planted = run(d)
    total = {k: sum(r[k] for r in rows if not r["set"].startswith("non-math"))
             for k in ("correct", "wrong", "flag_correct", "flag_wrong")}
    lines = ["# Internal consistency on the labelled math cases", "",
             f"Data: `{d}`. Command: `.venv/bin/python bench/consistency_bench.py`. A flag is one or more",
             "`fail` checks with basis `consistency` (a quantity defined with one value and used with another).", "",
             "| set | correct answers flagged | wrong answers flagged |", "| --- | --- | --- |"]
    for r in rows[:-1] + [{"set": "all math answers", **total}, rows[-1]]:
        lines.append(f"| {r['set']} | {r['flag_correct']} / {r['correct']} | {r['flag_wrong']} / {r['wrong']} |")
    lines += ["", f"Planted: correct answers that define a variable, with \"Using x = <value + 1>, the result follows.\" "
              f"appended: {planted['flagged']} / {planted['answers']} flagged (recall in the context of real answers; the "
              "rest are answers whose cases, updates, loops or iterations make the detector stand down).",
              "", f"p95 time per answer: {p95:.2f} ms.", "", "## Flags", ""]
    lines += [f"- {f['set']} {f['id']} ({'correct' if f['correct'] else 'wrong'}): {f['note']}" for f in flags] or ["- none"]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "bench" / "results" / "consistency.md"
    out.write_text(text)


if __name__ == "__main__":
    main()
