"""Code verifier: find the code in an answer and check it in tiers, running it only in a sandbox.

    from verifiers import code, sandbox
    box = sandbox.get("auto")
    checks = code.check(answer_markdown, question, sandbox=box)          # blocking
    checks = await code.acheck(answer_markdown, question, sandbox=box)   # asyncio (gateway)

``check`` is synchronous and thread-safe (call it from a worker thread or a script);
``acheck`` is the same for an event loop: the sandbox runs in the sandbox's own thread pool,
so the loop never blocks. Both return ``list[Check]`` with ``verifier == "code"``.

Claims and tiers (docs/code.md):

- every fenced block: ```python / ```py / ``>>>`` sessions / unlabeled blocks that parse as
  Python (and are not just an output like ``6``). Blocks in other languages give one
  ``unknown`` check ("not checked").
- tier 1, syntax: ``ast.parse``; a SyntaxError is ``fail`` with line and column (template
  placeholders like ``<YOUR_KEY>`` and obvious fragments are ``unknown``).
- tier 2, static: pyflakes; definite errors only (undefined names that are near-misses of
  real ones or missing imports of conventional aliases, use-before-assignment, broken
  ``%``/``.format`` calls). Names bound in any block of the answer, by star imports, or
  ambient in notebooks never count; other unknown names (``df``) make the block ``unknown``.
- tier 3, in the sandbox: the blocks run in order in one namespace (smoke run, which also
  runs the answer's own ``assert``s). A block's clean run is a ``pass`` only when something
  about its behaviour was compared: its own top-level ``assert``s, an example or stated output
  of its own, a question example calling a function it defines, the question's stdin/stdout
  pairs. Code that merely ran, with nothing compared, is ``unknown`` ("ran without errors;
  nothing about its behaviour was compared"): running is not being right. Then the examples: doctests in the answer, stated
  outputs (``# Output: 6``, an "Output:" block after the code, "this prints `6`"), and the
  question's examples (doctest lines, ``f(x) -> y`` and cousins, "for input X the output is
  Y") against functions the answer defines; for a program that reads standard input, the
  question's input/output pairs are fed to it (one sandbox run each). A block the answer itself
  calls wrong ("Your code fails because...", "This raises...") may fail without a ``fail``
  check. Code that needs files, network, ``input()``,
  credentials or an uninstalled package is ``unknown``, never ``fail``; so are timeouts and
  outputs of code that uses randomness or the clock.

What a tier-3 ``pass`` rests on (DESIGN.md: a verdict rests on what the checked code cannot
write): comparisons happen here, in the gateway, on the
bytes the sandbox captured; the harness in the sandbox only frames the run, on a channel the
answer's code cannot learn to write; a run where the code tried to reach the harness, ended
itself early or did not end normally can show failures but no pass (``evidence["untrusted"]``
says why). The full design is the docstring of :mod:`verifiers.code._harness`.

Each check's ``evidence`` carries ``tier``, ``block`` (1-based), ``line`` (the line in the whole
answer), ``block_line`` (the line inside the block, 1-based, where a finding has one; notes say
"block B, line L" with that line: what a reader counts in the code they see),
``exception`` (``type``, ``message``), ``traceback`` (trimmed to the answer's frames),
bounded ``stdout``/``stderr``, ``inputs`` (the example's call), ``sandbox`` (backend), and
``reason`` for ``unknown``.
"""

from __future__ import annotations

import ast
import asyncio
import difflib
import re
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from verifiers.code._extract import (
    Block,
    Example,
    classify,
    comment_outputs,
    docstring_examples,
    fenced_blocks,
    parse_python,
    presented_as_failing,
    prose_outputs,
    question_examples,
    session_examples,
    stdin_examples,
)
from verifiers.code._harness import build, legacy_records, observe
from verifiers.code._static import (
    defined_names,
    has_import,
    has_star_import,
    self_judging,
    static_findings,
    syntax_finding,
)
from verifiers._types import Check
from verifiers.sandbox import Limits, Result, Sandbox, SandboxUnavailable
from verifiers.sandbox import get as get_sandbox
from verifiers.sandbox._common import cpu_signal
from verifiers.sandbox.runtime import provide_hint

__all__ = ["check", "acheck", "DEFAULT_LIMITS"]

