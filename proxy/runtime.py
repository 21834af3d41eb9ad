"""The verification part of a running gateway's state: policies, daily budgets, prices, audit
log, background tasks. A :class:`proxy.gateway.Gateway` builds its :class:`VerificationRuntime`
with :func:`build` (at start-up, or on first use) and closes it with itself; nothing here is
kept at module level.

Config sections it reads (:class:`proxy.config.PoliciesSettings` and
:class:`proxy.config.VerificationSettings`, validated when the config is loaded; in a config
file, relative paths are resolved against the file's folder)::

    policies:
      dir: ./policies            # must exist; default: $VERACITY_POLICIES, else the shipped policies/ folder
      check_interval_s: 1        # how often files are checked for changes (reload without restart)
    verification:
      redis_url: redis://127.0.0.1:6379/0   # daily budgets shared by replicas; default: SQLite
      budget_db: .veracity/budget.sqlite3   # SQLite file for daily budgets (default: in memory)
      audit: .veracity/audit.jsonl          # JSONL, or *.sqlite3 for SQLite; null = no audit

Environment fallbacks: ``VERACITY_REDIS_URL``, ``VERACITY_AUDIT`` (path).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import ValidationError

from proxy.stores.audit import AuditLog
from proxy.stores.budget import DailyBudgets, PriceTable  # noqa: F401 (PriceTable: type)
# the section models live with the rest of the config, which validates them at load time
from proxy.config import PoliciesSettings, VerificationSettings
from proxy.policy import Policy, PolicyStore

__all__ = ["VerificationRuntime", "build", "check_stores", "redis_url", "PoliciesSettings", "VerificationSettings",
           "MAX_BACKGROUND_TASKS"]


#: Background verifications (observe mode) running at once per process. Past it a new one
#: is dropped (``dropped`` += 1, ``veracity_budget_exhausted_total{scope="background"}``): a
#: burst of observed traffic must not pile up unbounded work and memory; observe mode only
#: feeds metrics and audit, so shedding it never changes an answer.
MAX_BACKGROUND_TASKS = 256


class VerificationRuntime:
    """What the pipeline needs across requests. ``spawn(coro)`` runs background work
    (observe mode, passthrough verification) and keeps a reference until it finishes; at most
    :data:`MAX_BACKGROUND_TASKS` at once (the coroutine is closed unrun past it)."""

    def __init__(self, policies: PoliciesSettings, settings: VerificationSettings):
        self.policies = PolicyStore(policies.dir, check_interval_s=policies.check_interval_s)
        self.redis_url = settings.redis_url or os.environ.get("VERACITY_REDIS_URL") or None
        self.daily = DailyBudgets.from_settings(redis_url=self.redis_url, sqlite_path=settings.budget_db)
        audit_path = settings.audit or os.environ.get("VERACITY_AUDIT") or None
        self.audit = AuditLog.open(audit_path) if audit_path else None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.dropped = 0

    def verifies(self) -> bool:
        """Whether any policy of the folder enables a verifier (the built-in ``default``, all
        defaults, counts when the folder has no ``default`` policy). False for a checks-off
        gateway: then nothing that only verification needs is imported or warmed up at start;
        a policy file that enables a verifier later has its first request import it."""
        store = self.policies
        names = store.names()
        if "default" not in names and Policy().verifiers.enabled():
            return True
        return any(store.get(n).verifiers.enabled() for n in names)

    @property
    def prices(self) -> PriceTable:
        """litellm's price table, loaded on first use (~100 ms of JSON parsing: only requests
        that spent extra tokens need it, and the warm-up thread loads it early)."""
        return self.daily.prices

    def spawn(self, coro: Any) -> asyncio.Task[Any] | None:
        if len(self._tasks) >= MAX_BACKGROUND_TASKS:
            coro.close()
            self.dropped += 1
            from proxy.observability.verification_metrics import BUDGET_EXHAUSTED

            BUDGET_EXHAUSTED.labels("background").inc()
            return None
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def drain(self, timeout: float = 10.0) -> None:
        """Wait for background verifications (tests, shutdown)."""
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=timeout)

    async def aclose(self, timeout: float = 10.0) -> None:
        """Shut down: wait up to ``timeout`` s for background verifications (their audit
        records and budget charges), cancel what is left, then close the daily budget store
        and the audit log. Idempotent."""
        await self.drain(timeout)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
        await self.daily.close()
        if self.audit is not None:
            self.audit.close()


def check_stores(settings: VerificationSettings) -> None:
    """Open and close the files a :class:`VerificationRuntime` opens for ``settings`` (the
    SQLite budget store unless Redis is configured, the audit log), so ``veracity serve
    --workers N`` can refuse to start on one that cannot be opened (uvicorn's supervisor exits
    with status 0 when its workers fail to start). Raises what opening raises (OSError,
    sqlite3.DatabaseError). Creates the files and folders, as the workers would."""
    from proxy.stores.budget import SQLiteStore

    if not (settings.redis_url or os.environ.get("VERACITY_REDIS_URL")) and settings.budget_db:
        asyncio.run(SQLiteStore(settings.budget_db).close())
    audit_path = settings.audit or os.environ.get("VERACITY_AUDIT")
    if audit_path:
        AuditLog.open(audit_path).close()


def _section(cfg: Any, name: str) -> Any:
    """``cfg.<name>``: a validated section of a :class:`proxy.config.GatewayConfig`, or the
    plain dict / None of a config-like object (re-validated by :func:`build`)."""
    value = getattr(cfg, name, None)
    return {} if value is None else value


def build(cfg: Any) -> VerificationRuntime:
    """A new runtime for gateway config ``cfg`` (loads the policies, opens the budget store and
    the audit log). Raises ValueError with the field path when the ``policies``/``verification``
    sections do not validate; what opening raises (OSError, sqlite3.DatabaseError)."""
    parsed = []
    for name, model in (("policies", PoliciesSettings), ("verification", VerificationSettings)):
        try:
            section = _section(cfg, name)
            parsed.append(section if isinstance(section, model) else model.model_validate(section))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"config: {name}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
    pol, ver = parsed
    return VerificationRuntime(pol, ver)


def redis_url(cfg: Any) -> str | None:
    """``verification.redis_url`` of gateway config ``cfg`` (a validated config or a config-like
    object), else ``$VERACITY_REDIS_URL``, else None: the one Redis server budgets, reports,
    reviews and the facts verdict cache share."""
    ver = getattr(cfg, "verification", None)
    url = ver.get("redis_url") if isinstance(ver, dict) else getattr(ver, "redis_url", None)
    return url or os.environ.get("VERACITY_REDIS_URL") or None
