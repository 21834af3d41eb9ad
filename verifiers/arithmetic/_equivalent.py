"""Formula equivalence: are two expressions equal for every value of their symbols?

1. Both texts are parsed by the whitelisted parser in formula mode (single letters are symbols,
   ``2ab`` is ``2*a*b``, ``πr²`` is ``pi*r^2``) and turned into SymPy objects node by node.
   Symbols carry no assumptions (SymPy's default: complex), so a symbolic verdict holds for
   negative and fractional values too (``sqrt(4x^2)`` is *not* simplified to ``2x``).
2. Symbolic: ``cancel(expand(a - b)) == 0`` proves equality; a nonzero constant difference
   proves inequality (skipped when the expansion would exceed ``MAX_EXPANDED_TERMS`` terms or
   an exponent ``MAX_SYMBOLIC_EXPONENT``: SymPy's time grows with the expansion).
3. Numeric: both trees are evaluated with mpmath (60 significant digits in a context of the
   call's own, never the process-global ``mpmath.mp``: requests run concurrently; principal branches,
   the same conventions as SymPy) at rational points drawn, per symbol, from five regions in
   turn: negative [-3.5, -0.5], near zero ±[0.001, 0.1], fractional [0.1, 0.9], ordinary
   [0.5, 3.5] and large ±[10^3, 10^6]. At each point:

   * either side undefined (division by zero, log 0, out of the evaluator's range): skipped;
   * both sides non-real (``sqrt(x)`` vs ``x^(1/2)`` at x < 0: outside the real domain of
     both): skipped;
   * one side real, the other not (``ln(x^2)`` vs ``2 ln(x)`` at x < 0): a difference;
   * both real: a difference when ``|a - b| > 1e-40 * S``, S the largest magnitude met while
     evaluating either side (60-digit arithmetic leaves 20 digits of margin for cancellation).

   Any difference is a counterexample (``fail``, confidence 0.95); ``POINTS`` agreeing points
   without a symbolic proof give ``pass`` with confidence 0.9 (random evaluation as in
   polynomial identity testing, Schwartz-Zippel). Fewer agreeing points: ``unknown``.
4. The two paths cannot contradict each other: the numeric test always runs, and when it finds
   a counterexample to a symbolic proof of equality, or no difference where SymPy proved a
   nonzero constant difference, the verdict is ``unknown`` with both pieces of evidence.
"""

from __future__ import annotations

import math
import random
import zlib
from fractions import Fraction
from typing import Any

from verifiers._types import Check
from verifiers.arithmetic._expr import MAX_FACTORIAL, NotNumeric, Refused, evaluate, format_value, to_text
from verifiers.arithmetic._normalize import normalize
from verifiers.arithmetic._tokens import ParseError, parse, tokenize

VERIFIER = "arithmetic"
MAX_FORMULA_CHARS = 500
MAX_SYMBOLIC_EXPONENT = 40


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
        if op == "//":
            return sympy.floor(a / b)
        if op == "%":
            return sympy.Mod(a, b)
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


MAX_EXPANDED_TERMS = 300


def _terms(node: tuple) -> int:
    """An upper bound on the number of terms of the expanded tree (capped just above
    ``MAX_EXPANDED_TERMS``): SymPy's expand/cancel time grows with it ((a+b+c+d)^12 has 455
    terms and takes seconds), so a larger tree is left to the numeric test."""
    cap = MAX_EXPANDED_TERMS + 1
    kind = node[0]
    if kind in ("num", "var", "const", "func", "fact"):
        return 1
    if kind in ("neg", "pct"):
        return _terms(node[1])
    if kind == "bin":
        a, b = _terms(node[2]), _terms(node[3])
        return min(cap, a + b if node[1] in "+-" else a * b)
    if kind == "pow":
        base = _terms(node[1])
        exp = node[2]
        if exp[0] != "num" or exp[1].value.denominator != 1:
            return base
        n = abs(exp[1].value.numerator)
        if base == 1:
            return 1
        if n > MAX_SYMBOLIC_EXPONENT:
            return cap
        return min(cap, math.comb(base + n - 1, n))  # monomials of degree n in ``base`` terms
    return cap


