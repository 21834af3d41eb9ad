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
"""

from __future__ import annotations

import ast
import operator
import re
from fractions import Fraction
from verifiers._limits import unread_check
from verifiers._types import Check
from verifiers.arithmetic import _consistency
from verifiers.arithmetic._claims import VERIFIER, ClaimFinder, _same_value
from verifiers.arithmetic._confirm import Unconfirmed, expression_string, second_value
from verifiers.arithmetic._confirm import _number as _confirm_number
from verifiers.arithmetic._equivalent import equivalent
from verifiers.arithmetic._expr import NotNumeric, Refused, evaluate, format_value, has_operation, has_var, literal_from_text, to_text
from verifiers.arithmetic._latex import REMAINDER_SENTENCE, math_spans
from verifiers.arithmetic._mapped import MappedText
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tokens import ParseError, parse, runs, runs_with_context, tokenize
from verifiers.arithmetic._tolerance import judge
from verifiers.arithmetic._work import COST_BASE, COST_CHAR, COST_SECOND, Work

__all__ = ["check", "equivalent", "warm_up", "MAX_CHARS", "MAX_CLAIMS", "BUDGET_MS"]

#: characters of an answer read (the rest: one ``unknown`` check says so)
MAX_CHARS = 60_000
#: checks returned at most per answer
MAX_CLAIMS = 500
#: default work budget of one :func:`check` call, in milliseconds of the reference machine
#: (counted in operations, not wall time: ``_work``; checked between claims)
BUDGET_MS = 250.0

_DOLLAR = re.compile(r"\$")
_NOTE = re.compile(r"<<([^<>\n]{1,400})>>")
_CLAIM_LINE = re.compile(r"(?m)^(?=[^\n]*\d)(?=[^\n]*[=≈\ue000\ue001])[^\n]*$")


def warm_up() -> None:
    """Build the pint unit registry (~0.5-1 s once) and import SymPy and its parser (~0.5 s once) now, instead
    of inside the first request that states a unit conversion or an identity with symbols (a
    first import inside a request would use up its time budget). Call it at gateway start-up."""
    from verifiers.arithmetic._units import _registry

    _registry()
    check("\\[ (a+b)^2 = a^2 + 2ab + b^2 \\]", budget_ms=10_000)
    second_value("2 ** 10 + sqrt 2")  # SymPy's parser, for the second evaluation of a failure


def check(answer: str, question: str | None = None, *, budget_ms: float = BUDGET_MS) -> list[Check]:
    """Verify the arithmetic claims of ``answer`` (see the module docstring for the syntax,
    the tolerance rule and the limits). ``question`` (the user's message) adds the
    question/answer link claim when the question is itself arithmetic.

    Returns one ``Check`` per claim, in text order (calculator notes first). ``budget_ms``
    bounds the work, counted in operations at fixed costs (``_work``: milliseconds of the
    reference machine, never the wall clock, so the same answer gives the same checks under any
    load): past it, the rest of the answer is left unchecked and one ``unknown`` check
    (``evidence.kind == "budget"``) says so, and a question/answer link that would fail is
    ``unknown`` (the claim that states the answer may be in the unread rest). Never raises on
    untrusted text: a fault of the verifier itself is reported as one ``error`` check.
    """
    if not isinstance(answer, str) or not answer.strip():
        return []
    text = answer[:MAX_CHARS]
    try:
        checks = _check(text, question if isinstance(question, str) else None, Work.of_ms(budget_ms))
        _other_locale(text, checks)
        _other_grouping(checks)
        _bitwise_xor(checks)
        _right_to_left(text, checks)
    except RecursionError:
        return [Check(verifier=VERIFIER, claim="", outcome="unknown", confidence=0.5,
                      note="input nested too deeply to check")]
    except Exception as exc:  # the verifier's own fault: report, never crash the gateway
        return [Check(verifier=VERIFIER, claim="", outcome="error", confidence=0.0,
                      evidence={"error": type(exc).__name__}, note=f"arithmetic verifier failed: {exc}")]
    checks += _consistency.check(text, question)  # docs/arithmetic.md: defined with one value, used with another
    checks += _unread_statements(text, checks)
    checks += _unchecked_results(text, question, checks)
    if len(answer) > MAX_CHARS:  # say the rest was not read, never a silent `skipped`
        return checks[:MAX_CLAIMS - 1] + [unread_check(VERIFIER, limit="MAX_CHARS", limit_value=MAX_CHARS,
                                                       checked=MAX_CHARS, total=len(answer))]
    return checks[:MAX_CLAIMS]


_RESTATED = re.compile(r"\s*\+?\s*(\d[\d,]*(?:\.\d+)?)\s*=\s*(\d[\d,]*(?:\.\d+)?)\s*")


def _restatement(note: str) -> bool:
    """True for a calculator note that computes nothing: one number set equal to the same number
    (``<<6=6>>``, ``<<+8=8>>``, ``<<1,200=1200>>``; GSM8K writes these for a value carried over).
    Such a note is no check-worthy unit: reporting it ``unknown`` made right answers
    ``unverified``."""
    m = _RESTATED.fullmatch(note)
    if m is None:
        return False
    a, b = (Fraction(x.replace(",", "")) for x in m.groups())
    return a == b


def _check(text: str, question: str | None, work: Work) -> list[Check]:
    """The checks of one reading of ``text``, spending ``work`` (see ``_work``); past it, one
    ``unknown`` check of kind ``budget`` covers the rest."""
    checks: list[Check] = []
    work.spend(COST_BASE)
    has_notes = "<<" in text
    if has_notes:
        for m in _NOTE.finditer(text):
            inner = m.group(1)
            if _restatement(inner):  # "<<6=6>>": nothing computed, nothing to check (not a unit)
                continue
            mt = normalize(inner, soft=False)
            finder = ClaimFinder(mt, text, offset=m.start(1), kind="calculator_note", strict=True, work=work)
            note_runs = runs(tokenize(mt.text))
            if len(note_runs) == 1:  # a note is one expression chain; anything else is not arithmetic
                finder.run(note_runs[0])
            if not finder.checks and "=" in inner:
                finder.checks.append(Check(verifier=VERIFIER, claim=inner, outcome="unknown", confidence=0.5,
                                           span=(m.start(1), m.end(1)), evidence={"kind": "calculator_note"},
                                           note="could not parse the calculator note"))
            checks.extend(finder.checks)
    base = MappedText(text).sub(_NOTE, [""]) if has_notes else MappedText(text)
    note_ends = {m.end() for m in _NOTE.finditer(text)} if has_notes else set()
    spans = math_spans(text)
    if spans.dollars:  # inline "$...$" formulas (not money): their delimiters end claims
        base = base.sub(_DOLLAR, lambda m: [" \n "] if base.pos[m.start()] in spans.dollars else None)
    mt = normalize(base, original=text)
    region_of = _region_lookup(spans, mt.pos) if spans else None
    finder = ClaimFinder(mt, text, kind="equation", note_ends=note_ends, spans=spans if spans else None,
                         question=question, work=work)
    norm = mt.text
    stopped = False
    for line in _CLAIM_LINE.finditer(norm):  # a claim needs a digit and "=" / a result word
        for start, end in _windows(norm, line.start(), line.end()):
            if len(finder.checks) >= MAX_CLAIMS - 1 or work.over:
                finder.checks.append(Check(verifier=VERIFIER, claim="", outcome="unknown", confidence=0.5,
                                           span=(mt.orig_span(start, start + 1)[0], len(text)),
                                           evidence={"kind": "budget", "work_units": work.spent,
                                                     "limit_units": work.limit},
                                           note="stopped: claim or work budget reached; the rest is unchecked"))
                stopped = True
                break
            work.spend(COST_CHAR * (end - start))
            if end - start > MAX_WINDOW // 2 and not _HAS_EQ.search(norm, start, end):
                continue
            for before, run in runs_with_context(tokenize(norm, start=start, end=end, math=region_of)):
                finder.run(run, before)
        if stopped:
            break
    for c in finder.checks:
        if c.evidence.get("kind") == "equation" and _is_sentence(mt, c):
            c.evidence["kind"] = "natural_language"
    checks.extend(finder.checks)
    if "emainder" in text:
        checks.extend(_remainder_sentences(text))
    if question:
        link = _question_link(text, question, checks, work)
        if link is not None:
            if stopped and link.outcome == "fail":  # the unread rest may state the question's expression
                link.outcome, link.confidence = "unknown", 0.5
                link.note = f"{link.note}; not failed: the answer was not read to its end (work budget)"
            checks.append(link)
    return checks


#: A stated result: "the answer is N", "Final answer: N", "so the total is N", "therefore N",
#: "N pencils in total" -- the number the reader takes away.
_RESULT = re.compile(
    r"(?i)(?:\b(?:final\s+answer|the\s+answer\s+is|answer\s*:|the\s+(?:total|result|sum|product|difference|"
    r"quotient|price|cost|area|perimeter|volume|amount|balance)\s+(?:is|comes\s+to|will\s+be|was)|so\s+(?:there\s+are|"
    r"we\s+get|it\s+is|you\s+get|the\s+answer\s+is)|therefore|thus|hence)\b[^\d\n.=]{0,40}?"
    r"(?P<num>[-\u2212]?[$\u20ac\u00a3]?\d[\d,]*(?:\.\d+)?)(?![\d.,]*\s*[-+*/\u00d7\u00f7^=])"
    r"|(?P<num2>[$\u20ac\u00a3]?\d[\d,]*(?:\.\d+)?)\s+(?:[a-z]+\s+){0,2}(?:in\s+total|altogether|in\s+all)\b)")


#: "6/2(1+2)", "6 ÷ 2(1 + 2)": a number right after a division, multiplied by a bracket with no
#: sign between them
_DIV_JUXTAPOSED = re.compile(r"([/÷])\s*(\d+(?:[.,]\d+)?)\s*\(")
#: "2^3^2": a chain of carets (not Python's "**", whose grouping is the language's)
_CARET_CHAIN = re.compile(r"(?<![\d.^)])(\d+(?:\.\d+)?)\s*\^\s*(\d+(?:\.\d+)?)(?=\s*\^)")


def _juxtaposed(claim: str) -> str | None:
    """``claim`` with each implicit product after a division grouped first ("6/2(1+2)" ->
    "6/(2(1+2))"), or None when it has none."""
    out, last, changed = [], 0, False
    for m in _DIV_JUXTAPOSED.finditer(claim):
        if m.start() < last:
            continue
        depth, k = 0, m.end() - 1
        while k < len(claim):
            depth += {"(": 1, ")": -1}.get(claim[k], 0)
            if depth == 0:
                break
            k += 1
        if k >= len(claim):
            return None
        out += [claim[last:m.start(1) + 1], "(", claim[m.start(2):k + 1], ")"]
        last, changed = k + 1, True
    return "".join(out) + claim[last:] if changed else None


def _other_grouping(checks: list[Check]) -> None:
    """A failed claim whose grouping writers and tools disagree on is re-read the other way, and
    is ``unknown`` (not ``fail``) when that reading holds: an implicit product after a division
    ("6/2(1+2) = 1": many textbooks, physics journals and calculators bind the juxtaposed product
    first, 6/(2(1+2)); Python and this parser read (6/2)(1+2)) and a chain of carets ("2^3^2 = 64":
    Excel and MATLAB group to the left, mathematics to the right); the claim is ambiguous as
    written (docs/design.md "False alarms cost more than misses"). At most :data:`_MAX_REREADS`
    claims are re-read; one past them, or whose re-reading ran out of work budget, is
    ``unknown`` unread (:func:`_not_reread`)."""
    todo = []
    for c in checks:
        if c.outcome == "fail" and c.claim and (_DIV_JUXTAPOSED.search(c.claim) or _CARET_CHAIN.search(c.claim)):
            other = _CARET_CHAIN.sub(r"(\1^\2)", _juxtaposed(c.claim) or c.claim)
            if other != c.claim:
                todo.append((c, other, f"the claim holds read as {other} (its grouping is ambiguous)"))
    _reread(todo, "other_grouping")


#: a claim in whole numbers, the operators Python writes and "^" among them, "=", "==" or a
#: result word, and one whole number (backticks of inline code allowed): ``2 ^ 10 = 8`` is true in Python, C, Java and JavaScript, where "^" is XOR
_XOR_CLAIM = re.compile(r"\s*`?([\d\s()+\-*/%^&|]*\^[\d\s()+\-*/%^&|]*?)`?\s*"
                        r"(?:==?|gives|is|equals|evaluates\s+to|returns|yields|prints)\s*`?(-?\d+)`?\s*")
_XOR_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
            ast.Mod: operator.mod, ast.BitXor: operator.xor, ast.BitAnd: operator.and_, ast.BitOr: operator.or_}


def _python_int(node: ast.AST) -> int:
    """The value of a whole-number expression tree as Python computes it (``^`` is XOR, ``**``
    powers with a result of at most 2,000 bits); ValueError for anything else. Walks the tree:
    nothing is evaluated."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = _python_int(node.operand)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp):
        a, b = _python_int(node.left), _python_int(node.right)
        if isinstance(node.op, ast.Pow):
            if b < 0 or b * max(1, abs(a).bit_length()) > 2000:
                raise ValueError("power out of range")
            return a ** b
        fn = _XOR_OPS.get(type(node.op))
        if fn is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b == 0):
            raise ValueError("not a whole-number operation")
        return fn(a, b)
    raise ValueError("not a whole-number expression")


