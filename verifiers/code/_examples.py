"""One check per example: a doctest, a stated output, a session line or a question's example
compared with what the sandbox recorded for it, and a question's stdin/stdout pair compared
with what the program printed on that input (its own sandbox run).
"""

from __future__ import annotations

from verifiers._types import Check
from verifiers.code._compare import _compare_stdout, _numbers_match
from verifiers.code._evidence import VERIFIER, _bound, _classify_error, _first_line, _sandbox_evidence, _traceback
from verifiers.code._extract import Example
from verifiers.code._harness import legacy_records, observe
from verifiers.code._state import _Plan
from verifiers.code._trust import _distrust
from verifiers.sandbox import Result


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
