"""The program the code verifier runs inside the sandbox, and how the gateway reads what it did.

What the verdict's integrity rests on
-------------------------------------

(docs/design.md "A verdict rests on what the checked content cannot write".)

The answer's code is untrusted and runs in the same interpreter as this harness. Python cannot
confine code inside one interpreter, and nothing a process says about itself is proof against that
process: whatever the harness can print at its end, code that has taken over the interpreter can
print at its start. So the design (docs/security.md, "Security: what the verdict's integrity rests
on") keeps the *judging* out of the sandbox and makes the harness's reporting channel one the
checked code cannot speak on; where it might have, nothing the run says counts as a pass.

1. **Judged outside.** The answer's prints go straight to file descriptor 1; the sandbox backend
   (bwrap's pipe, Docker's attach stream) captures those bytes outside the process. There is no
   in-process stdout redirection and no comparison in the sandbox: stated outputs, doctests and
   the question's examples are compared in the gateway (:mod:`verifiers.code._compare`) on the
   captured bytes and on the ``repr`` text of a value, never by calling the answer's ``__eq__``.
   Replacing the harness's functions therefore changes nothing that is compared.
2. **Framing the code cannot forge.** The harness only marks where each watched statement,
   block and example begins and ends, and whether it raised. Its marks carry a nonce that is
   born *inside* the sandbox after start (``os.urandom``) and announced as the very first bytes
   on stdout, before any answer code runs: it is never in argv (``/proc/*/cmdline``), the
   environment or a file. The gateway accepts a run's marks only when stdout starts with that
   announcement; a mark-shaped line with any other nonce is an attempted forgery.
3. **The code cannot learn the nonce or reach the harness.** Before the first answer statement
   the harness installs a CPython audit hook (PEP 578; it cannot be removed) that refuses, with
   ``SandboxDenied`` (a ``ValueError``, so the standard library's own fallbacks -- namedtuple,
   typing, enum, logging -- keep working), every way to a frame or to other objects' memory:
   ``sys._getframe``/``_current_frames``, ``tb_frame``/``gi_frame``/``cr_frame``/``ag_frame``,
   ``sys.settrace``/``setprofile``, ``gc.get_objects``/``get_referrers``/``get_referents``,
   ``ctypes``/``cffi``, Python signal handlers (a handler is handed the interrupted frame;
   ``signal.signal`` accepts only the defaults), ``/proc``, ``/dev`` and ``/sys`` paths,
   symlinks and new audit hooks; and importlib cannot make a fresh ``_signal``, ``_ctypes`` or
   ``_imp`` (``_imp``'s entry points ask the hook, which alone holds the real ones).
   ``fork``/``exec``/``spawn`` are refused too when the process could not be made non-dumpable. The process is made non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``), so
   ``/proc/self/mem`` is closed at the kernel too. A refusal triggered by answer code is
   reported at once on the framing channel (``tamper``), before the code can react.
4. **Early ends and tampering are evidence.** The run counts only when it wrote its ``done``
   mark, exited 0 by the harness's own ``os._exit`` (so ``atexit`` handlers never run after
   ``done``), and the harness saw no tampering: after every statement it checks that
   ``builtins``, ``sys.stdout``/``sys.stderr`` are the objects they were and that no thread the
   answer started is still running. ``sys.exit`` (caught or not), ``os._exit``, a signal,
   a forged mark or a refusal make every would-be ``pass`` of that run ``unknown`` (never a
   pass); failures the run showed stay failures.
5. **What the audit hook cannot see** is screened in the gateway before the run: numpy's raw
   memory doors (``__array_interface__``, ``__array_struct__``, ``as_strided``, ``ctypeslib``)
   make every pass of the run ``unknown``.

Known limits: a program can still behave differently when it detects the sandbox (no verifier
can prevent a "defeat device"); what it then prints *is* what the run shows. Code that uses
``signal``, ``subprocess``, ``multiprocessing``, ``asyncio`` (imports ``signal``), frame
introspection or leaves threads running gets ``unknown`` where it used to be able to pass.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

#: Start of every framing mark; the per-run nonce (32 hex digits) and ``\\x1f`` follow, then the
#: ``repr`` of a dict of plain values, then a newline.
MARK_PREFIX = "\x1e@veracity:"
_MARK = re.compile(re.escape(MARK_PREFIX) + r"([0-9a-f]{32})\x1f([^\n]*)\n?")

HARNESS = r'''
import ast as _ast, builtins as _b, os as _os, sys as _sys, _thread
import signal as _sigmod
_write, _exit, _getcwd = _os.write, _os._exit, _os.getcwd
_repr, _str, _type, _isinstance, _len, _exec, _eval, _compile = _b.repr, _b.str, _b.type, _b.isinstance, _b.len, _b.exec, _b.eval, _b.compile
_BaseException, _SystemExit, _SyntaxError, _ValueError = _b.BaseException, _b.SystemExit, _b.SyntaxError, _b.ValueError
_int, _dict, _list, _id, _any, _set, _bytes, _ImportError = _b.int, _b.dict, _b.list, _b.id, _b.any, _b.set, _b.bytes, _b.ImportError
_getattr, _setattr = _b.getattr, _b.setattr
_tb_get = _BaseException.__dict__["__traceback__"].__get__
_thread_count = _thread._count
_setitimer, _ITIMER_PROF = _sigmod.setitimer, _sigmod.ITIMER_PROF
SPEC = _ast.literal_eval(__SPEC__)
CAP = SPEC["cap"]
_NONCE = _os.urandom(16).hex()
_MARKB = ("\x1e@veracity:" + _NONCE + "\x1f")
_OUT, _ERR = _sys.stdout, _sys.stderr
_STATE = {"trusted": False, "tamper": 0}

def _flush():
    for s in (_OUT, _ERR):
        try:
            _type(s).flush(s)
        except _BaseException:
            pass

def _rec(r):
    _flush()
    _write(1, (_MARKB + _repr(r) + "\n").encode("utf-8", "replace"))

def _s(x, n=2000):
    if _type(x) is not _str:
        x = _str.__str__(x) if _isinstance(x, _str) else "<?>"
    return x if _len(x) <= n else x[:n] + "...[truncated]"

# -- the process: non-dumpable (no /proc/self/mem for anyone but root), then ctypes forgotten
_SEALED = False
try:
    import ctypes as _ct
    _SEALED = _ct.CDLL(None).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE = 4
    del _ct
except _BaseException:
    pass
class SandboxDenied(_ImportError, _ValueError):
    """Refused by the harness's audit hook: an ImportError (for ``try: import ctypes``
    fallbacks) and a ValueError (for ``sys._getframe`` fallbacks) at once."""

# ctypes reads and writes any address (a pointer indexed past its object is not audited), so
# nobody gets it after the lockdown: numpy (which falls back on ImportError) is refused, others
# get a stand-in whose every attribute is refused (pandas.errors imports it, for Windows only).
_STUB = {"Denied": _type("SandboxDenied", (AttributeError,), {})}
_exec("def __getattr__(name):\n    raise Denied('the code verifier sandbox does not allow ctypes (' + name + ')')\n", _STUB)
for _m in ("ctypes", "_ctypes", "ctypes._endian", "ctypes.util"):
    _sys.modules.pop(_m, None)

def _ctypes_stub(name):
    mod = _type(_sys)(name)
    mod.__getattr__ = _STUB["__getattr__"]
    _sys.modules[name] = mod

# -- the per-step CPU budget: handler in its own namespace (nothing of ours behind it). Then no
# Python signal handler can be installed any more: a handler is handed the interrupted frame,
# the harness's own included. signal.signal (and _signal.signal) become a function that only
# accepts the defaults (a no-op: asyncio, subprocess keep working) and refuses a callable.
_H = {"Denied": SandboxDenied, "DFL": _sigmod.SIG_DFL, "IGN": _sigmod.SIG_IGN,
      "INT": _sigmod.default_int_handler}
_exec("class Budget(BaseException):\n    pass\n\ndef alarm(signum, frame):\n    raise Budget()\n\n"
      "def signal(signalnum, handler):\n"
      "    if handler is DFL or handler is IGN or handler is INT or handler in (0, 1):\n"
      "        return DFL\n"
      "    raise Denied('the code verifier sandbox does not allow this: a Python signal handler')\n", _H)
_Budget = _H["Budget"]
_sigmod.signal(_sigmod.SIGPROF, _H["alarm"])
_sigmod.signal = _H["signal"]
_sys.modules["_signal"].signal = _H["signal"]
del _sigmod


# A new program (exec, spawn) has no audit hook; it cannot read this process's memory only
# while this process is non-dumpable (then /proc/<pid>/mem and ptrace need CAP_SYS_PTRACE).
_DENY_EVENTS = frozenset({
    "sys._getframe", "sys._current_frames", "sys._current_exceptions", "sys.settrace", "sys.setprofile",
    "sys.addaudithook", "setopencodehook", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "os.symlink", "os.link",
} | (set() if _SEALED else {"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                            "subprocess.Popen", "pty.spawn"}))
_DENY_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
_DENY_IMPORTS = frozenset({"cffi", "_cffi_backend", "_signal", "_testcapi",
                           "_testinternalcapi", "_xxsubinterpreters"})
_DEV_OK = frozenset({"/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"})

def _abs(p):
    if _isinstance(p, _bytes):
        p = p.decode("utf-8", "replace")
    p = _str.__str__(p) if _isinstance(p, _str) else _str(p)
    if not p.startswith("/"):
        p = _getcwd() + "/" + p
    out = []
    for part in p.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if out:
                out.pop()
            continue
        out.append(part)
    return "/" + "/".join(out)

def _denied(event, args):
    if event in _DENY_EVENTS or event.startswith("ctypes."):
        return event
    if event == "object.__getattr__" and _len(args) > 1 and args[1] in _DENY_ATTRS:
        return "reads " + _str.__str__(args[1])
    if event == "import" and args and _isinstance(args[0], _str) and args[0].split(".")[0] in _DENY_IMPORTS:
        return "imports " + _str.__str__(args[0])
    if event == "open" and args:
        p = args[0]
        if _type(p) is _int:  # an fd it already holds: its own stdio at most (no mark without the nonce)
            return None
        if _isinstance(p, (_str, _bytes)):
            a = _abs(p)
            if a == "/proc" or a.startswith("/proc/") or (a.startswith("/dev/") and a not in _DEV_OK) or a.startswith("/sys/"):
                return "opens " + a[:80]
    return None

_getframe = _sys._getframe

def _caller():
    """File name of the code whose call raised the current audit event."""
    _STATE["trusted"] = True
    try:
        return _getframe(2).f_code.co_filename  # 0: here, 1: _hook, 2: the caller
    except _BaseException:
        return "<answer>"
    finally:
        _STATE["trusted"] = False

# A fresh instance of a builtin/extension module brings back what the lockdown took away (a new
# _signal with a real signal(), a new _ctypes). importlib creates modules through _imp, so _imp's
# four entry points become wrappers that hold nothing: they ask this hook (unreachable from
# Python: hooks cannot be listed) over a private audit event, and only the hook holds the real
# functions. It refuses the modules below and hands out the rest.
import _imp as _impmod
_IMP_REAL = {n: _getattr(_impmod, n) for n in ("create_builtin", "exec_builtin", "create_dynamic", "exec_dynamic")}
_NOLOAD = frozenset({"_imp", "_signal", "_ctypes", "_testcapi", "_testinternalcapi", "_xxsubinterpreters",
                     "_cffi_backend"})
_PROTECTED = (_sys.modules["_signal"], _impmod)
_IMPW = {"audit": _sys.audit}
_exec("".join("def %s(obj):\n    box = []\n    audit('veracity.imp', '%s', obj, box)\n    return box[0]\n\n" % (n, n)
              for n in _IMP_REAL), _IMPW)
_Spec = _type("Spec", (), {})

def _imp_call(fn, obj, box):
    if fn.startswith("create_"):
        name = obj.name
        name = _str.__str__(name) if _isinstance(name, _str) else "<?>"
        origin = _getattr(obj, "origin", None)
        spec = _Spec()
        spec.name, spec.origin = name, (_str.__str__(origin) if _isinstance(origin, _str) else None)
        if name.split(".")[0] in _NOLOAD:
            return name
        box.append(_IMP_REAL[fn](spec))
        return None
    if _any(obj is m for m in _PROTECTED):
        return "re-initialises a protected module"
    box.append(_IMP_REAL[fn](obj))
    return None

def _answers(fn):
    """True for the answer's own code (not a library it called)."""
    return fn.startswith("<answer") or fn.startswith("<example")