VERIFIER = "code"
#: sandbox limits of a check that names none (:class:`verifiers.sandbox.Limits` defaults)
DEFAULT_LIMITS = Limits()
STD_BOUND = 2000  # characters of stdout/stderr kept in evidence
#: Fenced blocks checked per answer; later ones get one ``unknown`` check. Tiers 1-2 cost
#: ~1.5 ms per block (pyflakes builds its builtins scope each time), so an answer of 10,000
#: fences took 15 s; real answers have a handful.
MAX_BLOCKS = 100

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
# Code that touches the outside world or is nondeterministic: its failures/outputs are unknown.
_ENV_USE = re.compile(
    r"\b(open|input|urlopen|getpass|read_csv|read_excel|read_json|read_parquet|read_sql|read_table|loadtxt|genfromtxt|"
    r"load_workbook|imread|connect|getenv|environ|argv|argparse|socket|requests|httpx|aiohttp|urllib|subprocess|"
    r"boto3|openai|sqlite3|psycopg2|pymysql|sqlalchemy|smtplib|ftplib|paramiko|selenium|webdriver|Path|listdir|"
    r"walk|glob|scandir|os\.system|Popen|tkinter|pygame|cv2|serial|flask|django|fastapi|uvicorn|asyncio\.run|"
    r"threading|multiprocessing|mainloop|serve_forever|run_forever)\b"
)
_READS_STDIN = re.compile(r"\binput\s*\(|\bsys\.stdin\b|\bfileinput\b|\bopen\(\s*0\s*[,)]")
_NONDETERMINISTIC = re.compile(r"\b(random|randint|randn|rand|shuffle|choice|sample|uuid|secrets|time|datetime|date\.today|now|perf_counter|id|hash|urandom|getpid|os\.times)\b")
# Third-party names that sit close to standard-library names; never "misspellings".
_KNOWN_PYPI = {"ujson", "orjson", "simplejson", "attr", "attrs", "regex", "toml", "tomli", "pytz", "dateutil",
               "typing_extensions", "dataclasses_json", "mock", "six", "enum34", "pathlib2", "futures", "sets",
               "asyncio_mqtt", "aiofiles", "trio", "anyio", "scipy", "sklearn", "torch", "tensorflow", "keras",
               "requests", "yaml", "bs4", "lxml", "PIL", "cv2", "tqdm", "rich", "click", "typer", "pydantic",
               "plotly", "seaborn", "matplotlib", "statsmodels", "networkx", "numba", "polars", "pyarrow",
               "joblib", "xgboost", "lightgbm", "transformers", "openai", "langchain", "httpx", "flask", "django"}
_SANDBOX_MODULES = {"numpy", "pandas", "sympy", "mpmath", "dateutil", "pytz"}


@dataclass
class _Plan:
    """What to check and how to read the sandbox's answer."""

    answer: str
    blocks: list[Block]
    checks: list[Check] = field(default_factory=list)  # final tier-1/2 and non-python checks
    runnable: list[Block] = field(default_factory=list)
    block_checks: dict[int, Check] = field(default_factory=dict)  # block index -> pending check
    examples: list[Example] = field(default_factory=list)
    env_dependent: bool = False
    env_beyond_stdin: bool = False  # needs more than the stdin a question example supplies
    nondeterministic: bool = False
    context_names: set[str] = field(default_factory=set)
    may_fail: set[int] = field(default_factory=set)  # blocks the answer itself calls wrong/raising
    program: str | None = None
    nonce: str = ""
    # programs that read stdin, run once per (stdin, expected stdout) pair from the question
    stdin_cases: list[tuple[str, str, str]] = field(default_factory=list)
    stdin_program: str | None = None
    stdin_nonce: str = ""


def _first_line(text: str, n: int = 80) -> str:
    line = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    return line if len(line) <= n else line[: n - 1] + "…"


def _block_check(b: Block, outcome: str, note: str, **evidence: Any) -> Check:
    ev = {"tier": evidence.pop("tier", 0), "block": b.index + 1, "language": b.lang or "unlabeled",
          "line": b.line, **evidence}
    conf = 0.9 if outcome == "fail" else (0.9 if outcome == "pass" else 0.0)
    return Check(verifier=VERIFIER, claim=f"block {b.index + 1}: {_first_line(b.code or b.raw)}",
                 outcome=outcome, evidence=ev, confidence=conf, span=b.span, note=note)  # type: ignore[arg-type]


