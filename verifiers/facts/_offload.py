"""CPU-heavy steps of the facts verifier, off the event loop, under a deadline that stops them.

docs/design.md "No CPU-heavy work on the event loop" -- a
deadline (``asyncio.wait_for``) cannot stop a function that never yields, and while it runs the
whole gateway is frozen (``/healthz`` unanswered). Parsing a search answer, cleaning its HTML and
judging passages cost about 3 us per character (measured: a 7 MB SearXNG answer took 14-45 s on
the loop before this module, ``bench/results/loop-stall.md``).

:func:`run` hands such a step to a small process pool (pebble's :class:`~pebble.ProcessPool`,
``max_workers`` = :data:`MAX_WORKERS`), created on first use and shut down at interpreter exit
(:func:`shutdown`). Awaiting it costs the event loop nothing; when the awaiting task is cancelled
(the facts deadline, a client that left) the step is cancelled too -- a queued one is dropped, a
running one has its worker process terminated (pebble replaces it) -- so the CPU time really
stops. A process, not a thread: a thread would hold the GIL for most of the work and could not
be stopped.

Work below :data:`INLINE_CHARS` characters of input runs inline (the caller says how large its
input is): a few ms of work is cheaper than the inter-process round trip, and the pool is never
started by a gateway that only sees short snippets. Workers come from a ``forkserver`` (Linux,
macOS) that preloaded the facts modules, so a worker replaced after a cancellation is ready in
milliseconds; ``spawn`` elsewhere. ``VERACITY_FACTS_CPU_WORKERS`` overrides the worker count
(0 runs everything inline, for debugging).
"""

from __future__ import annotations

import asyncio
import atexit
import multiprocessing
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["run", "shutdown", "MAX_WORKERS", "INLINE_CHARS", "WorkerLost"]

T = TypeVar("T")

#: Worker processes at most: the facts steps of every request of this gateway process share
#: them (requests queue; each waits within its own deadline). Two keeps one core for the loop on
#: a small machine and still overlaps two requests.
MAX_WORKERS = max(0, int(os.environ.get("VERACITY_FACTS_CPU_WORKERS", min(2, os.cpu_count() or 1))))
#: Input sizes (characters) up to which a step runs inline on the loop: ~3 us per character
#: (judging passages, cleaning HTML; bench/results/loop-stall.md) keeps such a step near 25 ms.
INLINE_CHARS = 8_000
#: Modules the forkserver imports once, so that every worker starts with them loaded.
PRELOAD = ["verifiers.facts._core", "verifiers.facts.backends"]

_lock = threading.Lock()
_pool: Any = None
_pool_pid: int | None = None
_atexit_registered = False
_scheduled_once = False
_ProcessExpired: type[BaseException] | None = None  # pebble's, once imported (off the loop)


class WorkerLost(RuntimeError):
    """The worker process died while running a step (killed for memory, crashed). The step's
    result is unknown; callers turn this into "source unavailable" or an unknown verdict."""


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    if "forkserver" in methods:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        return ctx
    return multiprocessing.get_context("spawn")


def _get_pool() -> Any:
    global _pool, _pool_pid, _atexit_registered, _ProcessExpired
    with _lock:
        if _pool is None or _pool_pid != os.getpid() or not _pool.active:
            from pebble import ProcessExpired, ProcessPool

            _ProcessExpired = ProcessExpired

            _pool = ProcessPool(max_workers=MAX_WORKERS, context=_context())
            _pool_pid = os.getpid()
            if not _atexit_registered:
                atexit.register(shutdown)
                _atexit_registered = True
        return _pool


def shutdown() -> None:
    """Stop the pool (running steps are terminated) and wait for its workers; the next
    :func:`run` starts a new one. Registered with :mod:`atexit`; safe to call twice."""
    global _pool, _scheduled_once
    with _lock:
        pool, _pool = _pool, None
        _scheduled_once = False
    if pool is not None and _pool_pid == os.getpid():
        pool.stop()
        pool.join(timeout=10)


async def run(fn: Callable[..., T], *args: Any, size: int | None = None) -> T:
    """``fn(*args)`` -- a module-level function with picklable arguments and result -- in a
    worker process; inline when ``size`` (characters of input the caller measured) is at most
    :data:`INLINE_CHARS` or the pool is off (``MAX_WORKERS == 0``).

    Raises what ``fn`` raised (exceptions must pickle), :class:`WorkerLost` when the worker
    died, ``asyncio.CancelledError`` when the awaiting task is cancelled -- and then the step
    is cancelled or its worker terminated, never left running."""
    if MAX_WORKERS == 0 or (size is not None and size <= INLINE_CHARS):
        return fn(*args)
    global _scheduled_once
    if _scheduled_once:
        fut = _get_pool().schedule(fn, args)
    else:  # the first schedule imports pebble, starts the forkserver and the workers (~0.5 s): not on the loop
        fut = await asyncio.to_thread(lambda: _get_pool().schedule(fn, args))
        _scheduled_once = True
    try:
        return await asyncio.wrap_future(fut)
    except asyncio.CancelledError:
        fut.cancel()  # queued: dropped; running: pebble terminates the worker and starts another
        raise
    except Exception as exc:
        if _ProcessExpired is not None and isinstance(exc, _ProcessExpired):
            raise WorkerLost(f"worker process lost ({exc})") from None
        raise
