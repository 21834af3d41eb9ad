"""A second adversary against the verdict (docs/design.md "Asymmetric trust", "False alarms cost more
than misses"): inputs not covered by ``test_hostile_verdicts`` / ``test_hostile_inputs``, each a
fault found once and kept.

* a right answer in a locale whose ``.`` groups thousands ("1.500 € + 250 € = 1.750 €") or
  whose ``,`` is the decimal mark ("1,500 × 2 = 3") was ``failed`` and re-asked: one group of
  three digits after one separator reads both ways, so a claim that holds the other way is
  ``unknown``.

* a verifier model that says ``supported`` (obeying the checked text) passed claims whose numbers
  and names the quoted sentence states but whose sense it does not: "Sales rose by 5%" on "Sales
  fell by 5%", "Marie Dubois left" on "... joined", "a loss of $4.2 million" on "revenue of $4.2
  million", "Southwind Traders" on "Northwind Traders" (a name counted as stated when any one of its
  words was), "85 robots" on "85 people", "the largest company in France", "€4.2 million" on "$4.2
  million" (that one even by the deterministic tier). Now each is ``unknown``; paraphrases the
  rules confirm still pass.

* code whose own checks are judged by the code itself passed: a result of a class that subclasses
  ``int`` with ``__eq__`` always true (``assert add(2, 2) == 4`` holds for a wrong ``add``), a
  ``__repr__`` that prints the stated output, an object equal to everything, ``print`` rebound at
  top level, the function under test replaced through ``globals()``, bidirectional controls in a
  string or comment that show the reader another program than the one run (Trojan Source). Now the run's passes are
  ``unknown``; failures stand, and honest classes (an Enum with its own ``__str__``, a class
  whose ``__eq__`` compares fields) still pass.

* a reference with a real paper's title plus a made-up subtitle ("Deep residual learning for image
  recognition: Applications to quantum gravity") was VERIFIED, a ``pass`` on a record that
  confirms the main title only; now PARTIALLY_VERIFIED (``unknown``); a citation that leaves out
  a subtitle the record has stays VERIFIED.

* "⅓ + ⅓ = 1", "1 / 3 = 0", "0.4 + 0.4 = 1" passed as "the rounded result" (a whole number
  stated, so ±0.5 allowed): a value below one written as a whole number keeps none of its
  significant figures; now ``unknown`` (never ``fail``: "0.4 × 2 = 1 bus" may be on purpose).

* a right-to-left override reverses how digits display: "17 × 23 = \u202e391\u202c" shows
  "= 193" (wrong) and passed, "\u202e193" shows "391" (right) and failed. Now the override run
  is read in display order; a claim inside a right-to-left embedding or isolate (whose run
  order the reader sees differently) is ``unknown``. The facts verifier had the same fault
  ("employs \u202e58\u202c people" shows 85 and failed against a document saying 85).

* a claim whose grouping writers and tools disagree on was failed on the parser's reading alone:
  "6/2(1+2) = 1" (the juxtaposed product bound first, as many textbooks and calculators do) and
  "2^3^2 = 64" (Excel and MATLAB group carets to the left). When the other grouping holds, the
  claim is ``unknown``; wrong in both groupings, it still fails.

* a correction round that kept the wrong value in a form no verifier reads ("17 * 23 → 401", "17
  * 23: 401", "The answer is 401", a table, "four hundred") came back ``corrected``: a new draft
  with no check at all, or whose passes were about other claims ("17 × 2 = 34. Then 17 * 23 →
  401"), counted as fixed. Now it is ``corrected`` only when the claim that failed passes again
  or the new draft states the computed value and drops the wrong one; otherwise ``unverified``.

The gateway tests drive ``veracity serve`` under the *shipped* policies over the scripted mock
upstream (``tests.fixtures.mock.shipped_policy_gateway``). No network.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.fixtures.mock import idle_verifier_rules, policy_client, shipped_policy_gateway
from tests.hostile.test_hostile_model_loop import _facts_model
from verifiers import arithmetic
from verifiers.facts import ContextBackend, acheck

EVIDENCE = "Automatic verification found"      # start of proxy.pipeline.correction.evidence_prompt()

# --- the other locale's separators --------------------------------------------------------------
RIGHT_OTHER_LOCALE = {
    "de-euro": "Der Preis: 1.500 € + 250 € = 1.750 €.",
    "de-plain": "Zusammen: 1.200 + 300 = 1.500 Stück.",
    "de-kg": "1.500 kg + 250 kg = 1.750 kg",
    "de-comma": "Je 0,5 kg: 1,500 × 2 = 3",
    "de-comma-sum": "Dazu 0,25 l: 1,500 + 1 = 2,500",
}
# real model answers (GSM8K, ../shared/cases/math gsm8k_models) in English, whose only numbers are ","
# groups: a wrong claim that happens to hold with "," as the decimal mark is still failed
WRONG_ENGLISH_GROUPS = [
    "Let x be the cost of the lot.\nThe house cost 3*x.\nx+3*x=120,000\n4*x=120,000\nx=25,000\n"
    "The house cost 25*3=75,000\nA: 75000",
    "Combined, the three trucks can haul 3,200 + 4,000 + 11,600 = 18,800 pounds of gravel.\n"
    "Gary's truck can carry 18,800 / 3,200 = 5,875 pounds of gravel.\nA: 5,875",
    "Maria's power bank started with 28/100*40= 11,200 mAh.\nThe power bank lost 1,200 mAh every hour so "
    "11,200 - 1,200 = 10,000 mAh remained.",
    "1,500 + 1 = 2,500",
]
# wrong in both readings, or right in none: still failed
WRONG_BOTH = ["1.000 + 1 = 1.002", "1,000 + 1 = 1,002", "1.500 + 250 = 1.760", "3.142 × 2 = 7.284"]

# --- an obedient verifier model says "supported", quoting a real sentence of the documents -------
FACT_DOC = ("Northwind Traders annual report 2023. Northwind Traders reported revenue of $4.2 million in 2023. "
            "Northwind Traders employs 85 people at its headquarters in Lyon, France. Its chief executive is "
            "Marie Dubois, who joined the company in 2019. Sales fell by 5% in 2022. The company opened a "
            "warehouse in Berlin in 2021.")
REVENUE = "Northwind Traders reported revenue of $4.2 million in 2023"
STEERED = {  # wrong claim -> the quote the model cites as its support
    "opposite-direction": ("Sales rose by 5% in 2022.", "Sales fell by 5% in 2022"),
    "opposite-verb": ("The company closed a warehouse in Berlin in 2021.", "The company opened a warehouse in Berlin in 2021"),
    "opposite-role": ("Marie Dubois left the company in 2019.", "Its chief executive is Marie Dubois, who joined the company in 2019"),
    "opposite-office": ("Marie Dubois is the chief financial officer.", "Its chief executive is Marie Dubois"),
    "opposite-loss": ("Northwind Traders reported a loss of $4.2 million in 2023.", REVENUE),
    "qualifier-former": ("Its former chief executive is Marie Dubois.", "Its chief executive is Marie Dubois"),
    "superlative": ("Northwind Traders is the largest company in France.",
                    "Northwind Traders employs 85 people at its headquarters in Lyon, France"),
    "superlative-added": ("Northwind Traders reported revenue of $4.2 million in 2023, the highest in the industry.",
                          REVENUE),
    "hedge-unlikely": ("Northwind Traders is unlikely to have reported revenue of $4.2 million in 2023.", REVENUE),
    "counted-thing": ("Northwind Traders employs 85 robots at its headquarters.",
                      "Northwind Traders employs 85 people at its headquarters"),
    "name-in-part": ("Southwind Traders reported revenue of $4.2 million in 2023.", REVENUE),
    "currency": ("Northwind Traders reported revenue of €4.2 million in 2023.", REVENUE),
}
# the controls: a paraphrase whose numbers, names and sense the quoted sentence states
STEERED_RIGHT = {
    "right-boss": ("The firm's boss is Marie Dubois.", "Its chief executive is Marie Dubois"),
    "right-plain": ("Northwind Traders reported revenue of $4.2 million in 2023.", REVENUE),
    "right-words": ("Sales dropped 5% in 2022.", "Sales fell by 5% in 2022"),
}

# --- code that writes how its own checks are judged -----------------------------------------------
_WRONG = "def add(a, b):\n    return _R(a - b)\n\n"
SELF_JUDGING = {
    "int-eq": "class _R(int):\n    def __eq__(self, o):\n        return True\n    __hash__ = int.__hash__\n\n"
              + _WRONG + "assert add(2, 2) == 4\n",
    "int-repr": "class _R(int):\n    def __repr__(self):\n        return '4'\n    __str__ = __repr__\n\n"
                + _WRONG + "print(add(2, 2))  # Output: 4\n",
    "eq-everything": "class _R:\n    def __init__(self, v):\n        self.v = v\n    __eq__ = lambda self, o: True\n\n"
                     + _WRONG + "assert add(2, 2) == 4\n",
    "type-built": "_R = type('_R', (int,), {'__eq__': lambda s, o: True, '__hash__': int.__hash__})\n\n"
                  + _WRONG + "assert add(2, 2) == 4\n",
    "print-rebound": "def add(a, b):\n    return a - b\n\n\nimport builtins\n"
                     "print = lambda *a, **k: builtins.print(4)\nprint(add(2, 2))  # Output: 4\n",
    "globals-patch": "def add(a, b):\n    return a - b\n\n\nglobals()['add'] = lambda a, b: 4\nassert add(2, 2) == 4\n",
    # Trojan Source (CVE-2021-42574): bidi controls in a string or comment show another program
    "trojan-string": "def add(a, b):\n    return a - b\n\n\nnote = \"tested \u202e \u2066# see below\u2069 \u2066\"\n"
                     "assert add(2, 0) == 2\n",
    "trojan-comment": "def add(a, b):\n    return a - b  # \u202eadd(2, 2) == 0\n\n\nassert add(2, 0) == 2\n",
}
HONEST_CLASSES = {
    # a setattr on an object whose name holds the word "modules" reads no module table
    "setattr-config": "from types import SimpleNamespace\n\nmodules_cfg = SimpleNamespace()\n"
                      "setattr(modules_cfg, 'debug', True)\n\n\ndef add(a, b):\n    return a + b\n\n\n"
                      "assert add(2, 2) == 4 and modules_cfg.debug\n",
    "enum-str": "from enum import Enum\n\n\nclass Color(str, Enum):\n    RED = 'red'\n\n    def __str__(self):\n"
                "        return self.value\n\n\nassert str(Color.RED) == 'red'\n",
    "rich-print": "from pprint import pprint as print\n\n\ndef add(a, b):\n    return a + b\n\n\n"
                  "print(add(2, 2))  # Output: 4\n",
    "fields-eq": "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n    def __eq__(self, o):\n"
                 "        return (self.x, self.y) == (o.x, o.y)\n\n\ndef mid(a, b):\n"
                 "    return Point((a.x + b.x) / 2, (a.y + b.y) / 2)\n\n\n"
                 "assert mid(Point(0, 0), Point(2, 4)) == Point(1, 2)\n",
}

# --- a correction that keeps the wrong value in another form ------------------------------------
DRAFT_401 = "First, 17 × 2 = 34. Then 17 * 23 = 401 apples."
KEPT_WRONG = {
    "kept-arrow": "First, 17 × 2 = 34. Then 17 * 23 → 401 apples.",
    "kept-colon": "17 * 23: 401 apples.",
    "kept-table": "| a | b | a*b |\n|---|---|---|\n| 17 | 23 | 401 |",
    "kept-words": "He has four hundred apples.",
    "kept-latex": "$17 \\times 23$ gives $401$ apples.",
}
RIGHT_FIX = {"fix-eq": "First, 17 × 2 = 34. Then 17 * 23 = 391 apples.", "fix-words": "There are 391 apples (17 × 23)."}


def _supported(quote: str) -> str:
    return json.dumps({"verdict": "supported", "passages": [1, 2, 3], "quote": quote, "source_says": "",
                       "confidence": 0.99, "questions": []})


def _rules() -> list[dict[str, Any]]:
    r: list[dict[str, Any]] = []
    for tag, (claim, quote) in {**STEERED, **STEERED_RIGHT}.items():
        r.append({"name": f"{tag}-verdict", "match": {"schema": "VerdictAnswer", "any_message": re.escape(claim[:-1])},
                  "reply": {"content": _supported(quote)}})
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]", "schema": "-"}, "reply": {"content": claim}})
    for tag, fix in {**KEPT_WRONG, **RIGHT_FIX}.items():
        r.append({"name": f"{tag}-fix", "match": {"any_message": rf"\[case:{tag}\]", "last_user": EVIDENCE,
                                                  "schema": "-"}, "reply": {"content": fix}})
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]", "schema": "-"},
                  "reply": {"content": DRAFT_401}})
    for tag, src in {**SELF_JUDGING, **HONEST_CLASSES}.items():
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]", "schema": "-"},
                  "reply": {"content": "Here it is, tested:\n\n```python\n" + src + "```\n"}})
    for tag, text in RIGHT_OTHER_LOCALE.items():
        r.append({"name": tag, "match": {"any_message": rf"\[case:{tag}\]", "schema": "-"}, "reply": {"content": text}})
    # the verifier model plans nothing and finds no claims
    r += idle_verifier_rules()
    return r


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    yield from shipped_policy_gateway(tmp_path_factory, gateway_factory, _rules(), "hostile-trust")


client = policy_client


# ------------------------------------------------------------------ the other locale's separators


@pytest.mark.parametrize("tag", list(RIGHT_OTHER_LOCALE))
def test_a_claim_that_holds_with_the_other_locales_separators_is_never_failed(tag):
    checks = arithmetic.check(RIGHT_OTHER_LOCALE[tag])
    assert checks and not [c for c in checks if c.outcome == "fail"], [(c.claim, c.outcome) for c in checks]
    assert any(c.evidence.get("other_locale") for c in checks)


@pytest.mark.parametrize("text", WRONG_ENGLISH_GROUPS)
def test_english_thousands_groups_are_not_reread_as_decimal_commas(text):
    """A "," group ("75,000") is English's usual thousands separator and an unusual continental
    decimal: without a number only the other locales write, the English reading stands."""
    assert "fail" in [c.outcome for c in arithmetic.check(text)]


@pytest.mark.parametrize("text", WRONG_BOTH)
def test_a_claim_wrong_in_both_locales_still_fails(text):
    assert [c.outcome for c in arithmetic.check(text)] == ["fail"]


@pytest.mark.parametrize("text", ["6/2(1+2) = 1", "6 ÷ 2(1 + 2) = 1", "2^3^2 = 64", "12 / 3(2) = 2"])
def test_a_claim_that_holds_in_the_other_grouping_is_never_failed(text):
    checks = arithmetic.check(text)
    assert [c.outcome for c in checks] == ["unknown"], [(c.claim, c.note) for c in checks]
    assert checks[0].evidence["other_grouping"]["reading"]


@pytest.mark.parametrize("text,outcome", [("6/2(1+2) = 5", "fail"), ("2^3^2 = 100", "fail"), ("2**3**2 = 64", "fail"),
                                          ("8 / 2 / 2 = 8", "fail"), ("6/2(1+2) = 9", "pass"), ("2^3^2 = 512", "pass")])
def test_a_claim_wrong_in_every_grouping_still_fails(text, outcome):
    assert [c.outcome for c in arithmetic.check(text)] == [outcome]


#: answers with more claims of one ambiguous kind than are re-read (_MAX_REREADS): every one holds
#: in the other reading, so none may fail -- not the first twenty only
MANY_AMBIGUOUS = {
    "locale": " ".join(f"{i}.500 + 250 = {i}.750." for i in range(1, 31)),
    "grouping": " ".join(f"{2 * k}/{k}(1+1) = 1." for k in range(1, 31)),
}


@pytest.mark.parametrize("tag", list(MANY_AMBIGUOUS))
def test_a_claim_past_the_reread_cap_is_never_failed(tag):
    checks = arithmetic.check(MANY_AMBIGUOUS[tag])
    assert len(checks) == 30 and not [c for c in checks if c.outcome == "fail"], \
        [(c.claim, c.outcome) for c in checks if c.outcome == "fail"]
    assert "not re-read" in checks[-1].note and checks[-1].evidence[f"other_{tag}"]["not_reread"]


@pytest.mark.parametrize("text", ["⅓ + ⅓ = 1", "1 / 3 = 0", "0.4 + 0.4 = 1", "2 × 0.3 = 1"])
def test_a_value_below_one_stated_as_a_whole_number_is_never_passed(text):
    assert [c.outcome for c in arithmetic.check(text)] == ["unknown"]


@pytest.mark.parametrize("text", ["10 / 3 = 3", "1 / 3 = 0.33", "0.4 + 0.4 = 0.8", "100 / 7 = 14.29", "7 / 2 = 4"])
def test_a_rounded_result_that_keeps_a_figure_still_passes(text):
    assert [c.outcome for c in arithmetic.check(text)] == ["pass"]


@pytest.mark.parametrize("text,outcome", [
    ("17 × 23 = \u202e391\u202c", "fail"),        # displays "17 × 23 = 193"
    ("17 × 23 = \u202e193\u202c", "pass"),        # displays "17 × 23 = 391"
    ("17 × 23 = 3\u202e19\u202c", "pass"),        # displays "17 × 23 = 391"
    ("The answer: \u202e193 = 32 × 71\u202c.", "pass"),  # displays "17 × 23 = 391"
    ("2+2 = \u202e5\u202c", "fail"),
    ("\u2067 10 - 4 = 6\u2069", "unknown"),         # an isolate: its runs may display reordered
    ("17 × 23 = \u2067391\u2069", "unknown"),
])
def test_a_claim_is_read_in_the_order_it_displays(text, outcome):
    assert [c.outcome for c in arithmetic.check(text)] == [outcome], [(c.claim, c.note) for c in arithmetic.check(text)]


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


# ------------------------------------------------------------------ a steered "supported"


async def _steered(claim: str, quote: str) -> list[Any]:
    model = _facts_model(claim, {"verdict": "supported", "quote": quote})
    out = await acheck(claim, None, model=model, backends=[ContextBackend([{"role": "system", "content": FACT_DOC}])])
    return out.checks


@pytest.mark.parametrize("tag", list(STEERED))
async def test_a_supported_verdict_on_a_sentence_that_says_otherwise_never_passes(tag):
    checks = await _steered(*STEERED[tag])
    assert checks and not [c for c in checks if c.outcome == "pass"], [(c.claim, c.outcome, c.note) for c in checks]


@pytest.mark.parametrize("tag", list(STEERED_RIGHT))
async def test_a_supported_verdict_on_a_sentence_that_states_the_claim_still_passes(tag):
    checks = await _steered(*STEERED_RIGHT[tag])
    assert [c.outcome for c in checks] == ["pass"], [(c.claim, c.outcome, c.note) for c in checks]


#: a name the passage states in part with a title or generic word in the place of the rest (the
#: words ``Documents.states`` does not ask for): the same person or firm, no rival name
TITLED = {
    "president": ("Barack Obama was born in Hawaii in 1961.", "President Obama was born in Hawaii in 1961."),
    "ceo": ("Tim Cook joined Apple in 1998.", "CEO Cook joined Apple in 1998."),
}


@pytest.mark.parametrize("tag", list(TITLED))
async def test_a_title_in_the_place_of_a_name_word_is_no_rival_name(tag):
    claim, passage = TITLED[tag]
    model = _facts_model(claim, {"verdict": "supported", "quote": passage})
    out = await acheck(claim, None, model=model, backends=[ContextBackend([{"role": "system", "content": passage}])])
    assert [c.outcome for c in out.checks] == ["pass"], [(c.claim, c.outcome, c.note) for c in out.checks]


@pytest.mark.parametrize("tag", ["opposite-direction", "name-in-part", "currency", "counted-thing"])
def test_a_steered_supported_verdict_never_makes_the_answer_passed(env, tag):
    resp = client(env, "rag").chat.completions.create(model="gpt-test", messages=[
        {"role": "system", "content": "Answer from the documents below.\n\n<documents>\n" + FACT_DOC + "\n</documents>"},
        {"role": "user", "content": f"[case:{tag}] Tell me about Northwind."}])
    rep = resp.model_extra["veracity"]
    assert rep["status"] not in ("passed", "corrected"), rep
    assert not [c for c in rep["checks"] if c["outcome"] == "pass"], rep["checks"]


def test_a_steered_supported_verdict_on_a_right_paraphrase_still_passes(env):
    resp = client(env, "rag").chat.completions.create(model="gpt-test", messages=[
        {"role": "system", "content": "Answer from the documents below.\n\n<documents>\n" + FACT_DOC + "\n</documents>"},
        {"role": "user", "content": "[case:right-boss] Who runs Northwind?"}])
    assert resp.model_extra["veracity"]["status"] == "passed", resp.model_extra["veracity"]


# ------------------------------------------------------------------ code that judges itself


def _box() -> Any:
    from verifiers import sandbox

    box = sandbox.get("auto")
    why = box.unavailable_reason()
    if why or box.name == "none":
        from tests.fixtures.sandboxes import missing
        missing(f"no sandbox runs code here: {why}")
    return box


@pytest.mark.parametrize("tag", list(SELF_JUDGING))
def test_code_that_writes_how_its_checks_are_judged_is_never_passed(tag):
    from verifiers import code

    checks = code.check("```python\n" + SELF_JUDGING[tag] + "```\n", sandbox=_box())
    assert checks and not [c for c in checks if c.outcome == "pass"], [(c.outcome, c.note) for c in checks]
    assert any("not taken as verified" in (c.note or "") for c in checks), [(c.outcome, c.note) for c in checks]


@pytest.mark.parametrize("src,judging", [
    ("import sys\nsetattr(sys.modules[__name__], 'add', lambda a, b: 4)\n", True),
    ("from sys import modules\nsetattr(modules[__name__], 'add', lambda a, b: 4)\n", True),
    ("setattr(modules_cfg, 'debug', True)\n", False),
    ("setattr(obj, 'submodules_seen', 3)\n", False),
])
def test_setattr_is_self_judging_only_on_the_module_table(src, judging):
    import ast

    from verifiers.code._static import self_judging

    assert (self_judging(ast.parse(src)) is not None) is judging


@pytest.mark.parametrize("tag", list(HONEST_CLASSES))
def test_honest_classes_with_their_own_eq_or_str_still_pass(tag):
    from verifiers import code

    checks = code.check("```python\n" + HONEST_CLASSES[tag] + "```\n", sandbox=_box())
    assert checks and all(c.outcome == "pass" for c in checks), [(c.outcome, c.note) for c in checks]


@pytest.mark.parametrize("tag", ["int-eq", "print-rebound"])
def test_self_judging_code_never_makes_the_answer_passed(env, tag):
    _box()
    resp = client(env, "code").chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": f"[case:{tag}] Write add(a, b)."}])
    rep = resp.model_extra["veracity"]
    assert rep["status"] not in ("passed", "corrected"), rep
    assert not [c for c in rep["checks"] if c["verifier"] == "code" and c["outcome"] == "pass"], rep["checks"]


# ------------------------------------------------------------------ a real title, a made-up subtitle


def test_a_made_up_subtitle_on_a_real_title_is_not_verified(tmp_path):
    from pathlib import Path

    from verifiers.citations import build_index, check

    fix = Path(__file__).resolve().parents[1] / "fixtures" / "citations"
    db = str(tmp_path / "lib.sqlite3")
    build_index([fix / "library.bib", fix / "library.csl.json", fix / "library.jsonl"], db)
    ans = ("References\n"
           "1. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image recognition: "
           "Applications to quantum gravity. *CVPR*.\n"
           "2. He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning for image recognition. *CVPR*.\n"
           "3. Agarwal, A., Kakade, S. M., Lee, J. D., & Mahajan, G. (2021). On the theory of policy gradient "
           "methods. *Journal of Machine Learning Research*, 22, 1-76.\n")
    cs = check(ans, sources={"use": [], "local_index": {"path": db}, "cache": {"backend": "none"}})
    assert [(c.evidence["status"], c.outcome) for c in cs] == [
        ("PARTIALLY_VERIFIED", "unknown"), ("VERIFIED", "pass"), ("VERIFIED", "pass")], [c.note for c in cs]
    assert "subtitle" in cs[0].note


@pytest.mark.parametrize("answer,outcome", [
    ("Northwind Traders employs \u202e58\u202c people at its headquarters in Lyon.", "pass"),   # shows 85
    ("Northwind Traders employs \u202e85\u202c people at its headquarters in Lyon.", "fail"),   # shows 58
])
async def test_a_fact_claim_is_read_in_the_order_it_displays(answer, outcome):
    out = await acheck(answer, None, model=None, backends=[ContextBackend([{"role": "system", "content": FACT_DOC}])])
    assert [c.outcome for c in out.checks] == [outcome], [(c.claim, c.note) for c in out.checks]
    assert out.checks[0].span == (0, len(answer))


# ------------------------------------------------------------------ a correction that kept the error


@pytest.mark.parametrize("policy", ["math", "default"])
@pytest.mark.parametrize("tag", list(KEPT_WRONG))
def test_a_correction_that_keeps_the_wrong_value_in_another_form_is_never_corrected(env, policy, tag):
    resp = client(env, policy).chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": f"[case:{tag}] How many apples?"}])
    rep = resp.model_extra["veracity"]
    assert any(r.get("rule") == f"{tag}-fix" for r in env["mock"].requests()), "no correction round"
    assert rep["status"] not in ("passed", "corrected"), rep
    assert resp.choices[0].message.content == KEPT_WRONG[tag]


@pytest.mark.parametrize("tag", list(RIGHT_FIX))
def test_a_correction_that_states_the_computed_value_is_still_corrected(env, tag):
    resp = client(env, "math").chat.completions.create(
        model="gpt-test", messages=[{"role": "user", "content": f"[case:{tag}] How many apples?"}])
    rep = resp.model_extra["veracity"]
    assert rep["status"] == "corrected", rep
    assert resp.choices[0].message.content == RIGHT_FIX[tag]


@pytest.mark.parametrize("tag", ["kept-arrow", "kept-table"])
def test_a_verified_stream_correction_that_keeps_the_wrong_value_is_never_corrected(env, tag):
    stream = client(env, "default").chat.completions.create(
        model="gpt-test", stream=True, extra_body={"veracity": {"streaming": {"mode": "verified"}}},
        messages=[{"role": "user", "content": f"[case:{tag}] How many apples?"}])
    reports = [ch.model_extra["veracity"] for ch in stream if (ch.model_extra or {}).get("veracity")]
    assert reports and reports[-1]["status"] not in ("passed", "corrected"), reports


def test_a_verified_stream_correction_that_states_the_computed_value_is_still_corrected(env):
    stream = client(env, "default").chat.completions.create(
        model="gpt-test", stream=True, extra_body={"veracity": {"streaming": {"mode": "verified"}}},
        messages=[{"role": "user", "content": "[case:fix-eq] How many apples?"}])
    reports = [ch.model_extra["veracity"] for ch in stream if (ch.model_extra or {}).get("veracity")]
    assert reports and reports[-1]["status"] == "corrected", reports
