"""The seccomp-BPF filter the bwrap backend installs (``bwrap --seccomp FD``).

bubblewrap applies a *compiled* classic-BPF program (an array of ``struct sock_filter``) read
from a file descriptor, right before it executes the sandboxed command; the filter stays on
every process the program starts. We compile it with **libseccomp** (the library systemd,
Docker/runc, Flatpak and Chromium's tooling use), through the ctypes binding ``pyseccomp``
(PyPI; API-compatible with libseccomp's own Python bindings), from the system's
``libseccomp.so.2`` (Debian ``libseccomp2``, present on every Debian/Ubuntu machine because
systemd and apt's sandbox link it).

The filter is a *deny list* on top of "allow": it removes the kernel interfaces sandboxed
Python code never needs and that carry most kernel attack surface or escape potential. The
list follows two references:

- Docker's default seccomp profile (moby ``profiles/seccomp/default.json``; documented at
  docs.docker.com/engine/security/seccomp/, "Significant syscalls blocked by the default
  profile"): ``ptrace``, ``process_vm_*``, ``kcmp``, mount family, ``unshare``/``setns``,
  namespace flags on ``clone``, ``clone3`` -> ``ENOSYS`` (its flags live in memory the filter
  cannot read; glibc then falls back to ``clone``), keyring calls, ``bpf``,
  ``perf_event_open``, ``userfaultfd``, module and ``kexec`` loading, ``reboot``, swap,
  ``acct``, ``quotactl``, clock setting, ``iopl``/``ioperm``, ``open_by_handle_at``,
  ``personality`` beyond ``PER_LINUX``/``PER_LINUX32``/``UNAME26``; and ``io_uring_*``, which
  Docker (moby PR #46762, 2023) and ChromeOS/Android block after a run of io_uring
  privilege-escalation CVEs.
- Flatpak's bwrap filter (``common/flatpak-run.c``, ``setup_seccomp``) and Chromium's Linux
  sandbox baseline policy (``sandbox/linux/seccomp-bpf-helpers/baseline_policy.cc``): the same
  mount/namespace/keyring/ptrace set, ``ioctl(TIOCSTI)`` and ``ioctl(TIOCLINUX)`` (typing into
  the controlling terminal), ``syslog``, ``uselib``, ``modify_ldt``, ``move_pages``/
  ``migrate_pages``, the new mount API (``open_tree``, ``fsopen`` ...), and socket families
  other than the allowed ones answered with ``EAFNOSUPPORT``. Flatpak allows AF_INET/AF_INET6/
  AF_NETLINK because its apps use the network; the sandbox has no network, so here only
  ``AF_UNIX`` (= ``AF_LOCAL``; multiprocessing and asyncio use it) is allowed.

Denied calls fail with ``EPERM`` (Docker's and Flatpak's choice), so the program sees an
ordinary ``PermissionError``/``OSError`` and the verifier reports it as the program's own
error; ``clone3`` fails with ``ENOSYS``; non-AF_UNIX ``socket`` with ``EAFNOSUPPORT``. Calls of
another ABI (i386 ``int 0x80``, x32) kill the process (libseccomp's bad-architecture action).

Not denied on purpose: NUMA policy calls (``mbind``, ``get/set_mempolicy``; Flatpak denies
them, but OpenBLAS/NumPy builds may probe them and a failure must not look like a bug in the
answer), ``prctl`` and ``seccomp`` itself (a program may only tighten its own filter).

Cost: every syscall of a filtered process takes the kernel's slower seccomp entry path; since
Linux 5.11 calls whose answer does not depend on the arguments are answered from a per-syscall
cache (``seccomp: cache result of seccomp filters``), the argument-dependent four (``clone``,
``socket``, ``ioctl``, ``personality``) walk a binary tree (libseccomp's
``SCMP_FLTATR_CTL_OPTIMIZE=2``). Measured per call and per run in ``bench/results/code.md``
("bwrap seccomp filter overhead").

:func:`filter_bpf` compiles once per process (~1 ms plus importing the binding) and caches the bytes; when libseccomp or
the binding is missing it returns ``None`` and :func:`unavailable_reason` says why, and the
bwrap backend runs without a filter and reports ``seccomp: "no seccomp filter (...)"``.
"""

from __future__ import annotations

import errno
import os
import threading

__all__ = ["DENIED_SYSCALLS", "ENOSYS_SYSCALLS", "CLONE_NAMESPACE_FLAGS", "ALLOWED_SOCKET_FAMILY",
           "filter_bpf", "unavailable_reason", "description"]

#: Calls answered with EPERM whatever their arguments (see the module docstring for sources).
#: Names unknown to this architecture/libseccomp are skipped.
DENIED_SYSCALLS: tuple[str, ...] = (
    # other processes' memory and state
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
    # file system namespaces and mounts
    "mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "open_by_handle_at",
    # namespaces
    "unshare", "setns",
    # kernel keyring
    "keyctl", "add_key", "request_key",
    # large kernel attack surface
    "bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "fanotify_init", "lookup_dcookie",
    # system administration
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
    "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "uselib", "nfsservctl",
    "_sysctl", "vhangup", "sethostname", "setdomainname", "settimeofday", "clock_settime",
    "stime", "iopl", "ioperm", "modify_ldt", "move_pages", "migrate_pages",
)

