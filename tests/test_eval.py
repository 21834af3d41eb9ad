"""``veracity eval`` (proxy/evaluation.py, proxy/cases.py): the numbers on a made-up labelled set are
the hand-computed ones, the files are written, the HTML page stands alone, and every reader takes
its format as it is (the real ``../shared/cases`` files where present)."""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import pytest

from proxy import cases, evaluation
from proxy.cli import main

ROOT = Path(__file__).resolve().parent.parent
CASES = Path(os.environ.get("VERACITY_CASES") or ROOT.parent / "shared" / "cases")


def chk(verifier, outcome, confidence, status=None, claim="x", span=None):
    c = {"verifier": verifier, "claim": claim, "outcome": outcome, "confidence": confidence, "span": span,
         "evidence": {"status": status} if status else {}}
    return c


def res(status, checks, ms=1.0):
    return {"report": {"status": status, "checks": checks, "cost": {"ms": ms, "tokens": 0},
                       "extra": {"durations_ms": {}}}, "wall_ms": ms, "error": None}


def item(label, claims=None):
    return {"id": "i", "set": "s", "question": "q", "answer": "a", "label": label, "claims": claims, "meta": {}}


# ------------------------------------------------------------------------------ hand-computed metrics


def test_precision_recall_and_ece_are_the_hand_computed_ones():
    one = dict(item(False), single_claim=True)  # the label is about the answer's one claim
    items = [item(True), item(True), one, one, item(False), item(None)]
    results = [
        res("passed", [chk("arithmetic", "pass", 0.95)]),      # right answer, pass: right
        res("failed", [chk("arithmetic", "fail", 0.9)]),       # right answer flagged: false alarm
        res("failed", [chk("arithmetic", "fail", 0.9)]),       # wrong answer flagged: catch
        res("passed", [chk("arithmetic", "pass", 0.6)]),       # wrong answer passed: its one check is wrong
        res("unverified", [chk("arithmetic", "unknown", 0.5)]),  # wrong answer, no verdict: a miss
        res("passed", [chk("arithmetic", "pass", 0.95)]),      # unlabelled: counted nowhere
    ]
    m = evaluation.compute(items, results)
    a = m["answers"]
    # answers: tp 1 (#3), fp 1 (#2), fn 2 (#4, #5), tn 1 (#1)
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (1, 1, 2, 1)
    assert a["precision"] == 0.5 and a["recall"] == pytest.approx(1 / 3, abs=1e-6)
    assert a["f1"] == pytest.approx(0.4, abs=1e-6)          # 2 * .5 * (1/3) / (.5 + 1/3)
    assert a["false_alarm_rate"] == 0.5 and a["passed_wrong_answers"] == 1
    assert m["confusion"] == {"right": {"passed": 1, "failed": 1}, "wrong": {"failed": 1, "passed": 1, "unverified": 1},
                              "unlabelled": {"passed": 1}}
    ar = m["per_verifier"]["arithmetic"]
    assert (ar["checks"]["tp"], ar["checks"]["fp"], ar["checks"]["fn"], ar["checks"]["tn"]) == (1, 1, 1, 1)
    # calibration over the 4 decisive labelled checks, 10 right-closed bins:
    #   (0.9, 1.0]: 0.95 right -> |1 - .95| = .05;  (0.8, 0.9]: 0.9 wrong + 0.9 right -> |.5 - .9| = .4 (x2)
    #   (0.5, 0.6]: 0.6 wrong -> .6;  ECE = (.05 + 2 * .4 + .6) / 4 = 0.3625
    cal = ar["calibration"]
    assert cal["decisive_labelled_checks"] == 4
    assert cal["ece"] == pytest.approx(0.3625, abs=1e-6)
    filled = {round(b["hi"], 1): (b["n"], b["accuracy"]) for b in cal["bins"] if b["n"]}
    assert filled == {1.0: (1, 1.0), 0.9: (2, 0.5), 0.6: (1, 0.0)}
    kinds = sorted(x["kind"] for x in m["_misjudged"])
    assert kinds == ["false_alarm", "passed_wrong_answer"]