def plan(answer: str, question: str | None = None, limits: Limits = DEFAULT_LIMITS) -> _Plan:
    """Extract claims, run tiers 1-2, and build the sandbox program for tier 3 (pure; no
    execution). Exposed for tests and benchmarks."""
    blocks = fenced_blocks(answer or "")
    rest, blocks = blocks[MAX_BLOCKS:], blocks[:MAX_BLOCKS]
    classify(blocks)
    p = _Plan(answer=answer or "", blocks=blocks)
    if rest:
        p.checks.append(Check(verifier=VERIFIER, claim=f"blocks {MAX_BLOCKS + 1}-{MAX_BLOCKS + len(rest)}",
                              outcome="unknown", confidence=0.0, span=(rest[0].span[0], rest[-1].span[1]),
                              evidence={"reason": "too many code blocks", "unchecked_blocks": len(rest), "kind": "truncated",
                                        "limit": "MAX_BLOCKS", "limit_value": MAX_BLOCKS, "checked": MAX_BLOCKS,
                                        "total": len(blocks) + len(rest), "unit": "code blocks"},
                              note=f"not checked: only the first {MAX_BLOCKS} code blocks of an answer are checked"))
    py = [b for b in blocks if b.kind in ("python", "pycon")]
    trees = [b.tree for b in py if b.tree is not None]
    names: set[str] = set()
    star = imports = False
    for t in trees:
        names |= defined_names(t)
        star = star or has_star_import(t)
        imports = imports or has_import(t)
    # names bound in >>> sessions count too
    for b in py:
        if b.kind == "pycon":
            for ex in session_examples(b):
                try:
                    names |= defined_names(parse_python(ex.source))
                except SyntaxError:
                    pass

    blocked = False  # a block that cannot run stops the later ones (they may depend on it)
    for b in blocks:
        if b.kind == "other":
            p.checks.append(_block_check(b, "unknown", f"{b.lang or 'unlabeled'} code is not checked",
                                         reason="language not supported"))
            continue
        if b.kind == "output":
            continue
        if b.kind == "pycon":
            exs = session_examples(b)
            if exs and not blocked:
                p.runnable.append(b)
                p.examples.extend(exs)
            continue
        if b.syntax_error is not None:
            f = syntax_finding(b.code, b.syntax_error)
            if f.outcome == "fail" and presented_as_failing(b):
                f.outcome, f.kind = "unknown", "presented-as-wrong"
            line = b.line + (f.line or 1) - 1
            p.checks.append(_block_check(b, f.outcome, f"{f.message} at {_where(b, f.line or 1)}, column {f.col}",
                                         tier=1,
                                         exception={"type": type(b.syntax_error).__name__, "message": b.syntax_error.msg},
                                         line=line, block_line=f.line or 1, column=f.col,
                                         reason=f.kind if f.outcome == "unknown" else None))
            blocked = True
            continue
        findings = static_findings(b.tree, answer_names=names, answer_star=star, answer_imports=imports)  # type: ignore[arg-type]
        fails = [f for f in findings if f.outcome == "fail"]
        if fails and presented_as_failing(b):
            p.checks.append(_block_check(b, "unknown", f"{fails[0].message} — the answer presents this code as wrong",
                                         tier=2, reason="presented as failing", findings=[vars(x) for x in findings]))
            continue
        if fails:
            f = fails[0]
            line = b.line + (f.line or 1) - 1
            p.checks.append(_block_check(b, "fail", f"{f.message} at {_where(b, f.line or 1)}", tier=2,
                                         exception={"type": "NameError" if "name" in f.kind or "import" in f.kind else f.kind,
                                                    "message": f.message},
                                         line=line, block_line=f.line or 1, column=f.col,
                                         findings=[vars(x) for x in findings]))
            blocked = True
            continue
        p.context_names |= {f.name for f in findings if f.kind == "context-name" and f.name}
        if blocked:
            p.checks.append(_block_check(b, "unknown", "not run: an earlier block failed", tier=2,
                                         reason="earlier block failed"))
            continue
        p.runnable.append(b)
        if presented_as_failing(b):
            p.may_fail.add(b.index)
        p.block_checks[b.index] = _block_check(b, "unknown", "", tier=3, findings=[vars(x) for x in findings])
        p.examples.extend(docstring_examples(b))
        p.examples.extend(comment_outputs(b))
        p.examples.extend(prose_outputs(b))

    funcs = {n.name for t in trees for n in t.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    if question:
        have = {(re.sub(r"\s+", "", e.source), re.sub(r"\s+", "", e.want)) for e in p.examples}
        for e in question_examples(question, funcs):
            if e.key not in have:
                p.examples.append(e)
    src = "\n".join(b.code for b in p.runnable)
    p.env_dependent = bool(_ENV_USE.search(src))
    p.env_beyond_stdin = bool(_ENV_USE.search(_READS_STDIN.sub(" ", src)))
    p.nondeterministic = bool(_NONDETERMINISTIC.search(src))
    if not p.runnable:
        return p

    ids = {id(e): i for i, e in enumerate(p.examples)}
    spec_blocks, spec_examples = [], []
    for b in p.runnable:
        if b.kind == "pycon":
            spec_blocks.append({"index": b.index, "code": "", "watch": [], "watch_want": {}})
            continue
        watch = {str(e.stmt_line): e.want for e in p.examples if e.mode == "stmt" and e.block == b.index}
        spec_blocks.append({"index": b.index, "code": b.code, "watch": [int(k) for k in watch], "watch_want": watch,
                            "may_fail": b.index in p.may_fail})
    for e in p.examples:
        if e.mode == "value":
            spec_examples.append({"id": ids[id(e)], "source": e.source, "want": e.want, "mode": e.mode, "block": e.block})
    step = max(1.0, min(5.0, limits.timeout_s / 2))
    p.program, p.nonce = build(spec_blocks, spec_examples, step_timeout=step)
    if question and _READS_STDIN.search(src):
        p.stdin_cases = stdin_examples(question)
        if p.stdin_cases:
            bare = [{**b, "watch": [], "watch_want": {}} for b in spec_blocks]
            p.stdin_program, p.stdin_nonce = build(bare, [], step_timeout=step)
    return p


# --- interpretation ---------------------------------------------------------------------------

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


def interpret(p: _Plan, res: Result | None, unavailable: str | None = None) -> list[Check]:
    """Turn the sandbox's records into checks (tier 3), after the tier-1/2 checks."""
    checks = list(p.checks)
    if not p.runnable:
        return sorted(checks, key=lambda c: c.span or (0, 0))
    obs = observe(res.stdout, p.nonce) if res is not None else None
    recs = legacy_records(obs, _stmt_wants(p), _example_wants(p)) if obs is not None else []
    base = _sandbox_evidence(res)
    stderr = _bound(res.stderr) if res is not None else ""
    if res is None:
        why = f"not executed: {unavailable}"
    elif res.killed_by != "none":
        why = {"timeout": "did not finish within the sandbox's wall-clock limit (timeout); may be long-running",
               "cpu": f"used up the sandbox's CPU-time limit (killed by {cpu_signal(res.exit_code) or 'the CPU rlimit'}, "
                      f"exit code {res.exit_code}); may be long-running",
               "memory": "ran out of sandbox memory", "output": "printed more than the sandbox keeps",
               "cancelled": "the run was cancelled (the request ended first)"}[res.killed_by]
    elif obs is not None and not obs.done:
        why = _ended_early(res.exit_code)
    else:
        why = "not reached"
    blocks = {r["index"]: r for r in recs if r.get("kind") == "block"}
    stmts = {(r["index"], r["line"]): r for r in recs if r.get("kind") == "stmt"}
    exrecs = {r["id"]: r for r in recs if r.get("kind") == "example"}
    by_index = {b.index: b for b in p.blocks}

    for b in p.runnable:
        if b.kind == "pycon":
            continue
        c = p.block_checks[b.index]
        r = blocks.get(b.index)
        c.evidence.update(base)
        if r is None:
            c.outcome, c.note, c.confidence = "unknown", why, 0.0
            c.evidence["reason"] = why
            if stderr:
                c.evidence["stderr"] = stderr
        elif r["status"] == "ok":
            c.evidence["stdout"] = _bound(r.get("stdout"))
            compared = _behaviour_compared(p, b)
            untested = _untested(p, b) if compared else []
            if compared and untested:
                # the comparison covers part of the block: the rest ran, nothing checked what it does
                c.outcome, c.confidence = "unknown", 0.0
                c.note = f"ran without errors; {', '.join(untested[:5])} not compared ({compared} for the rest)"
                c.evidence.update(compared=compared, untested=untested, reason="part compared")
            elif compared:
                c.outcome, c.note, c.confidence = "pass", f"ran without errors in the sandbox ({compared})", 0.8
                c.evidence["compared"] = compared
            else:
                # a run is not a behaviour check: that it ran says nothing about what it does
                c.outcome, c.note, c.confidence = "unknown", RAN_ONLY, 0.0
                c.evidence["reason"] = "nothing compared"
        elif r["status"] == "exit":
            c.outcome, c.note, c.confidence = "unknown", "called sys.exit before its end", 0.0
            c.evidence.update(reason="exited early", stdout=_bound(r.get("stdout")))
        elif r["status"] == "timeout":
            c.outcome, c.note, c.confidence = "unknown", "a statement did not finish in time (long-running or waiting)", 0.0
            c.evidence.update(reason="timeout", line=b.line + r.get("line", 1) - 1, block_line=r.get("line", 1),
                              stdout=_bound(r.get("stdout")))
        else:
            err = r.get("error", {})
            outcome, reason = _classify_error(p, err)
            if outcome == "fail" and b.index in p.may_fail:
                outcome, reason = "unknown", f"raises {err.get('type')}, as the answer says this code is wrong or fails"
            c.outcome, c.confidence = outcome, (0.9 if outcome == "fail" else 0.0)  # type: ignore[assignment]
            at, block_line = b, r.get("line", 1)
            frames = [f for f in err.get("frames", []) if f[0].startswith("<answer")]
            if frames:
                bi = int(re.match(r"<answer block (\d+)>", frames[-1][0]).group(1))  # type: ignore[union-attr]
                at, block_line = by_index[bi], frames[-1][1]
            line = at.line + block_line - 1
            if outcome == "fail" and not err.get("message"):
                src = _traceback(p, err)
                reason = f"{err.get('type')} at {src[-2].split(': ', 1)[-1] if len(src) > 1 else 'top level'}"
            c.note = f"{reason} ({_where(at, block_line)})" if outcome == "fail" else reason
            c.evidence.update(exception={"type": err.get("type"), "message": err.get("message")},
                              traceback=_traceback(p, err), line=line, block_line=block_line,
                              error_block=at.index + 1, stdout=_bound(r.get("stdout")),
                              stderr=stderr)
            if outcome != "fail":
                c.evidence["reason"] = reason
        checks.append(c)

    for i, e in enumerate(p.examples):
        checks.append(_example_check(p, e, i, exrecs, stmts, blocks, why, base))
    distrust = _distrust(p, res, obs)
    if distrust is not None:
        _void_passes(checks[len(p.checks):], distrust)
    return sorted(checks, key=lambda c: (c.span or (len(p.answer), 0))[0])


#: What the harness's audit hook cannot see: numpy's doors to raw memory (an array over any
#: address). Code naming them gets no pass from the sandbox run (see _harness's docstring).
_RAW_MEMORY = re.compile(r"\b(__array_interface__|__array_struct__|as_strided|ctypeslib)\b")
#: Bidirectional embeddings, overrides and isolates (not the LRM/RLM marks): in a string or a
#: comment they reorder what the reader sees of the code, so the run checks another program than
#: the one shown (Boucher & Anderson, "Trojan Source", CVE-2021-42574). Such code gets no pass.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def _distrust(p: _Plan, res: Result | None, obs: Any) -> str | None:
    """Why no tier-3 pass of this run may stand (DESIGN.md: a verdict rests on what the checked
    code cannot write), or None: the harness's framing
    is missing/forged, the code tried to reach the checker, the run ended early (``sys.exit``,
    ``os._exit``, a signal, a limit), the code names what the harness cannot watch, or it
    writes how its own results are judged (:func:`~verifiers.code._static.self_judging`)."""
    if res is None or obs is None:
        return None
    src = "\n".join(b.code for b in p.runnable)
    m = _RAW_MEMORY.search(src)
    if m:
        return f"the code reaches raw memory ({m.group(1)}), which the sandbox harness cannot watch"
    m = _BIDI.search(src)
    if m:
        return (f"the code holds a bidirectional control character (U+{ord(m.group(0)):04X}): it displays "
                "otherwise than it runs (Trojan Source, CVE-2021-42574)")
    why = obs.untrusted()
    if why is not None:
        return why
    for b in p.runnable:
        why = self_judging(b.tree)
        if why is not None:
            return why
    exits = [r for r in legacy_records(obs, {}, {}) if r.get("status") == "exit"]
    if exits:
        return "the program ended itself (sys.exit) before all of its code and examples ran"
    if res.killed_by != "none" or res.exit_code != 0:
        return f"the run did not end normally (exit code {res.exit_code}, {res.killed_by})"
    return None


def _void_passes(checks: list[Check], why: str) -> None:
    """Turn every ``pass`` among ``checks`` into ``unknown`` saying why (failures stay)."""
    for c in checks:
        if c.outcome == "pass":
            c.outcome, c.confidence = "unknown", 0.0
            c.note = f"not taken as verified: {why}"
            c.evidence["reason"] = "untrusted run"
            c.evidence["untrusted"] = why


#: The note of a block that ran cleanly with nothing about its behaviour compared.
RAN_ONLY = "ran without errors; nothing about its behaviour was compared"


def _vacuous(test: ast.expr) -> bool:
    """True when an ``assert``'s test compares nothing about what the code computes, so that it
    holds for (nearly) any implementation: no name at all (``assert True``, ``assert 2 + 2 ==
    4``), an ``or`` with an operand that holds by itself (``... == 6 or True``), a comparison of
    an expression with itself (``f(x) == f(x)``), a check of presence or type only (``x is not
    None``, ``isinstance(x, int)``, ``callable(f)``), a tuple or list (``assert (x == 6, "msg")``
    is always true), a conditional expression with such a branch. Such an assert held is evidence that the
    code runs, not that it is right (DESIGN.md "Asymmetric trust": a run is not a behaviour
    check); the checked draft cannot write its own pass with one."""
    if not any(isinstance(n, ast.Name) for n in ast.walk(test)):
        return True
    if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)):  # a non-empty display is always true
        return bool(getattr(test, "elts", None) or getattr(test, "keys", None))
    if isinstance(test, ast.IfExp):
        return _vacuous(test.body) or _vacuous(test.orelse)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.Or):
            return any(_vacuous(v) for v in test.values)
        return all(_vacuous(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = ast.dump(test.left), ast.dump(test.comparators[0])
        if left == right:
            return True
        op, rhs = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and isinstance(rhs, ast.Constant) \
                and rhs.value is None:
            return isinstance(op, (ast.IsNot, ast.NotEq))
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) \
            and test.func.id in ("isinstance", "callable", "hasattr", "issubclass"):
        return True
    return False


def _main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either order)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
        any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)


