"""A second adversary against the verdict (DESIGN.md "Asymmetric trust", "false alarms cost more
than misses"): inputs not covered by ``test_hostile_verdicts`` / ``test_hostile_inputs``, each a
fault found once and kept.

* a right answer in a locale whose ``.`` groups thousands ("1.500 € + 250 € = 1.750 €") or
  whose ``,`` is the decimal mark ("1,500 × 2 = 3") was ``failed`` and re-asked: one group of
  three digits after one separator reads both ways, so a claim that holds the other way is
  ``unknown``.

The gateway tests drive ``veracity serve`` under the *shipped* policies over the scripted mock
upstream (``tests.fixtures.mock.shipped_policy_gateway``). No network.
"""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from tests.fixtures.mock import shipped_policy_gateway
from verifiers import arithmetic

EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()

# --- the other locale's separators --------------------------------------------------------------
RIGHT_OTHER_LOCALE = {
    "de-euro": "Der Preis: 1.500 € + 250 € = 1.750 €.",
    "de-plain": "Zusammen: 1.200 + 300 = 1.500 Stück.",
    "de-kg": "1.500 kg + 250 kg = 1.750 kg",
    "de-comma": "1,500 × 2 = 3",
    "de-comma-sum": "1,500 + 1 = 2,500",
}
# wrong in both readings, or right in none: still failed
WRONG_BOTH = ["1.000 + 1 = 1.002", "1,000 + 1 = 1,002", "1.500 + 250 = 1.760", "3.142 × 2 = 7.284"]


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []
    for tag, text in RIGHT_OTHER_LOCALE.items():
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]", "schema": "-"}, "reply": {"content": text}})
    # the verifier model plans nothing and finds no claims
    r.append({"name": "plan-none", "match": {"schema": "Plan"},
              "reply": {"content": json.dumps({"verification_needed": False, "verification_steps": []})}})
    r.append({"name": "claims-none", "match": {"schema": "ClaimList"}, "reply": {"content": json.dumps({"claims": []})}})
    return r


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    yield from shipped_policy_gateway(tmp_path_factory, gateway_factory, _rules(), "hostile-trust")


def client(env, policy: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=240,
                         default_headers={"x-veracity-policy": policy})


# ------------------------------------------------------------------ the other locale's separators


@pytest.mark.parametrize("tag", list(RIGHT_OTHER_LOCALE))
def test_a_claim_that_holds_with_the_other_locales_separators_is_never_failed(tag):
    checks = arithmetic.check(RIGHT_OTHER_LOCALE[tag])
    assert checks and not [c for c in checks if c.outcome == "fail"], [(c.claim, c.outcome) for c in checks]
    assert any(c.evidence.get("other_locale") for c in checks)


@pytest.mark.parametrize("text", WRONG_BOTH)
def test_a_claim_wrong_in_both_locales_still_fails(text):
    assert [c.outcome for c in arithmetic.check(text)] == ["fail"]


@pytest.mark.parametrize("policy", ["math", "default"])
@pytest.mark.parametrize("tag", ["de-euro", "de-comma"])
def test_a_right_answer_in_another_locale_is_neither_failed_nor_reasked(env, policy, tag):
    resp = client(env, policy).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": f"[case:{tag}] Rechne es aus."}])
    rep = resp.model_extra["veracity"]
    assert resp.choices[0].message.content == RIGHT_OTHER_LOCALE[tag]        # never rewritten
    assert rep["status"] not in ("failed", "corrected"), rep
    assert not any(EVIDENCE in json.dumps(r.get("body", {})) for r in env["mock"].requests()
                   if r.get("rule") == tag), "a right answer was re-asked"
