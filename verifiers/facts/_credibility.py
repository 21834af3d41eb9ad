"""Credibility and agreement of passages (docs/facts.md, step 3 "Credibility").

* **Weights** per source: :data:`DEFAULT_WEIGHTS`, overridable by the policy's ``weights``
  dict, looked up by exact domain, then domain suffix (``.gov``, ``.edu``, ``.gov.uk``...,
  longest first), then backend name (``context``, ``local``, ``wikipedia``...), then ``*``.
  Defaults favour the request's own context (the app chose it), official sites (.gov, .int,
  .mil) and universities (.edu, .ac.*), then an encyclopedia, then the open web.
* **Independence**: passages from one domain (or one backend without domains) are one source;
  the strongest passage speaks for it.
* **Recency**: for a time-bound claim (:func:`~verifiers.facts._text.is_time_bound`), a web
  passage older than a year counts less, an undated one a little less.

:func:`agreement` turns per-source weights into one confidence, ``1 - prod(1 - base * w)``
over independent sources (the noisy-OR of independent witnesses).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Mapping

from verifiers.facts._passage import Passage

__all__ = ["DEFAULT_WEIGHTS", "weight_of", "source_key", "recency_factor", "agreement"]

#: credibility weight per source (backend name or domain suffix), when a policy gives no ``weights``
DEFAULT_WEIGHTS: dict[str, float] = {
    "context": 1.0,
    "local": 0.85,
    ".gov": 0.95, ".mil": 0.9, ".int": 0.9, ".edu": 0.9,
    ".gov.uk": 0.95, ".gov.au": 0.95, ".gc.ca": 0.95, ".europa.eu": 0.95, ".ac.uk": 0.9,
    "wikipedia.org": 0.8, "wikipedia": 0.8,
    "*": 0.6,
}


def weight_of(p: Passage, weights: Mapping[str, float] | None = None) -> float:
    """The credibility weight 0..1 of passage ``p`` (see module doc for the lookup order)."""
    w = {**DEFAULT_WEIGHTS, **(weights or {})}
    dom = (p.domain or "").lower().removeprefix("www.")
    if dom and dom in w:
        return float(w[dom])
    if dom:
        for suf in sorted((k for k in w if k.startswith(".")), key=len, reverse=True):
            if dom.endswith(suf) or ("." + dom).endswith(suf):
                return float(w[suf])
        parts = dom.split(".")
        for i in range(1, len(parts) - 1):  # en.wikipedia.org -> wikipedia.org
            parent = ".".join(parts[i:])
            if parent in w:
                return float(w[parent])
    if p.source and p.source in w:
        return float(w[p.source])
    return float(w.get("*", 0.6))


def source_key(p: Passage) -> str:
    """The independence key: the domain (without ``www.``), else the backend name."""
    return (p.domain or "").lower().removeprefix("www.") or p.source or "?"


def recency_factor(p: Passage, time_bound: bool, today: _dt.date | None = None) -> float:
    """1.0 unless the claim is time-bound; then 1.0 for context/local or a passage under a year
    old, 0.85 under three years, 0.7 older, 0.8 undated."""
    if not time_bound or p.source in ("context", "local"):
        return 1.0
    if not p.published:
        return 0.8
    try:
        parts = [int(x) for x in p.published[:10].split("-")]
        d = _dt.date(parts[0], parts[1] if len(parts) > 1 else 1, parts[2] if len(parts) > 2 else 1)
    except (ValueError, IndexError):
        return 0.8
    age = ((today or _dt.date.today()) - d).days
    return 1.0 if age <= 365 else 0.85 if age <= 3 * 365 else 0.7


def agreement(weights: Iterable[tuple[str, float]], base: float) -> float:
    """Noisy-OR confidence of independent sources: ``(source_key, weight)`` pairs, the
    strongest weight per key counted once; ``base`` is the confidence one full-weight source
    gives. Returns 0..1 rounded to 3 places."""
    best: dict[str, float] = {}
    for k, w in weights:
        best[k] = max(best.get(k, 0.0), w)
    miss = 1.0
    for w in best.values():
        miss *= 1.0 - base * max(0.0, min(1.0, w))
    return round(1.0 - miss, 3)