def _bitwise_xor(checks: list[Check]) -> None:
    """A failed claim with "^" between whole numbers (:data:`_XOR_CLAIM`) that holds read as
    Python's bitwise XOR ("In Python, 2 ^ 10 = 8") is ``unknown``, not ``fail``: Python, C, Java
    and JavaScript write "^" for XOR (Python language reference, "Binary bitwise operations"),
    mathematics for a power, and the claim is true in one of them (docs/design.md "False alarms
    cost more than misses"). The reading is Python's own grammar (``ast``, the tree walked by
    :func:`_python_int`; ``/`` is not whole-number and is not read). Mutates ``checks``."""
    for c in checks:
        if c.outcome != "fail" or "^" not in (c.claim or ""):
            continue
        m = _XOR_CLAIM.fullmatch(c.claim)
        if m is None or "/" in m.group(1).replace("//", ""):
            continue
        try:
            from verifiers._pyast import parse as _parse

            value = _python_int(_parse(m.group(1).strip(), mode="eval").body)  # type: ignore[attr-defined]
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        if value == int(m.group(2)):
            c.outcome, c.confidence = "unknown", 0.5
            c.evidence["bitwise_xor"] = {"reading": m.group(1).strip(), "value": str(value)}
            c.note = f"{c.note}; not failed: read as Python's bitwise XOR, {m.group(1).strip()} is {value}".lstrip("; ")


