"""Printing ``veracity eval``'s metrics (:mod:`proxy.cli.evaluation`): the summary lines for
the terminal, and the files of a run -- ``metrics.json``, ``misjudged.jsonl``,
``results.jsonl``, a reliability diagram PNG per verifier, and a self-contained
``report.html``.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any


STATUSES_ORDER = ("passed", "failed", "corrected", "unverified", "skipped", "error")


def _plot(verifier: str, cal: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = cal["bins"]
    fig, ax = plt.subplots(figsize=(4.6, 4.6), dpi=100)
    w = bins[0]["hi"] - bins[0]["lo"]
    xs = [b["lo"] + w / 2 for b in bins if b["n"]]
    ax.bar(xs, [b["accuracy"] for b in bins if b["n"]], width=w * 0.95, color="#3b7dd8", edgecolor="#1d3f6e",
           label="share right")
    ax.bar(xs, [b["confidence"] - b["accuracy"] for b in bins if b["n"]], bottom=[b["accuracy"] for b in bins if b["n"]],
           width=w * 0.95, color="#e8a0a0", alpha=0.6, label="gap to confidence")
    for x, b in zip(xs, [b for b in bins if b["n"]]):
        ax.text(x, min(1.0, max(b["accuracy"], b["confidence"])) + 0.02, f"n={b['n']}", ha="center", fontsize=7)
    ax.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("confidence")
    ax.set_ylabel("share of decisive checks that were right")
    e = cal["ece"]
    ax.set_title(f"{verifier}: ECE {e:.3f}" if e is not None else f"{verifier}: no labelled check", fontsize=10)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def _pct(x: Any) -> str:
    # a ratio without a denominator (nothing flagged, nothing wrong) is "n/a", never "0.0%"
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _f3(x: Any) -> str:
    return "n/a" if x is None else f"{x:.3f}"


#: provenance fields shown first in report.html, in this order (the rest follow as they come)
_PROVENANCE_ORDER = ("data", "policy", "citations_index", "limit", "model", "gateway", "version", "verifiers",
                     "risk_threshold", "styles", "answer_timeout_s", "started", "seconds", "skipped")


def _table(head: list[str], rows: list[list[Any]]) -> str:
    e = html.escape
    return ("<table><tr>" + "".join(f"<th>{e(str(h))}</th>" for h in head) + "</tr>"
            + "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>" for r in rows) + "</table>")


def _provenance_html(prov: dict[str, Any]) -> list[str]:
    keys = [k for k in _PROVENANCE_ORDER if k in prov] + [k for k in prov if k not in _PROVENANCE_ORDER
                                                          and k != "not_checked"]

    def show(k: str, v: Any) -> str:
        if v is None or v == "" or v == {}:
            return {"citations_index": "none (network sources, see below)", "limit": "none (every record)",
                    "model": "none (deterministic tiers only)", "gateway": "none (in-process)"}.get(k, "-")
        return v if isinstance(v, str) else json.dumps(v)

    out = ["<h2>Provenance</h2>", _table(["", "value"], [[k, show(k, prov.get(k))] for k in keys])]
    notes = prov.get("not_checked") or []
    out.append("<h2>What could not be checked here</h2>")
    if notes:
        out.append("<ul>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    else:
        out.append("<p>Nothing: every enabled verifier had what it needs (sources, model) for this run.</p>")
    return out


def _why(u: dict[str, Any], top: int = 3) -> str:
    items = list(u["why"].items())
    more = sum(n for _, n in items[top:])
    return ", ".join(f"{k} {n}" for k, n in items[:top]) + (f", other {more}" if more else "")


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    """One plain line per case family and one for all answers: what was checkable here, recall
    and false-alarm rate over those, how many were unknown and why (the same numbers as
    ``metrics["families"]`` and ``metrics["answers"]``), e.g.::

        math: 280 labelled; checkable here 236 (wrong 140, right 96): recall 11.4% (16 caught),
        false alarms 0.0% (0); unknown 44 (wrong 40, right 4): unverified 20, skipped: ... 20"""
    def line(name: str, g: dict[str, Any]) -> str:
        ch, u = g["checkable"], g["unknown"]
        head = (f"{name}: {g['labelled']} labelled; checkable here {ch['wrong'] + ch['right']} (wrong {ch['wrong']}, "
                f"right {ch['right']}): recall {_pct(ch['recall'])} ({ch['caught']} caught), false alarms "
                f"{_pct(ch['false_alarm_rate'])} ({ch['false_alarms']})")
        nu = u["wrong"] + u["right"]
        return head + (f"; unknown {nu} (wrong {u['wrong']}, right {u['right']}): {_why(u)}" if nu else "; unknown 0")
    a = metrics["answers"]
    overall = {"labelled": a["labelled"], "checkable": a["checkable"], "unknown": a["unknown"]}
    return [line(k, g) for k, g in (metrics.get("families") or {}).items()] + [
        line("all", overall) + f" (recall over every labelled answer, unknown counted as missed: {_pct(a['recall'])})"]


def _families_html(m: dict[str, Any]) -> list[str]:
    fams = m.get("families") or {}
    if not fams:
        return []
    a = m["answers"]
    rows = []
    for k, g in list(fams.items()) + [("all", {**a, "labelled": a["labelled"]})]:
        ch, u = g["checkable"], g["unknown"]
        rows.append([k, g["labelled"], ch["wrong"], ch["right"], ch["caught"], _pct(ch["recall"]), ch["false_alarms"],
                     _pct(ch["false_alarm_rate"]), u["wrong"], u["right"], _why(u, 4) or "-", _pct(g["recall"])])
    return ["<h2>Per family: what could be checked here</h2>",
            "<p><b>checkable</b>: labelled answers the checks reached a verdict on here (report <code>passed</code> "
            "or <code>failed</code>); recall and false-alarm rate are over these. <b>unknown</b>: labelled answers "
            "they could not decide here (<code>unverified</code>: checks ran, not every claim decided -- no verifier "
            "model, no source; <code>skipped</code>: nothing checkable, or risk below the threshold; "
            "<code>error</code>), with why. The last column is the recall over every labelled answer, an unknown "
            "wrong answer counted as a miss.</p>",
            _table(["family", "labelled", "checkable wrong", "checkable right", "caught", "recall (checkable)",
                    "false alarms", "false-alarm rate (checkable)", "unknown wrong", "unknown right", "why unknown",
                    "recall (all labelled)"], rows)]


def _sets_html(sets: dict[str, Any]) -> list[str]:
    if not sets:
        return []
    cols = sorted({s for d in sets.values() for s in d.get("statuses", {})},
                  key=lambda s: STATUSES_ORDER.index(s) if s in STATUSES_ORDER else 99)
    rows = [[k, d["n"], d["labelled"], d["errors"], d["tp"], d["fp"], d["fn"], d["tn"], _pct(d["precision"]),
             _pct(d["recall"]), _f3(d["f1"]), _pct(d["false_alarm_rate"]), d["checkable"]["wrong"],
             d["checkable"]["right"], _pct(d["checkable"]["recall"]), _pct(d["checkable"]["false_alarm_rate"]),
             d["unknown"]["wrong"], d["unknown"]["right"]] + [d["statuses"].get(c, 0) for c in cols]
            for k, d in sets.items()]
    return ["<h2>Per set</h2>",
            "<p>One row per case file; tp = wrong answers <code>failed</code>, fp = right answers <code>failed</code> "
            "(false alarms), fn = wrong answers not failed (an unknown one included), tn = right answers not failed; "
            "then the checkable and unknown answers as in the per-family table; n/a: no denominator.</p>",
            _table(["set", "answers", "labelled", "errors", "tp", "fp", "fn", "tn", "precision", "recall", "F1",
                    "false-alarm rate", "checkable wrong", "checkable right", "recall (checkable)",
                    "false-alarm rate (checkable)", "unknown wrong", "unknown right"] + cols, rows)]


def _html(m: dict[str, Any], pngs: dict[str, bytes], title: str, n_misjudged: int) -> str:
    a = m["answers"]
    parts = [f"<h1>{html.escape(title)}</h1>",
             f"<p>{a['n']} answers ({a['labelled']} labelled, {a['errors']} evaluation errors). Positive class: a wrong "
             "answer or claim; a flag is a <code>fail</code>. Calibration: " + html.escape(m["binning"])
             + "; ECE as in Naeini et al. 2015 and Guo et al. 2017 (eq. 3). n/a: a ratio with no denominator "
             "(precision with nothing flagged, recall with nothing wrong).</p>",
             *_provenance_html(m.get("provenance") or {}),
             *_families_html(m),
             "<h2>Answers</h2>",
             _table(["precision", "recall", "F1", "tp", "fp", "fn", "tn", "false-alarm rate", "passed wrong answers"],
                    [[_pct(a["precision"]), _pct(a["recall"]), _f3(a["f1"]), a["tp"], a["fp"], a["fn"], a["tn"],
                      _pct(a["false_alarm_rate"]), a["passed_wrong_answers"]]]),
             *_sets_html(m.get("sets") or {}),
             "<h3>Confusion: label x report status</h3>"]
    cols = sorted({s for row in m["confusion"].values() for s in row},
                  key=lambda s: STATUSES_ORDER.index(s) if s in STATUSES_ORDER else 99)
    parts.append(_table(["label"] + cols, [[k] + [v.get(c, 0) for c in cols] for k, v in m["confusion"].items()]))
    ocols = sorted({s for row in m["check_confusion"].values() for s in row})
    parts += ["<h3>Confusion: check label x outcome</h3>",
              _table(["claim label"] + ocols, [[k] + [v.get(c, 0) for c in ocols] for k, v in m["check_confusion"].items()]),
              "<h2>Per verifier</h2>"]
    rows = []
    for v, d in m["per_verifier"].items():
        an, ad, ch, ca = d["answers"], d.get("answers_decided") or {}, d["checks"], d["calibration"]
        rows.append([v, an["n"], _pct(an["precision"]), _pct(an["recall"]), _f3(an["f1"]), an.get("undecided", 0),
                     ad.get("n", 0), _pct(ad.get("recall")), _pct(ad.get("false_alarm_rate")), ch["n"],
                     _pct(ch["precision"]), _pct(ch["recall"]), _f3(ch["f1"]), ca["decisive_labelled_checks"],
                     _f3(ca["ece"])])
    parts.append("<p>Answers: the labelled answers a verifier ran on (one of its checks failed = a flag); "
                 "undecided: those where it decided none of its checks (all <code>unknown</code>), which the "
                 "first R counts as misses; decided: the others, with recall and false-alarm rate over them.</p>")
    parts.append(_table(["verifier", "answers", "P", "R", "F1", "undecided", "decided", "R (decided)",
                         "false-alarm rate (decided)", "labelled checks", "P", "R", "F1", "decisive checks", "ECE"],
                        rows))
    uns = m.get("citation_status_unsearched") or {}
    if m["citation_status"] or uns.get("n"):
        parts.append("<h2>Per citation status</h2>")
    if uns.get("n"):
        parts.append(f"<p>{uns['n']} NOT_FOUND checks searched no source expected to hold the work (none configured "
                     "or reachable, or a partial library): the absence is no evidence, so they are left out of this "
                     f"table ({uns.get('valid', 0)} VALID, {uns.get('hallucinated', 0)} HALLUCINATED).</p>")
    if m["citation_status"]:
        parts += [_table(
            ["status", "asserts", "n", "VALID", "HALLUCINATED", "precision", "recall", "F1", "Laplace", "Wilson 95%",
             "outcomes"],
            [[s, d["asserts"], d["n"], d["valid"], d["hallucinated"], _pct(d["precision"]), _pct(d["recall"]),
              _f3(d["f1"]), f"{d['laplace']:.4f}", f"{d['wilson95'][0]:.3f}-{d['wilson95'][1]:.3f}",
              ", ".join(f"{k} {n}" for k, n in sorted(d["outcomes"].items()))] for s, d in m["citation_status"].items()])]
    parts.append("<h2>Calibration (reliability diagrams)</h2>")
    for v, d in m["per_verifier"].items():
        if v in pngs:
            b64 = base64.b64encode(pngs[v]).decode("ascii")
            parts.append(f'<figure><img alt="reliability diagram of {html.escape(v)}" '
                         f'src="data:image/png;base64,{b64}"><figcaption>{html.escape(v)}</figcaption></figure>')
        parts.append(_table(["bin", "n", "mean confidence", "share right"],
                            [[f"({b['lo']:.1f}, {b['hi']:.1f}]", b["n"], _f3(b["confidence"]),
                              _pct(b["accuracy"])] for b in d["calibration"]["bins"] if b["n"]]))
    parts.append("<h2>Cost and latency</h2>")
    lrows = [[k, d["n"], f"{d['p50']:.2f}", f"{d['p90']:.2f}", f"{d['p95']:.2f}", f"{d['p99']:.2f}", f"{d['max']:.2f}"]
             for k, d in m["latency_ms"].items() if d]
    parts.append(_table(["ms", "n", "p50", "p90", "p95", "p99", "max"], lrows))
    crows = [[k, f"{d['total']:.0f}", f"{d['p50']:.1f}", f"{d['p95']:.1f}", f"{d['max']:.1f}"] for k, d in m["cost"].items()]
    parts.append(_table(["extra per answer", "total", "p50", "p95", "max"], crows))
    parts.append(f"<p>{n_misjudged} misjudged answers are listed in <code>misjudged.jsonl</code>.</p>")
    style = ("body{font-family:sans-serif;max-width:70em;margin:1em auto;padding:0 1em}table{border-collapse:collapse;"
             "margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}"
             "figure{display:inline-block;margin:.5em}")
    return (f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{style}</style></head><body>" + "\n".join(parts) + "</body></html>\n")


def write(metrics: dict[str, Any], out_dir: str | Path, *, title: str = "veracity eval",
          provenance: dict[str, Any] | None = None) -> dict[str, Path]:
    """Write ``metrics.json``, ``misjudged.jsonl``, ``results.jsonl``, ``reliability-<verifier>.png`` per verifier
    with decisive labelled checks, and ``report.html`` (self-contained: PNGs inlined as base64
    data URIs, no external reference; the ``provenance`` -- data, policy, index, limit, model,
    version ... -- and its ``not_checked`` notices (:func:`preflight`) first, then the answers,
    the per-set table and the rest). Returns name -> path."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    m = {k: v for k, v in metrics.items() if not k.startswith("_")}
    if provenance:
        m["provenance"] = provenance
    files: dict[str, Path] = {}
    (d / "metrics.json").write_text(json.dumps(m, indent=2, sort_keys=False) + "\n")
    files["metrics.json"] = d / "metrics.json"
    mis = metrics.get("_misjudged") or []
    with (d / "misjudged.jsonl").open("w", encoding="utf-8") as fh:
        for r in mis:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    files["misjudged.jsonl"] = d / "misjudged.jsonl"
    with (d / "results.jsonl").open("w", encoding="utf-8") as fh:
        for r in metrics.get("_results") or []:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    files["results.jsonl"] = d / "results.jsonl"
    pngs = {}
    for v, dv in m["per_verifier"].items():
        if dv["calibration"]["decisive_labelled_checks"]:
            pngs[v] = _plot(v, dv["calibration"])
            name = f"reliability-{v}.png"
            (d / name).write_bytes(pngs[v])
            files[name] = d / name
    (d / "report.html").write_text(_html(m, pngs, title, len(mis)), encoding="utf-8")
    files["report.html"] = d / "report.html"
    return files
