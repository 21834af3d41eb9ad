"""bubblewrap backend: Linux namespaces + rlimits on the host kernel.

Each run is ``bwrap --unshare-all --die-with-parent --new-session ... python3 -I -c BOOT``:

- namespaces: user, pid, network (loopback only, down), ipc, uts, cgroup; inside, uid/gid
  65534 and no capabilities (``--cap-drop ALL``), ``--disable-userns`` (no nested namespaces);
- file system: read-only binds of ``/usr`` (+ the ``/bin``, ``/lib*`` links) and a few
  ``/etc`` files the loader needs — or, with ``rootfs`` / ``VERACITY_SANDBOX_ROOTFS``, a
  whole read-only root (e.g. the CI image's debootstrap tree, which carries numpy/pandas/sympy);
  or, with a runtime built by ``veracity sandbox setup`` (:mod:`verifiers.sandbox.runtime`), that
  virtualenv bound read-only at its own path, its ``bin/python`` as the interpreter;
  fresh ``/proc``, minimal ``/dev``, a tmpfs ``/tmp`` of ``Limits.tmp_mb`` MiB;
- environment: cleared (``--clearenv``), then only ``_common.SANDBOX_ENV``;
- seccomp: the deny-list filter of :mod:`verifiers.sandbox._seccomp` (``--seccomp FD``, compiled
  with libseccomp): no ptrace, mounts, namespaces, keyring, bpf, perf, io_uring, userfaultfd,
  module/kexec loading, sockets other than AF_UNIX, ... When libseccomp or its binding is
  missing the run still happens without a filter, and every result says so
  (``Result.extra["seccomp"] == "no seccomp filter (...)"``);
- rlimits (set by the bootstrap *inside* the sandbox): ``RLIMIT_AS`` (memory), ``RLIMIT_CPU``,
  ``RLIMIT_NPROC``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_CORE``.

About ``RLIMIT_NPROC`` (a per-*user* counter, not per-sandbox): since Linux 5.14 it is kept
per user namespace (ucounts). Because the bootstrap sets it after bwrap created the sandbox's
own user namespace, it counts only that sandbox's processes, and concurrent sandboxes do not
share one budget. Under **root** the kernel exempts processes whose real uid is host root from
``RLIMIT_NPROC`` altogether (``copy_process``: ``INIT_USER`` / ``CAP_SYS_RESOURCE``), and bwrap
would map the sandbox uid to host root; so when the gateway runs as root this backend first
drops to host uid/gid 65534 (``Popen(user=, group=)``) and runs bwrap unprivileged, which needs
unprivileged user namespaces (``user.max_user_namespaces`` > 0).

On timeout or output overflow the bwrap process is SIGKILLed; ``--die-with-parent`` then kills
the sandbox's PID 1 and the kernel kills every process of the PID namespace, detached ones too.

Isolation is weaker than the docker backend: the program talks to the host kernel through a
deny list (docker's default profile is an allow list), memory is bounded by address space
rather than by cgroup accounting (``RLIMIT_AS`` counts mappings, not resident memory, and is
per process), and the tmpfs is only bounded by its size.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import threading
import time

from verifiers.sandbox import CANCEL_POLL_S, Limits, Result, Sandbox
from verifiers.sandbox import runtime as _rt
from verifiers.sandbox import _seccomp
from verifiers.sandbox._common import SANDBOX_ENV, OutputCap, boot_argv, classify, rlimits

SANDBOX_UID = 65534
_PROBE_CACHE: dict[tuple, tuple[str | None, str | None]] = {}
_PROBE_LOCK = threading.Lock()


class BwrapSandbox(Sandbox):
    """Sandbox backend using bubblewrap (``bwrap`` on ``PATH``, Debian package ``bubblewrap``).

    Args:
        limits: default :class:`Limits`.
        rootfs: directory mounted read-only as ``/`` (env ``VERACITY_SANDBOX_ROOTFS``); without
            it the host's ``/usr`` is bound read-only and the host interpreter is used.
        python: interpreter path *inside* the sandbox (env ``VERACITY_SANDBOX_PYTHON``,
            default ``/usr/bin/python3``).
        runtime: a runtime directory built by ``veracity sandbox setup``
            (:mod:`verifiers.sandbox.runtime`; env ``VERACITY_SANDBOX_RUNTIME``, else the default
            location when a runtime was built there): bound read-only at its own path, its
            ``bin/python`` is the interpreter. A ``rootfs`` or ``python`` (argument or env)
            takes precedence over the env / default runtime, not over an explicit ``runtime``.
        seccomp: install the seccomp filter (default True; env ``VERACITY_SANDBOX_SECCOMP=0``
            turns it off process-wide). Without libseccomp it is off regardless, and
            :meth:`isolation` says why.
    """

    name = "bwrap"

    def __init__(self, limits: Limits | None = None, *, rootfs: str | None = None, python: str | None = None,
                 runtime: str | None = None, seccomp: bool = True) -> None:
        super().__init__(limits)
        self.rootfs = rootfs or os.environ.get("VERACITY_SANDBOX_ROOTFS") or None
        self.python = python or os.environ.get("VERACITY_SANDBOX_PYTHON") or "/usr/bin/python3"
        self.runtime: _rt.Runtime | None = None
        self._runtime_error: str | None = None
        try:
            if runtime or not (self.rootfs or python or os.environ.get("VERACITY_SANDBOX_PYTHON")):
                self.runtime = _rt.resolve(runtime)
        except _rt.SandboxRuntimeError as exc:
            self._runtime_error = str(exc)
        if self.runtime is not None:
            self.rootfs, self.python = None, self.runtime.python
        self.bwrap = shutil.which("bwrap")
        self._want_seccomp = seccomp
        self._seccomp_reason: str | None = None  # set when bwrap itself rejects the filter

    # -- isolation -----------------------------------------------------------------------------
    def _bpf(self) -> bytes | None:
        if not self._want_seccomp or self._seccomp_reason is not None:
            return None
        return _seccomp.filter_bpf()

    def isolation(self) -> dict[str, str]:
        """``{"seccomp": ..., "memory": ...}`` (see :meth:`Sandbox.isolation`)."""
        if not self._want_seccomp:
            sc = "no seccomp filter (turned off for this sandbox)"
        elif self._seccomp_reason is not None:
            sc = f"no seccomp filter ({self._seccomp_reason})"
        else:
            sc = _seccomp.description()
        return {"seccomp": sc, "memory": "RLIMIT_AS (address space per process; no cgroup)",
                "interpreter": self.python + (f" (rootfs {self.rootfs})" if self.rootfs else "")}

    # -- availability --------------------------------------------------------------------------
    def unavailable_reason(self) -> str | None:
        if self.bwrap is None:
            return "bubblewrap (bwrap) is not installed"
        if self._runtime_error is not None:
            return self._runtime_error
        if self.rootfs and not os.path.isdir(self.rootfs):
            return f"sandbox rootfs {self.rootfs!r} does not exist"
        key = (self.bwrap, self.rootfs, self.python, self.runtime and tuple(self.runtime.binds()), self._bpf())
        with _PROBE_LOCK:
            if key not in _PROBE_CACHE:
                _PROBE_CACHE[key] = (self._probe(), self._seccomp_reason)
            reason, self._seccomp_reason = _PROBE_CACHE[key]
            return reason

    def _probe(self) -> str | None:
        why = self._probe_once(self._bpf())
        if why is not None and self._bpf() is not None and self._probe_once(None) is None:
            # bubblewrap runs, but not with our filter (too old a bwrap?): run unfiltered, say so
            self._seccomp_reason = f"bwrap rejected the filter: {why}"
            return None
        return why

    def _probe_once(self, bpf: bytes | None) -> str | None:
        try:
            with _filter_fd(bpf) as fds:
                proc = subprocess.run(
                    self._argv(Limits(), [self.python, "-I", "-c", "print('ok')"], fds[0] if fds else None),
                    capture_output=True, timeout=20, env={}, pass_fds=fds, **self._drop_kwargs(),
                )
        except (OSError, subprocess.SubprocessError) as exc:
            return f"bwrap failed to start: {exc}"
        if proc.returncode != 0 or proc.stdout.strip() != b"ok":
            err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
            return f"bwrap cannot create its sandbox here: {err[-1] if err else proc.returncode}"
        return None

    # -- command line --------------------------------------------------------------------------
    @staticmethod
    def _drop_kwargs() -> dict:
        """Under root: run bwrap as host uid/gid 65534 (see module docstring)."""
        if os.geteuid() == 0:
            return {"user": SANDBOX_UID, "group": SANDBOX_UID, "extra_groups": []}
        return {}

    def _argv(self, limits: Limits, command: list[str], seccomp_fd: int | None = None) -> list[str]:
        a = [
            self.bwrap or "bwrap",
            "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--disable-userns", "--cap-drop", "ALL",
            "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--hostname", "sandbox", "--clearenv",
        ]
        for k, v in SANDBOX_ENV.items():
            a += ["--setenv", k, v]
        if self.rootfs:
            a += ["--ro-bind", self.rootfs, "/"]
        else:
            a += ["--ro-bind", "/usr", "/usr"]
            for d in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
                if os.path.islink(d):
                    a += ["--symlink", os.readlink(d), d]
                elif os.path.isdir(d):
                    a += ["--ro-bind", d, d]
            for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
                      "/etc/localtime", "/etc/python3", f"/etc/python3.{_minor()}"):
                a += ["--ro-bind-try", f, f]
        a += [
            "--proc", "/proc", "--dev", "/dev",
            "--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
        ]
        for d in self.runtime.binds() if self.runtime else ():  # read-only at the same path (after
            a += ["--ro-bind", d, d]                             # /tmp: a runtime may live there)
        a += [
            "--remount-ro", "/",  # the scaffold root bwrap builds is a writable tmpfs otherwise
            "--chdir", "/tmp",
        ]
        if seccomp_fd is not None:
            a += ["--seccomp", str(seccomp_fd)]
        return a + ["--"] + command

    # -- run -----------------------------------------------------------------------------------
    def _run(self, code: str, stdin: str, limits: Limits, cancel: threading.Event | None = None) -> Result:
        cmd = boot_argv(self.python, code, stdin, rlimits(limits, address_space=True, nproc=True))
        cap = OutputCap(limits.output_bytes)
        t0 = time.monotonic()
        with _filter_fd(self._bpf()) as fds:
            proc = subprocess.Popen(
                self._argv(limits, cmd, fds[0] if fds else None), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={}, close_fds=True,
                start_new_session=True, pass_fds=fds, **self._drop_kwargs(),
            )
        timed_out = cancelled = False
        sel = selectors.DefaultSelector()
        try:
            sel.register(proc.stdout, selectors.EVENT_READ, "stdout")
            sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
            deadline = t0 + limits.timeout_s
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                # the caller went away: kill the run (docs/design.md "Untrusted code runs only in a sandbox")
                if cancel is not None and cancel.is_set():
                    cancelled = True
                    break
                for key, _ in sel.select(timeout=min(left, CANCEL_POLL_S)):
                    data = os.read(key.fd, 65536)
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    cap.add(data, key.data)
                if cap.exceeded:
                    break
            if timed_out or cancelled or cap.exceeded:
                _kill(proc)
            try:
                exit_code = proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill(proc)
                exit_code = proc.wait()
        finally:
            sel.close()
            if proc.poll() is None:
                _kill(proc)
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        duration = time.monotonic() - t0
        out, err = cap.text()
        # bwrap forwards the program's status; death by signal N arrives as 128+N (as docker).
        # The sandbox cannot use more CPU seconds than wall seconds x the CPUs it may run on
        # (wait4's rusage does not help: bwrap exits without reaping the sandbox's init), which
        # tells a CPU-rlimit kill from a program that killed itself early (classify()).
        killed_by = "cancelled" if cancelled else classify(
            exit_code, err, timed_out=timed_out, output=cap.exceeded, oom=False,
            cpu_s_max=duration * _cpus(), cpu_s=limits.cpu_s)
        extra = self.isolation()
        return Result(exit_code=None if timed_out or cancelled or cap.exceeded else exit_code,
                      stdout=out, stderr=err, duration_s=duration, killed_by=killed_by,
                      truncated=cap.exceeded, extra=extra)


@contextlib.contextmanager
def _filter_fd(bpf: bytes | None):
    """Yield ``(read_fd,)`` of a pipe holding ``bpf`` (bwrap reads the program to EOF), or
    ``()`` without a filter. The filter (~1 KB) fits the pipe buffer, so writing never blocks.
    Our copy of the fd is closed on exit; the child keeps its own."""
    if bpf is None:
        yield ()
        return
    r, w = os.pipe()
    try:
        os.write(w, bpf)
        os.close(w)
        w = -1
        yield (r,)
    finally:
        if w >= 0:
            os.close(w)
        os.close(r)


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL bwrap's process group; --die-with-parent takes the sandbox down with it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _cpus() -> int:
    """CPUs the sandbox could run on at most: all of the machine's (an upper bound is what
    classify() needs; the program may widen its own affinity within its cpuset)."""
    return max(1, os.cpu_count() or 1)


def _minor() -> str:
    import sys

    return str(sys.version_info.minor)
