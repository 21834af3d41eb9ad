"""The question/answer link: an arithmetic question ("4839+3948-45", "what is 15% of 240?")
and the number the answer states as its result, computed and compared (:func:`_question_link`);
a failure stands only when a second, independent evaluation agrees (``_confirm``)."""

from __future__ import annotations

import re
from verifiers._types import Check
from verifiers.arithmetic._claims import VERIFIER, _same_value
from verifiers.arithmetic._confirm import Unconfirmed, expression_string, second_value
from verifiers.arithmetic._confirm import _number as _confirm_number
from verifiers.arithmetic._expr import NotNumeric, Refused, evaluate, format_value, has_operation, has_var, literal_from_text, to_text
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tokens import ParseError, parse, runs, tokenize
from verifiers.arithmetic._tolerance import judge
from verifiers.arithmetic._work import COST_SECOND, Work


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