def _hook(event, args):
    if _STATE["trusted"]:
        return
    if event == "veracity.imp" and _len(args) == 3 and _type(args[2]) is _list and args[0] in _IMP_REAL:
        why = _imp_call(args[0], args[1], args[2])
        if why is None:
            return
        if _answers(_caller()):
            _STATE["tamper"] += 1
            _rec({"k": "t", "what": "loads " + _s(why, 100)})
        raise SandboxDenied("the code verifier's sandbox does not allow loading " + why)
    if event == "import" and args and args[0] in ("ctypes", "_ctypes"):
        fn = _caller()
        if _answers(fn):
            _STATE["tamper"] += 1
            _rec({"k": "t", "what": "imports ctypes"})
        elif "/numpy/" in fn:
            raise SandboxDenied("the code verifier's sandbox does not allow ctypes")
        _ctypes_stub(args[0])
        return
    what = _denied(event, args)
    if what is None:
        return
    if _answers(_caller()):  # a library's own look (namedtuple, typing, logging) is refused, not held against the code
        _STATE["tamper"] += 1
        _rec({"k": "t", "what": _s(what, 200)})
    raise SandboxDenied("the code verifier's sandbox does not allow this: " + what)

_b_snapshot = _dict((k, _id(v)) for k, v in _b.__dict__.items())

