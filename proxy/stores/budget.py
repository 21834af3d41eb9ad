"""Verification budgets: per request, and per key / team per UTC day.

- :class:`RequestBudget` counts one request's extra upstream calls and tokens and holds its
  verification deadline (``time.monotonic`` based).
- :class:`DailyBudgets` checks and charges per-key and per-team daily totals of extra tokens
  and extra cost (USD) in a store: :class:`SQLiteStore` by default, :class:`RedisStore` when a
  ``redis_url`` is configured so that several gateway replicas share one budget.
- :class:`PriceTable` prices tokens from litellm's bundled model price table
  (``model_prices_and_context_window_backup.json``), read as JSON without importing litellm
  (the import alone costs seconds and ~200 MB). Without litellm installed, a trimmed copy
  shipped in ``proxy/data/model_prices.json`` is used.
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

__all__ = ["RequestBudget", "DailyBudgets", "SQLiteStore", "RedisStore", "PriceTable",
           "usage_tokens", "today"]

_PRICE_FILE = "model_prices_and_context_window_backup.json"
_SHIPPED_PRICES = Path(__file__).resolve().parents[1] / "data" / "model_prices.json"


def usage_tokens(completion: Any) -> int:
    """``usage.total_tokens`` (or prompt + completion) of a chat.completion dict; 0 if absent.
    Counts that are not ints in 0..:data:`MAX_USAGE_TOKENS` (negative, bool, 10**30) are ignored:
    a Prometheus counter raises on a negative increment, and a budget must not be refunded."""
    usage = completion.get("usage") if isinstance(completion, dict) else None
    if not isinstance(usage, dict):
        return 0
    total = usage.get("total_tokens")
    if is_token_count(total):
        return total
    p, c = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return (p if is_token_count(p) else 0) + (c if is_token_count(c) else 0)


#: Largest token count believed from an upstream's ``usage`` (a bigger one is a broken or hostile
#: server: counters and budgets must not be poisoned by it).
MAX_USAGE_TOKENS = 10**9


def is_token_count(v: Any) -> bool:
    """Whether ``v`` is a token count to believe: an int (not bool) in 0..MAX_USAGE_TOKENS."""
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_USAGE_TOKENS


class RequestBudget:
    """One request's verification budget.

    Args:
        extra_calls: extra upstream calls allowed (sentinel + correction rounds).
        extra_tokens: extra tokens (prompt + completion of those calls) allowed.
        deadline_ms: wall time for verification and correction, from construction.

    ``exhausted`` is the first reason the budget ran out (``extra_calls``, ``extra_tokens``,
    ``deadline``) or None. Spending is recorded with :meth:`charge`.
    """

    def __init__(self, extra_calls: int = 4, extra_tokens: int = 8000, deadline_ms: float = 30000,
                 *, clock=time.monotonic):
        self.max_calls = extra_calls
        self.max_tokens = extra_tokens
        self._clock = clock
        self.started = clock()
        self.deadline = self.started + deadline_ms / 1000.0
        self.calls = 0
        self.tokens = 0
        self.exhausted: str | None = None

    @classmethod
    def from_policy(cls, budget: Any) -> "RequestBudget":
        """From a ``policy.budgets.request`` model."""
        return cls(budget.extra_calls, budget.extra_tokens, budget.deadline_ms)

    def remaining_s(self) -> float:
        """Seconds until the deadline (never negative)."""
        return max(0.0, self.deadline - self._clock())

    def allow_call(self) -> bool:
        """True if one more extra upstream call fits (calls, tokens and time left); otherwise
        records the reason in ``exhausted`` and returns False."""
        if self.calls >= self.max_calls:
            self.exhausted = self.exhausted or "extra_calls"
        elif self.tokens >= self.max_tokens:
            self.exhausted = self.exhausted or "extra_tokens"
        elif self.remaining_s() <= 0:
            self.exhausted = self.exhausted or "deadline"
        else:
            return True
        return False

    def charge(self, tokens: int, calls: int = 1) -> None:
        """Record an extra upstream call that used ``tokens`` tokens."""
        self.calls += calls
        self.tokens += max(0, int(tokens))
        if self.tokens > self.max_tokens:
            self.exhausted = self.exhausted or "extra_tokens"

    def elapsed_ms(self) -> float:
        return (self._clock() - self.started) * 1000.0


# ------------------------------------------------------------------------------- prices


def _litellm_price_file() -> Path | None:
    """Path of litellm's bundled price JSON, found without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        p = Path(loc) / _PRICE_FILE
        if p.is_file():
            return p
    return None


