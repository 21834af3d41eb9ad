"""Run untrusted Python in a sandbox: one interface, several backends.

    from verifiers import sandbox
    box = sandbox.get("auto", sandbox.Limits(timeout_s=5))
    result = box.run("print(6 * 7)")             # blocking; safe to call from any thread
    result = await box.arun("print(6 * 7)")      # asyncio: runs in the sandbox thread pool
    result.stdout, result.exit_code, result.killed_by   # '42\\n', 0, 'none'

Backends (``get(name)``):

- ``docker``: a fresh container per run from the image ``VERACITY_SANDBOX_IMAGE`` (default
  ``veracity-sandbox:latest``, built from ``deploy/sandbox/Dockerfile``): no network, cgroup
  memory (swap off), CPU quota, pids limit, read-only root, tmpfs ``/tmp``, all capabilities
  dropped, ``no-new-privileges``, uid 65534, an init process as PID 1. The engine is the one
  ``DOCKER_HOST`` points at.
- ``bwrap``: bubblewrap namespaces on the host kernel: ``--unshare-all`` (user, pid, net, ipc,
  uts, cgroup), read-only system binds (or a read-only root file system from
  ``VERACITY_SANDBOX_ROOTFS``), tmpfs ``/tmp``, uid 65534, rlimits for address space, CPU
  seconds, processes and file size, and a libseccomp deny-list filter
  (:mod:`verifiers.sandbox._seccomp`; skipped, and reported as ``"no seccomp filter (...)"``, when libseccomp
  is missing). Weaker than docker: no cgroup memory accounting, and a deny list rather than
  docker's allow list.
- ``none``: never executes; :meth:`Sandbox.run` raises :class:`SandboxUnavailable`, so callers
  report tier-3 checks as ``unknown`` with the reason.
- ``auto``: prefers a backend with a seccomp filter: ``docker`` when its daemon answers, the
  image is present and the engine applies seccomp; else ``bwrap`` when bubblewrap can create
  its namespaces and the filter compiles; else whichever of the two runs at all (docker first);
  else ``none``. :meth:`Sandbox.isolation` tells what was chosen.

Untrusted code never runs unsandboxed: there is no "local" backend.

A process-wide cap bounds how many sandboxes run at once (env ``VERACITY_SANDBOX_CONCURRENCY``,
default 4), shared by every backend and by both :meth:`Sandbox.run` and :meth:`Sandbox.arun`:
fifty simultaneous requests queue for slots instead of starting fifty containers.

Cancellation reaches the sandbox (docs/design.md "Untrusted code runs only in a sandbox": when the client
leaves, the run is killed):
cancelling the task awaiting :meth:`Sandbox.arun`
(the client went away, a deadline fired), or setting the ``cancel`` event of :meth:`Sandbox.run`,
keeps a queued run from starting and kills a running one (bwrap: its process group; docker: the
container is removed) within ``CANCEL_POLL_S``, so abandoned runs never hold a slot to their limit.
"""

from __future__ import annotations

import abc
import asyncio
import functools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

#: why a run ended early (:attr:`Result.killed_by`); ``"none"``: it ran to its end
KilledBy = Literal["timeout", "cpu", "memory", "output", "cancelled", "none"]

__all__ = [
    "Limits",
    "Result",
    "Sandbox",
    "SandboxUnavailable",
    "get",
    "max_concurrency",
    "KilledBy",
    "CANCEL_POLL_S",
    "DockerSandbox",
    "BwrapSandbox",
    "NoSandbox",
    "runtime",
]

#: backend class -> its module, imported on first use (PEP 562): ``import verifiers.sandbox``
#: stays cheap for callers that only name a backend through :func:`get`
_BACKENDS = {"DockerSandbox": "verifiers.sandbox._docker", "BwrapSandbox": "verifiers.sandbox._bwrap",
             "NoSandbox": "verifiers.sandbox._none"}


