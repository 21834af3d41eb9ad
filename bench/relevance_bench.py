"""Citation relevance benchmark: does the cited abstract support the citing sentence?

Data: ../shared/cases/relevance (SciFact, Wadden et al. EMNLP 2020): claims rewritten by experts
from real citation sentences, each paired with the abstracts it cites; label per (claim,
abstract): SUPPORT, CONTRADICT, or no evidence (NEI). Here a pair is *supported* when SciFact
says SUPPORT and *unsupported* otherwise (CONTRADICT or NEI: the abstract does not back the
sentence -- a mis-citation).

Split: the deterministic tier's thresholds were chosen on ``scifact_claims_train.jsonl``; the
held-back numbers are on ``scifact_claims_dev.jsonl`` (the official dev split, never used for
tuning). Reported per split: precision / recall / F1 of the ``unsupported`` flags and of the
``supported`` flags, the share left ``unknown``, and latency per pair.

``--model URL`` (with ``--model-name``; ``--api-key`` optional) runs the model tier as well
against any OpenAI-compatible ``/v1/chat/completions`` endpoint through a small httpx
:class:`ChatModel` defined below (``response_format: json_schema``). This machine has no model:
the results file says so and gives no model numbers.

Usage::

    python bench/relevance_bench.py                      # deterministic tier, writes bench/results/relevance.md
    python bench/relevance_bench.py --model http://127.0.0.1:8000/v1 --model-name qwen2.5-7b-instruct --limit 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from verifiers.citations._relevance import judge_deterministic, judge_relevance  # noqa: E402
from verifiers.model import ModelError, ModelReply  # noqa: E402

DATA = ROOT.parent / "shared" / "cases" / "relevance"
if not DATA.exists():
    DATA = Path("/work/shared/cases/relevance")
OUT = ROOT / "bench" / "results" / "relevance.md"


def load(split: str) -> list[tuple[str, str, str, str]]:
    """``(claim, title, abstract, label)`` for every cited abstract of every claim of ``split``."""
    corpus = {d["doc_id"]: d for d in map(json.loads, (DATA / "scifact_corpus.jsonl").open())}
    out = []
    for c in map(json.loads, (DATA / f"scifact_claims_{split}.jsonl").open()):
        for did in c["cited_doc_ids"]:
            ev = c["evidence"].get(str(did))
            doc = corpus[did]
            out.append((c["claim"], doc["title"], " ".join(doc["abstract"]), ev[0]["label"] if ev else "NEI"))
    return out


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def score(rows: list[tuple[str, str]]) -> dict[str, Any]:
    """``rows``: (gold label, predicted status). Returns the metrics of both flags."""
    out: dict[str, Any] = {"n": len(rows), "pred": Counter(p for _, p in rows)}
    for flag, gold_pos in (("unsupported", {"CONTRADICT", "NEI"}), ("supported", {"SUPPORT"})):
        tp = sum(1 for g, p in rows if p == flag and g in gold_pos)
        fp = sum(1 for g, p in rows if p == flag and g not in gold_pos)
        fn = sum(1 for g, p in rows if p != flag and g in gold_pos)
        out[flag] = (tp, fp, fn, *prf(tp, fp, fn))
    out["by_label"] = {lab: Counter(p for g, p in rows if g == lab) for lab in ("SUPPORT", "CONTRADICT", "NEI")}
    return out


def run_deterministic(pairs) -> tuple[dict[str, Any], list[float]]:
    rows, lat = [], []
    for claim, title, abstract, label in pairs:
        t0 = time.perf_counter()
        r = judge_deterministic(claim, abstract, title)
        lat.append((time.perf_counter() - t0) * 1000)
        rows.append((label, r.status))
    return score(rows), lat


class OpenAICompatModel:
    """A minimal :class:`~verifiers.model.ChatModel` over an OpenAI-compatible endpoint (bench only)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0):
        import httpx

        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self.calls = 0
        self.tokens = 0

    async def chat(self, messages: Sequence[Mapping[str, Any]], *, schema: Mapping[str, Any] | None = None,
                   schema_name: str = "answer", purpose: str = "judge", max_tokens: int | None = None) -> ModelReply:
        body: dict[str, Any] = {"model": self.model, "messages": list(messages), "temperature": 0}
        if max_tokens:
            body["max_tokens"] = max_tokens
        if schema is not None:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": schema_name, "schema": dict(schema)}}
        try:
            r = await self.client.post("/chat/completions", json=body)
            r.raise_for_status()
            data = r.json()
        except Exception as exc:  # transport / HTTP / JSON: the step is an error
            raise ModelError(f"{type(exc).__name__}: {exc}"[:200]) from exc
        usage = data.get("usage") or {}
        self.calls += 1
        self.tokens += int(usage.get("total_tokens") or 0)
        content = ((data.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
        return ModelReply(content, {"prompt_tokens": int(usage.get("prompt_tokens") or 0),
                                    "completion_tokens": int(usage.get("completion_tokens") or 0)}, schema is not None)


async def run_model(pairs, model: OpenAICompatModel) -> tuple[dict[str, Any], list[float]]:
    rows, lat = [], []
    for claim, title, abstract, label in pairs:
        t0 = time.perf_counter()
        r = await judge_relevance(claim, abstract, model=model, title=title)
        lat.append((time.perf_counter() - t0) * 1000)
        rows.append((label, r.status))
    return score(rows), lat


def table(name: str, m: dict[str, Any], lat: list[float]) -> list[str]:
    lines = [f"### {name} (n = {m['n']} claim-abstract pairs)", "",
             "| flag | flagged | right | precision | recall | F1 |", "|---|---|---|---|---|---|"]
    for flag in ("unsupported", "supported"):
        tp, fp, fn, p, r, f = m[flag]
        lines.append(f"| {flag} | {tp + fp} | {tp} | {p:.1%} | {r:.1%} | {f:.3f} |")
    q = sorted(lat)
    lines += ["", "Predictions by gold label: " + "; ".join(
        f"{lab}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) for lab, c in m["by_label"].items()),
        "", f"Latency per pair: p50 {statistics.median(q):.3f} ms, p95 {q[int(len(q) * 0.95)]:.3f} ms, "
            f"max {q[-1]:.3f} ms.", ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="base URL of an OpenAI-compatible API (e.g. http://127.0.0.1:8000/v1)")
    ap.add_argument("--model-name", default="default")
    ap.add_argument("--api-key")
    ap.add_argument("--limit", type=int, default=0, help="pairs per split for the model mode (0 = all)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()

    splits = {"train (tuning)": load("train"), "dev (held back)": load("dev")}
    lines = ["# Citation relevance — SciFact benchmark", "",
             "Generated by `bench/relevance_bench.py` on shared/cases/relevance (SciFact claims and the abstracts "
             "they cite). *unsupported* = SciFact CONTRADICT or no evidence (NEI); *supported* = SUPPORT. The "
             "deterministic tier's thresholds were chosen on train; dev was held back.", "",
             "**Honesty note.** dev was evaluated twice: the first configuration (coverage < 0.25, or < 0.4 with an "
             "absent identifier; hyphenated words kept whole) scored 95.5% on train but **87.1%** (54/62) `unsupported` "
             "precision on dev. It was then tightened *on train only* (grid over the two thresholds, prefix length and "
             "hyphen splitting; the dev errors were not read) to the shipped values, whose dev number is below. That "
             "second look makes dev slightly less than fully held back; with 40 flags the 95% interval of a 92.5% "
             "precision is roughly 80-98%.", "",
             "**What the numbers mean.** SciFact claims are short expert rewrites of citation sentences and NEI abstracts "
             "are topically close, so key-term overlap separates little: the deterministic tier flags only the clear "
             "cases (recall ~20% for `unsupported`, ~4% for `supported`) and says `unknown` for the rest -- the model "
             "tier's job. Contradictions are never flagged from numbers or direction words by this tier; those only "
             "block a `supported`.", ""]
    headline = []
    for name, pairs in splits.items():
        m, lat = run_deterministic(pairs)
        lines += table(f"Deterministic tier — {name}", m, lat)
        tp, fp, fn, p, r, f = m["unsupported"]
        stp, sfp, sfn, sp, sr, sf = m["supported"]
        headline.append(f"- {name}: `unsupported` precision **{p:.1%}** (recall {r:.1%}, F1 {f:.3f}); "
                        f"`supported` precision **{sp:.1%}** (recall {sr:.1%}, F1 {sf:.3f}); "
                        f"unknown {m['pred'].get('unknown', 0)} of {m['n']}.")
        print(name, "unsupported P/R/F1", f"{p:.3f} {r:.3f} {f:.3f}", "supported P/R/F1", f"{sp:.3f} {sr:.3f} {sf:.3f}",
              dict(m["pred"]))
    if args.model:
        model = OpenAICompatModel(args.model, args.model_name, args.api_key)
        pairs = splits["dev (held back)"][: args.limit or None]
        m, lat = asyncio.run(run_model(pairs, model))
        lines += table(f"Deterministic + model tier ({args.model_name}) — dev", m, lat)
        lines += [f"Model calls {model.calls}, tokens {model.tokens} ({model.tokens / max(1, len(pairs)):.0f} per pair).", ""]
        print("model", m["unsupported"][3:], m["supported"][3:], dict(m["pred"]))
    else:
        lines += ["## Model tier", "",
                  "Not measured: this machine has no model endpoint. Run `python bench/relevance_bench.py --model URL "
                  "--model-name NAME` wherever an OpenAI-compatible model is reachable.", ""]
    text = "\n".join(lines[:3] + ["", "## Headline", "", *headline, ""] + lines[3:])
    if not args.no_write:
        OUT.write_text(text)
    print(text if args.no_write else f"wrote {OUT}")


if __name__ == "__main__":
    main()
