"""Units of a claim's sides: physical units left after rates cancel (:func:`_uncancelled`), a
stated unit that conflicts with the expression's (:func:`_units_conflict`), money units, dozens."""

from __future__ import annotations

from typing import Any

from verifiers.arithmetic._tokens import Token
from verifiers.arithmetic._units import money_unit, unit_info
from verifiers.arithmetic._segments import _Seg


def _phys(units: list[str]) -> list[tuple[str, str]]:
    out = []
    for u in units:
        info = unit_info(u)
        if info is not None:
            out.append(info)
    return out


def _uncancelled(seg: _Seg, lit_unit: str | None = None) -> list[str]:
    """The expression's unit words, less each rate denominator and one unit it cancels:
    ``2 years * 12 months per year`` leaves ``months``; none when the stated value is in the
    unit of a rate denominator (``lit_unit``)."""
    units = list(seg.units)
    if lit_unit is not None:
        li = unit_info(lit_unit)
        if li is not None and any((unit_info(d) or ("", ""))[0] == li[0] for d in seg.per_units or []):
            return []  # "6 months / 4 months per year = 1.5 years": the result is in the rate's denominator
    for d in seg.per_units or []:
        if d in units:
            units.remove(d)
        di = unit_info(d)
        for u in units:
            if di is not None and unit_info(u) is not None and unit_info(u)[0] == di[0]:  # type: ignore[index]
                units.remove(u)
                break
    return units


def _units_conflict(expr_units: list[str], expr_money: set[str], lit: Any) -> bool:
    """True when the stated literal's unit differs from a unit of the same dimension on the
    expression side (``2 * 30 minutes = 1 hour``), or cents meet dollars. ``expr_units`` are
    the units left after rates cancel (``_uncancelled``)."""
    lit_info = unit_info(lit.unit)
    if lit_info is not None:
        for name, dim in _phys(expr_units):
            if dim == lit_info[1] and name != lit_info[0]:
                return True
    m = money_unit(lit.money)
    if m is not None and expr_money and m not in expr_money:
        return True
    if m is None and "¢" in expr_money:
        return True
    return False


def _money_of(toks: list[Token]) -> set[str]:
    out = set()
    for t in toks:
        if t.kind == "NUM" and t.lit is not None:
            m = money_unit(t.lit.money)
            if m:
                out.add(m)
    return out



def _counts_dozens(expr_units: list[str], lit: Any) -> bool:
    """The expression counts in dozens and the stated value does not."""
    lit_info = unit_info(lit.unit)
    return (lit_info is None or lit_info[0] != "dozen") and any(
        (unit_info(u) or ("", ""))[0] == "dozen" for u in expr_units)
