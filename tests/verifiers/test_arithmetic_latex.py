"""Competition-style LaTeX solutions (Omni-MATH; docs/arithmetic.md): each kind of false alarm seen on correct
solutions, with made-up examples of the same shape, right (no ``fail``) and wrong (a wrong
value of the same shape is still a ``fail``)."""

from __future__ import annotations

import pytest

from verifiers import arithmetic


@pytest.fixture(autouse=True, scope="module")
def _warm():
    arithmetic.warm_up()  # SymPy's first import must not use up one answer's time budget


def outcomes(answer: str, question: str | None = None) -> list[tuple[str, str]]:
    return [(c.outcome, c.claim) for c in arithmetic.check(answer, question)]


def fails(answer: str, question: str | None = None) -> list[str]:
    return [c.claim for c in arithmetic.check(answer, question) if c.outcome == "fail"]


def passes(answer: str, question: str | None = None) -> list[str]:
    return [c.claim for c in arithmetic.check(answer, question) if c.outcome == "pass"]


# --- degrees ---------------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    r"We know \(\sin 30^\circ = \frac{1}{2}\).",
    r"so \(\cos 45^{\circ} = \frac{\sqrt{2}}{2}\) here",
    r"and $\tan 60° = \sqrt{3}$.",
    r"\[ \cos 120^{\circ} = -\frac{1}{2} \]",
])
def test_degrees_in_a_trigonometric_argument_pass(answer):
    assert fails(answer) == [] and len(passes(answer)) == 1


@pytest.mark.parametrize("answer", [
    r"We know \(\sin 30^\circ = \frac{\sqrt3}{2}\).",
    r"so \(\cos 45^{\circ} = \frac{1}{2}\) here",
    r"and $\tan 45° = 2$.",
])
def test_a_wrong_value_in_degrees_is_still_flagged(answer):
    assert len(fails(answer)) == 1


@pytest.mark.parametrize("answer,ok", [
    (r"$\sin^2 30^\circ + \cos^2 30^\circ = 1$", True),
    (r"$\sin^2 30^\circ = \frac{1}{4}$", True),
    (r"$\sin^2 30^\circ = \frac{1}{2}$", False),
])
def test_a_squared_trigonometric_value_in_degrees(answer, ok):
    assert (fails(answer) == []) is ok and (passes(answer) != []) is ok




def test_angle_arithmetic_in_degrees_is_plain_arithmetic():
    assert fails(r"\[ \angle C = 180^\circ - 50^\circ - 60^\circ = 70^\circ \]") == []
    assert len(fails(r"\[ \angle C = 180^\circ - 50^\circ - 60^\circ = 80^\circ \]")) == 1


# --- single letters are symbols in math, never magnitude suffixes -----------------------------

@pytest.mark.parametrize("answer", [
    r"\[ 3^{6k} = 729^k \]",
    r"\[ 2k - 1 = 2(2004) - 1 = 4007 \]",
    r"Expanding, \( (6 + 6k)^2 = 36 + 72k + 36k^2 \).",
    r"\[ 5m + 2M = 7 \]",
    r"\[ (2k)^2 - 4(1)(7k - 10) = 0 \]",
    r"\[ 3b + 4K = 12 \]",
])
def test_letters_in_math_are_symbols(answer):
    assert fails(answer) == []


def test_a_wrong_number_next_to_a_symbol_is_still_flagged():
    assert fails(r"\[ 2k - 1 = 2(2004) - 1 = 4008 \]") == ["2(2004) - 1 = 4008"]


def test_k_after_a_number_in_prose_is_still_thousand():
    assert passes("The salary went from 50k to 60k, so 60k - 50k = 10,000 dollars more.")
    assert len(fails("He earns 50k - 10k = 30k.")) == 1


def test_k_is_a_symbol_in_prose_when_the_text_uses_k_alone():
    assert fails("2k - 1 = 2(2004) - 1 = 4007, where k = 2004.") == []
    assert fails("2k - 1 = 2(2004) - 1 = 4008, where k = 2004.") == ["2(2004) - 1 = 4008"]


