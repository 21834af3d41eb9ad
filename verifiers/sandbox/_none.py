"""The ``none`` backend: never executes code.

Used when no real sandbox is available (or by policy): :meth:`NoSandbox.run` raises
:class:`~verifiers.sandbox.SandboxUnavailable` with the reason, and the code verifier reports
its execution checks as ``unknown`` with that reason. Untrusted code is never run unsandboxed.
"""

from __future__ import annotations

from verifiers.sandbox import Limits, Result, Sandbox


class NoSandbox(Sandbox):
    """A sandbox that refuses to run anything; ``reason`` says why (one line)."""

    name = "none"

    def __init__(self, limits: Limits | None = None, *, reason: str = "sandbox backend 'none' never executes code") -> None:
        super().__init__(limits)
        self.reason = reason

    def unavailable_reason(self) -> str | None:
        return self.reason

    def _run(self, code: str, stdin: str, limits: Limits, cancel=None) -> Result:  # pragma: no cover - run() raises first
        raise AssertionError("NoSandbox never executes")
