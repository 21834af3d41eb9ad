"""The small statistics of ``veracity eval`` (:mod:`proxy.cli.evaluation`): precision, recall
and F1, Laplace's rule of succession, the Wilson score interval, reliability bins and the
expected calibration error, latency percentiles. Pure functions of counts and lists.
"""

from __future__ import annotations

import math
from typing import Any


_Z95 = 1.959963984540054  # standard normal 97.5 % quantile


def prf(tp: int, fp: int, fn: int) -> dict[str, float | None]:
    """Precision tp/(tp+fp), recall tp/(tp+fn), F1 (their harmonic mean). A ratio without a
    denominator is ``None`` (nothing flagged: no precision; nothing wrong: no recall), shown
    as "n/a", never as 0; F1 is None when either is, 0.0 when both are 0."""
    p = tp / (tp + fp) if tp + fp else None
    r = tp / (tp + fn) if tp + fn else None
    f1 = None if p is None or r is None else 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


def laplace(k: int, n: int) -> float:
    """Laplace's rule of succession (k + 1) / (n + 2): the posterior mean of a success rate under a
    uniform prior; 0.5 with no data."""
    return (k + 1) / (n + 2)


def wilson(k: int, n: int, z: float = _Z95) -> tuple[float, float]:
    """Wilson score interval (Wilson 1927) for k successes in n trials; (0, 1) with no data."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def _bin_of(conf: float, bins: int) -> int:
    # right-closed bins ((m-1)/M, m/M], m = 1..M, as 0-based index; round() absorbs 0.3*10 = 3.0000000000000004
    return min(bins, max(1, math.ceil(round(conf * bins, 9)))) - 1


def reliability_bins(conf: list[float], right: list[bool], bins: int = 10) -> list[dict[str, Any]]:
    """Per equal-width bin: ``lo``, ``hi``, ``n``, ``confidence`` (mean), ``accuracy`` (share right;
    None for an empty bin)."""
    acc: list[list[float]] = [[] for _ in range(bins)]
    ok: list[list[bool]] = [[] for _ in range(bins)]
    for c, r in zip(conf, right):
        b = _bin_of(float(c), bins)
        acc[b].append(float(c))
        ok[b].append(bool(r))
    return [{"lo": m / bins, "hi": (m + 1) / bins, "n": len(acc[m]),
             "confidence": sum(acc[m]) / len(acc[m]) if acc[m] else None,
             "accuracy": sum(ok[m]) / len(ok[m]) if ok[m] else None} for m in range(bins)]


def ece(conf: list[float], right: list[bool], bins: int = 10) -> float | None:
    """Expected calibration error (:mod:`proxy.cli.evaluation`'s docstring); None with no decisive check."""
    n = len(conf)
    if not n:
        return None
    return sum(b["n"] / n * abs(b["accuracy"] - b["confidence"]) for b in reliability_bins(conf, right, bins) if b["n"])


def percentiles(values: list[float]) -> dict[str, float] | None:
    """p50/p90/p95/p99 (numpy linear interpolation), mean, max, n; None for no values."""
    if not values:
        return None
    import numpy as np

    a = np.asarray(values, dtype=float)
    q = np.percentile(a, [50, 90, 95, 99])
    return {"n": int(a.size), "p50": float(q[0]), "p90": float(q[1]), "p95": float(q[2]), "p99": float(q[3]),
            "mean": float(a.mean()), "max": float(a.max())}
