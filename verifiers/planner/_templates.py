"""Template plans: verification without a planner call (docs/verifier-model.md, "Template plans").

Two shapes, both recognised only when the reading is unambiguous (false alarms cost more than
misses: any doubt and no template fires):

``interest``
    a question that names compound (复利) or simple (单利) interest with exactly one principal,
    one annual rate, one duration and (compound) one compounding frequency, asking for the final
    amount (本息和, "total amount", "how much will ... have") or the interest (利息, "how much
    interest"). The step recomputes ``P*(1+r/n)^(n*t)`` (or ``P*(1+r*t)``) with ``calculate``
    and compares it with the last plausible value the draft states. A draft that rounded the
    growth factor to four decimals is ``unknown``, not ``fail`` (``Step.bounds``).
``expression``
    a question that is an arithmetic expression with only asking words around it ("What is the
    product of 97/117/0.65...?", "计算 2^10 的值", "1/1! + 1/2! + … + 1/10! = ?"). A finite
    series written with an ellipsis is expanded only when its terms follow one arithmetic
    progression in every changing number (checked on every written term); otherwise no
    template. The draft's final value (``\\boxed{}``, "the answer is", "≈"/"approximately",
    "=", "约为", a lone number) is compared with the exact value.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from verifiers.arithmetic._expr import Literal
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tolerance import judge
from verifiers.arithmetic._tokens import tokenize
from verifiers.planner._execute import Step
from verifiers.planner._text import ExprError, Stated, find_span, numbers_in, parse_expression, value_of

MAX_SERIES_TERMS = 200

# --- interest ----------------------------------------------------------------------------------

_FREQ = [
    (re.compile(r"按季度|每季度|季度复利|quarterly|compounded\s+every\s+quarter", re.I), 4),
    (re.compile(r"按月|每月复利|月复利|monthly", re.I), 12),
    (re.compile(r"按日|每日|每天复利|日复利|daily", re.I), 365),
    (re.compile(r"半年|semi-?annual(?:ly)?|twice\s+a\s+year", re.I), 2),
    (re.compile(r"按周|weekly", re.I), 52),
    (re.compile(r"按年|每年复利|年复利|annually|yearly|compounded\s+(?:once\s+)?(?:a|per|each)\s+year", re.I), 1),
]
_COMPOUND = re.compile(r"复利|compound", re.I)
_SIMPLE = re.compile(r"单利|simple\s+interest", re.I)
_CONTINUOUS = re.compile(r"continuous|连续复利", re.I)
_RATE = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_PRINCIPAL_ZH = re.compile(r"(?:本金|存入|存款|投资|借款|贷款)\s*(?:为|是|有)?\s*(\d[\d,]*(?:\.\d+)?)\s*(万)?\s*元")
_PRINCIPAL_EN = re.compile(r"(?:[$€£¥]\s?(\d[\d,]*(?:\.\d+)?)(?!\s*%)|(\d[\d,]*(?:\.\d+)?)\s*(?:dollars|euros|yuan|pounds)\b)",
                           re.I)
_YEARS = re.compile(r"(\d+(?:\.\d+)?)\s*(?:年(?!利率|化|复利)|years?\b)", re.I)
_MONTHS = re.compile(r"(\d+)\s*(?:个月|months?\b)", re.I)
_ASK_INTEREST = re.compile(r"利息(?:是|为|有)?多少|多少利息|how\s+much\b[^?.]*\binterest|interest\s+(?:earned|will|is\s+earned)|"
                           r"total\s+interest|amount\s+of\s+interest", re.I)
_ASK_AMOUNT = re.compile(r"本息和|本息合计|本利和|最终|到期|一共|总额|总共|total\s+amount|final\s+amount|future\s+value|"
                         r"balance|how\s+much\s+(?:money\s+)?(?:will|would|does|is)|worth|amount\s+(?:in|after|at)",
                         re.I)


def _one(values: list[Fraction]) -> Fraction | None:
    distinct = set(values)
    return distinct.pop() if len(distinct) == 1 else None


def _claim_around(draft: str, s: Stated) -> str:
    start = s.span[0]
    floor = max(draft.rfind(ch, 0, start) for ch in "。！？\n!?；;") + 1
    left = max(floor, start - 30)
    while left < start and draft[left].isspace():
        left += 1
    return draft[left:s.span[1]]


def interest_template(question: str, draft: str) -> list[Step]:
    """Steps for a compound/simple interest question (see module docstring), or []."""
    simple = bool(_SIMPLE.search(question))
    if not (simple or _COMPOUND.search(question)) or _CONTINUOUS.search(question):
        return []
    ask_interest = bool(_ASK_INTEREST.search(question)) and not re.search(r"本息|本利", question)
    if not ask_interest and not _ASK_AMOUNT.search(question):
        return []
    principals: list[Fraction] = []
    for m in _PRINCIPAL_ZH.finditer(question):
        principals.append(Fraction(m.group(1).replace(",", "")) * (10000 if m.group(2) else 1))
    if not principals:
        for m in _PRINCIPAL_EN.finditer(question):
            principals.append(Fraction((m.group(1) or m.group(2)).replace(",", "")))
    p = _one(principals)
    rate = _one([Fraction(m.group(1)) for m in _RATE.finditer(question)])
    years = [Fraction(m.group(1)) for m in _YEARS.finditer(question)]
    years += [Fraction(int(m.group(1)), 12) for m in _MONTHS.finditer(question)]
    t = _one(years)
    if p is None or rate is None or t is None or p <= 0 or rate <= 0 or t <= 0 or t > 100:
        return []
    r = rate / 100
    if simple:
        n = None
        expr = f"{_fmt(p)} * (1 + {_fmt(r)} * {_fmt(t)})"
        amount = p * (1 + r * t)
        bounds = None
    else:
        freqs = {n for rx, n in _FREQ if rx.search(question)}
        if len(freqs) != 1:
            return []
        n = freqs.pop()
        periods = n * t
        if periods.denominator != 1 or periods > 10_000:
            return []
        factor = (1 + r / n) ** int(periods)
        amount = p * factor
        half = Fraction(1, 20000)  # the growth factor rounded to 4 decimals
        bounds = (p * (factor - half), p * (factor + half))
        expr = f"{_fmt(p)} * (1 + {_fmt(r)} / {n})^({n} * {_fmt(t)})"
    target = amount - p if ask_interest else amount
    if ask_interest:
        expr = f"{expr} - {_fmt(p)}"
        bounds = (bounds[0] - p, bounds[1] - p) if bounds else None
    inputs = {p, rate, r, t, Fraction(n or 1), (n or 1) * t}
    lo, hi = (Fraction(0), amount * 2) if ask_interest else (p, amount * 2)
    cands = [s for s in numbers_in(draft) if s.sign > 0 and s.value not in inputs and lo < s.value <= hi
             and not s.lit.percent]
    if not cands:
        return []
    other = _other_quantity(question, simple, n)
    # the last plausible value is the draft's answer; when it disagrees but an earlier one agrees
    # ("... $11,607.55, against $11,500 with simple interest") the reading is ambiguous: no
    # template (neither a fail nor a pass that verified something else) -- unless the last value
    # is itself a statement of the asked quantity (close to it, in a clause about no other
    # scheme, period or case: "…约为11607.55元。使用Python精确计算的结果约为11614.80元。"), then
    # it is a wrong value of that quantity and fails
    stated = cands[-1]
    if judge(target, stated.lit, sign=stated.sign, approx=stated.approx, bounds=bounds).outcome == "fail" and any(
            judge(target, c.lit, sign=c.sign, approx=c.approx, bounds=bounds).outcome != "fail" for c in cands[:-1]) \
            and not _states_quantity(draft, stated, target, other):
        return []
    if abs(stated.value - target) > target / 2:
        return []  # the draft's last number is something else (a yearly figure, a rate): no reading
    # every other value the draft states for the same quantity is compared too: one wrong fails
    values = [(c, _claim_around(draft, c)) for c in cands[:-1] if _states_quantity(draft, c, target, other)]
    claim = _claim_around(draft, stated)
    kind = ("simple" if simple else "compound") + ("_interest" if ask_interest else "_amount")
    return [Step(step_id=1, tool="calculate", input={"expression": expr}, claim=claim, bounds=bounds, stated=stated,
                 description=f"recompute the {kind.replace('_', ' ')} from the question's inputs",
                 expected_check="every value the draft states for it equals the formula's value at its stated "
                                "precision",
                 confidence=0.9, extra={"template": "interest", "kind": kind, "also": values})]


#: How close (relative) a value must be to the formula's value to be read as another statement
#: of the same quantity (docs/verifier-model.md's wrong values 11608.92 and 11614.80 are within 0.1% of
#: 11607.55; a year-by-year figure at a 5% rate is ~5% away, simple interest over 3 years ~1%).
SAME_QUANTITY_REL = Fraction(1, 100)
_CASE_WORDS = re.compile(r"\bif\b|\bwould\b|\binstead\b|\bunlike\b|\bcompared\b|\bversus\b|\bvs\.?|如果|若|假如|假设|要是|"
                         r"相比|而非|对比", re.I)
_PERIOD_WORDS = re.compile(r"第\s*[一二三四五六七八九十百\d]+\s*(?:年|个?季度|个?月|期|天)|"
                           r"\b(?:year|quarter|month|period)\s*#?\d+|\b\d+(?:st|nd|rd|th)\s+(?:year|quarter|month|period)|"
                           r"\b(?:first|second|third|fourth|fifth)\s+(?:year|quarter|month|period)", re.I)


def _other_quantity(question: str, simple: bool, n: int | None) -> re.Pattern[str]:
    """What, in the clause of a value, makes it a figure of another quantity than the asked
    one: another scheme (单利/simple vs 复利/compound), another compounding frequency than the
    question's, continuous compounding."""
    parts = [_COMPOUND.pattern if simple else _SIMPLE.pattern, _CONTINUOUS.pattern]
    parts += [rx.pattern for rx, f in _FREQ if f != n and not rx.search(question)]
    return re.compile("|".join(f"(?:{p})" for p in parts), re.I)