def _integrity():
    """Tampering the harness can see after a statement: builtins rebound, stdio replaced,
    threads of the answer still running."""
    if _sys.stdout is not _OUT or _sys.stderr is not _ERR:
        return "replaced sys.stdout/sys.stderr"
    d = _b.__dict__
    if _len(d) != _len(_b_snapshot) or _any(_id(d.get(k)) != i for k, i in _b_snapshot.items()):
        return "changed builtins"
    if _thread_count() > 0:
        return "left threads running"
    return None

def _frames(e):
    out = []
    _STATE["trusted"] = True
    try:
        tb = _tb_get(e)
        while tb is not None and _len(out) < 200:
            co = tb.tb_frame.f_code
            if co.co_filename.startswith("<answer") or co.co_filename.startswith("<example"):
                out.append((co.co_filename, tb.tb_lineno, co.co_name))
            tb = tb.tb_next
    except _BaseException:
        pass
    finally:
        _STATE["trusted"] = False
    if _len(out) > 8:
        out = out[:2] + out[-6:]
    return out

def _exc(e):
    t = _type(e)
    try:
        name = _s(_type.__dict__["__name__"].__get__(t), 200)
    except _BaseException:
        name = "<?>"
    try:
        msg = _s(_str(e), 1000)
    except _BaseException:
        msg = "<unprintable>"
    mod = None
    if _isinstance(e, _ImportError):
        try:
            mod = _s(e.name, 200) if e.name is not None else None
        except _BaseException:
            mod = None
    return {"type": name, "message": msg, "frames": _frames(e), "module": mod}

