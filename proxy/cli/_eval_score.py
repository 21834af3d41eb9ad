"""Scoring ``veracity eval`` (:mod:`proxy.cli.evaluation`, whose docstring states what is
measured): each check's label, and the verification results against the labels as one
JSON-ready dict of metrics -- answers, case families and sets (checkable and unknown apart),
per verifier, per citation status, calibration, cost and latency -- with the misjudged answers
and one verdict line per item.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from proxy.cli._eval_stats import ece, laplace, percentiles, prf, reliability_bins, wilson


#: the class a citation status asserts: True = the reference is real and right (VALID)
CITATION_CLASS = {"VERIFIED": True, "PARTIALLY_VERIFIED": True, "LIKELY_HALLUCINATION": False,
                  "CONFLICT": False, "NOT_FOUND": False}


def check_label(item: dict[str, Any], check: dict[str, Any], decisive_checks: int) -> bool | None:
    """The label of one check (True = its claim is right), in this order:

    1. the item's per-claim labels: a claim whose ``span`` holds the check's span start, or whose
       ``text`` is contained in the check's claim (or contains it);
    2. a right answer: every claim in it is taken as right;
    3. a wrong answer whose label is about its one claim (``item["single_claim"]``: a citation
       case renders one reference per answer) with exactly one decisive (pass/fail) check: that
       check's claim is the wrong one (not so for a math solution, whose one equation may be right
       while its reasoning is wrong);
    4. else None: a wrong answer's other claims may well be right (unlabelled, left out)."""
    span = check.get("span")
    for c in item.get("claims") or ():
        if c.get("correct") is None:
            continue
        if "span" in c and span and c["span"][0] <= span[0] < c["span"][1]:
            return c["correct"]
        t = c.get("text")
        claim = check.get("claim") or ""
        if t and claim and (t in claim or claim in t):
            return c["correct"]
    if item.get("label") is True:
        return True
    if (item.get("label") is False and item.get("single_claim") and decisive_checks == 1
            and check.get("outcome") in ("pass", "fail")):
        return False
    return None


#: report statuses that are a verdict on the whole answer: ``failed`` (a check failed: the flag)
#: or ``passed`` (every check-worthy unit decided and passed). ``unverified`` (checks ran, not all
#: decided), ``skipped`` (nothing checkable, or risk below the threshold) and ``error`` are not:
#: the answer could not be checked here, and is counted as ``unknown``, not as a miss.
DECIDED = ("passed", "failed")
#: the order of the per-family summary (the case families of proxy/cli/cases.py; others after, by name)
FAMILIES_ORDER = ("math", "code", "citations", "grounding", "relevance")


def family_of(item: dict[str, Any]) -> str:
    """The family an item counts in (``item["family"]``, set by the readers of
    :mod:`proxy.cli.cases`), else its set."""
    return str(item.get("family") or item.get("set"))


def _family_order(name: str) -> tuple[int, str]:
    return (FAMILIES_ORDER.index(name) if name in FAMILIES_ORDER else len(FAMILIES_ORDER), name)


def _ratio(k: int, n: int) -> float | None:
    return k / n if n else None


def _tally(c: Counter, label: bool | None, status: str | None, reason: str | None) -> None:
    # one answer into a group's counts (a set, a family, all): status None = evaluation error
    c["n"] += 1
    if status is None:
        c["errors"] += 1
        return
    c[f"status:{status}"] += 1
    if label is None:
        return
    c["labelled"] += 1
    f = status == "failed"
    c["tp" if f and not label else "fp" if f else "fn" if not label else "tn"] += 1
    side = "right" if label else "wrong"
    if status in DECIDED:
        c[f"decided:{side}"] += 1
    else:
        c[f"unknown:{side}"] += 1
        c[f"why:{status}: {reason}" if reason else f"why:{status}"] += 1


def _checkable(c: Counter) -> dict[str, Any]:
    """Over the labelled answers the checks decided (status in :data:`DECIDED`): how many wrong
    and right, the wrong ones ``failed`` (caught) and ``passed`` (missed), the right ones
    ``failed`` (false alarms); recall and false-alarm rate over them (None: no denominator)."""
    dw, dr = c["decided:wrong"], c["decided:right"]
    return {"wrong": dw, "right": dr, "caught": c["tp"], "passed_wrong": dw - c["tp"], "false_alarms": c["fp"],
            "recall": _ratio(c["tp"], dw), "false_alarm_rate": _ratio(c["fp"], dr)}


