"""End to end, facts and grounding (docs/facts.md): the real ``openai`` SDK -> Veracity (``veracity
serve`` subprocess) -> the scripted mock upstream (the client's model and, by the JSON schema
names ``ClaimList`` / ``QueryList`` / ``VerdictAnswer``, the verifier model), with a scripted
SearXNG on 127.0.0.1 for the web backend.

A RAG-style request carries its documents in the system message: an answer that contradicts a
number there is caught without any model call and corrected with a ``[n]`` citation; a
supported answer passes; an unconfirmable one is ``unknown`` and, with the policy option, says
so in a templated note. A search backend that answers 429 or times out never turns into a
verdict, and no URL from the model's text is ever fetched.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

import openai
import pytest
import yaml

from proxy.upstreams.mock import MockUpstream
from tests.fixtures.policies import rag_policy as _policy
from tests.fixtures.search_servers import FakeAPI, searxng_ok, slow, status

EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()

DOC = ("Northwind Traders annual report 2023.\n\n"
       "Northwind Traders reported revenue of $4.2 million in 2023. Revenue in 2022 had been $3.9 million. "
       "Northwind Traders employs 85 people at its headquarters in Lyon, France. Its chief executive is "
       "Marie Dubois, who joined the company in 2019.")
SYSTEM = "Answer from the documents below.\n\n<documents>\n" + DOC + "\n</documents>"

WRONG = "Northwind Traders reported revenue of $5.1 million in 2023."
FIXED = "Northwind Traders reported revenue of $4.2 million in 2023 [1]."
SUPPORTED = "Northwind Traders employs 85 people at its headquarters in Lyon."
UNCONFIRMED = "Northwind Traders will open an office in Berlin in 2025 with 40 new staff."
PARAPHRASE = "The firm's boss is Marie Dubois, according to the report."
WEB_ANSWER = "The Eiffel Tower was completed in 1889 and is 330 metres tall, according to its operator."


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []
    # the verifier model (by schema name): claims, then a verdict quoting the document
    r.append({"name": "claims-paraphrase", "match": {"schema": "ClaimList", "any_message": "firm's boss"},
              "reply": {"content": json.dumps({"claims": [{"claim": "The chief executive of Northwind Traders is "
                                                                     "Marie Dubois.", "sentence": PARAPHRASE}]})}})
    r.append({"name": "verdict-paraphrase", "match": {"schema": "VerdictAnswer", "any_message": "Marie Dubois"},
              "reply": {"content": json.dumps({"verdict": "supported", "passages": [1],
                                               "quote": "Its chief executive is Marie Dubois",
                                               "source_says": "Marie Dubois is the chief executive",
                                               "confidence": 0.9, "questions": []})}})
    r.append({"name": "model-other", "match": {"schema": "[A-Z]*"},
              "reply": {"content": json.dumps({"verdict": "not_enough_info", "passages": [], "quote": "",
                                               "source_says": "", "confidence": 0.3, "questions": []})}})
    # the client's model
    r.append({"name": "rag-fix-fixed", "match": {"any_message": r"\[case:rag-fix\]", "last_user": EVIDENCE},
              "reply": {"content": FIXED}})
    for tag, answer in (("rag-fix", WRONG), ("rag-ok", SUPPORTED), ("rag-unknown", UNCONFIRMED),
                        ("rag-model", PARAPHRASE), ("web", WEB_ANSWER)):
        r.append({"name": tag, "match": {"last_user": rf"\[case:{tag}\]"}, "reply": {"content": answer}})
    r.append({"name": "url", "match": {"last_user": r"\[case:url\]"}, "reply": {"content": "{URL_ANSWER}"}})
    return r


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("facts-e2e")
    # a listener standing for a URL in the model's text: nothing may ever connect to it
    trap = socket.socket()
    trap.bind(("127.0.0.1", 0))
    trap.listen(8)
    trap.settimeout(0.2)
    accepted: list[Any] = []

    def watch() -> None:
        while True:
            try:
                conn, _ = trap.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=watch, daemon=True).start()
    url_answer = (f"According to http://127.0.0.1:{trap.getsockname()[1]}/report.html Northwind Traders "
                  "reported revenue of $4.2 million in 2023.")
    rules = json.loads(json.dumps(_rules()).replace("{URL_ANSWER}", url_answer))

    web_429, web_slow = FakeAPI().__enter__(), FakeAPI().__enter__()
    web_429.routes["/search"] = status(429, "Too Many Requests", headers={"Retry-After": "1"})
    web_slow.routes["/search"] = slow(5.0, searxng_ok())
    pdir = tmp / "policies"
    pdir.mkdir()
    policies = [
        _policy("rag", {}),
        _policy("rag-model", {"use_model": True}),
        # the verdict cache off: the same claim was judged (and cached) by the rag-model test
        _policy("rag-nobudget", {"use_model": True, "cache": "off"}, budgets={"request": {"extra_calls": 1}}),
        _policy("web-429", {"backends": {"use": ["searxng"], "searxng": {"url": web_429.url + "/search"}}}),
        _policy("web-slow", {"backends": {"use": ["searxng"], "timeout_s": 0.5,
                                          "searxng": {"url": web_slow.url + "/search"}}}),
    ]
    for doc in policies:
        (pdir / f"{doc['name']}.yaml").write_text(yaml.safe_dump(doc))
    mock = MockUpstream({"rules": rules, "models": ["gpt-test"]}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock, "accepted": accepted, "web_429": web_429, "web_slow": web_slow}
    mock.stop()
    trap.close()
    web_429.__exit__(None, None, None)
    web_slow.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _reset(env):
    env["mock"].reset()


def ask(env, policy: str, tag: str, question: str, *, documents: bool = True):
    c = openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=120,
                      default_headers={"x-veracity-policy": policy})
    messages = ([{"role": "system", "content": SYSTEM}] if documents else []) + \
        [{"role": "user", "content": f"[case:{tag}] {question}"}]
    resp = c.chat.completions.create(model="gpt-test", messages=messages)
    return resp.choices[0].message.content, resp.model_extra["veracity"]


def facts_checks(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rep["checks"] if c["verifier"] == "facts"]


def test_answer_contradicting_the_documents_is_corrected_with_a_numbered_source(env):
    text, rep = ask(env, "rag", "rag-fix", "What was Northwind Traders' revenue in 2023?")
    assert text == FIXED
    assert rep["status"] == "corrected", rep
    wrong = [c for c in rep["corrected_checks"] if c["verifier"] == "facts"]
    assert wrong and wrong[0]["outcome"] == "fail" and "5.1" in wrong[0]["claim"]
    # the re-ask carried the contradicting passage as source [1] and asked for [n] citations
    fix = [r["body"] for r in env["mock"].requests() if r.get("rule") == "rag-fix-fixed"]
    assert len(fix) == 1
    prompt = fix[0]["messages"][-1]["content"]
    assert "[1]" in prompt and "4.2 million" in prompt and "5.1 million" in prompt
    # the final report: the corrected claim is supported by the document, numbered in `sources`
    assert [c["outcome"] for c in facts_checks(rep)] == ["pass"]
    assert rep["sources"] and rep["sources"][0]["n"] == 1
    assert str(rep["sources"][0]["doc_id"]).startswith("context:")
    assert rep["cost"]["verifier_calls"] == 0            # the deterministic tier needs no model


def test_answer_supported_by_the_documents_passes(env):
    text, rep = ask(env, "rag", "rag-ok", "How many people work at Northwind and where?")
    assert text == SUPPORTED
    assert rep["status"] == "passed", rep
    assert [c["outcome"] for c in facts_checks(rep)] == ["pass"]
    assert not [r for r in env["mock"].requests() if str(r.get("rule")).endswith("-fixed")]


def test_unconfirmable_claim_is_unknown_and_said_so_in_a_templated_note(env):
    text, rep = ask(env, "rag", "rag-unknown", "What are Northwind's plans?")
    assert text.startswith(UNCONFIRMED)
    assert "Could not be confirmed from the available sources" in text and "Berlin" in text[len(UNCONFIRMED):]
    assert rep["status"] == "unverified", rep
    assert facts_checks(rep) and all(c["outcome"] == "unknown" for c in facts_checks(rep))
    assert rep["unconfirmed"]


def test_model_judges_what_the_rules_cannot_and_quotes_the_document(env):
    text, rep = ask(env, "rag-model", "rag-model", "Who runs Northwind?")
    fc = facts_checks(rep)
    # the model's resolved claim: its "supported" stands because the rules find every element of
    # the claim in the quoted passage (Marie Dubois, chief executive; "Its" the subject named
    # before). The answer's own sentence adds an attribution and a word the quote lacks
    # ("according to the report", "boss"): the model's "supported" cannot pass it (docs/design.md
    # "Asymmetric trust": a verifier model may raise doubt, never grant a pass), so it stays
    # unknown, said in the note.
    assert [c["outcome"] for c in fc] == ["unknown", "pass"], rep
    assert fc[0]["claim"] == PARAPHRASE and fc[1]["basis"] == "passage"
    assert rep["status"] == "unverified"
    assert text.startswith(PARAPHRASE) and "Could not be confirmed from the available sources" in text[len(PARAPHRASE):]
    purposes = [c["purpose"] for c in rep["verifier_model"]["calls"]]
    assert "claims" in purposes and "verdict" in purposes
    assert rep["cost"]["verifier_calls"] == len(purposes)
    hits = [r["body"] for r in env["mock"].requests() if r.get("rule") == "verdict-paraphrase"]
    assert hits and hits[0]["response_format"]["json_schema"]["name"] == "VerdictAnswer"


def test_budget_stops_the_facts_loop_and_the_claim_stays_unknown(env):
    text, rep = ask(env, "rag-nobudget", "rag-model", "Who runs Northwind?")
    assert text.startswith(PARAPHRASE)
    fc = facts_checks(rep)
    assert fc and all(c["outcome"] == "unknown" for c in fc), rep
    assert rep["status"] not in ("passed", "failed")
    outcomes = [c["outcome"] for c in rep["verifier_model"]["calls"]]
    assert "unavailable" in outcomes and outcomes.count("ok") <= 1


@pytest.mark.parametrize("policy,server", [("web-429", "web_429"), ("web-slow", "web_slow")])
def test_a_search_backend_that_fails_never_becomes_a_verdict(env, policy, server):
    text, rep = ask(env, policy, "web", "Tell me about the Eiffel Tower.", documents=False)
    assert text.startswith(WEB_ANSWER)
    fc = facts_checks(rep)
    assert fc and all(c["outcome"] == "unknown" for c in fc), rep
    assert rep["status"] not in ("failed", "corrected", "passed")
    assert env[server].hits and all(h["path"] == "/search" for h in env[server].hits)


def test_no_url_from_the_model_text_is_fetched(env):
    text, rep = ask(env, "rag", "url", "What was Northwind Traders' revenue in 2023?")
    assert "http://127.0.0.1:" in text
    assert facts_checks(rep)
    assert env["accepted"] == []


def test_the_unconfirmed_note_never_breaks_structured_output(env):
    """A JSON-mode answer is parsed by the client: the templated note is not appended to it
    (the claims are still reported in ``unconfirmed``)."""
    c = openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=120,
                      default_headers={"x-veracity-policy": "rag"})
    resp = c.chat.completions.create(
        model="gpt-test", response_format={"type": "json_object"},
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": "[case:rag-unknown] What are Northwind's plans? Answer in JSON."}])
    rep = resp.model_extra["veracity"]
    assert resp.choices[0].message.content == UNCONFIRMED
    assert rep["unconfirmed"] and rep["unconfirmed_note_not_appended"] == "response_format json_object"
