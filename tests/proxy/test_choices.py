"""proxy/pipeline/choices.py: the shape of multi-choice (n > 1) responses and reports, without HTTP."""

import json

from proxy.pipeline.choices import combine, put_back, split, withhold
from verifiers._types import Check, Cost, Report


def completion(*texts, logprobs=None):
    return {"id": "chatcmpl-n", "object": "chat.completion", "model": "gpt-test",
            "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop",
                         "logprobs": logprobs} for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}}


def check(outcome, claim="2 + 2 = 5"):
    return Check(verifier="arithmetic", claim=claim, outcome=outcome, expected="4", found="5")


def test_split_and_put_back_keep_every_other_choice_and_the_envelope():
    comp = completion("a", "b", "c")
    parts = split(comp)
    assert [i for i, _ in parts] == [0, 1, 2]
    assert parts[2][1]["choices"][0]["index"] == 0 and parts[2][1]["choices"][0]["message"]["content"] == "c"
    fixed = {"id": "chatcmpl-fix", "choices": [{"index": 0, "message": {"role": "assistant", "content": "B"},
                                                "finish_reason": "stop"}], "usage": {"total_tokens": 99}}
    out = put_back(comp, 1, fixed)
    assert [c["message"]["content"] for c in out["choices"]] == ["a", "B", "c"]
    assert [c["index"] for c in out["choices"]] == [0, 1, 2]
    assert out["id"] == "chatcmpl-n" and out["usage"]["total_tokens"] == 30  # the client's call's envelope
    assert comp["choices"][1]["message"]["content"] == "b"                 # the input is not modified


def test_combine_status_risk_cost_and_tags():
    passed = Report(status="passed", checks=[check("pass", "2 + 2 = 4")], risk={"score": 0.4},
                    cost=Cost(tokens=0, upstream_calls=0))
    corrected = Report(status="corrected", checks=[check("pass", "2 + 3 = 5")], risk={"score": 0.9},
                       rounds=[{"round": 1, "status": "corrected"}], cost=Cost(tokens=120, upstream_calls=1),
                       extra={"corrected_checks": [check("fail").to_dict()]})
    rep = combine([(1, corrected), (0, passed)])
    assert rep.status == "corrected" and rep.risk == {"score": 0.9}
    assert rep.cost.tokens == 120 and rep.cost.upstream_calls == 1
    d = json.loads(json.dumps(rep.to_dict()))
    assert [c["choice"] for c in d["checks"]] == [0, 1]
    assert d["rounds"] == [{"round": 1, "status": "corrected", "choice": 1}]
    assert d["corrected_checks"][0]["choice"] == 1
    assert [(c["index"], c["status"]) for c in d["choices"]] == [(0, "passed"), (1, "corrected")]
    failed = combine([(0, passed), (1, Report(status="failed", checks=[check("fail")], reason="why"))])
    assert failed.status == "failed" and failed.reason == "choice 1: why"
    assert combine([(0, Report(status="skipped")), (1, Report(status="skipped"))]).status == "skipped"


def test_withhold_replaces_only_failed_choices_and_drops_their_logprobs():
    comp = completion("2 + 2 = 4", "2 + 2 = 5", logprobs={"content": [{"token": "5", "logprob": -0.1}]})
    rep = combine([(0, Report(status="passed", checks=[check("pass", "2 + 2 = 4")])),
                   (1, Report(status="failed", checks=[check("fail")]))])
    out, withheld = withhold(comp, rep)
    assert withheld == [1]
    assert out["choices"][0] == comp["choices"][0]
    bad = out["choices"][1]
    assert bad["index"] == 1 and bad["finish_reason"] == "content_filter" and bad["logprobs"] is None
    assert bad["message"]["content"] is None and "1 check(s) failed" in bad["message"]["refusal"]
    assert rep.to_dict()["choices"][1]["blocked"] is True and "blocked" not in rep.to_dict()["choices"][0]
    nothing = combine([(0, Report(status="passed")), (1, Report(status="passed"))])
    assert withhold(comp, nothing) == (comp, [])
