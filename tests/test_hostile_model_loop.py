"""Hostile and unlucky input against the model-in-the-loop parts (issues 10 and 11): the facts
verifier's deterministic tier, the unconfirmed note, the planner and its tools, the verifier
model plumbing and the correction loop. Each test is a regression for a fault found by trying
to break these parts; the trust rules under test are "no checked content may write its own
verdict", "false alarms cost more than misses" and "a failing verifier degrades to
unknown/error, never a stack trace".

No network: the verifier model is a ScriptedModel, the gateway's upstream the scripted mock
(proxy/mock_upstream.py), search backends the request's own context.
"""

from __future__ import annotations

import pytest

from verifiers.facts import ContextBackend, acheck, judge_passage
from verifiers.facts._text import numbers


# ------------------------------------------------------------------ facts: number formats

# (claim, passage): the claim states the passage's own figure, written another way. Each pair
# was a false `refuted` before: the parser read "2.500" as 2.5, "2 500" as 2 and 500, "4,2" as 4,
# "12万" as 12, "1.2 bln" as 1.2, and took one end of "12-15" as the passage's value.
SAME_FIGURE = [
    ("Acme Corp employs 1,000 people in Berlin.", "Acme Corp employs 1.000 people in Berlin."),
    ("Acme Corp employs 2,500 people in Berlin.", "Acme Corp employs 2 500 people in Berlin."),
    ("Acme Corp employs 2500 people in Berlin.", "Acme Corp employs 2\u202f500 people in Berlin."),
    ("Acme Corp employs 2.500 people in Berlin.", "Acme Corp employs 2,500 people in Berlin."),
    ("Acme Corp reported revenue of €1.234,5 in 2023.", "Acme Corp reported revenue of €1,234.5 in 2023."),
    ("Acme Corp raised $1,2 million in funding in 2020.", "Acme Corp raised $1.2 million in funding in 2020."),
    ("Acme Corp raised $1.2 million in funding in 2020.", "Acme Corp raised $1,2 million in funding in 2020."),
    ("Acme Corp's revenue grew 12.5% in 2023.", "Acme Corp's revenue grew 12,5 % in 2023."),
    ("Acme Corp raised ¥120,000 in funding in 2020.", "Acme Corp raised ¥12万 in funding in 2020."),
    ("Acme Corp raised ¥12万 in funding in 2020.", "Acme Corp raised ¥120,000 in funding in 2020."),
    ("Acme Corp raised $1.2 billion in funding in 2020.", "Acme Corp raised $1.2 bln in funding in 2020."),
    ("Acme Corp was founded in 1999 in Berlin.", "Acme Corp was founded in 1998–99 in Berlin."),
    ("Acme Corp has 14 stores in Europe.", "Acme Corp has 12-15 stores in Europe."),
    ("Acme Corp has 14 stores in Europe.", "Acme Corp has 12 to 15 stores in Europe."),
    ("Acme Corp has 14 stores in Europe.", "Acme Corp has between 12 and 15 stores in Europe."),
]


@pytest.mark.parametrize("claim,passage", SAME_FIGURE)
def test_a_figure_written_in_another_locale_scale_or_as_a_range_is_never_refuted(claim, passage):
    v = judge_passage(claim, passage)
    assert v.verdict != "refuted", (v.rule, v.expected, v.found)


@pytest.mark.parametrize("claim,passage", [
    ("Acme Corp employs 2,500 people in Berlin.", "Acme Corp employs 3,100 people in Berlin."),
    ("Acme Corp raised $1.2 million in funding in 2020.", "Acme Corp raised $4.7 million in funding in 2020."),
    ("Acme Corp was founded in 1999 in Berlin.", "Acme Corp was founded in 1994 in Berlin."),
    ("Acme Corp has 40 stores in Europe.", "Acme Corp has 12 stores in Europe, up from 9 in 2019."),
])
def test_a_plain_contradiction_is_still_refuted(claim, passage):
    # the guard above must not switch the rule off: same slot, plain figures, another value
    assert judge_passage(claim, passage).verdict == "refuted"


def test_a_range_end_never_supports_an_exact_claim():
    # "12-15 stores" does not state 12 stores; a pass must mean the figure was found
    assert judge_passage("Acme Corp has 12 stores in Europe.", "Acme Corp has 12-15 stores in Europe.").verdict \
        != "supported"
    assert judge_passage("Acme Corp has 12 stores in Europe.", "Acme Corp has 12 stores in Europe.").verdict \
        == "supported"


def test_vague_readings_are_marked_and_plain_ones_are_not():
    marks = {q.text.strip(): q.vague for q in numbers("2.500 staff, 4,2 m, 2 500 m, 12万 people, 12-15 stores, "
                                                         "$29.9 million or $0.70 per share, grew 20.3% to $2.55")}
    assert marks["2.500"] == "format" and marks["12"] in ("scale", "range")
    assert marks["$29.9 million"] == "" and marks["$0.70"] == ""      # "or": two statements, not a range
    assert marks["20.3%"] == "" and marks["$2.55"] == ""              # two kinds joined by "to": no range


async def test_a_correct_answer_over_a_european_document_is_not_failed_end_to_end():
    doc = ("Rapport annuel 2023. Acme Corp employs 2.500 people in Berlin. Acme Corp reported revenue of "
           "€4,2 million in 2023. The group has 12-15 stores in Europe.")
    msgs = [{"role": "system", "content": doc}, {"role": "user", "content": "Tell me about Acme."}]
    answer = ("Acme Corp employs 2,500 people in Berlin. Acme Corp reported revenue of €4.2 million in 2023. "
              "The group has 14 stores in Europe.")
    out = await acheck(answer, None, backends=[ContextBackend(msgs)])
    assert out.checks and not [c for c in out.checks if c.outcome == "fail"], [(c.claim, c.note) for c in out.checks]
