"""Python's ``**`` and ``^`` in claims: a right code-like statement is never failed.

The correction loop once "corrected" a right ``**`` answer into a wrong one (the ``**`` read as
Markdown bold, ``verifiers/arithmetic/_confirm.py``; docs/design.md "False alarms cost more than
misses"). The class kept
here: Python-written powers (``2**10 = 1024``, ``-2**2 = -4``, ``(-2)**2 = 4``, ``2 ** 3 ** 2 =
512``, any spacing, in inline code, after "In Python", inside Markdown bold) and "^" where
Python means XOR ("In Python, 2 ^ 10 = 8"): right statements never ``fail``, wrong ones never
``pass``; symbols (``x ** 2``) are never failed.

Oracle: expression trees drawn here, evaluated with ``Fraction`` by Python's grammar rules
(``**`` binds tighter than unary minus and groups to the right; ``^`` is XOR), never by the
verifier's parser.
"""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from verifiers.arithmetic import check


def _tree(rng: random.Random, depth: int):
    if depth == 0 or rng.random() < 0.3:
        return ("num", rng.randint(0, 12))
    op = rng.choice(["+", "-", "*", "**", "**", "neg"])
    if op == "neg":
        return ("neg", _tree(rng, depth - 1))
    if op == "**":
        return ("**", _tree(rng, 0), ("num", rng.randint(0, 5)))
    return (op, _tree(rng, depth - 1), _tree(rng, depth - 1))


def _value(t) -> Fraction:
    if t[0] == "num":
        return Fraction(t[1])
    if t[0] == "neg":
        return -_value(t[1])
    a, b = _value(t[1]), _value(t[2])
    if t[0] == "**":
        return a ** int(b)
    return {"+": a + b, "-": a - b, "*": a * b}[t[0]]


def _render(t, rng: random.Random, sp: str) -> str:
    """Python source with every subtree bracketed where Python's precedence needs it."""
    if t[0] == "num":
        return str(t[1])
    if t[0] == "neg":
        inner = _render(t[1], rng, sp)
        return f"-({inner})" if t[1][0] in ("+", "-", "*", "neg") else f"-{inner}"
    a, b = _render(t[1], rng, sp), _render(t[2], rng, sp)
    if t[0] == "**":
        a = f"({a})" if t[1][0] != "num" else a
        return f"{a}{sp}**{sp}{b}"
    return f"({a} {t[0]} {b})" if rng.random() < 0.5 or t[0] != "+" else f"{a} + {b}"


CONTEXTS = ["{e} = {v}", "`{e}` = {v}", "In Python, {e} == {v}.", "We get {e} = {v}.", "**{e} = {v}**",
            "Python prints {v} for `{e}`, so {e} = {v}."]


def _cases(n: int, seed: int):
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        t = _tree(rng, 3)
        if not any(x in repr(t) for x in ("'**'",)):
            t = ("**", ("num", rng.randint(2, 9)), ("num", rng.randint(0, 6)))
        v = _value(t)
        if abs(v) > 10**12:
            continue
        right = rng.random() < 0.5
        stated = v if right else v + rng.choice([1, -1, 2, 10])
        e = _render(t, rng, rng.choice(["", " "]))
        out.append((rng.choice(CONTEXTS).format(e=e, v=stated), right))
    return out


@pytest.mark.parametrize("text,right", _cases(120, 3))
def test_python_powers_right_never_fail_wrong_never_pass(text, right):
    outs = [c.outcome for c in check(text) if c.evidence.get("kind") in ("equation", "natural_language")]
    if right:
        assert "fail" not in outs, (text, [(c.claim, c.note) for c in check(text)])
    else:
        assert "pass" not in outs, (text, [(c.claim, c.note) for c in check(text)])


@pytest.mark.parametrize("seed", range(40))
def test_a_python_xor_statement_is_never_failed(seed):
    rng = random.Random(seed)
    a, b = rng.randint(1, 64), rng.randint(1, 64)
    text = rng.choice(["In Python, {a} ^ {b} = {v}.", "`{a} ^ {b}` gives {v}, so {a} ^ {b} == {v}", "{a}^{b} = {v}"])
    text = text.format(a=a, b=b, v=a ^ b)
    assert "fail" not in [c.outcome for c in check(text)], [(c.claim, c.outcome, c.note) for c in check(text)]


@pytest.mark.parametrize("text", ["2^10 = 1000", "2 ^ 10 = 1000", "3^4 = 80"])
def test_a_caret_wrong_both_ways_still_fails(text):
    """Neither a power nor an XOR: 2^10 is 1024 and 2 XOR 10 is 8, never 1000."""
    assert [c.outcome for c in check(text)] == ["fail"]


@pytest.mark.parametrize("text", ["2**10 = 1024", "2 ** 10 = 1024", "-2**2 = -4", "(-2)**2 = 4", "2**3**2 = 512",
                                  "2**-1 = 0.5", "10**-2 = 0.01", "**2**10 = 1024**", "2**0.5 = 1.414",
                                  "2 ^ 10 = 1024", "x ** 2 = 9", "x**2 + 2*x + 1 = (x+1)**2",
                                  "\\[ x^2 + 2x + 1 = (x+1)^2 \\]", "`x ** 2` is 9 for x = 3"])
def test_named_code_like_claims_never_fail(text):
    assert "fail" not in [c.outcome for c in check(text)], [(c.claim, c.note) for c in check(text)]
