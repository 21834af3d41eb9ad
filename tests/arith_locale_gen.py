"""Generated statements in English and continental number formats, with an independent oracle.

Each :class:`Case` is a sentence stating ``a op b = c`` written by a writer of one locale
(``en``: "," groups and "." decimals; ``de``: "." groups and "," decimals, CLDR's pattern for de,
es, it, pt, nl), set among things that are not quantities: version numbers ("Python 3.12",
"v2.5", "GPT-3.5"), dates ("12.03.2024"), section numbers ("§ 3.2"), standards ("ISO 9001"),
clock times ("12.30 Uhr"), and sometimes a quantity that shows the writer's locale ("$2.50",
"2,50 €"). The oracle is ``Fraction`` arithmetic on the numbers drawn here, and for the other
reading a two-line CLDR rule on the written digits (:func:`read_as`) -- never the verifier's
parser.

Used by ``tests/verifiers/test_arithmetic_locale.py`` (invariants) and
``bench/arithmetic_locale_bench.py`` (false alarms and catches, this tree against another).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["Case", "cases", "read_as", "render"]

#: not quantities: what a number in them says about the locale is nothing
DISTRACTORS = {
    "en": ["Using Python 3.12, ", "With v2.5 of the tool: ", "As GPT-3.5 put it, ", "On 12.03.2024 ",
           "Per § 3.2, ", "Under ISO 9001, ", "See section 4.1: ", "Node 18.17 prints ", "In chapter 2.3, ",
           "Per RFC 7231, ", "At 12.30, ", "Release 1.25 says "],
    "de": ["Mit Python 3.12: ", "Laut v2.5 gilt: ", "Am 12.03.2024 ", "Nach § 3.2 ", "Nach ISO 9001 ",
           "Siehe Abschnitt 4.1: ", "In Kapitel 2.3 ", "Mit GPT-3.5: ", "Um 12.30 Uhr ", "Version 1.25: ",
           "Gemäß DIN 5008: "],
}
#: quantities that only one locale writes so
EVIDENCE = {"en": ["It costs $2.50 each. ", "Each weighs 2.5 kg. ", "The rate is 0.75. "],
            "de": ["Es kostet 2,50 € pro Stück. ", "Jedes wiegt 2,5 kg. ", "Der Satz ist 0,75. "]}
LEAD = {"en": ["The total is ", "So ", "We get ", ""], "de": ["Zusammen ergibt das ", "Also ", "Insgesamt: ", ""]}


def render(value: Fraction, locale: str) -> str:
    """``value`` (>= 0, at most two decimals) written as its locale writes it: thousands grouped
    by three ("," in en, "." in de) and the decimals after "." (en) or "," (de)."""
    whole, frac = divmod(value, 1)
    digits = f"{int(whole):,}"
    if locale == "de":
        digits = digits.replace(",", ".")
    if frac:
        dec = f"{float(frac):.2f}"[2:].rstrip("0") if frac * 100 == int(frac * 100) else None
        assert dec is not None, value
        digits += ("," if locale == "de" else ".") + dec
    return digits


def read_as(written: str, locale: str) -> Fraction:
    """The number ``written`` read by ``locale``'s rule (CLDR): en drops "," and reads "." as
    the decimal point; de drops "." and reads "," as the decimal comma."""
    if locale == "de":
        written = written.replace(".", "").replace(",", ".")
    else:
        written = written.replace(",", "")
    return Fraction(written)


@dataclass(frozen=True)
class Case:
    """One generated sentence: ``text``; ``locale`` of its writer; ``statement`` (the
    ``a op b = c`` part as written); ``right`` (true read as the writer reads it) and
    ``right_other`` (true read the other locale's way)."""

    text: str
    locale: str
    statement: str
    right: bool
    right_other: bool
    evidence: bool


_OPS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "×": lambda a, b: a * b}


def _truth(a: str, op: str, b: str, c: str, locale: str) -> bool:
    return _OPS[op](read_as(a, locale), read_as(b, locale)) == read_as(c, locale)


def cases(n: int, seed: int = 0) -> list[Case]:
    """``n`` generated cases (deterministic for a ``seed``); about half right, the wrong ones
    off by a drawn amount (sometimes 1,000 times off, the slip a locale confusion makes)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        loc = rng.choice(["en", "de"])
        op = rng.choice("+-×")
        if op == "×":
            a = Fraction(rng.randint(1000, 99_999))
            b = Fraction(rng.choice([2, 3, 4, 5, 10, 12]))
        else:
            a = Fraction(rng.choice([rng.randint(1000, 999_999), rng.randint(100, 999)]))
            b = Fraction(rng.choice([rng.randint(1000, 99_999), rng.randint(10, 999)]))
            if rng.random() < 0.2:
                a += Fraction(rng.randint(1, 99), 100)
            if op == "-" and b > a:
                a, b = b, a
        v = _OPS[op](a, b)
        ok = rng.random() < 0.5
        c = v if ok else rng.choice([v + rng.choice([1, 10, 100, 1000]), v * 1000, v / 1000 if v > 1000 else v + 7,
                                     v - rng.choice([1, 10, 100])])
        if c < 0 or c * 100 != int(c * 100):
            continue
        sa, sb, sc = render(a, loc), render(b, loc), render(c, loc)
        other = "de" if loc == "en" else "en"
        try:
            right_other = _truth(sa, op, sb, sc, other)
        except (ValueError, ZeroDivisionError):
            right_other = False
        statement = f"{sa} {op} {sb} = {sc}"
        lang = loc if rng.random() < 0.8 else other  # the prose is sometimes in the other language
        evidence = rng.random() < 0.3
        parts = [rng.choice(DISTRACTORS[lang]) if rng.random() < 0.8 else "", rng.choice(LEAD[lang]), statement, "."]
        if evidence:
            parts.insert(0, rng.choice(EVIDENCE[loc]))
        if rng.random() < 0.3:
            parts.append(" " + rng.choice(DISTRACTORS[lang]).strip(" ,:") + ".")
        text = re.sub(r"\s+", " ", "".join(parts)).strip()
        out.append(Case(text, loc, statement, _truth(sa, op, sb, sc, loc), right_other, evidence))
    return out