def test_a_larger_subject_across_inline_formulas_is_not_bound_to_a_part():
    assert fails(r"The count, $5 \cdot (4!)^2$, is $\boxed{2880}$.") == []
    assert fails(r"Then $(4!)^2 = 576$, so $5 \cdot 576 = \boxed{2880}$.") == []
    assert len(fails(r"Then $(4!)^2 = 576$, so $5 \cdot 576 = \boxed{2800}$.")) == 1


# --- claims do not cross math boundaries -------------------------------------------------------

@pytest.mark.parametrize("answer", [
    r"\[ x^2 - 8x + 13 = 0 \implies x = 4 - \sqrt{3}, \quad x = 4 + \sqrt{3} \]",
    "The roots are $x = 4 - \\sqrt{3}$ and $x = 4 + \\sqrt{3}$.",
    r"\[ a_1 + a_2 = 9,\] \[x = \frac{1 - 17}{2} = -8 \]",
    r"\[ -5 - 3 - 7 - 9 = -24 \] \boxed{-24}",
    r"- \(48 - 2 = 46\).",
    "\\begin{align} x &= 4 - \\sqrt{3} \\\\ x &= 4 + \\sqrt{3} \\end{align}",
    r"\[ \dots 3 = 9 + 12 + 9 = 30 \]",
    r"Gain = (coins) × \( \frac{1}{100} = \frac{101}{100} \times \frac{1}{100} = \frac{101}{10000} \).",
])
def test_spans_never_cross_delimiters_listed_solutions_or_cut_sides(answer):
    assert fails(answer) == []


@pytest.mark.parametrize("prose,formula", [
    ("Total cost for implants = ", r"2 \times 2000 = 4000"),  # a prose label and '=': a whole side follows
    ("- ", r"12 = 2^2 \cdot 3"),  # a markdown bullet, not a minus
    ("  * ", r"45 \times 200 = 9000"),
    ("- **Sum of digits in base 10:** ", r"1 + 1 = 2"),  # bold, not a product
])
def test_a_formula_after_a_prose_label_bullet_or_bold_is_still_checked(prose, formula):
    # GSM8K/Omni-MATH solutions: every step was read before LaTeX regions (6d0de84) and none after
    assert passes(prose + "\\(" + formula + "\\) dollars.") == [formula]
    wrong = formula[:-1] + str((int(formula[-1]) + 1) % 10)
    assert fails(prose + "\\(" + wrong + "\\) dollars.") == [wrong]


def test_listed_solutions_in_prose_are_two_claims_but_a_chain_over_lines_is_one():
    assert fails("The roots are x = 4 - 1.5, x = 4 + 1.5.") == []
    assert fails("x = 4 - 2\nx = 3") == ["4 - 2\nx = 3"]


def test_an_aligned_chain_continues_over_rows_and_a_wrong_row_is_flagged():
    good = "\\begin{align} S &= 2 + 3 \\\\ &= 5 \\end{align}"
    bad = "\\begin{align} S &= 2 + 3 \\\\ &= 6 \\end{align}"
    assert passes(good) and fails(good) == []
    assert len(fails(bad)) == 1


@pytest.mark.parametrize("answer", [
    r"\[ 6 \cdot 3^{7/2} = 6 \cdot 27 \sqrt{3} = 162 \sqrt{3}. \]",
    r"\[ \frac{1}{4} \left( 16 + 4 + 4 \right) = 6 \]",
    r"\[ 2^{1002} \cos(501\pi) = -2^{1002} \]",
])
def test_blanks_do_not_split_factors_in_a_formula(answer):
    assert fails(answer) == [] and passes(answer)


def test_a_wrong_product_written_with_blanks_is_flagged():
    assert len(fails(r"\[ 6 \cdot 27 \sqrt{3} = 160 \sqrt{3} \]")) == 1
    assert len(fails(r"\[ \frac{1}{4} \left( 16 + 4 + 4 \right) = 7 \]")) == 1


