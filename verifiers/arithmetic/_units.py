"""Unit words the verifier understands, and conversions through pint.

Only a whitelist of unambiguous everyday units is recognised (``km``, ``miles``, ``°F``,
``hours``, ``kg``, ``gallons`` ...). Tons (short/long/metric) and one-letter symbols (``m``,
``g``, ``s``) are left out on purpose: a claim with them is not checked as a conversion. pint
(https://pint.readthedocs.io) does the conversion; its registry is built once, on first use.

Calendar units (``year``, ``month``, ``decade``, ``century``) have no single length, so they
are not given to pint (whose ``year`` is the Julian 365.25 days and would fail "1 year = 365
days"). Between themselves the factors are exact (12 months a year, 10 years a decade, 100 a
century). Against days, weeks and shorter units every convention in common use is a candidate
(``calendar_candidates``): a year of 364 (52 weeks), 365, 365.25 or 366 days; a month of 28
(4 weeks), 29, 30, 365/12, 365.25/12 or 31 days. A stated value passes when it matches one
candidate, fails only when it lies outside all of them, and is otherwise ``unknown``.

``dozen`` is a count unit: ``N dozen`` is ``12 N`` of a plain count (``4 dozen = 48 eggs``).
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

# word -> (pint unit name, dimension)
_UNITS: dict[str, tuple[str, str]] = {}


def _add(dim: str, pint_name: str, *words: str) -> None:
    for w in words:
        _UNITS[w] = (pint_name, dim)


_add("length", "kilometer", "km", "kms", "kilometer", "kilometers", "kilometre", "kilometres")
_add("length", "meter", "meter", "meters", "metre", "metres")
_add("length", "centimeter", "cm", "centimeter", "centimeters", "centimetre", "centimetres")
_add("length", "millimeter", "mm", "millimeter", "millimeters", "millimetre", "millimetres")
_add("length", "mile", "mile", "miles", "mi")
_add("length", "foot", "ft", "foot", "feet")
_add("length", "inch", "inch", "inches")
_add("length", "yard", "yd", "yds", "yard", "yards")
_add("mass", "kilogram", "kg", "kgs", "kilogram", "kilograms")
_add("mass", "gram", "gram", "grams")
_add("mass", "milligram", "mg", "milligram", "milligrams")
_add("mass", "pound", "lb", "lbs", "pound", "pounds")
_add("mass", "ounce", "oz", "ounce", "ounces")
_add("volume", "liter", "liter", "liters", "litre", "litres")
_add("volume", "milliliter", "ml", "milliliter", "milliliters", "millilitre", "millilitres")
_add("volume", "gallon", "gallon", "gallons", "gal")
_add("volume", "quart", "quart", "quarts", "qt")
_add("volume", "pint", "pint", "pints")
_add("volume", "cup", "cup", "cups")
_add("temperature", "degF", "degf", "fahrenheit")
_add("temperature", "degC", "degc", "celsius")
_add("temperature", "kelvin", "kelvin")
_add("time", "second", "second", "seconds", "sec", "secs")
_add("time", "minute", "minute", "minutes", "min", "mins")
_add("time", "hour", "hour", "hours", "hr", "hrs")
_add("time", "day", "day", "days")
_add("time", "week", "week", "weeks")
_add("time", "month", "month", "months")
_add("time", "year", "year", "years", "yr", "yrs")
_add("time", "decade", "decade", "decades")
_add("time", "century", "century", "centuries")
_add("count", "dozen", "dozen", "dozens")
_add("speed", "mile/hour", "mph")
_add("speed", "kilometer/hour", "kph", "kmh")
_add("area", "acre", "acre", "acres")
_add("area", "hectare", "hectare", "hectares")
_add("money_cents", "cent", "¢")
_add("money_units", "dollar", "$")


def unit_info(word: str | None) -> tuple[str, str] | None:
    """``(pint name, dimension)`` for a recognised unit word, else ``None``."""
    if not word:
        return None
    w = word.lower()
    if "^" in w:  # "cm^2", "m^3": a length unit to a power is an area or a volume
        base, _, power = w.partition("^")
        info = _UNITS.get(base)
        if info is None or info[1] != "length" or power not in ("2", "3"):
            return None
        return (f"{info[0]}**{power}", f"length^{power}")
    return _UNITS.get(w)


def money_unit(money: str | None) -> str | None:
    """``"¢"`` for cents, ``"$"`` for any currency unit, else ``None``."""
    if money is None:
        return None
    return "¢" if money == "¢" else "$"


@lru_cache(maxsize=1)
def _registry() -> Any:
    import pint

    return pint.UnitRegistry()


def convert(value: Fraction, from_word: str, to_word: str) -> float | None:
    """``value`` in unit ``from_word`` expressed in ``to_word`` (float), or ``None`` when the
    words are not recognised or not of the same dimension."""
    a, b = unit_info(from_word), unit_info(to_word)
    if a is None or b is None or a[1] != b[1] or a[1].startswith("money") or a[1] == "count":
        return None
    if a[0] in _CALENDAR_MONTHS or b[0] in _CALENDAR_MONTHS:
        return None  # no single factor: see calendar_candidates
    ureg = _registry()
    try:
        q = ureg.Quantity(float(value), a[0]).to(b[0])
    except Exception:  # pint raises its own error family; any failure means "cannot convert"
        return None
    return float(q.magnitude)


# Calendar factors. Exact within the calendar group (in months) and within the clock group
# (in seconds); between the groups, every common convention (see the module docstring).
_CALENDAR_MONTHS = {"month": Fraction(1), "year": Fraction(12), "decade": Fraction(120), "century": Fraction(1200)}
_CLOCK_SECONDS = {"second": Fraction(1), "minute": Fraction(60), "hour": Fraction(3600), "day": Fraction(86400),
                  "week": Fraction(604800)}
_DAYS_PER_MONTH = (Fraction(28), Fraction(29), Fraction(30), Fraction(365, 12), Fraction(1461, 48), Fraction(31))
_DAYS_PER_YEAR = (Fraction(364), Fraction(365), Fraction(1461, 4), Fraction(366))


def calendar_candidates(value: Fraction, from_word: str, to_word: str) -> list[Fraction] | None:
    """Every value ``value`` ``from_word`` may be in ``to_word`` when a calendar unit (year,
    month, decade, century) is involved: one exact value between calendar units, one per
    calendar convention against days/weeks/hours/minutes/seconds (sorted, exact). ``None``
    when no calendar unit is involved or the words are not time units."""
    a, b = unit_info(from_word), unit_info(to_word)
    if a is None or b is None or a[1] != "time" or b[1] != "time":
        return None
    fa, fb = a[0], b[0]
    if fa not in _CALENDAR_MONTHS and fb not in _CALENDAR_MONTHS:
        return None
    if fa in _CALENDAR_MONTHS and fb in _CALENDAR_MONTHS:
        return [value * _CALENDAR_MONTHS[fa] / _CALENDAR_MONTHS[fb]]
    # a month is converted with the month lengths, longer units with the year lengths
    lengths = _DAYS_PER_MONTH if "month" in (fa, fb) else tuple(d / 12 for d in _DAYS_PER_YEAR)
    return sorted({value * _seconds_per(fa, m) / _seconds_per(fb, m) for m in lengths})


def _seconds_per(unit: str, days_per_month: Fraction) -> Fraction:
    if unit in _CALENDAR_MONTHS:
        return _CALENDAR_MONTHS[unit] * days_per_month * 86400
    return _CLOCK_SECONDS[unit]


def dozen_factor(from_word: str | None, to_word: str | None) -> Fraction | None:
    """12 (``dozen`` -> a plain count), 1/12 (a plain count -> ``dozen``), else ``None``. A
    plain count is a number with no unit or with a word that is not a known unit (eggs)."""
    a, b = unit_info(from_word), unit_info(to_word)
    if a is not None and a[0] == "dozen" and b is None:
        return Fraction(12)
    if b is not None and b[0] == "dozen" and a is None:
        return Fraction(1, 12)
    return None
