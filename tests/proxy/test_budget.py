"""Budgets: per request counting, daily per key/team in SQLite and (marked) Redis, prices
from litellm's table read without importing litellm."""

import asyncio
import os
import sys
import uuid

import pytest

from proxy.stores.budget import DailyBudgets, DailyLimit, PriceTable, RedisStore, RequestBudget, SQLiteStore, usage_tokens


@pytest.fixture(autouse=True)
def _one_day(monkeypatch):
    """Every charge and check of a test on one fixed UTC day: a run across midnight must not
    split a test's charges over two days."""
    monkeypatch.setattr("proxy.stores.budget.today", lambda: "2026-06-15")


def test_request_budget_calls_tokens_deadline():
    now = [100.0]
    b = RequestBudget(extra_calls=2, extra_tokens=100, deadline_ms=1000, clock=lambda: now[0])
    assert b.allow_call()
    b.charge(40)
    assert b.allow_call()
    b.charge(40)
    assert not b.allow_call() and b.exhausted == "extra_calls"
    b2 = RequestBudget(extra_calls=9, extra_tokens=100, deadline_ms=1000, clock=lambda: now[0])
    b2.charge(150)
    assert not b2.allow_call() and b2.exhausted == "extra_tokens"
    b3 = RequestBudget(extra_calls=9, extra_tokens=100, deadline_ms=1000, clock=lambda: now[0])
    now[0] += 2
    assert b3.remaining_s() == 0 and not b3.allow_call() and b3.exhausted == "deadline"


def test_usage_tokens_tolerates_missing_usage():
    assert usage_tokens({"usage": {"prompt_tokens": 3, "completion_tokens": 4}}) == 7
    assert usage_tokens({"usage": {"total_tokens": 9}}) == 9
    assert usage_tokens({}) == 0 and usage_tokens(None) == 0 and usage_tokens({"usage": "x"}) == 0


def test_price_table_without_importing_litellm():
    sys.modules.pop("litellm", None)
    prices = PriceTable()
    assert "litellm" not in sys.modules
    assert prices.source and prices.source.endswith(".json")
    inp, out = prices.prices("gpt-4o-mini")
    assert 0 < inp < out < 1e-4
    assert prices.cost("gpt-4o-mini", 1_000_000, 0) == pytest.approx(inp * 1_000_000)
    assert prices.cost("openai/gpt-4o-mini", 10, 10) == prices.cost("gpt-4o-mini", 10, 10)
    assert prices.cost("no-such-model", 10, 10) == 0.0 and "no-such-model" in prices.unknown


def test_shipped_price_copy_matches_litellm_when_installed():
    from proxy.stores import budget

    shipped = PriceTable(__import__("json").loads(budget._SHIPPED_PRICES.read_text()))
    if budget._litellm_price_file() is None:
        pytest.skip("litellm not installed")
    live = PriceTable()
    for model in ("gpt-4o-mini", "gpt-4o"):
        assert shipped.prices(model) is not None and live.prices(model) is not None


async def _exercise(daily: DailyBudgets, key: str, team: str):
    lim = DailyLimit(extra_tokens=1000, cost_usd=None)
    team_lim = DailyLimit(extra_tokens=None, cost_usd=0.01)
    assert await daily.check(key, team, lim, team_lim) is None
    await daily.charge(key, team, 600, 0.002)
    assert await daily.check(key, team, lim, team_lim) is None
    await daily.charge(key, team, 500, 0.002)
    assert await daily.check(key, team, lim, team_lim) == "key daily extra_tokens budget exhausted"
    # another key of the same team: key budget fresh, team cost still counts
    assert await daily.check(key + "-2", team, lim, team_lim) is None
    await daily.charge(key + "-2", team, 10, 0.007)
    assert await daily.check(key + "-2", team, lim, team_lim) == "team daily cost_usd budget exhausted"
    # another day starts empty
    assert await daily.check(key, team, lim, team_lim, day="2000-01-01") is None


async def test_sqlite_daily_budgets(tmp_path):
    daily = DailyBudgets(SQLiteStore(tmp_path / "b.sqlite3"))
    await _exercise(daily, "k1", "t1")
    await daily.close()
    # persisted across restarts
    again = DailyBudgets(SQLiteStore(tmp_path / "b.sqlite3"))
    assert (await again.store.get("key", "k1", __import__("proxy.stores.budget", fromlist=["today"]).today()))[0] == 1100
    await again.close()


async def test_concurrent_charges_are_not_lost(tmp_path):
    daily = DailyBudgets(SQLiteStore(tmp_path / "c.sqlite3"))
    await asyncio.gather(*(daily.charge("k", "t", 1, 0.0) for _ in range(200)))
    assert (await daily.store.get("team", "t", __import__("proxy.stores.budget", fromlist=["today"]).today()))[0] == 200


@pytest.mark.redis
async def test_redis_daily_budgets_shared_by_two_replicas():
    url = os.environ.get("VERACITY_TEST_REDIS_URL")
    if not url:
        if os.environ.get("VERACITY_CI") == "1":
            pytest.fail("CI must provide a Redis server at VERACITY_TEST_REDIS_URL")
        pytest.skip("VERACITY_TEST_REDIS_URL not set")
    key, team = f"k-{uuid.uuid4().hex}", f"t-{uuid.uuid4().hex}"
    a, b = DailyBudgets(RedisStore(url)), DailyBudgets(RedisStore(url))
    await _exercise(a, key, team)
    # replica b sees what replica a spent
    lim = DailyLimit(extra_tokens=1000)
    assert await b.check(key, team, lim, None) == "key daily extra_tokens budget exhausted"
    await a.close()
    await b.close()
