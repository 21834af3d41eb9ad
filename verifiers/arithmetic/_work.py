"""A work budget counted in operations, not in wall time, so a verdict never depends on load.

``check(answer, budget_ms=250)`` used to stop reading an answer when ``time.perf_counter()``
passed a deadline. On a loaded machine (two full ``veracity eval`` runs side by side) the same
answer was then read to a different point and its report changed between runs (five math
verdicts differed). The budget is now spent by the work done, each kind of operation at a fixed
cost in *units* (one unit ~ one microsecond of the reference machine, fitted on the 7,995 math
case answers, ``bench/results/arithmetic-determinism.md``): the same answer stops at the same
claim on every machine and under any load, and what is left unread is ``unknown`` with
``evidence.kind == "budget"``, never a different ``pass``/``fail``.

The costs (units per operation) over-estimate the measured times (median measured/estimated
0.38, p99 1.1): an answer read to its end unloaded is read to its end under this budget too (the
most expensive real answer is estimated at ~101,000 of the default 250,000 units).
"""

from __future__ import annotations

__all__ = ["Work", "UNITS_PER_MS", "COST_CHAR", "COST_PAIR", "COST_SECOND", "COST_IDENTITY", "COST_CONVERT",
           "COST_BASE"]

#: units of work per millisecond of ``budget_ms`` (one unit ~ 1 us on the reference machine)
UNITS_PER_MS = 1000
#: reading one character of a line that may hold a claim (tokenising, finding runs)
COST_CHAR = 3
#: deciding one ``a = b`` pair (parse, exact evaluation, tolerance)
COST_PAIR = 400
#: one second evaluation with SymPy's parser (``_confirm.second_value``)
COST_SECOND = 2500
#: one symbolic difference (``cancel(expand(a - b))``) of an identity with symbols
COST_IDENTITY = 8000
#: one unit conversion (pint)
COST_CONVERT = 3000
#: normalising the answer and finding its math regions, once per reading
COST_BASE = 500


class Work:
    """Units of work left for one reading of an answer. ``limit`` units (``None``: unlimited);
    :meth:`spend` adds to ``spent``; :attr:`over` is True once ``spent`` exceeds ``limit``.
    Not thread-safe: one ``Work`` per call of ``check``."""

    __slots__ = ("limit", "spent")

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0

    @classmethod
    def of_ms(cls, budget_ms: float) -> "Work":
        """The budget of ``budget_ms`` milliseconds of the reference machine (negative: 0)."""
        return cls(max(0.0, float(budget_ms)) * UNITS_PER_MS)

    def spend(self, units: int) -> None:
        """Count ``units`` of work done (never refuses: the caller checks :attr:`over` between
        claims)."""
        self.spent += units

    @property
    def over(self) -> bool:
        """True when more than ``limit`` units were spent (never for an unlimited budget); a
        budget of 0 is over as soon as any work is counted."""
        return self.limit is not None and self.spent > self.limit