class PriceTable:
    """USD prices per token by model name, from litellm's price table (keys
    ``input_cost_per_token``, ``output_cost_per_token``; see litellm's ``sample_spec``).

    Lookup tries the exact name, then the name without a ``provider/`` prefix. Unknown models
    cost 0 and are counted in ``unknown`` (a budget in tokens still applies).
    """

    def __init__(self, table: dict[str, Any] | None = None, source: str | None = None):
        if table is None:
            path = _litellm_price_file() or (_SHIPPED_PRICES if _SHIPPED_PRICES.is_file() else None)
            table = json.loads(path.read_text(encoding="utf-8")) if path else {}
            source = str(path) if path else None
        self.table = {k: v for k, v in table.items() if isinstance(v, dict) and k != "sample_spec"}
        self.source = source
        self.unknown: set[str] = set()

    def prices(self, model: str) -> tuple[float, float] | None:
        """(input, output) USD per token, or None when the model is not in the table."""
        entry = self.table.get(model)
        if entry is None and "/" in model:
            entry = self.table.get(model.split("/", 1)[1])
        if entry is None:
            return None
        try:
            return float(entry.get("input_cost_per_token") or 0.0), float(entry.get("output_cost_per_token") or 0.0)
        except (TypeError, ValueError):
            return None

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """USD for one call; 0.0 (and ``model`` noted in ``unknown``) for unknown models."""
        p = self.prices(model)
        if p is None:
            self.unknown.add(model)
            return 0.0
        return prompt_tokens * p[0] + completion_tokens * p[1]

    def cost_of(self, model: str, completion: Any) -> float:
        """USD of a chat.completion dict from its ``usage``."""
        usage = completion.get("usage") if isinstance(completion, dict) else None
        if not isinstance(usage, dict):
            return 0.0
        pt = usage.get("prompt_tokens") if isinstance(usage.get("prompt_tokens"), int) else 0
        ct = usage.get("completion_tokens") if isinstance(usage.get("completion_tokens"), int) else 0
        return self.cost(model, pt, ct)


# ------------------------------------------------------------------------------- stores


_DAY: list[Any] = [-1, ""]