def _own_asserts(tree: ast.AST | None) -> int:
    """``assert`` statements the block runs itself that test its behaviour, and that run for
    sure with a failure that surfaces: statements of the module body, of an ``if __name__ ==
    "__main__":`` body, or of a ``for`` loop over a non-empty literal list or tuple of cases
    (recursively). An assert in a function or class body is a precondition, not a test of what
    the code does; one under another ``if``, a ``while``, a ``try`` or a ``with`` may never run
    (``if False:``, ``for _ in []:``) or have its failure swallowed (``except AssertionError:
    pass``, ``contextlib.suppress``), so its clean run compares nothing. Vacuous tests
    (:func:`_vacuous`) do not count either."""
    if tree is None:
        return 0

    def count(stmts: list[ast.stmt]) -> int:
        n = 0
        for node in stmts:
            if isinstance(node, ast.Assert):
                n += not _vacuous(node.test)
            elif isinstance(node, ast.If) and _main_guard(node.test):
                n += count(node.body)
            elif isinstance(node, ast.For) and isinstance(node.iter, (ast.List, ast.Tuple)) and node.iter.elts \
                    and not any(isinstance(x, (ast.Break, ast.Continue)) for x in ast.walk(node)):
                n += count(node.body)
        return n

    return count(getattr(tree, "body", []) or [])


