"""The Grafana dashboard, the recording rules and the alert rules against a real Prometheus
(docs/metrics.md): a gateway (``veracity serve``) in front of the scripted upstream gets scripted
traffic through the real ``openai`` SDK -- passed, corrected, failed, blocked (a 422 and a held
stream's error event), unverified, verifier errors, skipped, an upstream error; two models (named in litellm's price table, so verification has a cost in dollars), two
teams (virtual keys) -- while a real
``prometheus`` scrapes it every second and evaluates ``deploy/prometheus/veracity-rules.yml``.
Then EVERY PromQL expression of ``deploy/grafana/dashboards/veracity.json`` (template
variables substituted: every model, team and verifier) must return data, and the
hallucination-rate panels must give, per model and team, the shares this test computes from
the traffic it sent. Every panel follows ``$model`` and ``$team`` but the replicas one (``up``,
gateway-wide, and it says so): with one model and team chosen, the gateway panels (requests,
upstream errors, overhead) show that traffic and nothing for a team that sent none.

Exact shares: the traffic script runs once to create every label combination (a counter that
appears with a value has no visible increase in ``rate()``), Prometheus is waited on until it
scraped the totals, then the script runs twice more; ``$__rate_interval`` becomes a window that
starts just before that first settled sample and ends at the last one, so every ratio covers
exactly the measured traffic (all series share their sample timestamps, so ``rate()``'s
extrapolation factor cancels in each ratio).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from proxy.config import hash_key
from proxy.upstreams.mock import MockUpstream
from tests.conftest import ROOT
from tests.fixtures.prometheus import Prometheus, binary

pytestmark = pytest.mark.prometheus

DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "veracity.json"
RULES = ROOT / "deploy" / "prometheus" / "veracity-rules.yml"

RIGHT_TXT = f"{5000 * 1.06 ** 4:,.2f}"   # 6,312.38: $5,000 at 6% compounded yearly for 4 years
WRONG_TXT = "6,200.00"
EVIDENCE = "Automatic verification found"  # start of proxy.pipeline.correction.evidence_prompt()
KEYS = {"red": "vk-dashboard-red", "blue": "vk-dashboard-blue"}
MODELS = ("gpt-4o-mini", "gpt-4o")


def question(tag: str, n: int) -> str:
    return f"[case:{tag}] [n:{n}] I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"


def answer(value: str) -> str:
    return f"With annual compounding the total is 5000 * 1.06^4 = ${value}."


CITE = ("Two references:\n\nReferences\n1. Smith, J., & Lee, K. (2019). Quantum Gradient Transformers for Protein "
        "Folding Dynamics. Journal of Machine Learning Research, 20(4), 1-25.\n")
CODE = "Run this:\n```python\nprint(sum(range(10)))\n```\n"
#: a right answer followed by more prose than the arithmetic verifier reads (60,000 characters):
#: its report carries an `unknown` truncation check beside the pass (nothing is silently unverified)
LONG = answer(RIGHT_TXT) + " " + "This sentence carries no figures at all. " * 1600


def _rules() -> list[dict[str, Any]]:
    return [
        {"name": "fix-2", "match": {"any_message": r"\[case:wrongfix\]", "last_user": EVIDENCE},
         "reply": {"content": answer(RIGHT_TXT)}},
        {"name": "wrongfix", "match": {"last_user": r"\[case:wrongfix\]"}, "reply": {"content": answer(WRONG_TXT)}},
        {"name": "wrong", "match": {"any_message": r"\[case:wrong\]"}, "reply": {"content": answer(WRONG_TXT)}},
        {"name": "right", "match": {"any_message": r"\[case:right\]"}, "reply": {"content": answer(RIGHT_TXT)}},
        {"name": "cite", "match": {"any_message": r"\[case:cite\]"}, "reply": {"content": CITE}},
        {"name": "code", "match": {"any_message": r"\[case:code\]"}, "reply": {"content": CODE}},
        {"name": "long", "match": {"any_message": r"\[case:long\]"}, "reply": {"content": LONG}},
        {"name": "hello", "match": {"any_message": r"\[case:hello\]"}, "reply": {"content": "Hello! How can I help?"}},
        {"name": "boom", "match": {"any_message": r"\[case:boom\]"},
         "reply": {"status": 500, "error": "the model server fell over"}},
    ]


POLICIES = {
    "correct": {"on_failure": "correct", "correction": {"max_rounds": 2}},
    # a failed answer goes to the review queue (the backlog gauge); identical failures are one review
    "annotate": {"on_failure": "annotate", "review": {"when": ["failed"]}},
    "block": {"on_failure": "block", "correction": {"max_rounds": 0}},
    # a held (buffer mode) stream that is blocked ends with an error event
    "blockstream": {"on_failure": "block", "correction": {"max_rounds": 0},
                    "streaming": {"mode": "buffer", "keepalive_s": 0.05}},
    # no bibliographic source: every reference is `unknown`, the answer `unverified`
    "nosources": {"on_failure": "annotate",
                  "verifiers": {"citations": {"sources": {"use": [], "cache": {"backend": "none"}}}}},
    # a sandbox backend that does not exist: the code check ends in `error` (verifier error)
    "crash": {"on_failure": "annotate", "verifiers": {"code": {"sandbox": {"backend": "no-such-backend"}}}},
}


@dataclass(frozen=True)
class Req:
    model: str
    team: str
    tag: str
    policy: str
    status: str | None       # the report status the script makes (None: no answer, an upstream error)
    blocked: bool = False
    stream: bool = False


#: one run of the traffic; first drafts failing: wrongfix, wrong
SCRIPT = [
    Req("gpt-4o-mini", "red", "wrongfix", "correct", "corrected"),
    Req("gpt-4o-mini", "red", "wrongfix", "correct", "corrected"),
    Req("gpt-4o-mini", "red", "right", "correct", "passed"),
    Req("gpt-4o-mini", "red", "wrong", "annotate", "failed"),
    Req("gpt-4o-mini", "red", "boom", "annotate", None),
    Req("gpt-4o-mini", "blue", "wrong", "block", "failed", blocked=True),
    Req("gpt-4o-mini", "blue", "right", "annotate", "passed"),
    Req("gpt-4o-mini", "blue", "cite", "nosources", "unverified"),
    Req("gpt-4o-mini", "blue", "code", "crash", "error"),
    Req("gpt-4o", "red", "wrong", "annotate", "failed"),
    Req("gpt-4o", "red", "right", "annotate", "passed"),
    Req("gpt-4o", "red", "code", "crash", "error"),
    Req("gpt-4o", "red", "hello", "annotate", "skipped"),
    Req("gpt-4o", "red", "wrong", "blockstream", "failed", blocked=True, stream=True),
    Req("gpt-4o", "blue", "wrongfix", "correct", "corrected"),
    Req("gpt-4o", "blue", "cite", "nosources", "unverified"),
    Req("gpt-4o", "blue", "right", "annotate", "passed"),
    # a pass beside a truncation `unknown`: not every unit decided, so `unverified` (verifiers/run.py status_of)
    Req("gpt-4o", "blue", "long", "annotate", "unverified"),
]
MEASURED_RUNS = 2


def expected_shares(script: list[Req]) -> dict[str, dict[tuple[str, str], float]]:
    """Per (model, team): the shares the hallucination-rate panels must show, computed from
    the script alone (checked answers: every answer whose status is not ``skipped``)."""
    out: dict[str, dict[tuple[str, str], float]] = {k: {} for k in
                                                    ("first_draft", "failed", "corrected", "blocked", "unverified")}
    groups = sorted({(r.model, r.team) for r in script})
    for g in groups:
        answers = [r for r in script if (r.model, r.team) == g and r.status is not None]
        checked = [r for r in answers if r.status != "skipped"]
        first_failed = [r for r in checked if r.status in ("corrected", "failed")]
        out["first_draft"][g] = len(first_failed) / len(checked)
        out["failed"][g] = sum(r.status == "failed" for r in checked) / len(checked)
        out["blocked"][g] = sum(r.blocked for r in checked) / len(checked)
        out["unverified"][g] = sum(r.status == "unverified" for r in checked) / len(checked)
        if first_failed:
            out["corrected"][g] = sum(r.status == "corrected" for r in first_failed) / len(first_failed)
    return out


#: panel title -> which share of expected_shares() it shows
RATE_PANELS = {"First drafts with a failed check": "first_draft", "Returned answers with a failed check": "failed",
               "Corrections that worked": "corrected", "Blocked answers": "blocked", "Unverified answers": "unverified"}


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expr) of every target of every panel (rows' nested panels too)."""
    doc = json.loads(DASHBOARD.read_text())
    out = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                out.append((p["title"], t["expr"]))
    walk(doc["panels"])
    return out


