"""Planner benchmark: template coverage, false alarms and detection on the real answers in
``../shared/cases`` (math: GSM8K reference and model solutions, ProcessBench GSM8K and
Omni-MATH; code: HumanEval solutions), and the extra cost of the planner against rules alone.

    python bench/planner_bench.py [--cases DIR] [--limit N] [--model URL --model-name NAME]

Per answer it runs the rule-based verifiers (arithmetic; code tiers 1-2 for code answers), then
``verifiers.planner.acheck`` three ways:

* templates only (the shipped ``default`` policy): answers covered with no model call, template
  ``fail`` on answers labelled correct (false alarms) and on answers labelled wrong (detections);
* templates + a model stand-in (``ScriptedModel`` answering ``verification_needed: false``) with
  ``use_model=True`` for every answer no template covered: extra model calls, tokens and wall
  time per answer against rules alone (the stand-in answers instantly, so the wall time is the
  planner's own overhead: prompt building, parsing, executing);
* ``--model URL`` (or ``--model mock``: the scripted mock upstream on 127.0.0.1): the same with ``proxy.pipeline.verifier_model.OpenAIChatModel(URL, NAME)`` on any
  OpenAI-compatible endpoint (real plans executed; their fails on correct answers counted).

Writes a markdown table to stdout (``bench/results/planner.md`` holds a measured run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifiers import arithmetic  # noqa: E402
from verifiers import planner  # noqa: E402
from verifiers.model import ScriptedModel  # noqa: E402

#: proxy.cli.cases names a set by its file; this bench's tables (and bench/verdict_ab.py's) by these
_SETS = {"test": "gsm8k_reference", "example_model_solutions": "gsm8k_models",
         "humaneval_py_gpt4_simple": "humaneval_gpt4"}


def load(cases: Path, limit: int | None) -> list[dict[str, Any]]:
    """Records ``{set, question, answer, correct (bool|None), kind}`` from the case files, read by
    :mod:`proxy.cli.cases` (the same reader as ``veracity eval``)."""
    from proxy.cli.cases import read_file

    m = cases / "math"
    out: list[dict[str, Any]] = []
    files = [(m / "test.jsonl", "math"), (m / "example_model_solutions.jsonl", "math"),
             (m / "processbench_gsm8k.json", "math"), (m / "processbench_omnimath.json", "math"),
             (cases / "code" / "humaneval_py_gpt4_simple.jsonl", "code")]
    for path, kind in files:
        for it in read_file(path, limit=limit):
            out.append({"set": _SETS.get(it["set"], it["set"]), "question": it["question"], "answer": it["answer"],
                        "correct": it["label"], "kind": kind})
    return out


def rules(rec: dict[str, Any]) -> list[Any]:
    checks = arithmetic.check(rec["answer"], rec["question"])
    if rec["kind"] == "code":
        from verifiers import code

        checks += code.check(rec["answer"], rec["question"], sandbox="none")
    return checks


def _no_plan() -> ScriptedModel:
    return ScriptedModel(default={"verification_needed": False, "verification_steps": []})


async def bench(records: list[dict[str, Any]], model: Any = None) -> dict[str, Any]:
    sets: dict[str, dict[str, Any]] = {}
    fires: list[dict[str, Any]] = []
    t_rules: list[float] = []
    t_tmpl: list[float] = []
    t_model: list[float] = []
    calls = tokens = 0
    stand_in = _no_plan()
    real = {"calls": 0, "fail_on_correct": 0, "fail_on_wrong": 0, "errors": 0, "answers": 0, "tokens": 0,
            "ms_median": 0.0}
    real_ms: list[float] = []
    for rec in records:
        s = sets.setdefault(rec["set"], {"answers": 0, "correct": 0, "covered": 0, "fired_correct": 0,
                                         "fail_correct": 0, "fired_wrong": 0, "fail_wrong": 0, "merged": 0})
        s["answers"] += 1
        s["correct"] += rec["correct"]
        t0 = time.perf_counter()
        rc = rules(rec)
        t1 = time.perf_counter()
        out = await planner.acheck(rec["answer"], rec["question"], rule_checks=rc, use_model=False)
        t2 = time.perf_counter()
        t_rules.append((t1 - t0) * 1000)
        t_tmpl.append((t2 - t1) * 1000)
        if out.plan_source == "template":
            s["covered"] += 1
            failed = any(c.outcome == "fail" for c in out.checks)
            merged = any(e["status"] == "merged" for e in out.plan["executed"])
            s["merged"] += merged
            if rec["correct"]:
                s["fired_correct"] += 1
                s["fail_correct"] += failed
            else:
                s["fired_wrong"] += 1
                s["fail_wrong"] += failed
            fires.append({"set": rec["set"], "correct": rec["correct"], "question": rec["question"][:160],
                          "checks": [(c.outcome, c.expected, c.found) for c in out.checks],
                          "executed": out.plan["executed"]})
            continue
        before_calls, before_tok = len(stand_in.calls), sum(c.tokens for c in stand_in.calls)
        t3 = time.perf_counter()
        await planner.acheck(rec["answer"], rec["question"], model=stand_in, rule_checks=rc, use_model=True)
        t_model.append((time.perf_counter() - t3) * 1000)
        calls += len(stand_in.calls) - before_calls
        tokens += sum(c.tokens for c in stand_in.calls) - before_tok
        if model is not None:
            n0, tok0 = len(model.calls), sum(c.tokens for c in model.calls)
            t4 = time.perf_counter()
            o = await planner.acheck(rec["answer"], rec["question"], model=model, rule_checks=rc, use_model=True,
                                     deadline_s=120)
            real_ms.append((time.perf_counter() - t4) * 1000)
            real["tokens"] += sum(c.tokens for c in model.calls) - tok0
            real["answers"] += 1
            real["calls"] += len(model.calls) - n0
            real["errors"] += bool(o.error)
            if any(c.outcome == "fail" for c in o.checks):
                real["fail_on_correct" if rec["correct"] else "fail_on_wrong"] += 1
    if real_ms:
        real["ms_median"] = round(statistics.median(real_ms), 2)
    return {"sets": sets, "fires": fires, "t_rules": t_rules, "t_tmpl": t_tmpl, "t_model": t_model,
            "calls": calls, "tokens": tokens, "uncovered": len(t_model), "real": real if model is not None else None}


def _p(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(r: dict[str, Any], n: int) -> str:
    lines = ["| set | answers | labelled correct | template-covered (no model call) | template fail on correct "
             "(false alarms) / covered correct | template fail on wrong / covered wrong | merged with a rule check |",
             "|---|---|---|---|---|---|---|"]
    tot = {k: 0 for k in ("answers", "correct", "covered", "fail_correct", "fired_correct", "fail_wrong",
                          "fired_wrong", "merged")}
    for name, s in r["sets"].items():
        lines.append(f"| {name} | {s['answers']} | {s['correct']} | {s['covered']} | {s['fail_correct']} / "
                     f"{s['fired_correct']} | {s['fail_wrong']} / {s['fired_wrong']} | {s['merged']} |")
        for k in tot:
            tot[k] += s[k]
    lines.append(f"| **all** | {tot['answers']} | {tot['correct']} | {tot['covered']} | {tot['fail_correct']} / "
                 f"{tot['fired_correct']} | {tot['fail_wrong']} / {tot['fired_wrong']} | {tot['merged']} |")
    u = max(1, r["uncovered"])
    lines += ["", f"Wall time per answer (ms, median / p95) over {n} answers: rules alone "
              f"{statistics.median(r['t_rules']):.2f} / {_p(r['t_rules'], .95):.2f}; planner with templates only "
              f"(added) {statistics.median(r['t_tmpl']):.3f} / {_p(r['t_tmpl'], .95):.3f}; planner with the model "
              f"stand-in (added, {r['uncovered']} answers no template covered) "
              f"{statistics.median(r['t_model'] or [0]):.3f} / {_p(r['t_model'], .95):.3f}.",
              f"Model stand-in (`verification_needed: false`): {r['calls']} calls for {r['uncovered']} answers "
              f"({r['calls'] / u:.2f} per answer), {r['tokens']} tokens ({r['tokens'] / u:.0f} per answer at "
              "0.25 token/char of prompt + answer)."]
    if r["real"]:
        lines.append(f"Real model: {json.dumps(r['real'])}")
    return "\n".join(lines)


async def amain() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=str(ROOT.parent / "shared" / "cases"))
    ap.add_argument("--limit", type=int, default=None, help="records per file")
    ap.add_argument("--model", help="OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1), or 'mock': the "
                    "scripted mock upstream over HTTP answering every plan 'not needed'")
    ap.add_argument("--model-name", default="gpt-4o-mini")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--fires", action="store_true", help="print every template firing")
    a = ap.parse_args()
    cases = Path(a.cases)
    if not cases.exists():
        cases = Path("/work/shared/cases")
    records = load(cases, a.limit)
    model = None
    mock = None
    if a.model == "mock":  # the scripted upstream over real HTTP, answering every plan "not needed"
        from proxy.upstreams.mock import MockUpstream

        mock = MockUpstream({"rules": [{"match": {"schema": "Plan"}, "reply": {
            "content": json.dumps({"verification_needed": False, "verification_steps": []})}}]})
        mock.__enter__()
        a.model = mock.base_url
    if a.model:
        from proxy.pipeline.verifier_model import OpenAIChatModel

        model = OpenAIChatModel(a.model, a.model_name, a.api_key)
    arithmetic.warm_up()
    r = await bench(records, model)
    print(report(r, len(records)))
    if a.fires:
        for f in r["fires"]:
            print(json.dumps(f, ensure_ascii=False, default=str))
    if model is not None:
        await model.aclose()
    if mock is not None:
        mock.__exit__(None, None, None)


if __name__ == "__main__":
    asyncio.run(amain())
