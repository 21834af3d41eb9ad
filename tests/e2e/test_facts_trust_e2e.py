"""End to end under the *shipped* ``rag`` policy (policies/rag.yaml): the real ``openai`` SDK ->
Veracity (``veracity serve``) -> the scripted mock upstream, which plays both the client's model
and an obedient verifier model (answers by JSON schema name: ``ClaimList``, ``VerdictAnswer``).

docs/design.md "Asymmetric trust": a passage that repeats a claim to deny it fails the claim; a claim
list from the verifier model never removes a sentence the rules check; a ``supported`` verdict
quoting a denial never passes; under grounding a sentence whose names and numbers no document
holds fails. None of these answers may come back ``passed`` or ``corrected``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from proxy.upstreams.mock import MockUpstream

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()
FILLER = ("\n\nThe annual report was approved by the board after the external audit had been completed. It covers "
          "every subsidiary and joint venture of the group, as in every year since its founding companies merged.")

CASES: dict[str, dict[str, Any]] = {
    # 1. polarity, no model verdict needed: the document repeats the claim to deny it
    "deny-en": {"doc": "Rumours claim Northwind Traders has 900 software engineers in Tokyo; this is false.",
                "answer": "Northwind Traders has 900 software engineers in Tokyo."},
    "deny-misconception": {"doc": "That Northwind Traders has 900 software engineers in Tokyo is a common misconception.",
                           "answer": "Northwind Traders has 900 software engineers in Tokyo."},
    "deny-blog": {"doc": "A 2019 blog wrongly said Northwind Traders has 900 software engineers in Tokyo.",
                  "answer": "Northwind Traders has 900 software engineers in Tokyo."},
    # 3. the model's claim list leaves out the false sentence
    "narrow": {"doc": "Northwind Traders reported revenue of $4.2 million in 2023. Northwind Traders is based in Lyon.",
               "answer": "Northwind Traders reported revenue of $5.1 million in 2023. The company is based in Lyon.",
               "claims": ["Northwind Traders is based in Lyon."],
               "verdict": {"verdict": "supported", "passages": [1], "quote": "Northwind Traders is based in Lyon",
                           "source_says": "", "confidence": 0.97, "questions": []}},
    # 4. a supported verdict quoting a passage that denies the claim (English and Chinese)
    "tokyo": {"doc": "Northwind Traders has never had an office in Tokyo; the story of 900 engineers there is a rumour.",
              "answer": "Northwind Traders employs 900 engineers in Tokyo.",
              "claims": ["Northwind Traders employs 900 engineers in Tokyo."],
              "verdict": {"verdict": "supported", "passages": [1, 2, 3],
                          "quote": "the story of 900 engineers there is a rumour", "source_says": "",
                          "confidence": 0.99, "questions": []}},
    "tokyo-zh": {"question": "东京办公室的情况如何？", "doc": "Northwind在东京从未设立办公室。所谓Northwind在东京有900名工程师的说法是谣言。",
                 "answer": "Northwind在东京有900名工程师。",
                 "claims": ["Northwind在东京有900名工程师。"],
                 "verdict": {"verdict": "supported", "passages": [1, 2, 3],
                             "quote": "所谓Northwind在东京有900名工程师的说法是谣言", "source_says": "",
                             "confidence": 0.99, "questions": []}},
    # 2. grounding reads every sentence
    "plans": {"doc": "Northwind reported revenue of $4.2 million in 2023.",
               "answer": "Northwind reported revenue of $4.2 million in 2023. Its chief executive, Maria Keller, "
                         "plans to open 12 stores in Spain in 2025."},
}


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []
    for tag, case in CASES.items():
        claims = case.get("claims", [])
        # the verifier model: its claim list and its verdict, whatever the text says
        r.append({"name": f"{tag}-claims", "match": {"schema": "ClaimList", "any_message": rf"\[case:{tag}\]"},
                  "reply": {"content": json.dumps({"claims": [{"claim": c, "sentence": c} for c in claims]})}})
        verdict = case.get("verdict", {"verdict": "not_enough_info", "passages": [], "quote": "", "source_says": "",
                                       "confidence": 0.3, "questions": []})
        anchor = case["doc"][:40]
        r.append({"name": f"{tag}-verdict", "match": {"schema": "VerdictAnswer", "any_message": _rx(anchor)},
                  "reply": {"content": json.dumps(verdict)}})
    r.append({"name": "verdict-other", "match": {"schema": "[A-Z]*"},
              "reply": {"content": json.dumps({"verdict": "not_enough_info", "passages": [], "quote": "",
                                               "source_says": "", "confidence": 0.3, "questions": []})}})
    for tag, case in CASES.items():
        # the client's model: the re-ask repeats the draft (a model that will not correct itself)
        r.append({"name": f"{tag}-reask", "match": {"any_message": rf"\[case:{tag}\]", "last_user": EVIDENCE},
                  "reply": {"content": case["answer"]}})
        r.append({"name": tag, "match": {"last_user": rf"\[case:{tag}\]"}, "reply": {"content": case["answer"]}})
    return r


def _rx(text: str) -> str:
    import re

    return re.escape(text)


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("facts-trust-e2e")
    pdir = tmp / "policies"
    pdir.mkdir()
    (pdir / "rag.yaml").write_text((ROOT / "policies" / "rag.yaml").read_text())  # the shipped policy, unchanged
    mock = MockUpstream({"rules": _rules(), "models": ["gpt-test"]}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "mock": mock}
    mock.stop()


def ask(env, tag: str) -> tuple[str, dict[str, Any]]:
    c = openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=120,
                      default_headers={"x-veracity-policy": "rag"})
    system = "Answer from the documents below.\n\n<documents>\n" + CASES[tag]["doc"] + FILLER + "\n</documents>"
    resp = c.chat.completions.create(model="gpt-test", messages=[
        {"role": "system", "content": system}, {"role": "user", "content": f"[case:{tag}] " + CASES[tag].get("question", "Tell me about Northwind.")}])
    return resp.choices[0].message.content, resp.model_extra["veracity"]


def _facts(rep: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in rep["checks"] + rep.get("corrected_checks", []) if c["verifier"] == "facts"]


@pytest.mark.parametrize("tag", ["deny-en", "deny-misconception", "deny-blog"])
def test_a_document_that_denies_the_claim_fails_it(env, tag):
    _, rep = ask(env, tag)
    assert rep["status"] == "failed", rep
    bad = [c for c in _facts(rep) if c["outcome"] == "fail"]
    assert bad and bad[0]["basis"] == "passage" and bad[0]["evidence"]["rule"] == "denial", bad
    assert "900 software engineers" in bad[0]["evidence"]["passages"][0]["text"]


def test_a_claim_list_that_leaves_out_the_false_sentence_still_fails_it(env):
    _, rep = ask(env, "narrow")
    assert rep["status"] == "failed", rep
    bad = [c for c in _facts(rep) if c["outcome"] == "fail"]
    assert any("5.1 million" in c["claim"] for c in bad), rep
    # the model's own claim was checked too (it adds, never narrows)
    assert any(c["claim"] == "Northwind Traders is based in Lyon." for c in _facts(rep))
    assert any(r.get("rule") == "narrow-claims" for r in env["mock"].requests())


@pytest.mark.parametrize("tag", ["tokyo", "tokyo-zh"])
def test_a_supported_verdict_quoting_a_denial_never_passes(env, tag):
    _, rep = ask(env, tag)
    assert rep["status"] not in ("passed", "corrected"), rep
    assert any(r.get("rule") == f"{tag}-verdict" for r in env["mock"].requests())  # the model did say supported
    assert not [c for c in _facts(rep) if c["outcome"] == "pass"], rep
    bad = [c for c in _facts(rep) if c["outcome"] == "fail"]
    assert bad and bad[0]["evidence"]["rule"] == "denial" and bad[0]["basis"] == "passage", rep


def test_grounding_reads_every_sentence(env):
    _, rep = ask(env, "plans")
    assert rep["status"] == "failed", rep
    fc = [c for c in rep["checks"] if c["verifier"] == "facts"]
    assert [c["outcome"] for c in fc] == ["pass", "fail"], rep
    assert fc[1]["evidence"]["rule"] == "ungrounded" and "Maria Keller" in fc[1]["found"]
