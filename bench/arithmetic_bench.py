"""Real-data benchmark of the arithmetic verifier (floors in bench/RESULTS.md).

Data: ``$VERACITY_CASES/math`` (default ``<repo>/../shared/cases/math``; see its SOURCE.md):
GSM8K ``test.jsonl`` (1319 correct reference solutions), ``example_model_solutions.jsonl``
(4 GPT-3 solutions per question, with ``<<expr=value>>`` calculator notes) and ProcessBench
``processbench_gsm8k.json`` (step-labelled solutions).

Measures, against the arithmetic floors of bench/RESULTS.md:
  1. false alarms on the GSM8K reference solutions, notes kept and stripped (floor: <= 1
     answer flagged per mode; a flag on a line that is false as written is listed separately);
  2. calculator notes that disagree with their own expression: ground truth computed here,
     independently of the verifier, by a plain exact evaluation of the note (Python ``ast``
     walked over + - * / and parentheses into ``Fraction``s); every disagreeing note must be
     flagged and no agreeing note;
  3. ProcessBench GSM8K: false-alarm rate on ``label == -1`` solutions (floor: <= 1%), and for
     erroneous ones how many are flagged and where the first flagged step lies;
  4. p95 time per answer over all of the above (floor: <= 20 ms).

Run: ``.venv/bin/python bench/arithmetic_bench.py`` (prints the numbers and writes
``bench/results/arithmetic.md``; notes below its marker line are kept).
``--compare-with /path/to/other/checkout`` runs that checkout's verifier side by side with this
one on every answer (before/after: flags added or gone on answers labelled correct and
incorrect, claims decided, p95 ratio) and prints it (copy it below the notes marker). ``tests/verifiers/test_arithmetic_cases.py`` runs the same code in CI.
"""

from __future__ import annotations

import ast
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from verifiers.arithmetic import check, warm_up  # noqa: E402
from verifiers.arithmetic._normalize import NUMBER_WORDS  # noqa: E402

NOTE = re.compile(r"<<([^<>]*)>>")
SYSTEMS = ("6b_finetuning", "6b_verification", "175b_finetuning", "175b_verification")

FLOOR_REFERENCE_FLAGS = 1
FLOOR_PROCESSBENCH_FALSE_ALARM = 0.01
FLOOR_P95_MS = 20.0
NOTES_MARKER = "<!-- notes below are kept by bench/arithmetic_bench.py -->"


def cases_dir() -> Path:
    """``$VERACITY_CASES/math`` or ``<repo>/../shared/cases/math``."""
    base = os.environ.get("VERACITY_CASES") or str(ROOT.parent / "shared" / "cases")
    return Path(base) / "math"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- independent ground truth for calculator notes ------------------------------------------


class _NotSimple(Exception):
    pass


def _exact(expr: str) -> Fraction:
    """Exact value of a note side made only of numbers, + - * / and parentheses."""
    s = expr.strip()
    if not re.fullmatch(r"[\d.,+\-*/() ]+", s) or not s:
        raise _NotSimple(expr)
    s = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", s)
    if "," in s:
        raise _NotSimple(expr)
    try:
        tree = ast.parse(s, mode="eval")
    except SyntaxError as exc:
        raise _NotSimple(expr) from exc

    def walk(n: ast.AST) -> Fraction:
        if isinstance(n, ast.Expression):
            return walk(n.body)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            seg = ast.get_source_segment(s, n)
            return Fraction(seg)
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, (ast.USub, ast.UAdd)):
            v = walk(n.operand)
            return -v if isinstance(n.op, ast.USub) else v
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.Div)):
            a, b = walk(n.left), walk(n.right)
            if isinstance(n.op, ast.Add):
                return a + b
            if isinstance(n.op, ast.Sub):
                return a - b
            if isinstance(n.op, ast.Mult):
                return a * b
            if b == 0:
                raise _NotSimple(expr)
            return a / b
        raise _NotSimple(expr)

    return walk(tree)


