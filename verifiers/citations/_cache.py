"""Cache of source answers: SQLite by default, Redis when configured, each with a TTL.

Keys are ``"<source>|<operation>|<argument>"``; values are the JSON of a
:class:`~verifiers.citations.sources._base.SourceResult` (``found`` / ``not_found`` only —
errors and timeouts are never cached, so a flaky source is asked again next time).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from typing import Any

from verifiers.citations._config import CacheSettings


class NullCache:
    """No caching (``cache.backend: none``)."""

    async def get(self, key: str) -> dict[str, Any] | None:
        return None

    async def set(self, key: str, value: dict[str, Any]) -> None:
        return None

    async def aclose(self) -> None:
        return None


class SQLiteCache:
    """A TTL cache in one SQLite file (WAL mode; safe across threads and processes).

    ``ttl`` in seconds. Any SQLite error degrades to a miss: the cache never breaks a check.
    """

    def __init__(self, path: str, ttl: float):
        self.path, self.ttl = path, ttl
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, timeout=1.0)
        with self._lock:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS cache(key TEXT PRIMARY KEY, value TEXT NOT NULL, expires REAL NOT NULL)")
            self._db.commit()

    async def get(self, key: str) -> dict[str, Any] | None:
        try:
            with self._lock:
                row = self._db.execute("SELECT value, expires FROM cache WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error:
            return None
        if not row or row[1] < time.time():
            return None
        return json.loads(row[0])

    async def set(self, key: str, value: dict[str, Any]) -> None:
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO cache(key, value, expires) VALUES (?,?,?)",
                                 (key, json.dumps(value, ensure_ascii=False), time.time() + self.ttl))
                self._db.commit()
        except sqlite3.Error:
            pass

    async def aclose(self) -> None:
        return None


class RedisCache:
    """A TTL cache in Redis (``SET key value EX ttl``) through ``redis.asyncio``.

    Connection errors degrade to a miss (logged by the caller's evidence as nothing at all).
    """

    def __init__(self, url: str, ttl: float, prefix: str = "veracity:citations:"):
        import redis.asyncio as aredis

        self.ttl, self.prefix = int(ttl), prefix
        self._r = aredis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)

    async def get(self, key: str) -> dict[str, Any] | None:
        try:
            v = await self._r.get(self.prefix + key)
        except Exception:
            return None
        return json.loads(v) if v else None

    async def set(self, key: str, value: dict[str, Any]) -> None:
        try:
            await self._r.set(self.prefix + key, json.dumps(value, ensure_ascii=False), ex=self.ttl)
        except Exception:
            pass

    async def aclose(self) -> None:
        try:
            await self._r.aclose()
        except Exception:
            pass


def make_cache(settings: CacheSettings) -> NullCache | SQLiteCache | RedisCache:
    """The cache for ``settings`` (``redis`` needs ``redis_url``; raises ``ValueError`` otherwise)."""
    if settings.backend == "none":
        return NullCache()
    if settings.backend == "redis":
        if not settings.redis_url:
            raise ValueError("cache.backend redis needs cache.redis_url")
        return RedisCache(settings.redis_url, settings.ttl)
    return SQLiteCache(os.path.expanduser(settings.path), settings.ttl)
