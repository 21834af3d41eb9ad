"""Disconnect watching: cancel a chat request's work when its client goes away before the
response starts.

Between reading the body and sending the response nothing reads ASGI ``receive``, so without
this a client that gives up while the gateway waits for the upstream (or runs corrections)
would go unnoticed, and the upstream would keep generating (and billing) tokens. A
:class:`DisconnectWatch` per request, started by one :class:`WatchSweeper` per process only
for requests still running after :data:`DISCONNECT_WATCH_AFTER_S`, keeps the common fast
request at a set insertion and removal (no timer, no task).
"""

from __future__ import annotations

import asyncio
from typing import Any

from proxy._asgi.body import receive_body

__all__ = ["DISCONNECT_WATCH_AFTER_S", "DisconnectWatch", "WatchSweeper"]


#: How long a chat request may run before the gateway starts watching for the client's
#: ``http.disconnect`` (seconds). Requests answered sooner (cached or tiny upstream answers,
#: benchmarks) pay only a set insertion, no timer and no task; slower ones (real model calls,
#: verification) are cancelled within about twice this delay of the client going away.
DISCONNECT_WATCH_AFTER_S = 0.05


class DisconnectWatch:
    """Cancel a chat request's task when its client disconnects before the response starts.

    Until the response starts, nothing reads ASGI ``receive`` after the body, so a client
    that gives up while the gateway waits for the upstream (non-stream, or before a stream's
    first event) or runs correction rounds would go unnoticed until the upstream answered,
    and the upstream would keep generating (and billing) tokens. :meth:`read_body` reads the
    body and registers the watch with the process's :class:`WatchSweeper`; a request still
    running after :data:`DISCONNECT_WATCH_AFTER_S` gets a task that awaits ``receive()`` and,
    on ``http.disconnect``, cancels the request's task: the ``CancelledError`` unwinds the
    pipeline, which closes the upstream connection (aiohttp closes a response whose read is
    cancelled) and stops verification and corrections. :meth:`stop` (called before the
    response starts; Starlette's ``StreamingResponse`` watches ``receive`` itself afterwards)
    disarms it. ``fired``: this watch cancelled the task.
    ASGI spec: https://asgi.readthedocs.io/en/latest/specs/www.html#disconnect-receive-event
    """

    __slots__ = ("receive", "headers", "sweeper", "task", "armed_at", "watcher", "fired", "stopped")

    def __init__(self, receive: Any, headers: dict[str, str], sweeper: "WatchSweeper") -> None:
        self.receive = receive
        self.headers = headers
        self.sweeper = sweeper
        self.task: asyncio.Task[Any] | None = None
        self.armed_at = 0.0
        self.watcher: asyncio.Task[Any] | None = None
        self.fired = False
        self.stopped = False

    async def read_body(self, limit: int) -> bytes:
        """The request body (see :func:`proxy._asgi.body.receive_body`); then arm the watch."""
        body = await receive_body(self.receive, self.headers, limit)
        self.arm()
        return body

    def __enter__(self) -> "DisconnectWatch":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        """Disarm; swallow the ``CancelledError`` this watch caused (the client is gone, there
        is no one to answer) when no other cancel is pending (``Task.uncancel``, Python >= 3.11);
        any other exception propagates."""
        self.stop()
        if not (self.fired and isinstance(exc, asyncio.CancelledError)):
            return False
        task = asyncio.current_task()
        return task is not None and task.uncancel() == 0

    def arm(self) -> None:
        """Watch the current task from now on (the body has been read)."""
        if not self.stopped:
            self.task = asyncio.current_task()
            self.sweeper.add(self)

    def start(self) -> None:
        """Called by the sweeper once the request is slow: start awaiting ``receive()``."""
        if not self.stopped:
            self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while not self.stopped:
            msg = await self.receive()
            if msg.get("type") == "http.disconnect":
                if not self.stopped and self.task is not None:
                    self.fired = True
                    self.task.cancel()
                return
            # after the body a server should answer receive() only with http.disconnect; one
            # that repeats http.request (test harnesses do) is polled, never spun on
            await asyncio.sleep(DISCONNECT_WATCH_AFTER_S)

    def stop(self) -> None:
        """Disarm (idempotent): leave the sweeper, cancel the watching task."""
        if self.stopped:
            return
        self.stopped = True
        self.sweeper.pending.discard(self)
        if self.watcher is not None:
            if not self.watcher.done():
                self.watcher.cancel()
            self.watcher = None


class WatchSweeper:
    """One task per process that starts the :class:`DisconnectWatch` of every chat request
    running longer than :data:`DISCONNECT_WATCH_AFTER_S`. Cheaper on the hot path than a
    timer per request (a set insertion and removal); it sleeps on an event while no request
    is pending. Started lazily inside the running loop by the first request."""

    def __init__(self) -> None:
        self.pending: set[DisconnectWatch] = set()
        self.task: asyncio.Task[None] | None = None
        self.wake: asyncio.Event | None = None

    def add(self, watch: DisconnectWatch) -> None:
        """Pend ``watch`` (armed now); start the sweeper task in this loop if none runs."""
        loop = asyncio.get_running_loop()
        watch.armed_at = loop.time()
        self.pending.add(watch)
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.wake = asyncio.Event()
            self.task = loop.create_task(self._run())
        elif not self.wake.is_set():  # type: ignore[union-attr]
            self.wake.set()  # type: ignore[union-attr]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        wake = self.wake
        assert wake is not None
        while True:
            if not self.pending:
                wake.clear()
                await wake.wait()
            await asyncio.sleep(DISCONNECT_WATCH_AFTER_S)
            due = loop.time() - DISCONNECT_WATCH_AFTER_S
            for watch in [w for w in self.pending if w.armed_at <= due]:
                self.pending.discard(watch)
                watch.start()

    async def close(self) -> None:
        """Stop the sweeper task (at shutdown)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, RuntimeError):
                pass
