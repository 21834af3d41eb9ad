"""End to end (real ``openai`` SDK -> ``veracity serve`` -> scripted upstream and scripted,
*offline* bibliographic APIs): ``passed`` means something was verified (docs/design.md "report"), and an
answer longer than what the verifiers read says so (nothing is silently unverified).

Every bibliographic source (Crossref, OpenAlex, arXiv, Semantic Scholar, DBLP) and Wikipedia
answer 503 from one loopback :class:`~tests.fixtures.citations.fakes.FakeAPI`, so every
reference check is ``unknown``: the answer is ``unverified`` -- never ``passed`` -- in the
report, the ``x-veracity-status`` header, streams, ``n > 1`` choices, with the sentinel, and in
``veracity_reports_total``; the shipped ``research`` policy blocks it (``on_unverified: block``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import openai
import pytest
import yaml

from proxy.upstreams.mock import MockUpstream
from tests.fixtures.citations.fakes import FakeAPI, status

ROOT = Path(__file__).resolve().parents[2]

INVENTED = """Here is a reference on the topic:

References
1. Smith, J., & Lee, K. (2019). Quantum Gradient Transformers for Protein Folding Dynamics. Journal of Machine Learning Research, 20(4), 1-25.
"""
RIGHT_SUM = "17 * 23 = 391."
#: a hallucinated factual answer whose one equation is right (the tower was completed in 1889)
EIFFEL = "The Eiffel Tower was completed in 1887 by Gustave Eiffel. Each third is 300 / 3 = 100 metres tall."
#: a wrong claim past the arithmetic verifier's 60,000 characters (verifiers.arithmetic.MAX_CHARS)
LATE_WRONG = "Lorem ipsum dolor sit amet. " * 2200 + "\n\n3 * 4 = 13."


def _rules() -> list[dict[str, Any]]:
    return [
        {"name": "ref", "match": {"any_message": r"\[case:ref\]"}, "reply": {"content": INVENTED}},
        {"name": "mixed", "match": {"any_message": r"\[case:mixed\]"},
         "reply": {"choices": [{"content": RIGHT_SUM}, {"content": INVENTED}]}},
        {"name": "late", "match": {"any_message": r"\[case:late\]"}, "reply": {"content": LATE_WRONG}},
        {"name": "eiffel", "match": {"any_message": r"\[case:eiffel\]"}, "reply": {"content": EIFFEL}},
        # sentinel: the model checks itself (ready), then answers with the invented reference
        {"name": "sentinel-final", "match": {"any_message": r"\[case:sentinel\]", "last_role": "tool"},
         "reply": {"content": INVENTED}},
        {"name": "sentinel-check", "match": {"last_user": r"\[case:sentinel\]", "tool": "verify_result"},
         "reply": {"content": INVENTED, "tool_calls": [{"id": "call_vr1", "name": "verify_result", "arguments": {
             "task_goal": "a reference", "actual_result": "one reference", "missing_items": [],
             "errors_found": [], "is_ready": True}}]}},
    ]


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("unverified")
    offline = FakeAPI()
    offline.routes["/*"] = status(503, "Service Unavailable")
    offline.__enter__()
    base = offline.url
    sources = {"use": ["crossref", "openalex", "arxiv", "semantic_scholar", "dblp"], "cache": {"backend": "none"},
               **{name: {"base_url": base, "retries": 0, "timeout": 2, "rate_per_sec": 1000}
                  for name in ("crossref", "openalex", "arxiv", "semantic_scholar", "dblp")}}
    pdir = tmp / "policies"
    pdir.mkdir()
    # the shipped research policy, with only where its sources live changed
    research = yaml.safe_load((ROOT / "policies" / "research.yaml").read_text())
    research["verifiers"]["citations"]["sources"] = sources
    research["verifiers"]["facts"]["backends"] = {"use": ["context", "wikipedia"],
                                                  "wikipedia": {"url": base + "/w/api.php", "retries": 0}}
    (pdir / "research.yaml").write_text(yaml.safe_dump(research))
    (pdir / "default.yaml").write_text((ROOT / "policies" / "default.yaml").read_text())  # as shipped
    plain = {"name": "plain", "on_failure": "annotate", "risk": {"threshold": 0.1},
             "verifiers": {"code": {"enabled": False}, "planner": {"enabled": False},
                           "citations": {"enabled": True, "sources": sources}},
             "overridable": ["streaming.mode", "on_unverified"]}
    (pdir / "plain.yaml").write_text(yaml.safe_dump(plain))
    sent = dict(plain, name="sentinel", sentinel={"mode": "offered", "when": "always", "max_rounds": 2})
    (pdir / "sentinel.yaml").write_text(yaml.safe_dump(sent))
    mock = MockUpstream({"rules": _rules(), "models": ["gpt-test"]}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock, "offline": offline}
    mock.stop()
    offline.__exit__(None, None, None)


def client(env, policy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test-unverified", max_retries=0, timeout=120,
                         default_headers={"x-veracity-policy": policy})


def ask(env, policy: str, question: str, **kw):
    raw = client(env, policy).chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": question}], **kw)
    resp = raw.parse()
    return raw.headers, resp, resp.model_extra["veracity"]


def _citations(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rep["checks"] if c["verifier"] == "citations"]


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


# ------------------------------------------------------- `passed` means something was verified


def test_research_blocks_an_invented_reference_when_every_source_is_offline(env):
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        ask(env, "research", "[case:ref] Give me a reference on transformers for protein folding.")
    err = ei.value.body
    assert err["type"] == "veracity_blocked" and err["code"] == "verification_unverified"
    assert "nothing in it could be verified" in err["message"]
    rep = err["veracity"]
    assert rep["status"] == "unverified" and rep["policy"] == "research"
    cites = _citations(rep)
    assert cites and all(c["outcome"] == "unknown" for c in cites)
    assert not [c for c in rep["checks"] if c["outcome"] in ("pass", "fail")]
    assert ei.value.response.headers["x-veracity-status"] == "unverified"
    # the sources were asked (and answered 503), not skipped (`_hits`: `hits` would wait for the
    # gateway's idle keep-alive connections to close)
    assert {h["path"].split("/")[1] for h in env["offline"]._hits} >= {"works"}


def test_research_stream_is_held_and_blocked_too(env):
    stream = client(env, "research").chat.completions.create(
        model="gpt-test", stream=True,
        messages=[{"role": "user", "content": "[case:ref] Give me a reference, streamed."}])
    text = ""
    with pytest.raises(openai.APIError) as ei:
        for chunk in stream:
            for ch in chunk.choices:
                text += ch.delta.content or ""
    assert "Quantum Gradient" not in text  # nothing of the blocked answer was relayed
    assert "Veracity blocked the answer" in str(ei.value)
    assert (ei.value.body or {}).get("code") == "verification_unverified"


def test_annotate_returns_unverified_never_passed(env):
    headers, resp, rep = ask(env, "plain", "[case:ref] Give me a reference.")
    assert resp.choices[0].message.content == INVENTED
    assert rep["status"] == "unverified" and headers["x-veracity-status"] == "unverified"
    assert _citations(rep) and all(c["outcome"] == "unknown" for c in _citations(rep))
    # a client of a policy that lists on_unverified in `overridable` may ask for the block
    with pytest.raises(openai.UnprocessableEntityError) as ei:
        ask(env, "plain", "[case:ref] Give me a reference.", extra_body={"veracity": {"on_unverified": "block"}})
    assert ei.value.body["code"] == "verification_unverified"


def test_passthrough_stream_reports_unverified_and_says_it_could_not_block(env):
    stream = client(env, "plain").chat.completions.create(
        model="gpt-test", stream=True, messages=[{"role": "user", "content": "[case:ref] A reference, live."}],
        extra_body={"veracity": {"on_unverified": "block"}})
    text, reports = "", []
    for chunk in stream:
        if "veracity" in (chunk.model_extra or {}):
            reports.append(chunk.model_extra["veracity"])
        for ch in chunk.choices:
            text += ch.delta.content or ""
    assert text == INVENTED and len(reports) == 1
    assert reports[0]["status"] == "unverified"
    assert "cannot withhold" in reports[0]["reason"]


def test_several_choices_each_unverified_choice_is_withheld(env):
    headers, resp, rep = ask(env, "plain", "[case:mixed] 17*23, and a reference?", n=2,
                             extra_body={"veracity": {"on_unverified": "block"}})
    assert headers["x-veracity-status"] == "unverified"
    by_index = {c.index: c for c in resp.choices}
    assert by_index[0].message.content == RIGHT_SUM
    assert by_index[1].message.content is None and by_index[1].finish_reason == "content_filter"
    assert "nothing in it could be verified" in by_index[1].message.refusal
    entries = {e["index"]: e for e in rep["choices"]}
    assert entries[0]["status"] == "passed" and entries[1]["status"] == "unverified" and entries[1]["blocked"]


def test_sentinel_ready_is_no_verification(env):
    q = "[case:sentinel] Please answer both:\n1. Name a reference.\n2. Give its year."
    headers, resp, rep = ask(env, "sentinel", q)
    assert rep["sentinel"]["injected"] and rep["sentinel"]["called"]
    assert rep["status"] == "unverified" and headers["x-veracity-status"] == "unverified"


def test_reports_total_counts_unverified_by_status(env):
    before = _metric(env["gw"].metrics(), "veracity_reports_total", status="unverified")
    ask(env, "plain", "[case:ref] One more reference.")
    text = env["gw"].metrics()
    assert _metric(text, "veracity_reports_total", status="unverified") == before + 1
    assert re.search(r'veracity_reports_total\{model="gpt-test",status="unverified",team="[^"]+"\}', text) or \
        re.search(r'veracity_reports_total\{[^}]*status="unverified"', text)


# ----------------------------------------------------------- nothing is silently unverified


def test_wrong_claim_past_the_arithmetic_limit_is_unverified_not_skipped(env):
    before = _metric(env["gw"].metrics(), "veracity_truncated_verifications_total", verifier="arithmetic")
    headers, resp, rep = ask(env, "plain", "[case:late] Tell me a long story.")
    assert rep["status"] == "unverified" and headers["x-veracity-status"] == "unverified"
    cut = [c for c in rep["checks"] if c["evidence"].get("kind") == "truncated"]
    assert [(c["verifier"], c["outcome"], c["evidence"]["limit"]) for c in cut] == [("arithmetic", "unknown", "MAX_CHARS")]
    assert cut[0]["evidence"]["checked"] == 60_000 and cut[0]["evidence"]["total"] == len(LATE_WRONG)
    assert "60,000" in cut[0]["note"]
    after = _metric(env["gw"].metrics(), "veracity_truncated_verifications_total", verifier="arithmetic")
    assert after == before + 1
    assert json.dumps(rep)  # the report stays JSON


def test_an_arithmetic_pass_does_not_make_a_hallucinated_factual_answer_passed(env):
    # the shipped default policy checks arithmetic, not facts: the world claim is an undecided
    # unit (verifiers/facts/_unchecked.py), so the answer is unverified, not passed
    headers, resp, rep = ask(env, "default", "[case:eiffel] How tall is each third of the Eiffel Tower?")
    assert resp.choices[0].message.content == EIFFEL
    assert [c["outcome"] for c in rep["checks"] if c["verifier"] == "arithmetic"] == ["pass"]
    facts = [c for c in rep["checks"] if c["verifier"] == "facts"]
    assert [c["evidence"]["kind"] for c in facts] == ["not_checked"] and "1887" in facts[0]["claim"]
    assert rep["status"] == "unverified" == headers["x-veracity-status"]
    assert headers["x-veracity-coverage"] == "1/2"
    assert (rep["coverage"]["units"], rep["coverage"]["decided"]) == (2, 1)