#: A right-to-left embedding or isolate (U+202B RLE, U+2067 RLI, U+2068 FSI) to its closing
#: U+202C / U+2069 or the line's end: what it holds is laid out right to left, its runs reordered
#: (UAX #9), so "10 - 4 = 6" in one may display as "6 = 4 - 10".
_RTL_RUN = re.compile("[\u202b\u2067\u2068][^\u202c\u2069\n]*")


def _right_to_left(text: str, checks: list[Check]) -> None:
    """A claim inside a right-to-left embedding or isolate (:data:`_RTL_RUN`) is ``unknown``:
    the order the reader sees it in is not the order it is stored in, and the verifier checks the
    stored one. (A right-to-left *override* reverses every character and is read as displayed by
    ``normalize``.) Mutates ``checks`` in place."""
    if not any(ch in text for ch in "\u202b\u2067\u2068"):
        return
    runs = [m.span() for m in _RTL_RUN.finditer(text)]
    for c in checks:
        if c.outcome in ("pass", "fail") and c.span and any(a < c.span[1] and c.span[0] < b for a, b in runs):
            c.outcome, c.confidence = "unknown", 0.5
            c.note = "written inside a right-to-left embedding (U+202B/U+2067/U+2068): it may display in another order"
            c.evidence["bidi"] = "right-to-left embedding"


#: a number with one separator and one group of three digits after it ("1.500", "1,500"): a
#: decimal in one locale, a thousands group in another (CLDR: "." groups and "," decimals in de,
#: es, it, pt, nl, tr, id; the other way round in en). A leading zero ("0.125") groups nothing.
_AMBIGUOUS = re.compile(r"(?<![\d.,'’])([1-9]\d{0,2})([.,])(\d{3})(?![\d'’]|[.,]\d)")

_MAX_REREADS = 20
#: work units (``_work``) all re-readings of one kind (other grouping, other locale) may spend
#: together, on top of the answer's own budget (which may be spent by then): a claim left unread
#: is ``unknown`` (:func:`_not_reread`), never ``fail``. Counted, not timed, so which claims are
#: re-read does not depend on the machine's load
_REREAD_UNITS = 250_000


