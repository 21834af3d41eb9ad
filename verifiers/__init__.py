"""Veracity's checks, usable as a library without the gateway.

Each verifier is one module with one public entry point returning ``list[Check]``:
``verifiers.arithmetic.check``, ``verifiers.code.check``, ``verifiers.citations.check``.
"""

from verifiers._types import OUTCOMES, Check, Cost, Report, decided_pass
from verifiers.run import averify, verify

__all__ = ["Check", "Cost", "Report", "OUTCOMES", "decided_pass", "verify", "averify"]