def test_bin_edges_are_right_closed_and_robust_to_float_noise():
    # 0.3 * 10 == 3.0000000000000004 in binary floating point: 0.3 still belongs to (0.2, 0.3]
    bins = evaluation.reliability_bins([0.3, 0.0, 1.0, 0.1], [True, True, True, False])
    assert [b["n"] for b in bins] == [2, 0, 1, 0, 0, 0, 0, 0, 0, 1]
    assert evaluation.ece([], []) is None
    # a perfectly calibrated set: 8 of 10 right at 0.8
    assert evaluation.ece([0.8] * 10, [True] * 8 + [False] * 2) == pytest.approx(0.0)


def test_citation_status_precision_laplace_and_wilson():
    items = [item(True)] * 3 + [dict(item(False), single_claim=True)] * 4
    results = ([res("passed", [chk("citations", "pass", 0.95, "VERIFIED")])] * 3
               + [res("passed", [chk("citations", "pass", 0.95, "VERIFIED")])]
               + [res("failed", [chk("citations", "fail", 0.9, "NOT_FOUND")])] * 2
               + [res("unverified", [chk("citations", "unknown", 0.5, "PARTIALLY_VERIFIED")])])
    st = evaluation.compute(items, results)["citation_status"]
    v, nf, pv = st["VERIFIED"], st["NOT_FOUND"], st["PARTIALLY_VERIFIED"]
    assert (v["n"], v["valid"], v["hallucinated"]) == (4, 3, 1)
    assert v["precision"] == 0.75 and v["recall"] == 1.0            # 3 of the 3 VALID answers
    assert v["laplace"] == pytest.approx(4 / 6, abs=1e-6)
    assert v["wilson95"][0] == pytest.approx(0.3006, abs=1e-3) and v["wilson95"][1] == pytest.approx(0.9544, abs=1e-3)
    assert nf["precision"] == 1.0 and nf["recall"] == 0.5 and nf["laplace"] == 0.75   # 2 of 4 HALLUCINATED
    assert pv["precision"] == 0.0 and pv["laplace"] == pytest.approx(1 / 3, abs=1e-6)
    assert pv["outcomes"] == {"unknown": 1}


def test_claim_labels_by_span_and_text():
    it = item(False, claims=[{"span": [0, 10], "correct": True}, {"text": "63 + 5 = 69", "correct": False}])
    assert evaluation.check_label(it, {"span": [2, 8], "claim": "9 * 7 = 63", "outcome": "pass"}, 3) is True
    assert evaluation.check_label(it, {"span": [20, 30], "claim": "63 + 5 = 69", "outcome": "fail"}, 3) is False
    # a wrong answer's unmatched claim among several is not known to be wrong
    assert evaluation.check_label(it, {"span": [40, 50], "claim": "1 + 1 = 2", "outcome": "pass"}, 3) is None
    one = dict(item(False), single_claim=True)
    assert evaluation.check_label(one, {"claim": "c", "outcome": "pass"}, 1) is False
    # a wrong math answer's one equation may be right: not labelled without single_claim
    assert evaluation.check_label(item(False), {"claim": "c", "outcome": "pass"}, 1) is None
    assert evaluation.check_label(item(True), {"claim": "c", "outcome": "fail"}, 5) is True


def test_percentiles_use_linear_interpolation():
    p = evaluation.percentiles([1.0, 2.0, 3.0, 4.0])
    assert p["p50"] == 2.5 and p["max"] == 4.0 and p["p90"] == pytest.approx(3.7)
    assert evaluation.percentiles([]) is None


# ------------------------------------------------------------------------------ end to end