def today() -> str:
    """The UTC day as ``YYYY-MM-DD`` (daily budgets reset at 00:00 UTC). Cached per UTC day
    number (``strftime`` costs microseconds on the hot path)."""
    n = int(time.time() // 86400)
    if _DAY[0] != n:
        _DAY[0], _DAY[1] = n, _dt.datetime.fromtimestamp(n * 86400, _dt.timezone.utc).strftime("%Y-%m-%d")
    return _DAY[1]


class Store(Protocol):
    async def get(self, scope: str, ident: str, day: str) -> tuple[int, float]: ...
    async def add(self, scope: str, ident: str, day: str, tokens: int, cost: float) -> tuple[int, float]: ...
    async def close(self) -> None: ...


class SQLiteStore:
    """Daily totals in one SQLite table ``(scope, ident, day) -> tokens, cost_usd``.

    Single-process default. Writes are small UPSERTs (microseconds) done inline under a lock.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:"):
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL") if path != ":memory:" else None
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS budget_daily (scope TEXT, ident TEXT, day TEXT, "
            "tokens INTEGER NOT NULL DEFAULT 0, cost_usd REAL NOT NULL DEFAULT 0, "
            "PRIMARY KEY (scope, ident, day))")
        self._lock = threading.Lock()

    async def get(self, scope: str, ident: str, day: str) -> tuple[int, float]:
        with self._lock:
            row = self._db.execute("SELECT tokens, cost_usd FROM budget_daily WHERE scope=? AND ident=? AND day=?",
                                   (scope, ident, day)).fetchone()
        return (int(row[0]), float(row[1])) if row else (0, 0.0)

    async def add(self, scope: str, ident: str, day: str, tokens: int, cost: float) -> tuple[int, float]:
        with self._lock:
            self._db.execute(
                "INSERT INTO budget_daily (scope, ident, day, tokens, cost_usd) VALUES (?,?,?,?,?) "
                "ON CONFLICT(scope, ident, day) DO UPDATE SET tokens = tokens + excluded.tokens, "
                "cost_usd = cost_usd + excluded.cost_usd", (scope, ident, day, int(tokens), float(cost)))
            row = self._db.execute("SELECT tokens, cost_usd FROM budget_daily WHERE scope=? AND ident=? AND day=?",
                                   (scope, ident, day)).fetchone()
        return int(row[0]), float(row[1])

    async def close(self) -> None:
        with self._lock:
            self._db.close()


class RedisStore:
    """Daily totals in Redis hashes ``veracity:budget:{scope}:{ident}:{day}`` with fields
    ``tokens`` (HINCRBY) and ``cost_usd`` (HINCRBYFLOAT), expiring after two days. Shared by
    every replica that points at the same ``redis_url`` (``redis://``, ``rediss://`` or
    ``unix://`` as redis-py's ``from_url`` accepts)."""

    TTL_S = 2 * 86400

    def __init__(self, url: str, prefix: str = "veracity:budget"):
        import redis.asyncio as aioredis  # redis-py's asyncio client

        from proxy.stores.reports import REDIS_TIMEOUTS

        self._r = aioredis.from_url(url, **REDIS_TIMEOUTS)  # a frozen Redis: ~1 s, then the outage path
        self.prefix = prefix

    def _key(self, scope: str, ident: str, day: str) -> str:
        return f"{self.prefix}:{scope}:{ident}:{day}"

    async def get(self, scope: str, ident: str, day: str) -> tuple[int, float]:
        vals = await self._r.hmget(self._key(scope, ident, day), "tokens", "cost_usd")
        return int(vals[0] or 0), float(vals[1] or 0.0)

    async def add(self, scope: str, ident: str, day: str, tokens: int, cost: float) -> tuple[int, float]:
        key = self._key(scope, ident, day)
        async with self._r.pipeline(transaction=True) as pipe:
            pipe.hincrby(key, "tokens", int(tokens))
            pipe.hincrbyfloat(key, "cost_usd", float(cost))
            pipe.expire(key, self.TTL_S)
            t, c, _ = await pipe.execute()
        return int(t), float(c)

    async def close(self) -> None:
        await self._r.aclose()


@dataclass(slots=True)
class DailyLimit:
    """A daily ceiling; None fields are unlimited."""

    extra_tokens: int | None = None
    cost_usd: float | None = None


class DailyBudgets:
    """Per-key and per-team daily budgets over a :class:`Store`.

    ``await check(key_id, team, key_limit, team_limit)`` returns None when verification may
    spend more today, else the reason (``key daily extra_tokens`` etc.).
    ``await charge(key_id, team, tokens, cost)`` adds one request's extra spending.
    Identities are opaque ids (hash prefixes, team names), never the secret keys.
    """

    def __init__(self, store: Store | None = None, prices: PriceTable | None = None, cache_s: float = 1.0):
        self.store = store or SQLiteStore()
        self._prices = prices
        #: daily totals read from the store are reused for ``cache_s`` seconds (and refreshed at
        #: once after this process charges), so a request pays a store round trip at most once a
        #: second per key/team; replicas sharing Redis see each other's spending within that time.
        self.cache_s = cache_s
        self._cache: dict[tuple[str, str, str], tuple[float, tuple[int, float]]] = {}

    async def _spent(self, scope: str, ident: str, day: str) -> tuple[int, float]:
        key = (scope, ident, day)
        hit = self._cache.get(key)
        now = time.monotonic()
        if hit is not None and now - hit[0] < self.cache_s:
            return hit[1]
        val = await self.store.get(scope, ident, day)
        if len(self._cache) > 10_000:
            self._cache.clear()
        self._cache[key] = (now, val)
        return val

    @classmethod
    def from_settings(cls, redis_url: str | None = None, sqlite_path: str | None = None) -> "DailyBudgets":
        """Redis when ``redis_url``, else SQLite at ``sqlite_path`` (default in memory)."""
        if redis_url:
            return cls(RedisStore(redis_url))
        return cls(SQLiteStore(sqlite_path or ":memory:"))

    @property
    def prices(self) -> PriceTable:
        if self._prices is None:
            self._prices = PriceTable()
        return self._prices

    @staticmethod
    def _over(spent: tuple[int, float], limit: Any) -> str | None:
        if limit is None:
            return None
        if limit.extra_tokens is not None and spent[0] >= limit.extra_tokens:
            return "extra_tokens"
        if limit.cost_usd is not None and spent[1] >= limit.cost_usd:
            return "cost_usd"
        return None

    async def check(self, key_id: str, team: str, key_limit: Any = None, team_limit: Any = None,
                    day: str | None = None) -> str | None:
        day = day or today()
        if key_limit is not None and (key_limit.extra_tokens is not None or key_limit.cost_usd is not None):
            why = self._over(await self._spent("key", key_id, day), key_limit)
            if why:
                return f"key daily {why} budget exhausted"
        if team_limit is not None and (team_limit.extra_tokens is not None or team_limit.cost_usd is not None):
            why = self._over(await self._spent("team", team, day), team_limit)
            if why:
                return f"team daily {why} budget exhausted"
        return None

    async def charge(self, key_id: str, team: str, tokens: int, cost: float, day: str | None = None) -> None:
        if tokens <= 0 and cost <= 0:
            return
        day = day or today()
        now = time.monotonic()
        self._cache[("key", key_id, day)] = (now, await self.store.add("key", key_id, day, tokens, cost))
        self._cache[("team", team, day)] = (now, await self.store.add("team", team, day, tokens, cost))

    async def close(self) -> None:
        await self.store.close()