def _unknown(c: Counter) -> dict[str, Any]:
    """The labelled answers the checks could not decide here (wrong, right, and why: the report
    status and, for ``skipped``, its reason)."""
    return {"wrong": c["unknown:wrong"], "right": c["unknown:right"],
            "why": dict(sorted(((k[4:], m) for k, m in c.items() if k.startswith("why:")), key=lambda kv: -kv[1]))}


def _group(c: Counter) -> dict[str, Any]:
    # a set's or a family's numbers: all labelled answers (an undecided wrong one counts as a miss
    # there) and, separately, the checkable ones and the unknown ones
    return {"n": c["n"], "labelled": c["labelled"], "errors": c["errors"],
            **prf(c["tp"], c["fp"], c["fn"]), "tn": c["tn"],
            "false_alarm_rate": _ratio(c["fp"], c["fp"] + c["tn"]),
            "checkable": _checkable(c), "unknown": _unknown(c),
            "statuses": {o.split(":", 1)[1]: m for o, m in c.items() if o.startswith("status:")}}


def _unsearched(check: dict[str, Any]) -> bool:
    # a NOT_FOUND whose evidence names no source expected to hold the work that answered
    # (verifiers/citations: ``evidence["searched"]`` empty -- no source configured, a partial
    # library, sources down): the absence is no evidence, the status asserts nothing
    ev = check.get("evidence") or {}
    return ev.get("status") == "NOT_FOUND" and "searched" in ev and not ev["searched"]


