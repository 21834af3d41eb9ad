"""Unit words the verifier understands, and conversions through pint.

Only a whitelist of unambiguous everyday units is recognised (``km``, ``miles``, ``°F``,
``hours``, ``kg``, ``gallons`` ...). Months and years (variable length), tons (short/long/metric),
and one-letter symbols (``m``, ``g``, ``s``) are left out on purpose: a claim with them is not
checked as a conversion. pint (https://pint.readthedocs.io) does the conversion; its registry is
built once, on first use.
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
    return _UNITS.get(word.lower())


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
    if a is None or b is None or a[1] != b[1] or a[1].startswith("money"):
        return None
    ureg = _registry()
    try:
        q = ureg.Quantity(float(value), a[0]).to(b[0])
    except Exception:  # pint raises its own error family; any failure means "cannot convert"
        return None
    return float(q.magnitude)