class _Undefined(Exception):
    """The expression has no value at this point (pole, log 0, out of the evaluator's range)."""


# Ranges the mpmath evaluator refuses at a sample point (the point is skipped): beyond them,
# exp/power/trigonometric argument reduction need working precision proportional to the size.
_MAX_EXP_ARG = 10_000
_MAX_TRIG_ARG = 10**9
_MAX_LOG_POWER = 10_000  # |exponent * ln|base|| for a power: results up to ~e^10000
_DPS = 60
_REL_TOL_EXP = -40  # agreement: |a - b| <= 10^-40 * S (S: largest magnitude met)
POINTS = 12
MAX_TRIES = 60

# Sample regions (lo, hi), drawn in turn per symbol: negative, near zero (both signs),
# fractional, ordinary, large (both signs). Values are rationals k/1000 (or whole numbers).
_REGIONS: tuple[tuple[int, int, int], ...] = (
    (-3500, -500, 1000),
    (1, 100, 1000),
    (-100, -1, 1000),
    (100, 900, 1000),
    (500, 3500, 1000),
    (1000, 1_000_000, 1),
    (-1_000_000, -1000, 1),
)


def _context(dps: int) -> Any:
    """A fresh mpmath context at ``dps`` significant digits. mpmath's module-level ``mp``
    (and ``workdps``/``workprec``, which set it) is one process-global precision: changed in
    one thread, it changes the arithmetic of every other thread (mpmath docs, "Contexts";
    a true identity was judged ``fail`` under concurrent requests). Every evaluation here
    uses its own ``MPContext`` instead; nothing in this module touches ``mpmath.mp``."""
    import mpmath

    ctx = mpmath.MPContext()
    ctx.dps = dps
    return ctx


def _mp_eval(ctx: Any, node: tuple, env: dict[str, Any], scale: list[Any]) -> Any:
    """Value of a tree at a point with the mpmath context ``ctx`` (real ``mpf`` or complex
    ``mpc``), recording the largest magnitude met in ``scale[0]``. Raises ``_Undefined`` for poles and values out
    of range, ``_TooBig`` for factorials beyond ``MAX_FACTORIAL``."""
    kind = node[0]
    if kind == "num":
        v = node[1].value
        r = ctx.mpf(v.numerator) / v.denominator
    elif kind == "var":
        r = env[node[1]]
    elif kind == "const":
        r = ctx.pi if node[1] == "pi" else ctx.e
        r = +r
    elif kind == "neg":
        r = -_mp_eval(ctx, node[1], env, scale)
    elif kind == "bin":
        a = _mp_eval(ctx, node[2], env, scale)
        b = _mp_eval(ctx, node[3], env, scale)
        op = node[1]
        if op == "+":
            r = a + b
        elif op == "-":
            r = a - b
        elif op == "*":
            r = a * b
        elif op in ("//", "%"):
            if b == 0 or not (isinstance(a, ctx.mpf) and isinstance(b, ctx.mpf)):
                raise _Undefined("floor division off the real line")
            q = ctx.floor(a / b)
            r = q if op == "//" else a - b * q
        else:
            if b == 0:
                raise _Undefined("division by zero")
            r = a / b
    elif kind == "pow":
        base = _mp_eval(ctx, node[1], env, scale)
        exp = _mp_eval(ctx, node[2], env, scale)
        if base == 0:
            if ctx.re(exp) <= 0:
                raise _Undefined("0 to a non-positive power")
            r = ctx.mpf(0)
        else:
            size = abs(exp) * abs(ctx.log(abs(base)))
            if size > _MAX_LOG_POWER:
                raise _Undefined("power out of range")
            r = ctx.power(base, exp)
    elif kind == "pct":
        r = _mp_eval(ctx, node[1], env, scale) / 100
    elif kind == "fact":
        v = _mp_eval(ctx, node[1], env, scale)
        if not (isinstance(v, ctx.mpf) and v >= 0 and v == ctx.floor(v)):
            raise _Undefined("factorial of a non-natural number")
        if v > MAX_FACTORIAL:
            raise _TooBig("factorial")
        r = ctx.factorial(v)
    elif kind == "func":
        r = _mp_func(ctx, node[1], _mp_eval(ctx, node[2], env, scale))
    else:
        raise _TooBig(kind)
    m = abs(r)
    if m > scale[0]:
        scale[0] = m
    return r


