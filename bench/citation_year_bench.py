"""Years off by one: how the citation verifier classifies a changed year, and the same references unchanged.

A year off by one is how preprint and published versions differ (arXiv 2019, proceedings 2020) and
also how models misremember or change years (HALLMARK's ``arxiv_version_mismatch``: "year
shifted"; a held-back fabrication "a year off by one against an arXiv preprint" was VERIFIED).
The rule (``verifiers/citations/_match.py`` ``compare``): such a reference is never VERIFIED; it is
a CONFLICT when the record is the very preprint cited and the stated year precedes it.

Three sets, each rendered in the five styles of ``bench/citations_bench.py``, checked offline
against the record files' index (``records``: it holds every record used here, authoritative):

* ``shifted``: every record of the three record files (valid_entries_dblp,
  raw_crossdomain_valid, journal_articles) cited with its year moved by -1 and by +1, venue and
  DOI as recorded (fabrications by construction);
* ``unchanged``: the same records as they are (right references: the false-alarm control);
* ``hallmark-year``: HALLMARK dev's HALLUCINATED entries whose change is a year (type
  ``arxiv_version_mismatch`` or ``future_date``, or an explanation that names the year).

Usage::

    python bench/citation_year_bench.py            # writes bench/results/citation-years.md
    python bench/citation_year_bench.py --json     # the counts only, to stdout (no file)
    python bench/citation_year_bench.py --before B.json --before-label 931450a
                                                   # a "before" column: --json's output at another commit
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from citations_bench import RECORD_FILES, STYLES, cases_dir  # noqa: E402

from proxy.cli.cases import citation_answer  # noqa: E402
from verifiers.citations import build_index  # noqa: E402
from verifiers.citations.sources.local_index import read_records  # noqa: E402
from verifiers.citations._verify import acheck  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def record_fields(r) -> dict:
    """An index record as HALLMARK-shaped fields (venue as journal, DOI kept)."""
    f = {"title": r.title, "author": " and ".join(r.authors), "year": str(r.year), "journal": r.venue, "doi": r.doi}
    return {k: v for k, v in f.items() if v}


def year_entries(d: Path) -> list[dict]:
    """HALLMARK dev's HALLUCINATED entries whose change is the year (module doc)."""
    out = []
    for line in (d / "dev_public.jsonl").open(encoding="utf-8"):
        e = json.loads(line)
        if e["label"] == "HALLUCINATED" and (e.get("hallucination_type") in ("arxiv_version_mismatch", "future_date")
                                             or "year" in (e.get("explanation") or "").lower()):
            out.append(e["fields"])
    return out


async def classify(sets: dict[str, list[dict]], index: str) -> dict[str, collections.Counter]:
    """``{set: Counter("STATUS/outcome")}`` over every entry x style."""
    src = {"use": [], "local_index": {"path": index}, "cache": {"backend": "none"}}
    out: dict[str, collections.Counter] = {}
    for name, entries in sets.items():
        c: collections.Counter = collections.Counter()
        for f in entries:
            for st in STYLES:
                checks = await acheck(citation_answer(f, st), sources=src, deadline=30)
                cits = [k for k in checks if k.verifier == "citations"]
                c[",".join(sorted({f"{k.evidence.get('status')}/{k.outcome}" for k in cits})) or "no check"] += 1
        out[name] = c
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print the counts, write nothing")
    ap.add_argument("--before", default=None, help="--json output of this script at another commit: a column")
    ap.add_argument("--before-label", default="before", help="that commit, for the column's title")
    a = ap.parse_args(argv)
    d = cases_dir()
    recs = [r for n in RECORD_FILES for r in read_records(d / n) if r.title and r.year and r.authors]
    shifted = [dict(record_fields(r), year=str(r.year + k)) for r in recs for k in (-1, 1)]
    sets = {"shifted": shifted, "unchanged": [record_fields(r) for r in recs], "hallmark-year": year_entries(d)}
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        idx = str(Path(tmp) / "records.sqlite3")
        build_index([d / n for n in RECORD_FILES], idx)
        counts = asyncio.run(classify(sets, idx))
    secs = time.perf_counter() - t0
    if a.json:
        print(json.dumps({k: dict(v) for k, v in counts.items()}, indent=1))
        return 0
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    lines = ["# Years off by one (citations)", "",
             f"Generated by `python bench/citation_year_bench.py` ({time.strftime('%Y-%m-%d', time.gmtime())}, code at "
             f"{commit or '?'} plus the working tree; {secs:.0f} s). Index: the three record files "
             "(valid_entries_dblp, raw_crossdomain_valid, journal_articles), authoritative -- it holds every record "
             "used below, so what is measured is the year rule, not the library's coverage. Each entry is rendered "
             f"in {len(STYLES)} styles ({', '.join(STYLES)}); counts are renderings by `STATUS/outcome`.", ""]
    before = json.loads(Path(a.before).read_text()) if a.before else None
    for name, c in counts.items():
        n = sum(c.values())
        lines += [f"## {name} ({n:,} renderings)", ""]
        if before is None:
            lines += ["| status / outcome | renderings |", "|---|---:|"]
            lines += [f"| {k} | {v:,} |" for k, v in c.most_common()]
        else:
            b = before.get(name, {})
            lines += [f"| status / outcome | renderings | at {a.before_label} |", "|---|---:|---:|"]
            keys = [k for k, _ in c.most_common()] + sorted(set(b) - set(c))
            lines += [f"| {k} | {c.get(k, 0):,} | {b.get(k, 0):,} |" for k in keys]
        lines.append("")
    lines += ["Reading it: `shifted` are fabrications by construction (a real record cited with its year moved by "
              "one); none may be VERIFIED. Most become PARTIALLY_VERIFIED (`unknown`): a year off by one is also how "
              "preprint and published versions differ, so it is not failed; a preprint cited with a year before its "
              "first version (arXiv ID, arXiv/bioRxiv DOI) is a CONFLICT; the LIKELY_HALLUCINATION and NOT_FOUND "
              "counts are the rule's neighbours' (a year in the future, other fields) and did not change. "
              "`unchanged` is the control: its few fails are the same with and without the rule (not caused by it, "
              "not investigated here). `hallmark-year` are HALLMARK's year-changed entries: failed before and after.",
              ""]
    (RESULTS / "citation-years.md").write_text("\n".join(lines))
    print(f"wrote {RESULTS / 'citation-years.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