def test_a_side_with_an_unread_symbol_is_not_cut_short():
    assert fails(r"\[ \frac{1}{2} = \left( \frac{\sqrt{2}}{2} \right) \sec \phi \]") == []
    assert fails(r"\[ \binom{5}{2} \cdot 3 = 30 \]") == []  # \binom is not read: unchecked, not cut
    assert fails(r"To solve \(\cos 60^{\circ} = \cos 45^{\circ} \cos \theta\), where") == []


def test_equation_numbers_and_style_commands():
    assert passes(r"\[ \displaystyle 2 + 3 = 5 \tag{1} \]")
    assert len(fails(r"\begin{equation} 2 + 3 = 6 \label{eq:1} \end{equation}")) == 1


def test_digit_groups_in_latex_are_one_number():
    assert passes(r"\[ 1,\!000 \cdot 2 = 2,\!000 \]") and fails(r"\[ 1,\!000 \cdot 2 = 2,\!000 \]") == []
    assert fails(r"\[ 10\,000 \cdot 2 = 20\,000 \]") == []
    assert len(fails(r"\[ 1,\!000 \cdot 2 = 3,\!000 \]")) == 1


def test_binomial_coefficients_of_whole_numbers():
    assert passes(r"so \(\binom{5}{2} = 10\) and \(2 \cdot \dbinom{6}{3} = 40\)") == [
        r"\binom{5}{2} = 10", r"2 \cdot \dbinom{6}{3} = 40"]
    assert len(fails(r"\(\dbinom{6}{3} = 21\)")) == 1
    assert fails(r"\(\binom{n}{2} = 10\)") == []  # a symbol: unread, unchecked


def test_a_minus_opening_a_display_formula_is_no_list_bullet():
    assert fails("Therefore,\n\\[ -\\sin(75^\\circ) \\sin(15^\\circ) = -\\frac{1}{4} \\]") == []
    assert fails("So\n\\[ - 3 + 5 = 2 \\]") == []
    assert len(fails("So\n\\[ - 3 + 5 = 8 \\]")) == 1
    assert fails("Steps:\n- 5 + 3 = 8\n- 2 * 4 = 8") == []  # real bullets stay bullets


def test_plus_or_minus_is_not_a_boundary():
    assert fails(r"\[ x = 2 \pm 1 = 3 \]") == []
    assert fails("so x = 5 ± 2 = 3 or 7") == []
    assert len(fails(r"\[ x = 2 \pm 1 \] where \( 2 + 1 = 4 \)")) == 1


def test_subfactorial_is_not_a_cut_number():
    assert fails(r"\[!5 = 120 \left(\frac{1}{2} - \frac{1}{6} + \frac{1}{24} - \frac{1}{120}\right) = 44\]") == []
    assert fails(r"\( 6 \times !5 = 6 \times 44 = 264 \)") == []
    assert len(fails(r"\( 6 \times !5 = 6 \times 44 = 266 \)")) == 1


def test_delimiters_inside_code_are_not_math():
    from verifiers.arithmetic._latex import math_spans

    text = "Run `grep '\\[' file` then 2 + 2 = 5 and `echo \\]` later, or ```\necho $HOME\n``` and $x$."
    spans = math_spans(text)
    assert [text[s:e] for s, e in zip(spans.starts, spans.ends)] == ["x"]
    assert len(fails(text)) == 1


def test_money_dollars_are_not_math_delimiters():
    assert passes("It costs $5 and $10, so $5 + $10 = $15.")
    assert len(fails("It costs $5 and $10, so $5 + $10 = $16.")) == 1


# --- modular, digit and remainder contexts ------------------------------------------------------

@pytest.mark.parametrize("answer", [
    "The units digit of 16^17 is 6.",
    r"Working mod 10: \( 5 \cdot 3 \cdot 3 = \boxed{5} \).",
    r"\[ 4^2 = 16, \quad 4^4 = 256 \equiv 6 \pmod{25}, \quad 4^6 = 6 \cdot 16 = 96 \equiv 21 \pmod{25} \]",
    "The remainder when 2004 is divided by 12 is 0.",
    r"\[ -161 \div 13 = -12 \text{ remainder } -5 \]",
    "17 / 5 = 3 remainder 2",
])
def test_modular_digit_and_remainder_statements_right(answer):
    assert fails(answer) == []