def _mp_func(ctx: Any, name: str, x: Any) -> Any:
    if name == "abs":
        return abs(x)
    if name == "sqrt":
        return ctx.sqrt(x)
    if name in ("sin", "cos", "tan"):
        if abs(x) > _MAX_TRIG_ARG or abs(ctx.im(x)) > _MAX_EXP_ARG:
            raise _Undefined("argument out of range")
        if name == "tan" and ctx.cos(x) == 0:
            raise _Undefined("pole")
        return {"sin": ctx.sin, "cos": ctx.cos, "tan": ctx.tan}[name](x)
    if name in ("ln", "log"):
        if x == 0:
            raise _Undefined("log of 0")
        return ctx.log(x) if name == "ln" else ctx.log(x, 10)
    if name == "exp":
        if abs(ctx.re(x)) > _MAX_EXP_ARG or abs(ctx.im(x)) > _MAX_TRIG_ARG:
            raise _Undefined("argument out of range")
        return ctx.exp(x)
    raise _TooBig(name)


def _point(rng: random.Random, names: list[str], k: int) -> dict[str, Fraction]:
    """Sample point number ``k``: symbol ``i`` drawn from region ``(k + i) mod 7`` at first,
    from random regions once every region has been visited (so symbols mix signs)."""
    out = {}
    for i, n in enumerate(names):
        idx = (k + i) % len(_REGIONS) if k < len(_REGIONS) else rng.randrange(len(_REGIONS))
        lo, hi, den = _REGIONS[idx]
        out[n] = Fraction(rng.randint(lo, hi), den)
    return out


def _real(ctx: Any, v: Any, tol: Any) -> Any | None:
    """The real part of ``v`` when its imaginary part is negligible, else ``None``."""
    if isinstance(v, ctx.mpc):
        if abs(v.imag) > tol:
            return None
        return v.real
    return v


def _show(ctx: Any, v: Any) -> float | str:
    if isinstance(v, ctx.mpc):
        return ctx.nstr(v, 12)
    try:
        f = float(v)
    except (OverflowError, ValueError):
        f = float("inf")
    return f if f == f and abs(f) != float("inf") and (f != 0 or v == 0) else ctx.nstr(v, 12)


