"""Every parse of Python source in :mod:`verifiers` is serialised (CPython 3.11's AST constructor
is not thread-safe: python/cpython#106905 failed a HumanEval answer's check under the thread
pool of tests/verifiers/test_code_cases.py with "SystemError: AST constructor recursion depth mismatch")."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from verifiers import _pyast
from verifiers.code import _compare, _extract


def test_parses_never_overlap_across_threads(monkeypatch):
    real_parse = ast.parse
    inside = 0
    overlaps = []
    guard = threading.Lock()

    def slow_parse(*a, **kw):
        nonlocal inside
        with guard:
            inside += 1
            if inside > 1:
                overlaps.append(inside)
        time.sleep(0.002)  # widen the window a second thread would need
        try:
            return real_parse(*a, **kw)
        finally:
            with guard:
                inside -= 1

    monkeypatch.setattr(ast, "parse", slow_parse)
    jobs = [lambda: _extract.parse_python("def f(x):\n    return [x, {'a': (1, 2)}]\n"),
            lambda: _compare._lit("[1, 2, {'k': 3.5}]"),
            lambda: _pyast.literal_eval("  (1, 'x')"),
            lambda: _pyast.parse("1 + 2", mode="eval")] * 10
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda job: job(), jobs))
    assert overlaps == []
    assert results[1] == (True, [1, 2, {"k": 3.5}])
    assert results[2] == (1, "x")


def test_the_spurious_system_error_is_retried_once(monkeypatch):
    real_parse = ast.parse
    calls = []

    def flaky(*a, **kw):
        calls.append(a)
        if len(calls) == 1:
            raise SystemError("AST constructor recursion depth mismatch (before=33, after=41)")
        return real_parse(*a, **kw)

    monkeypatch.setattr(ast, "parse", flaky)
    tree = _pyast.parse("x = 1")
    assert isinstance(tree, ast.Module) and len(calls) == 2


def test_other_system_errors_and_syntax_errors_are_raised(monkeypatch):
    with pytest.raises(SyntaxError):
        _pyast.parse("def (")
    monkeypatch.setattr(ast, "parse", lambda *a, **kw: (_ for _ in ()).throw(SystemError("other")))
    with pytest.raises(SystemError, match="other"):
        _pyast.parse("x = 1")