NS = {"__name__": "__main__", "__builtins__": _b}

def _timed(code, mode):
    _setitimer(_ITIMER_PROF, SPEC["step_timeout"])
    try:
        if mode == "eval":
            return _eval(code, NS)
        _exec(code, NS)
        return None
    finally:
        _setitimer(_ITIMER_PROF, 0)

def _value(v):
    try:
        return _s(_repr(v), 2000)
    except _BaseException as e:
        return "<unrepresentable %s>" % _exc(e)["type"]

def _after(r):
    bad = _integrity()
    if bad is not None:
        _STATE["tamper"] += 1
        _rec({"k": "t", "what": bad})

def run_example(ex):
    fname = "<example %d>" % ex["id"]
    _rec({"k": "x", "id": ex["id"]})
    r = {"k": "X", "id": ex["id"], "st": "ok", "v": None}
    try:
        try:
            code = _compile(ex["source"], fname, "eval")
            mode = "eval"
        except _SyntaxError:
            code = _compile(ex["source"], fname, "exec")
            mode = "exec"
        v = _timed(code, mode)
        if mode == "eval":
            r["hv"] = True
            if v is None:
                r["none"] = True
            else:
                r["v"] = _value(v)
    except _Budget:
        r["st"] = "timeout"
    except _SystemExit:
        r["st"] = "exit"
    except _BaseException as e:
        r["st"], r["err"] = "error", _exc(e)
    _rec(r)
    _after(r)
    return r["st"] != "exit"