def _numeric(na: tuple, nb: tuple, names: list[str], seed: int) -> tuple[str, dict[str, Any]]:
    """Compare the two trees at up to ``MAX_TRIES`` sample points (see the module docstring).
    Returns ``("fail", counterexample)``, ``("pass", {"points": n, "regions": ...})`` or
    ``("unknown", {"points": n})``."""
    ctx = _context(_DPS)
    rng = random.Random(seed)
    agree = 0
    skipped = 0
    tol_factor = ctx.mpf(10) ** _REL_TOL_EXP
    for k in range(MAX_TRIES if names else 1):
        env = _point(rng, names, k)
        menv = {n: ctx.mpf(v.numerator) / v.denominator for n, v in env.items()}
        scale = [ctx.mpf(0)]
        try:
            va = _mp_eval(ctx, na, menv, scale)
            vb = _mp_eval(ctx, nb, menv, scale)
        except (_Undefined, ZeroDivisionError, ValueError, OverflowError):
            skipped += 1
            continue
        if not all(ctx.isfinite(v) for v in (va, vb)):
            skipped += 1
            continue
        tol = tol_factor * max(scale[0], ctx.mpf(1) if scale[0] == 0 else scale[0])
        ra, rb = _real(ctx, va, tol), _real(ctx, vb, tol)
        point = {n: _fmt_point(v) for n, v in env.items()}
        if ra is None and rb is None:
            skipped += 1  # outside the real domain of both sides
            continue
        if (ra is None) != (rb is None):
            return "fail", {"point": point, "left": _show(ctx, va), "right": _show(ctx, vb),
                            "reason": "one side is real, the other is not"}
        d = abs(ra - rb)
        if d > tol or (d != 0 and _persists(na, nb, env, d)):
            return "fail", {"point": point, "left": _show(ctx, ra), "right": _show(ctx, rb),
                            "difference": ctx.nstr(ra - rb, 6)}
        agree += 1
        if agree >= POINTS or not names:
            return "pass", {"points": agree, "skipped": skipped}
    return "unknown", {"points": agree, "skipped": skipped}


def _persists(na: tuple, nb: tuple, point: dict[str, Fraction], d: Any) -> bool:
    """True when a tiny difference ``d`` (within the tolerance) is real, not rounding: at twice
    the working precision a rounding artefact shrinks by ~30 orders of magnitude, a true
    difference (``x + 10^-45`` vs ``x``) stays."""
    ctx = _context(2 * _DPS)
    env = {n: ctx.mpf(v.numerator) / v.denominator for n, v in point.items()}
    scale = [ctx.mpf(0)]
    try:
        va = _mp_eval(ctx, na, env, scale)
        vb = _mp_eval(ctx, nb, env, scale)
    except (_Undefined, ZeroDivisionError, ValueError, OverflowError):
        return False
    return bool(abs(va - vb) > ctx.mpf(d) * ctx.mpf(10) ** -20)


def _fmt_point(v: Fraction) -> float | int:
    return int(v) if v.denominator == 1 else float(v)


def equivalent(a: str, b: str) -> Check:
    """Decide whether formulas ``a`` and ``b`` are equal for all values of their symbols.

    Accepts the arithmetic syntax of ``check`` plus single-letter symbols and implicit
    products (``2ab``, ``πr²``, ``(a+b)^2``), ``sqrt sin cos tan log ln exp abs``.
    Returns a ``Check`` (``verifier="arithmetic"``, ``evidence.kind="equivalence"``):
    ``pass`` equivalent, ``fail`` not equivalent (``evidence.counterexample``: ``point``,
    ``left``, ``right``, ``difference``, or ``reason`` when one side is not real), ``unknown``
    when a side cannot be parsed, no decision was reached, or the symbolic and numeric paths
    disagree (see the module docstring). Two numbers without symbols are compared exactly.
    Never raises on bad input.
    """
    claim = f"{a} ≡ {b}"
    if not isinstance(a, str) or not isinstance(b, str):
        return Check(verifier=VERIFIER, claim=str(claim), outcome="unknown", confidence=0.5, note="not text")
    try:
        na, nb = _parse_formula(a), _parse_formula(b)
    except (ParseError, ValueError, ZeroDivisionError, RecursionError) as exc:
        return Check(verifier=VERIFIER, claim=claim, outcome="unknown", confidence=0.5,
                     evidence={"kind": "equivalence"}, note=f"could not parse: {exc}")
    return decide(na, nb, claim, a + "\0" + b)