def _states_quantity(draft: str, s: Stated, target: Fraction, other: re.Pattern[str]) -> bool:
    """True when ``s`` reads as one more statement of the asked quantity: within
    :data:`SAME_QUANTITY_REL` of ``target`` and in a clause (from the sentence's start to the
    end of the value's clause) that names no other scheme or frequency (``other``), no
    conditional or comparison ("if", "compared to", "如果", "相比") and no intermediate period
    ("Year 2", "第2年")."""
    if abs(s.value - target) > abs(target) * SAME_QUANTITY_REL:
        return False
    start = max(draft.rfind(ch, 0, s.span[0]) for ch in "。！？\n!?；;") + 1
    m = re.compile(r"[,;，；。！？!?()（）\n]|\.(?:\s|$)").search(draft, s.span[1])
    clause = draft[start:m.start() if m else len(draft)]
    return not (other.search(clause) or _CASE_WORDS.search(clause) or _PERIOD_WORDS.search(clause))


def _fmt(v: Fraction) -> str:
    if v.denominator == 1:
        return str(v.numerator)
    d = v.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:
        s = format(v.numerator / v.denominator, ".15g")
        if Fraction(s) == v:
            return s
    return f"({v.numerator}/{v.denominator})"


# --- expression ---------------------------------------------------------------------------------