def _untested(p: _Plan, b: Block) -> list[str]:
    """The functions and classes block ``b`` defines at top level that nothing compared reaches:
    no counted own assert (:func:`_own_asserts`), example or stated output of the block, question
    example or later block names them, nor a function so reached calls them. "def total ...;
    def double ...; assert total([1, 2, 3]) == 6" compared ``total`` only: a clean run is no
    check of ``double``. ``[]`` when the question gives stdin/stdout pairs (the program runs as
    a whole) or the block defines nothing."""
    tree = b.tree
    if tree is None or p.stdin_cases:
        return []
    defs = {node.name: node for node in getattr(tree, "body", []) or []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    if not defs:
        return []

    def names(node: ast.AST) -> set[str]:
        out = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return out | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}

    reached: set[str] = set()
    stack = list(getattr(tree, "body", []) or [])
    while stack:  # the counted asserts (module body, main guard, literal case loops)
        node = stack.pop()
        if isinstance(node, ast.Assert) and not _vacuous(node.test):
            reached |= names(node)
        elif isinstance(node, ast.If) and _main_guard(node.test):
            stack.extend(node.body)
        elif isinstance(node, ast.For) and isinstance(node.iter, (ast.List, ast.Tuple)):
            if any(isinstance(x, ast.Assert) for x in node.body):
                reached |= names(node)
            stack.extend(node.body)
    for e in p.examples:
        if e.block in (b.index, None):
            reached |= set(re.findall(r"[A-Za-z_]\w*", e.source))
    for later in p.runnable:
        if later.index > b.index and later.tree is not None and _directly_compared(p, later):
            reached |= names(later.tree)
    todo = [n for n in reached if n in defs]
    seen: set[str] = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(m for m in names(defs[n]) if m in defs and m not in seen)
    return [n for n in defs if n not in seen]