def _reread(todo: list[tuple[Check, str, str]], key: str) -> None:
    """Check the second reading of each failed claim in ``todo`` (``(check, reading, note when it
    holds)``): where the reading does not fail, the check becomes ``unknown`` with evidence
    ``key`` -- its failure stands only where both readings fail (docs/design.md "False alarms
    cost more than misses"). At most :data:`_MAX_REREADS` readings, all within :data:`_REREAD_UNITS`
    units of work; the rest are ``unknown`` unread (:func:`_not_reread`). Mutates the checks in
    place."""
    work = Work(_REREAD_UNITS)
    for n, (c, reading, holds) in enumerate(todo, 1):
        if n > _MAX_REREADS:
            _not_reread(c, key, reading, f"more than {_MAX_REREADS} such claims")
            continue
        got = _check(reading, None, work)
        if any(r.evidence.get("kind") == "budget" for r in got):
            _not_reread(c, key, reading, "its work budget ran out")
            continue
        reread = [r for r in got if r.outcome in ("pass", "fail", "unknown")]
        if reread and not any(r.outcome == "fail" for r in reread):
            c.outcome, c.confidence = "unknown", 0.5
            c.evidence[key] = {"reading": reading, "outcomes": [r.outcome for r in reread]}
            c.note = f"{c.note}; not failed: {holds}".lstrip("; ")


def _not_reread(c: Check, key: str, reading: str, why: str) -> None:
    """Make failed check ``c`` ``unknown``: it has a second reading (``reading``, under evidence
    ``key``) that was not tried (``why``: past :data:`_MAX_REREADS` claims, or out of its work budget). Its
    failure stands only where both readings fail, so an untried one cannot confirm it: the 21st
    right German sum of an answer was failed where the first 20 were ``unknown``."""
    c.outcome, c.confidence = "unknown", 0.5
    c.evidence[key] = {"reading": reading, "outcomes": None, "not_reread": why}
    c.note = f"{c.note}; not failed: it also reads as {reading}, not re-read ({why})".lstrip("; ")


#: numbers only one locale writes: English grouping with decimals or several groups
#: ("1,234.5", "1,234,567"), a decimal point with other than three decimals ("2.5", "0.1234",
#: also at a sentence's end: "$2.50.")
_ENGLISH = re.compile(r"\d,\d{3}\.\d|\d,\d{3},\d{3}(?!\d)|(?<![\d.,])\d+\.(?:\d{1,2}|\d{4,})(?![\d,]|\.\d)")
#: and the other ones: "1.234,5", "1.234.567", a decimal comma with one or two decimals ("2,5",
#: also at a sentence's end: "0,75.")
_CONTINENTAL = re.compile(r"\d\.\d{3},\d|\d\.\d{3}\.\d{3}(?!\d)|(?<![\d.,])\d+,\d{1,2}(?![\d,]|\.\d)")


#: what stands right before a number that names something rather than counts it: a word or a
#: letter it is glued to ("v2.5", "GPT-3.5", "python3.12"), a capitalised word ("Python 3.12",
#: "Node 18.17": a name; at a sentence's start it may be an ordinary word, "Each 2.5 kg", and
#: the number then goes uncounted, which only makes a second reading more likely), "§"/"#"/"No.", a word that numbers sections, versions, standards,
#: figures or pages ("section 4.1", "Abschnitt 2.3", "version 1.25", "page 3.12"), a preposition of
#: time before a clock time ("at 12.30", "um 12.30 Uhr"). Such a number says nothing about how its
#: writer groups digits: "Mit Python 3.12: 1.500 + 250 = 1.750" is a German sum.
_NAME_BEFORE = re.compile(
    r"(?:[^\W\d_][-_/]?|[§#¶]\s?|(?-i:\b[A-Z][^\W\d_]+\s)|\b(?:version|ver|release|rel|v|section|sect|sec|chapter|ch|"
    r"abschnitt|kapitel|art|artikel|absatz|abs|paragraph|para|par|figure|fig|abbildung|abb|table|tab|tabelle|"
    r"step|schritt|no|nr|nummer|number|item|punkt|rule|regel|theorem|satz|lemma|definition|def|equation|eq|"
    r"gleichung|formula|formel|page|seite|vol|band|edition|ausgabe|auflage|iso|din|en|rfc|ieee)\.?\s"
    r"|\b(?:at|um|ab|bis|gegen|from|until|till|by)\s(?=[0-2]?\d\.[0-5]\d\b))$", re.I)