DATA = [
    {"question": "What is 17 * 3?", "answer": "17 * 3 = 51, so the answer is 51.", "label": "correct"},
    {"question": "What is 12 * 12?", "answer": "12 * 12 = 144.", "label": True},
    {"question": "What is 17 * 23?", "answer": "17 * 23 = 401. The answer is 401.", "label": "incorrect"},
    {"question": "What is 9 * 8?", "answer": "9 * 8 = 81.", "label": False, "single_claim": True},
    {"question": "What is the capital of Australia?", "answer": "Sydney.", "label": False},
]


@pytest.fixture
def data_file(tmp_path):
    p = tmp_path / "labelled.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in DATA))
    return p


def _expected_answers(m):
    # the arithmetic verifier passes 1-2, fails 3-4; nothing in 5 is checkable (a miss):
    # tp 2, fp 0, fn 1 -> P 1, R 2/3, F1 0.8
    a = m["answers"]
    assert (a["tp"], a["fp"], a["fn"], a["tn"]) == (2, 0, 1, 2)
    assert a["precision"] == 1.0 and a["recall"] == pytest.approx(2 / 3, abs=1e-6) and a["f1"] == pytest.approx(0.8)


def test_cli_writes_the_files_and_a_self_contained_page(data_file, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["eval", str(data_file), "--policy", "default", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    _expected_answers(m)
    assert m["confusion"]["right"] == {"passed": 2}
    assert m["provenance"]["data"] == str(data_file) and m["provenance"]["policy"] == "default"
    assert m["latency_ms"]["answer"]["n"] == 5 and m["latency_ms"]["answer"]["p95"] >= m["latency_ms"]["answer"]["p50"]
    png = (out / "reliability-arithmetic.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    page = (out / "report.html").read_text()
    imgs = re.findall(r'src="([^"]+)"', page)
    assert imgs and all(s.startswith("data:image/png;base64,") for s in imgs)
    assert base64.b64decode(imgs[0].split(",", 1)[1]) == png
    assert not re.search(r'(href|src)="(?!data:)', page) and "<link" not in page and "<script" not in page
    res = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in res] == ["passed", "passed", "failed", "failed", "skipped"]
    mis = [json.loads(line) for line in (out / "misjudged.jsonl").read_text().splitlines()]
    assert [r["answer"] for r in mis if r["kind"] != "misjudged_check"] == []  # nothing passed wrong / false alarm
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["answers"] == 5 and "report.html" in printed["files"]


def test_cli_bad_input_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a", "label": true}\nnot json\n')
    assert main(["eval", str(bad), "--out", str(tmp_path / "o")]) == 2
    assert "bad.jsonl:2: not JSON" in capsys.readouterr().err
    assert main(["eval", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")]) == 2
    assert main(["eval", str(data_file_path(tmp_path)), "--policy", "nope", "--out", str(tmp_path / "o")]) == 2


def data_file_path(tmp_path):
    p = tmp_path / "ok.jsonl"
    p.write_text(json.dumps(DATA[0]) + "\n")
    return p


def test_through_a_running_gateway_gives_the_same_verdicts(gateway_factory, data_file, tmp_path):
    gw = gateway_factory({"upstreams": [{"name": "m", "base_url": "http://127.0.0.1:9/v1", "models": ["*"]}]})
    out = tmp_path / "gw"
    assert main(["eval", str(data_file), "--gateway", gw.base_url, "--policy", "default", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    _expected_answers(m)
    assert m["answers"]["errors"] == 0 and m["per_verifier"]["arithmetic"]["calibration"]["decisive_labelled_checks"] >= 4


# ------------------------------------------------------------------------------ readers


def test_readers_of_each_format(tmp_path):
    cit = tmp_path / "dev_public.jsonl"
    cit.write_text(json.dumps({"bibtex_key": "k1", "fields": {"title": "Deep learning", "author": "Yann LeCun and "
                               "Yoshua Bengio and Geoffrey Hinton", "year": "2015", "journal": "Nature"},
                               "label": "VALID", "hallucination_type": None}) + "\n")
    its = cases.read(cit)
    assert [i["meta"]["style"] for i in its] == list(cases.CITATION_STYLES) and all(i["label"] is True for i in its)
    assert "Deep learning" in its[0]["answer"] and "title = {Deep learning}" in its[-1]["answer"]

    pb = tmp_path / "processbench_gsm8k.json"
    pb.write_text(json.dumps([{"id": "p1", "generator": "g", "problem": "P?", "steps": ["a = 1", "b = 3", "c"],
                               "final_answer_correct": False, "label": 1}]))
    (it,) = cases.read(pb)
    assert it["label"] is False and it["answer"] == "a = 1\n\nb = 3\n\nc"
    assert it["claims"] == [{"span": [0, 5], "correct": True}, {"span": [7, 12], "correct": False}]

    sol = tmp_path / "example_model_solutions.jsonl"
    sol.write_text(json.dumps({"question": "Q", "6b_finetuning": {"solution": "2+2=<<2+2=4>>4", "is_correct": True},
                               "175b_verification": {"solution": "x", "is_correct": False}}) + "\n")
    got = cases.read(sol)
    assert [(i["answer"], i["label"]) for i in got] == [("2+2=4", True), ("x", False)]

    rev = tmp_path / "reviews.jsonl"
    line = {"id": "rev_1", "question": "q", "answer": "a", "veracity_status": "failed", "checks": [],
            "failed_checks": [], "label": {"verdict": "correct", "note": "", "reviewer": "r", "resolved_at": 1}}
    rev.write_text("".join(json.dumps(x) + "\n" for x in (
        line, dict(line, id="rev_2", label={"verdict": "incorrect"}), dict(line, id="rev_3", label=None),
        dict(line, id="rev_4", answer=None))))
    skipped: dict = {}
    got = cases.read(rev, skipped=skipped)
    assert [(i["id"], i["label"]) for i in got] == [("rev_1", True), ("rev_2", False), ("rev_3", None)]
    assert skipped == {"review_without_text": 1}

    gen = tmp_path / "mine.jsonl"
    gen.write_text(json.dumps({"question": "q", "answer": "a", "label": "wrong"}) + "\n")
    assert cases.read(gen)[0]["label"] is False
    with pytest.raises(ValueError, match="no 'answer'"):
        (tmp_path / "x.jsonl").write_text('{"q": 1}\n')
        cases.read(tmp_path / "x.jsonl")


def test_review_export_line_reads_back(tmp_path):
    from proxy.review import export_line

    review = {"id": "rev_9", "request_id": "r", "created": 1, "model": "m", "team": "t", "policy": "default",
              "reason": "failed", "question": "What is 2+2?", "answer": "2 + 2 = 5", "drafts": ["2 + 2 = 5"],
              "veracity_status": "failed", "report": {"checks": []},
              "resolution": {"verdict": "incorrect", "note": "", "reviewer": "x", "resolved_at": 2}}
    p = tmp_path / "export.jsonl"
    p.write_text(json.dumps(export_line(review)) + "\n")
    (it,) = cases.read(p)
    assert (it["question"], it["answer"], it["label"]) == ("What is 2+2?", "2 + 2 = 5", False)


@pytest.mark.cases
def test_reads_the_shared_cases_as_they_are():
    if not CASES.exists():
        pytest.skip(f"no cases at {CASES}")
    cit = cases.read(CASES / "citations", styles=("apa",))
    assert len(cit) == 341 + 1119 and {i["set"] for i in cit} == {"supplement_chatgpt_citations", "dev_public"}
    assert sum(i["label"] is False for i in cit if i["set"] == "supplement_chatgpt_citations") == 169
    math = cases.read(CASES / "math" / "processbench_gsm8k.json")
    assert math and all(i["claims"] or i["label"] for i in math)
    code = cases.read(CASES / "code" / "humaneval_py_gpt4_simple.jsonl")
    assert len(code) == 164 and {i["label"] for i in code} <= {True, False}
