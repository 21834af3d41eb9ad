"""The sandbox *runtime*: a Python environment with the scientific stack for the bwrap backend,
built without root and without a container registry (``veracity sandbox setup``).

A runtime is a ``python -m venv`` directory with pip-installed packages (from PyPI, binary
wheels only) and a manifest ``veracity-runtime.json`` (interpreter, packages with versions,
build time, size). The bwrap backend binds the directory read-only at its own path (plus the
base interpreter's prefix when that is outside ``/usr``) and runs ``DIR/bin/python``; nothing in
it is writable from inside the sandbox.

Where the bwrap backend finds one (first match wins; see :func:`resolve`):

1. ``BwrapSandbox(runtime=DIR)``;
2. env ``VERACITY_SANDBOX_RUNTIME=DIR`` (the line ``veracity sandbox setup`` prints);
3. :func:`default_path` when a runtime was built there.

A root file system (``VERACITY_SANDBOX_ROOTFS``) or an explicit interpreter
(``VERACITY_SANDBOX_PYTHON``) takes precedence over 2 and 3: they bring their own libraries.

The default package set :data:`DEFAULT_PACKAGES` is the one ``deploy/sandbox/Dockerfile``
installs, so the docker and bwrap backends run the same libraries (a test compares the two).
"""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable

#: Requirement specifiers of the default runtime; the same as ``deploy/sandbox/Dockerfile``'s
#: ``pip install`` line (checked by tests/verifiers/test_sandbox_runtime.py).
DEFAULT_PACKAGES: tuple[str, ...] = ("numpy>=1.26,<3", "pandas>=2.1,<3", "sympy>=1.12")
#: Import names of the scientific stack the code verifier's users mostly need.
SCIENTIFIC_STACK: tuple[str, ...] = ("numpy", "pandas", "sympy")
#: Environment variable naming a runtime directory.
ENV_VAR = "VERACITY_SANDBOX_RUNTIME"
#: Manifest file written at the top of a runtime by :func:`build`.
MANIFEST = "veracity-runtime.json"
#: The command that builds the default runtime (named in notes and log lines).
SETUP_COMMAND = "veracity sandbox setup"

__all__ = [
    "DEFAULT_PACKAGES", "SCIENTIFIC_STACK", "ENV_VAR", "MANIFEST", "SETUP_COMMAND",
    "Runtime", "SandboxRuntimeError", "default_path", "resolve", "load", "build", "missing_stack",
    "provide_hint", "info", "startup_note", "log_startup_note",
]


class SandboxRuntimeError(RuntimeError):
    """A runtime cannot be built or used; ``str(exc)`` says why (one line or a few)."""


@dataclass(frozen=True, slots=True)
class Runtime:
    """A runtime directory on the host.

    Attributes:
        path: absolute, symlink-free directory (bound read-only at the same path in the sandbox).
        python: ``path/bin/python``, the interpreter the sandbox runs.
        base_prefix: prefix of the interpreter the venv was made from (``pyvenv.cfg``'s ``home``
            minus ``/bin``), or ``None`` if unknown; bound read-only too when outside ``/usr``.
        manifest: the parsed ``veracity-runtime.json`` (``{}`` when absent).
    """

    path: str
    python: str
    base_prefix: str | None
    manifest: dict[str, Any] = field(default_factory=dict)

    def binds(self) -> list[str]:
        """Host directories the sandbox needs read-only at the same path: the runtime, and the
        base interpreter's prefix unless the backend's ``/usr`` bind already covers it."""
        out = [self.path]
        bp = self.base_prefix
        if bp and not (bp == "/usr" or bp.startswith("/usr/")) and not bp.startswith(self.path + "/"):
            out.append(bp)
        return out