@pytest.mark.parametrize("answer", [
    "The units digit of 16^17 is 4.",
    r"Working mod 10: \( 5 \cdot 3 \cdot 3 = \boxed{7} \).",
    "The remainder when 2004 is divided by 12 is 5.",
    r"\[ -161 \div 13 = -12 \text{ remainder } -6 \]",
    "17 / 5 = 3 remainder 1",
])
def test_modular_digit_and_remainder_statements_wrong(answer):
    assert len(fails(answer)) == 1


def test_the_question_can_set_the_modulus():
    q = "Find the remainder when 7^100 is divided by 1000."
    assert fails(r"So \( 401 \cdot 7 = 2807 = \boxed{807} \).", q) == []
    assert len(fails(r"So \( 401 \cdot 7 = 2807 = \boxed{808} \).", q)) == 1
    assert fails("Then 7^4 = 2401 = 401.", q) == []
    assert len(fails("Then 7^4 = 2401 = 402.", q)) == 1


# --- negated, hypothetical, quoted claims and claims shown false -----------------------------

def test_negated_claims_are_not_flagged_but_the_real_one_is_checked():
    assert outcomes("We cannot make 5 + 3 = 9 because 5 + 3 = 8.") == [
        ("unknown", "5 + 3 = 9"), ("pass", "5 + 3 = 8")]
    assert fails("We cannot make 5 + 3 = 9 because 5 + 3 = 7.") == ["5 + 3 = 7"]


@pytest.mark.parametrize("answer", [
    'He wrote "2 + 2 = 5" on the board, but 2 + 2 = 4.',
    "Suppose 3 * 4 = 13; then we reach a contradiction.",
    r"Substituting \(a = 1\): \[ 2 \cdot 1^3 + 2^3 = 1^4 \cdot 2^2 \implies 10 = 4, \] which is false.",
    "Check: 60 = 5^2 + 6^2 = 25 + 36 = 61\n- This does not work.",
])
def test_claims_the_writer_does_not_assert(answer):
    assert fails(answer) == []


def test_a_false_claim_followed_by_unrelated_text_is_flagged():
    assert len(fails("So 2 + 2 = 5. This is the number of apples.")) == 1
    assert fails("Thus 20 groups can perform if 14 * 10 = 280 minutes are available.") == ["14 * 10 = 280"]


def test_a_prose_or_is_not_an_alternative():
    text = "He needs 3 feet of line for every 200 feet of dock, or 3/200=0.05 feet of line for every foot."
    assert fails(text) == ["3/200=0.05"]


def test_a_label_or_unit_after_a_formula_does_not_hide_its_claim():
    assert fails(r"the value is: \[ \frac{40}{5} = 8 \text{ dollars} \]") == []
    assert fails(r"the value is: \[ \frac{40}{5} = 3 \text{ dollars} \]") == [r"\frac{40}{5} = 3"]
    assert len(fails(r"\[15 (\text{light blue}) + 45 (\text{dark blue}) = 70 \text{ spools}\]")) == 1


def test_alternatives_joined_by_or_are_not_asserted():
    text = (r"This gives \[ 3 - 2r = 2r \quad \text{or} \quad 3 - 2r = -2r. \] The second equation "
            r"\(3 - 2r = -2r\) is not possible, so r = 3/4.")
    assert fails(text) == []


# --- identities and derivations with free variables ---------------------------------------------

@pytest.mark.parametrize("answer", [
    r"\[ \cos^2\theta = 1 - \sin^2\theta \]",
    r"\[ (a+b)^2 = a^2 + 2ab + b^2 \]",
    r"\[ D = (2k)^2 - 4(1)(7k - 10) = 4k^2 - 28k + 40 \]",
])
def test_identities_are_checked_symbolically_and_pass(answer):
    cs = arithmetic.check(answer)
    assert [c.outcome for c in cs] == ["pass"]
    assert cs[0].evidence["kind"] == "identity"


