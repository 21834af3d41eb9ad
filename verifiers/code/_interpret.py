"""Tier 3, reading the run: the sandbox's records of the answer's blocks turned into checks
(clean run compared or not, ``sys.exit``, timeouts, exceptions classified), the examples'
checks added, and every pass voided when the run cannot be trusted.
"""

from __future__ import annotations

import re

from verifiers._types import Check
from verifiers.code._compared import RAN_ONLY, _behaviour_compared, _untested
from verifiers.code._evidence import _bound, _classify_error, _ended_early, _sandbox_evidence, _traceback, _where
from verifiers.code._examples import _example_check
from verifiers.code._harness import legacy_records, observe
from verifiers.code._state import _Plan
from verifiers.code._trust import _distrust, _void_passes
from verifiers.sandbox import Result
from verifiers.sandbox._common import cpu_signal


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


def _stmt_wants(p: _Plan) -> dict[tuple[int, int], str]:
    return {(e.block, e.stmt_line): e.want for e in p.examples if e.mode == "stmt" and e.block is not None}  # type: ignore[misc]


def _example_wants(p: _Plan) -> dict[int, str]:
    return {i: e.want for i, e in enumerate(p.examples) if e.mode == "value"}