def _behaviour_compared(p: _Plan, b: Block) -> str:
    """:func:`_directly_compared` for ``b``, or -- the blocks run in one namespace, in order --
    a later block with a comparison of its own that uses a name ``b`` binds (``r = 2`` before
    ``print(math.pi * r ** 2)  # Output: 12.57``); else ``""``."""
    own = _directly_compared(p, b)
    if own:
        return own
    bound = defined_names(b.tree) if b.tree is not None else set()
    for later in p.runnable:
        if later.index <= b.index or later.kind == "pycon" or later.tree is None:
            continue
        used = {n.id for n in ast.walk(later.tree) if isinstance(n, ast.Name)}
        used |= {a.value.id for a in ast.walk(later.tree) if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)}
        if bound & used and _directly_compared(p, later):
            return f"block {later.index + 1} uses what it defines and is compared"
    return ""


def _directly_compared(p: _Plan, b: Block) -> str:
    """What about block ``b``'s own behaviour its run compared (DESIGN.md "Asymmetric trust": code
    that merely runs is not verified), or ``""``: its own ``assert`` statements (they held: the
    block ran without an exception), an example or stated output of its own (docstring,
    ``# Output:``, prose), a question example that calls a function the block defines (or any
    question example when the answer has one runnable block), the question's stdin/stdout pairs.
    The examples are separate checks; this only says the block's clean run is part of a
    behaviour check."""
    n = _own_asserts(b.tree)
    if n:
        return f"{n} assert statement(s) of its own hold"
    if any(e.block == b.index for e in p.examples):
        return "its own examples or stated outputs are compared"
    defined = {node.name for node in getattr(b.tree, "body", []) or []
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    single = sum(1 for x in p.runnable if x.kind != "pycon") == 1
    for e in p.examples:
        if e.block is None and (single or any(re.search(rf"\b{re.escape(f)}\b", e.source) for f in defined)):
            return "the question's examples are compared"
    if p.stdin_cases:
        return "the question's input/output pairs are compared"
    return ""


def _stmt_wants(p: _Plan) -> dict[tuple[int, int], str]:
    return {(e.block, e.stmt_line): e.want for e in p.examples if e.mode == "stmt" and e.block is not None}  # type: ignore[misc]


def _example_wants(p: _Plan) -> dict[int, str]:
    return {i: e.want for i, e in enumerate(p.examples) if e.mode == "value"}


def _example_check(p: _Plan, e: Example, i: int, exrecs: dict, stmts: dict, blocks: dict, why: str, base: dict) -> Check:
    b = p.blocks[e.block] if e.block is not None else None
    if not e.source:
        claim = f"output of block {(e.block or 0) + 1}: {_first_line(e.want)}"
    elif not e.want.strip():
        claim = f"{e.source} (stated as true)"
    else:
        claim = f"{e.source} -> {e.want}"
    c = Check(verifier=VERIFIER, claim=claim[:200], outcome="unknown", expected=e.want, found=None,
              evidence={"tier": 3, "origin": e.origin, "where": e.where, "inputs": e.source, **base},
              confidence=0.0, span=b.span if b else None)
    if e.mode in ("stdout", "stdout-line"):
        r = blocks.get(e.block)
        if r is None or r.get("status") != "ok":
            c.note = why if r is None else "the block did not complete"
            return c
        got = r.get("stdout") or ""
        c.found = _bound(got)
        status = _compare_stdout(got, e.want, whole=e.mode == "stdout")
    elif e.mode == "stmt":
        r = stmts.get((e.block, e.stmt_line))
        if r is None:
            c.note = why
            return c
        c.found, status = r.get("got"), r.get("status")
    else:
        r = exrecs.get(i)
        if r is None:
            c.note = why
            return c
        status = r.get("status")
        c.found = r.get("got")
        if status == "error":
            err = r.get("error", {})
            outcome, reason = _classify_error(p, err)
            if not any(f[0].startswith("<answer") for f in err.get("frames", [])):
                # raised by the example itself (malformed example, wrong arity): not the code's fault
                outcome, reason = "unknown", f"the example itself raised {err.get('type')}: {err.get('message')}"
            c.evidence.update(exception={"type": err.get("type"), "message": err.get("message")},
                              traceback=_traceback(p, err), stdout=_bound(r.get("stdout")))
            c.found = f"{err.get('type')}: {err.get('message')}"
            c.outcome, c.note = outcome, (f"raises {reason}" if outcome == "fail" else reason)  # type: ignore[assignment]
            c.confidence = 0.9 if outcome == "fail" else 0.0
            return c
        if status in ("timeout", "exit"):
            c.note = "did not finish in time" if status == "timeout" else "called sys.exit"
            return c
    if status == "pass":
        c.outcome, c.note, c.confidence = "pass", f"matches the {_origin_word(e)}", 0.9
    elif status == "mismatch":
        if p.nondeterministic or p.env_dependent:
            c.note = "output differs, but the code uses randomness/time/IO; not conclusive"
            c.evidence["reason"] = "nondeterministic"
        else:
            c.outcome, c.confidence = "fail", 0.85 if e.origin in ("comment", "prose") else 0.9
            if e.want.strip():
                c.note = f"{_origin_word(e)} says {_first_line(e.want, 60)!s}, the code gives {_first_line(str(c.found), 60)}"
            else:
                c.note = f"{_origin_word(e)} states `{_first_line(e.source, 80)}`, which is {_first_line(str(c.found), 20)} for this code"
    return c


def _numbers_match(got: str, want: str) -> bool:
    """Token-wise equality with float tolerance (rel 1e-6), for printed answers like ``2.50``."""
    g, w = got.split(), want.split()
    if len(g) != len(w):
        return False
    for a, b in zip(g, w):
        if a == b:
            continue
        try:
            fa, fb = float(a), float(b)
        except ValueError:
            return False
        if not (abs(fa - fb) <= 1e-6 * max(1.0, abs(fb))):
            return False
    return True


def _stdin_check(p: _Plan, case: tuple[str, str, str], res: Result | None, unavailable: str | None) -> Check:
    inp, want, where = case
    c = Check(verifier=VERIFIER, claim=f"stdin {_first_line(inp, 40)!r} -> {_first_line(want, 60)}", outcome="unknown",
              expected=want, evidence={"tier": 3, "origin": "question", "where": where, "inputs": inp,
                                       **_sandbox_evidence(res)}, confidence=0.0)
    if res is None:
        c.note = f"not executed: {unavailable}"
        return c
    obs = observe(res.stdout, p.stdin_nonce)
    recs = legacy_records(obs, {}, {})
    blocks = [r for r in recs if r.get("kind") == "block"]
    distrust = _distrust(p, res, obs)
    if distrust is not None and not any(r.get("status") == "error" for r in blocks):
        c.note = f"not taken as verified: {distrust}"
        c.evidence.update(reason="untrusted run", untrusted=distrust)
        return c
    if res.killed_by != "none" or not blocks:
        c.note = f"did not complete ({res.killed_by if res.killed_by != 'none' else 'no result'})"
        return c
    err = next((r for r in blocks if r.get("status") == "error"), None)
    got = "".join(r.get("stdout") or "" for r in blocks)
    c.found = _bound(got)
    if err is not None:
        e = err.get("error", {})
        with_input = _Plan(answer=p.answer, blocks=p.blocks, env_dependent=p.env_beyond_stdin,
                           context_names=p.context_names)
        outcome, reason = _classify_error(with_input, e)
        if e.get("type") == "EOFError":
            outcome, reason = "unknown", "read more input than the example gives"
        c.evidence.update(exception={"type": e.get("type"), "message": e.get("message")}, traceback=_traceback(p, e))
        c.outcome, c.note = outcome, (f"raises {reason}" if outcome == "fail" else reason)  # type: ignore[assignment]
        c.confidence = 0.9 if outcome == "fail" else 0.0
        return c
    if any(r.get("status") == "timeout" for r in blocks):
        c.note = "did not finish in time"
        return c
    status = _compare_stdout(got, want, whole=True)
    if status == "pass" or _numbers_match(got, want):
        c.outcome, c.note, c.confidence = "pass", "prints the question's expected output", 0.9
    elif status == "mismatch" and not p.nondeterministic:
        c.outcome, c.confidence = "fail", 0.9
        c.note = f"for the question's input the program prints {_first_line(got, 60)}, expected {_first_line(want, 60)}"
    else:
        c.note = "output differs, not conclusive"
    return c


def _origin_word(e: Example) -> str:
    return {"question": "question's example", "docstring": "docstring example", "session": "session",
            "comment": "stated output", "prose": "stated output"}.get(e.origin, "example")


def _norm_ws(s: str) -> str:
    return "\n".join(" ".join(ln.split()) for ln in s.strip().split("\n") if ln.strip())


def _compare_stdout(got: str, want: str, *, whole: bool) -> str:
    import doctest

    g, w = _norm_ws(got), _norm_ws(want)
    if whole:
        if g == w or doctest.OutputChecker().check_output(want.strip() + "\n", got.strip() + "\n",
                                                           doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE):
            return "pass"
        if not g:
            return "unknown"  # printed nothing: the output may come from code the user runs
        return "mismatch"
    lines = g.split("\n")
    if w in lines or w == g or (w and w in g):
        return "pass"
    return "mismatch" if g else "unknown"


# --- entry points -----------------------------------------------------------------------------

_BY_NAME: dict[str, Sandbox] = {}
_BY_NAME_LOCK = threading.Lock()


def _resolve(sandbox: Sandbox | str | None) -> Sandbox:
    """A Sandbox instance as is; a backend name -> one shared instance per name per process."""
    if isinstance(sandbox, Sandbox):
        return sandbox
    name = (sandbox or "auto").strip().lower()
    with _BY_NAME_LOCK:
        if name not in _BY_NAME:
            _BY_NAME[name] = get_sandbox(name)
        return _BY_NAME[name]


def check(answer: str, question: str | None = None, *, sandbox: Sandbox | str | None, limits: Limits | None = None) -> list[Check]:
    """Verify the code in ``answer`` (markdown); ``question`` supplies examples.

    Args:
        answer: the model's answer text (markdown with fenced blocks).
        question: the user's question, or ``None``.
        sandbox: a :class:`~verifiers.sandbox.Sandbox`, a backend name (``"auto"``,
            ``"docker"``, ``"bwrap"``, ``"none"``). ``None`` means ``"auto"``.
        limits: sandbox limits for this answer (default: the sandbox's own).

    Returns:
        One check per code block (non-Python blocks: ``unknown``), plus one per example /
        stated output, in answer order. Never raises for bad input: unparseable text gives
        ``unknown`` or ``fail`` checks; a broken sandbox gives ``unknown`` with the reason.
        Blocking; thread-safe.
    """
    box = _resolve(sandbox)
    lim = limits or box.limits
    p = plan(answer, question, lim)
    if p.program is None:
        return _executed(interpret(p, None, "nothing to run"))
    try:
        res = box.run(p.program, limits=lim)
        stdin_res = [box.run(p.stdin_program, stdin=inp, limits=lim) for inp, _, _ in p.stdin_cases]  # type: ignore[arg-type]
    except SandboxUnavailable as exc:
        return _executed(_finish(p, None, [], str(exc)))
    except Exception as exc:  # noqa: BLE001 - an engine hiccup must not break the answer
        return _executed(_finish(p, None, [], f"sandbox error: {type(exc).__name__}: {exc}"))
    return _executed(_finish(p, res, stdin_res))


def _executed(checks: list[Check]) -> list[Check]:
    """``checks`` with ``basis`` set: every verdict of this verifier rests on the answer's own
    code, asserts and stated outputs or the question's examples, executed in the sandbox and
    compared here (``executed``)."""
    for c in checks:
        if c.basis is None:
            c.basis = "executed"
    return checks


def _finish(p: _Plan, res: Result | None, stdin_res: list[Result], unavailable: str | None = None) -> list[Check]:
    """Tier-3 interpretation plus one check per stdin example. A block whose smoke run only
    stopped for lack of input (EOFError) passes when it ran cleanly on the question's input."""
    checks = interpret(p, res, unavailable)
    extra = [_stdin_check(p, case, stdin_res[i] if i < len(stdin_res) else None, unavailable or "not run")
             for i, case in enumerate(p.stdin_cases)]
    if any(c.outcome == "pass" for c in extra):
        for c in checks:
            if c.outcome == "unknown" and (c.evidence.get("exception") or {}).get("type") == "EOFError":
                c.outcome, c.confidence, c.note = "pass", 0.8, "ran without errors on the question's input"
    return checks + extra


async def acheck(answer: str, question: str | None = None, *, sandbox: Sandbox | str | None, limits: Limits | None = None) -> list[Check]:
    """Async :func:`check` for the gateway: same arguments and result; the sandbox run happens
    in the sandbox thread pool (bounded by the global concurrency cap)."""
    box = _resolve(sandbox)
    lim = limits or box.limits
    # parsing and pyflakes are CPU work: off the event loop, so the gateway keeps serving and
    # the caller's deadline can fire
    p = await asyncio.to_thread(plan, answer, question, lim)
    if p.program is None:
        return _executed(interpret(p, None, "nothing to run"))
    try:
        runs = [box.arun(p.program, limits=lim)]
        runs += [box.arun(p.stdin_program, stdin=inp, limits=lim) for inp, _, _ in p.stdin_cases]  # type: ignore[arg-type]
        res, *stdin_res = await asyncio.gather(*runs)
    except SandboxUnavailable as exc:
        return _executed(_finish(p, None, [], str(exc)))
    except Exception as exc:  # noqa: BLE001
        return _executed(_finish(p, None, [], f"sandbox error: {type(exc).__name__}: {exc}"))
    return _executed(_finish(p, res, stdin_res))
