"""One reading of an answer: calculator notes, then the claims of the normalised text window by
window within the work budget (:func:`_check`), remainder sentences and the question/answer
link; the per-answer claim limit (:data:`MAX_CLAIMS`)."""

from __future__ import annotations

import re
from fractions import Fraction
from verifiers._types import Check
from verifiers.arithmetic._claims import VERIFIER, ClaimFinder
from verifiers.arithmetic._latex import REMAINDER_SENTENCE, math_spans
from verifiers.arithmetic._mapped import MappedText
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tokens import runs, runs_with_context, tokenize
from verifiers.arithmetic._work import COST_BASE, COST_CHAR, Work
from verifiers.arithmetic._question import _question_link


#: checks returned at most per answer
MAX_CLAIMS = 500

_DOLLAR = re.compile(r"\$")
_NOTE = re.compile(r"<<([^<>\n]{1,400})>>")
_CLAIM_LINE = re.compile(r"(?m)^(?=[^\n]*\d)(?=[^\n]*[=≈\ue000\ue001])[^\n]*$")


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
