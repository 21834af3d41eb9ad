"""The code verifier's entry points, :func:`check` (blocking) and :func:`acheck` (asyncio):
resolve the sandbox, plan (tiers 1-2), run the harness program and each stdin example in the
sandbox, interpret (tier 3); every verdict's basis is ``executed``.
"""

from __future__ import annotations

import asyncio
import threading

from verifiers._types import Check
from verifiers.code._examples import _stdin_check
from verifiers.code._interpret import interpret
from verifiers.code._plan import plan
from verifiers.code._state import _Plan
from verifiers.sandbox import Limits, Result, Sandbox, SandboxUnavailable
from verifiers.sandbox import get as get_sandbox


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