#: a clock time after the number ("12.30 Uhr", "9.45 am")
_CLOCK_AFTER = re.compile(r"\s?(?:uhr|h|am|pm|a\.m\.|p\.m\.|o'clock)\b", re.I)
#: a day and month with a dot after them ("am 12.03.", "bis 1.10.")
_DAY_MONTH = re.compile(r"(?:0?[1-9]|[12]\d|3[01])\.(?:0?[1-9]|1[0-2])\.")
#: code (fenced blocks, inline spans): programming languages write "." decimals in every locale
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`", re.S)


def _quantities(pattern: re.Pattern[str], text: str, names: bool = True) -> bool:
    """Whether ``text`` writes a number ``pattern`` matches as a quantity: not in code
    (:data:`_CODE`), not a name's number (:data:`_NAME_BEFORE`: versions, sections, standards,
    clock times), not a day and month (:data:`_DAY_MONTH`), not part of a date or a version with
    more parts ("12.03.2024", "3.12.1": the locale patterns exclude a further separator and
    digit). ``names=False`` keeps names' numbers (decimal commas: "Je 0,5 kg"; no version or
    section is written so)."""
    prose = _CODE.sub(" ", text)
    for m in pattern.finditer(prose):
        s = m.start()
        while s > 0 and prose[s - 1].isdigit():
            s -= 1  # the number's first digit ("1,234.5" is matched from its last group)
        if names and (_NAME_BEFORE.search(prose[max(0, s - 24):s]) or _CLOCK_AFTER.match(prose, m.end())
                      or _DAY_MONTH.fullmatch(prose, s, m.end() + 1)):
            continue
        return True
    return False


#: common words of languages whose numbers group with "." and mark decimals with "," (CLDR:
#: de, es, it, pt, nl; fr writes decimal commas too), and of English; words shared with English
#: or used as variables ("die", "also", "per", "a", "e", "y", "et") are left out
_CONTINENTAL_WORDS = frozenset(
    "und der das den dem des ist sind mit für nicht ein eine einen einer auf von zu zum zur auch oder wird werden "
    "bei nach zusammen ergibt gleich insgesamt beträgt kostet wir sie gibt laut gemäß siehe summe preis stück "
    "jedes jede über durch wenn dann dass weil noch nur sich haben kann müssen "
    "el los las es con para por una del que son pero como más entonces resultado cada "
    "il di che è sono gli della più quindi ogni "
    "os é com uma são não então "
    "het een van met voor niet zijn ook dan totaal elke "
    "le les est avec pour une sont pas donc chaque ce".split())
_ENGLISH_WORDS = frozenset(
    "the and is with for of to are we that this it so then each total which be has have was not or by from at as "
    "on an its there here what when how if than into".split())
_WORD = re.compile(r"[^\W\d_]+")


def _continental_prose(text: str) -> bool:
    """Whether the answer's prose is in a language that writes "1.500" for fifteen hundred and
    "2,5" for two and a half: more of its common words (:data:`_CONTINENTAL_WORDS`) than of
    English's, at least two of them or one in an answer with no English word."""
    words = _WORD.findall(_CODE.sub(" ", text).lower())
    cont = sum(w in _CONTINENTAL_WORDS for w in words)
    eng = sum(w in _ENGLISH_WORDS for w in words)
    return cont > eng and (cont >= 2 or eng == 0)


def _other_locale(text: str, checks: list[Check]) -> None:
    """A failed claim whose numbers read differently in the other locale (:data:`_AMBIGUOUS`) is
    re-read that way ("1.500 € + 250 € = 1.750 €" is 1500 + 250 in German; "1,500 × 2 = 3" is
    1.5 × 2 where the text also writes "2,5"): when that reading does not fail, the claim is
    ``unknown``, not ``fail``. A claim whose ambiguous numbers are all "," groups is re-read only
    where the text writes a number only the other locales write (:data:`_CONTINENTAL`) or its
    prose is in one of their languages (:func:`_continental_prose`). The text
    decides nothing here (``normalize`` keeps one group without decimals English, so
    ``1.500`` was 1.5 and a right German sum was failed and re-asked); a claim that itself writes
    a number only English writes ("36,791 × 10 = 367.91") has no other locale's reading, and its
    failure stands; false alarms cost more than misses (docs/design.md "False alarms cost more
    than misses"), and an English claim that is wrong only by that coincidence is
    rare. Not where the rest of the answer writes quantities only English writes (:data:`_ENGLISH`:
    "$2.50", "1,234.5") and neither a quantity only the other locales write nor prose in one of
    their languages; a number that names something (a version, section, standard, date or clock
    time, or any number in code: :func:`_quantities`) is no evidence either way. Not in GSM8K calculator notes
    (written in English by construction). At most :data:`_MAX_REREADS` claims are re-read, each
    within a work budget of their own (the answer's own may be spent by then); one past them, or
    whose re-reading ran out of it, is ``unknown`` unread (:func:`_not_reread`). Mutates
    ``checks`` in place."""
    continental = _quantities(_CONTINENTAL, text, names=False) or _continental_prose(text)
    if not continental and _quantities(_ENGLISH, text):
        return  # the answer writes its quantities the English way elsewhere: no second reading
    # a "." group ("1.500") is unusual English (a decimal with three places) and the usual
    # continental thousands; a "," group ("75,000") the other way round: re-read it only where
    # the text writes a number only the other locales write. GSM8K's model answers in English
    # with "," groups alone lost real catches otherwise ("x=25,000 ... 25*3=75,000")
    todo = []
    for c in checks:
        if (c.outcome == "fail" and c.evidence.get("kind") != "calculator_note"
                and any(m.group(2) == "." or continental for m in _AMBIGUOUS.finditer(c.claim or ""))
                and not _ENGLISH.search(c.claim)):  # "36,791 × 10 = 367.91": "367.91" has no other reading
            swapped = _AMBIGUOUS.sub(lambda m: m.group(1) + ("" if m.group(2) == "." else ".") + m.group(3), c.claim)
            todo.append((c, swapped, f"read with the other locale's separators ({swapped}) the claim holds"))
    _reread(todo, "other_locale")


_ST_NUM = r"\d++(?:[.,]\d++)*+"  # possessive: a run of 50,000 digits is read once, not backtracked
_ST_OPERAND = rf"(?:\(\s*[-−]?{_ST_NUM}\s*\)|{_ST_NUM})"
#: an operator, or a bracket juxtaposed with a number ("(2) 3", "2 (3)")
_ST_OP = r"(?:\s*[-+*/×÷·^−]\s*|(?<=\))\s*|\s+(?=\())"
#: a calculation stated in numbers alone: operands and operators, "=", one number, and nothing
#: after it that continues a formula ("= 2x", "= 13 - 4", "= 1 × x"). It starts only where a
#: chain starts and reads it possessively (linear time on "1+1+...+1+= 3")
_STATEMENT = re.compile(
    rf"(?<![\d.,\-+*/×÷·^−)])(?<![\-+*/×÷·^−)] ){_ST_OPERAND}(?:{_ST_OP}{_ST_OPERAND})++\s*=\s*[-−]?{_ST_NUM}"
    r"(?![\d.,]?\d|[^\W\d_]|\s*[-+*/×÷·^−(=]\s*[\w(])")
#: what may stand right before such a statement for it to be whole (not the tail of a formula:
#: "X*4 + 240 = 1920", "101A + 20 + 5 = 32", "\cdot 2 - 6 = 6")
_STATEMENT_CUT = re.compile(r"(?:[\w.,^$\\'’]|\\[a-zA-Z]+\s*|[+\-*/×÷·=−<>)\]{}]\s*)$")
#: regions not read for claims in prose: fenced and inline code, calculator notes
_NOT_PROSE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]*`|<<[^<>\n]*>>", re.S)


