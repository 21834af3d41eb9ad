"""Arithmetic and formula verifier: recompute every number an answer states.

Entry points
------------
``check(answer, question=None) -> list[Check]``
    Finds the arithmetic claims in ``answer`` and recomputes each one exactly. One ``Check``
    per claim (``verifier="arithmetic"``): ``outcome`` pass | fail | unknown, ``found`` (the
    value as stated), ``expected`` (the computed value at the stated precision), ``evidence``
    (``kind``, normalised ``expression``, exact ``value``, ``rule``, ``tolerance``), ``span``
    (offsets in ``answer``), ``confidence``. Text with no claim gives ``[]``. Never raises on
    model text; an internal fault gives one ``error`` check.

``equivalent(a, b) -> Check``
    Whether two formulas are equal: SymPy expansion/cancellation (symbols without assumptions)
    and, always, evaluation at sample points that are negative, near zero, fractional, ordinary
    and large (points where a side is undefined, or both are non-real, are skipped; real on one
    side and non-real on the other is a difference). ``pass`` = equivalent, ``fail`` = not
    equivalent (with a counterexample), ``unknown`` = could not decide, or the two paths
    disagreed (see ``_equivalent``).

Accepted syntax
---------------
* equations and chains ``3 * 4 = 12``, ``a = b = c``, ``≈`` / ``~`` / "about", "approximately",
  "roughly"; operators ``+ - * / × ÷ − · ^ **`` (``**`` with any spacing; markdown ``**bold**``
  is told apart by CommonMark's flanking rule), Python's ``//`` and ``%`` between operands
  (remainder), ``x`` between numbers, implicit multiplication ``2(3+4)``, parentheses, ``n!``,
  ``sqrt``/``√``, ``π``, superscripts ``2¹⁰ x⁻¹``, "to the power of", "raised to the 5th power";
* numbers ``11,607.55``, ``.5``, ``$45.50 € £ ¥``, ``12,50 €``, "dollars"/"cents", ``15%``,
  "percent", ``2 1/2``, ``2½ ⅗``, ``2.5 million``, ``50k``; ``15% of 80``, ``1/4 of 20``; other
  locales' grouping ``1.234.567`` / ``1.234,50`` (a decimal comma only when the text writes one
  so; one group after one separator, ``1.500`` / ``1,500``, is read the English way, and a claim
  that fails so but holds the other way is ``unknown``: see ``_other_locale``), ``1’234``, ``1 234 567`` (narrow/no-break spaces), ``12,34,567`` (lakh), ``1_000``;
* where claims stand: prose, LaTeX, Markdown tables (cells; an "Expression | Value" pair of
  columns states ``expression = value``), the comments of fenced code (the code itself is
  left to the code verifier);
* LaTeX ``$...$ \\(...\\) \\[...\\]``, ``\\frac \\dfrac \\times \\cdot \\div ^{..} \\sqrt \\text \\boxed``;
* GSM8K calculator notes ``<<48/2=24>>`` (checked on their own; removed from the prose);
* sentences: "add 2 to 12, which equals 14", "multiply 4 and 3 to get 12", "12 divided by 4
  is 3", "the difference between 20 and 7 is 13", "twice 8 is 16", "3 plus 4 is 7";
* number words as operands of a spoken operator ("three times 4 is 12", "Eight times four is
  32"), dozens ("4 dozen = 48 eggs", "a dozen is 12");
* unit conversions ``5 km = 3.11 miles``, ``72 °F is 22.2 °C`` (pint; whitelisted units),
  ``90 minutes = 1.5 hours``, calendar durations ``2 years = 24 months``, ``1 year = 365 days``
  (every calendar convention accepted, see ``_units``); rates whose units cancel are checked as
  arithmetic (``2 years * 12 months per year = 24 months``);
* the question/answer link: an arithmetic question ("4839+3948-45", "143287*534156=?",
  "what is 15% of 240?") and the answer's stated result ("The answer is 8739.").

Tolerance (see ``_tolerance``; rounding convention of NIST SP 811 sec. 7.9 / B.7)
---------------------------------------------------------------------------------
A value with k decimals passes when it is the correctly rounded result (``|computed - stated|
<= 0.5*10^-k`` plus a relative 1e-9); approximate statements pass at the stated significant
figures; money passes to the cent; truncated values and values consistent with rounded
intermediates are ``unknown``, never ``fail``. A claim that cannot be parsed with confidence is
``unknown`` (calculator notes) or not a claim at all (prose).

Confidence
----------
``pass``: 1.0 when exact, 0.95 when the stated value is the rounded result; ``fail``: 0.95 for
``expression = number``, 0.85 for sentences and reversed ``number = expression``, 0.7 when two
computations disagree; ``unknown``: 0.5; the question/answer link is capped at 0.9.

Two evaluators before a failure (``_confirm``)
-----------------------------------------------
A ``fail`` drives a correction, so it stands only when a second, independent evaluation of
the same span agrees with the first: SymPy's parser (``parse_expr``, Python's grammar) reads
the written text when it is plain arithmetic, otherwise the span re-read token by token, and
an exact walk over SymPy's tree computes it. ``evidence.second_evaluation`` holds what it read
and its values. When the values differ, or the second evaluation cannot read the claim, the
check is ``unknown`` (0.5) with both values. Unit conversions (pint), remainders (``divmod``)
and identities (SymPy and sampled points already) are not re-evaluated.

Limits and safety
-----------------
Model text is never given to ``eval``, ``sympify`` or ``parse_expr``: a tokeniser and a
recursive-descent parser accept only the grammar in ``_tokens`` and build plain tuples; SymPy
objects (for ``equivalent``) are built from those tuples. The second evaluation gives
``parse_expr`` only strings it assembled and checked against a whitelist of characters and
names (``_confirm``). Work is bounded per expression:
integer powers whose result needs more than 20,000 bits, exponents above 10,000, factorials
above 300!, trees above 400 nodes or 40 levels are refused (``unknown``). Answers longer than
``MAX_CHARS`` are checked on their first ``MAX_CHARS`` characters, and one ``unknown`` check
(``evidence.kind == "truncated"``) says so; at most ``MAX_CLAIMS``
checks are returned. The answer's budget (``budget_ms``) is counted in operations, not wall time
(``_work``): the same answer gives the same checks under any load. A calculation written in
numbers alone that no check covers is one ``unknown`` check of kind ``unread`` with why
(:func:`_unread_statements`), never left out. Algebra with symbols is not checked (``x = 12/3 = 4`` checks ``12/3 = 4``).

Where it lives, a private module per concern: ``_entry`` (:func:`check`, :func:`warm_up`, the
limits), ``_read`` (one reading of the answer: calculator notes, claims window by window,
remainder sentences), ``_question`` (the question/answer link), ``_ambiguous`` (claims that read
two ways: other grouping, bitwise XOR, other locale, right-to-left embeddings), ``_coverage``
(calculations and stated results no check covers); below them ``_claims`` (the claim finder; ``_segments``, ``_sampling``,
``_claim_units``, ``_shapes`` beside it),
``_tokens``, ``_normalize``, ``_latex``, ``_mapped``, ``_expr``, ``_tolerance``, ``_confirm``,
``_equivalent``, ``_units``, ``_consistency``, ``_work``.
"""

from verifiers.arithmetic._entry import BUDGET_MS, MAX_CHARS, check, warm_up
from verifiers.arithmetic._equivalent import equivalent
from verifiers.arithmetic._read import MAX_CLAIMS

# Also importable from here as before, outside the stated surface:
from verifiers.arithmetic._claims import VERIFIER
from verifiers.arithmetic._expr import evaluate


__all__ = ["check", "equivalent", "warm_up", "MAX_CHARS", "MAX_CLAIMS", "BUDGET_MS"]
