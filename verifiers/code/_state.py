"""The state of one code check as it goes through its steps: :class:`_Plan`, built by
:func:`verifiers.code._plan.plan` (the blocks, the tier-1/2 checks, the examples, what the code
depends on, the programs to run) and read by every later step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from verifiers._types import Check
from verifiers.code._extract import Block, Example


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