@pytest.mark.parametrize("answer", [
    r"\[ 4^2 = 2^2 + 3^2 - 2\cdot2\cdot3\cos C \]",  # an equation for C, not an identity
    r"\[ x^2 + y^2 = 2xy \]",  # a condition on x and y
    r"\[ 4k^2 - 28k + 40 = 0 \]",
    r"\[ f(0) = 2f(0) - 1 \]",  # a function applied, not a product
])
def test_equations_in_free_symbols_are_not_flagged(answer):
    assert fails(answer) == []


def test_an_equation_too_large_for_a_float_at_a_sample_point_is_not_a_verifier_error():
    # Omni-MATH answer: a^2013 is an exact rational at a sample point, p^n a float; their
    # difference overflowed the float and the whole answer came back as one `error` check
    text = (r"\[ a^{2013} + b^{2013} = p^n \] and also \[ 2 + 3 = 5 \]")
    cs = arithmetic.check(text)
    assert [c.outcome for c in cs] == ["pass"]
    assert cs[0].claim == "2 + 3 = 5"


def test_a_derivation_off_by_a_constant_is_flagged():
    assert len(fails(r"\[ D = (2k)^2 - 4(1)(7k - 10) = 4k^2 - 28k + 41 \]")) == 1
    assert len(fails(r"\[ (a+b)^2 = a^2 + 2ab + b^2 + 1 \]")) == 1


# --- real approximation slips stay flagged -------------------------------------------------------

@pytest.mark.parametrize("answer", [
    r"\[ \frac{199}{156} \approx 1.279 \]",
    r"\[ 11.5098 \times 720 = 8286.656 \]",
    r"\[ 1404 = 2^2 \times 3^2 \times 13 \]",
])
def test_real_slips_in_latex_stay_flagged(answer):
    assert len(fails(answer)) == 1


def test_a_number_approximately_equal_to_an_expression_states_no_precision():
    assert fails(r"$2^{10} = 1024 \approx 10^3$") == []


def test_a_right_approximation_passes():
    assert fails(r"\[ \frac{199}{156} \approx 1.276 \]") == []


# --- the question and the answer bound correctly -------------------------------------------------

def test_a_side_computation_is_not_the_answer():
    q = "What is 3*4?"
    assert fails("3 * 4 = 12. For comparison, 1000 * 1.05^3 = 1157.63.", q) == []
    assert fails("3 * 4 = 13. For comparison, 1000 * 1.05^3 = 1157.63.", q) == ["3 * 4 = 13"]


@pytest.mark.parametrize("answer,ok", [
    (r"Many steps later, \(\boxed{12}\).", True),
    (r"Many steps later, \(\boxed{13}\).", False),
    ("First 2 + 2 = 4, and the answer is 12.", True),
    ("First 2 + 2 = 4, and the answer is 14.", False),
])
def test_the_boxed_value_or_the_stated_answer_is_the_answer(answer, ok):
    cs = [c for c in arithmetic.check(answer, "What is 3*4?") if c.evidence.get("kind") == "question_link"]
    assert [c.outcome for c in cs] == (["pass"] if ok else ["fail"])


def test_the_value_of_the_expression_in_the_question():
    q = "What is the product of 97/117/0.6534725/0.27613576234/0.6734576?"
    assert [c.outcome for c in arithmetic.check("approximately 0.000191", q)] == ["fail"]
    assert [c.outcome for c in arithmetic.check("approximately 6.822", q)] == ["pass"]


def test_a_series_with_an_ellipsis_is_the_finite_sum():
    q = "What is 1/1! + 1/2! + … + 1/10!?"
    bad = arithmetic.check("approximately 1.7182818284590455", q)  # e - 1, not the finite sum
    assert [c.outcome for c in bad] == ["fail"]
    assert bad[0].expected.startswith("1.71828180")
    assert [c.outcome for c in arithmetic.check("approximately 1.718281801", q)] == ["pass"]
