"""Formula equivalence: are two expressions equal for every value of their symbols?

1. Both texts are parsed by the whitelisted parser in formula mode (single letters are symbols,
   ``2ab`` is ``2*a*b``, ``πr²`` is ``pi*r^2``) and turned into SymPy objects node by node.
2. Symbolic: ``cancel(expand(a - b)) == 0`` proves equality (skipped when a power is too large
   to expand cheaply).
3. Numeric: both are evaluated at random points (symbols drawn from [0.5, 3.5], where roots and
   logs are defined). Any point where they differ beyond a relative 1e-9 is a counterexample
   (``fail``); agreement at every point without a symbolic proof is ``pass`` with confidence 0.9
   (the Schwartz-Zippel argument for polynomial identity testing, which random evaluation
   approximates for other functions).
"""

from __future__ import annotations

import math
import random
import zlib
from fractions import Fraction
from typing import Any

from verifiers._types import Check
from verifiers.arithmetic._expr import NotNumeric, Refused, evaluate, to_text
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tokens import ParseError, parse, tokenize

VERIFIER = "arithmetic"
MAX_FORMULA_CHARS = 500
MAX_SYMBOLIC_EXPONENT = 40
POINTS = 12


class _TooBig(Exception):
    pass


def _parse_formula(text: str) -> tuple:
    if len(text) > MAX_FORMULA_CHARS:
        raise ParseError("formula too long")
    mt = normalize(text, soft=False)
    toks = [t for t in tokenize(mt.text, formula=True) if t.kind != "STOP" or t.text.strip()]
    if any(t.kind in ("STOP", "EQ", "SOFT", "TILDE") for t in toks):
        raise ParseError("not a single expression")
    return parse(toks, formula=True)


def _symbols(node: tuple, out: set[str]) -> set[str]:
    if node[0] == "var":
        out.add(node[1])
    for c in node[1:]:
        if isinstance(c, tuple):
            _symbols(c, out)
    return out


def _to_sympy(node: tuple) -> Any:
    import sympy

    kind = node[0]
    if kind == "num":
        v: Fraction = node[1].value
        return sympy.Rational(v.numerator, v.denominator)
    if kind == "var":
        return sympy.Symbol(node[1])
    if kind == "const":
        return sympy.pi if node[1] == "pi" else sympy.E
    if kind == "neg":
        return -_to_sympy(node[1])
    if kind == "bin":
        a, b = _to_sympy(node[2]), _to_sympy(node[3])
        op = node[1]
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        return a / b
    if kind == "pow":
        base, exp = _to_sympy(node[1]), _to_sympy(node[2])
        if not exp.is_number or abs(float(exp)) > MAX_SYMBOLIC_EXPONENT:
            raise _TooBig("exponent")
        return base**exp
    if kind == "pct":
        return _to_sympy(node[1]) / 100
    if kind == "fact":
        inner = _to_sympy(node[1])
        if not inner.is_Integer or inner > 300 or inner < 0:
            raise _TooBig("factorial")
        return sympy.factorial(inner)
    if kind == "func":
        arg = _to_sympy(node[2])
        f = {
            "sqrt": sympy.sqrt,
            "abs": sympy.Abs,
            "sin": sympy.sin,
            "cos": sympy.cos,
            "tan": sympy.tan,
            "ln": sympy.log,
            "log": lambda x: sympy.log(x, 10),
            "exp": sympy.exp,
        }[node[1]]
        return f(arg)
    raise _TooBig(kind)


def _numeric(na: tuple, nb: tuple, names: list[str], seed: int) -> tuple[str, dict[str, Any]]:
    rng = random.Random(seed)
    agree = 0
    for _ in range(POINTS * 2):
        env = {n: rng.uniform(0.5, 3.5) for n in names}
        try:
            va = float(evaluate(na, env=env))
            vb = float(evaluate(nb, env=env))
        except (NotNumeric, Refused, OverflowError, ValueError, ZeroDivisionError):
            continue
        if not (math.isfinite(va) and math.isfinite(vb)):
            continue
        if abs(va - vb) > 1e-9 * max(1.0, abs(va), abs(vb)):
            return "fail", {"point": {k: round(v, 6) for k, v in env.items()}, "left": va, "right": vb}
        agree += 1
        if agree >= POINTS:
            return "pass", {"points": agree}
    return "unknown", {"points": agree}


def equivalent(a: str, b: str) -> Check:
    """Decide whether formulas ``a`` and ``b`` are equal for all values of their symbols.

    Accepts the arithmetic syntax of ``check`` plus single-letter symbols and implicit
    products (``2ab``, ``πr²``, ``(a+b)^2``), ``sqrt sin cos tan log ln exp abs``.
    Returns a ``Check`` (``verifier="arithmetic"``, ``evidence.kind="equivalence"``):
    ``pass`` equivalent, ``fail`` not equivalent (``evidence.counterexample``), ``unknown``
    when a side cannot be parsed or no decision was reached. Never raises on bad input.
    """
    claim = f"{a} ≡ {b}"
    if not isinstance(a, str) or not isinstance(b, str):
        return Check(verifier=VERIFIER, claim=str(claim), outcome="unknown", confidence=0.5, note="not text")
    try:
        na, nb = _parse_formula(a), _parse_formula(b)
    except (ParseError, ValueError, ZeroDivisionError, RecursionError) as exc:
        return Check(verifier=VERIFIER, claim=claim, outcome="unknown", confidence=0.5,
                     evidence={"kind": "equivalence"}, note=f"could not parse: {exc}")
    evidence: dict[str, Any] = {"kind": "equivalence", "left": to_text(na), "right": to_text(nb)}
    names = sorted(_symbols(na, set()) | _symbols(nb, set()))
    # 1. symbolic
    try:
        import sympy

        diff = sympy.cancel(sympy.expand(_to_sympy(na) - _to_sympy(nb)))
        if diff == 0:
            evidence["method"] = "sympy: cancel(expand(a - b)) == 0"
            return Check(verifier=VERIFIER, claim=claim, outcome="pass", expected=to_text(na), found=to_text(nb),
                         evidence=evidence, confidence=1.0, note="equal symbolically")
        evidence["difference"] = str(diff)[:200]
        if diff.is_number and diff.is_zero is False:
            evidence["method"] = "sympy: a - b is a nonzero constant"
            return Check(verifier=VERIFIER, claim=claim, outcome="fail", expected=to_text(na), found=to_text(nb),
                         evidence=evidence, confidence=1.0, note=f"the two sides differ by {diff}")
    except (_TooBig, RecursionError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        evidence["symbolic"] = "skipped"
    # 2. random points
    outcome, info = _numeric(na, nb, names, seed=zlib.crc32((a + "\0" + b).encode()))
    evidence["method"] = "evaluation at random points"
    if outcome == "fail":
        evidence["counterexample"] = info
        return Check(verifier=VERIFIER, claim=claim, outcome="fail", expected=to_text(na), found=to_text(nb),
                     evidence=evidence, confidence=0.95, note="the two sides differ at a sample point")
    if outcome == "pass":
        evidence["points"] = info["points"]
        return Check(verifier=VERIFIER, claim=claim, outcome="pass", expected=to_text(na), found=to_text(nb),
                     evidence=evidence, confidence=0.9, note="equal at every sample point")
    return Check(verifier=VERIFIER, claim=claim, outcome="unknown", expected=to_text(na), found=to_text(nb),
                 evidence=evidence, confidence=0.5, note="could not decide")
