"""End to end, ``n > 1``: the real ``openai`` SDK -> Veracity (``veracity serve`` subprocess) ->
the scripted mock upstream, with the real arithmetic verifier. Every choice is verified; a
failing choice is corrected on its own (one-choice correction call) and put back at its index.

Each case tags its question (``[case:NAME]``); the mock answers ``n`` choices from a rule's
``choices`` list and plays a model that is right after the evidence prompt. The right total is
computed here independently of the gateway.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from proxy.upstreams.mock import MockUpstream

RIGHT = 5000 * 1.06 ** 4                       # $5,000 at 6% compounded yearly for 4 years
RIGHT_TXT = f"{RIGHT:,.2f}"                    # "6,312.38"
WRONG_TXT = "6,200.00"
EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()

WRONG = f"With annual compounding the total is 5000 * 1.06^4 = ${WRONG_TXT}."
RIGHT_ANSWER = f"Compounded yearly: 5000 * 1.06^4 = ${RIGHT_TXT}, so you end with ${RIGHT_TXT}."
FIXED = f"With annual compounding the total is 5000 * 1.06^4 = ${RIGHT_TXT}."


def question(tag: str) -> str:
    return f"[case:{tag}] I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"


# tag -> the choices the model answers (wrong ones are fixed after the evidence prompt)
CASES: dict[str, list[str]] = {
    "right-wrong": [RIGHT_ANSWER, WRONG],
    "stream": [WRONG, RIGHT_ANSWER],
    "block-one": [WRONG, RIGHT_ANSWER],
    "block-one-stream": [WRONG, RIGHT_ANSWER],
    "block-all": [WRONG, WRONG],
    "budget": [WRONG, WRONG],
    "metrics": [WRONG, WRONG],
    "passthrough": [RIGHT_ANSWER, WRONG],
    "slow-fix": [WRONG, RIGHT_ANSWER],
}
#: tag -> the upstream's delay (ms) before answering that case's correction call
FIX_DELAY_MS = {"slow-fix": 400}

POLICIES = {
    "correct": {"on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 3}},
    "annotate": {"on_failure": "annotate", "risk": {"threshold": 0.1}},
    "block": {"on_failure": "block", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 0}},
    "block-buffer": {"on_failure": "block", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 0},
                     "streaming": {"mode": "buffer", "keepalive_s": 0.05}},
    "one-call": {"on_failure": "correct", "risk": {"threshold": 0.1}, "budgets": {"request": {"extra_calls": 1}}},
    "buffer": {"on_failure": "correct", "risk": {"threshold": 0.1},
               "streaming": {"mode": "buffer", "keepalive_s": 0.05}},
    "passthrough": {"on_failure": "correct", "risk": {"threshold": 0.1}, "streaming": {"mode": "passthrough"}},
}


def _rules() -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = []
    for tag, answers in CASES.items():
        rules.append({"name": f"{tag}/fix", "match": {"any_message": rf"\[case:{tag}\]", "last_user": EVIDENCE},
                      "reply": {"content": FIXED, "delay_ms": FIX_DELAY_MS.get(tag, 0)}})
        rules.append({"name": tag, "match": {"last_user": rf"\[case:{tag}\]"},
                      "reply": {"content": answers[0], "choices": [{"content": a} for a in answers]}})
    return rules


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("pipeline-choices")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        doc = dict(doc, name=name, verifiers={"code": {"enabled": False}, "citations": {"enabled": False}})
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    mock = MockUpstream({"rules": _rules(), "models": ["gpt-test"]}).start()
    audit = tmp / "audit.jsonl"
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"audit": str(audit), "budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock, "audit": audit}
    mock.stop()


def client(env, policy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test-choices", max_retries=0, timeout=60,
                         default_headers={"x-veracity-policy": policy})


def ask(env, policy: str, tag: str, n: int = 2):
    raw = client(env, policy).chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": question(tag)}], n=n)
    resp = raw.parse()
    return raw.headers, resp, resp.model_extra["veracity"]


def upstream_bodies(env, rule: str) -> list[dict[str, Any]]:
    return [r["body"] for r in env["mock"].requests() if r.get("rule") == rule]


def stream(env, policy: str, tag: str, n: int = 2):
    """Stream with the SDK: (text per choice index, finish_reason per index, refusal per index, reports)."""
    events = client(env, policy).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": question(tag)}], n=n, stream=True)
    texts: dict[int, str] = {}
    finishes: dict[int, str] = {}
    refusals: dict[int, str] = {}
    reports = []
    for chunk in events:
        extra = chunk.model_extra or {}
        if "veracity" in extra:
            reports.append(extra["veracity"])
        for ch in chunk.choices:
            texts[ch.index] = texts.get(ch.index, "") + (ch.delta.content or "")
            refusals[ch.index] = refusals.get(ch.index, "") + (ch.delta.refusal or "")
            if ch.finish_reason:
                finishes[ch.index] = ch.finish_reason
    return texts, finishes, refusals, reports


def failed_claims(entry: dict[str, Any]) -> list[str]:
    return [c["claim"] for c in entry["checks"] if c["outcome"] == "fail"]


# ------------------------------------------------------------------------------ the cases


def test_wrong_choice_corrected_at_its_index_right_choice_untouched(env):
    # other tests of this module ask "right-wrong" too (any order): count this request's calls
    fixes_before, drafts_before = len(upstream_bodies(env, "right-wrong/fix")), len(upstream_bodies(env, "right-wrong"))
    headers, resp, rep = ask(env, "correct", "right-wrong")
    assert [c.index for c in resp.choices] == [0, 1]
    assert resp.choices[0].message.content == RIGHT_ANSWER          # right: byte for byte as the model said it
    assert resp.choices[1].message.content == FIXED                 # wrong: corrected in place
    assert rep["status"] == "corrected" and headers["x-veracity-status"] == "corrected"
    by_index = {c["index"]: c for c in rep["choices"]}
    assert by_index[0]["status"] == "passed" and by_index[0]["rounds"] == []
    assert by_index[1]["status"] == "corrected" and len(by_index[1]["rounds"]) == 1
    assert WRONG_TXT in by_index[1]["corrected_checks"][0]["found"]
    assert by_index[1]["corrected_checks"][0]["expected"] == RIGHT_TXT.replace(",", "")
    # top level: every choice's checks, each tagged with its choice
    assert {c["choice"] for c in rep["checks"]} == {0, 1}
    assert all(c["outcome"] == "pass" for c in rep["checks"])
    assert [r["choice"] for r in rep["rounds"]] == [1]
    assert rep["cost"]["upstream_calls"] == 1
    # one correction call, one choice, carrying choice 1's draft and its evidence
    fixes = upstream_bodies(env, "right-wrong/fix")[fixes_before:]
    assert len(fixes) == 1 and "n" not in fixes[0]
    assert fixes[0]["messages"][-2] == {"role": "assistant", "content": WRONG}
    assert "6312.38" in fixes[0]["messages"][-1]["content"]
    assert upstream_bodies(env, "right-wrong")[drafts_before]["n"] == 2  # the client's n went upstream


def test_choice_cost_ms_includes_its_own_correction_round(env):
    """A choice's ``cost.ms`` is the time its verification added, its correction call
    included (as ``cost.ms`` of a one-choice answer); before, it was only the last draft's
    verifier time (~1 ms for a choice whose correction call took 400 ms)."""
    _, resp, rep = ask(env, "correct", "slow-fix")
    assert RIGHT_TXT in resp.choices[0].message.content
    fixed, right = rep["choices"]
    assert fixed["status"] == "corrected" and right["status"] == "passed"
    delay = FIX_DELAY_MS["slow-fix"]
    assert fixed["rounds"][0]["ms"] >= delay          # the round itself waited for the upstream
    assert fixed["cost"]["ms"] >= delay               # ... and the choice's cost says so
    assert fixed["cost"]["ms"] >= fixed["rounds"][0]["ms"]
    assert rep["cost"]["ms"] >= delay                 # the response's wall time covers it too


def test_one_choice_report_has_no_choices_entry(env):
    _, resp, rep = ask(env, "correct", "right-wrong", n=1)
    assert len(resp.choices) == 1 and resp.choices[0].message.content == RIGHT_ANSWER
    assert rep["status"] == "passed" and "choices" not in rep
    assert all("choice" not in c for c in rep["checks"])


def test_buffer_stream_corrects_each_choice(env):
    texts, finishes, _, reports = stream(env, "buffer", "stream")
    assert texts == {0: FIXED, 1: RIGHT_ANSWER}
    assert finishes == {0: "stop", 1: "stop"}
    assert len(reports) == 1
    rep = reports[0]
    assert rep["status"] == "corrected"
    assert [(c["index"], c["status"]) for c in rep["choices"]] == [(0, "corrected"), (1, "passed")]
    assert len(upstream_bodies(env, "stream/fix")) == 1


def test_block_withholds_only_the_failing_choice(env):
    headers, resp, rep = ask(env, "block", "block-one")
    bad, good = resp.choices
    assert bad.index == 0 and bad.message.content is None and bad.finish_reason == "content_filter"
    assert "withheld" in bad.message.refusal and "arithmetic" in bad.message.refusal  # names the failed check
    assert good.index == 1 and good.message.content == RIGHT_ANSWER and good.finish_reason == "stop"
    assert rep["status"] == "failed" and headers["x-veracity-status"] == "failed"
    entries = {c["index"]: c for c in rep["choices"]}
    assert entries[0]["blocked"] is True and failed_claims(entries[0])
    assert "blocked" not in entries[1] and entries[1]["status"] == "passed"
    assert upstream_bodies(env, "block-one/fix") == []             # max_rounds 0: no correction


def test_block_withholds_only_the_failing_choice_in_buffer_stream(env):
    texts, finishes, refusals, reports = stream(env, "block-buffer", "block-one-stream")
    assert texts[0] == "" and finishes[0] == "content_filter" and "withheld" in refusals[0]
    assert texts[1] == RIGHT_ANSWER and finishes[1] == "stop"
    assert reports[0]["choices"][0]["blocked"] is True


def test_block_when_every_choice_fails_raises_in_the_sdk(env):
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        ask(env, "block", "block-all")
    err = ei.value.body
    assert err["type"] == "veracity_blocked" and err["code"] == "verification_failed"
    rep = err["veracity"]
    assert rep["status"] == "failed"
    assert [(c["index"], c["status"]) for c in rep["choices"]] == [(0, "failed"), (1, "failed")]


def test_request_budget_is_shared_by_the_choices(env):
    _, resp, rep = ask(env, "one-call", "budget")
    assert len(upstream_bodies(env, "budget/fix")) == 1             # extra_calls: 1 for the whole request
    texts = [c.message.content for c in resp.choices]
    assert sorted(texts) == sorted([FIXED, WRONG])                  # one corrected, one returned as it was
    entries = {c["index"]: c for c in rep["choices"]}
    fixed_at = texts.index(FIXED)
    assert entries[fixed_at]["status"] == "corrected"
    assert entries[1 - fixed_at]["status"] == "failed"
    assert "budget:extra_calls" in entries[1 - fixed_at]["reason"]
    assert rep["status"] == "failed" and "budget:extra_calls" in rep["reason"]
    assert rep["cost"]["upstream_calls"] == 1


def _counter(metrics_text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    return sum(s.value for family in text_string_to_metric_families(metrics_text) for s in family.samples
               if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def test_metrics_count_each_verified_choice(env):
    name = "veracity_first_draft_failures_total"   # answers, one per choice, whose first draft failed
    labels = {"model": "gpt-test", "team": "default", "policy": "annotate"}
    before = _counter(env["gw"].metrics(), name, **labels)
    fails_before = _counter(env["gw"].metrics(), "veracity_checks_total", verifier="arithmetic", outcome="fail")
    _, resp, rep = ask(env, "annotate", "metrics")
    assert [c.message.content for c in resp.choices] == [WRONG, WRONG]   # annotate never changes an answer
    assert rep["status"] == "failed" and len(rep["choices"]) == 2
    after = env["gw"].metrics()
    assert _counter(after, name, **labels) - before == 2
    assert _counter(after, "veracity_checks_total", verifier="arithmetic", outcome="fail") - fails_before == 2


def test_passthrough_stream_reports_every_choice(env):
    texts, _, _, reports = stream(env, "passthrough", "passthrough")
    assert texts == {0: RIGHT_ANSWER, 1: WRONG}                     # relayed live, not corrected
    rep = reports[-1]
    assert rep["status"] == "failed"
    assert [(c["index"], c["status"]) for c in rep["choices"]] == [(0, "passed"), (1, "failed")]
    assert upstream_bodies(env, "passthrough/fix") == []


def test_audit_record_keeps_every_choice(env):
    ask(env, "correct", "right-wrong")
    recs = [json.loads(line) for line in env["audit"].read_text().splitlines() if line.strip()]
    mine = [r for r in recs if r["report"].get("choices") and r["policy"] == "correct"]
    assert mine and [c["index"] for c in mine[-1]["report"]["choices"]] == [0, 1]