#: Calls answered with ENOSYS so that libc falls back to an inspectable variant.
ENOSYS_SYSCALLS: tuple[str, ...] = ("clone3",)

#: ``clone`` flags that create namespaces (linux/sched.h); any of them -> EPERM. (CLONE_NEWTIME
#: is 0x80, inside clone's exit-signal byte, so it is only reachable through clone3/unshare.)
CLONE_NAMESPACE_FLAGS: dict[str, int] = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

#: The one socket family allowed (``AF_UNIX`` == ``AF_LOCAL`` == 1); others -> EAFNOSUPPORT.
ALLOWED_SOCKET_FAMILY = 1

# ioctl requests that inject input into / control the terminal (asm-generic/ioctls.h).
_TIOCSTI, _TIOCLINUX = 0x5412, 0x541C
# personality(): Docker allows 0 (PER_LINUX), 8 (PER_LINUX32), 0x20000 (UNAME26), 0x20008 and
# 0xffffffff (query). libseccomp cannot compare one argument twice in a rule, so we deny every
# value above 0x20008: that covers all flag bits (ADDR_NO_RANDOMIZE 0x40000, READ_IMPLIES_EXEC,
# MMAP_PAGE_ZERO, ... are >= 0x40000) at the price of also denying the query, which Python
# never makes.
_PERSONALITY_MAX = 0x20008

_LOCK = threading.Lock()
_CACHE: dict[str, object] = {}


def _build() -> tuple[bytes, int]:
    """Compile the filter; returns ``(bpf bytes, number of rules)``.

    Raises:
        ImportError / RuntimeError / OSError: the binding or libseccomp is missing or refuses.
    """
    import pyseccomp as sc

    f = sc.SyscallFilter(sc.ALLOW)
    try:  # libseccomp >= 2.5: binary tree over syscall numbers instead of a linear chain
        f.set_attr(sc.Attr.CTL_OPTIMIZE, 2)
    except Exception:  # noqa: BLE001 - older library: the linear filter is still correct
        pass
    rules = 0

    def add(action: int, name: str, *args) -> None:
        nonlocal rules
        try:
            nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
        except Exception:  # noqa: BLE001 - unknown to this libseccomp
            return
        if nr < 0:  # a pseudo-number: the call does not exist on this architecture
            return
        f.add_rule(action, nr, *args)
        rules += 1

    eperm = sc.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        add(eperm, name)
    for name in ENOSYS_SYSCALLS:
        add(sc.ERRNO(errno.ENOSYS), name)
    for flag in CLONE_NAMESPACE_FLAGS.values():
        add(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    add(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, ALLOWED_SOCKET_FAMILY))
    for req in (_TIOCSTI, _TIOCLINUX):
        add(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, req))
    add(eperm, "personality", sc.Arg(0, sc.GT, _PERSONALITY_MAX))

    fd = os.memfd_create("veracity-seccomp", os.MFD_CLOEXEC)
    try:
        with os.fdopen(fd, "w+b", closefd=False) as fobj:
            f.export_bpf(fobj)
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks.append(b)
    finally:
        os.close(fd)
    bpf = b"".join(chunks)
    if not bpf or len(bpf) % 8:
        raise RuntimeError(f"libseccomp exported {len(bpf)} bytes, not a sock_filter array")
    return bpf, rules


def _load() -> None:
    with _LOCK:
        if "bpf" in _CACHE or "reason" in _CACHE:
            return
        if os.environ.get("VERACITY_SANDBOX_SECCOMP", "1").strip().lower() in ("0", "false", "no", "off"):
            _CACHE["reason"] = "disabled by VERACITY_SANDBOX_SECCOMP=0"
            return
        try:
            bpf, rules = _build()
        except Exception as exc:  # noqa: BLE001 - missing binding/library: run without a filter
            _CACHE["reason"] = f"libseccomp unavailable ({type(exc).__name__}: {exc})"
            return
        _CACHE["bpf"], _CACHE["rules"] = bpf, rules


def filter_bpf() -> bytes | None:
    """The compiled filter (``struct sock_filter[]``, 8 bytes per instruction, host byte order)
    for the host architecture, or ``None`` when it cannot be built here (see
    :func:`unavailable_reason`). Compiled once per process; thread-safe."""
    _load()
    return _CACHE.get("bpf")  # type: ignore[return-value]


def unavailable_reason() -> str | None:
    """Why :func:`filter_bpf` is ``None`` (one line), else ``None``."""
    _load()
    return _CACHE.get("reason")  # type: ignore[return-value]


def description() -> str:
    """One line for reports: ``"libseccomp deny list (N rules)"`` or
    ``"no seccomp filter (<reason>)"``."""
    if filter_bpf() is None:
        return f"no seccomp filter ({unavailable_reason()})"
    return f"libseccomp deny list ({_CACHE['rules']} rules)"


def _reset_for_tests() -> None:
    """Forget the cached filter (tests that toggle ``VERACITY_SANDBOX_SECCOMP``)."""
    with _LOCK:
        _CACHE.clear()
