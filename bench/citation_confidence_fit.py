"""Fit the citation statuses' published confidences from the labelled citation cases (docs/eval.md).

    python bench/citation_confidence_fit.py [--cases ../shared/cases] [--styles apa,ieee,mla,harvard,bibtex]

1. Builds the ``full`` offline index exactly as ``bench/citations_bench.py`` does (the three record
   files + the VALID entries' own fields: every real work is in the library, so NOT_FOUND and
   LIKELY_HALLUCINATION are measured where the library is authoritative -- the setting in which
   the verifier reports them as ``fail`` at all).
2. Runs ``veracity eval`` in-process on ``citations/`` (Walters & Wilder 2023 + HALLMARK dev, each
   entry rendered in every style) under the ``default`` policy with only the citation verifier on,
   its risk threshold at 0 (a status' confidence is the verifier's, whatever the risk score that
   gates it: at the default 0.3, 900 of the 7,300 answers are not checked at all), looking up only
   that index; writes its output to ``bench/results/eval-citations/``.
3. Per status, the observed precision of the class the status asserts (VALID for VERIFIED /
   PARTIALLY_VERIFIED, HALLUCINATED for the others), smoothed with Laplace's rule of succession
   ``(k + 1) / (n + 2)`` (the posterior mean under a uniform prior: a calibrated confidence is the
   expected hit rate, not a lower bound; the Wilson 95 % interval is recorded beside it), is written
   with its provenance to ``verifiers/citations/confidence_fit.json``. ``tests/verifiers/test_citation_confidence_fit.py``
   checks the constants in ``verifiers/citations`` against that file.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from citations_bench import build_indexes, load_labelled  # noqa: E402

from proxy.cli import cases

from proxy.cli import evaluation  # noqa: E402

FIT = ROOT / "verifiers" / "citations" / "confidence_fit.json"
OUT = ROOT / "bench" / "results" / "eval-citations"


def sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=os.environ.get("VERACITY_CASES") or str(ROOT.parent / "shared" / "cases"))
    ap.add_argument("--styles", default=",".join(cases.CITATION_STYLES))
    ap.add_argument("--limit", type=int, default=None, help="entries per file (a quick look; the fit uses all)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--fit", default=str(FIT))
    a = ap.parse_args(argv)
    d = Path(a.cases) / "citations"
    styles = tuple(a.styles.split(","))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        index = build_indexes(d, load_labelled(d), tmp)["full"]
        items = cases.read(d, styles=styles, limit=a.limit)
        policy = evaluation.load_policy("default", citations_index=index, verifiers=["citations"],
                                         risk_threshold=0.0)
        results = evaluation.run_items(items, policy=policy)
    metrics = evaluation.compute(items, results)
    secs = time.perf_counter() - t0
    files = sorted(cases.KNOWN_FILES[:2]) + ["valid_entries_dblp.jsonl", "raw_crossdomain_valid.jsonl",
                                             "journal_articles.jsonl"]
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    prov = {"command": "python bench/citation_confidence_fit.py" + (f" --styles {a.styles}" if a.styles != ",".join(cases.CITATION_STYLES) else "")
            + (f" --limit {a.limit}" if a.limit else ""),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat(), "commit": commit,
            "data": {f: sha256(d / f) for f in files},
            "index": "full (record files + the VALID entries' own fields, as bench/citations_bench.py)",
            "policy": "default, citations only, risk threshold 0, offline index, no cache", "styles": list(styles),
            "answers": len(items), "seconds": round(secs, 1)}
    evaluation.write(metrics, a.out, title="veracity eval: citation cases (full index)", provenance=prov)
    statuses = {}
    for st, s in metrics["citation_status"].items():
        k = s["valid"] if s["asserts"] == "VALID" else s["hallucinated"]
        statuses[st] = {"asserts": s["asserts"], "n": s["n"], "right": k, "observed": round(k / s["n"], 6) if s["n"] else None,
                        "laplace": round(s["laplace"], 6), "wilson95": s["wilson95"],
                        "outcomes": s["outcomes"]}
    fit = {"what": "per citation status: how often the class it asserts is right on the labelled citation cases",
           "smoothing": "Laplace (rule of succession): (right + 1) / (n + 2); Wilson 95% interval recorded",
           "confidence_rounding": "published authenticity = laplace (VALID statuses) or 1 - laplace (HALLUCINATED statuses), rounded to 3 decimals (verifiers/citations/_match.py STATUS_AUTHENTICITY)",
           "statuses": statuses, "provenance": prov}
    Path(a.fit).write_text(json.dumps(fit, indent=2) + "\n")
    for st, s in statuses.items():
        print(f"{st:22s} n={s['n']:5d} right={s['right']:5d} observed={s['observed']:.4f} laplace={s['laplace']:.4f}"
              f" wilson95={s['wilson95'][0]:.3f}-{s['wilson95'][1]:.3f} outcomes={s['outcomes']}")
    print(f"{len(items)} answers in {secs:.0f} s -> {a.fit}, {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
