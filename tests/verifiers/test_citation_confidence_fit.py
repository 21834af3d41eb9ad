"""The citation statuses' published confidences are the committed fit (docs/eval.md):
verifiers/citations/confidence_fit.json, written by bench/citation_confidence_fit.py from the
labelled citation cases, with its provenance; the constants in verifiers/citations must equal it."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from verifiers.citations._match import STATUS_AUTHENTICITY, STATUSES
from verifiers.citations._verify import OUTCOME_CONFIDENCE, UNKNOWN_CONFIDENCE
from verifiers.citations import check

ROOT = Path(__file__).resolve().parents[2]
FIT = json.loads((ROOT / "verifiers" / "citations" / "confidence_fit.json").read_text())
CASES = Path(os.environ.get("VERACITY_CASES") or ROOT.parent / "shared" / "cases") / "citations"


def test_constants_are_the_fit():
    st = FIT["statuses"]
    assert set(st) == set(STATUSES)
    for name, s in st.items():
        # the fit's own arithmetic: Laplace (k + 1) / (n + 2) of the asserted class
        assert s["laplace"] == pytest.approx((s["right"] + 1) / (s["n"] + 2), abs=1e-6)
        assert s["wilson95"][0] <= s["observed"] <= s["wilson95"][1]
        authenticity = s["laplace"] if s["asserts"] == "VALID" else 1 - s["laplace"]
        assert STATUS_AUTHENTICITY[name] == round(authenticity, 3), name
    for (status, outcome), conf in OUTCOME_CONFIDENCE.items():
        assert conf == round(st[status]["laplace"], 3), (status, outcome)
        assert outcome == ("pass" if st[status]["asserts"] == "VALID" else "fail")


def test_a_status_right_less_often_than_not_is_no_pass():
    """A ``pass`` must mean something was verified: a status whose asserted class is right in
    fewer than half the labelled cases cannot publish a pass (PARTIALLY_VERIFIED: 14 of 138)."""
    for name, s in FIT["statuses"].items():
        if s["asserts"] == "VALID" and s["laplace"] < 0.5:
            assert (name, "pass") not in OUTCOME_CONFIDENCE
            assert set(s["outcomes"]) == {"unknown"}


def test_partially_verified_is_unknown_with_the_unknown_confidence(tmp_path):
    from verifiers.citations import build_index
    from verifiers.citations._records import Record

    db = str(tmp_path / "lib.sqlite3")
    build_index([], db, records=[Record(title="Deep residual learning for image recognition",
                                        authors=["Kaiming He", "Xiangyu Zhang", "Shaoqing Ren", "Jian Sun"],
                                        year=2016, venue="CVPR", source="test")])
    ans = ("References\n\n1. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learnings for image "
           "recognition. In *CVPR*.\n")
    (c,) = check(ans, sources={"use": [], "local_index": {"path": db}, "cache": {"backend": "none"}})
    assert (c.evidence["status"], c.outcome, c.confidence) == ("PARTIALLY_VERIFIED", "unknown", UNKNOWN_CONFIDENCE)


def test_provenance_names_the_data_the_command_and_the_date():
    p = FIT["provenance"]
    assert p["command"].startswith("python bench/citation_confidence_fit.py") and p["date"] and p["answers"] >= sum(
        s["n"] for s in FIT["statuses"].values())
    assert {"supplement_chatgpt_citations.jsonl", "dev_public.jsonl"} <= set(p["data"])


@pytest.mark.cases
def test_the_fit_is_of_the_case_files_present():
    if not CASES.exists():
        pytest.skip(f"no citation cases at {CASES}")
    for name, digest in FIT["provenance"]["data"].items():
        assert hashlib.sha256((CASES / name).read_bytes()).hexdigest() == digest, name