_ELLIPSIS = re.compile(r"\.\.\.|…|⋯|\\[lc]dots|\\dots")
_ASK_EN = re.compile(r"^\s*(?:please\s+)?(?:what\s+is|what's|calculate|compute|evaluate|find|simplify|determine|"
                     r"work\s+out|give)\s+(?:the\s+)?(?:(?:exact|numerical|numeric)\s+)?"
                     r"(?:(?:value|product|sum|difference|quotient|result)\s+of\s+)?(?:the\s+)?(?:following\s+)?"
                     r"(?:(?:expression|sum|series|product)\s*:?\s*)?", re.I)
_ASK_ZH = re.compile(r"计算|求|请|的值|的结果|等于多少|是多少|等于几|结果是|值为|多少|等于|一下|：|:|？|\?|。|！")
_LATEX_LEFT = re.compile(r"\\[a-zA-Z]+|[_{}\[\]|]")


def _question_expression(question: str) -> tuple[str, Fraction | float] | None:
    """``(expression text, exact value)`` when the whole question asks for the value of one
    arithmetic expression (an ellipsis series expanded), else None."""
    q = question.strip()
    if not q or len(q) > 600 or "\n" in q.strip():
        return None
    q = re.sub(r"\$+|\\\(|\\\)|\\\[|\\\]", " ", q)
    zh = bool(re.search(r"[\u4e00-\u9fff]", q))
    body = q
    if zh:
        body = _ASK_ZH.sub(" ", body)
        if re.search(r"[\u4e00-\u9fffA-Za-z]{2,}", re.sub(r"\\[a-zA-Z]+|sqrt", "", body)):
            return None
    else:
        m = _ASK_EN.match(q)
        if m:
            body = q[m.end():]  # the rest must be the expression alone (else it does not parse)
        elif not re.fullmatch(r"[\d\s+\-*/^().,!%×÷·−]+(?:=\s*\?*|\?)?\s*", q):
            return None  # a bare "12*(3+4) = ?" needs no asking words
    body = body.strip().rstrip("?？.。=").strip()
    body = re.sub(r"=\s*\?*$", "", body).strip()
    if not body or not re.search(r"\d", body):
        return None
    parts = _ELLIPSIS.split(body)
    if len(parts) == 1:
        if _LATEX_LEFT.search(normalize(body, soft=False).text):
            return None
        try:
            node = parse_expression(body)
            return body, value_of(node)
        except ExprError:
            return None
    if len(parts) != 2:
        return None
    return _series(parts[0], parts[1])


