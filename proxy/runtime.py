"""Per-process verification state: policies, daily budgets, prices, audit log, background
tasks. One :class:`VerificationRuntime` per gateway config, made on first use by
:func:`get`.

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
import threading
from typing import Any

from pydantic import ValidationError

from proxy.stores.audit import AuditLog
from proxy.stores.budget import DailyBudgets, PriceTable  # noqa: F401 (PriceTable: type)
# the section models live with the rest of the config, which validates them at load time
from proxy.config import PoliciesSettings, VerificationSettings
from proxy.policy import Policy, PolicyStore

__all__ = ["VerificationRuntime", "get", "check_stores", "PoliciesSettings", "VerificationSettings"]


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
        redis_url = settings.redis_url or os.environ.get("VERACITY_REDIS_URL") or None
        self.daily = DailyBudgets.from_settings(redis_url=redis_url, sqlite_path=settings.budget_db)
        global _REDIS_URL
        _REDIS_URL = redis_url  # the facts verdict cache's `redis` spec uses the same server
        audit_path = settings.audit or os.environ.get("VERACITY_AUDIT") or None
        self.audit = AuditLog.open(audit_path) if audit_path else None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.dropped = 0
        if self.verifies():  # a checks-off gateway never imports the verifiers (SymPy alone: ~42 MiB)
            start_warm_up()
        # the price table (~100 ms of JSON) loads off the request path too
        threading.Thread(target=lambda: self.daily.prices, name="veracity-prices", daemon=True).start()

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


def _warm_up() -> None:
    """Import the verifiers (SymPy, pint, pyflakes, the citation matcher take hundreds of ms)
    off the request path, so the first risky answer does not pay for them."""
    import importlib

    for name in ("verifiers.arithmetic", "verifiers.code", "verifiers.citations", "verifiers.facts",
                 "verifiers.facts.backends"):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing verifier shows up as an `error` check later
            pass


_WARMING: list[threading.Thread] = []
_WARMING_LOCK = threading.Lock()


def start_warm_up() -> None:
    """Start :func:`_warm_up` once per process, in a daemon thread (a
    :class:`VerificationRuntime` whose policies verify calls this when it is made, i.e. at
    gateway start-up, before the first request)."""
    with _WARMING_LOCK:
        if not _WARMING:
            t = threading.Thread(target=_warm_up, name="veracity-warm-up", daemon=True)
            _WARMING.append(t)
            t.start()


def wait_warm_up(timeout: float = 30.0) -> None:
    """Block until the :func:`start_warm_up` thread has finished (at most ``timeout`` s); returns
    at once when none was started (a checks-off gateway)."""
    if _WARMING:
        _WARMING[0].join(timeout)


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


_RUNTIMES: dict[int, tuple[Any, VerificationRuntime]] = {}


def _section(cfg: Any, name: str) -> Any:
    """``cfg.<name>``: a validated section of a :class:`proxy.config.GatewayConfig`, or the
    plain dict / None of a config-like object (re-validated by :func:`get`)."""
    value = getattr(cfg, name, None)
    return {} if value is None else value


def get(cfg: Any) -> VerificationRuntime:
    """The runtime for gateway config ``cfg`` (created on first call). Raises ValueError with
    the field path when the ``policies``/``verification`` sections do not validate."""
    entry = _RUNTIMES.get(id(cfg))
    if entry is not None and entry[0] is cfg:
        return entry[1]
    parsed = []
    for name, model in (("policies", PoliciesSettings), ("verification", VerificationSettings)):
        try:
            section = _section(cfg, name)
            parsed.append(section if isinstance(section, model) else model.model_validate(section))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"config: {name}.{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
    pol, ver = parsed
    rt = VerificationRuntime(pol, ver)
    _RUNTIMES[id(cfg)] = (cfg, rt)
    return rt


_FACTS_CACHES: dict[str, Any] = {}
#: ``verification.redis_url`` (or ``VERACITY_REDIS_URL``) of the running gateway, set by
#: :class:`VerificationRuntime`; the facts verdict cache's ``redis`` spec uses it.
_REDIS_URL: str | None = None


def facts_cache(spec: str) -> Any:
    """The facts verifier's verdict cache for a policy's ``verifiers.facts.cache`` value:
    ``off`` -> None; ``memory`` -> one in-memory SQLite cache per process; ``redis`` -> Redis at
    ``verification.redis_url`` (else ``VERACITY_REDIS_URL``; in memory without either); anything else is a SQLite file path. Made once per spec per process;
    None when the facts verifier is not installed."""
    if spec == "off":
        return None
    hit = _FACTS_CACHES.get(spec)
    if hit is not None:
        return hit
    try:
        from verifiers.facts import VerdictCache
    except ImportError:
        return None
    if spec == "memory":
        cache = VerdictCache(":memory:")
    elif spec == "redis":
        url = _REDIS_URL or os.environ.get("VERACITY_REDIS_URL")
        cache = VerdictCache(url=url) if url else VerdictCache(":memory:")
    else:
        cache = VerdictCache(spec)
    _FACTS_CACHES[spec] = cache
    return cache