def note_disagrees(note: str) -> bool | None:
    """Ground truth for one ``expr=value[=value...]`` note: ``True`` when a stated value is
    not the first side's exact value correctly rounded to the value's decimals (plus 1e-9
    relative, for float reprs like 3.4499999999999997); ``None`` when not simple arithmetic."""
    parts = note.split("=")
    if len(parts) < 2:
        return None
    try:
        vals = [_exact(p) for p in parts]
    except _NotSimple:
        return None
    e = vals[0]
    for text, v in zip(parts[1:], vals[1:]):
        t = text.strip()
        k = len(t.split(".", 1)[1]) if re.fullmatch(r"-?[\d,]*\.\d+", t) else 0
        if abs(e - v) > Fraction(1, 2) / 10**k + abs(e) * Fraction(1, 10**9):
            return True
    return False


def false_as_written(claim: str, before: str = "") -> bool:
    """Independent judgement of a flagged reference line: ``True`` when the claim text is plain
    arithmetic (numbers, + - * / parentheses, $) whose sides really differ and the text just
    before it does not continue the expression, i.e. the reference prose itself is wrong and
    the flag is not a false alarm."""
    if re.search(r"[\d+\-*/(.,×x]\s*$", before):
        return False
    text = claim.replace("$", "")
    if "=" not in text:
        return False
    try:
        sides = [_exact(p) for p in text.split("=")]
    except _NotSimple:
        return False
    return any(v != sides[0] for v in sides[1:])


