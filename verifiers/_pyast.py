"""Python source parsing that is safe across threads on CPython 3.11.

CPython 3.11 builds the Python AST objects with a recursion-depth counter shared by every
thread of the interpreter: two threads in ``ast.parse`` at once (``ast.literal_eval`` on a string
parses too) can fail with "SystemError: AST constructor recursion depth mismatch"
(python/cpython#106905, fixed in 3.12). The gateway and ``veracity eval`` check answers in worker
threads, so every parse in :mod:`verifiers` goes through :func:`parse` (one process-wide lock).
A parse made by another library outside the lock can still interleave with ours: that one
``SystemError`` is retried once, since the source itself was not at fault.
"""

from __future__ import annotations

import ast
import threading
from typing import Any

_LOCK = threading.RLock()
_MISMATCH = "recursion depth mismatch"


def parse(source: str, mode: str = "exec", filename: str = "<unknown>") -> ast.AST:
    """``ast.parse(source, filename, mode)`` serialised across threads.

    Raises what ``ast.parse`` raises (SyntaxError, ValueError, RecursionError, MemoryError);
    the spurious ``SystemError`` of cpython#106905 is retried once and re-raised if it repeats.
    """
    with _LOCK:
        try:
            return ast.parse(source, filename, mode)
        except SystemError as exc:
            if _MISMATCH not in str(exc):
                raise
            return ast.parse(source, filename, mode)


def literal_eval(text: str) -> Any:
    """``ast.literal_eval(text)`` with its parse made by :func:`parse`.

    Raises ValueError/TypeError for a non-literal, SyntaxError, RecursionError, MemoryError
    as ``ast.literal_eval`` does.
    """
    return ast.literal_eval(parse(text.lstrip(" \t"), mode="eval"))