def _terms(text: str) -> tuple[list[list[Any]], str] | None:
    """Split normalised ``text`` at top-level ``+``/``*`` into terms (token lists)."""
    toks = [t for t in tokenize(normalize(text, soft=False).text) if t.text.strip()]
    if any(t.kind not in ("NUM", "OP", "LP", "RP", "FACT", "FUNC", "CONST") for t in toks):
        return None
    out: list[list[Any]] = [[]]
    ops: set[str] = set()
    depth = 0
    for t in toks:
        if t.kind == "LP":
            depth += 1
        elif t.kind == "RP":
            depth -= 1
        if depth == 0 and t.kind == "OP" and t.text in "+*":
            ops.add(t.text)  # a leading/trailing operator next to the ellipsis joins terms too
            if out[-1]:
                out.append([])
            continue
        out[-1].append(t)
    if len(ops) > 1:
        return None
    return out, (ops.pop() if ops else "")


def _shape(term: list[Any]) -> tuple[tuple[str, ...], list[Any]]:
    shape = tuple("#" if t.kind == "NUM" else t.text for t in term)
    return shape, [t.lit for t in term if t.kind == "NUM"]


def _series(left: str, right: str) -> tuple[str, Fraction | float] | None:
    lt, rt = _terms(left), _terms(right)
    if lt is None or rt is None:
        return None
    lterms, lop = lt
    rterms, rop = rt
    lterms = [t for t in lterms if t]
    rterms = [t for t in rterms if t]
    if len(lterms) < 2 or len(rterms) != 1 or not lop or (rop and rop != lop):
        return None
    shapes = [_shape(t) for t in lterms + rterms]
    if len({s for s, _ in shapes}) != 1:
        return None
    nums = [[lit for lit in lits] for _, lits in shapes]
    if any(lit.decimals or lit.percent or lit.value.denominator != 1 for row in nums for lit in row):
        return None
    first, second, last = nums[0], nums[1], nums[-1]
    diffs = [b.value - a.value for a, b in zip(first, second)]
    if not any(diffs):
        return None
    k_last = None
    for a, d, z in zip(first, diffs, last):
        if d == 0:
            if z.value != a.value:
                return None
            continue
        k = (z.value - a.value) / d
        if k.denominator != 1 or k < len(lterms) - 1 or (k_last is not None and k != k_last):
            return None
        k_last = k
    if k_last is None or k_last + 1 > MAX_SERIES_TERMS:
        return None
    for j, row in enumerate(nums[:-1]):  # every written term follows the progression
        if any(x.value != a.value + j * d for x, a, d in zip(row, first, diffs)):
            return None
    template = lterms[0]
    texts: list[str] = []
    for j in range(int(k_last) + 1):
        it = iter([a.value + j * d for a, d in zip(first, diffs)])
        texts.append("".join(str(next(it).numerator) if t.kind == "NUM" else t.text for t in template))
    expanded = f" {lop} ".join(f"({t})" for t in texts)
    try:  # the parser's own bounds (nodes, depth) limit how long a series can be
        return expanded, value_of(parse_expression(expanded))
    except ExprError:
        return None