def _unread_why(stmt: str, before: str) -> str:
    """Why a stated calculation (:data:`_STATEMENT`) may have been left unread, by its shape and
    the text ``before`` it."""
    if re.search(r"(?:\.\.\.|…)\s*$", before):
        return "after an ellipsis: it may be the tail of an elided expression"
    if re.match(r"\(\s*\d+\s*\)\s*\d", stmt):
        return "a bracketed number before a number: a list label or a factor, the verifier could not tell"
    if re.search(r"\d,\d{1,2}(?!\d)", stmt):
        return "a decimal comma or a list of numbers: the verifier could not tell"
    if re.match(r"\d+-\d+\s*=", stmt):
        return "a range or a subtraction: the verifier could not tell"
    return "its context (the words around it, its units) left the verifier unsure what it computes"


def _unread_statements(text: str, checks: list[Check]) -> list[Check]:
    """One ``unknown`` check (``evidence.kind == "unread"``) per calculation written in numbers
    alone (:data:`_STATEMENT`: "(2) 3 = 7", "2,5 + 1 = 3,5", "40-64=24", "8/24=3 trips") that
    no check of the answer covers: the claim finder stood down on it (a list label or a factor,
    a decimal comma or a list, a range, prose before it), and a report that leaves it out claims
    a coverage it does not have (docs/design.md "report": ``passed`` only when every check-worthy
    unit was decided). Never ``fail``: the verifier could not tell what the statement computes.
    Not in code, calculator notes (checked on their own), nor where the statement is the tail of
    a longer formula (:data:`_STATEMENT_CUT`) or a formula goes on after it."""
    if not any(ch == "=" for ch in text):
        return []
    prose = _NOT_PROSE.sub(lambda m: "\0" * len(m.group(0)), text)
    spans = [c.span for c in checks if c.span]
    out: list[Check] = []
    for m in _STATEMENT.finditer(prose):
        a, b = m.span()
        if _STATEMENT_CUT.search(prose, max(0, a - 12), a) or any(s < b and a < e for s, e in spans):
            continue
        why = _unread_why(m.group(0), prose[max(0, a - 12):a])
        out.append(Check(verifier=VERIFIER, claim=m.group(0), outcome="unknown", confidence=0.5, span=(a, b),
                         evidence={"kind": "unread"}, note=f"a stated calculation not checked: {why}"))
    return out


def _digits(s: str) -> str:
    return s.replace(",", "").replace("\u2212", "-").lstrip("$\u20ac\u00a3").rstrip(".")