def _round(x: Any) -> Any:
    if isinstance(x, float):
        return round(x, 6)
    if isinstance(x, dict):
        return {k: _round(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_round(v) for v in x]
    return x


def compute(items: list[dict[str, Any]], results: list[dict[str, Any]], *, bins: int = 10) -> dict[str, Any]:
    """All metrics of one evaluation (:mod:`proxy.cli.evaluation`'s docstring) as a JSON-ready dict, plus ``"_misjudged"``:
    the answers and checks the checks got wrong (written to misjudged.jsonl), and ``"_results"``:
    one verdict line per item (id, set, label, status, reason, checks as [verifier, outcome,
    confidence, citation status]; written to results.jsonl, to compare runs). ``sets``: per case
    set (file) its answers, labelled answers, evaluation errors, answer-level precision / recall /
    F1 / tp / fp (false alarms) / fn / tn, false-alarm rate and report statuses; ``families``: the
    same per case family (:func:`family_of`). Each of them, and ``answers``, also splits the
    labelled answers into ``checkable`` (the report decided: ``passed`` or ``failed``; recall and
    false-alarm rate over these) and ``unknown`` (``unverified``, ``skipped``, ``error``: what
    could not be checked here, with why), because the overall recall counts an unknown wrong
    answer as a miss. Per verifier, ``answers_decided`` is its answer level over the answers it
    decided a check of (``answers["undecided"]``: it ran and decided none). A citation NOT_FOUND
    that searched no source expected to hold the work (``evidence["searched"]`` empty) asserts
    nothing: counted in ``citation_status_unsearched``, not in ``citation_status``. Ratios
    without a denominator are None (:func:`prf`)."""
    answers = {"n": len(items), "labelled": 0, "errors": 0}
    confusion: dict[str, Counter] = {"right": Counter(), "wrong": Counter(), "unlabelled": Counter()}
    check_conf: dict[str, Counter] = {"right": Counter(), "wrong": Counter(), "unlabelled": Counter()}
    ans_v: dict[str, Counter] = defaultdict(Counter)   # verifier -> tp/fp/fn/tn/n/undecided at answer level
    ans_vd: dict[str, Counter] = defaultdict(Counter)  # the same over the answers it decided a check of
    chk_v: dict[str, Counter] = defaultdict(Counter)   # verifier -> tp/fp/fn/tn at check level
    calib: dict[str, tuple[list[float], list[bool]]] = defaultdict(lambda: ([], []))
    status_n: dict[str, Counter] = defaultdict(Counter)  # citation status -> valid / hallucinated / outcome:x
    lat: list[float] = []
    wall: list[float] = []
    per_ver_ms: dict[str, list[float]] = defaultdict(list)
    costs: dict[str, list[float]] = defaultdict(list)
    misjudged: list[dict[str, Any]] = []
    af = Counter()
    per_set: dict[str, Counter] = defaultdict(Counter)     # set -> n/labelled/errors/tp/fp/fn/tn/status:x/...
    per_family: dict[str, Counter] = defaultdict(Counter)  # family -> the same counts
    overall = Counter()
    unsearched = Counter()  # NOT_FOUND citation checks that searched no source expected to hold the work
    for it, res in zip(items, results):
        label = it.get("label")
        lab = "unlabelled" if label is None else "right" if label else "wrong"
        rep = res.get("report")
        groups = (per_set[str(it.get("set"))], per_family[family_of(it)], overall)
        if rep is None:
            answers["errors"] += 1
            confusion[lab]["eval_error"] += 1
            for g in groups:
                _tally(g, label, None, None)
            continue
        answers["labelled"] += label is not None
        status = rep.get("status", "error")
        confusion[lab][status] += 1
        reason = rep.get("reason")
        if status == "unverified" and not reason:   # which verifiers left claims undecided
            reason = ", ".join(sorted({str(c.get("verifier")) for c in rep.get("checks") or []
                                       if c.get("outcome") not in ("pass", "fail")})) + " undecided"
        for g in groups:
            _tally(g, label, status, reason)
        cost = rep.get("cost") or {}
        lat.append(float(cost.get("ms") or 0.0))
        wall.append(float(res.get("wall_ms") or 0.0))
        for k in ("tokens", "verifier_calls", "searches", "upstream_calls"):
            costs[k].append(float(cost.get(k) or 0))
        for v, ms in ((rep.get("extra") or {}).get("durations_ms") or {}).items():
            per_ver_ms[v].append(float(ms))
        checks = rep.get("checks") or []
        if label is not None:
            flagged = status == "failed"
            af["tp"] += flagged and not label
            af["fp"] += flagged and label
            af["fn"] += (not flagged) and not label
            af["tn"] += (not flagged) and label
            af["passed_wrong"] += status == "passed" and not label
        by_v: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for c in checks:
            by_v[c.get("verifier", "?")].append(c)
        decisive = sum(c.get("outcome") in ("pass", "fail") for c in checks)
        wrong_checks = []
        for v, cs in by_v.items():
            if label is not None:
                f = any(c.get("outcome") == "fail" for c in cs)
                cell = "tp" if f and not label else "fp" if f else "fn" if not label else "tn"
                ans_v[v]["n"] += 1
                ans_v[v][cell] += 1
                if any(c.get("outcome") in ("pass", "fail") for c in cs):
                    ans_vd[v]["n"] += 1
                    ans_vd[v][cell] += 1
                else:   # it ran on the answer and decided nothing: unknown, not a verdict
                    ans_v[v]["undecided"] += 1
            for c in cs:
                cl = check_label(it, c, decisive)
                out = c.get("outcome")
                check_conf["unlabelled" if cl is None else "right" if cl else "wrong"][out] += 1
                st = (c.get("evidence") or {}).get("status") if v == "citations" else None
                # a status is judged whatever its outcome (PARTIALLY_VERIFIED is ``unknown``): the
                # claim's label, else the answer's when the label is about its one reference
                sl = cl if cl is not None else label if it.get("single_claim") and len(cs) == 1 else None
                if st and sl is not None and _unsearched(c):
                    # "not found" where nothing that would hold the work was asked asserts nothing
                    unsearched["valid" if sl else "hallucinated"] += 1
                elif st and sl is not None:
                    status_n[st]["valid" if sl else "hallucinated"] += 1
                    status_n[st][f"outcome:{out}"] += 1
                if cl is None or out not in ("pass", "fail"):
                    continue
                failed = out == "fail"
                chk_v[v]["tp" if failed and not cl else "fp" if failed else "fn" if not cl else "tn"] += 1
                right = failed != cl
                calib[v][0].append(float(c.get("confidence", 1.0)))
                calib[v][1].append(right)
                if not right:
                    wrong_checks.append(c)
        kind = None
        if label is True and status == "failed":
            kind = "false_alarm"
        elif label is False and status == "passed":
            kind = "passed_wrong_answer"
        elif wrong_checks:
            kind = "misjudged_check"
        if kind:
            misjudged.append({"kind": kind, "id": it.get("id"), "set": it.get("set"), "label": label,
                              "status": status, "question": it.get("question"), "answer": it.get("answer"),
                              "meta": it.get("meta"),
                              "misjudged_checks": [{k: c.get(k) for k in ("verifier", "claim", "outcome", "confidence",
                                                                         "note", "span")}
                                                   | {"citation_status": (c.get("evidence") or {}).get("status")}
                                                   for c in wrong_checks],
                              "checks": [{k: c.get(k) for k in ("verifier", "claim", "outcome", "confidence", "note")}
                                         for c in checks]})
    per_verifier = {}
    for v in sorted(set(ans_v) | set(chk_v) | set(calib)):
        a, ad, c = ans_v[v], ans_vd[v], chk_v[v]
        conf, right = calib[v]
        per_verifier[v] = {
            "answers": {"n": a["n"], "tn": a["tn"], **prf(a["tp"], a["fp"], a["fn"]), "undecided": a["undecided"]},
            "answers_decided": {"n": ad["n"], "tn": ad["tn"], **prf(ad["tp"], ad["fp"], ad["fn"]),
                                "false_alarm_rate": _ratio(ad["fp"], ad["fp"] + ad["tn"])},
            "checks": {"n": sum(c.values()), "tn": c["tn"], **prf(c["tp"], c["fp"], c["fn"])},
            "calibration": {"decisive_labelled_checks": len(conf), "ece": ece(conf, right, bins),
                            "accuracy": sum(right) / len(right) if right else None,
                            "mean_confidence": sum(conf) / len(conf) if conf else None,
                            "bins": reliability_bins(conf, right, bins)},
        }
    valid_total = sum(s["valid"] for s in status_n.values())
    hall_total = sum(s["hallucinated"] for s in status_n.values())
    cit = {}
    for st in sorted(status_n, key=lambda s: list(CITATION_CLASS).index(s) if s in CITATION_CLASS else 99):
        s = status_n[st]
        n = s["valid"] + s["hallucinated"]
        cls = CITATION_CLASS.get(st)
        k = s["valid"] if cls else s["hallucinated"]
        total = valid_total if cls else hall_total
        lo, hi = wilson(k, n)
        cit[st] = {"n": n, "valid": s["valid"], "hallucinated": s["hallucinated"],
                   "asserts": "VALID" if cls else "HALLUCINATED",
                   "outcomes": {o.split(":", 1)[1]: m for o, m in s.items() if o.startswith("outcome:")},
                   **prf(k, n - k, total - k), "laplace": laplace(k, n), "wilson95": [lo, hi]}
    metrics = {
        "bins": bins,
        "binning": f"{bins} equal-width bins of (0, 1], right-closed ((m-1)/M, m/M]",
        "answers": {**answers, **prf(af["tp"], af["fp"], af["fn"]), "tn": af["tn"],
                    "passed_wrong_answers": af["passed_wrong"],
                    "false_alarm_rate": af["fp"] / (af["fp"] + af["tn"]) if af["fp"] + af["tn"] else None,
                    "checkable": _checkable(overall), "unknown": _unknown(overall)},
        "families": {k: _group(c) for k, c in sorted(per_family.items(), key=lambda kv: _family_order(kv[0]))},
        "confusion": {k: dict(v) for k, v in confusion.items() if v},
        "check_confusion": {k: dict(v) for k, v in check_conf.items() if v},
        "per_verifier": per_verifier,
        "citation_status": cit,
        "citation_status_unsearched": {"n": unsearched["valid"] + unsearched["hallucinated"], **unsearched},
        "latency_ms": {"answer": percentiles(lat), "wall": percentiles(wall), **{f"verifier:{v}": percentiles(x) for v, x in per_ver_ms.items()}},
        "cost": {k: percentiles(v) | {"total": sum(v)} for k, v in costs.items() if v},
        "sets": {k: _group(c) for k, c in per_set.items()},
    }
    out = _round(metrics)
    out["_misjudged"] = misjudged
    out["_results"] = [{"id": it.get("id"), "set": it.get("set"), "label": it.get("label"),
                        "status": (res.get("report") or {}).get("status"),
                        "reason": (res.get("report") or {}).get("reason"), "error": res.get("error"),
                        "checks": [[c.get("verifier"), c.get("outcome"), c.get("confidence"),
                                    (c.get("evidence") or {}).get("status")]
                                   for c in (res.get("report") or {}).get("checks") or []]}
                       for it, res in zip(items, results)]
    return out
