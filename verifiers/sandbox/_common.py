"""Pieces shared by the executing backends: the in-sandbox bootstrap and the output cap."""

from __future__ import annotations

import json
import signal
import threading

from verifiers.sandbox import Limits

# Linux's per-argument limit is MAX_ARG_STRLEN = 131072 bytes (32 pages); the whole argv+env
# must stay under ARG_MAX (2 MiB by default). Chunks below that, total capped at 1.5 MB.
ARG_CHUNK = 100_000
MAX_PAYLOAD = 1_500_000

# Runs inside the sandbox as `python3 -I -c BOOT <payload chunks>`. It sets the rlimits with
# soft == limit and hard slightly above for CPU (SIGXCPU first, SIGKILL one second later), so
# the program cannot raise them again; then it runs the code as __main__ with the given stdin.
BOOT = r"""
import sys, json, io, resource
_a = json.loads("".join(sys.argv[1:]))
for _n, _s, _h in _a["rlimits"]:
    try:
        resource.setrlimit(getattr(resource, _n), (_s, _h))
    except (ValueError, OSError, AttributeError):
        pass
sys.argv = ["-c"]
sys.stdin = io.StringIO(_a["stdin"])
_c = _a["code"]
del _a, _n, _s, _h, json, io, resource
exec(compile(_c, "<sandbox>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
"""

# Environment of the sandboxed program: nothing from the gateway's environment.
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
    "PYTHONHASHSEED": "0",
    # one BLAS thread: numpy's OpenBLAS otherwise maps a buffer per core, which both wastes
    # the pids budget and trips RLIMIT_AS
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    # at most 2 glibc malloc arenas (mallopt(3), M_ARENA_MAX): each further thread that mallocs
    # would reserve a 64 MiB arena, which RLIMIT_AS counts -- 8 threads doing numpy work failed at
    # 512 MiB without this and ran at 288 MiB with it (bench/results/sandbox_memory_floor.md)
    "MALLOC_ARENA_MAX": "2",
    "MPLBACKEND": "Agg",
}


def rlimits(limits: Limits, *, address_space: bool, nproc: bool) -> list[tuple[str, int, int]]:
    """The ``(RLIMIT_NAME, soft, hard)`` triples the bootstrap applies inside the sandbox."""
    mib = 1024 * 1024
    out = [
        ("RLIMIT_CPU", int(limits.cpu_s), int(limits.cpu_s) + 1),
        ("RLIMIT_FSIZE", limits.file_size_mb * mib, limits.file_size_mb * mib),
        ("RLIMIT_NOFILE", limits.open_files, limits.open_files),
        ("RLIMIT_CORE", 0, 0),
    ]
    if address_space:
        out.append(("RLIMIT_AS", limits.memory_mb * mib, limits.memory_mb * mib))
    if nproc:
        out.append(("RLIMIT_NPROC", limits.pids, limits.pids))
    return out


def boot_argv(python: str, code: str, stdin: str, rl: list[tuple[str, int, int]]) -> list[str]:
    """``[python, "-I", "-c", BOOT, chunk, ...]`` carrying code, stdin and rlimits.

    Raises:
        ValueError: payload larger than ``MAX_PAYLOAD`` characters.
    """
    payload = json.dumps({"code": code, "stdin": stdin, "rlimits": rl})  # ASCII, no NULs
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"program too large for the sandbox ({len(payload)} > {MAX_PAYLOAD} chars)")
    chunks = [payload[i : i + ARG_CHUNK] for i in range(0, len(payload), ARG_CHUNK)] or [""]
    return [python, "-I", "-c", BOOT, *chunks]


class OutputCap:
    """Collects stdout/stderr bytes up to ``limit`` bytes in total; ``exceeded`` is set (and
    ``over`` fires) the moment more arrives. Thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.out = bytearray()
        self.err = bytearray()
        self.total = 0
        self.over = threading.Event()
        self._lock = threading.Lock()

    @property
    def exceeded(self) -> bool:
        return self.over.is_set()

    def add(self, data: bytes, stream: str) -> None:
        if not data:
            return
        with self._lock:
            room = self.limit - len(self.out) - len(self.err)
            buf = self.out if stream == "stdout" else self.err
            if room > 0:
                buf += data[:room]
            self.total += len(data)
            if self.total > self.limit:
                self.over.set()

    def text(self) -> tuple[str, str]:
        return (self.out.decode("utf-8", "replace"), self.err.decode("utf-8", "replace"))


def classify(exit_code: int | None, stderr: str, *, timed_out: bool, output: bool, oom: bool,
             cpu_s_max: float | None = None, cpu_s: float | None = None) -> str:
    """Map how a run ended to ``Result.killed_by``.

    Order: our wall-clock kill (``"timeout"``), the output cap, a memory kill (cgroup OOM, or
    Python's ``MemoryError`` under ``RLIMIT_AS``), then the CPU rlimit (``"cpu"``): SIGXCPU
    (signal 24, exit 152 = 128 + 24 from bwrap/docker) at ``cpu_s`` CPU seconds, or the SIGKILL
    at the hard limit ``cpu_s + 1`` when SIGXCPU is ignored (setrlimit(2), "RLIMIT_CPU").

    ``cpu_s_max`` is an upper bound on the CPU seconds the program used, when the backend
    knows one (bwrap: wall time x usable CPUs; docker: wall time, the container gets one CPU),
    and ``cpu_s`` the limit. A SIGXCPU/SIGKILL the CPU rlimit cannot have sent (the program
    used less than the limit) is the program's own doing (``os.kill(os.getpid(), 9)``) and
    reports ``"none"``: the exit code then tells what happened. Without a bound an
    unexplained SIGKILL/SIGXCPU still counts as the CPU limit. :func:`cpu_signal` names the
    signal of a ``"cpu"`` run.
    """
    if timed_out:
        return "timeout"
    if output:
        return "output"
    if oom:
        return "memory"
    last = stderr.rstrip().rsplit("\n", 1)[-1] if stderr else ""
    if last.startswith("MemoryError"):
        return "memory"
    # 0.25 s of slack: rusage/quota accounting granularity (ticks, CFS periods of 100 ms).
    known = cpu_s_max is not None and cpu_s is not None
    if exit_code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
        return "cpu" if not known or cpu_s_max >= cpu_s - 0.25 else "none"
    if exit_code in (-signal.SIGKILL, 128 + signal.SIGKILL):
        return "cpu" if not known or cpu_s_max >= cpu_s + 1 - 0.25 else "none"
    return "none"


def cpu_signal(exit_code: int | None) -> str:
    """The signal that ended a run, by name, from its exit code (``-N`` or ``128 + N``):
    ``"SIGXCPU"`` for 152 / -24, ``"SIGKILL"`` for 137 / -9; ``"signal N"`` for an unnamed
    one, ``""`` when the code is not a signal death."""
    if exit_code is None or 0 <= exit_code <= 128:
        return ""
    n = -exit_code if exit_code < 0 else exit_code - 128
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"