def run_block(blk):
    fname = "<answer block %d>" % blk["index"]
    tree = _ast.parse(blk["code"], fname)
    watch = _set(blk["watch"])
    _rec({"k": "B", "b": blk["index"]})
    end = {"k": "E", "b": blk["index"], "st": "ok"}
    for stmt in tree.body:
        w = stmt.lineno in watch
        if w:
            _rec({"k": "s", "b": blk["index"], "l": stmt.lineno})
        r = {"k": "e", "b": blk["index"], "l": stmt.lineno, "st": "ok", "v": None}
        try:
            if _isinstance(stmt, _ast.Expr):
                v = _timed(_compile(_ast.Expression(stmt.value), fname, "eval"), "eval")
                r["hv"] = True
                if v is None:
                    r["none"] = True  # a REPL shows nothing, but the value is None
                else:
                    r["v"] = _value(v)
            else:
                _timed(_compile(_ast.Module([stmt], []), fname, "exec"), "exec")
        except _Budget:
            r["st"] = "timeout"
        except _SystemExit:
            r["st"] = "exit"
        except _BaseException as e:
            r["st"], r["err"] = "error", _exc(e)
        if w:
            _rec(r)
        _after(r)
        if r["st"] != "ok":
            end.update(st=r["st"], l=stmt.lineno, err=r.get("err"))
            break
    _rec(end)
    return end["st"]

def main():
    _rec({"k": "hello"})
    _sys.addaudithook(_hook)
    for n in _IMP_REAL:
        _setattr(_impmod, n, _IMPW[n])
    for blk in SPEC["blocks"]:
        st = run_block(blk)
        if st == "exit":
            return
        if st != "ok" and not blk.get("may_fail"):
            _rec({"k": "halt", "b": blk["index"]})
            return
        for ex in SPEC["examples"]:
            if ex["block"] == blk["index"] and not run_example(ex):
                return
    for ex in SPEC["examples"]:
        if ex["block"] is None and not run_example(ex):
            return

