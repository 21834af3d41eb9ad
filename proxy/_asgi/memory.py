"""Giving memory back to the operating system after the gateway refused a large upstream answer.

Measured under hostile upstreams (tests/hostile/test_hostile_upstream.py): every oversized answer (a chunked body past ``limits.max_response_bytes``,
a gzip bomb, an endless SSE event) was refused with a correct 502, yet the process's RSS grew
from 181 MiB to 1.35 GB over repeats and stayed there. Two causes, measured with
``bench/memory_bench.py`` (bench/results/memory.md):

* references that outlived the refusal (the non-stream client kept the refused body's reads on
  its connection object, which the exception's traceback kept alive in a reference cycle):
  fixed where they were held (:mod:`proxy.upstreams.http1`, :class:`proxy.wire.relay.SSERelay`);
* glibc's allocator keeps freed memory in its heaps: socket reads of tens of KiB are served
  from the heap once the dynamic mmap threshold has grown (``mallopt(3)``, "M_MMAP_THRESHOLD":
  freeing an mmapped block raises the threshold up to 32 MiB), and a heap only shrinks from its
  top. ``malloc_trim(0)`` (glibc >= 2.8) returns every free page of every arena
  (``madvise(MADV_DONTNEED)``), so :func:`release_soon` runs it -- after a cyclic garbage
  collection, for the refused answer's cycles -- shortly after a refusal, at most once per
  :data:`MIN_INTERVAL_S`, in a worker thread.

Not glibc (musl, macOS): :func:`release_soon` only collects garbage.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import time
from typing import Any

__all__ = ["release_soon", "trim", "MIN_INTERVAL_S", "DELAY_S"]

#: Least time between two trims (seconds): a storm of refusals costs one trim a second.
MIN_INTERVAL_S = 1.0
#: Delay after a refusal (seconds): the refused request's frames have unwound by then.
DELAY_S = 0.2

_libc: Any = None
_state = {"scheduled": False, "last": 0.0, "trims": 0}


def _malloc_trim() -> Any:
    global _libc
    if _libc is None:
        try:
            lib = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc = lib.malloc_trim
            _libc.argtypes, _libc.restype = [ctypes.c_size_t], ctypes.c_int
        except (OSError, AttributeError):  # not glibc
            _libc = False
    return _libc or None


def trim() -> bool:
    """``malloc_trim(0)`` now (blocking: milliseconds on a heap of hundreds of MiB). True when
    the allocator returned memory; False when it had none to return or is not glibc's."""
    fn = _malloc_trim()
    _state["trims"] += 1
    return bool(fn(0)) if fn is not None else False


def release_soon() -> None:
    """Schedule ``gc.collect()`` then :func:`trim` (in a worker thread) :data:`DELAY_S` from
    now on the running event loop; coalesced: at most one pending, one per
    :data:`MIN_INTERVAL_S`. Without a running loop: does nothing. Never raises."""
    if _state["scheduled"]:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    _state["scheduled"] = True
    wait = max(DELAY_S, _state["last"] + MIN_INTERVAL_S - time.monotonic())
    loop.call_later(wait, _run, loop)


def _run(loop: asyncio.AbstractEventLoop) -> None:
    _state["last"] = time.monotonic()
    gc.collect()  # the refused answer's reference cycles (exception -> traceback -> frames)

    def done(_f: Any) -> None:
        _state["scheduled"] = False

    try:
        loop.run_in_executor(None, trim).add_done_callback(done)
    except RuntimeError:  # the loop is closing
        _state["scheduled"] = False
