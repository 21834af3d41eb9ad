"""A hyphenated (or slash-joined) word just before an arithmetic claim must not hide the claim
(nothing is silently unverified: "Version 2-beta and 3 * 4 = 13." was ``skipped`` while
"Version 2-beta. 3 * 4 = 13." was ``failed``). The sign inside ``2-beta`` / ``well-known`` /
``and/or`` joins a word; it is no operator whose expression prose interrupted, so the next expression is checked whole."""

from __future__ import annotations

import pytest

from verifiers import verify
from verifiers.arithmetic import check

WRONG = [
    ("Version 2-beta and 3 * 4 = 13.", "3 * 4 = 13"),
    ("This well-known result says 3 * 4 = 13.", "3 * 4 = 13"),
    ("The 5-star hotel and 3 * 4 = 13.", "3 * 4 = 13"),
    ("We use Python 3.11-slim images and 6 + 7 = 14.", "6 + 7 = 14"),
    ("It is a 3-year plan and 10 / 2 = 4.", "10 / 2 = 4"),
    ("The and/or rule then 9 - 3 = 5.", "9 - 3 = 5"),
    ("The e-mail and 2 * 3 = 7.", "2 * 3 = 7"),
]
RIGHT = [
    ("Version 2-beta and 3 * 4 = 12.", "3 * 4 = 12"),
    ("Our up-to-date tally 7 * 8 = 56.", "7 * 8 = 56"),
    ("The 5-star hotel and 3 * 4 = 12.", "3 * 4 = 12"),
    ("The and/or rule then 9 - 3 = 6.", "9 - 3 = 6"),
]


@pytest.mark.parametrize("text,claim", WRONG)
def test_wrong_claim_after_a_hyphenated_word_fails(text: str, claim: str) -> None:
    checks = check(text)
    assert [(c.outcome, c.claim) for c in checks] == [("fail", claim)]


@pytest.mark.parametrize("text,claim", RIGHT)
def test_right_claim_after_a_hyphenated_word_passes(text: str, claim: str) -> None:
    checks = check(text)
    assert [(c.outcome, c.claim) for c in checks] == [("pass", claim)]


def test_same_status_with_and_without_a_sentence_break() -> None:
    joined = verify("Version 2-beta and 3 * 4 = 13.")
    split = verify("Version 2-beta. 3 * 4 = 13.")
    assert joined.status == split.status == "failed"
    assert [c.claim for c in joined.checks] == [c.claim for c in split.checks] == ["3 * 4 = 13"]


def test_an_operator_that_prose_interrupts_still_marks_the_tail() -> None:
    # "25 classmates + his 1 teacher = 26": the "+" has blanks around it; "1 teacher = 26" is the
    # tail of a sum written in prose, not a claim that 1 = 26 (unchanged by the fix)
    assert check("25 classmates + his 1 teacher = 26") == []


@pytest.mark.parametrize("text,claim", WRONG + RIGHT)
def test_the_gateway_report_under_the_default_policy(text: str, claim: str) -> None:
    # the same path a chat completion takes (risk score, threshold, verifiers): failed or passed,
    # never `skipped` / "no checkable claims"
    import asyncio

    from proxy.stores.budget import RequestBudget
    from proxy.pipeline.sequence import verify_text
    from proxy.policy import PolicyStore

    pol = PolicyStore(None).get("default")
    rep = asyncio.run(verify_text(pol, None, text, RequestBudget.from_policy(pol.budgets.request)))
    assert rep.status == ("failed" if (text, claim) in WRONG else "passed"), rep
    assert [c.claim for c in rep.checks] == [claim]
