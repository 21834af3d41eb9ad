"""Property: whatever the verifier model answers, it cannot make an answer ``passed`` (docs/design.md
"Asymmetric trust").

A scripted verifier model answers every request with generated JSON -- plans with any tool,
input, claim and assertion (copies of the draft's text, the question's numbers, garbage), claim
lists, verdicts, search queries -- or with text that is no JSON, or it raises. Run in-process
through :func:`verifiers.run.run` with the planner (model plans always asked), the arithmetic
verifier, the facts verifier over the request's own document and, where a sandbox runs, the
code verifier:

* a draft whose deterministic check fails (a wrong product the arithmetic verifier recomputes,
  docs/verifier-model.md's compound-interest value the template recomputes, code whose own assert fails)
  is ``failed``: no model output removes or outweighs a rule check's failure;
* a report with a pass on the model's word alone is never ``passed``; a ``passed`` report has
  only decided passes on evidence the model did not write; a wrong draft no rule can decide
  (``$45.50`` for a 15% discount on $60, ``\\binom{n}{2} = \\frac{n^2}{2}``) is never
  ``passed``, whatever the model's step claims to rest on.

Hypothesis runs with a fixed seed (``derandomize``) and a bounded number of examples.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from verifiers import sandbox
from verifiers.facts import ContextBackend
from verifiers.model import ModelError, ScriptedModel
from verifiers.run import run

DOC = ("Northwind Traders annual report 2023. Northwind Traders reported revenue of $4.2 million in 2023. "
       "Northwind Traders employs 85 people at its headquarters in Lyon, France.")
MESSAGES = [{"role": "system", "content": "Answer from the documents.\n\n" + DOC},
            {"role": "user", "content": "Tell me about Northwind."}]

# (question, draft): each draft has a statement a rule-based check fails by itself
FAILING = [
    ("Tom buys 17 boxes with 23 apples in each box. How many apples does he have?",
     "Tom has 17 boxes of 23 apples, so 17 × 23 = 401 apples. The price is $45.50."),
    ("本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？",
     "根据公式A=P*(1+r/n)^(nt)，本息和约为11607.55元。使用Python精确计算的结果约为11614.80元。"),
    ("本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？", "根据公式A=P*(1+r/n)^(nt)计算得约为11608.92元。"),
    ("A $60 item has a 15% discount. What is the price?", "60 × 0.85 = 45.5, so the price is $45.50."),
]
# wrong drafts no rule-based check can decide: only a model-written step could "pass" them
WRONG_UNDECIDED = [
    ("A $60 item has a 15% discount. What is the price?", "The price is $45.50."),
    ("How many pairs can be formed from n people?", "The number of pairs is $\\binom{n}{2} = \\frac{n^2}{2}$."),
]
# right drafts (a pass may stand only on evidence the model did not write)
RIGHT = [
    ("How fast is the train on average?", "The train covers 120 km in 1.5 hours, so its average speed is 80 km/h."),
    ("Tell me about Northwind.", "Northwind Traders employs 85 people at its headquarters in Lyon, France."),
    ("本金10000元，年利率5%，按季度复利，存3年，最终本息和是多少？", "根据公式A=P*(1+r/n)^(nt)，本息和约为11607.55元。"),
]
# steps an obedient model writes to make a draft "pass" (each a known way in; generated steps
# copy and vary them): a made-up expression that agrees with the draft's value, one formula as
# both sides, code run with an assertion that cannot fail
OBEDIENT = [
    {"tool": "calculate", "input": {"expression": "60 - 15 + 1/2"}, "claim": "The price is $45.50"},
    {"tool": "calculate", "input": {"expression": "60 - 15 + 1/2"}, "claim": "so the price is $45.50"},
    {"tool": "calculate", "input": {"expression": "120 / 1.5"}, "claim": "its average speed is 80 km/h"},
    {"tool": "calculate", "input": {"expression": "17 * 23 + 10"}, "claim": "17 × 23 = 401 apples"},
    {"tool": "sympy_equivalent", "input": {"left": "\\frac{n^2}{2}", "right": "\\frac{n^2}{2}"},
     "claim": "$\\binom{n}{2} = \\frac{n^2}{2}$"},
    {"tool": "calculate", "input": {"expression": "10000 * (1 + 0.05/4)^12"}, "claim": "本息和约为11607.55元"},
    {"tool": "run_python", "input": {"setup": "", "code": "def total(xs):\n    return sum(xs[1:])",
                                     "assertions": ["total([1, 4]) == 5 or True", "total([1, 4]) == 4"]},
     "claim": "def total(xs):"},
    {"tool": "search_facts", "input": {"claim": "Northwind Traders employs 85 people at its headquarters in Lyon, "
                                                "France"},
     "claim": "Northwind Traders employs 85 people at its headquarters in Lyon, France"},
]
TOOLS = ["calculate", "sympy_equivalent", "convert_units", "run_python", "check_citation", "search_facts",
         "browse_web", ""]


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _piece(text: str) -> st.SearchStrategy[str]:
    """A substring of ``text`` (what an obedient model copies), or any text."""
    n = len(text)
    return st.one_of(st.tuples(st.integers(0, n), st.integers(0, n)).map(lambda ij: text[min(ij):max(ij)]),
                     st.text(max_size=40))


def _expression(q: str, d: str) -> st.SearchStrategy[str]:
    nums = [t for t in "".join(c if c.isdigit() or c == "." else " " for c in q + " " + d).split() if t.strip(".")]
    atoms = st.sampled_from(nums + ["1", "2", "1/2", "100", "12"])
    return st.one_of(st.lists(st.tuples(atoms, st.sampled_from(["+", "-", "*", "/", "^"])), min_size=1, max_size=4)
                     .map(lambda xs: " ".join(a + " " + o for a, o in xs) + " 1"), st.text(max_size=30))


def _sentences(d: str) -> list[str]:
    import re
    return [p.strip() for p in re.split(r"(?<=[.。!?])\s*|[,，]\s*", d) if p.strip()] or [d]


def _obedient(d: str) -> st.SearchStrategy[dict[str, Any]]:
    mine = [o for o in OBEDIENT if o["claim"] in d] or OBEDIENT
    return st.sampled_from(mine).flatmap(
        lambda o: st.fixed_dictionaries({"step_id": st.integers(0, 9), "tool": st.just(o["tool"]),
                                         "input": st.just(o["input"]),
                                         "claim": st.one_of(st.just(o["claim"]), st.sampled_from(_sentences(d))),
                                         "description": st.just(""), "expected_check": st.just("")}))


def _step(q: str, d: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(_obedient(d), _any_step(q, d))


def _any_step(q: str, d: str) -> st.SearchStrategy[dict[str, Any]]:
    piece = st.one_of(_piece(d), st.sampled_from(_sentences(d)))
    inputs = st.one_of(
        st.fixed_dictionaries({"expression": _expression(q, d)}),
        st.fixed_dictionaries({"left": piece, "right": piece}),
        st.fixed_dictionaries({"value": st.one_of(st.integers(-10, 10**6), st.floats(allow_nan=False)),
                               "from_unit": st.sampled_from(["km", "mile", "m", "kg", "x"]),
                               "to_unit": st.sampled_from(["km", "mile", "m", "lb", "y"])}),
        st.fixed_dictionaries({"setup": st.sampled_from(["", "x = 1", "import os"]), "code": piece,
                               "assertions": st.lists(st.sampled_from(["True", "1 == 1", "total(x) == 5 or True",
                                                                       "x == 1"]), max_size=2)}),
        st.fixed_dictionaries({"reference": piece}), st.fixed_dictionaries({"claim": piece}),
        st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3))
    return st.fixed_dictionaries({"step_id": st.integers(0, 9), "tool": st.sampled_from(TOOLS), "input": inputs,
                                  "claim": piece, "description": st.text(max_size=10),
                                  "expected_check": st.text(max_size=10)})


def _answers(q: str, d: str) -> st.SearchStrategy[dict[str, Any]]:
    """One generated answer per schema the verifiers ask for."""
    piece, doc = _piece(d), _piece(DOC)
    garbage = st.one_of(st.text(max_size=30), st.just(ModelError("scripted failure")),
                        st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))
    plan = st.one_of(st.fixed_dictionaries({"verification_needed": st.just(True),
                                            "verification_steps": st.lists(_obedient(d), min_size=1, max_size=2)}),
                     st.fixed_dictionaries({"verification_needed": st.booleans(),
                                            "verification_steps": st.lists(_step(q, d), max_size=4)}),
                     garbage)
    claims = st.one_of(st.fixed_dictionaries({"claims": st.lists(st.fixed_dictionaries(
        {"claim": piece, "sentence": piece}), max_size=3)}), garbage)
    verdict = st.one_of(st.fixed_dictionaries({
        "verdict": st.sampled_from(["supported", "refuted", "conflicting", "not_enough_info"]),
        "passages": st.lists(st.integers(0, 4), max_size=2), "quote": doc, "source_says": doc,
        "confidence": st.floats(0, 1), "questions": st.just([])}), garbage)
    queries = st.one_of(st.fixed_dictionaries({"queries": st.lists(piece, min_size=1, max_size=2)}), garbage)
    return st.fixed_dictionaries({"Plan": plan, "ClaimList": claims, "VerdictAnswer": verdict, "QueryList": queries,
                                  "other": garbage})


def _model(answers: dict[str, Any]) -> ScriptedModel:
    def respond(msgs: Any, schema_name: str, purpose: str) -> Any:
        a = answers.get(schema_name, answers["other"])
        return a if isinstance(a, (str, BaseException)) else json.loads(json.dumps(a))

    return ScriptedModel(default=respond)


async def _verify(question: str, draft: str, model: ScriptedModel, *, box: Any = None, facts: bool = True) -> Any:
    names = ["arithmetic"] + (["facts"] if facts else []) + ["planner"] + (["code"] if box is not None else [])
    options: dict[str, Any] = {
        "planner": {"model": model, "when": "always", "timeout_s": 20, "sandbox": box},
        "facts": {"model": model, "backends": [ContextBackend(MESSAGES)], "timeout_s": 20},
    }
    if box is not None:
        options["code"] = {"sandbox": box, "timeout_s": 30}
    return await run(draft, names, question=question, options=options)


def _trusted_only_when_passed(rep: Any) -> None:
    if rep.status == "passed":
        assert all(c.outcome == "pass" and c.basis != "model" for c in rep.checks), rep.checks
    if any(c.outcome == "pass" and c.basis == "model" for c in rep.checks):
        assert rep.status != "passed"


SETTINGS = settings(derandomize=True, max_examples=100, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(data=st.data(), case=st.sampled_from(FAILING), facts=st.booleans())
def test_a_draft_a_rule_check_fails_is_failed_whatever_the_model_answers(data, case, facts):
    question, draft = case
    answers = data.draw(_answers(question, draft))
    rep = asyncio.run(_verify(question, draft, _model(answers), facts=facts))
    rule_fails = [c for c in rep.checks if c.outcome == "fail" and c.basis != "model"]
    assert rule_fails, [(c.verifier, c.outcome, c.basis, c.note) for c in rep.checks]
    assert rep.status == "failed"
    _trusted_only_when_passed(rep)


@SETTINGS
@given(data=st.data(), case=st.sampled_from(FAILING + WRONG_UNDECIDED + RIGHT), facts=st.booleans())
def test_a_pass_on_the_models_word_never_makes_an_answer_passed(data, case, facts):
    question, draft = case
    rep = asyncio.run(_verify(question, draft, _model(data.draw(_answers(question, draft))), facts=facts))
    _trusted_only_when_passed(rep)
    assert rep.status != "corrected"


@SETTINGS
@given(data=st.data(), case=st.sampled_from(WRONG_UNDECIDED), facts=st.booleans())
def test_a_wrong_answer_only_the_model_could_check_is_never_passed(data, case, facts):
    # whatever the checks say they rest on: the model is the only one "checking" these drafts
    question, draft = case
    rep = asyncio.run(_verify(question, draft, _model(data.draw(_answers(question, draft))), facts=facts))
    assert rep.status not in ("passed", "corrected"), [(c.verifier, c.outcome, c.basis, c.note) for c in rep.checks]


CODE_DRAFT = ("Here is `total`:\n\n```python\ndef total(xs):\n    return sum(xs[1:])\n\n"
              "assert total([1, 4]) == 5\n```\n")


@pytest.fixture(scope="module")
def box():
    b = sandbox.get("auto")
    if b.name == "none" or b.unavailable_reason():
        from tests.fixtures.sandboxes import missing
        missing(f"no sandbox runs code here: {b.unavailable_reason()}")
    return b


@pytest.mark.bwrap
@pytest.mark.docker
@settings(derandomize=True, max_examples=12, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_code_whose_own_assert_fails_is_failed_whatever_the_model_plans(box, data):
    question = "Write total(xs): the sum of a list."
    answers = data.draw(_answers(question, CODE_DRAFT))
    rep = asyncio.run(_verify(question, CODE_DRAFT, _model(answers), box=box))
    assert [c.outcome for c in rep.checks if c.verifier == "code"][:1] == ["fail"], rep.checks
    assert rep.status == "failed"
    _trusted_only_when_passed(rep)