def _unchecked_results(text: str, question: str | None, checks: list[Check]) -> list[Check]:
    """One ``unknown`` check per stated result (:data:`_RESULT`) whose number occurs in no
    arithmetic claim checked in the answer (nor in the question): "17 x 23 = 391. So the answer
    is 401." has one equation to recompute, and a result nothing computed. Without this check
    such an answer was ``passed`` (coverage 1/1) on the one equation while its result -- what
    the reader takes away -- was never checked (docs/design.md "report": ``passed`` only when every
    check-worthy unit was decided). Only where the answer has a checked equation (otherwise the
    answer is no calculation to verify); never a ``fail`` (the result may come from a step
    written in words)."""
    if not any(c.outcome in ("pass", "fail") for c in checks):
        return []
    seen: set[str] = set()
    for c in checks:
        for n in re.findall(r"\d[\d,]*(?:\.\d+)?", c.claim or ""):
            seen.add(_digits(n))
        for k in ("expected", "found"):
            v = getattr(c, k, None)
            if isinstance(v, str):
                seen.update(_digits(n) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", v))
    seen.update(_digits(n) for n in re.findall(r"\d[\d,]*(?:\.\d+)?", question or ""))
    out: list[Check] = []
    for m in _RESULT.finditer(text):
        g = "num" if m.group("num") else "num2"
        num = _digits(m.group(g)).lstrip("-")
        if num in seen or not num:
            continue
        seen.add(num)
        out.append(Check(verifier=VERIFIER, claim=m.group(0).strip(), outcome="unknown", confidence=0.5,
                         span=m.span(g), found=m.group(g), basis="recomputed",
                         evidence={"kind": "unchecked_result"},
                         note="a stated result that no checked calculation gives"))
    return out


def _region_lookup(spans, pos: list[int]):  # type: ignore[no-untyped-def]
    """The math region (``_latex.MathSpans``) of a normalised position, -1 in prose."""
    def region_of(p: int) -> int:
        return spans.region(pos[p]) if p < len(pos) else -1
    return region_of


def _remainder_sentences(text: str) -> list[Check]:
    """"the remainder when 2004 is divided by 12 is 0": ``a mod b`` (a, b >= 0) against the
    stated remainder, exactly."""
    out = []
    for m in REMAINDER_SENTENCE.finditer(text):
        a, b, r = (int(g.replace(",", "")) for g in m.groups())
        if b == 0 or len(str(a)) > 200:
            continue
        ok = a % b == r
        out.append(Check(verifier=VERIFIER, claim=m.group(0), outcome="pass" if ok else "fail",
                         expected=str(a % b), found=str(r), span=m.span(), confidence=1.0 if ok else 0.9,
                         evidence={"kind": "remainder", "expression": f"{a} mod {b}", "value": str(a % b),
                                   "rule": "exact", "tolerance": "0"},
                         note="" if ok else f"{a} = {a // b} * {b} + {a % b}"))
    return out


MAX_WINDOW = 2_000
_HAS_EQ = re.compile("[=≈\ue000\ue001]")


def _windows(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split a very long line into windows of at most ``MAX_WINDOW`` characters at blanks, so
    the budget is checked between them (a claim cut by a window edge is not checked)."""
    out = []
    while end - start > MAX_WINDOW:
        cut = text.rfind(" ", start + MAX_WINDOW // 2, start + MAX_WINDOW)
        cut = cut if cut > start else start + MAX_WINDOW
        out.append((start, cut))
        start = cut
    out.append((start, end))
    return out


_SENTENCE_WORDS = re.compile(
    r"\b(?:add|adding|multiply|multiplying|subtract|subtracting|divide|dividing|divided|sum|product|quotient|"
    r"difference|twice|double|triple|half|plus|minus|times|multiplied|squared|cubed|square\s+root|is|gives|get|"
    r"makes|yields|equals)\b",
    re.I,
)


def _is_sentence(mt: MappedText, c: Check) -> bool:
    if c.span is None:
        return False
    return bool(_SENTENCE_WORDS.search(c.claim))


# --- question/answer link ---------------------------------------------------------------------

_Q_WORDS = frozenset(
    "what is whats what's the value of calculate compute evaluate find solve please how much result work out "
    "answer tell me give percent plus minus times divided multiplied by sqrt squared cubed pi square root sum "
    "product difference quotient and between".split()
)
_WORDS = re.compile(r"[^\W\d_]+")
_NUMTXT = r"-?[$€£¥]?\s?\d[\d,]*(?:\.\d+)?%?"
_ANSWER_PATTERNS = [
    re.compile(r"\\boxed\{\s*(" + _NUMTXT + r")\s*\}"),
    re.compile(r"\b(?:(?:final|the)\s+)?answer\b[^.\n\d=]{0,20}?(?:is|=|:)\s*(?:approximately\s+|about\s+|roughly\s+|~\s*|≈\s*)?"
               r"\**\s*\$?\s*(" + _NUMTXT + r")", re.I),
    re.compile(
        r"\b(?:answer|result|total|product|sum|difference|quotient|value)\b[^.\n\d=]{0,20}?"
        r"(?:is|=|equals|:)\s*(?:approximately\s+|about\s+|roughly\s+|~\s*|≈\s*)?\**\s*(" + _NUMTXT + r")",
        re.I,
    ),
    re.compile(r"(?:=|≈)\s*\**\s*(" + _NUMTXT + r")"),
    re.compile(r"\b(?:is|it's|that's|get|gives|makes)\s+(?:approximately\s+|about\s+|roughly\s+)?\**\s*("
               + _NUMTXT + r")\s*\**\s*[.!]?\s*$", re.I),
]
_ONLY_NUMBER = re.compile(r"^\s*(?:(?:approximately|about|roughly|around|~|≈)\s*)?\**\s*(" + _NUMTXT
                          + r")\s*\**\s*\.?\s*$", re.I)
_APPROX_BEFORE = re.compile(r"(?:approximately|about|roughly|~|≈)\s*\**\s*$", re.I)


_ELLIPSIS = re.compile(r"\s*(?:…|\.\.\.|\\[lc]?dots|\\cdots|\\ldots)\s*")
_SERIES = re.compile(r"([^\s+?=]+)\s*\+\s*([^\s+?=]+)\s*\+\s*\ue010\s*\+\s*([^\s+?=]+)")
MAX_SERIES_TERMS = 1000


def _expand_series(q: str) -> str:
    """``1/1! + 1/2! + … + 1/10!`` written out term by term: the first two terms differ in one
    whole number (the index) and the last term has the same shape; the index steps by the
    difference of the first two. Anything else is left as it is (and is then not an
    arithmetic question)."""
    if not _ELLIPSIS.search(q):
        return q
    marked = _ELLIPSIS.sub(" \ue010 ", q)
    m = _SERIES.search(marked)
    if m is None:
        return q
    parts = [re.split(r"(\d+)", t) for t in m.groups()]
    if not (len(parts[0]) == len(parts[1]) == len(parts[2])):
        return q
    diff = [k for k in range(len(parts[0])) if parts[0][k] != parts[1][k]]
    if len(diff) != 1 or diff[0] % 2 == 0:
        return q
    k = diff[0]
    if any(parts[2][j] != parts[0][j] for j in range(len(parts[0])) if j != k):
        return q
    a, b, n = int(parts[0][k]), int(parts[1][k]), int(parts[2][k])
    step = b - a
    if step == 0 or (n - a) % step or not 2 <= (n - a) // step + 1 <= MAX_SERIES_TERMS:
        return q
    terms = []
    for i in range(a, n + step, step):
        t = list(parts[0])
        t[k] = str(i)
        terms.append("".join(t))
    return marked[: m.start()] + " + ".join(terms) + marked[m.end():]


def _bound_answer(answer: str, expression: str, checks: list[Check]) -> re.Match[str] | None:
    """The number in ``answer`` that answers the question, in this order: the whole answer is
    a number ("42", "approximately 0.000191"); the last ``\\boxed{}``; the last "the answer /
    result / product ... is N"; otherwise, when the answer already states the question's
    expression equal to something, that claim speaks for it (``None``); otherwise the last
    "= N" / "is N" only when every such number in the answer has the same value (a later
    side computation, "For comparison, 1000 * 1.05^3 = 1157.63", is not the answer)."""
    m0 = _ONLY_NUMBER.match(answer)
    if m0:
        return m0
    for pat in _ANSWER_PATTERNS[:3]:
        last = None
        for m in pat.finditer(answer):
            last = m
        if last is not None:
            return last
    if any(c.evidence.get("expression") == expression for c in checks):
        return None
    found = [m for pat in _ANSWER_PATTERNS[3:] for m in pat.finditer(answer)]
    if not found:
        return None
    values = {m.group(1).replace(",", "").replace(" ", "").lstrip("$€£¥").rstrip("%") for m in found}
    if len(values) != 1:
        return None
    return max(found, key=lambda m: m.start(1))


def _question_expression(question: str) -> tuple[tuple, str, list, str] | None:
    q = question.strip()
    if not q or len(q) > 500:
        return None
    q = _expand_series(q)  # at most MAX_SERIES_TERMS terms
    if any(len(w) > 1 and w.lower() not in _Q_WORDS for w in _WORDS.findall(q)):
        return None  # a word problem, not an arithmetic question
    mt = normalize(q, soft=False)
    toks = tokenize(mt.text)
    math_runs = runs(toks)
    words = [t for t in toks if t.kind in ("WORD", "TRAIL")]
    if any(t.text.lower() not in _Q_WORDS for t in words) or len(math_runs) != 1:
        return None
    run = [t for t in math_runs[0] if t.kind not in ("UNIT",)]
    while run and run[-1].kind in ("EQ", "SOFT"):
        run.pop()
    if any(t.kind in ("EQ", "SOFT") for t in run):
        return None
    try:
        node = parse(run)
    except ParseError:
        return None
    if not has_operation(node) or has_var(node):
        return None
    return node, mt.text[run[0].start : run[-1].end], run, mt.text


def _question_link(answer: str, question: str, checks: list[Check], work: Work | None = None) -> Check | None:
    found = _question_expression(question)
    if found is None:
        return None
    node, qtext, qtoks, qnorm = found
    m = _bound_answer(answer, to_text(node), checks)
    if m is None:
        return None
    raw = m.group(1).strip()
    sign = 1
    if raw.startswith("-"):
        sign, raw = -1, raw[1:].strip()
    cur = raw[0] if raw[0] in "$€£¥" else None
    digits = raw.lstrip("$€£¥ ").rstrip("%")
    try:
        lit = literal_from_text(digits, currency=cur, percent=raw.endswith("%"), text=m.group(1).strip())
    except (ValueError, ZeroDivisionError):
        return None
    span = m.span(1)
    claim = f"{question.strip()} -> {m.group(1).strip()}"
    try:
        value = evaluate(node)
    except (Refused, NotNumeric) as exc:
        return Check(verifier=VERIFIER, claim=claim, outcome="unknown", confidence=0.5, span=span,
                     evidence={"kind": "question_link", "expression": to_text(node)}, note=f"not computed: {exc}")
    approx = bool(_APPROX_BEFORE.search(answer[: m.start(1)])) or "≈" in m.group(0)
    v = judge(value, lit, sign=sign, approx=approx)
    found_s = ("-" if sign < 0 else "") + lit.text
    for c in checks:  # the answer already states "<question expression> = <value>": no duplicate
        if c.span is not None and c.span[0] <= span[0] and span[1] <= c.span[1] + 1 and c.expected == v.expected:
            return None
    outcome, note, conf = v.outcome, v.note, min(v.confidence, 0.9)
    evidence = {"kind": "question_link", "expression": to_text(node), "question_expression": qtext,
                "value": format_value(value), "rule": v.rule, "tolerance": v.tolerance}
    if outcome == "fail":  # a second, independent evaluation before a failure (see ``_confirm``)
        if work is not None:
            work.spend(2 * COST_SECOND)
        second = _confirm_question(qtoks, qnorm, value, raw, sign * lit.value)
        evidence["second_evaluation"] = {k: x for k, x in second.items() if k != "note"}
        if not second["agrees"]:
            outcome, note, conf = "unknown", second["note"], 0.5
    return Check(
        verifier=VERIFIER,
        claim=claim,
        outcome=outcome,  # type: ignore[arg-type]
        expected=v.expected,
        found=found_s,
        evidence=evidence,
        confidence=conf,
        span=span,
        note=note or ("" if outcome == "pass" else f"{to_text(node)} = {v.expected}, not {found_s}"),
    )


def _confirm_question(qtoks: list, qnorm: str, value, stated_digits: str, stated) -> dict:  # type: ignore[no-untyped-def]
    """The question's expression and the answer's number, each evaluated a second time by
    ``_confirm`` (SymPy's parser, exact walk); ``agrees`` when both match the first values."""
    out: dict = {"method": "sympy.parsing.sympy_parser.parse_expr + exact rational walk"}
    try:
        src = expression_string(qtoks, qnorm)
        v2 = second_value(src)
        s2 = second_value(_confirm_number(stated_digits))
    except Unconfirmed as exc:
        return {**out, "agrees": False, "reason": str(exc),
                "note": f"not confirmed: the second evaluation could not read the claim ({exc})"}
    out.update(expression=src, value=format_value(v2))
    if not _same_value(value, v2) or s2 != abs(stated):
        return {**out, "agrees": False, "first_value": format_value(value), "second_value": format_value(v2),
                "note": f"two evaluations disagree: {format_value(value)} (parser) vs {format_value(v2)} (SymPy)"}
    return {**out, "agrees": True}
