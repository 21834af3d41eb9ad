"""What a facts verdict may rest on (docs/design.md "Asymmetric trust"): polarity of passages, grounding
of every sentence, and a verifier model that may add doubt but never narrow or grant a pass.

No network: documents go through ``ContextBackend``; the verifier model is a ``ScriptedModel``
playing the realistic worst case -- a model that obeys whatever the text under check tells it.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifiers.facts import ContextBackend, acheck, judge_passage
from verifiers.facts._compare import confirm_support
from verifiers.facts._grounding import Documents, anchors, fold, missing
from verifiers.facts._polarity import stance_of
from verifiers.model import ScriptedModel
from verifiers.run import status_of

FILLER = (" The report was approved by the board after the external audit had been completed, and it covers "
          "every subsidiary and joint venture of the group, as in every year since the group was formed by the "
          "merger of its founding companies.")


def rag(doc: str) -> list[ContextBackend]:
    return [ContextBackend([{"role": "system", "content": "Answer from the documents below.\n\n" + doc}])]


def at(text: str, part: str) -> tuple[int, int]:
    i = text.index(part)
    return i, i + len(part)


# ----------------------------------------------------------------------------- polarity

CLAIM = "Northwind Traders has 900 engineers in Tokyo"

DENIALS = [
    "Rumours claim Northwind Traders has 900 engineers in Tokyo; this is false.",
    "Rumours claim that Northwind Traders has 900 engineers in Tokyo. That is untrue.",
    "That Northwind Traders has 900 engineers in Tokyo is a common misconception.",
    "A 2019 blog wrongly said Northwind Traders has 900 engineers in Tokyo.",
    "Several outlets falsely reported that Northwind Traders has 900 engineers in Tokyo.",
    "It is not true that Northwind Traders has 900 engineers in Tokyo.",
    "It is a myth that Northwind Traders has 900 engineers in Tokyo.",
    "Reports that Northwind Traders has 900 engineers in Tokyo were denied by the company.",
    "The company denied that Northwind Traders has 900 engineers in Tokyo.",
    "The claim that Northwind Traders has 900 engineers in Tokyo has been debunked.",
]


@pytest.mark.parametrize("passage", DENIALS)
def test_a_passage_that_repeats_a_claim_to_deny_it_refutes_it(passage):
    st_ = stance_of(passage, at(passage, CLAIM), CLAIM)
    assert st_.stance == "denies", st_
    v = judge_passage(CLAIM + ".", passage)
    assert (v.verdict, v.rule) == ("refuted", "denial"), v


@pytest.mark.parametrize("passage,stance", [
    ("The CEO said Northwind Traders has 900 engineers in Tokyo.", "attributes"),
    ("According to a press release, Northwind Traders has 900 engineers in Tokyo.", "attributes"),
    ('Its founder wrote: "Northwind Traders has 900 engineers in Tokyo".', "attributes"),
    ("Northwind Traders reportedly has 900 engineers in Tokyo.", "doubts"),
    ("Rumours claim Northwind Traders has 900 engineers in Tokyo.", "doubts"),
    ("Northwind Traders may have 900 engineers in Tokyo.", "doubts"),
])
def test_doubt_and_attribution_withhold_support_but_never_fail(passage, stance):
    assert stance_of(passage, at(passage, CLAIM.split(" has ")[1]), CLAIM).stance == stance
    v = judge_passage(CLAIM + ".", passage)
    assert v.verdict != "supported" and v.verdict != "refuted", v


@pytest.mark.parametrize("passage", [
    "Northwind Traders has 900 engineers in Tokyo.",
    "Contrary to popular belief, Northwind Traders has 900 engineers in Tokyo.",  # denies the belief, asserts X
])
def test_a_plain_statement_is_support(passage):
    assert judge_passage(CLAIM + ".", passage).verdict == "supported"


def test_a_denial_elsewhere_in_the_sentence_does_not_touch_the_claim():
    # "denied" governs "wrongdoing", and the false rumour is another one: the claim is stated
    for passage in ("Northwind Traders, which denied wrongdoing, has 900 engineers in Tokyo.",
                    "Northwind Traders has 900 engineers in Tokyo, and a rumour about Paris is false."):
        assert stance_of(passage, at(passage, "900 engineers in Tokyo"), CLAIM).stance != "denies"
        assert judge_passage(CLAIM + ".", passage).verdict != "refuted"


def test_a_claim_that_carries_the_marker_itself_is_supported_by_the_same_words():
    c = "Rumours claim that Northwind Traders has 900 engineers in Tokyo."
    assert judge_passage(c, "Rumours claim that Northwind Traders has 900 engineers in Tokyo.").verdict == "supported"
    c2 = "The CEO said Northwind Traders has 900 engineers in Tokyo."
    assert stance_of("The CEO said Northwind Traders has 900 engineers in Tokyo.", at(c2, CLAIM), c2).asserts


ZH_CLAIM = "Northwind在东京有900名工程师"


@pytest.mark.parametrize("passage,stance", [
    ("有传言称Northwind在东京有900名工程师，这是谣言。", "denies"),
    ("Northwind在东京有900名工程师的说法系误传。", "denies"),
    ("公司否认Northwind在东京有900名工程师。", "denies"),
    ("Northwind并非在东京有900名工程师。", "denies"),
    ("Northwind不是在东京有900名工程师。", "denies"),
    ("据称Northwind在东京有900名工程师。", "doubts"),
    ("Northwind可能在东京有900名工程师。", "doubts"),
    ("发言人表示Northwind在东京有900名工程师。", "attributes"),
    ("Northwind在东京有900名工程师。", "asserts"),
    ("Northwind在东京有900名工程师，不是800名。", "asserts"),  # the negation is about 800
])
def test_chinese_markers(passage, stance):
    span = at(passage, ZH_CLAIM) if ZH_CLAIM in passage else (passage.index("Northwind"), passage.index("。"))
    assert stance_of(passage, span, ZH_CLAIM).stance == stance


# ----------------------------------------------------------------------------- grounding

NORTHWIND = "Northwind reported revenue of $4.2 million in 2023." + FILLER


async def test_a_sentence_whose_names_and_numbers_no_document_holds_fails():
    answer = ("Northwind reported revenue of $4.2 million in 2023. Its chief executive, Maria Keller, plans to "
              "open 12 stores in Spain in 2025.")
    out = await acheck(answer, None, backends=rag(NORTHWIND), grounding=True)
    assert [c.outcome for c in out.checks] == ["pass", "fail"]
    bad = out.checks[1]
    assert bad.evidence["rule"] == "ungrounded" and bad.basis == "passage"
    for part in ("Maria Keller", "12", "Spain", "2025"):
        assert part in bad.found
    assert bad.evidence["passages"]  # the closest passage as evidence
    assert status_of(out.checks) == "failed"


async def test_three_errors_three_flags():
    doc = ("Acme Robotics was founded in 2012 in Boston. The company employs 450 people and builds warehouse "
           "robots. Its founder, Dana Whitfield, previously worked at a university lab." + FILLER)
    answer = ("Acme Robotics was founded in 2014 in Boston. Its headquarters are in Chicago, where it builds "
              "warehouse robots. The company employs 600 people.")
    out = await acheck(answer, None, backends=rag(doc), grounding=True)
    assert [c.outcome for c in out.checks] == ["fail", "fail", "fail"], [c.note for c in out.checks]


async def test_every_statement_sentence_is_a_check_and_the_undecided_are_unconfirmed():
    answer = "Northwind reported revenue of $4.2 million in 2023. Customers seem to like the products a lot."
    out = await acheck(answer, None, backends=rag(NORTHWIND), grounding=True)
    assert [c.outcome for c in out.checks] == ["pass", "unknown"]
    assert out.unconfirmed == ["Customers seem to like the products a lot."]
    assert status_of(out.checks) == "unverified"   # one sentence decided is not the answer verified


@pytest.mark.parametrize("doc,answer", [
    ("El Niño brought heavy rain to Peru in 1998.", "El Nino brought heavy rain to Peru in 1998."),
    ("Brits spent more on travel in 2019.", "Britons spent more on travel in 2019."),
    ("The British team won in 2019.", "The UK team won in 2019."),
    ("Sales reached 4,200,000 dollars in 2023.", "Sales reached $4.2 million in 2023."),
    ("Sales reached $4.23 million in 2023.", "Sales reached $4.2 million in 2023."),
    ("The plant opened on 2021-03-05 in Spain.", "The plant opened on March 5, 2021 in Spain."),
    ("The plant opened on 5 March 2021 in Spain.", "The plant opened on 3/5/2021 in Spain."),
    ("The firm opened twelve stores in Spanish cities.", "The firm opened 12 stores in Spain."),
    ("It was the second largest resort in the state.", "It was the 2nd largest resort in the state."),
    ("The United Nations met in Geneva.", "The UN met in Geneva."),
    ("The U.S. economy grew.", "The US economy grew by a small amount."),
    ("The shop opens at 10.30am in Lyon.", "The shop opens at 10:30 a.m. in Lyon."),
    ("The shop closes at 5 pm in Lyon.", "The shop closes at 17:00 in Lyon."),
])
def test_normalisation_finds_what_the_documents_state(doc, answer):
    assert missing(answer, Documents([doc + FILLER])) == []


@pytest.mark.parametrize("doc,answer,absent", [
    ("El Niño brought heavy rain to Peru in 1998.", "La Nina brought heavy rain to Chile in 1998.", {"Chile"}),
    ("Sales reached $4.2 million in 2023.", "Sales reached $5.1 million in 2023.", {"$5.1 million"}),
    ("Sales reached twelve million in 2023.", "Sales reached 14 million in 2024.", {"14 million", "2024"}),
    ("The shop opens at 10.30am in Lyon.", "The shop opens at 11:30 in Lyon.", {"11:30"}),
])
def test_what_no_document_states_is_missing(doc, answer, absent):
    assert {a.text for a in missing(answer, Documents([doc + FILLER]))} >= absent


def test_documents_long_enough_for_the_cases_above():
    assert Documents(["x" + FILLER]).enough


def test_no_documents_no_ungrounded_verdict():
    # a bare question is not a document: nothing is "ungrounded" against it
    assert missing("Paris is the capital of France.", Documents(["What is the capital of France?"])) == []


def test_fold_and_anchors():
    assert fold("El Niño, U.K.") == "el nino, uk "
    assert [a.text for a in anchors("Two friends met XXXX about COVID-19 in 4Q 2020.")] == ["2020"]


# ----------------------------------------------------------------------------- the verifier model


def _model(claims: list[str] | None, verdict: dict | None) -> ScriptedModel:
    rules = []
    if claims is not None:
        rules.append((lambda m, s, p: p == "claims", {"claims": [{"claim": c, "sentence": c} for c in claims]}))
    if verdict is not None:
        rules.append((lambda m, s, p: p.startswith("verdict"), verdict))
    return ScriptedModel(rules)


async def test_a_claim_list_never_removes_a_rule_checked_sentence():
    doc = "Northwind Traders reported revenue of $4.2 million in 2023. Northwind Traders is based in Lyon." + FILLER
    answer = "Northwind Traders reported revenue of $5.1 million in 2023. The company is based in Lyon."
    model = _model(["Northwind Traders is based in Lyon."],
                   {"verdict": "supported", "passages": [1], "quote": "Northwind Traders is based in Lyon",
                    "source_says": "", "confidence": 0.95, "questions": []})
    for grounding in (False, True):
        out = await acheck(answer, None, model=model, backends=rag(doc), grounding=grounding)
        wrong = [c for c in out.checks if "5.1" in c.claim]
        assert wrong and wrong[0].outcome == "fail" and wrong[0].basis == "passage"
        assert status_of(out.checks) == "failed"


TOKYO = ("Northwind Traders has never had an office in Tokyo; the story of 900 engineers there is a rumour."
         + FILLER)


@pytest.mark.parametrize("quote", ["the story of 900 engineers there is a rumour",
                                   "Northwind Traders has never had an office in Tokyo",
                                   "900 engineers"])
async def test_a_supported_verdict_quoting_a_denial_fails(quote):
    answer = "Northwind Traders has 900 engineers in Tokyo."
    model = _model([answer], {"verdict": "supported", "passages": [1], "quote": quote, "source_says": "",
                              "confidence": 0.99, "questions": []})
    out = await acheck(answer, None, model=model, backends=rag(TOKYO))
    assert [c.outcome for c in out.checks] == ["fail"], [c.note for c in out.checks]
    assert out.checks[0].basis == "passage" and out.checks[0].evidence["rule"] == "denial"


async def test_a_supported_verdict_quoting_an_attribution_is_unknown():
    doc = "At the launch the founder said Northwind Traders has 900 engineers in Tokyo." + FILLER
    answer = "Northwind Traders has 900 engineers in Tokyo."
    model = _model([answer], {"verdict": "supported", "passages": [1],
                              "quote": "Northwind Traders has 900 engineers in Tokyo", "source_says": "",
                              "confidence": 0.99, "questions": []})
    out = await acheck(answer, None, model=model, backends=rag(doc))
    [c] = out.checks
    assert c.outcome == "unknown" and c.basis == "model" and "attributes" in c.note


def test_confirm_support_in_chinese():
    passage = "Northwind在东京从未设立办公室。所谓900名工程师的说法是谣言。"
    assert confirm_support("Northwind在东京有900名工程师。", "所谓900名工程师的说法是谣言", passage)[0] == "denies"
    ok = "Northwind在东京有900名工程师。"
    assert confirm_support(ok, "Northwind在东京有900名工程师", ok)[0] == "asserts"


async def test_a_paraphrase_the_rules_confirm_passes_on_the_passage():
    doc = "Its chief executive is Marie Dubois, who joined Northwind Traders in 2019." + FILLER
    answer = "The firm's boss is Marie Dubois."
    model = _model([answer], {"verdict": "supported", "passages": [1], "quote": "Its chief executive is Marie Dubois",
                              "source_says": "", "confidence": 0.9, "questions": []})
    out = await acheck(answer, None, model=model, backends=rag(doc))
    [c] = out.checks
    assert c.outcome == "pass" and c.basis == "passage"


async def test_a_model_that_cannot_answer_json_leaves_decided_claims_alone():
    doc = "Northwind Traders reported revenue of $4.2 million in 2023." + FILLER
    answer = ("Northwind Traders reported revenue of $5.1 million in 2023. Northwind Traders reported revenue of "
              "$4.2 million in 2023. Customers like its tea.")
    model = ScriptedModel([(lambda m, s, p: True, "Sure! The claims look fine to me.")])
    out = await acheck(answer, None, model=model, backends=rag(doc), grounding=True)
    assert [c.outcome for c in out.checks] == ["fail", "pass", "unknown"]
    assert "verifier model" in out.checks[2].note
    assert all(c.outcome != "error" for c in out.checks)


# ----------------------------------------------------------------------------- property

_VERDICTS = st.fixed_dictionaries({
    "verdict": st.sampled_from(["supported", "refuted", "conflicting", "not_enough_info"]),
    "passages": st.lists(st.integers(0, 4), max_size=3),
    "quote": st.sampled_from(["", "Northwind Traders reported revenue of $4.2 million in 2023",
                              "Northwind Traders reported revenue", "$5.1 million", "ignore the passages"]),
    "source_says": st.just(""), "confidence": st.floats(0, 1), "questions": st.just([])})
_CLAIMS = st.lists(st.sampled_from(["Northwind Traders is based in Lyon.", "The company is based in Lyon.",
                                    "Northwind Traders reported revenue of $4.2 million in 2023.",
                                    "Everything in this answer is supported."]), max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(claims=_CLAIMS, verdict=_VERDICTS | st.just("not json at all"), grounding=st.booleans())
def test_whatever_the_model_answers_a_failing_draft_is_never_passed(claims, verdict, grounding):
    doc = "Northwind Traders reported revenue of $4.2 million in 2023. Northwind Traders is based in Lyon." + FILLER
    answer = "Northwind Traders reported revenue of $5.1 million in 2023. The company is based in Lyon."
    rules = [(lambda m, s, p: p == "claims", {"claims": [{"claim": c, "sentence": c} for c in claims]}),
             (lambda m, s, p: True, verdict)]
    out = asyncio.run(acheck(answer, None, model=ScriptedModel(rules), backends=rag(doc), grounding=grounding))
    assert status_of(out.checks) == "failed"


async def test_the_correction_prompt_names_what_no_document_holds():
    from verifiers.facts import sources_prompt

    answer = ("Northwind reported revenue of $5.1 million in 2023. Its chief executive, Maria Keller, plans to "
              "open 12 stores in Spain in 2025.")
    out = await acheck(answer, None, backends=rag(NORTHWIND), grounding=True)
    prompt = sources_prompt(out.checks, out.sources)
    assert "contradicted by the sources" in prompt and "$4.2 million" in prompt
    assert "none of the documents contains" in prompt and "Maria Keller" in prompt


async def test_a_model_claim_cannot_invent_what_fails_as_ungrounded():
    # the model "resolves" a name the answer never wrote: only the answer's own anchors may be missing
    answer = "Northwind reported revenue of $4.2 million in 2023. Its founder opened the first shop."
    model = _model(["Northwind's founder Hans Gruber opened the first shop."], None)
    out = await acheck(answer, None, model=model, backends=rag(NORTHWIND), grounding=True)
    assert any(c.origin == "model" and "Hans Gruber" in c.text for c in out.claims)  # it was checked
    assert not [c for c in out.checks if c.outcome == "fail"], [(c.claim, c.note) for c in out.checks]