def __getattr__(name: str) -> Any:
    home = _BACKENDS.get(name)
    if home is None:
        raise AttributeError(f"module 'verifiers.sandbox' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one sandbox run (policy ``verifiers.code.sandbox.limits``; docs/code.md).

    Attributes:
        timeout_s: wall-clock limit in seconds (default 10). On expiry the whole sandbox
            (container / namespace) is killed with SIGKILL and ``killed_by == "timeout"``.
        cpu_s: CPU-time limit in seconds (``RLIMIT_CPU``; default 10). Exceeding it sends
            SIGXCPU (then SIGKILL one second later) and reports ``killed_by == "cpu"``.
        memory_mb: memory in MiB (default 768). docker: cgroup memory and memory+swap limit
            (OOM kill -> ``"memory"``); bwrap: ``RLIMIT_AS`` address space (allocation fails,
            Python raises ``MemoryError`` -> ``"memory"``). The default fits numpy + pandas +
            sympy with margin: under ``RLIMIT_AS`` the highest floor measured for ordinary data
            code (8 threads of numpy/pandas work, Debian's numpy with OpenBLAS) was 512 MiB, 320
            MiB with the PyPI runtime (bench/results/sandbox_memory_floor.md); below it imports
            or BLAS calls fail, or spin in OpenBLAS's allocation retries until the CPU limit.
        pids: processes/threads (default 64). docker: cgroup ``pids_limit``; bwrap:
            ``RLIMIT_NPROC`` set inside the sandbox's own user namespace (see bwrap.py).
        output_bytes: stdout+stderr bytes kept (default 262144 = 256 KiB). A run that writes
            more is killed and reports ``killed_by == "output"``.
        file_size_mb: largest file the code may write, MiB (``RLIMIT_FSIZE``; default 16).
        tmp_mb: size of the writable tmpfs ``/tmp`` in MiB (default 64).
        open_files: ``RLIMIT_NOFILE`` (default 256).
    """

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 768
    pids: int = 64
    output_bytes: int = 256 * 1024
    file_size_mb: int = 16
    tmp_mb: int = 64
    open_files: int = 256

    def with_(self, **changes: Any) -> "Limits":
        """A copy with some fields changed."""
        return replace(self, **changes)


@dataclass(slots=True)
class Result:
    """Outcome of one sandbox run.

    Attributes:
        exit_code: the program's exit status (negative = killed by that signal; docker
            reports 128+signal as the engine does), or ``None`` when it never started.
        stdout, stderr: decoded output (UTF-8, undecodable bytes replaced), together at most
            ``Limits.output_bytes`` bytes.
        duration_s: wall time of the run in seconds, from start to exit/kill (excludes
            waiting for a concurrency slot; see ``queued_s``).
        killed_by: ``"timeout"`` (the wall-clock limit), ``"cpu"`` (the CPU-time rlimit:
            SIGXCPU, exit 152, or the SIGKILL one second after it), ``"memory"``, ``"output"``,
            ``"cancelled"`` (the caller went away: :meth:`Sandbox.arun` was cancelled, or the
            ``cancel`` event of :meth:`Sandbox.run` was set) or ``"none"`` (ended on its own).
        backend: name of the backend that ran it.
        truncated: True when output was cut at ``output_bytes``.
        queued_s: seconds spent waiting for a concurrency slot.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    killed_by: KilledBy = "none"
    backend: str = ""
    truncated: bool = False
    queued_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the program exited 0 on its own."""
        return self.exit_code == 0 and self.killed_by == "none"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SandboxUnavailable(RuntimeError):
    """The backend cannot run code here (no engine, no image, no bubblewrap, or ``none``).
    ``str(exc)`` is the human-readable reason."""


# --- process-wide concurrency cap -------------------------------------------------------------

def max_concurrency() -> int:
    """Slots shared by all sandboxes of this process (env ``VERACITY_SANDBOX_CONCURRENCY``,
    default 4; at least 1)."""
    try:
        return max(1, int(os.environ.get("VERACITY_SANDBOX_CONCURRENCY", "4")))
    except ValueError:
        return 4


_SLOTS = threading.BoundedSemaphore(max_concurrency())
#: Seconds between looks at a run's cancel event (while queued for a slot and while running):
#: how long an abandoned run may outlive its caller.
CANCEL_POLL_S = 0.1


def _cancelled(backend: str, queued: float) -> Result:
    """The result of a run cancelled before it started."""
    return Result(exit_code=None, stdout="", stderr="", duration_s=0.0, killed_by="cancelled",
                  backend=backend, queued_s=queued)
_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    """Thread pool for :meth:`Sandbox.arun`: sized to the cap, so queued async requests wait
    in the pool's queue, not in threads, and never starve asyncio's default executor."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_concurrency(), thread_name_prefix="veracity-sandbox")
        return _EXECUTOR


class Sandbox(abc.ABC):
    """A place to run untrusted Python programs. Subclasses implement :meth:`_run`."""

    name: str = "?"

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()

    @property
    def available(self) -> bool:
        """True when :meth:`run` can execute code here (cheap after the first call)."""
        return self.unavailable_reason() is None

    @abc.abstractmethod
    def unavailable_reason(self) -> str | None:
        """``None`` when usable, else why not (one line)."""

    def isolation(self) -> dict[str, str]:
        """How strongly this backend isolates, for reports: ``{"seccomp": ..., "memory": ...}``.

        ``seccomp`` names the syscall filter in force (a value starting with ``"no seccomp"`` means
        the program sees the kernel's whole syscall surface, with the reason); ``memory`` names
        what bounds memory (cgroup accounting or ``RLIMIT_AS``); bwrap adds ``interpreter`` (the
        Python it runs, from a runtime, a rootfs or the host). Every :class:`Result` of an
        executing backend carries the same keys in ``extra``.
        """
        return {"seccomp": "no seccomp filter (does not execute code)", "memory": "none (does not execute code)"}

    @property
    def filtered(self) -> bool:
        """True when runs have a seccomp filter (see :meth:`isolation`)."""
        return not self.isolation()["seccomp"].startswith("no seccomp")

    def run(self, code: str, stdin: str = "", limits: Limits | None = None,
            cancel: threading.Event | None = None) -> Result:
        """Run the Python program ``code`` (source text) with ``stdin`` as its standard input.

        Blocks until the run ends (at most ``limits.timeout_s`` plus start/stop overhead, plus
        waiting for a concurrency slot). Thread-safe. ``limits`` defaults to the sandbox's.
        ``cancel``: when set (from any thread), a queued run never starts and a running one is
        killed (bwrap: SIGKILL to its process group; docker: the container is removed) within
        about :data:`CANCEL_POLL_S`; the result then has ``killed_by == "cancelled"``.

        Raises:
            SandboxUnavailable: the backend cannot execute code here.
            ValueError: ``code`` is too large to pass in (over ~1.5 MB).
        """
        return self._run_queued(code, stdin, limits, time.monotonic(), cancel or threading.Event())

    async def arun(self, code: str, stdin: str = "", limits: Limits | None = None) -> Result:
        """Async :meth:`run` for the gateway's event loop: runs in the sandbox thread pool
        (as many threads as concurrency slots), so the event loop never blocks.

        Cancelling the awaiting task (the client went away, a deadline fired) reaches the
        sandbox: a run still queued for a slot never starts, a running one is killed and its
        slot freed at once, instead of running on to its wall-clock limit
        (docs/design.md "Untrusted code runs only in a sandbox").
        """
        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        call = functools.partial(self._run_queued, code, stdin, limits, time.monotonic(), cancel)
        fut = loop.run_in_executor(_executor(), call)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancel.set()  # the worker thread sees it within CANCEL_POLL_S and kills the run
            fut.cancel()  # still queued in the pool: never starts
            raise

    def _run_queued(self, code: str, stdin: str, limits: Limits | None, submitted: float,
                    cancel: threading.Event) -> Result:
        reason = self.unavailable_reason()
        if reason is not None:
            raise SandboxUnavailable(reason)
        lim = limits or self.limits
        while not _SLOTS.acquire(timeout=CANCEL_POLL_S):
            if cancel.is_set():
                return _cancelled(self.name, time.monotonic() - submitted)
        try:
            queued = time.monotonic() - submitted
            if cancel.is_set():
                return _cancelled(self.name, queued)
            res = self._run(code, stdin, lim, cancel)
        finally:
            _SLOTS.release()
        res.queued_s = queued
        res.backend = self.name
        return res

    @abc.abstractmethod
    def _run(self, code: str, stdin: str, limits: Limits, cancel: threading.Event) -> Result:
        """Backend-specific run; called while holding a concurrency slot. When ``cancel`` is
        set the backend kills the run (its whole process tree / container) within about
        :data:`CANCEL_POLL_S` and reports ``killed_by == "cancelled"``."""

    def close(self) -> None:
        """Release backend resources (connections, warm containers). Idempotent."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.limits}>"


def get(backend: str = "auto", limits: Limits | None = None, **options: Any) -> Sandbox:
    """Return a sandbox backend by name: ``"docker"``, ``"bwrap"``, ``"none"`` or ``"auto"``.

    ``options`` go to the backend (docker: ``image``, ``base_url``, ``warm``; bwrap:
    ``rootfs``, ``python``, ``runtime``, ``seccomp``). ``auto`` picks the first that runs with a seccomp
    filter (docker, then bwrap), else the first that runs at all, else ``none`` (whose reason
    lists why each was skipped).
    A named backend that cannot run is still returned: its ``available`` is False and
    ``run`` raises :class:`SandboxUnavailable` with the reason.

    Raises:
        ValueError: unknown backend name.
    """
    name = (backend or "auto").strip().lower()
    if name == "docker":
        from verifiers.sandbox._docker import DockerSandbox

        return DockerSandbox(limits, **options)
    if name == "bwrap":
        from verifiers.sandbox._bwrap import BwrapSandbox

        return BwrapSandbox(limits, **options)
    if name == "none":
        from verifiers.sandbox._none import NoSandbox

        return NoSandbox(limits, reason=options.get("reason", "sandbox backend 'none' never executes code"))
    if name == "auto":
        from verifiers.sandbox._bwrap import BwrapSandbox
        from verifiers.sandbox._docker import DockerSandbox
        from verifiers.sandbox._none import NoSandbox

        dopts = {k: v for k, v in options.items() if k in ("image", "base_url", "warm")}
        bopts = {k: v for k, v in options.items() if k in ("rootfs", "python", "runtime", "seccomp")}
        d = DockerSandbox(limits, **dopts)
        d_reason = d.unavailable_reason()
        if d_reason is None and d.filtered:
            return d
        b = BwrapSandbox(limits, **bopts)
        b_reason = b.unavailable_reason()
        if b_reason is None and (b.filtered or d_reason is not None):
            d.close()
            return b
        if d_reason is None:
            return d  # docker without seccomp still beats bwrap without seccomp (cgroup memory)
        return NoSandbox(limits, reason=f"no sandbox available: docker: {d_reason}; bwrap: {b_reason}")
    raise ValueError(f"unknown sandbox backend {backend!r} (docker | bwrap | none | auto)")
