"""Verdict cache of the facts verifier (docs/facts.md): SQLite by default, Redis when a URL
is given, each with a TTL. Keyed by the normalised claim, the backends consulted (each
backend's ``cache_key`` when it has one -- the ``context`` backend's includes a digest of the
request's text -- else its name and where it searches) and the settings the verdict depends on
(credibility weights, whether a model judged). Only settled verdicts are stored (never one reached while
a backend was unavailable or the model failed), so a flaky source is asked again next time.
Any storage error degrades to a miss: the cache never breaks a check.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Any

from verifiers.facts._text import norm_claim

__all__ = ["VerdictCache", "cache_key"]


def _backend_key(b: Any) -> str:
    """A backend's identity for the cache: its ``cache_key`` when it has one (``context``: name +
    text digest), else its name plus where it searches (``url``, ``db``, ``lang``, ``params``):
    two policies' ``searxng`` backends on different instances are different sources."""
    own = getattr(b, "cache_key", None)
    if own:
        return str(own)
    parts = [str(getattr(b, "name", "?"))]
    for attr in ("url", "db", "lang", "params"):
        v = getattr(b, attr, None)
        if v is not None:
            parts.append(f"{attr}={json.dumps(v, sort_keys=True, default=str)}")
    return "|".join(parts)


def cache_key(claim: str, backends: Sequence[Any], settings: Any = None) -> str:
    """``facts:v1:<sha256>`` of the normalised claim, the sorted backend keys (see
    :func:`_backend_key`) and ``settings`` -- anything else the verdict depends on (the
    credibility ``weights``, whether a verifier model judged), JSON-serialised with sorted keys;
    ``None`` adds nothing (the key of a cache written without settings)."""
    names = sorted(_backend_key(b) for b in backends)
    raw = norm_claim(claim) + "\x1e" + "\x1f".join(names)
    if settings is not None:
        raw += "\x1e" + json.dumps(settings, sort_keys=True, default=str)
    return "facts:v1:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


class VerdictCache:
    """A TTL cache of claim verdicts.

    Args:
        path: SQLite file, or ``":memory:"`` (default; one process).
        url: a Redis URL (``redis://host:6379/0``); when given, Redis is used instead of SQLite
            (``SET key value EX ttl`` through ``redis.asyncio``), shared by every replica.
        ttl_s: seconds a verdict stays valid (default one day).

    ``await get(key) -> dict | None``, ``await set(key, value_dict)``, ``await aclose()``;
    ``hits``/``misses`` count lookups.
    """

    def __init__(self, path: str = ":memory:", *, url: str | None = None, ttl_s: float = 86400) -> None:
        self.ttl_s = float(ttl_s)
        self.url = url
        self.hits = 0
        self.misses = 0
        self._redis = None
        self._db: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if url:
            import redis.asyncio as aredis

            self._redis = aredis.from_url(url)
        else:
            self._db = sqlite3.connect(path, check_same_thread=False, timeout=1.0)
            with self._lock:
                if path != ":memory:":
                    self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("CREATE TABLE IF NOT EXISTS verdicts(key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                                 "expires REAL NOT NULL)")
                self._db.commit()

    async def get(self, key: str) -> dict[str, Any] | None:
        raw: Any = None
        try:
            if self._redis is not None:
                raw = await self._redis.get(key)
            else:
                with self._lock:
                    row = self._db.execute("SELECT value, expires FROM verdicts WHERE key = ?", (key,)).fetchone()
                raw = row[0] if row and row[1] >= time.time() else None
            value = json.loads(raw) if raw else None
        except Exception:
            value = None
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    async def set(self, key: str, value: dict[str, Any]) -> None:
        data = json.dumps(value, ensure_ascii=False)
        try:
            if self._redis is not None:
                await self._redis.set(key, data, ex=max(1, int(self.ttl_s)))
            else:
                with self._lock:
                    self._db.execute("INSERT OR REPLACE INTO verdicts(key, value, expires) VALUES (?,?,?)",
                                     (key, data, time.time() + self.ttl_s))
                    self._db.commit()
        except Exception:
            pass

    async def aclose(self) -> None:
        if self._redis is not None:
            try:
                await self._redis.aclose()
            except Exception:
                pass
