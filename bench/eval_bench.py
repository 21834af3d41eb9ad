"""`veracity eval` with held-out citation indexes: figures that do not come from an index holding the answers.

``bench/citations_bench.py``'s ``full`` index holds every VALID entry's own fields, and its record
files (``valid_entries_dblp.jsonl`` ...) hold 454 of HALLMARK dev's 513 VALID entries too (the
HALLMARK authors scraped both from DBLP): a citation found there was found because the evaluated
entry itself was put in the library. This script builds three offline indexes from
``$VERACITY_CASES/citations`` (default ``../shared/cases``):

* ``held_out``: the three record files minus every record of an evaluated work -- a record whose
  normalised title (``verifiers.citations._match.normalize_title``) or DOI equals that of any entry
  of ``supplement_chatgpt_citations.jsonl`` or ``dev_public.jsonl``, VALID or HALLUCINATED. It holds
  none of the evaluated works: what is measured is what the checks do when the library does not
  know the cited work (a right reference can then not be confirmed, only left ``unknown`` --
  ``--index-partial`` -- or flagged NOT_FOUND by an authoritative index);
* ``records``: the three record files as they are (what a newcomer builds from the README);
* ``full``: ``records`` plus the VALID entries' own fields (``bench/citations_bench.py``'s
  ``full``): in-sample, every VALID entry is in it by construction.

Then it runs ``veracity eval`` (in-process, policy ``default``, all five reference styles, no
model) on the citation cases with each index (held out both as a partial library and as an
authoritative one), and on every case folder with the held-out partial index (the headline) and
the ``full`` one (in-sample), and writes ``bench/results/eval-heldout.md`` (a table, each row with
the command that reproduces it), ``bench/results/eval-cases/`` (all cases, held out) and
``bench/results/eval-cases-insample/`` (all cases, ``full``; their ``results.jsonl`` and
``misjudged.jsonl``, 5-8 MB each, are not kept: run the row's command for them).

Usage::

    python bench/eval_bench.py                     # everything (~15 min on 2 shared cores)
    python bench/eval_bench.py --indexes DIR       # only build DIR/{held_out,records,full}.sqlite3
    python bench/eval_bench.py --citations-only    # the citation rows only
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from citations_bench import RECORD_FILES, build_indexes, cases_dir, load_labelled  # noqa: E402

from verifiers.citations import build_index  # noqa: E402
from verifiers.citations._match import normalize_title  # noqa: E402
from verifiers.citations._records import normalize_doi  # noqa: E402
from verifiers.citations.sources.local_index import read_records  # noqa: E402

RESULTS = ROOT / "bench" / "results"


def build_held_out(d: Path, labelled: dict[str, list[dict]], path: str) -> dict[str, int]:
    """The record files minus every record of an evaluated work (module doc) -> ``path``.
    Returns counts: records read, left out, indexed."""
    titles, dois = set(), set()
    for es in labelled.values():
        for e in es:
            f = e["fields"]
            if normalize_title(f.get("title") or ""):
                titles.add(normalize_title(f["title"]))
            if f.get("doi"):
                dois.add(normalize_doi(f["doi"]))
    kept, out = [], 0
    for name in RECORD_FILES:
        for r in read_records(d / name):
            if normalize_title(r.title or "") in titles or (r.doi and normalize_doi(r.doi) in dois):
                out += 1
            else:
                kept.append(r)
    added = build_index([], path, records=kept)
    return {"read": len(kept) + out, "left_out": out, "indexed": added}


def build_all(target: Path) -> dict[str, dict]:
    """``target/{held_out,records,full}.sqlite3``; returns what each holds."""
    d = cases_dir()
    labelled = load_labelled(d)
    target.mkdir(parents=True, exist_ok=True)
    info = {"held_out": build_held_out(d, labelled, str(target / "held_out.sqlite3"))}
    with tempfile.TemporaryDirectory() as tmp:
        built = build_indexes(d, labelled, tmp)   # citations_bench's: "held_out" = the record files as they are
        shutil.copy(built["held_out"], target / "records.sqlite3")
        shutil.copy(built["full"], target / "full.sqlite3")
    return info


def run_eval(data: Path, out: Path, index: Path, partial: bool) -> tuple[dict, float, str]:
    """``veracity eval`` in-process (its own CLI entry point); returns metrics, seconds, command."""
    from proxy.cli.main import main

    args = ["eval", str(data), "--out", str(out), "--citations-index", str(index)] + (["--index-partial"] if partial
                                                                                        else [])
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(args)
    secs = time.perf_counter() - t0
    if rc:
        raise SystemExit(f"veracity eval failed ({rc}): {' '.join(args)}")
    cmd = (f"veracity eval ../shared/cases{'' if data.name == 'cases' else '/' + data.name} --out DIR "
           f"--citations-index IDX/{index.name}" + (" --index-partial" if partial else ""))
    return json.loads((out / "metrics.json").read_text()), secs, cmd


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def row(label: str, m: dict, secs: float, cmd: str) -> str:
    a = m["answers"]
    c = m["per_verifier"].get("citations", {}).get("answers", {})
    return (f"| {label} | {a['n']:,} | {a['fp']:,} of {a['fp'] + a['tn']:,} ({pct(a['false_alarm_rate'])}) | "
            f"{pct(a['precision'])} / {pct(a['recall'])} | {pct(c.get('precision'))} / {pct(c.get('recall'))} "
            f"({c.get('fp', 0):,} false alarms) | {secs:.0f} s | `{cmd}` |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--indexes", default=None, help="only build the three indexes into this folder")
    ap.add_argument("--citations-only", action="store_true", help="skip the all-cases runs")
    a = ap.parse_args(argv)
    if a.indexes:
        info = build_all(Path(a.indexes))
        print(json.dumps({"held_out": info["held_out"], "folder": a.indexes}))
        return 0
    cases = cases_dir().parent
    load0 = os.getloadavg()[0]
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        idx = Path(tmp) / "idx"
        info = build_all(idx)
        runs = [("citations, held out, partial library (headline)", cases / "citations", "held_out", True),
                ("citations, held out, authoritative index", cases / "citations", "held_out", False),
                ("citations, record files as shipped (hold 454 of the 685 VALID works)", cases / "citations",
                 "records", False),
                ("citations, `full` (in-sample: holds every VALID entry)", cases / "citations", "full", False)]
        if not a.citations_only:
            runs += [("all cases, held out, partial library (headline)", cases, "held_out", True),
                     ("all cases, `full` (in-sample)", cases, "full", False)]
        for label, data, name, partial in runs:
            is_all = data == cases
            out = (RESULTS / ("eval-cases" if partial else "eval-cases-insample")) if is_all else Path(tmp) / name
            if is_all and out.exists():
                shutil.rmtree(out)
            m, secs, cmd = run_eval(data, out, idx / f"{name}.sqlite3", partial)
            if is_all:   # one line per answer, 5-8 MB each: regenerated by the run, not kept in the repository
                for big in ("results.jsonl", "misjudged.jsonl"):
                    (out / big).unlink(missing_ok=True)
            rows.append(row(label, m, secs, cmd))
            print(rows[-1], flush=True)
    ho = info["held_out"]
    text = "\n".join([
        "# `veracity eval` with held-out citation indexes", "",
        f"Generated by `python bench/eval_bench.py` ({time.strftime('%Y-%m-%d', time.gmtime())}; policy `default`, "
        f"in-process, all five reference styles, no verifier model; 2 shared cores, load average {load0:.1f} at the "
        "start). `IDX` is the folder `python bench/eval_bench.py --indexes IDX` builds:", "",
        f"- `held_out.sqlite3`: the three record files (valid_entries_dblp, raw_crossdomain_valid, journal_articles) "
        f"minus every record of an evaluated work (same normalised title or DOI as any Walters & Wilder or HALLMARK "
        f"dev entry, right or fabricated): {ho['left_out']} of {ho['read']} records left out, {ho['indexed']} "
        "indexed. It holds none of the evaluated works.",
        "- `records.sqlite3`: the three record files as they are (holds 454 of HALLMARK dev's 513 VALID works, none "
        "of Walters & Wilder's 172).",
        "- `full.sqlite3`: the record files plus every VALID entry's own fields (`bench/citations_bench.py`'s "
        "`full`): in-sample.", "",
        "A flag is a `failed` answer; positive class: a wrong answer (a fabricated reference). `--index-partial`: "
        "a reference the index lacks is `unknown` (`local_index.authoritative: false`, the setting for a partial "
        "library); without it a miss is NOT_FOUND, a flag.", "",
        "| run | answers | false alarms (right answers failed) | precision / recall (answers) | citations verifier "
        "precision / recall | time | command |",
        "|---|---:|---|---|---|---:|---|",
        *rows, "",
        "Reading it: with a library that lacks the cited works a right reference cannot be confirmed. An "
        "authoritative index fails it (NOT_FOUND: row 2): use `authoritative: true` only for a library that is the "
        "whole world. `--index-partial` (`local_index.authoritative: false`) leaves it `unknown` whether the title "
        "search returned nothing or only other works, and leaves a resemblance to another record "
        "(LIKELY_HALLUCINATION) `unknown` too: a partial library's silence is no evidence "
        "(`verifiers/citations/_verify.py` `expected_to_hold`, the absence rule). What a partial library that holds "
        "none of the evaluated works can still catch is positive evidence only (an identifier that resolves to "
        "another work, a year before the cited preprint's first version); here it catches nothing, and says so "
        "with `unknown`. Before that rule (commit 931450a) row 1 failed 2,195 of 3,425 right answers, row 5 2,218 of "
        "12,181: a search that returned other works was taken as a definitive NOT_FOUND. The in-sample rows are "
        "what the checks do when the library holds the cited work exactly as cited: an upper bound, not a "
        "measurement of the checks on unseen "
        "references.", ""])
    (RESULTS / "eval-heldout.md").write_text(text)
    print(f"wrote {RESULTS / 'eval-heldout.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