main()
_rec({"k": "done", "tamper": _STATE["tamper"]})
_flush()
_exit(0)
'''


def build(blocks: list[dict], examples: list[dict], *, step_timeout: float, cap: int = 20_000) -> tuple[str, str]:
    """Return ``(program, MARK_PREFIX)``: the harness with the spec embedded.

    ``blocks``: ``[{"index", "code", "watch": [stmt line], "watch_want": {line: want}, "may_fail"}]``;
    ``examples``: ``[{"id", "source", "want", "mode", "block"}]``; ``step_timeout``: seconds
    per statement/example, CPU time (SIGPROF); ``cap``: kept for callers (output is bounded by
    the sandbox's ``Limits.output_bytes`` now). The program holds no secret: its nonce is drawn
    inside the sandbox (see the module docstring); read its output with :func:`observe`.
    """
    spec = repr({"blocks": blocks, "examples": examples, "step_timeout": step_timeout, "cap": cap})
    return HARNESS.replace("__SPEC__", repr(spec)), MARK_PREFIX


@dataclass
class Observation:
    """What one harness run showed, read from the bytes the sandbox captured.

    Attributes:
        records: the harness's marks, in order (dicts; ``k`` is the kind).
        segments: ``segments[i]`` is the answer's own output printed *before* ``records[i]``
            (after the previous mark); ``segments[-1]`` (one more than records) is what came
            after the last mark.
        anomalies: why the marks cannot be trusted (no announcement, a mark with another
            nonce, output after ``done``), empty when none.
        tamper: what the harness reported the code tried (refused events, rebound builtins).
        done: the harness wrote its final mark.
    """

    records: list[dict] = field(default_factory=list)
    segments: list[str] = field(default_factory=list)
    anomalies: list[str] = field(default_factory=list)
    tamper: list[str] = field(default_factory=list)
    done: bool = False

    def untrusted(self) -> str | None:
        """Why no pass of this run may stand, or None."""
        if self.anomalies:
            return self.anomalies[0]
        if self.tamper:
            return f"the code tried to reach the checker or the process ({self.tamper[0]})"
        if not self.done:
            return "the run ended before the harness finished"
        return None


def observe(stdout: str, prefix: str = MARK_PREFIX) -> Observation:
    """Split captured ``stdout`` into harness marks and the answer's own output.

    The first mark must start the stream (the in-sandbox nonce announcement); later marks must
    carry the same nonce. Anything mark-shaped with another nonce, or a missing announcement,
    is an anomaly. Never raises.
    """
    obs = Observation()
    if not stdout.startswith(prefix):
        obs.anomalies.append("the harness's announcement is missing (the run's output cannot be framed)")
        obs.segments = [stdout]
        return obs
    m0 = _MARK.match(stdout)
    if m0 is None:
        obs.anomalies.append("malformed harness announcement")
        obs.segments = [stdout]
        return obs
    nonce = m0.group(1)
    pos, buf = 0, []
    for m in _MARK.finditer(stdout):
        buf.append(stdout[pos:m.start()])
        pos = m.end()
        if m.group(1) != nonce:
            obs.anomalies.append("a forged harness mark (wrong nonce) in the output")
            continue
        try:
            rec = ast.literal_eval(m.group(2))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            obs.anomalies.append("an unreadable harness mark")
            continue
        if not isinstance(rec, dict):
            obs.anomalies.append("an unreadable harness mark")
            continue
        if obs.done:
            obs.anomalies.append("harness marks after the end of the run")
        obs.records.append(rec)
        obs.segments.append("".join(buf))
        buf = []
        if rec.get("k") == "t":
            obs.tamper.append(str(rec.get("what")))
        elif rec.get("k") == "done":
            obs.done = True
    tail = "".join(buf) + stdout[pos:]
    obs.segments.append(tail)
    stray = stdout.count(prefix) - sum(1 for _ in _MARK.finditer(stdout))
    if stray > 0:
        obs.anomalies.append("a forged or broken harness mark in the output")
    if obs.done and tail.strip():
        obs.anomalies.append("output after the end of the run")
    return obs


def legacy_records(obs: Observation, stmt_wants: dict[tuple[int, int], str],
                   example_wants: dict[int, str]) -> list[dict]:
    """The run as per-block / per-statement / per-example results, compared in the gateway.

    Returns dicts ``{"kind": "block", "index", "status": ok|error|timeout|exit, "line",
    "error", "stdout"}``, ``{"kind": "stmt", "index", "line", "status": pass|mismatch|unknown,
    "got"}``, ``{"kind": "example", "id", "status": pass|mismatch|unknown|error|timeout|exit,
    "got", "error", "stdout"}``, ``{"kind": "halt"}`` and ``{"kind": "done"}``. ``stmt_wants``
    maps ``(block index, statement line)`` and ``example_wants`` an example id to the stated
    output. Whether any of it may be believed is :meth:`Observation.untrusted`'s call.
    """
    from verifiers.code._compare import compare, raises_as_stated

    out: list[dict] = []
    block_out: list[str] | None = None
    since = ""  # the answer's output since the last statement/example start mark
    for i, rec in enumerate(obs.records):
        seg = obs.segments[i] if i < len(obs.segments) else ""
        k = rec.get("k")
        if block_out is not None and k != "B":
            block_out.append(seg)
        since += seg
        if k in ("s", "x", "B"):
            since = ""
        seg = since
        if k == "B":
            block_out = []
        elif k == "e" and rec.get("st") == "ok":
            v = rec.get("v")
            got = seg + (v + "\n" if isinstance(v, str) else "")
            want = stmt_wants.get((rec.get("b"), rec.get("l")), "")  # type: ignore[arg-type]
            out.append({"kind": "stmt", "index": rec.get("b"), "line": rec.get("l"),
                        "status": compare(got, _value_repr(rec), bool(rec.get("hv")), want),
                        "got": _short(got.rstrip("\n"))})
        elif k == "E":
            text = "".join(block_out or [])
            r = {"kind": "block", "index": rec.get("b"), "status": rec.get("st"), "stdout": text}
            if rec.get("l") is not None:
                r["line"] = rec.get("l")
            if rec.get("err") is not None:
                r["error"] = rec.get("err")
            out.append(r)
            block_out = None
        elif k == "X":
            want = example_wants.get(rec.get("id"), "")  # type: ignore[arg-type]
            v = rec.get("v")
            got = seg + (v + "\n" if isinstance(v, str) else "")
            st = rec.get("st")
            r = {"kind": "example", "id": rec.get("id"), "stdout": seg}
            if st == "ok":
                r.update(status=compare(got, _value_repr(rec), bool(rec.get("hv")), want),
                         got=_short(got.rstrip("\n")))
            elif st == "error":
                err = rec.get("err") or {}
                if raises_as_stated(want, err.get("type")):
                    r.update(status="pass", got=f"{err.get('type')}: {err.get('message')}")
                else:
                    r.update(status="error", error=err)
            else:
                r["status"] = st
            out.append(r)
        elif k in ("halt", "done"):
            out.append({"kind": k, "index": rec.get("b")})
    return out


def _value_repr(rec: dict) -> str | None:
    """The repr text of an expression's value (``"None"`` for None, which a REPL does not show)."""
    if rec.get("none"):
        return "None"
    v = rec.get("v")
    return v if isinstance(v, str) else None


def _short(s: str, n: int = 2000) -> str:
    return s if len(s) <= n else s[:n] + "...[truncated]"


def parse_records(stdout: str, prefix: str = MARK_PREFIX, stmt_wants: dict | None = None,
                  example_wants: dict | None = None) -> list[dict]:
    """:func:`legacy_records` of :func:`observe` (``[]`` when the output has no announcement)."""
    return legacy_records(observe(stdout, prefix), stmt_wants or {}, example_wants or {})
