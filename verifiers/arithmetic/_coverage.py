"""Coverage of what the claim finder left: one ``unknown`` check per calculation written in numbers
alone that no check covers (:func:`_unread_statements`) and per stated result that no checked
calculation gives (:func:`_unchecked_results`); never ``fail`` (docs/design.md "report")."""

from __future__ import annotations

import re
from verifiers._types import Check
from verifiers.arithmetic._claims import VERIFIER


#: A stated result: "the answer is N", "Final answer: N", "so the total is N", "therefore N",
#: "N pencils in total" -- the number the reader takes away.
_RESULT = re.compile(
    r"(?i)(?:\b(?:final\s+answer|the\s+answer\s+is|answer\s*:|the\s+(?:total|result|sum|product|difference|"
    r"quotient|price|cost|area|perimeter|volume|amount|balance)\s+(?:is|comes\s+to|will\s+be|was)|so\s+(?:there\s+are|"
    r"we\s+get|it\s+is|you\s+get|the\s+answer\s+is)|therefore|thus|hence)\b[^\d\n.=]{0,40}?"
    r"(?P<num>[-\u2212]?[$\u20ac\u00a3]?\d[\d,]*(?:\.\d+)?)(?![\d.,]*\s*[-+*/\u00d7\u00f7^=])"
    r"|(?P<num2>[$\u20ac\u00a3]?\d[\d,]*(?:\.\d+)?)\s+(?:[a-z]+\s+){0,2}(?:in\s+total|altogether|in\s+all)\b)")


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
