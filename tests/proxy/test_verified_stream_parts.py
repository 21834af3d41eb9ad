"""The pure parts of the verified stream mode (:mod:`proxy.pipeline.verified_stream`): the
continuation request, the splice of a correction that repeats the relayed prefix, which policy
a unit is verified with, and how usage chunks add up. The mode itself: tests/e2e/test_verified_stream.py."""

from __future__ import annotations

from proxy.pipeline.verified_stream import (CONTINUE_INSTRUCTION, _add_usage, _Splice, continuation_body,
                                            unit_policy)
from proxy.policy import PolicyStore
from verifiers import Check, Report

BODY = {"model": "m", "n": 2, "stream": True, "stream_options": {"include_usage": False}, "temperature": 0.3,
        "messages": [{"role": "user", "content": "What is 1234*5678?"}]}
FAILED = Report(status="failed", checks=[Check(verifier="arithmetic", claim="1234 × 5678 = 7,006,552", outcome="fail",
                                                expected="7006652", found="7,006,552")])


def feed_all(splice: _Splice, pieces: list[str]) -> str:
    return "".join(splice.feed(p) for p in pieces) + splice.finish()


def test_continuation_body_asks_for_what_follows_the_relayed_prefix():
    body = continuation_body(BODY, "Let me compute it.", " 1234 × 5678 = 7,006,552.", FAILED)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert "n" not in body and body["temperature"] == 0.3 and body["model"] == "m"
    assert body["messages"][:-2] == BODY["messages"]
    assert body["messages"][-2] == {"role": "assistant", "content": "Let me compute it. 1234 × 5678 = 7,006,552."}
    ask = body["messages"][-1]["content"]
    assert ask.startswith("Automatic verification found 1 error(s)") and "7006652" in ask
    assert ask.endswith(CONTINUE_INSTRUCTION.format(anchor=', which ended with: "Let me compute it."'))
    assert "give your complete corrected answer" not in ask


def test_whole_strategy_is_the_usual_correction_round_streamed():
    body = continuation_body(BODY, "Let me compute it.", " 1234 × 5678 = 7,006,552.", FAILED, strategy="whole")
    assert "give your complete corrected answer" in body["messages"][-1]["content"]
    assert body["stream"] is True and "n" not in body


def test_a_true_continuation_passes_from_its_first_byte():
    assert feed_all(_Splice("Let me compute it.", "continue"), [" 1234 × ", "5678 = 7,006,652."]) == \
        " 1234 × 5678 = 7,006,652."


def test_a_continuation_that_repeats_the_prefix_has_the_repeat_skipped():
    prefix = "Let me work it out step by step. We multiply the two numbers."
    got = feed_all(_Splice(prefix, "continue"), ["Let me work it out ", "step by step.\nWe multiply the two",
                                                  " numbers. 1234 × 5678 = 7,006,652."])
    assert got == " 1234 × 5678 = 7,006,652."


def test_whole_answer_that_rewrote_the_relayed_text_cannot_be_spliced():
    s = _Splice("Let me compute it.", "whole")
    assert s.feed("Let me calculate") == "" and s.failed


def test_a_continuation_starting_like_the_prefix_but_short_of_the_repeat_test_is_kept():
    prefix = "The answer is below. It took a while to compute."
    assert feed_all(_Splice(prefix, "continue"), ["The ", "product is 7,006,652."]) == "The product is 7,006,652."


def test_unit_policy_checks_arithmetic_always_and_everything_once_the_answer_is_risky():
    pol = PolicyStore(None).get("default")
    low = unit_policy(pol, "Tell me about Paris.", "Paris is the capital of France.")
    assert low.risk.threshold == 0 and low.verifiers.enabled() == ["arithmetic"]
    risky = unit_policy(pol, "What is 1234*5678?", "1234 × 5678 = 7,006,552.")
    assert risky.risk.threshold == 0 and set(risky.verifiers.enabled()) == set(pol.verifiers.enabled())
    assert pol.risk.threshold > 0  # the policy itself is not changed


def test_usage_of_several_calls_adds_up_field_by_field():
    a = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
         "completion_tokens_details": {"reasoning_tokens": 2}}
    _add_usage(a, {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52,
                   "completion_tokens_details": {"reasoning_tokens": 1, "audio_tokens": 0}})
    assert a == {"prompt_tokens": 50, "completion_tokens": 17, "total_tokens": 67,
                 "completion_tokens_details": {"reasoning_tokens": 3, "audio_tokens": 0}}