def default_path() -> Path:
    """Where ``veracity sandbox setup`` builds by default.

    ``$XDG_CACHE_HOME/veracity/sandbox-runtime`` (``~/.cache/...`` when unset; XDG Base Directory
    Specification). Under root with no ``XDG_CACHE_HOME``: ``/var/cache/veracity/sandbox-runtime``,
    because under root the bwrap backend runs as host uid 65534, which cannot enter ``/root``
    (mode 0700) to read a runtime kept there.
    """
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "veracity" / "sandbox-runtime"
    if os.geteuid() == 0:
        return Path("/var/cache/veracity/sandbox-runtime")
    return Path.home() / ".cache" / "veracity" / "sandbox-runtime"


def load(path: str | os.PathLike[str]) -> Runtime:
    """The runtime at ``path``.

    Raises:
        SandboxRuntimeError: no ``bin/python`` there (not built, or not a virtualenv).
    """
    p = os.path.realpath(os.fspath(path))
    py = os.path.join(p, "bin", "python")
    if not os.path.exists(py):
        raise SandboxRuntimeError(f"no sandbox runtime at {p} (no bin/python); build one with `{SETUP_COMMAND} --path {p}`")
    base = None
    try:
        for line in Path(p, "pyvenv.cfg").read_text(encoding="utf-8").splitlines():
            k, _, v = line.partition("=")
            if k.strip() == "home" and v.strip():
                home = os.path.realpath(v.strip())
                base = os.path.dirname(home) if os.path.basename(home) == "bin" else home
    except OSError:
        pass
    try:
        manifest = json.loads(Path(p, MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    return Runtime(path=p, python=py, base_prefix=base, manifest=manifest)


def resolve(explicit: str | os.PathLike[str] | None = None, *, use_default: bool = True) -> Runtime | None:
    """The runtime to use: ``explicit``, else ``$VERACITY_SANDBOX_RUNTIME``, else the one at
    :func:`default_path` if it was built there (has a manifest), else ``None``.

    Raises:
        SandboxRuntimeError: ``explicit`` or the environment names a directory that holds no runtime
            (a configured runtime that is missing is an error, not a silent fallback).
    """
    if explicit:
        return load(explicit)
    env = os.environ.get(ENV_VAR)
    if env:
        return load(env)
    if use_default:
        d = default_path()
        if (d / MANIFEST).is_file() and (d / "bin" / "python").exists():
            return load(d)
    return None


# --- building ---------------------------------------------------------------------------------

def _default_base_python() -> str:
    """The interpreter a new runtime is based on: ``/usr/bin/python3`` when present (the bwrap
    backend binds ``/usr`` anyway, and under root the sandbox user cannot enter a home-directory
    Python such as pyenv's), else the interpreter running this code."""
    if os.access("/usr/bin/python3", os.X_OK):
        return "/usr/bin/python3"
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


_PROBE = r"""
import importlib.metadata as m, json, sys
print(json.dumps({"python": sys.version.split()[0], "implementation": sys.implementation.name,
  "packages": dict(sorted((d.metadata["Name"].lower(), d.version) for d in m.distributions() if d.metadata["Name"]))}))
"""


def _tree_size(path: Path) -> tuple[int, int]:
    """``(bytes, files)`` under ``path`` (symlinks not followed, apparent sizes)."""
    total = files = 0
    for root, _dirs, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(root, n)).st_size
                files += 1
            except OSError:
                pass
    return total, files


def _make_readable(path: Path) -> None:
    """``chmod -R a+rX``: under root the sandbox reads the tree as uid 65534, whatever the umask."""
    for root, dirs, names in os.walk(path):
        for n in dirs + names:
            f = os.path.join(root, n)
            if os.path.islink(f):
                continue
            mode = os.stat(f).st_mode
            add = 0o444 | (0o111 if (mode & 0o111 or os.path.isdir(f)) else 0)
            if mode & add != add:
                os.chmod(f, mode | add)
    os.chmod(path, os.stat(path).st_mode | 0o755)


def build(path: str | os.PathLike[str] | None = None, packages: list[str] | tuple[str, ...] | None = None, *,
          python: str | None = None, log: Callable[[str], None] = lambda s: None,
          pip_args: list[str] | None = None) -> Runtime:
    """Build a runtime at ``path`` (default :func:`default_path`) with ``packages`` (pip
    requirement specifiers; default :data:`DEFAULT_PACKAGES`) and return it.

    Steps: ``python -m venv --without-pip`` into a temporary sibling directory; ``pip --python
    TMP/bin/python install --only-binary=:all:`` with the pip of the interpreter running this
    code (or, without one, a venv with its own pip); bytecode compiled by pip (the sandbox
    cannot write ``__pycache__``); a manifest with the installed distributions' versions; files
    made world-readable; then the temporary directory replaces ``path`` (an earlier runtime
    there is removed only after the new one is complete). Needs network access to the package
    index pip is configured for; no root.

    Args:
        python: base interpreter (default :func:`_default_base_python`).
        log: called with one progress line per step.
        pip_args: extra arguments for ``pip install`` (e.g. ``["--index-url", URL]``).

    Raises:
        SandboxRuntimeError: venv or pip failed (the message carries pip's last lines).
    """
    dest = Path(os.path.abspath(os.fspath(path) if path else default_path()))
    pkgs = list(packages or DEFAULT_PACKAGES)
    base = python or _default_base_python()
    t0 = time.monotonic()
    created = [d for d in [dest.parent, *dest.parent.parents] if not d.exists()]
    dest.parent.mkdir(parents=True, exist_ok=True)
    for d in created:  # under root the sandbox user (65534) must be able to walk down to it
        os.chmod(d, 0o755)
    tmp = dest.parent / f".{dest.name}.building-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        have_pip = importlib.util.find_spec("pip") is not None
        log(f"creating a virtualenv with {base} in {tmp}")
        venv_cmd = [base, "-m", "venv"] + (["--without-pip"] if have_pip else []) + [str(tmp)]
        _run(venv_cmd, "python -m venv")
        py = str(tmp / "bin" / "python")
        pip = ([sys.executable, "-m", "pip", "--python", py] if have_pip else [py, "-m", "pip"])
        log(f"installing {' '.join(pkgs)} (binary wheels from the package index)")
        _run(pip + ["install", "--disable-pip-version-check", "--no-input", "--no-cache-dir",
                    "--only-binary=:all:", *(pip_args or []), *pkgs], "pip install")
        if not have_pip:  # the runtime needs no pip of its own
            _run([py, "-m", "pip", "uninstall", "-y", "-q", "pip"], "pip uninstall pip")
        info = json.loads(_run([py, "-I", "-c", _PROBE], "package listing"))
        _make_readable(tmp)
        size, files = _tree_size(tmp)
        manifest = {
            "requested": pkgs,
            "python": info["python"],
            "base_python": os.path.realpath(base),
            "packages": info["packages"],
            "built": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "build_s": round(time.monotonic() - t0, 1),
            "size_bytes": size,
            "files": files,
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        os.chmod(tmp / MANIFEST, 0o644)
        if dest.exists():
            old = dest.parent / f".{dest.name}.old-{os.getpid()}"
            os.rename(dest, old)
            os.rename(tmp, dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return load(dest)


def _run(cmd: list[str], what: str) -> str:
    """Run ``cmd``; its stdout, or :class:`SandboxRuntimeError` with the last lines of its output."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise SandboxRuntimeError(f"{what} failed: {exc}") from None
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise SandboxRuntimeError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return proc.stdout


# --- telling users how to get a package ---------------------------------------------------------

#: Import name -> PyPI distribution name where they differ (the common cases in model answers).
PYPI_NAMES = {"sklearn": "scikit-learn", "cv2": "opencv-python-headless", "PIL": "pillow", "yaml": "pyyaml",
              "bs4": "beautifulsoup4", "dateutil": "python-dateutil", "attr": "attrs", "skimage": "scikit-image",
              "Bio": "biopython", "dotenv": "python-dotenv", "jwt": "pyjwt", "serial": "pyserial"}
#: What the default runtime installs, by import name (the default packages and their dependencies).
DEFAULT_MODULES = frozenset({"numpy", "pandas", "sympy", "mpmath", "dateutil", "pytz", "tzdata", "six"})


def provide_hint(module: str | None) -> str:
    """``"; `veracity sandbox setup ...` provides it"`` for a missing ``module`` (dotted import
    name), naming the PyPI package to add; ``""`` when ``module`` is not a plain name."""
    top = (module or "").split(".")[0]
    if not top.isidentifier():
        return ""
    if top in DEFAULT_MODULES:
        return f"; `{SETUP_COMMAND}` provides it (a bwrap sandbox runtime with numpy, pandas, sympy)"
    dist = PYPI_NAMES.get(top, top)
    return (f"; `{SETUP_COMMAND} --packages numpy,pandas,sympy,{dist}` provides it "
            f"(PyPI package {dist}, a bwrap sandbox runtime)")


# --- what a sandbox carries -------------------------------------------------------------------

#: Prints the top-level modules of SCIENTIFIC_STACK that the interpreter cannot find (a cheap
#: ``find_spec``, no import), as JSON.
FIND_STACK = ("import importlib.util, json\n"
              f"print(json.dumps([m for m in {list(SCIENTIFIC_STACK)!r} if importlib.util.find_spec(m) is None]))\n")

#: Imports the stack, does a small DataFrame operation, lists the distributions: what
#: ``veracity sandbox info`` runs under the limits in force.
INFO_PROGRAM = r"""
import importlib.metadata as m, json, sys, time
t0 = time.perf_counter()
out = {"python": sys.executable, "version": sys.version.split()[0]}
try:
    import numpy as np, pandas as pd, sympy as sp
    df = pd.DataFrame({"age": [10, 130, 40]})
    assert int(df[(df["age"] > 0) & (df["age"] < 120)]["age"].sum()) == 50
    assert str(sp.factor(sp.Symbol("x") ** 2 - 1)) == "(x - 1)*(x + 1)"
    assert float(np.linalg.det(np.eye(2) * 2)) == 4.0
    out["stack"] = "ok"
except BaseException as e:
    out["stack"] = f"{type(e).__name__}: {e}"[:300]
out["stack_s"] = round(time.perf_counter() - t0, 2)
try:
    import resource
    out["maxrss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
except Exception:
    pass
out["packages"] = dict(sorted((d.metadata["Name"].lower(), d.version) for d in m.distributions() if d.metadata["Name"]))
print(json.dumps(out))
"""


def missing_stack(box: Any) -> list[str] | None:
    """Modules of :data:`SCIENTIFIC_STACK` the sandbox ``box`` cannot import (``[]`` = all
    there), or ``None`` when the box cannot run code or the probe failed. One short run."""
    from verifiers.sandbox import Limits

    if box.unavailable_reason() is not None:
        return None
    try:
        res = box.run(FIND_STACK, limits=Limits(timeout_s=30, cpu_s=10))
        return list(json.loads(res.stdout.strip().splitlines()[-1])) if res.ok else None
    except Exception:  # noqa: BLE001 - a probe that cannot tell says so with None
        return None


def info(backend: str = "auto", limits: Any = None) -> dict[str, Any]:
    """What the code verifier's sandbox is, for ``veracity sandbox info``: the backend ``get()``
    picks for ``backend`` and whether it runs; the interpreter (bwrap: its path, and the runtime
    or rootfs it comes from; docker: ``python3`` in the image); ``seccomp`` and ``memory`` as in
    every check's evidence (:meth:`Sandbox.isolation`); ``limits`` (a :class:`Limits` as a dict);
    and, from one run of :data:`INFO_PROGRAM` *under those limits*: ``python_version``,
    ``packages`` (distribution -> version), ``stack`` (``"ok"`` when numpy, pandas and sympy
    import and work, else the error), ``stack_s`` and ``maxrss_mb``. ``hint`` names the setup
    command when the stack is missing. Never raises for an unusable backend (``available``
    False, ``reason``); ``ValueError`` for an unknown backend name.
    """
    from dataclasses import asdict

    from verifiers.sandbox import Limits, get

    lim = limits or Limits()
    box = get(backend, lim)
    try:
        reason = box.unavailable_reason()
        d: dict[str, Any] = {"requested": backend, "backend": box.name, "available": reason is None,
                             "reason": reason}
        d.update(box.isolation())
        if box.name == "bwrap":
            d["runtime"] = box.runtime.path if box.runtime else None
            d["rootfs"] = box.rootfs
        elif box.name == "docker":
            d["image"] = box.image
            d["interpreter"] = f"python3 in image {box.image}"
        d["limits"] = asdict(lim)
        if reason is None:
            res = box.run(INFO_PROGRAM, limits=lim)
            try:
                probe = json.loads(res.stdout.strip().splitlines()[-1])
                d.update(python_version=probe.get("version"), stack=probe.get("stack"),
                         stack_s=probe.get("stack_s"), maxrss_mb=probe.get("maxrss_mb"),
                         packages=probe.get("packages") or {})
            except (ValueError, IndexError, AttributeError):
                d["stack"] = (f"the probe did not finish under these limits (killed_by={res.killed_by}, "
                              f"exit code {res.exit_code}): {res.stderr.strip()[-200:]}")
        if d.get("stack") != "ok":
            d["hint"] = (f"`{SETUP_COMMAND}` builds a bwrap sandbox runtime with {', '.join(SCIENTIFIC_STACK)} "
                         f"(no root, no registry); code that imports them is checked as unknown until then")
        return d
    finally:
        box.close()


def startup_note(backend: str = "auto", limits: Any = None) -> tuple[str, dict[str, Any]] | None:
    """The gateway's one start-up line about its code sandbox: ``(message, fields)`` when no
    sandbox with :data:`SCIENTIFIC_STACK` is available (none runs at all, or the one that runs
    lacks some of the stack), ``None`` when the stack is there. One cheap probe run
    (``find_spec``, no import); builds nothing (a first start stays fast)."""
    from verifiers.sandbox import get

    box = get(backend, limits)
    try:
        reason = box.unavailable_reason()
        if reason is not None:
            return (f"code sandbox: none can run here ({reason}); code is checked without running it, "
                    f"execution checks are unknown", {"sandbox": box.name, "reason": reason})
        missing = missing_stack(box)
        if missing:
            interp = box.isolation().get("interpreter") or f"python3 in {getattr(box, 'image', box.name)}"
            return (f"code sandbox: {box.name} ({interp}) lacks {', '.join(missing)}: code that imports "
                    f"{'it' if len(missing) == 1 else 'them'} is checked as unknown; `{SETUP_COMMAND}` builds a "
                    f"runtime with {', '.join(SCIENTIFIC_STACK)} (not built automatically)",
                    {"sandbox": box.name, "interpreter": interp, "missing": missing})
        return None
    finally:
        box.close()


def log_startup_note(log: Any, sandbox: Callable[[], tuple[str, Mapping[str, Any]]]) -> None:
    """:func:`startup_note` for the sandbox ``sandbox()`` names (``(backend, limits)``, e.g. the
    ``default`` policy's; a callable so that reading it happens in this thread too), logged once
    as a warning on ``log`` (a structlog logger). Meant for a daemon thread; never raises.
    (``verifiers`` never imports ``proxy``: the caller reads its policy, docs/design.md "Folders".)"""
    try:
        from verifiers.sandbox import Limits

        backend, limits = sandbox()
        note = startup_note(backend, Limits(**dict(limits)))
        if note is not None:
            log.warning(note[0], **note[1])
    except Exception as exc:  # noqa: BLE001 - a start-up hint must never break start-up
        log.warning(f"code sandbox: could not check which packages it has: {type(exc).__name__}: {exc}")
