"""Unit tests of the arithmetic verifier (docs/arithmetic.md): every claim form with a right and a wrong
value, the tolerance rules, precision on prose numbers, hostile input, formula equivalence."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from verifiers import Check
from verifiers.arithmetic import check, equivalent

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "arithmetic"


def outcomes(answer: str, question: str | None = None) -> list[str]:
    return [c.outcome for c in check(answer, question)]


def only(answer: str, question: str | None = None) -> Check:
    cs = [c for c in check(answer, question) if c.outcome != "unknown"] or check(answer, question)
    assert len(cs) == 1, [(c.claim, c.outcome) for c in cs]
    return cs[0]


# --- every claim form: (right, wrong) ------------------------------------------------------------

CLAIM_FORMS = [
    # explicit equations and chains
    ("3 * 4 = 12", "3 * 4 = 13"),
    ("So 2 + 4 * 3 - 7 = 7.", "So 2 + 4 * 3 - 7 = 5."),
    ("(2 + 3) * 4 = 20 = 20", "(2 + 3) * 4 = 20 = 21"),
    # operators people and models write
    ("7 × 6 = 42", "7 × 6 = 48"),
    ("84 ÷ 4 = 21", "84 ÷ 4 = 24"),
    ("10 − 3 = 7", "10 − 3 = 6"),
    ("3 · 5 = 15", "3 · 5 = 16"),
    ("2^10 = 1024", "2^10 = 1000"),
    ("2**8 = 256", "2**8 = 258"),
    ("2(3+4) = 14", "2(3+4) = 13"),
    ("12 x 3 = 36", "12 x 3 = 38"),
    ("5! = 120", "5! = 125"),
    # thousands separators, currency, percent
    ("11,607.55 + 392.45 = 12,000", "11,607.55 + 392.45 = 12,100"),
    ("$45.50 * 2 = $91.00", "$45.50 * 2 = $92.00"),
    ("¥300 + ¥200 = ¥500", "¥300 + ¥200 = ¥600"),
    ("€12 * 3 = €36", "€12 * 3 = €39"),
    ("15% of 80 = 12", "15% of 80 = 14"),
    ("80 * 15% = 12", "80 * 15% = 15"),
    ("30 / 120 = 25%", "30 / 120 = 20%"),
    # fractions and mixed numbers
    ("3/4 * 20 = 15", "3/4 * 20 = 16"),
    ("2 1/2 * 4 = 10", "2 1/2 * 4 = 9"),
    ("1½ + 1 = 2.5", "1½ + 1 = 3.5"),
    # LaTeX inline and display
    ("\\(1/3 \\times 18 = 6\\)", "\\(1/3 \\times 18 = 7\\)"),
    ("\\[ \\frac{3}{4} \\cdot 12 = 9 \\]", "\\[ \\frac{3}{4} \\cdot 12 = 8 \\]"),
    ("$2^{10} = 1024$", "$2^{10} = 1042$"),
    ("\\( \\sqrt{144} = 12 \\)", "\\( \\sqrt{144} = 14 \\)"),
    ("\\( 2\\frac{1}{2} \\times 2 = 5 \\)", "\\( 2\\frac{1}{2} \\times 2 = 4 \\)"),
    ("$$\\dfrac{100}{4} = 25$$", "$$\\dfrac{100}{4} = 52$$"),
    # GSM8K calculator notes
    ("She eats <<48/2=24>>24 eggs", "She eats <<48/2=25>>25 eggs"),
    # natural-language arithmetic
    ("add 2 to 12, which equals 14", "add 2 to 12, which equals 15"),
    ("multiply 4 and 3 to get 12", "multiply 4 and 3 to get 13"),
    ("12 divided by 4 is 3", "12 divided by 4 is 4"),
    ("the difference between 20 and 7 is 13", "the difference between 20 and 7 is 12"),
    ("twice 8 is 16", "twice 8 is 18"),
    ("7 plus 5 is 12", "7 plus 5 is 11"),
    ("6 times 7 equals 42", "6 times 7 equals 48"),
    ("the sum of 15 and 27 is 42", "the sum of 15 and 27 is 43"),
    ("subtract 8 from 20 to get 12", "subtract 8 from 20 to get 11"),
    ("9 squared is 81", "9 squared is 72"),
    # longer model-style statements
    ("A = 1000(1 + 0.05/12)^(12*3) = $1,161.47", "A = 1000(1 + 0.05/12)^(12*3) = $1,161.00"),
    ("The average is (85 + 90 + 78) / 3 = 84.33", "The average is (85 + 90 + 78) / 3 = 84.67"),
    ("7995 (total cookies) - 2595 (rainbow cookies) = 5400", "7995 (total cookies) - 2595 (rainbow cookies) = 4500"),
    ("Total fruits = 52 + 24 + 44 + 48. Total fruits = 168", "Total fruits = 52 + 24 + 44 + 48. Total fruits = 178"),
    ("\\[ \\text{Total} = 52 + 24 \\] \\[ \\text{Total} = 76 \\]", "\\[ \\text{Total} = 52 + 24 \\] \\[ \\text{Total} = 86 \\]"),
    # unit conversions (pint)
    ("5 km = 3.11 miles", "5 km = 3.5 miles"),
    ("72 °F is 22.2 °C", "72 °F is 25 °C"),
    ("2 hours = 120 minutes", "2 hours = 100 minutes"),
]


@pytest.mark.parametrize("right,wrong", CLAIM_FORMS)
def test_claim_form_right_passes_and_wrong_fails(right: str, wrong: str) -> None:
    r = check(right)
    w = check(wrong)
    assert r and all(c.outcome == "pass" for c in r), [(c.claim, c.outcome, c.note) for c in r]
    assert any(c.outcome == "fail" for c in w), [(c.claim, c.outcome, c.note) for c in w]
    for c in r + w:
        assert c.verifier == "arithmetic"


QUESTION_LINKS = [
    ("4839+3948-45", "The answer is 8742.", "The answer is 8739."),
    ("143287*534156=?", "143287 * 534156 = 76537610772", "The product is 76537610272."),
    ("What is 15% of 240?", "It is 36.", "It is 32."),
    ("Calculate 2+4*3-7", "7", "5"),
    ("What is 1/3 + 1/6?", "The answer is 0.5", "The answer is 0.6"),
]


@pytest.mark.parametrize("question,right,wrong", QUESTION_LINKS)
def test_question_answer_link(question: str, right: str, wrong: str) -> None:
    assert "fail" not in outcomes(right, question) and "pass" in outcomes(right, question)
    failed = [c for c in check(wrong, question) if c.outcome == "fail"]
    assert failed, check(wrong, question)


def test_question_link_needs_an_arithmetic_question() -> None:
    assert check("The answer is 12.", "How many apples does Tom have if he buys 3 bags of 4?") == []
    assert check("The answer is 12.", None) == []


def test_check_record_fields() -> None:
    text = "First, 2 + 2 = 5 apples."
    c = only(text)
    assert c.outcome == "fail" and c.found == "5" and c.expected == "4"
    assert c.span is not None and text[c.span[0] : c.span[1]] == "2 + 2 = 5"
    assert c.evidence["expression"] == "2 + 2" and c.evidence["kind"] == "equation"
    assert 0.0 < c.confidence <= 1.0
    d = c.to_dict()
    json.dumps(d)
    assert d["span"] == list(c.span)


def test_spans_map_back_through_latex_and_notes() -> None:
    text = "Total: \\( \\frac{1}{2} \\times 10 = 6 \\) and 9 * 2 = $<<9*2=18>>18."
    cs = check(text)
    fail = [c for c in cs if c.outcome == "fail"]
    assert len(fail) == 1
    assert text[fail[0].span[0] : fail[0].span[1]] == "\\frac{1}{2} \\times 10 = 6"
    note = [c for c in cs if c.evidence.get("kind") == "calculator_note"]
    assert note and text[note[0].span[0] : note[0].span[1]] == "9*2=18" and note[0].outcome == "pass"


def test_note_and_its_prose_are_one_claim() -> None:
    # the prose "= $18" is the note's own result: one check, not two
    cs = check("She makes 9 * 2 = $<<9*2=18>>18 every day.")
    assert [c.evidence["kind"] for c in cs] == ["calculator_note"]


def test_wrong_note_is_reported_with_values() -> None:
    c = only("It takes <<10*(2/3)=8>>8 hours")
    assert c.outcome == "fail" and c.found == "8" and c.evidence["kind"] == "calculator_note"
    assert c.evidence["exact"] == "20/3"


# --- tolerance rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("10/3 = 3.33", "pass"),  # correctly rounded to 2 decimals
        ("10/3 = 3.3333333333333335", "pass"),  # float repr: relative epsilon
        ("10/3 = 3.34", "fail"),
        ("10/3 = 3.3", "pass"),
        ("2/3 = 0.67", "pass"),
        ("2/3 = 0.66", "unknown"),  # truncated, not rounded: never a failure
        ("2/3 = 0.65", "fail"),
        ("7 / 2 = 4", "pass"),  # whole number, correctly rounded
        ("7 / 2 = 3", "unknown"),  # floor: "3 full boxes"
        ("7 / 2 = 5", "fail"),
        ("22 / 7 ≈ 3.14", "pass"),  # approx: stated significant figures
        ("22 / 7 ≈ 3.15", "fail"),
        ("22 / 7 ≈ 3.2", "fail"),
        ("1448 / 10000 ≈ 0.15", "unknown"),  # 0.1448 -> 0.145 -> 0.15: rounding in two steps
        ("314 * 11 is about 3,500", "pass"),  # 3454 to 2 significant figures
        ("314 * 11 is about 3,000", "pass"),  # 1 significant figure
        ("314 * 11 is about 4,000", "unknown"),  # 3454 -> 3500 -> 4000
        ("314 * 11 is about 5,000", "fail"),
        ("1000 / 3 = roughly 330", "pass"),
        ("The tip is 15% of $43.17 = $6.48", "pass"),  # money: to the cent
        ("The tip is 15% of $43.17 = $6.50", "fail"),
        ("$10 / 3 = $3.33", "pass"),
        ("$100 / 3 = $33", "unknown"),  # truncated dollars
        ("33.33 * 3 = 100", "pass"),  # 99.99 to a whole number
        ("33.33 * 3 = 100.00", "unknown"),  # rounded intermediate carried forward
        ("2.5 * 3 = 7", "unknown"),  # tie 7.5: half-up/half-even give 8; 7 is the floor
        ("5 / 2 = 2", "pass"),  # tie 2.5: half-even
        ("50/200 * 100 = 25%", "pass"),  # "x 100 = %" shorthand
        ("2 / 8 * 100% = 25%", "pass"),
        ("2 / 8 * 100% = 50%", "fail"),
    ],
)
def test_tolerance_rules(text: str, expected: str) -> None:
    got = outcomes(text)
    assert got == [expected], [(c.claim, c.outcome, c.expected, c.note) for c in check(text)]


def test_approximate_value_reports_rounded_expected() -> None:
    c = only("22 / 7 ≈ 3.2")
    assert c.expected == "3.1" and c.evidence["rule"] == "sigfigs" and c.evidence["approximate"] is True


# --- precision: prose numbers are not claims ---------------------------------------------------------

NO_FALSE_ALARM = [
    "5 + 3 = 8 apples",
    "2 hours x $10 = $20",
    "Step 2: take the pills 3-4 times a day.",
    "Call 555-1234 or 555-9876 before 5 pm.",
    "The meeting is on 2023-01-05; the next one 12/25/2023.",
    "Item 3. 4 + 4 = 8",
    "1) 3 + 4 = 7",
    "Pages 10-12 cover chapters 1-3.",
    "The train left at 2:15 and arrived at 8:40.",
    "It ran from 1990 to 2000 = a decade.",
    "x = 12 / 3 = 4",
    "2x + 3 = 7, so x = 2",
    "1 hour = 60 minutes, so 3 hours = 3 * 60 = 180 minutes",
    "16 - 3 = 13 - 4 = 9",
    "There are 25 classmates + his 1 teacher + 1 himself = 27 people.",
    "The total is 250 of the books - 135 sold books - 50 unsold books = 65 books.",
    "Since 2/5 is equal to 12.8 hectares, then 1/5 is equal to 12.8/2 = 6.4 hectares.",
    "Nikita = (1/2) 278 + 11 = 150 points",
    "She works 7.5 hours/day x 6 days = 45 hours/week",
    "There are 24 eggs in 1 tray x 2 trays = 48 eggs.",
    "Drop 8 degrees = 2 - 8 = -6 degrees",
    "48 = 100% + 20% = 120% of the actual number",
    "\\(25\\%\\) of $80 = \\frac{25}{100} \\times \\$80 = \\$20",
    "The brokerage fee is $350 000 x 5/100 = $17500.",
    "```python\nx = 2 + 2  # = 5\n```",
    "**Answer:** **12**",
    "We get \\( 28 = 2 \\times 2f \\).",
    "1 1/2 / 1/2 = 3 times as many",
    "20 grass type + 14 grass type = 34 grass type",
    "1 dozen = 12 eggs",
    "Area = πr² = π × 5² ≈ 78.54 cm²",
    "Between 1990-2000 = 10 years",
    "It takes 3-4 = about 1 hour",
    "From 9:00 to 17:00 = 8 hours",
    "Version 3.11.2 = latest",
    "She came 1st - 5 = 6th place",
    "7995 (total cookies) - 2595 (rainbow cookies) = 5400.",
    "half of 6000-1500-2000 = 2500",
    "Pay 70 pesos per hour after the 12-hour mark: 3 * 70 = 210",
    "Also 3,5 + 1 = 4,5 (decimal commas)",
    "Let x be the number. 3x = 12, so x = 12 / 3 = 4",
]


@pytest.mark.parametrize("text", NO_FALSE_ALARM)
def test_no_false_alarm_on_prose_numbers(text: str) -> None:
    assert "fail" not in outcomes(text), [(c.claim, c.expected, c.found) for c in check(text)]


def test_plain_prose_has_no_claims() -> None:
    assert check("In 2019, 3 of the 12 members voted; the 4th abstained.") == []
    assert check("") == [] and check("   ") == []


def test_unparseable_note_is_unknown_not_fail() -> None:
    for note in ("<<2:15+2:38=8:40>>", "<<0.0625*100%.01=6>>", "<<400-250=150 000>>"):
        got = outcomes(note)
        assert got and "fail" not in got, (note, got)
        assert "unknown" in got


def test_symbols_are_not_checked_as_arithmetic() -> None:
    assert "fail" not in outcomes("<<X*.25=19.5>> and <<3*A=9*A=9*8=72>>")
    assert outcomes("<<3*A=9*A=9*8=72>>") == ["pass"]


# --- safety -------------------------------------------------------------------------------------------

HOSTILE = [
    "__import__('os').system('echo pwned') = 0",
    "<<__import__('os').system('touch /tmp/veracity_pwned')=0>>",
    "().__class__.__bases__[0].__subclasses__() = 1",
    "(lambda: 1)() = 1",
    "exec('1') = 1",
    "\\( \\frac{__import__}{1} = 2 \\)",
    "9**9**9 = 5",
    "9^9^9^9 = 1",
    "10000! = 3",
    "<<2**100000=1>>",
    "(" * 5000 + "1" + ")" * 5000 + " = 1",
    "-" * 5000 + "1 = 1",
    "1" + "+1" * 5000 + " = 5001",
    "\\frac{" * 300 + "1" + "}{2}" * 300 + " = 1",
    "$" * 10000,
    "=" * 10000,
    "1e999999 = 1",
    "0/0 = 1",
    "5 / 0 = 1",
    "\x00\x01 3 + 4 = 7 \ud800",
]


@pytest.mark.timeout(20)
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_input_is_refused_never_evaluated(text: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import sympy
    import sympy.parsing.sympy_parser as sp

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("model text reached an evaluator")

    monkeypatch.setattr(builtins, "eval", boom)
    monkeypatch.setattr(builtins, "exec", boom)
    monkeypatch.setattr(sympy, "sympify", boom)
    monkeypatch.setattr(sp, "parse_expr", boom)
    cs = check(text)
    assert isinstance(cs, list)
    assert all(c.outcome in ("pass", "fail", "unknown") for c in cs), [(c.outcome, c.note) for c in cs]
    assert not any(c.outcome == "fail" and "__" in c.claim for c in cs)
    e = equivalent(text, "1")
    assert e.outcome in ("pass", "fail", "unknown")
    assert not Path("/tmp/veracity_pwned").exists()


def test_huge_power_and_factorial_are_unknown_with_reason() -> None:
    for text in ("9**9**9 = 5", "10000! = 3", "<<2**100000=1>>"):
        cs = check(text)
        assert [c.outcome for c in cs] == ["unknown"], (text, cs)
        assert "refused" in cs[0].note


def test_non_text_input() -> None:
    assert check(None) == []  # type: ignore[arg-type]
    assert check(12) == []  # type: ignore[arg-type]
    assert equivalent(None, "1").outcome == "unknown"  # type: ignore[arg-type]


# --- formula equivalence ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "a,b",
    [
        ("(a+b)^2", "a^2 + 2ab + b^2"),
        ("(x+1)(x-1)", "x^2 - 1"),
        ("\\frac{a}{b} + \\frac{c}{b}", "(a+c)/b"),
        ("π r^2", "r·r·π"),
        ("sin(x)^2 + cos(x)^2", "1"),
        ("sqrt(4x^2)", "2 abs(x)"),  # not 2x: sampled at x < 0 too (test_arithmetic_equivalence)
        ("15% * 80", "12"),
    ],
)
def test_equivalent_formulas(a: str, b: str) -> None:
    c = equivalent(a, b)
    assert c.outcome == "pass", c
    assert c.evidence["kind"] == "equivalence"


@pytest.mark.parametrize(
    "a,b",
    [("π r", "π r²"), ("(a+b)^2", "a^2 + b^2"), ("x/2", "2/x"), ("2^10", "1000"), ("sin(x)", "cos(x)")],
)
def test_not_equivalent_formulas(a: str, b: str) -> None:
    c = equivalent(a, b)
    assert c.outcome == "fail", c


def test_equivalent_unparseable_is_unknown() -> None:
    assert equivalent("a = b", "c").outcome == "unknown"
    assert equivalent("foo(", "1").outcome == "unknown"
    assert equivalent("(a+b)^1000000", "1").outcome in ("unknown", "fail")


# --- small real excerpts (sources named in the fixture) --------------------------------------------


def _fixture() -> dict:
    return json.loads((FIXTURES / "excerpts.json").read_text(encoding="utf-8"))


def test_fixture_correct_answers_have_no_false_alarm() -> None:
    fx = _fixture()
    assert fx["source"]
    for case in fx["correct_answers"]:
        cs = check(case["answer"], case["question"])
        fails = [(c.claim, c.found, c.expected) for c in cs if c.outcome == "fail"]
        assert not fails, (case["source"], fails)
        assert any(c.outcome == "pass" for c in cs) or "ProcessBench" in case["source"], case["source"]


def test_fixture_wrong_notes_are_found() -> None:
    for case in _fixture()["wrong_notes"]:
        cs = check(case["line"])
        note = [c for c in cs if c.evidence.get("kind") == "calculator_note" and c.claim in case["note"]]
        assert note and any(c.outcome == "fail" for c in note), (case["source"], cs)


def test_exact_tie_shows_exact_expected_value_not_a_contradicting_rounding():
    # 1000 * 1.05^3 = 1157.625 exactly: 1157.63 is a correct rounding, and the report must not
    # show "expected 1157.62" next to a pass (found during README review).
    (c,) = [c for c in check("After 3 years: 1000 * 1.05^3 = 1157.63 dollars.") if "1.05" in c.claim]
    assert c.outcome == "pass"
    assert c.expected == "1157.625"


@pytest.mark.parametrize("note", ["6=6", "+8=8", "1,200=1200", "2.50=2.5"])
def test_a_calculator_note_that_computes_nothing_is_no_unit(note):
    # GSM8K writes "<<6=6>>6" for a value carried over: there is nothing to compute, so it is not
    # a check-worthy unit (an `unknown` for it made right answers `unverified`)
    text = f"She keeps <<{note}>>{note.split('=')[1]} apples. Then 2 + 4 = <<2+4=6>>6."
    checks = check(text)
    assert [c.outcome for c in checks] == ["pass"] and checks[0].claim == "2+4=6"


def test_a_calculator_note_with_two_different_numbers_stays_a_unit():
    assert [c.outcome for c in check("She has <<6=7>>7 apples.")] == ["unknown"]
