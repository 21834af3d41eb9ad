"""Floors on real labelled references (shared/cases/citations; skipped when absent).

Same pipeline as bench/citations_bench.py (render -> answer -> extract -> check against the
offline index), on fewer styles to stay fast. Floors (bench/RESULTS.md): F1 >= 0.9 on the Walters &
Wilder entries and no fabricated entry VERIFIED; plus guards on false alarms and extraction.
"""

from __future__ import annotations

import asyncio

import pytest

from bench.citations_bench import build_indexes, cases_dir, evaluate, extraction_accuracy, load_labelled, summarize

pytestmark = [pytest.mark.slow, pytest.mark.cases]

CASES = cases_dir()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    if not (CASES / "supplement_chatgpt_citations.jsonl").exists():
        pytest.skip(f"no citation cases at {CASES}")
    labelled = load_labelled(CASES)
    idx = build_indexes(CASES, labelled, str(tmp_path_factory.mktemp("citidx")))
    return labelled, idx


def run(labelled, index, styles):
    return summarize(asyncio.run(evaluate(labelled, index, styles))["rows"])


def test_walters_wilder_floor(data):
    labelled, idx = data
    s = run({"walters_wilder": labelled["walters_wilder"]}, idx["full"], ("apa", "ieee", "mla", "harvard"))["walters_wilder"]
    assert s["f1"] >= 0.9, s
    assert s["fabricated_verified"] == 0, s


def test_hallmark_dev_floor_and_false_alarms(data):
    labelled, idx = data
    rows = asyncio.run(evaluate({"hallmark_dev": labelled["hallmark_dev"]}, idx["full"], ("apa", "bibtex")))["rows"]
    s = summarize(rows)["hallmark_dev"]
    assert s["f1"] >= 0.9, s
    valid = [r for r in rows if r["label"] == "VALID"]
    assert sum(r["flagged"] for r in valid) / len(valid) <= 0.02


def test_held_out_index_never_verifies_a_fabrication(data):
    labelled, idx = data
    s = run({"walters_wilder": labelled["walters_wilder"]}, idx["held_out"], ("apa",))["walters_wilder"]
    assert s["fabricated_verified"] == 0
    assert s["r"] >= 0.95  # fabricated entries are still flagged without the valid ones indexed


def test_extraction_recovers_fields(data):
    labelled, _ = data
    sample = {k: v[:150] for k, v in labelled.items()}
    acc = extraction_accuracy(sample, ("apa", "ieee", "bibtex", "harvard", "mla"))
    for style, d in acc.items():
        for field in ("found", "title", "first_author", "year"):
            assert d[field] >= 0.95, (style, field, d)