def false_alarms(flagged: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Flagged reference answers whose flags are not all on lines that are wrong as written."""
    return [f for f in flagged if not all(false_as_written(c, b) for c, b in zip(f["claims"], f["before"]))]


# --- runs -------------------------------------------------------------------------------------


@dataclass
class Results:
    times_ms: list[float] = field(default_factory=list)
    reference: dict[str, Any] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)
    model_text: dict[str, Any] = field(default_factory=dict)
    processbench: dict[str, Any] = field(default_factory=dict)
    first_call_ms: float = 0.0
    baseline_ms: list[float] = field(default_factory=list)
    non_math: dict[str, Any] = field(default_factory=dict)
    forms: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (data set, claim form, outcome) -> n

    @property
    def p95_ms(self) -> float:
        t = sorted(self.times_ms)
        return t[min(len(t) - 1, int(0.95 * len(t)))] if t else 0.0


def _timed(res: Results, answer: str, question: str | None, tag: str | None = None) -> list[Any]:
    t0 = time.perf_counter()
    out = check(answer, question)
    res.times_ms.append((time.perf_counter() - t0) * 1000)
    if tag is not None:
        for c in out:
            if c.outcome in ("pass", "fail"):
                res.forms[(tag, _form(c), c.outcome)] = res.forms.get((tag, _form(c), c.outcome), 0) + 1
    return out


def _form(c: Any) -> str:
    """The claim form of a decided check, for the per-form table: the evidence kind, with unit
    conversions split into calendar, dozen and other, and sentences with number words apart."""
    kind = c.evidence.get("kind", "?")
    if kind == "unit_conversion":
        expr = c.evidence.get("expression", "")
        if "dozen" in expr:
            return "unit_conversion (dozen)"
        if any(w in expr for w in ("month", "year", "decade", "century")):
            return "unit_conversion (calendar)"
        return "unit_conversion"
    if kind == "natural_language" and re.search(r"\b(?:" + "|".join(NUMBER_WORDS) + r")\b", c.claim, re.I):
        return "natural_language (number words)"
    return kind


def run_reference(res: Results, base: Path) -> None:
    rows = _jsonl(base / "test.jsonl")
    out: dict[str, Any] = {"answers": len(rows)}
    for mode in ("kept", "stripped"):
        flagged = []
        checks = 0
        for i, r in enumerate(rows):
            answer = r["answer"] if mode == "kept" else NOTE.sub("", r["answer"])
            cs = _timed(res, answer, r["question"], tag="GSM8K references" if mode == "stripped" else None)
            checks += sum(1 for c in cs if c.outcome in ("pass", "fail"))
            fails = [c for c in cs if c.outcome == "fail"]
            errors = [c for c in cs if c.outcome == "error"]
            if fails or errors:
                flagged.append({"index": i, "claims": [c.claim for c in fails + errors],
                                "before": [answer[max(0, c.span[0] - 20) : c.span[0]] if c.span else "?"
                                           for c in fails + errors],
                                "found": [c.found for c in fails], "expected": [c.expected for c in fails]})
        out[mode] = {"flagged": flagged, "checked_claims": checks}
    res.reference = out


def run_model_solutions(res: Results, base: Path, model_text: bool = True) -> None:
    rows = _jsonl(base / "example_model_solutions.jsonl")
    gt_bad = gt_good = gt_none = 0
    found = missed = false_flags = flagged_unparsed = 0
    missed_list: list[str] = []
    false_list: list[str] = []
    text_flags = {"correct": 0, "correct_total": 0, "incorrect": 0, "incorrect_total": 0}
    for r in rows:
        for sysname in SYSTEMS:
            sol = r[sysname]["solution"]
            cs = _timed(res, sol, r["question"])
            note_fails = [c for c in cs if c.evidence.get("kind") == "calculator_note" and c.outcome == "fail"]
            for m in NOTE.finditer(sol):
                truth = note_disagrees(m.group(1))
                flagged = any(c.span and m.start(1) <= c.span[0] and c.span[1] <= m.end(1) for c in note_fails)
                if truth is None:
                    gt_none += 1
                    flagged_unparsed += flagged
                elif truth:
                    gt_bad += 1
                    if flagged:
                        found += 1
                    else:
                        missed += 1
                        missed_list.append(m.group(1))
                else:
                    gt_good += 1
                    if flagged:
                        false_flags += 1
                        false_list.append(m.group(1))
            # plain model text (notes stripped): how often is a solution flagged?
            if not model_text:
                continue
            stripped = NOTE.sub("", sol)
            key = "correct" if r[sysname]["is_correct"] else "incorrect"
            cs2 = _timed(res, stripped, r["question"], tag=f"GPT-3 {key}")
            text_flags[key + "_total"] += 1
            text_flags[key] += any(c.outcome == "fail" for c in cs2)
    res.notes = {"disagreeing": gt_bad, "agreeing": gt_good, "not_simple": gt_none, "found": found,
                 "missed": missed, "false_flags": false_flags, "flagged_not_simple": flagged_unparsed,
                 "missed_list": missed_list[:20], "false_list": false_list[:20]}
    res.model_text = text_flags


def run_processbench(res: Results, base: Path) -> None:
    data = json.loads((base / "processbench_gsm8k.json").read_text(encoding="utf-8"))
    correct = [d for d in data if d["label"] == -1]
    wrong = [d for d in data if d["label"] != -1]
    false_alarms: list[dict[str, Any]] = []
    flagged = at = after = before = 0
    for d in data:
        steps = d["steps"]
        text = "\n\n".join(steps)
        starts = []
        pos = 0
        for s in steps:
            starts.append(pos)
            pos += len(s) + 2
        cs = _timed(res, text, d["problem"], tag="ProcessBench " + ("correct" if d["label"] == -1 else "erroneous"))
        fail_steps = sorted({_step_of(c.span[0], starts) for c in cs if c.outcome == "fail" and c.span})
        if d["label"] == -1:
            if fail_steps:
                false_alarms.append({"id": d["id"], "steps": fail_steps,
                                     "claims": [c.claim for c in cs if c.outcome == "fail"]})
        elif fail_steps:
            flagged += 1
            first = fail_steps[0]
            if first == d["label"]:
                at += 1
            elif first > d["label"]:
                after += 1
            else:
                before += 1
    res.processbench = {
        "correct_solutions": len(correct), "false_alarms": len(false_alarms),
        "false_alarm_rate": len(false_alarms) / max(1, len(correct)), "false_alarm_list": false_alarms,
        "erroneous_solutions": len(wrong), "flagged": flagged, "first_flag_at_label": at,
        "first_flag_after_label": after, "first_flag_before_label": before,
    }


def run_non_math(res: Results, base: Path) -> None:
    """False alarms on text that is not a math answer: GPT-4 HumanEval code and prompts
    (``code/``) and bibliographic records (``citations/*.jsonl``), when present."""
    root = base.parent
    texts: list[str] = []
    code = root / "code" / "humaneval_py_gpt4_simple.jsonl"
    if code.is_file():
        for r in _jsonl(code):
            texts += [r["solution"], r["prompt"]]
    for p in sorted((root / "citations").glob("*.jsonl")) if (root / "citations").is_dir() else []:
        for r in _jsonl(p):
            texts.append("\n".join(str(v) for v in r.values()) if isinstance(r, dict) else str(r))
    flagged = [t[:80] for t in texts if any(c.outcome == "fail" for c in check(t))]
    res.non_math = {"texts": len(texts), "flagged": len(flagged), "examples": flagged[:5]}


def _step_of(offset: int, starts: list[int]) -> int:
    k = 0
    for i, s in enumerate(starts):
        if offset >= s:
            k = i
    return k


def run_all(base: Path | None = None) -> Results:
    """Run every measurement on the case files under ``base`` (default ``cases_dir()``)."""
    base = base or cases_dir()
    res = Results()
    t0 = time.perf_counter()
    warm_up()
    res.first_call_ms = (time.perf_counter() - t0) * 1000
    res.baseline_ms.append(_baseline_ms())
    run_reference(res, base)
    run_model_solutions(res, base)
    run_processbench(res, base)
    res.baseline_ms.append(_baseline_ms())
    run_non_math(res, base)
    return res


def _baseline_ms() -> float:
    """Same-run yardstick for the machine's speed/load: median time of a fixed pure-Python
    workload (tokenising a 2 kB string with ``re.findall`` 20 times), in ms."""
    text = "She makes 9 * 2 = $18 every day, and 16 - 3 - 4 = 9 eggs. " * 35
    pat = re.compile(r"\d+|[A-Za-z]+|\S")
    times = []
    for _ in range(15):
        t0 = time.perf_counter()
        for _ in range(20):
            pat.findall(text)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def report(res: Results) -> str:
    ref, notes, pb, mt = res.reference, res.notes, res.processbench, res.model_text
    lines = [
        "# Arithmetic verifier on real data",
        "",
        f"Data: `{cases_dir()}` (GSM8K test + example model solutions, ProcessBench GSM8K). "
        "Command: `.venv/bin/python bench/arithmetic_bench.py`.",
        "",
        "| measure | result | floor |",
        "| --- | --- | --- |",
        *[
            f"| GSM8K references flagged, notes {mode} | {len(ref[mode]['flagged'])} / {ref['answers']} "
            f"({ref[mode]['checked_claims']} claims decided); false alarms "
            f"{len(false_alarms(ref[mode]['flagged']))}, wrong as written in the reference "
            f"{len(ref[mode]['flagged']) - len(false_alarms(ref[mode]['flagged']))} | "
            f"<= {FLOOR_REFERENCE_FLAGS} false alarm |"
            for mode in ("kept", "stripped")
        ],
        f"| calculator notes that disagree with their expression (independent ground truth) | "
        f"{notes['found']} / {notes['disagreeing']} found, {notes['missed']} missed | all found |",
        f"| agreeing notes flagged | {notes['false_flags']} / {notes['agreeing']} | 0 |",
        f"| notes not simple arithmetic (no ground truth) / flagged among them | "
        f"{notes['not_simple']} / {notes['flagged_not_simple']} | - |",
        f"| ProcessBench GSM8K false alarms (label -1) | {pb['false_alarms']} / {pb['correct_solutions']} "
        f"({pb['false_alarm_rate']:.1%}) | <= {FLOOR_PROCESSBENCH_FALSE_ALARM:.0%} |",
        f"| ProcessBench erroneous solutions flagged | {pb['flagged']} / {pb['erroneous_solutions']} | report |",
        f"| ... first flag at / after / before the labelled step | {pb['first_flag_at_label']} / "
        f"{pb['first_flag_after_label']} / {pb['first_flag_before_label']} | report |",
        f"| GPT-3 solutions (notes stripped) flagged: correct / incorrect | "
        f"{mt['correct']} / {mt['correct_total']} , {mt['incorrect']} / {mt['incorrect_total']} | report |",
        f"| non-math text flagged (HumanEval code/prompts, bibliographic records) | "
        f"{res.non_math.get('flagged', '-')} / {res.non_math.get('texts', '-')} | report |",
        f"| p95 time per answer ({len(res.times_ms)} answers) | {res.p95_ms:.2f} ms "
        f"(median {statistics.median(res.times_ms):.2f} ms, max {max(res.times_ms):.1f} ms) | <= {FLOOR_P95_MS:.0f} ms |",
        f"| one-time warm-up (pint registry) | {res.first_call_ms:.0f} ms | - |",
        f"| same-run yardstick (fixed regex workload, before / after) | "
        f"{res.baseline_ms[0]:.2f} / {res.baseline_ms[-1]:.2f} ms; p95 = "
        f"{res.p95_ms / max(1e-9, statistics.mean(res.baseline_ms)):.1f}x yardstick | - |",
        "",
        f"Floors: {'all met' if not floors_broken(res) else 'BROKEN: ' + '; '.join(floors_broken(res))}. "
        "A flagged reference line counts as *wrong as written* (not a false alarm) only when an independent "
        "exact evaluation of its plain-arithmetic text disagrees and the text before it does not continue "
        "the expression (`false_as_written`).",
        "",
        "## Flagged GSM8K reference answers",
        "",
    ]
    for mode in ("kept", "stripped"):
        for f in ref[mode]["flagged"]:
            lines.append(f"- notes {mode}, answer #{f['index']}: {f['claims']} (stated {f['found']}, computed {f['expected']})")
    lines += ["", "## Checks decided per claim form (pass / fail)", "",
              "GSM8K references with notes stripped, GPT-3 solutions with notes stripped (by final-answer "
              "label), ProcessBench GSM8K (by label). A fail on a correct-labelled answer is either a false "
              "alarm or a wrong line in an answer whose final number is right (see the sections below).", ""]
    tags = ["GSM8K references", "GPT-3 correct", "GPT-3 incorrect", "ProcessBench correct", "ProcessBench erroneous"]
    forms = sorted({f for (_, f, _) in res.forms})
    lines += ["| claim form | " + " | ".join(tags) + " |", "| --- |" + " --- |" * len(tags)]
    for f in forms:
        cells = [f"{res.forms.get((t, f, 'pass'), 0)} / {res.forms.get((t, f, 'fail'), 0)}" for t in tags]
        lines.append(f"| {f} | " + " | ".join(cells) + " |")
    lines += ["", "## ProcessBench false alarms", ""]
    for f in pb["false_alarm_list"]:
        lines.append(f"- {f['id']} step {f['steps']}: {f['claims']}")
    if notes["missed_list"] or notes["false_list"]:
        lines += ["", "## Note mismatches", "", f"- missed: {notes['missed_list']}", f"- false: {notes['false_list']}"]
    return "\n".join(lines) + "\n"


def floors_broken(res: Results) -> list[str]:
    """The issue-3 floors this run breaks (empty when all are met). Reference flags count
    only when the flagged line is not wrong as written (see the cases test)."""
    out = []
    for mode in ("kept", "stripped"):
        n = len(false_alarms(res.reference[mode]["flagged"]))
        if n > FLOOR_REFERENCE_FLAGS:
            out.append(f"GSM8K reference false alarms ({mode}): {n}")
    if res.notes["missed"] or res.notes["false_flags"]:
        out.append(f"calculator notes: {res.notes['missed']} missed, {res.notes['false_flags']} false")
    if res.processbench["false_alarm_rate"] > FLOOR_PROCESSBENCH_FALSE_ALARM:
        out.append(f"ProcessBench false alarms {res.processbench['false_alarm_rate']:.1%}")
    if res.p95_ms > FLOOR_P95_MS:
        out.append(f"p95 {res.p95_ms:.1f} ms")
    return out


def _load_other(root: Path) -> Any:
    """The arithmetic verifier of another checkout (``root/verifiers/arithmetic``), imported
    under the name ``arith_other`` from a temporary copy whose own imports are renamed, so the
    two versions run side by side in one process."""
    import importlib
    import shutil
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="arith_other_"))
    pkg = tmp / "arith_other"
    shutil.copytree(root / "verifiers" / "arithmetic", pkg)
    for f in pkg.glob("*.py"):
        f.write_text(f.read_text(encoding="utf-8").replace("verifiers.arithmetic", "arith_other"), encoding="utf-8")
    sys.path.insert(0, str(tmp))
    return importlib.import_module("arith_other")


def compare(other_root: Path, base: Path | None = None) -> dict[str, Any]:
    """Before/after on every answer of the case files: this tree's ``check`` against the one
    in ``other_root`` (e.g. a main checkout), alternating which runs first. Returns the flags
    each adds on answers labelled correct (GSM8K references, GPT-3 ``is_correct``, ProcessBench
    label -1) and incorrect, the claims decided by each, and the p95 ratio (same process, same
    load)."""
    base = base or cases_dir()
    other = _load_other(other_root)
    other.warm_up()
    warm_up()
    items: list[tuple[str, str, bool, str]] = []  # (name, answer, labelled correct, question)
    for i, r in enumerate(_jsonl(base / "test.jsonl")):
        items.append((f"GSM8K reference #{i} (notes kept)", r["answer"], True, r["question"]))
        items.append((f"GSM8K reference #{i} (notes stripped)", NOTE.sub("", r["answer"]), True, r["question"]))
    for i, r in enumerate(_jsonl(base / "example_model_solutions.jsonl")):
        for sysname in SYSTEMS:
            items.append((f"GPT-3 #{i} {sysname}", NOTE.sub("", r[sysname]["solution"]), bool(r[sysname]["is_correct"]),
                          r["question"]))
    for d in json.loads((base / "processbench_gsm8k.json").read_text(encoding="utf-8")):
        items.append((f"ProcessBench {d['id']}", "\n\n".join(d["steps"]), d["label"] == -1, d["problem"]))
    times: dict[str, list[float]] = {"this": [], "other": []}
    out: dict[str, Any] = {"answers": len(items), "new_flags_correct": [], "new_flags_incorrect": [],
                           "gone_flags_correct": [], "gone_flags_incorrect": [], "decided": {"this": 0, "other": 0}}
    for k, (name, answer, ok, q) in enumerate(items):
        got: dict[str, set[str]] = {}
        for who in (("this", "other") if k % 2 == 0 else ("other", "this")):
            fn = check if who == "this" else other.check
            t0 = time.perf_counter()
            cs = fn(answer, q)
            times[who].append((time.perf_counter() - t0) * 1000)
            got[who] = {c.claim for c in cs if c.outcome == "fail"}
            out["decided"][who] += sum(1 for c in cs if c.outcome in ("pass", "fail"))
        label = "correct" if ok else "incorrect"
        for claim in sorted(got["this"] - got["other"]):
            out[f"new_flags_{label}"].append(f"{name}: {claim}")
        for claim in sorted(got["other"] - got["this"]):
            out[f"gone_flags_{label}"].append(f"{name}: {claim}")

    def p95(x: list[float]) -> float:
        x = sorted(x)
        return x[int(0.95 * (len(x) - 1))]

    out["p95_ms"] = {"this": p95(times["this"]), "other": p95(times["other"])}
    out["p95_ratio"] = out["p95_ms"]["this"] / max(1e-9, out["p95_ms"]["other"])
    return out


def compare_report(cmp: dict[str, Any], other_root: Path) -> str:
    lines = [f"## Before / after: this tree against `{other_root}`", "",
             f"{cmp['answers']} answers, both verifiers in one process, alternating order.", "",
             "| measure | result |", "| --- | --- |",
             f"| new flags on answers labelled correct | {len(cmp['new_flags_correct'])} |",
             f"| flags gone on answers labelled correct | {len(cmp['gone_flags_correct'])} |",
             f"| new flags on answers labelled incorrect | {len(cmp['new_flags_incorrect'])} |",
             f"| flags gone on answers labelled incorrect | {len(cmp['gone_flags_incorrect'])} |",
             f"| claims decided (pass or fail), before -> after | {cmp['decided']['other']} -> {cmp['decided']['this']} |",
             f"| p95 per answer, before / after (same run) | {cmp['p95_ms']['other']:.2f} / {cmp['p95_ms']['this']:.2f} ms "
             f"({cmp['p95_ratio']:.2f}x) |", ""]
    for key in ("new_flags_correct", "gone_flags_correct", "new_flags_incorrect", "gone_flags_incorrect"):
        if cmp[key]:
            lines += [f"{key.replace('_', ' ')}:", ""] + [f"- {x}" for x in cmp[key]] + [""]
    return "\n".join(lines) + "\n"


def main() -> int:
    base = cases_dir()
    if not base.is_dir():
        print(f"no case files at {base} (set VERACITY_CASES)", file=sys.stderr)
        return 2
    if len(sys.argv) == 3 and sys.argv[1] == "--compare-with":
        print(compare_report(compare(Path(sys.argv[2]), base), Path(sys.argv[2])))
        return 0
    res = run_all(base)
    text = report(res)
    print(text)
    out = ROOT / "bench" / "results" / "arithmetic.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    notes = ""
    if out.is_file():  # hand-written notes below the marker survive a rerun
        old = out.read_text(encoding="utf-8")
        if NOTES_MARKER in old:
            notes = "\n" + old[old.index(NOTES_MARKER):]
    out.write_text(text + notes, encoding="utf-8")
    return 1 if floors_broken(res) else 0


if __name__ == "__main__":
    raise SystemExit(main())
