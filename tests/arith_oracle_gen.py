"""Generated arithmetic statements with an independent oracle, for the differential tests
(``tests/verifiers/test_arithmetic_oracle.py``, bounded) and the long run (``bench/arithmetic_oracle_bench.py``).

docs/design.md "Test against an independent oracle": test a verifier against an independent oracle --
generated inputs in every notation, exact evaluation of what was generated, never its own
parser. Here an expression *tree* is generated; the oracle evaluates the tree with
``fractions.Fraction``; the verifier only ever sees the rendered text.

Everything draws from a ``random.Random`` (hypothesis's ``st.randoms()`` in the tests, a seeded
``Random`` in the bench), so one generator serves both.

Trees (tuples): ``("int", n)``, ``("dec", Fraction, text)``, ``("frac", p, q)``, ``("var", name)``,
``("bin", op, a, b)`` with op in ``+ - * /``, ``("pow", base, n)`` with a small whole exponent.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

NOTATIONS = ("python_spaced", "python_tight", "caret_unicode", "latex", "unicode_super", "words")
_VULGAR = {(1, 2): "½", (1, 4): "¼", (3, 4): "¾", (1, 3): "⅓", (2, 3): "⅔", (1, 8): "⅛", (3, 8): "⅜",
           (5, 8): "⅝", (7, 8): "⅞", (1, 5): "⅕", (2, 5): "⅖", (3, 5): "⅗", (4, 5): "⅘", (1, 6): "⅙",
           (5, 6): "⅚"}
_SUPER = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_PREC = {"+": 1, "-": 1, "*": 2, "/": 2}


class NoValue(Exception):
    """The tree has no value (division by zero) or one too large to state."""


# --- trees -----------------------------------------------------------------------------------

def leaf(rng: random.Random, fractions: bool = True) -> tuple:
    k = rng.random()
    if k < 0.55:
        return ("int", rng.choice([rng.randint(0, 12), rng.randint(2, 99), rng.randint(100, 999)]))
    if k < 0.85 or not fractions:
        d = rng.choice([1, 1, 2])
        n = rng.randint(1, 9999 if d == 2 else 999)
        v = Fraction(n, 10**d)
        whole, frac = divmod(n, 10**d)
        return ("dec", v, f"{whole}.{frac:0{d}d}")
    q = rng.randint(2, 9)
    return ("frac", rng.randint(1, q - 1), q)


def tree(rng: random.Random, depth: int = 0, max_depth: int = 3) -> tuple:
    """A random expression tree of numbers, + - * /, small powers and (implicit) parentheses."""
    if depth >= max_depth or rng.random() < 0.3 + 0.2 * depth:
        return leaf(rng)
    k = rng.random()
    if k < 0.15 and depth < max_depth:
        base = leaf(rng) if rng.random() < 0.6 else tree(rng, depth + 1, max_depth)
        return ("pow", base, rng.choice([0, 1, 2, 2, 2, 3, 3, 4, -1, -2]))
    op = rng.choice("+-*/")
    return ("bin", op, tree(rng, depth + 1, max_depth), tree(rng, depth + 1, max_depth))


def value(t: tuple, env: dict[str, Fraction] | None = None) -> Fraction:
    """The oracle: exact value of a tree (``NoValue`` on division by zero)."""
    kind = t[0]
    if kind == "int":
        return Fraction(t[1])
    if kind == "dec":
        return t[1]
    if kind == "frac":
        return Fraction(t[1], t[2])
    if kind == "var":
        return (env or {})[t[1]]
    if kind == "pow":
        b = value(t[1], env)
        if b == 0 and t[2] < 0:
            raise NoValue("0 to a negative power")
        r = b ** t[2]
        if max(abs(r.numerator), r.denominator) > 10**40:
            raise NoValue("too large")
        return r
    a, b = value(t[2], env), value(t[3], env)
    op = t[1]
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise NoValue("division by zero")
    return a / b


# --- rendering ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Style:
    plus: str = " + "
    minus: str = " - "
    times: str = " * "
    div: str = " / "
    lp: str = "("
    rp: str = ")"
    pow_fmt: str = "{b} ** {n}"  # or "{b}^{n}", "{b}^{{{n}}}", "{b}{sup}"
    frac_fmt: str = "({p}/{q})"
    latex: bool = False
    vulgar: bool = False


STYLES = {
    "python_spaced": Style(),
    "python_tight": Style(plus="+", minus="-", times="*", div="/", pow_fmt="{b}**{n}"),
    "caret_unicode": Style(times=" × ", div=" ÷ ", minus=" − ", pow_fmt="{b}^{n}"),
    "latex": Style(times=" \\cdot ", div=" \\div ", lp="\\left(", rp="\\right)", pow_fmt="{b}^{{{n}}}",
                   frac_fmt="\\frac{{{p}}}{{{q}}}", latex=True),
    "latex_times": Style(times=" \\times ", pow_fmt="{b}^{{{n}}}", frac_fmt="\\frac{{{p}}}{{{q}}}", latex=True),
    "unicode_super": Style(times=" × ", div=" ÷ ", pow_fmt="{b}{sup}", vulgar=True),
}


def render(t: tuple, style: Style, parent: int = 0, right: bool = False) -> str:
    """Text of a tree in one notation, with the parentheses standard precedence needs (and
    ``a - (b - c)``, ``a / (b * c)`` kept)."""
    kind = t[0]
    if kind == "int":
        return str(t[1])
    if kind == "dec":
        return t[2]
    if kind == "var":
        return t[1]
    if kind == "frac":
        p, q = t[1], t[2]
        if style.vulgar and (p, q) in _VULGAR:
            return _VULGAR[(p, q)]
        s = style.frac_fmt.format(p=p, q=q)
        return s
    if kind == "pow":
        base = render(t[1], style, 4)
        if t[1][0] in ("bin", "pow") or (t[1][0] == "frac" and style.latex):
            base = f"{style.lp}{base}{style.rp}"
        n = t[2]
        if style.pow_fmt == "{b}{sup}":
            return f"{base}{str(n).translate(_SUPER)}"
        if style.pow_fmt == "{b} ** {n}" or style.pow_fmt == "{b}**{n}":
            return style.pow_fmt.format(b=base, n=str(n) if n >= 0 else f"({n})")
        if style.pow_fmt == "{b}^{n}":
            return f"{base}^{n}" if n >= 0 else f"{base}^({n})"
        return style.pow_fmt.format(b=base, n=n)
    op = t[1]
    p = _PREC[op]
    left = render(t[2], style, p)
    rt = render(t[3], style, p, right=True)
    if t[3][0] == "bin" and (_PREC[t[3][1]] < p or (_PREC[t[3][1]] == p and op in "-/")):
        rt = f"{style.lp}{rt}{style.rp}"
    if t[2][0] == "bin" and _PREC[t[2][1]] < p:
        left = f"{style.lp}{left}{style.rp}"
    sym = {"+": style.plus, "-": style.minus, "*": style.times, "/": style.div}[op]
    return f"{left}{sym}{rt}"


def words(t: tuple) -> str | None:
    """Spoken form of a one-operation tree of plain numbers ("12 times 4", "7 squared", "2 to
    the power of 5"); ``None`` for anything else (spoken operators have no parentheses)."""
    def num(x: tuple) -> str | None:
        return str(x[1]) if x[0] == "int" else x[2] if x[0] == "dec" else None

    if t[0] == "pow":
        b = num(t[1])
        if b is None or t[2] < 0:
            return None
        if t[2] == 2:
            return f"{b} squared"
        if t[2] == 3:
            return f"{b} cubed"
        return f"{b} to the power of {t[2]}"
    if t[0] == "bin":
        a, b = num(t[2]), num(t[3])
        if a is None or b is None:
            return None
        return f"{a} {dict(zip('+-*/', ['plus', 'minus', 'times', 'divided by']))[t[1]]} {b}"
    return None


# --- statements -------------------------------------------------------------------------------

def stated(v: Fraction, decimals: int) -> str:
    """``v`` correctly rounded to ``decimals`` places (half-even; a tie is either neighbour for
    the verifier's rule)."""
    scaled = round(v * 10**decimals)  # Fraction rounding: exact, half-even
    out = str(Decimal(scaled).scaleb(-decimals))
    if "E" in out or "e" in out:
        out = format(Decimal(scaled).scaleb(-decimals), "f")
    return out.lstrip("-") if scaled == 0 else out


def decimals_for(v: Fraction, rng: random.Random) -> int:
    """Decimals to state: exact when ``v`` terminates within 4 places, else 2 or 4."""
    for k in range(0, 5):
        if (v * 10**k).denominator == 1:
            return k
    return rng.choice([2, 4])


def wrong_value(v: Fraction, decimals: int, rng: random.Random) -> str:
    """A value at the same precision that is off by at least 2 units of its last place and by
    more than 3e-9 relative (the verifier's tolerance is half a unit plus 1e-9 relative; one
    unit off may be a truncation, which is ``unknown``)."""
    ulp = Fraction(1, 10**decimals)
    right = Fraction(Decimal(stated(v, decimals)))
    # beyond the verifier's tolerance: half a unit of the last place plus 1e-9 relative
    floor = max(2 * ulp, ulp * (int(abs(v) * 3 / 10**9 / ulp) + 2))
    if rng.random() < 0.3 and right != 0:  # a plausible slip: a factor of 10, a digit dropped
        w = right * rng.choice([10, Fraction(1, 10)])
        if abs(w - right) >= floor:
            return stated(w, decimals)
    k = rng.choice([1, 1, 2, 3, 5, 17, 50]) * rng.choice([-1, 1])
    return stated(right + k * floor, decimals)


PROSE = [
    "So we get {e} = {v}.",
    "First, {e} = {v}, and that is the total.",
    "The result: {e} = {v}",
    "We compute {e} = {v} apples.",
    "Then {e} equals {v}.",
    "- {e} = {v}",
]
LATEX = ["\\[ {e} = {v} \\]", "So \\( {e} = {v} \\).", "$$ {e} = {v} $$", "Hence $ {e} = {v} $."]
TABLE = "| Calculation | Result |\n|---|---|\n| {e} | {v} |\n"
CODE = "```python\nx = compute()\n# {e} = {v}\n```\n"
WORDS = ["So {e} is {v}.", "{e} equals {v}.", "We know that {e} is {v}."]


@dataclass
class Statement:
    notation: str
    text: str
    right: bool
    oracle: Fraction
    decimals: int
    value_text: str
    expression: str


def statement(rng: random.Random, notation: str, right: bool) -> Statement:
    """One statement ``<expression> = <value>`` in ``notation``, inside prose (or display math,
    a table, a code comment), stating the right value (correctly rounded) or a wrong one.
    Raises ``NoValue`` when the drawn tree has no value or no rendering in this notation."""
    if notation == "words":
        t = ("pow", leaf(rng, fractions=False), rng.choice([2, 3, 4, 5])) if rng.random() < 0.3 else \
            ("bin", rng.choice("+-*/"), leaf(rng, fractions=False), leaf(rng, fractions=False))
        e = words(t)
        if e is None:
            raise NoValue("no spoken form")
    else:
        t = tree(rng)
        if t[0] in ("int", "dec", "frac"):
            t = ("bin", rng.choice("+-*/"), t, leaf(rng))
        style = STYLES["latex_times" if notation == "latex" and rng.random() < 0.5 else notation]
        e = render(t, style)
    v = value(t)
    if abs(v) > 10**12 or (v != 0 and abs(v) < Fraction(1, 10**6)):
        raise NoValue("out of the stated range")
    d = decimals_for(v, rng)
    vt = stated(v, d) if right else wrong_value(v, d, rng)
    if notation == "words":
        text = rng.choice(WORDS).format(e=e, v=vt)
    elif notation == "latex":
        text = rng.choice(LATEX).format(e=e, v=vt)
    else:
        k = rng.random()
        if k < 0.1:
            text = TABLE.format(e=e, v=vt)
        elif k < 0.2 and notation.startswith("python"):
            text = CODE.format(e=e, v=vt)
        else:
            text = rng.choice(PROSE).format(e=e, v=vt)
    return Statement(notation, text, right, v, d, vt, e)


# --- formulas with symbols (equivalent) --------------------------------------------------------

def sym_tree(rng: random.Random, names: str = "xy", depth: int = 0) -> tuple:
    if depth >= 3 or rng.random() < 0.35 + 0.15 * depth:
        return ("var", rng.choice(names)) if rng.random() < 0.6 else ("int", rng.randint(1, 9))
    if rng.random() < 0.15:
        return ("pow", sym_tree(rng, names, depth + 1), rng.choice([2, 2, 3]))
    return ("bin", rng.choice("+-*"), sym_tree(rng, names, depth + 1), sym_tree(rng, names, depth + 1))


def rewrite(t: tuple, rng: random.Random) -> tuple:
    """A tree equal to ``t`` for every value of its symbols: operands of + and * swapped,
    products distributed over sums, squares of sums expanded."""
    kind = t[0]
    if kind == "pow":
        b = rewrite(t[1], rng)
        if t[2] == 2 and b[0] == "bin" and b[1] == "+" and rng.random() < 0.5:
            a, c = b[2], b[3]
            return ("bin", "+", ("bin", "+", ("pow", a, 2), ("bin", "*", ("int", 2), ("bin", "*", a, c))), ("pow", c, 2))
        return ("pow", b, t[2])
    if kind != "bin":
        return t
    op, a, b = t[1], rewrite(t[2], rng), rewrite(t[3], rng)
    r = rng.random()
    if op in "+*" and r < 0.5:
        a, b = b, a
    if op == "*" and b[0] == "bin" and b[1] in "+-" and rng.random() < 0.5:
        return ("bin", b[1], ("bin", "*", a, b[2]), ("bin", "*", a, b[3]))
    return ("bin", op, a, b)


def perturb(t: tuple, rng: random.Random) -> tuple:
    """A near-identity: one number or one operator of ``t`` changed."""
    kind = t[0]
    if kind == "int":
        return ("int", t[1] + rng.choice([-1, 1, 2]))
    if kind == "var":
        return ("bin", "+", t, ("int", 1)) if rng.random() < 0.5 else ("bin", "*", ("int", 2), t)
    if kind == "pow":
        return ("pow", perturb(t[1], rng), t[2]) if rng.random() < 0.7 else ("pow", t[1], t[2] + 1)
    if rng.random() < 0.2:
        return ("bin", {"+": "-", "-": "+", "*": "+", "/": "*"}[t[1]], t[2], t[3])
    if rng.random() < 0.5:
        return ("bin", t[1], perturb(t[2], rng), t[3])
    return ("bin", t[1], t[2], perturb(t[3], rng))


FORMULA_STYLES = {
    "python": Style(pow_fmt="{b} ** {n}"),
    "caret": Style(pow_fmt="{b}^{n}"),
    "unicode": Style(times=" · ", pow_fmt="{b}{sup}"),
    "latex": Style(times=" \\cdot ", pow_fmt="{b}^{{{n}}}", frac_fmt="\\frac{{{p}}}{{{q}}}", latex=True,
                   lp="\\left(", rp="\\right)"),
}


def differs(a: tuple, b: tuple, rng: random.Random, names: str = "xy", points: int = 8) -> bool | None:
    """The oracle for formulas: exact evaluation at random rational points. True when the two
    trees differ at a point, False when they agree at every point, None when no point had a
    value on both sides."""
    seen = 0
    for _ in range(points * 3):
        env = {n: Fraction(rng.randint(-50, 50), rng.randint(1, 7)) for n in names}
        try:
            va, vb = value(a, env), value(b, env)
        except (NoValue, ZeroDivisionError):
            continue
        seen += 1
        if va != vb:
            return True
        if seen >= points:
            return False
    return None if seen == 0 else False


# --- unit conversions (pint as the oracle) --------------------------------------------------------

UNIT_PAIRS = [("km", "miles"), ("miles", "km"), ("kg", "pounds"), ("pounds", "kg"), ("hours", "minutes"),
              ("minutes", "hours"), ("feet", "inches"), ("inches", "cm"), ("liters", "gallons"),
              ("gallons", "liters"), ("meters", "feet"), ("ounces", "grams"), ("days", "hours"),
              ("cm²", "mm²"), ("km", "meters")]
_PINT_NAMES = {"km": "kilometer", "miles": "mile", "kg": "kilogram", "pounds": "pound", "hours": "hour",
               "minutes": "minute", "feet": "foot", "inches": "inch", "cm": "centimeter", "liters": "liter",
               "gallons": "gallon", "meters": "meter", "ounces": "ounce", "grams": "gram", "days": "day",
               "cm²": "centimeter**2", "mm²": "millimeter**2"}
UNIT_TEMPLATES = ["{a} {u} = {b} {w}", "So {a} {u} is {b} {w}.", "That is, {a} {u} = {b} {w} in total."]


def conversion(rng: random.Random, right: bool, ureg) -> tuple[str, Fraction, int, str]:  # type: ignore[no-untyped-def]
    """``(text, oracle value, decimals, stated)`` of a conversion statement; the oracle is
    pint's conversion (``ureg``: a ``pint.UnitRegistry``) of the generated amount."""
    u, w = rng.choice(UNIT_PAIRS)
    amount = rng.choice([Fraction(rng.randint(1, 500)), Fraction(rng.randint(1, 9999), 10)])
    a_text = str(amount.numerator) if amount.denominator == 1 else f"{float(amount):.1f}"
    conv = ureg.Quantity(Fraction(amount.numerator, amount.denominator), _PINT_NAMES[u]).to(_PINT_NAMES[w]).magnitude
    v = Fraction(conv).limit_denominator(10**12) if not isinstance(conv, Fraction) else conv
    d = decimals_for(v, rng) if v.denominator in (1, 2, 4, 5, 10, 20, 25, 50, 100) else rng.choice([1, 2, 3])
    b = stated(v, d) if right else wrong_value(v, d, rng)
    text = rng.choice(UNIT_TEMPLATES).format(a=a_text, u=u, b=b, w=w)
    return text, v, d, b
