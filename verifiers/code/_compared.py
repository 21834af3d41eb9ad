"""When a block's clean run counts as a behaviour check (docs/design.md "Asymmetric trust": code
that merely runs is not verified): its own non-vacuous ``assert`` statements that surely run,
its own examples or stated outputs, the question's examples or input/output pairs, a later
compared block that uses what it binds; and which of its functions nothing compared reaches.
"""

from __future__ import annotations

import ast
import re

from verifiers.code._extract import Block
from verifiers.code._state import _Plan
from verifiers.code._static import defined_names


#: The note of a block that ran cleanly with nothing about its behaviour compared.
RAN_ONLY = "ran without errors; nothing about its behaviour was compared"


def _vacuous(test: ast.expr) -> bool:
    """True when an ``assert``'s test compares nothing about what the code computes, so that it
    holds for (nearly) any implementation: no name at all (``assert True``, ``assert 2 + 2 ==
    4``), an ``or`` with an operand that holds by itself (``... == 6 or True``), a comparison of
    an expression with itself (``f(x) == f(x)``), a check of presence or type only (``x is not
    None``, ``isinstance(x, int)``, ``callable(f)``), a tuple or list (``assert (x == 6, "msg")``
    is always true), a conditional expression with such a branch. Such an assert held is evidence that the
    code runs, not that it is right (docs/design.md "Asymmetric trust": a run is not a behaviour
    check); the checked draft cannot write its own pass with one."""
    if not any(isinstance(n, ast.Name) for n in ast.walk(test)):
        return True
    if isinstance(test, (ast.Tuple, ast.List, ast.Set, ast.Dict)):  # a non-empty display is always true
        return bool(getattr(test, "elts", None) or getattr(test, "keys", None))
    if isinstance(test, ast.IfExp):
        return _vacuous(test.body) or _vacuous(test.orelse)
    if isinstance(test, ast.BoolOp):
        if isinstance(test.op, ast.Or):
            return any(_vacuous(v) for v in test.values)
        return all(_vacuous(v) for v in test.values)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = ast.dump(test.left), ast.dump(test.comparators[0])
        if left == right:
            return True
        op, rhs = test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Is, ast.IsNot, ast.Eq, ast.NotEq)) and isinstance(rhs, ast.Constant) \
                and rhs.value is None:
            return isinstance(op, (ast.IsNot, ast.NotEq))
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) \
            and test.func.id in ("isinstance", "callable", "hasattr", "issubclass"):
        return True
    return False


def _main_guard(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either order)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return any(isinstance(x, ast.Name) and x.id == "__name__" for x in sides) and \
        any(isinstance(x, ast.Constant) and x.value == "__main__" for x in sides)


def _own_asserts(tree: ast.AST | None) -> int:
    """``assert`` statements the block runs itself that test its behaviour, and that run for
    sure with a failure that surfaces: statements of the module body, of an ``if __name__ ==
    "__main__":`` body, or of a ``for`` loop over a non-empty literal list or tuple of cases
    (recursively). An assert in a function or class body is a precondition, not a test of what
    the code does; one under another ``if``, a ``while``, a ``try`` or a ``with`` may never run
    (``if False:``, ``for _ in []:``) or have its failure swallowed (``except AssertionError:
    pass``, ``contextlib.suppress``), so its clean run compares nothing. Vacuous tests
    (:func:`_vacuous`) do not count either."""
    if tree is None:
        return 0

    def count(stmts: list[ast.stmt]) -> int:
        n = 0
        for node in stmts:
            if isinstance(node, ast.Assert):
                n += not _vacuous(node.test)
            elif isinstance(node, ast.If) and _main_guard(node.test):
                n += count(node.body)
            elif isinstance(node, ast.For) and isinstance(node.iter, (ast.List, ast.Tuple)) and node.iter.elts \
                    and not any(isinstance(x, (ast.Break, ast.Continue)) for x in ast.walk(node)):
                n += count(node.body)
        return n

    return count(getattr(tree, "body", []) or [])


