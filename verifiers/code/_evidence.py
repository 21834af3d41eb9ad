"""What a code check says and points at: where in the answer (block and line), bounded output,
a traceback over the answer's own lines, what the sandbox recorded of the run, and whether an
exception the answer's code raised is the code's fault (``fail``) or the environment's
(``unknown``: files, network, input, credentials, a package the sandbox lacks; docs/code.md).
"""

from __future__ import annotations

import difflib
import re
import signal
import sys

from verifiers.code._extract import Block
from verifiers.code._state import _Plan
from verifiers.sandbox import Result
from verifiers.sandbox.runtime import provide_hint


VERIFIER = "code"
STD_BOUND = 2000  # characters of stdout/stderr kept in evidence

# Exceptions that mean "the environment lacks something", not "the code is wrong".
ENV_EXCEPTIONS = {
    "FileNotFoundError", "PermissionError", "IsADirectoryError", "NotADirectoryError", "EOFError",
    "ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "ConnectionAbortedError",
    "TimeoutError", "gaierror", "herror", "URLError", "HTTPError", "SSLError", "OSError",
    "BlockingIOError", "BrokenPipeError", "InterruptedError", "ProcessLookupError",
    "ChildProcessError", "KeyboardInterrupt", "MemoryError", "RecursionError", "NoSuchProcess",
    "DatabaseError", "OperationalError", "InterfaceError", "ProgrammingError", "UnsupportedOperation",
    "TclError", "ReadTimeout", "ConnectTimeout", "MaxRetryError", "NewConnectionError",
}

# Third-party names that sit close to standard-library names; never "misspellings".
_KNOWN_PYPI = {"ujson", "orjson", "simplejson", "attr", "attrs", "regex", "toml", "tomli", "pytz", "dateutil",
               "typing_extensions", "dataclasses_json", "mock", "six", "enum34", "pathlib2", "futures", "sets",
               "asyncio_mqtt", "aiofiles", "trio", "anyio", "scipy", "sklearn", "torch", "tensorflow", "keras",
               "requests", "yaml", "bs4", "lxml", "PIL", "cv2", "tqdm", "rich", "click", "typer", "pydantic",
               "plotly", "seaborn", "matplotlib", "statsmodels", "networkx", "numba", "polars", "pyarrow",
               "joblib", "xgboost", "lightgbm", "transformers", "openai", "langchain", "httpx", "flask", "django"}

_SANDBOX_MODULES = {"numpy", "pandas", "sympy", "mpmath", "dateutil", "pytz"}


def _first_line(text: str, n: int = 80) -> str:
    line = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    return line if len(line) <= n else line[: n - 1] + "…"


def _bound(s: str | None, n: int = STD_BOUND) -> str:
    s = s or ""
    return s if len(s) <= n else s[:n] + f"…[{len(s) - n} more chars]"


def _where(b: Block, block_line: int) -> str:
    """``"block B, line L"``: the block's 1-based index among the answer's code blocks and the
    line inside that block (what a reader counts in the code shown), not the answer's line."""
    return f"block {b.index + 1}, line {block_line}"


def _traceback(p: _Plan, err: dict) -> list[str]:
    out = []
    by_index = {b.index: b for b in p.blocks}
    for fname, lineno, func in err.get("frames", []):
        m = re.match(r"<answer block (\d+)>", fname)
        if m and int(m.group(1)) in by_index:
            b = by_index[int(m.group(1))]
            lines = b.code.split("\n")
            text = lines[lineno - 1].strip() if 0 < lineno <= len(lines) else ""
            out.append(f"{_where(b, lineno)}, in {func}: {text}")
        else:
            out.append(f"{fname}, line {lineno}, in {func}")
    out.append(f"{err.get('type')}: {err.get('message')}")
    return out


def _misspelled_module(name: str | None) -> str | None:
    """The stdlib / sandbox module a missing module name is a near-miss of (``numpyy`` ->
    ``numpy``, ``colections`` -> ``collections``), else None."""
    if not name:
        return None
    top = name.split(".")[0]
    if top in _KNOWN_PYPI:
        return None
    pool = sorted(set(sys.stdlib_module_names) | _SANDBOX_MODULES)
    near = difflib.get_close_matches(top, pool, n=1, cutoff=0.85)
    return near[0] if near and near[0] != top else None


def _classify_error(p: _Plan, err: dict) -> tuple[str, str]:
    """``(outcome, reason)`` for an exception raised by the answer's code in the sandbox."""
    t, msg = err.get("type", ""), err.get("message", "")
    if t == "SandboxDenied":  # the harness's audit hook refused it (see _harness): not the code's bug
        return "unknown", f"the sandbox refused something the code does ({msg.rsplit(': ', 1)[-1]})"
    if t in ("ModuleNotFoundError", "ImportError"):
        mod = err.get("module")
        near = _misspelled_module(mod)
        if t == "ModuleNotFoundError" and near:
            return "fail", f"no module named '{mod}' (did you mean '{near}'?)"
        if t == "ImportError" and mod and (mod.split(".")[0] in sys.stdlib_module_names or mod.split(".")[0] in _SANDBOX_MODULES):
            return "fail", f"ImportError: {msg}"
        return "unknown", f"needs a package the sandbox does not have ({mod or msg})" + provide_hint(mod)
    if t in ENV_EXCEPTIONS or (t == "KeyError" and p.env_dependent):
        return "unknown", f"needs something the sandbox does not provide (files, network, input, credentials): {t}"
    if t == "NameError":
        m = re.search(r"name '(\w+)' is not defined", msg)
        if m and m.group(1) in p.context_names:
            return "unknown", f"uses '{m.group(1)}', which the answer does not define (user context)"
    if p.env_dependent:
        return "unknown", f"{t} in code that depends on files/network/input; not conclusive"
    return "fail", f"{t}: {msg}"


def _sandbox_evidence(res: Result | None) -> dict:
    if res is None:
        return {}
    ev = {"sandbox": res.backend, "duration_ms": round(res.duration_s * 1000, 1), "killed_by": res.killed_by}
    # how strongly the run was isolated: "no seccomp filter (...)" when unfiltered (Sandbox.isolation())
    if "seccomp" in res.extra:
        ev["seccomp"] = res.extra["seccomp"]
    if "memory" in res.extra:
        ev["memory_limit"] = res.extra["memory"]
    if "interpreter" in res.extra:  # bwrap: which Python (and runtime) ran it (`veracity sandbox info`)
        ev["interpreter"] = res.extra["interpreter"]
    return ev


def _ended_early(code: int | None) -> str:
    """Why a run stopped without finishing, from its exit code (128+N / -N = signal N)."""
    sig = code - 128 if code is not None and code > 128 else (-code if code is not None and code < 0 else None)
    if sig is None:
        return f"the sandbox run ended early (exit code {code})"
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    if sig == signal.SIGSYS:
        return f"the program made a system call the sandbox forbids (killed by {name}, exit code {code})"
    return f"the program was killed by {name} before finishing (exit code {code}; not a sandbox limit)"