def substitute(expr: str, window: str, **chosen: str) -> str:
    """Grafana's template variables as a dashboard user choosing "All" gets them, or one value
    of a variable where ``chosen`` names it (``model="gpt-4o"``)."""
    expr = expr.replace("$__rate_interval", window).replace("$__interval", window)
    for var in ("model", "team", "policy", "verifier"):
        value = chosen.get(var, ".*")  # the names here need no regex escaping (letters, digits, "-", ".")
        expr = re.sub(r"\$\{?" + var + r"\}?", value.replace("\\", "\\\\"), expr)
    assert "$" not in expr, f"unsubstituted template variable in {expr}"
    return expr


@pytest.fixture(scope="module")
def live(tmp_path_factory, gateway_factory):
    binary("prometheus", "/usr/bin/prometheus")  # skip before starting anything when it is missing
    tmp = tmp_path_factory.mktemp("dashboard-live")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        doc = dict(doc, name=name, risk={"threshold": 0.1}, overridable=["on_failure"])
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    mock = MockUpstream({"rules": _rules(), "models": list(MODELS)}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "keys": [{"name": team, "hash": hash_key(key), "team": team, "policy": "annotate",
                     "allow_policy_header": True, "admin": team == "red"} for team, key in KEYS.items()],
           "limits": {"connect_retries": 0},
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3"), "review_db": str(tmp / "reviews.sqlite3")}}
    gw = gateway_factory(cfg)
    prom = Prometheus([f"127.0.0.1:{gw.port}"], tmp / "prometheus", rule_files=[RULES])
    try:
        sent: list[tuple[Req, str | None, bool]] = []
        n = 0

        def run_script() -> None:
            nonlocal n
            for req in SCRIPT:
                n += 1
                sent.append((req, *send(gw.base_url, req, n)))

        def answers_total() -> float:
            return sum(1 for r, status, _ in sent if status is not None)

        run_script()  # creates every series
        t_first = prom.settled("veracity_reports_total", answers_total())
        for _ in range(MEASURED_RUNS):
            run_script()
        t_last = prom.settled("veracity_reports_total", answers_total())
        yield {"prom": prom, "gw": gw, "sent": sent, "t_first": t_first, "t_last": t_last}
    finally:
        prom.stop()
        mock.stop()


def send(base_url: str, req: Req, n: int) -> tuple[str | None, bool]:
    """One request through the openai SDK: (report status or None, blocked?)."""
    client = openai.OpenAI(base_url=base_url, api_key=KEYS[req.team], max_retries=0, timeout=120,
                           default_headers={"x-veracity-policy": req.policy})
    messages = [{"role": "user", "content": question(req.tag, n)}]
    if req.stream:
        try:
            for _ in client.chat.completions.create(model=req.model, messages=messages, stream=True):
                pass
        except openai.APIError as exc:  # the held stream's error event (on_failure: block)
            assert req.blocked and "Veracity blocked the answer" in str(exc), (req, exc)
            return req.status, True
        raise AssertionError(f"{req}: the stream was not blocked")
    try:
        resp = client.chat.completions.create(model=req.model, messages=messages)
    except openai.UnprocessableEntityError as exc:  # on_failure: block
        status = exc.body["veracity"]["status"]
        assert exc.body["type"] == "veracity_blocked" and req.blocked, (req, exc.body)
        assert status == req.status, (req, exc.body)
        return status, True
    except openai.InternalServerError as exc:  # the scripted upstream's 500, relayed
        assert req.status is None, (req, exc)
        return None, False
    status = resp.model_extra["veracity"]["status"]
    assert status == req.status and not req.blocked, (req, resp.model_extra["veracity"])
    return status, False


def _window(live) -> tuple[str, float]:
    """The range that covers exactly the measured runs, and the time to evaluate at."""
    ms = int((live["t_last"] - live["t_first"]) * 1000) + 500  # half a scrape interval before the first sample
    return f"{ms}ms", live["t_last"]


def test_every_dashboard_expression_returns_data(live):
    window, at = _window(live)
    exprs = dashboard_exprs()
    assert len(exprs) >= 15
    empty = []
    for title, expr in exprs:
        res = live["prom"].query(substitute(expr, window), at=at)
        if not res:
            empty.append((title, expr))
    assert not empty, f"panels whose expression returned no data: {empty}"


@pytest.mark.parametrize("panel", sorted(RATE_PANELS))
def test_hallucination_rate_panels_show_the_rates_the_traffic_implies(live, panel):
    window, at = _window(live)
    want = expected_shares(SCRIPT)[RATE_PANELS[panel]]
    # the script ran as written: every response had the status the script meant
    got_status = Counter(status for _, status, _ in live["sent"])
    assert got_status == Counter(r.status for r in SCRIPT * (1 + MEASURED_RUNS))
    [expr] = [e for t, e in dashboard_exprs() if t == panel]
    res = live["prom"].query(substitute(expr, window), at=at)
    got = {(r["metric"]["model"], r["metric"]["team"]): float(r["value"][1]) for r in res}
    assert set(got) == set(want), (panel, got, want)
    for g, share in want.items():
        assert got[g] == pytest.approx(share, abs=1e-9), (panel, g, got[g], share)


def test_rates_are_not_all_alike():
    """The script tells the rates apart: a panel that mixed up its label or its denominator
    could not pass the rate test by accident."""
    shares = expected_shares(SCRIPT)
    for name, by_group in shares.items():
        if name != "corrected":
            assert len(set(by_group.values())) >= 2, (name, by_group)
    assert len({tuple(sorted(v.items())) for v in shares.values()}) == len(shares)


def test_recording_rules_are_evaluated_with_data(live):
    prom = live["prom"]
    groups = prom.api("rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert {g["file"] for g in groups} == {str(RULES)}
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert not bad, bad
    shipped = yaml.safe_load(RULES.read_text())
    records = [r["record"] for g in shipped["groups"] for r in g["rules"] if "record" in r]
    assert len(records) >= 10
    empty = [name for name in records if not prom.query(name)]
    assert not empty, f"recording rules without data: {empty}"
    # the hallucination rate per model and team is a share of checked answers
    for r in prom.query("model_team:veracity_first_draft_failed_answers:ratio_rate5m"):
        assert 0.0 <= float(r["value"][1]) <= 1.0


def test_both_alerts_are_pending_for_the_traffic_that_should_raise_them(live):
    """gpt-4o-mini/red's first drafts fail 3 times in 4 and the code verifier errs on every
    check: both alert expressions hold, so both alerts are pending (``for:`` not yet over)."""
    prom = live["prom"]

    def alerts() -> dict[str, set[tuple[str, ...]]]:
        got: dict[str, set[tuple[str, ...]]] = {}
        for a in prom.api("alerts")["alerts"]:
            lab = a["labels"]
            key = (lab["model"], lab["team"]) if "model" in lab else (lab.get("verifier", ""),)
            got.setdefault(lab["alertname"], set()).add(key)
        return got

    from tests.fixtures.polling import wait_for
    got = wait_for(lambda: (lambda a: a if {"VeracityHallucinationRateHigh", "VeracityVerifierErrorRateHigh"} <= set(a)
                            else None)(alerts()), "both alerts pending", timeout=60)
    assert ("gpt-4o-mini", "red") in got["VeracityHallucinationRateHigh"]
    assert ("code",) in got["VeracityVerifierErrorRateHigh"]
    assert ("arithmetic",) not in got["VeracityVerifierErrorRateHigh"]  # no arithmetic check erred


def test_promtool_accepts_the_rules_and_their_unit_tests():
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian package `prometheus`)")
    out = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    # the rules' unit tests: the shares on known series, each alert firing only after its `for:`,
    # only for the team over the threshold with enough traffic, only for the erring verifier
    unit = RULES.with_name("veracity-rules.test.yml")
    out = subprocess.run([promtool, "test", "rules", str(unit)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_shipped_prometheus_config_loads_the_rules():
    cfg = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    assert any(Path(f).name == RULES.name for f in cfg["rule_files"])
    compose = (ROOT / "deploy" / "docker-compose.yaml").read_text()
    assert "prometheus/veracity-rules.yml" in compose
    # every image pinned to a version: `latest` (or no tag) changes what runs without a change here
    images = [svc["image"] for svc in yaml.safe_load(compose)["services"].values() if "image" in svc]
    assert images and all(re.fullmatch(r"[\w./-]+:v?\d+(\.\d+)*(-\w+)?", i) for i in images), images


def _panel(live, title: str) -> list[dict[str, Any]]:
    window, at = _window(live)
    [expr] = [e for t, e in dashboard_exprs() if t == title]
    return live["prom"].query(substitute(expr, window), at=at)


def test_verifier_panels_show_what_the_traffic_implies(live):
    """Per verifier: every code check erred (no sandbox backend), every citation check was
    unknown (no source), and the arithmetic failures per checked answer are the wrong first
    drafts (one equation per answer; correction rounds' drafts are right)."""
    outcomes = {(r["metric"]["verifier"], r["metric"]["outcome"]): float(r["value"][1])
                for r in _panel(live, "Check outcomes by verifier: fail, unknown, error")}
    assert outcomes[("code", "error")] == pytest.approx(1.0)
    assert outcomes[("citations", "unknown")] == pytest.approx(1.0)
    assert ("arithmetic", "error") not in outcomes
    longs = sum(r.tag == "long" for r in SCRIPT)  # one pass + one truncation `unknown` each
    arithmetic_checks = (sum(1 for r in SCRIPT if r.tag in ("right", "wrong")) + 2 * sum(r.tag == "wrongfix" for r in SCRIPT)
                         + 2 * longs)
    wrong_drafts = sum(1 for r in SCRIPT if r.tag in ("wrong", "wrongfix"))
    assert outcomes[("arithmetic", "fail")] == pytest.approx(wrong_drafts / arithmetic_checks, abs=1e-9)
    assert outcomes[("arithmetic", "unknown")] == pytest.approx(longs / arithmetic_checks, abs=1e-9)
    truncated = {r["metric"]["verifier"]: float(r["value"][1])
                 for r in _panel(live, "Answers longer than what was checked, by verifier")}
    assert set(truncated) == {"arithmetic"} and truncated["arithmetic"] > 0, truncated
    per_answer = {(r["metric"]["verifier"], r["metric"]["model"], r["metric"]["team"]): float(r["value"][1])
                  for r in _panel(live, "Failed checks of first drafts per checked answer, by verifier")}
    for (model, team), share in expected_shares(SCRIPT)["first_draft"].items():
        assert per_answer[("arithmetic", model, team)] == pytest.approx(share, abs=1e-9)
    assert {v for v, _, _ in per_answer} == {"arithmetic"}  # nothing else failed


def test_cost_panels_count_the_correction_calls(live):
    """Extra upstream calls per checked answer: one correction call per `wrongfix` answer."""
    calls = {(r["metric"]["model"], r["metric"]["team"]): float(r["value"][1])
             for r in _panel(live, "Extra calls per checked answer, by kind") if r["metric"]["kind"] == "upstream"}
    for g in sorted({(r.model, r.team) for r in SCRIPT}):
        fixes = sum(1 for r in SCRIPT if (r.model, r.team) == g and r.tag == "wrongfix")
        checked = sum(1 for r in SCRIPT if (r.model, r.team) == g and r.status not in (None, "skipped"))
        if fixes:
            assert calls[g] == pytest.approx(fixes / checked, abs=1e-9), (g, calls)
        else:
            assert g not in calls
    tokens = {(r["metric"]["model"], r["metric"]["team"]): float(r["value"][1])
              for r in _panel(live, "Extra tokens per checked answer")}
    assert tokens[("gpt-4o-mini", "red")] > 0 and tokens[("gpt-4o", "blue")] > 0
    seconds = {(r["metric"]["model"], r["metric"]["team"]) for r in _panel(live, "Verification time per checked answer")}
    assert seconds == {(r.model, r.team) for r in SCRIPT}


def _overall_first_draft_share(script: list[Req]) -> float:
    checked = [r for r in script if r.status not in (None, "skipped")]
    return sum(r.status in ("corrected", "failed") for r in checked) / len(checked)


def test_headline_stat_is_the_first_draft_hallucination_rate(live):
    """The headline stat (last hour) on exactly the measured runs: its window set to theirs,
    it must give the share of checked first drafts that failed, over every model and team."""
    window, at = _window(live)
    [expr] = [e for t, e in dashboard_exprs() if t == "Hallucination rate of first drafts (last hour)"]
    assert "[1h]" in expr
    res = live["prom"].query(substitute(expr.replace("[1h]", f"[{window}]"), window), at=at)
    assert len(res) == 1
    assert float(res[0]["value"][1]) == pytest.approx(_overall_first_draft_share(SCRIPT), abs=1e-9)
    # and as shipped (the last hour): a share, with data
    shipped = live["prom"].query(substitute(expr, window), at=at)
    assert len(shipped) == 1 and 0.0 < float(shipped[0]["value"][1]) < 1.0


def test_open_reviews_stat_is_the_queue(live):
    """Every `wrong` answer under `annotate` went to review with the same failed claim: one open
    review that counts them all; the backlog gauge (max over replicas) says 1, as the API does."""
    import httpx

    gw = live["gw"]
    reviews = httpx.get(gw.url + "/v1/veracity/reviews?limit=100", trust_env=False,
                        headers={"authorization": f"Bearer {KEYS['red']}"}).json()
    wrong_annotated = sum(1 for r, status, _ in live["sent"] if r.tag == "wrong" and r.policy == "annotate")
    assert reviews["total"] == 1 and reviews["data"][0]["count"] == wrong_annotated
    window, at = _window(live)
    from tests.fixtures.polling import wait_for
    got = wait_for(lambda: (lambda res: res if res and float(res[0]["value"][1]) == 1 else None)(
        live["prom"].query(substitute([e for t, e in dashboard_exprs() if t == "Open reviews"][0], window))),
        "the backlog gauge scraped", timeout=30)
    assert float(got[0]["value"][1]) == 1


def test_cost_in_dollars_and_correction_rounds(live):
    """Dollars per checked answer: the extra tokens priced by litellm's table, so per extra
    token between the model's input and output price; correction rounds per failed first draft:
    one round per `wrongfix` answer, none for `wrong` ones (annotate, block: no correction)."""
    from proxy.stores.budget import PriceTable

    table = PriceTable()
    dollars = {(r["metric"]["model"], r["metric"]["team"]): float(r["value"][1])
               for r in _panel(live, "Verification cost per checked answer (USD)")}
    tokens = {(r["metric"]["model"], r["metric"]["team"]): float(r["value"][1])
              for r in _panel(live, "Extra tokens per checked answer")}
    for g in sorted({(r.model, r.team) for r in SCRIPT if r.tag == "wrongfix"}):
        low, high = sorted(table.prices(g[0]))
        assert dollars[g] > 0 and low * (1 - 1e-9) <= dollars[g] / tokens[g] <= high * (1 + 1e-9), (g, dollars, tokens)
    rounds = {(r["metric"]["model"], r["metric"]["team"]): float(r["value"][1])
              for r in _panel(live, "Correction rounds per first draft that failed")}
    for g in sorted({(r.model, r.team) for r in SCRIPT}):
        mine = [r for r in SCRIPT if (r.model, r.team) == g]
        failed_first = sum(r.status in ("corrected", "failed") for r in mine)
        if failed_first:
            assert rounds[g] == pytest.approx(sum(r.tag == "wrongfix" for r in mine) / failed_first, abs=1e-9), g


#: the gateway panels over the gateway's own metrics, which carry model and team
GATEWAY_PANELS = ("Requests/s by route and HTTP status", "Upstream errors by reason", "Gateway overhead p50/p99")
#: the one panel that cannot follow $model/$team: `up` is Prometheus's per-target scrape result
GATEWAY_WIDE = "Replicas scraped"


def test_every_panel_but_the_replicas_follows_model_and_team():
    """Every expression of the dashboard filters by ``$model`` and ``$team`` but the replicas
    panel (``up``: one series per scraped target, and every replica serves every model and
    team), which says so in its description instead of pretending to."""
    doc = json.loads(DASHBOARD.read_text())
    panels = {p["title"]: p for p in doc["panels"]}
    unfiltered = sorted({t for t, e in dashboard_exprs()
                         if not ('model=~"$model"' in e and 'team=~"$team"' in e)})
    assert unfiltered == [GATEWAY_WIDE], unfiltered
    wide = panels[GATEWAY_WIDE]
    assert "gateway-wide" in wide["description"].lower() and "model" in wide["description"]
    assert all("$model" not in t["expr"] and "$team" not in t["expr"] for t in wide["targets"])


def _gateway_panel(live, title: str, model: str, team: str) -> list[dict[str, Any]]:
    window, at = _window(live)
    out = []
    for t, e in dashboard_exprs():
        if t == title:
            out += live["prom"].query(substitute(e, window, model=model, team=team), at=at)
    return out


@pytest.mark.parametrize("panel", GATEWAY_PANELS)
def test_gateway_panels_follow_the_model_and_team_of_the_traffic(live, panel):
    """With one model and one team chosen, each gateway panel shows that model and team's
    traffic and nothing for a team that sent none: the requests and the overhead of every
    (model, team) of the script, the upstream errors (the scripted 500s, `boom`) only of the
    model and team that got them."""
    groups = sorted({(r.model, r.team) for r in SCRIPT})
    errors = {(r.model, r.team) for r in SCRIPT if r.tag == "boom"}
    assert errors and set(groups) - errors  # the script has groups with and without upstream errors
    for model, team in groups:
        res = _gateway_panel(live, panel, model, team)
        if panel == "Upstream errors by reason":
            if (model, team) in errors:
                assert {r["metric"]["reason"] for r in res} == {"http_500"}, (model, team, res)
                assert all(float(r["value"][1]) > 0 for r in res)
            else:
                assert res == [], (model, team, res)
        else:
            assert res, (panel, model, team)
            values = [float(r["value"][1]) for r in res]
            assert all(v == v and v >= 0 for v in values), (panel, model, team, values)  # numbers, not NaN
    for model in MODELS:  # a team that sent nothing: no series, whatever the model
        assert _gateway_panel(live, panel, model, "green") == [], (panel, model)
