"""The program the code verifier runs inside the sandbox.

It executes the answer's Python blocks in order in one namespace (notebook semantics), one
top-level statement at a time (so a stated output can be tied to its statement), then runs the
examples (doctests, stated outputs, the question's examples) and reports every result as one
JSON line on the real stdout, prefixed with a per-run random nonce. The answer's own prints are
captured per statement and never mixed with the records. Comparisons happen here, where the
real objects live (numpy scalars, tuples vs lists, floats).
"""

from __future__ import annotations

import json
import secrets

HARNESS = r'''
import ast, builtins, contextlib, doctest, io, json, math, signal, sys, traceback
NONCE = __NONCE__
SPEC = json.loads(__SPEC__)
_OUT = sys.stdout
CAP = SPEC["cap"]

def emit(**rec):
    _OUT.write(NONCE + json.dumps(rec, default=repr) + "\n")
    _OUT.flush()

class _Budget(BaseException):
    """Raised by SIGPROF when one statement/example overruns its CPU-time budget."""

def _alarm(signum, frame):
    raise _Budget()

# CPU time (ITIMER_PROF), not wall time: on a loaded machine `import pandas` can take 10 s of
# wall time for 1 s of CPU, and a wall budget turned such steps into "too slow". A step that
# blocks without using CPU is bounded by the sandbox's own wall timeout.
signal.signal(signal.SIGPROF, _alarm)

class Cap(io.StringIO):
    def write(self, s):
        if self.tell() < CAP:
            super().write(s[: CAP - self.tell()])
        return len(s)

def _short(s, n=CAP):
    return s if len(s) <= n else s[:n] + "...[truncated]"

def _safe_repr(v):
    try:
        return _short(repr(v), 2000)
    except BaseException as e:
        return "<unrepresentable %s>" % type(e).__name__

def _exc(e):
    frames = [(f.filename, f.lineno, f.name) for f in traceback.extract_tb(e.__traceback__)
              if f.filename.startswith("<answer") or f.filename.startswith("<example")]
    if len(frames) > 8:
        frames = frames[:2] + frames[-6:]
    try:
        msg = str(e)
    except BaseException:
        msg = "<unprintable>"
    mod = getattr(e, "name", None) if isinstance(e, ImportError) else None
    return {"type": type(e).__name__, "message": _short(msg, 1000), "frames": frames, "module": mod}

NS = {"__name__": "__main__", "__builtins__": builtins}

def _timed(fn):
    signal.setitimer(signal.ITIMER_PROF, SPEC["step_timeout"])
    try:
        return fn()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)

def _as_number(x):
    if isinstance(x, bool):
        return None
    try:
        if isinstance(x, (int, float)) or type(x).__module__ == "numpy":
            return float(x)
    except (TypeError, ValueError, OverflowError):
        return None
    return None

def _decimals(text):
    t = text.strip()
    return len(t.split(".", 1)[1]) if "." in t and t.replace(".", "", 1).lstrip("-").isdigit() else None

def same(got, want, want_text=""):
    """Lenient equality of a computed value and an expected literal."""
    try:
        a, b = _as_number(got), _as_number(want)
        if a is not None and b is not None:
            if math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9):
                return True
            d = _decimals(want_text)
            return d is not None and round(a, d) == round(b, d)
        if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
            if len(got) == len(want):
                return all(same(x, y) for x, y in zip(got, want))
            return False
        if isinstance(got, tuple) and len(got) == 1 and not isinstance(want, tuple):
            return same(got[0], want, want_text)  # `("Venus")` in prose means a 1-tuple
        if isinstance(got, dict) and isinstance(want, dict):
            return got.keys() == want.keys() and all(same(got[k], want[k]) for k in got)
        if type(got).__module__ == "numpy" and hasattr(got, "tolist"):
            return same(got.tolist(), want, want_text)
        r = got == want
        return bool(r) if isinstance(r, bool) else False
    except BaseException:
        return False

_CHECKER = doctest.OutputChecker()
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE

def _lit(text):
    try:
        return True, ast.literal_eval(text.strip())
    except BaseException:
        return False, None

def compare(got_text, value, has_value, want):
    """'pass' | 'mismatch' | 'unknown' for the output text/value of one example against
    `want`. An empty `want` after a boolean expression (`>>> f(x) == y` with no output line)
    is read as an assertion: True passes, False mismatches, anything else is unknown."""
    if not want.strip():
        if has_value and isinstance(value, bool):
            return "pass" if value else "mismatch"
        return "pass" if not got_text.strip() else "unknown"
    if _CHECKER.check_output(want + "\n", got_text, _FLAGS):
        return "pass"
    ok, wv = _lit(want)
    if ok:
        if has_value and same(value, wv, want):
            return "pass"
        pok, pv = _lit(got_text)
        if pok and same(pv, wv, want):
            return "pass"
    g, w = " ".join(got_text.split()), " ".join(want.split())
    if g == w or (w.lower() in ("true", "false", "none", "null") and g.lower() == w.lower().replace("null", "none")):
        return "pass"
    # numpy prints `[1 2 3]` where prose writes `[1, 2, 3]`: formatting, not a wrong value
    if " ".join(g.replace(",", " ").split()) == " ".join(w.replace(",", " ").split()):
        return "pass"
    return "mismatch"

def run_example(ex):
    src, want, mode = ex["source"], ex["want"], ex["mode"]
    fname = "<example %d>" % ex["id"]
    buf = Cap()
    value, has_value = None, False
    try:
        with contextlib.redirect_stdout(buf):
            try:
                code = compile(src, fname, "eval")
                value = _timed(lambda: eval(code, NS))
                has_value = True
            except SyntaxError:
                code = compile(src, fname, "exec")
                _timed(lambda: exec(code, NS))
    except _Budget:
        emit(kind="example", id=ex["id"], status="timeout", stdout=buf.getvalue())
        return
    except SystemExit as e:
        emit(kind="example", id=ex["id"], status="exit", code=_safe_repr(e.code), stdout=buf.getvalue())
        return
    except BaseException as e:
        info = _exc(e)
        if want.lstrip().startswith("Traceback (most recent call last)"):
            last = want.strip().splitlines()[-1]
            if last.split(":", 1)[0].strip().split(".")[-1] == type(e).__name__:
                emit(kind="example", id=ex["id"], status="pass", got="%s: %s" % (type(e).__name__, info["message"]))
                return
        emit(kind="example", id=ex["id"], status="error", error=info, stdout=buf.getvalue())
        return
    printed = buf.getvalue()
    got_text = printed + (_safe_repr(value) + "\n" if has_value and value is not None else "")
    status = compare(got_text, value, has_value, want)
    emit(kind="example", id=ex["id"], status=status, got=_short(got_text.rstrip("\n"), 2000))

def run_block(blk):
    fname = "<answer block %d>" % blk["index"]
    tree = ast.parse(blk["code"], fname)
    out = []
    watch = set(blk["watch"])
    for stmt in tree.body:
        buf = Cap()
        value, has_value = None, False
        try:
            with contextlib.redirect_stdout(buf):
                if isinstance(stmt, ast.Expr):
                    code = compile(ast.Expression(stmt.value), fname, "eval")
                    value = _timed(lambda: eval(code, NS))
                    has_value = True
                else:
                    code = compile(ast.Module([stmt], []), fname, "exec")
                    _timed(lambda: exec(code, NS))
        except _Budget:
            emit(kind="block", index=blk["index"], status="timeout", line=stmt.lineno, stdout="".join(out) + buf.getvalue())
            return False
        except SystemExit as e:
            out.append(buf.getvalue())
            emit(kind="block", index=blk["index"], status="exit", code=_safe_repr(e.code), line=stmt.lineno, stdout="".join(out))
            return True
        except BaseException as e:
            out.append(buf.getvalue())
            emit(kind="block", index=blk["index"], status="error", line=stmt.lineno, error=_exc(e), stdout=_short("".join(out)))
            return False
        printed = buf.getvalue()
        out.append(printed)
        if stmt.lineno in watch:
            want = blk["watch_want"][str(stmt.lineno)]
            got_text = printed + (_safe_repr(value) + "\n" if has_value and value is not None else "")
            emit(kind="stmt", index=blk["index"], line=stmt.lineno, got=_short(got_text.rstrip("\n"), 2000),
                 status=compare(got_text, value, has_value, want))
    emit(kind="block", index=blk["index"], status="ok", stdout=_short("".join(out)))
    return True

def main():
    for blk in SPEC["blocks"]:
        if not run_block(blk) and not blk.get("may_fail"):
            emit(kind="halt", index=blk["index"])
            return
        for ex in SPEC["examples"]:
            if ex["block"] == blk["index"]:
                run_example(ex)
    for ex in SPEC["examples"]:
        if ex["block"] is None:
            run_example(ex)
    emit(kind="done")

main()
'''


def build(blocks: list[dict], examples: list[dict], *, step_timeout: float, cap: int = 20_000) -> tuple[str, str]:
    """Return ``(program, nonce)``: the harness with the spec embedded.

    ``blocks``: ``[{"index", "code", "watch": [stmt line], "watch_want": {line: want}}]``;
    ``examples``: ``[{"id", "source", "want", "mode", "block"}]``; ``step_timeout``: seconds
    per statement/example, CPU time (SIGPROF); ``cap``: characters of captured stdout kept per record.
    """
    nonce = "\x1e@veracity-" + secrets.token_hex(8) + "@"
    spec = json.dumps({"blocks": blocks, "examples": examples, "step_timeout": step_timeout, "cap": cap})
    program = HARNESS.replace("__NONCE__", repr(nonce)).replace("__SPEC__", repr(spec))
    return program, nonce


def parse_records(stdout: str, nonce: str) -> list[dict]:
    """The harness records in ``stdout`` (lines starting with ``nonce``), in order."""
    recs = []
    for line in stdout.split("\n"):
        i = line.find(nonce)
        if i < 0:
            continue
        try:
            recs.append(json.loads(line[i + len(nonce):]))
        except ValueError:
            continue
    return recs