def _untested(p: _Plan, b: Block) -> list[str]:
    """The functions and classes block ``b`` defines at top level that nothing compared reaches:
    no counted own assert (:func:`_own_asserts`), example or stated output of the block, question
    example or later block names them, nor a function so reached calls them. "def total ...;
    def double ...; assert total([1, 2, 3]) == 6" compared ``total`` only: a clean run is no
    check of ``double``. ``[]`` when the question gives stdin/stdout pairs (the program runs as
    a whole) or the block defines nothing."""
    tree = b.tree
    if tree is None or p.stdin_cases:
        return []
    defs = {node.name: node for node in getattr(tree, "body", []) or []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    if not defs:
        return []

    def names(node: ast.AST) -> set[str]:
        out = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return out | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}

    reached: set[str] = set()
    stack = list(getattr(tree, "body", []) or [])
    while stack:  # the counted asserts (module body, main guard, literal case loops)
        node = stack.pop()
        if isinstance(node, ast.Assert) and not _vacuous(node.test):
            reached |= names(node)
        elif isinstance(node, ast.If) and _main_guard(node.test):
            stack.extend(node.body)
        elif isinstance(node, ast.For) and isinstance(node.iter, (ast.List, ast.Tuple)):
            if any(isinstance(x, ast.Assert) for x in node.body):
                reached |= names(node)
            stack.extend(node.body)
    for e in p.examples:
        if e.block in (b.index, None):
            reached |= set(re.findall(r"[A-Za-z_]\w*", e.source))
    for later in p.runnable:
        if later.index > b.index and later.tree is not None and _directly_compared(p, later):
            reached |= names(later.tree)
    todo = [n for n in reached if n in defs]
    seen: set[str] = set()
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(m for m in names(defs[n]) if m in defs and m not in seen)
    return [n for n in defs if n not in seen]


def _behaviour_compared(p: _Plan, b: Block) -> str:
    """:func:`_directly_compared` for ``b``, or -- the blocks run in one namespace, in order --
    a later block with a comparison of its own that uses a name ``b`` binds (``r = 2`` before
    ``print(math.pi * r ** 2)  # Output: 12.57``); else ``""``."""
    own = _directly_compared(p, b)
    if own:
        return own
    bound = defined_names(b.tree) if b.tree is not None else set()
    for later in p.runnable:
        if later.index <= b.index or later.kind == "pycon" or later.tree is None:
            continue
        used = {n.id for n in ast.walk(later.tree) if isinstance(n, ast.Name)}
        used |= {a.value.id for a in ast.walk(later.tree) if isinstance(a, ast.Attribute) and isinstance(a.value, ast.Name)}
        if bound & used and _directly_compared(p, later):
            return f"block {later.index + 1} uses what it defines and is compared"
    return ""


def _directly_compared(p: _Plan, b: Block) -> str:
    """What about block ``b``'s own behaviour its run compared (docs/design.md "Asymmetric trust": code
    that merely runs is not verified), or ``""``: its own ``assert`` statements (they held: the
    block ran without an exception), an example or stated output of its own (docstring,
    ``# Output:``, prose), a question example that calls a function the block defines (or any
    question example when the answer has one runnable block), the question's stdin/stdout pairs.
    The examples are separate checks; this only says the block's clean run is part of a
    behaviour check."""
    n = _own_asserts(b.tree)
    if n:
        return f"{n} assert statement(s) of its own hold"
    if any(e.block == b.index for e in p.examples):
        return "its own examples or stated outputs are compared"
    defined = {node.name for node in getattr(b.tree, "body", []) or []
               if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    single = sum(1 for x in p.runnable if x.kind != "pycon") == 1
    for e in p.examples:
        if e.block is None and (single or any(re.search(rf"\b{re.escape(f)}\b", e.source) for f in defined)):
            return "the question's examples are compared"
    if p.stdin_cases:
        return "the question's input/output pairs are compared"
    return ""