_FINAL = [
    re.compile(r"(?:answer|result|value|product|sum|total|quotient|difference)\s*(?:is|=|equals|:)\s*", re.I),
    re.compile(r"(?:=|≈|\\approx|approximately|about|roughly|约为|约等于|大约是|约|等于|结果为|结果是|答案是|答案为|为)\s*\**\s*$"),
]


def _boxed(draft: str) -> tuple[int, int] | None:
    """Span of the content of the last ``\\boxed{...}`` (balanced braces), or None."""
    i = draft.rfind("\\boxed{")
    if i < 0:
        return None
    start = i + len("\\boxed{")
    depth = 1
    for j in range(start, min(len(draft), start + 300)):
        if draft[j] == "{":
            depth += 1
        elif draft[j] == "}":
            depth -= 1
            if depth == 0:
                return start, j
    return None


def _final_value(draft: str, exclude: set[Fraction]) -> Stated | None:
    """The draft's final stated value: the content of its last ``\\boxed{}`` (a number, or an
    exact expression such as ``\\frac{17}{16}``), else the last number after a result marker in
    the draft's last paragraph (or the draft's only number). None when it is symbolic (followed
    by ``/``, ``^``, π, √, a letter) or inside a LaTeX construct."""
    box = _boxed(draft)
    if box is not None:
        content = draft[box[0]:box[1]]
        nums = numbers_in(content)
        if len(nums) == 1 and content.strip(" $") == content[nums[0].span[0]:nums[0].span[1]].strip():
            n = nums[0]
            return Stated(lit=n.lit, sign=n.sign, approx=False, span=(box[0] + n.span[0], box[0] + n.span[1]))
        try:
            v = value_of(parse_expression(content))
        except ExprError:
            return None
        exact = Fraction(v)
        lit = Literal(value=abs(exact), text=content.strip(), decimals=12, ulp=Fraction(1, 10**12),
                      approx_ulp=Fraction(1, 10**12))
        return Stated(lit=lit, sign=-1 if exact < 0 else 1, approx=False, span=box)
    tail_start = max(draft.rstrip().rfind("\n\n"), 0)
    nums = numbers_in(draft)
    for s in reversed(nums):
        if s.span[0] < tail_start:
            return None
        after = draft[s.span[1]:s.span[1] + 3]
        before = draft[max(0, s.span[0] - 40):s.span[0]]
        marked = s.approx or any(rx.search(before) for rx in _FINAL)
        if not marked and len(nums) > 1:
            continue
        if re.match(r"\s*(?:[/^√π{}]|\\frac|\\sqrt|[A-Za-z](?!\w))", after) or re.search(r"[/^{]\s*$", before):
            return None
        if s.value in exclude:
            return None
        return s
    return None


def expression_template(question: str, draft: str) -> list[Step]:
    """Steps for a question that states an expression (see module docstring), or []."""
    found = _question_expression(question)
    if found is None:
        return []
    shown, value = found
    stated = _final_value(draft, set())
    if stated is None:
        return []
    if _boxed(draft) is None and judge(value, stated.lit, sign=stated.sign, approx=stated.approx).outcome == "fail":
        # another number of the last paragraph agrees: two readings, no template (not a pass
        # for a number that is not the answer, not a fail that may misread the answer)
        tail = max(draft.rstrip().rfind("\n\n"), 0)
        if any(s.span[0] >= tail and judge(value, s.lit, sign=s.sign, approx=s.approx).outcome != "fail"
               for s in numbers_in(draft)):
            return []
    claim = _claim_around(draft, stated)
    if find_span(claim, draft) is None:
        return []
    return [Step(step_id=1, tool="calculate", input={"expression": shown}, claim=claim, stated=stated,
                 description="compute the question's expression", confidence=0.9,
                 expected_check="the draft's final value equals the expression's value at the stated precision",
                 extra={"template": "expression", "value": value})]


def template_steps(question: str | None, draft: str) -> list[Step]:
    """The template plan for (question, draft), or [] when no template applies."""
    if not question or not draft:
        return []
    return interest_template(question, draft) or expression_template(question, draft)


__all__ = ["template_steps", "interest_template", "expression_template"]
