"""``veracity eval`` (proxy/cli/evaluation.py, proxy/cli/cases.py): the numbers on a made-up labelled set are
the hand-computed ones, the files are written, the HTML page stands alone, and every reader takes
its format as it is (the real ``../shared/cases`` files where present)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from proxy.cli import cases

from proxy.cli import _eval_report, evaluation
from proxy.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
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


def test_unknown_answers_are_counted_apart_per_family_not_as_silent_misses():
    # two families; the checks decide some answers (passed / failed) and not others (unverified /
    # skipped / error): recall and false-alarm rate over the decided ones, the rest counted as unknown
    def it(fam, label):
        return dict(item(label), family=fam, set=fam + "-set")
    items = [it("math", False), it("math", False), it("math", True), it("math", False),
             it("citations", False), it("citations", False), it("citations", True), it("citations", True)]
    results = [res("failed", [chk("arithmetic", "fail", 0.9)]),                  # caught
               res("passed", [chk("arithmetic", "pass", 1.0)]),                  # decided, missed
               res("failed", [chk("arithmetic", "fail", 0.9)]),                  # false alarm
               dict(res("skipped", []), report={**res("skipped", [])["report"], "reason": "no checkable claims"}),
               res("unverified", [chk("citations", "unknown", 0.5, "NOT_FOUND")]),
               res("unverified", [chk("citations", "unknown", 0.5, "NOT_FOUND")]),
               res("unverified", [chk("citations", "unknown", 0.5, "NOT_FOUND")]),
               res("error", [])]
    m = evaluation.compute(items, results)
    math_, cit = m["families"]["math"], m["families"]["citations"]
    assert list(m["families"]) == ["math", "citations"]          # the case families' order
    # math: 3 decided labelled (2 wrong: 1 caught, 1 passed; 1 right: a false alarm), 1 unknown wrong
    assert math_["checkable"] == {"wrong": 2, "right": 1, "caught": 1, "passed_wrong": 1, "false_alarms": 1,
                                  "recall": 0.5, "false_alarm_rate": 1.0}
    assert math_["unknown"] == {"wrong": 1, "right": 0, "why": {"skipped: no checkable claims": 1}}
    assert math_["recall"] == pytest.approx(1 / 3, abs=1e-6)     # the plain recall: the unknown one is a miss
    # citations: nothing decided -- no recall, no false-alarm rate (not 0%), every answer unknown, with why
    assert cit["checkable"]["recall"] is None and cit["checkable"]["false_alarm_rate"] is None
    assert cit["unknown"] == {"wrong": 2, "right": 2, "why": {"unverified: citations undecided": 3, "error": 1}}
    assert cit["recall"] == 0.0
    a = m["answers"]
    assert (a["checkable"]["wrong"], a["checkable"]["right"], a["checkable"]["recall"]) == (2, 1, 0.5)
    assert (a["unknown"]["wrong"], a["unknown"]["right"]) == (3, 2)
    assert m["sets"]["math-set"]["checkable"] == math_["checkable"]
    lines = evaluation.summary_lines(m)
    assert lines[0] == ("math: 4 labelled; checkable here 3 (wrong 2, right 1): recall 50.0% (1 caught), false alarms "
                        "100.0% (1); unknown 1 (wrong 1, right 0): skipped: no checkable claims 1")
    assert lines[1].startswith("citations: 4 labelled; checkable here 0 (wrong 0, right 0): recall n/a (0 caught), "
                               "false alarms n/a (0); unknown 4 (wrong 2, right 2)")
    assert lines[-1].startswith("all: 8 labelled; checkable here 3") and "unknown counted as missed: 20.0%" in lines[-1]
    page = _eval_report._html(m, {}, "t", 0)
    fam = page[page.index("Per family"):page.index("<h2>Answers</h2>")]
    row = re.findall(r"<td>(.*?)</td>", re.search(r"<tr><td>citations</td>.*?</tr>", fam).group(0))
    assert row[:10] == ["citations", "4", "0", "0", "0", "n/a", "0", "n/a", "2", "2"]


def test_a_verifier_that_decided_nothing_on_an_answer_is_undecided_not_a_miss():
    # a BibTeX answer is a fenced block: the code verifier runs on it and can only say unknown
    items = [dict(item(False), single_claim=True), item(False), item(True)]
    results = [res("unverified", [chk("code", "unknown", 0.5), chk("citations", "unknown", 0.5, "NOT_FOUND")]),
               res("failed", [chk("code", "fail", 0.9)]),
               res("passed", [chk("code", "pass", 0.8)])]
    code = evaluation.compute(items, results)["per_verifier"]["code"]
    assert (code["answers"]["n"], code["answers"]["fn"], code["answers"]["undecided"]) == (3, 1, 1)
    assert code["answers"]["recall"] == 0.5                      # as before: the undecided one counts as missed
    d = code["answers_decided"]
    assert (d["n"], d["tp"], d["fn"], d["tn"], d["recall"], d["false_alarm_rate"]) == (2, 1, 0, 1, 1.0, 0.0)


def test_not_found_where_no_source_was_searched_asserts_nothing():
    # NOT_FOUND with evidence["searched"] empty (no source configured or reachable, a partial
    # library): no evidence that the reference is made up -- not counted as asserting HALLUCINATED
    def nf(outcome, searched):
        c = chk("citations", outcome, 0.5, "NOT_FOUND")
        c["evidence"]["searched"] = searched
        return c
    items = [dict(item(lab), single_claim=True) for lab in (True, False, False, True)]
    results = [res("unverified", [nf("unknown", [])]), res("unverified", [nf("unknown", [])]),
               res("failed", [nf("fail", ["local"])]), res("failed", [nf("fail", ["local"])])]
    m = evaluation.compute(items, results)
    assert m["citation_status"]["NOT_FOUND"]["n"] == 2                       # only the two that searched
    assert m["citation_status"]["NOT_FOUND"]["precision"] == 0.5
    assert m["citation_status_unsearched"] == {"n": 2, "valid": 1, "hallucinated": 1}
    page = _eval_report._html(m, {}, "t", 0)
    assert "2 NOT_FOUND checks searched no source" in page
    only = evaluation.compute(items[:2], results[:2])
    assert only["citation_status"] == {} and only["citation_status_unsearched"]["n"] == 2


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


@pytest.mark.slow
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
    from proxy.stores.review import export_line

    review = {"id": "rev_9", "request_id": "r", "created": 1, "model": "m", "team": "t", "policy": "default",
              "reason": "failed", "question": "What is 2+2?", "answer": "2 + 2 = 5", "drafts": ["2 + 2 = 5"],
              "veracity_status": "failed", "report": {"checks": []},
              "resolution": {"verdict": "incorrect", "note": "", "reviewer": "x", "resolved_at": 2}}
    p = tmp_path / "export.jsonl"
    p.write_text(json.dumps(export_line(review)) + "\n")
    (it,) = cases.read(p)
    assert (it["question"], it["answer"], it["label"]) == ("What is 2+2?", "2 + 2 = 5", False)


@pytest.mark.cases
@pytest.mark.slow
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
    # grounding/ and relevance/: the counts their SOURCE.md states
    ground = cases.read(CASES / "grounding")
    summ = [i for i in ground if i["set"].startswith("summedits_")]
    assert (sum(i["label"] for i in summ), sum(not i["label"] for i in summ)) == (1648, 3033)
    assert sum(i["set"] == "HaluEval-qa" for i in ground) == 2000 and all(i["context"] for i in ground)
    rel = cases.read(CASES / "relevance")
    assert Counter((i["set"], i["meta"]["scifact_label"]) for i in rel) == {
        ("scifact_claims_train", "SUPPORT"): 370, ("scifact_claims_train", "CONTRADICT"): 194,
        ("scifact_claims_train", "NEI"): 355, ("scifact_claims_dev", "SUPPORT"): 138,
        ("scifact_claims_dev", "CONTRADICT"): 71, ("scifact_claims_dev", "NEI"): 131}


# ------------------------------------------------------------------------------ running offline, honestly


def test_progress_lines_off_a_terminal_and_a_bar_on_one():
    import io

    now = [0.0]
    out = io.StringIO()
    p = evaluation.Progress(4, stream=out, every_s=10.0, clock=lambda: now[0])
    for t, r in ((3.0, {"error": None}), (11.0, {"error": "timed out"}), (12.0, {"error": None}), (25.0, {"error": None})):
        now[0] = t
        p.update(r)
    p.close()
    lines = out.getvalue().splitlines()
    # the start, one line after 10 s had passed (not after every answer), and the last
    assert lines == ["veracity eval: 4 answers to check",
                     "veracity eval: 2/4 answers (50%), 11 s, about 11 s left, 1 error",
                     "veracity eval: 4/4 answers (100%), 25 s, 1 error"]
    bar = io.StringIO()
    p = evaluation.Progress(3, stream=bar, tty=True)
    for _ in range(3):
        p.update({"error": None})
    p.close()
    assert "3/3" in bar.getvalue() and "\r" in bar.getvalue()   # tqdm redraws one line on a terminal


def _closed_port() -> int:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                      # nothing listens there now: a connection is refused at once
    return port


CITATION_CASE = {"bibtex_key": "k1", "label": "VALID", "hallucination_type": None,
                 "fields": {"title": "Deep learning", "author": "Yann LeCun and Yoshua Bengio and Geoffrey Hinton",
                            "year": "2015", "journal": "Nature"}}


def test_says_up_front_what_it_cannot_check_and_does_not_wait_on_timeouts(tmp_path, capsys):
    import time

    import yaml

    doc = yaml.safe_load((ROOT / "policies" / "default.yaml").read_text())
    doc["verifiers"]["citations"]["sources"] = {"use": ["crossref"],
                                               "crossref": {"base_url": f"http://127.0.0.1:{_closed_port()}",
                                                            "timeout": 30.0, "retries": 5}}
    pol = tmp_path / "offline.yaml"
    pol.write_text(yaml.safe_dump(doc))
    cit = tmp_path / "dev_public.jsonl"
    cit.write_text(json.dumps(CITATION_CASE) + "\n")
    out = tmp_path / "out"
    t0 = time.monotonic()
    assert main(["eval", str(cit), "--policy", str(pol), "--out", str(out), "--styles", "apa,ieee",
                 "--progress-every", "0"]) == 0
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    notice = next(line for line in err.splitlines() if "cannot check here: citations" in line)
    assert "crossref" in notice and "--citations-index" in notice
    # the notice comes before the first answer is checked, and one progress line per answer follows
    assert err.index("cannot check here") < err.index("2 answers to check")
    assert "1/2 answers (50%)" in err and "2/2 answers (100%)" in err
    # the source's 30 s timeout x 5 retries was never waited on (generous bound for a loaded machine)
    assert took < 25
    res = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in res] == ["unverified", "unverified"]
    assert all(c[:2] == ["citations", "unknown"] for r in res for c in r["checks"])
    m = json.loads((out / "metrics.json").read_text())
    assert m["provenance"]["not_checked"] == [notice.split("cannot check here: ", 1)[1]]
    # nothing was flagged: precision has no denominator -> None in JSON, "n/a" on the page
    assert m["answers"]["precision"] is None and m["sets"]["dev_public"]["precision"] is None
    page = (out / "report.html").read_text()
    prov = page[page.index("<h2>Provenance</h2>"):page.index("<h2>Answers</h2>")]
    assert f"<td>policy</td><td>{pol}</td>" in prov and "<td>limit</td><td>none (every record)</td>" in prov
    assert "<td>citations_index</td><td>none" in prov and "<td>model</td><td>none" in prov
    assert "<td>version</td><td>0.1.0" in prov and "What could not be checked here" in prov and "crossref" in prov
    sets = page[page.index("<h2>Per set</h2>"):page.index("<h3>Confusion")]
    row = re.search(r"<tr><td>dev_public</td>(.*?)</tr>", sets).group(1)
    cells = re.findall(r"<td>(.*?)</td>", row)
    assert cells[:3] == ["2", "2", "0"] and cells[7] == "n/a" and "0.0%" != cells[7]   # precision: n/a


GROUND_DOC = ("Acme Corp reported its quarterly results on Tuesday. Revenue rose 12 percent to 4.5 billion dollars "
              "in the third quarter, driven by strong demand for cloud services. The company hired 300 engineers in "
              "Berlin and expects growth to continue next year, its chief executive said.")


def _grounding_folder(root: Path) -> Path:
    d = root / "grounding" / "SummEdits" / "data" / "summedits"
    d.mkdir(parents=True)
    (d / "summedits_news.json").write_text(json.dumps([
        {"id": "s1", "doc": GROUND_DOC, "summary": "The company hired 500 engineers in Berlin.", "label": "0",
         "split": "test"},
        {"id": "s2", "doc": GROUND_DOC, "summary": "Acme hired engineers in Berlin.", "label": "1", "split": "test"}]))
    h = root / "grounding" / "HaluEval-qa"
    h.mkdir(parents=True)
    (h / "qa_data.json").write_text(json.dumps({"knowledge": GROUND_DOC, "question": "How many engineers did Acme hire?",
                                                "right_answer": "300", "hallucinated_answer": "500"}) + "\n")
    b = root / "grounding" / "BEGIN" / "wow"
    b.mkdir(parents=True)
    rows = [["model_name", "data_source", "knowledge", "message", "response", "begin_label"],
            ["t5", "wow", GROUND_DOC, "Tell me about Acme", "Acme hired 300 engineers in Berlin.", "Fully attributable"],
            ["t5", "wow", GROUND_DOC, "Nice", "I like that.", "Generic"]]
    (b / "begin_test_wow.tsv").write_text("".join("\t".join(r) + "\n" for r in rows))
    r = root / "relevance"
    r.mkdir()
    (r / "scifact_corpus.jsonl").write_text(json.dumps({"doc_id": 7, "title": "Acme results",
                                                        "abstract": GROUND_DOC.split(". ")}) + "\n")
    (r / "scifact_claims_dev.jsonl").write_text(
        json.dumps({"id": 1, "claim": "Acme hired 500 engineers in Berlin.", "cited_doc_ids": [7],
                    "evidence": {"7": [{"sentences": [2], "label": "CONTRADICT"}]}}) + "\n"
        + json.dumps({"id": 2, "claim": "Acme sells cars.", "cited_doc_ids": [7], "evidence": {}}) + "\n")
    return root


def test_grounding_and_relevance_folders_are_read_and_evaluated(tmp_path, capsys):
    root = _grounding_folder(tmp_path / "cases")
    skipped: dict = {}
    its = cases.read(root, skipped=skipped)
    assert [(i["set"], i["id"], i["label"]) for i in its] == [
        ("summedits_news", "s1", False), ("summedits_news", "s2", True),
        ("HaluEval-qa", "0r", True), ("HaluEval-qa", "0h", False),
        ("begin_test_wow", "begin_test_wow:0", True),
        ("scifact_claims_dev", "1:7", False), ("scifact_claims_dev", "2:7", False)]
    assert skipped == {"begin_generic": 1}
    assert all(i["context"].startswith(("Acme", "Acme results.")) for i in its)
    assert [i["meta"]["scifact_label"] for i in its[-2:]] == ["CONTRADICT", "NEI"]
    assert evaluation.messages_of(its[2]) == [{"role": "system", "content": GROUND_DOC},
                                              {"role": "user", "content": "How many engineers did Acme hire?"}]

    assert [i["family"] for i in its] == ["grounding"] * 5 + ["relevance"] * 2
    out = tmp_path / "out"
    assert main(["eval", str(root), "--out", str(out)]) == 0
    cap = capsys.readouterr()
    err = cap.err
    assert "cannot check here: grounding: 7 answers" in err and "--model URL" in err
    # per family, plainly: what was checkable here, recall and false alarms over it, what was unknown
    fam = [line for line in err.splitlines() if re.match(r"veracity eval: (grounding|relevance|all): \d+ labelled", line)]
    assert [f.split(":")[1].strip() for f in fam] == ["grounding", "relevance", "all"]
    assert all("checkable here" in f and "unknown" in f for f in fam)
    printed = json.loads(cap.out.strip().splitlines()[-1])
    assert set(printed["families"]) == {"grounding", "relevance"}
    assert printed["families"]["grounding"]["checkable"]["caught"] >= 1
    res = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    # the number the source states otherwise is caught by the facts verifier's deterministic tier
    assert res["s1"]["status"] == "failed" and ["facts", "fail"] == res["s1"]["checks"][0][:2]
    assert res["1:7"]["status"] == "failed"
    # no right answer is failed, and every answer went through the facts verifier or was skipped by it
    assert all(res[k]["status"] != "failed" for k in ("s2", "0r", "begin_test_wow:0"))
    m = json.loads((out / "metrics.json").read_text())
    assert m["per_verifier"]["facts"]["answers"]["fp"] == 0 and m["answers"]["fp"] == 0
    assert set(m["sets"]) == {"summedits_news", "HaluEval-qa", "begin_test_wow", "scifact_claims_dev"}
    assert m["sets"]["summedits_news"]["tp"] == 1


def test_grounding_policy_is_only_for_answers_with_a_source_text():
    doc_item = {"id": "g", "set": "g", "question": None, "context": GROUND_DOC,
                "answer": "The company hired 500 engineers in Berlin.", "label": False, "claims": None, "meta": {}}
    plain = dict(doc_item, id="p", context=None)
    pol = evaluation.load_policy("default")
    notices, over = evaluation.preflight([doc_item, plain], evaluation.load_policy("default", verifiers=["arithmetic"]))
    assert over == {"grounding": True, "grounding_model": False} and len(notices) == 1
    gp = evaluation.load_policy("default", grounding=True)
    assert gp.verifiers.facts.enabled and "context" in gp.verifiers.facts.backends["use"]
    assert not gp.verifiers.facts.use_model and not pol.verifiers.facts.enabled
    got = evaluation.run_items([doc_item, plain], policy=pol, grounding_policy=gp)
    assert got[0]["report"]["status"] == "failed"
    assert got[1]["report"]["status"] == "skipped"   # the same claim with no source: nothing grounds it


def test_grounding_cases_ground_every_statement_relevance_cases_do_not(tmp_path):
    # a response that adds a name its source does not hold is not attributable (BEGIN, SummEdits):
    # under the grounding family's policy it fails; a SciFact claim is judged against the abstract
    # it cites, which it paraphrases, so the relevance family does not ground every name
    ans = "Acme hired 300 engineers in Berlin. Its chief executive Maria Lopez announced the plan in Munich."
    its = [{"id": f, "set": f, "family": f, "question": None, "context": GROUND_DOC, "answer": ans, "label": False,
            "claims": None, "meta": {}} for f in ("grounding", "relevance")]
    gp = {f: evaluation.load_policy("default", grounding=True, grounding_statements=f == "grounding")
          for f in ("grounding", None)}
    assert gp["grounding"].verifiers.facts.options == {"grounding": True} and gp[None].verifiers.facts.options == {}
    got = evaluation.run_items(its, policy=evaluation.load_policy("default"), grounding_policy=gp)
    g, rel = (x["report"] for x in got)
    assert g["status"] == "failed" and any("Maria Lopez" in (c["note"] or "") for c in g["checks"])
    assert rel["status"] != "failed"
    # a policy that says how to ground is kept as it says
    pol = tmp_path / "mine.yaml"
    pol.write_text("name: mine\nverifiers:\n  facts: {enabled: true, options: {grounding: false}}\n")
    kept = evaluation.load_policy(str(pol), grounding=True, grounding_statements=True)
    assert kept.verifiers.facts.options == {"grounding": False}


def test_an_answer_that_takes_too_long_is_an_error_not_a_hang(monkeypatch):
    import asyncio
    import time

    import proxy.pipeline.sequence

    async def slow(*a, **k):      # a verification stuck on an unanswered lookup
        await asyncio.sleep(30)

    monkeypatch.setattr(proxy.pipeline.sequence, "verify_text", slow)
    seen = []
    t0 = time.monotonic()
    got = evaluation.run_items([item(True), item(False)], policy=evaluation.load_policy("default"),
                               answer_timeout=0.2, progress=seen.append)
    assert time.monotonic() - t0 < 5
    assert [g["report"] for g in got] == [None, None] and all("timed out" in g["error"] for g in got)
    assert len(seen) == 2
    m = evaluation.compute([item(True), item(False)], got)
    assert m["answers"]["errors"] == 2 and m["sets"]["s"]["errors"] == 2


def test_citation_index_overrides(tmp_path):
    full = evaluation.load_policy("default", citations_index=str(tmp_path / "i.sqlite3"))
    part = evaluation.load_policy("default", citations_index=str(tmp_path / "i.sqlite3"), index_partial=True)
    assert full.verifiers.citations.sources["local_index"]["authoritative"] is True
    assert part.verifiers.citations.sources["local_index"]["authoritative"] is False
    assert part.verifiers.citations.sources["use"] == []        # the index only: no network source
    kept = evaluation.load_policy("default", citation_sources=["openalex"])
    assert kept.verifiers.citations.sources["use"] == ["openalex"]
