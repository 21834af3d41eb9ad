"""World claims no enabled verifier checks keep an answer from `passed` (docs/design.md "report":
`passed` means every check-worthy unit found was decided; verifiers/facts/_unchecked.py)."""

from __future__ import annotations

import pytest

from verifiers.facts._unchecked import MAX_UNCHECKED, unchecked_claims
from verifiers.run import averify

HALLUCINATED = ("The Eiffel Tower was completed in 1887 by Gustave Eiffel. "
                "It is 300 metres tall, so each third is 300 / 3 = 100 metres.")


async def test_an_arithmetic_pass_does_not_make_a_factual_answer_passed():
    rep = await averify(HALLUCINATED, {"question": "How tall is each third of the tower?", "force": True,
                                       "verifiers": ["arithmetic"]})
    arith = [c for c in rep.checks if c.verifier == "arithmetic"]
    assert [c.outcome for c in arith] == ["pass"]
    facts = [c for c in rep.checks if c.verifier == "facts"]
    assert [c.evidence["kind"] for c in facts] == ["not_checked"]
    assert "1887" in facts[0].claim and facts[0].outcome == "unknown"
    assert rep.status == "unverified"
    assert rep.coverage["by_verifier"]["facts"]["unknown"] == 1


@pytest.mark.parametrize("answer", [
    # a word problem's solution: its names come from the question
    "Natalia sold 48/2 = 24 clips in May.\nIn April, Natalia sold 48 clips.\nShe sold 48 + 24 = 72 clips.",
    # a name without a specific detail, or a detail without a name: not a world claim
    "Paris is lovely. 12 * 3 = 36.",
    "The total is 12 * 3 = 36 apples, bought on 3 March.",
])
def test_sentences_that_state_no_new_named_detail_are_not_units(answer):
    q = "Natalia sold clips to 48 of her friends in April, and half as many in May. How many in total?"
    assert unchecked_claims(answer, q, []) == []


def test_sentences_inside_a_decided_check_are_not_read_again():
    text = "In 1889 Gustave Eiffel finished the tower."
    assert unchecked_claims(text, None, [(0, len(text))]) == []
    assert len(unchecked_claims(text, None, [])) == 1


@pytest.mark.parametrize("answer", [
    "Step 1: First, we find the 24 clips.",       # single capitalised words of a solution
    "Therefore, Total Cost is 24 dollars = 2 * 12.",  # worked arithmetic: the arithmetic verifier's
    "France has 68 million people.",              # names and details both from the question
])
def test_what_is_not_a_world_claim(answer):
    assert unchecked_claims(answer, "How many people does France, with 68 million people, have?", []) == []


def test_a_single_word_name_counts_when_the_question_names_it():
    got = unchecked_claims("France has 71 million people.", "What is the population of France?", [])
    assert [c.evidence["names"] for c in got] == [["France"]]


def test_names_are_matched_to_the_question_after_normalising():
    # accents and a surname alone count as the question's name (verifiers/facts/_grounding.py)
    q = "How old was José Martínez in 2020 if he was born in 1990?"
    assert unchecked_claims("Jose Martinez was 2020 - 1990 = 30 years old in 2020.", q, []) == []
    assert unchecked_claims("Martínez was born in 1990.", q, []) == []


def test_at_most_max_unchecked_checks():
    text = " ".join(f"Acme {chr(65 + i)}ero Holdings earned {i + 10} million dollars." for i in range(20))
    got = unchecked_claims(text, None, [])
    assert len(got) == MAX_UNCHECKED and all(c.outcome == "unknown" for c in got)


async def test_a_long_answer_is_read_for_world_claims_too():
    # past ARITHMETIC_INLINE_MAX_CHARS the reading runs in a worker thread: same verdict
    from verifiers.run import ARITHMETIC_INLINE_MAX_CHARS
    filler = "The steps below follow from the question. " * (ARITHMETIC_INLINE_MAX_CHARS // 40)
    text = filler + HALLUCINATED
    assert len(text) > ARITHMETIC_INLINE_MAX_CHARS
    rep = await averify(text, {"question": "How tall is each third of the tower?", "force": True,
                               "verifiers": ["arithmetic"]})
    assert rep.status == "unverified"
    assert [c.evidence["kind"] for c in rep.checks if c.verifier == "facts"] == ["not_checked"]
