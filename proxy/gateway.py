"""The running gateway's state, in one object: :class:`Gateway`.

One ``Gateway`` per app (:func:`proxy.app.create_app` makes it; ``app.state.gw`` holds it, and
each request's :class:`proxy.pipeline.sequence.RequestContext` carries it). It owns everything
that lives across requests:

- the upstream clients (:class:`proxy.upstreams.Upstreams`, opened by :meth:`Gateway.start`);
- the verification runtime (:class:`proxy.runtime.VerificationRuntime`: policies, daily
  budgets, prices, audit log, background verifications);
- the report store (:mod:`proxy.stores.reports`) and the review store (:mod:`proxy.stores.review`);
- what verification keeps between answers (:class:`VerificationResources`: the facts
  verifier's verdict caches, the code sandboxes);
- the start-up warm-up (verifier imports, the price table) in threads started by :meth:`Gateway.start`.

Nothing of it is kept at module level: two gateways in one process (tests start and stop many)
share no state, and :meth:`Gateway.aclose` closes what its gateway opened. The parts are made
on first use too, so a gateway whose lifespan never ran (an app driven in-process) still
serves requests; :meth:`Gateway.start` makes them before the first request instead, so a
broken audit or budget file fails start-up rather than every request.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import TYPE_CHECKING, Any

from proxy._asgi.disconnect import WatchSweeper
from proxy.auth import Authenticator
from proxy import runtime as runtime_mod
from proxy.observability.log import get_logger
from proxy.stores import reports as reports_mod
from proxy.stores import review as review_mod
from proxy.upstreams import Upstreams
from verifiers.run import Sandboxes

if TYPE_CHECKING:
    from proxy.config import GatewayConfig
    from proxy.runtime import VerificationRuntime
    from proxy.stores.reports import ReportStore
    from proxy.stores.review import ReviewStore

__all__ = ["Gateway", "VerificationResources", "WARM_UP_MODULES"]

log = get_logger("veracity")

#: Verifier modules imported by the warm-up thread (SymPy, pint, pyflakes, the citation
#: matcher take hundreds of ms), so the first risky answer does not pay for them.
WARM_UP_MODULES = ("verifiers.arithmetic", "verifiers.code", "verifiers.citations", "verifiers.facts",
                   "verifiers.facts.backends")

_UNSET: Any = object()


class VerificationResources:
    """What verification keeps between answers, for one gateway: the facts verifier's verdict
    caches (one per policy ``verifiers.facts.cache`` spec) and the code sandboxes (one per
    backend and limits, :class:`verifiers.run.Sandboxes`). The ``veracity verify`` and
    ``veracity eval`` commands make one for their run. Thread-safe."""

    def __init__(self, redis_url: str | None = None) -> None:
        #: the Redis server of a ``redis`` facts cache spec (``verification.redis_url``)
        self.redis_url = redis_url
        self.sandboxes = Sandboxes()
        self._facts: dict[str, Any] = {}
        self._lock = threading.Lock()

    def facts_cache(self, spec: str) -> Any:
        """The facts verifier's verdict cache for a policy's ``verifiers.facts.cache`` value:
        ``off`` -> None; ``memory`` -> one in-memory SQLite cache; ``redis`` -> Redis at
        :attr:`redis_url` (else ``VERACITY_REDIS_URL``; in memory without either); anything
        else is a SQLite file path. Made once per spec; None when the facts verifier is not
        installed."""
        if spec == "off":
            return None
        hit = self._facts.get(spec)
        if hit is not None:
            return hit
        try:
            from verifiers.facts import VerdictCache
        except ImportError:
            return None
        with self._lock:
            hit = self._facts.get(spec)
            if hit is not None:
                return hit
            if spec == "memory":
                cache = VerdictCache(":memory:")
            elif spec == "redis":
                url = self.redis_url or os.environ.get("VERACITY_REDIS_URL")
                cache = VerdictCache(url=url) if url else VerdictCache(":memory:")
            else:
                cache = VerdictCache(spec)
            self._facts[spec] = cache
        return cache

    async def aclose(self) -> None:
        """Close the verdict caches' Redis pools and the sandboxes (docker clients, warm
        containers; in a worker thread: closing talks to the engine). Idempotent."""
        with self._lock:
            caches, self._facts = list(self._facts.values()), {}
        for cache in caches:
            await cache.aclose()
        if len(self.sandboxes):
            await asyncio.to_thread(self.sandboxes.close)


class Gateway:
    """The state of one running gateway for config ``cfg`` (see the module doc).

    Attributes: ``cfg`` (the :class:`proxy.config.GatewayConfig`), ``upstreams`` (None until
    :meth:`start`, or until a caller sets it), ``verification``
    (:class:`VerificationResources`); properties :attr:`runtime`, :attr:`reports`,
    :attr:`review`, each made on first use. What the HTTP layer reads on every request:
    ``auth`` (:class:`proxy.auth.Authenticator`), ``max_body`` (bytes), ``log_content``,
    ``reports_on`` (``reports.enabled``), ``pid`` (the serving process, set again at start-up),
    ``sweeper`` (the disconnect watches'). Handlers reach it as ``request.app.state.gw``.
    Making one does no I/O.
    """

    def __init__(self, cfg: GatewayConfig) -> None:
        self.cfg = cfg
        self.auth = Authenticator(cfg.keys)
        self.max_body = cfg.limits.max_body_bytes
        self.log_content = cfg.logging.log_content
        self.pid = os.getpid()
        self.sweeper = WatchSweeper()
        #: reports kept for GET /v1/veracity/reports/{id} (``reports.enabled``)
        self.reports_on = cfg.reports.enabled
        self.upstreams: Upstreams | None = None
        self.verification = VerificationResources(runtime_mod.redis_url(cfg))
        self._runtime: VerificationRuntime | None = None
        self._reports: ReportStore | None = _UNSET
        self._review: ReviewStore | None = None
        self._lock = threading.Lock()
        self._warming: threading.Thread | None = None
        self._closed = False

    # -- parts, made on first use ----------------------------------------------------------------
    @property
    def runtime(self) -> VerificationRuntime:
        """The verification runtime (:func:`proxy.runtime.build`). Raises ValueError (a
        ``policies``/``verification`` section that does not validate) or what opening the
        budget store / audit log raises (OSError, sqlite3.DatabaseError); the next call tries again."""
        rt = self._runtime
        if rt is None:
            with self._lock:
                rt = self._runtime
                if rt is None:
                    rt = self._runtime = runtime_mod.build(self.cfg)
        return rt

    @property
    def reports(self) -> ReportStore | None:
        """The report store (None when ``reports.enabled`` is false)."""
        store = self._reports
        if store is _UNSET:
            with self._lock:
                if self._reports is _UNSET:
                    self._reports = reports_mod.open_store(self.cfg)
                store = self._reports
        return store

    @property
    def review(self) -> ReviewStore:
        """The review store (:func:`proxy.stores.review.open_store`): opened on first use, so a
        gateway that never has an answer to review never creates the file."""
        store = self._review
        if store is None:
            with self._lock:
                if self._review is None:
                    self._review = review_mod.open_store(self.cfg)
                store = self._review
        return store

    def open_review(self) -> ReviewStore:
        """:attr:`review` as a call (what :func:`proxy.stores.review.submit` opens lazily)."""
        return self.review

    async def review_backlog(self) -> dict[tuple[str, str], int] | None:
        """Open reviews per ``(model, team)`` (:func:`proxy.stores.review.backlog`), without
        creating a store that cannot hold any yet."""
        if self._review is None and review_mod.nothing_to_read(self.cfg):
            return None
        return await review_mod.backlog(self.open_review)

    # -- start-up and shut-down -------------------------------------------------------------------
    async def start(self) -> None:
        """Open the upstream clients, then warm up (:meth:`warm_up`, in a worker thread).
        Raises RuntimeError (after logging ``startup_failed``) when either fails; the upstream
        clients opened are closed again."""
        try:
            self.upstreams = await Upstreams.start(self.cfg)
        except Exception as exc:  # e.g. a litellm upstream whose import fails: one line, then exit 2
            log.error("startup_failed", error=f"cannot start the upstream clients: {type(exc).__name__}: {exc}")
            raise RuntimeError(f"cannot start the upstream clients: {exc}") from None
        try:
            await asyncio.to_thread(self.warm_up)
        except BaseException:  # start-up fails: close the upstream sessions opened above
            await self.upstreams.close()
            raise

    def warm_up(self) -> None:
        """Start-up work that would otherwise land on the first requests (~80-240 ms): build the
        verification runtime (load the policies), finish importing the verifiers
        (:meth:`start_warm_up`), build the arithmetic verifier's unit registry, run the risk
        scorer once; load the price table in the background. Blocking. A runtime that cannot be
        built (an audit or budget file that cannot be opened: what config validation cannot
        see) raises RuntimeError, so start-up fails (``veracity serve`` exits with status 2)
        instead of a ready gateway answering every request with 500."""
        try:
            rt = self.runtime
        except Exception as exc:  # noqa: BLE001 - any failure here is a start-up failure
            log.error("startup_failed", error=f"Veracity is misconfigured: {type(exc).__name__}: {exc}")
            raise RuntimeError(f"Veracity is misconfigured: {exc}") from None
        # a checks-off gateway never imports the verifiers (SymPy alone: ~42 MiB of RSS, measured
        # in bench/results/gateway.md); a policy enabled later has its first request import them
        verifies = rt.verifies()
        if verifies:
            self.start_warm_up()
        # the price table (~100 ms of JSON) loads off the request path too
        threading.Thread(target=lambda: rt.daily.prices, name="veracity-prices", daemon=True).start()
        try:
            from verifiers import risk

            if verifies:
                self.wait_warm_up()
                from verifiers import arithmetic

                arithmetic.warm_up()
            risk.score("What is 2 + 2?", "2 + 2 = 4")
        except Exception:  # noqa: BLE001 - a broken verifier shows up as an `error` check later
            pass
        # the sentinel's `schema_tokens` (loading the tiktoken encoding takes ~1 s and ~78 MiB
        # of RSS, measured): here when a policy offers the sentinel, or its first reports of
        # each process said null; otherwise on first use, off the request path
        # (proxy.pipeline.sentinel.overhead_tokens_cached), so a gateway without it stays small
        store = rt.policies
        if any(store.get(n).sentinel.mode != "off" for n in store.names()):
            from proxy.pipeline import sentinel

            sentinel.overhead_tokens()

    def start_warm_up(self) -> None:
        """Import :data:`WARM_UP_MODULES` in a daemon thread (once per gateway; a module
        already imported costs nothing)."""
        with self._lock:
            if self._warming is None:
                self._warming = threading.Thread(target=_import_verifiers, name="veracity-warm-up", daemon=True)
                self._warming.start()

    def wait_warm_up(self, timeout: float = 30.0) -> None:
        """Block until the :meth:`start_warm_up` thread has finished (at most ``timeout`` s)."""
        self.start_warm_up()
        assert self._warming is not None
        self._warming.join(timeout)

    async def aclose(self, timeout: float = 10.0) -> None:
        """Close everything this gateway opened: wait up to ``timeout`` s for background
        verifications (then cancel them), close the daily budget store and the audit log, the
        upstream clients, the report and review stores, the verdict caches and the sandboxes.
        Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._runtime is not None:
            await self._runtime.aclose(timeout)
        if self.upstreams is not None:
            await self.upstreams.close()
        if self._reports not in (None, _UNSET):
            await self._reports.close()
        if self._review is not None:
            await self._review.close()
        await self.verification.aclose()


def _import_verifiers() -> None:
    import importlib

    for name in WARM_UP_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a missing verifier shows up as an `error` check later
            pass