def symbolic_difference(na: tuple, nb: tuple) -> Any | None:
    """``cancel(expand(a - b))`` of two parsed trees with SymPy, or ``None`` when the trees are
    too large to expand (``MAX_EXPANDED_TERMS``) or SymPy cannot build them. The symbolic step
    of ``decide`` alone, for callers that already sampled the two sides."""
    try:
        import sympy

        if _terms(na) + _terms(nb) > MAX_EXPANDED_TERMS:
            return None
        return sympy.cancel(sympy.expand(_to_sympy(na) - _to_sympy(nb)))
    except (_TooBig, RecursionError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        return None


def decide(na: tuple, nb: tuple, claim: str, seed_text: str | None = None) -> Check:
    """``equivalent`` on two parsed trees (the ``_expr`` tuples of ``_tokens.parse``): the same
    symbolic-then-numeric decision and the same ``Check`` shape. Used by ``check`` for claims
    with free symbols (``(a+b)^2 = a^2 + 2ab + b^2``)."""
    a, b = to_text(na), to_text(nb)
    if seed_text is None:
        seed_text = a + "\0" + b
    evidence: dict[str, Any] = {"kind": "equivalence", "left": to_text(na), "right": to_text(nb)}
    names = sorted(_symbols(na, set()) | _symbols(nb, set()))

    def verdict(outcome: str, confidence: float, note: str) -> Check:
        return Check(verifier=VERIFIER, claim=claim, outcome=outcome, expected=to_text(na),  # type: ignore[arg-type]
                     found=to_text(nb), evidence=evidence, confidence=confidence, note=note)

    if not names:  # two numbers: exact rational arithmetic decides when it can
        try:
            va, vb = evaluate(na), evaluate(nb)
        except (NotNumeric, Refused, RecursionError):
            va = vb = None
        if isinstance(va, Fraction) and isinstance(vb, Fraction):
            evidence["method"] = "exact rational arithmetic"
            if va == vb:
                return verdict("pass", 1.0, "equal")
            evidence["difference"] = format_value(va - vb)
            return verdict("fail", 1.0, f"the two sides differ by {evidence['difference']}")
    # 1. symbolic: a proof either way, or nothing
    symbolic: str | None = None
    try:
        import sympy

        if _terms(na) + _terms(nb) > MAX_EXPANDED_TERMS:
            raise _TooBig("too many terms to expand")

        diff = sympy.cancel(sympy.expand(_to_sympy(na) - _to_sympy(nb)))
        if diff == 0:
            symbolic = "pass"
            evidence["symbolic"] = "cancel(expand(a - b)) == 0"
        else:
            evidence["difference"] = str(diff)[:200]
            if diff.is_number and diff.is_zero is False:
                symbolic = "fail"
                evidence["symbolic"] = "a - b is a nonzero constant"
    except (_TooBig, RecursionError, TypeError, ValueError, ZeroDivisionError, AttributeError):
        evidence["symbolic"] = "skipped"
    # 2. numeric, always: the cross-check of a proof, the decision without one
    try:
        numeric, info = _numeric(na, nb, names, seed=zlib.crc32(seed_text.encode()))
    except (_TooBig, RecursionError):
        numeric, info = "unknown", {"points": 0}
    evidence["points"] = info.get("points", 0)
    if numeric == "fail":
        evidence["counterexample"] = info
    if symbolic == "pass":
        if numeric == "fail":
            evidence["method"] = "sympy and evaluation at sample points disagree"
            return verdict("unknown", 0.5, "symbolic proof of equality contradicted at a sample point")
        evidence["method"] = "sympy: cancel(expand(a - b)) == 0"
        return verdict("pass", 1.0, "equal symbolically")
    if symbolic == "fail":
        if numeric == "pass":
            evidence["method"] = "sympy and evaluation at sample points disagree"
            return verdict("unknown", 0.5, "nonzero constant difference not seen at the sample points")
        evidence["method"] = "sympy: a - b is a nonzero constant"
        return verdict("fail", 1.0, f"the two sides differ by {evidence['difference']}")
    evidence["method"] = "evaluation at sample points"
    if numeric == "fail":
        why = info.get("reason", "the two sides differ")
        return verdict("fail", 0.95, f"{why} at a sample point")
    if numeric == "pass":
        return verdict("pass", 0.9, "equal at every sample point")
    return verdict("unknown", 0.5, "could not decide")
