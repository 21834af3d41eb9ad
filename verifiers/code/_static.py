"""Tiers 1 and 2 of the code verifier: syntax (``ast.parse``) and definite static errors
(pyflakes), with the policy that keeps fragments and notebook-style snippets from becoming
false alarms."""

from __future__ import annotations

import ast
import builtins
import difflib
import re
import sys
from dataclasses import dataclass

import pyflakes.checker
import pyflakes.messages as pm

# pyflakes findings that are definite runtime errors when the code runs (not style).
DEFINITE = (
    pm.UndefinedLocal,
    pm.PercentFormatMissingArgument,
    pm.PercentFormatPositionalCountMismatch,
    pm.PercentFormatExpectedMapping,
    pm.PercentFormatExpectedSequence,
    pm.PercentFormatMixedPositionalAndNamed,
    pm.PercentFormatUnsupportedFormatCharacter,
    pm.StringDotFormatMissingArgument,
    pm.StringDotFormatMixingAutomatic,
    pm.StringDotFormatInvalidFormat,
)

# Conventional aliases of modules: `np.array(...)` without any `import numpy as np` in an
# answer that imports other things is a missing import, not user context.
MODULE_ALIASES = {
    "np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot", "sp": "sympy", "math": "math",
    "os": "os", "sys": "sys", "re": "re", "json": "json", "random": "random", "time": "time",
    "datetime": "datetime", "collections": "collections", "itertools": "itertools",
    "functools": "functools", "string": "string", "heapq": "heapq", "bisect": "bisect",
    "statistics": "statistics", "csv": "csv", "copy": "copy", "operator": "operator",
}

# Names a notebook/REPL/framework provides without a definition in the snippet.
AMBIENT = {"display", "get_ipython", "In", "Out", "spark", "sc", "dbutils", "__file__", "__builtins__",
           "exit", "quit", "reveal_type", "_"}


@dataclass
class Finding:
    """One tier-1/2 result for a block: ``outcome`` fail|unknown, message, 1-based line/col."""

    tier: int
    outcome: str
    kind: str
    message: str
    line: int | None = None
    col: int | None = None
    name: str | None = None


_PLACEHOLDER = re.compile(r"<\s*[A-Za-z][\w .\-/]*>|\{\{.*?\}\}")
_FRAGMENT_START = re.compile(r"^\s*(elif|else|except|finally|case)\b")


def syntax_finding(code: str, exc: SyntaxError) -> Finding:
    """Tier 1: a SyntaxError is a ``fail`` with line/col, except for template placeholders
    (``<YOUR_KEY>``, ``{{var}}``) and obvious fragments (a block starting with ``elif``/
    ``except``, a bare ``...`` continuation), which are ``unknown``."""
    lines = code.split("\n")
    ln = exc.lineno or 0
    text = lines[ln - 1] if 0 < ln <= len(lines) else (exc.text or "")
    first = next((x for x in lines if x.strip()), "")
    msg = f"{type(exc).__name__}: {exc.msg}"
    if _PLACEHOLDER.search(text or ""):
        return Finding(1, "unknown", "placeholder", f"{msg} (line has a template placeholder)", ln, exc.offset)
    if _FRAGMENT_START.match(first) or first.strip() in ("...", "…"):
        return Finding(1, "unknown", "fragment", f"{msg} (block looks like a fragment)", ln, exc.offset)
    return Finding(1, "fail", "syntax", msg, ln, exc.offset)


def defined_names(tree: ast.AST) -> set[str]:
    """Every name the code binds anywhere (assignments, defs, imports, params, loop targets,
    comprehension targets, ``global``), used to avoid flagging cross-block references."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.arg):
            out.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
        elif isinstance(node, ast.MatchAs) and node.name:
            out.add(node.name)
        elif isinstance(node, ast.MatchStar) and node.name:
            out.add(node.name)
    return out


def has_star_import(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))


def has_import(tree: ast.AST) -> bool:
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))


def _attr_bases(tree: ast.AST) -> set[str]:
    return {n.value.id for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)}


BUILTIN_NAMES = set(dir(builtins))


#: Undefined names per block checked for a near-miss spelling (see :func:`static_findings`).
NEAR_MISS_LOOKUPS = 50


def static_findings(tree: ast.Module, *, answer_names: set[str], answer_star: bool, answer_imports: bool) -> list[Finding]:
    """Tier 2 for one block. ``answer_names``: names bound anywhere in the answer's Python
    blocks (earlier *or* later, so cross-block references are not flagged);
    ``answer_star``: some block does ``from x import *``.

    Undefined-name policy (false alarms cost more than misses):

    - a name bound elsewhere in the answer, ambient in notebooks (``display``, ``spark``), or
      possibly from a star import -> nothing;
    - a near-miss of a builtin or of a name the answer binds (``pritn``, ``lenght``,
      ``reuslt``; ``difflib`` ratio >= 0.8, or equal ignoring case) -> ``fail``;
    - a conventional module alias used as ``np.x`` when the answer imports other modules but
      never this one -> ``fail`` (missing import);
    - anything else (``df``, ``model``: probably the user's context) -> ``unknown``.
    """
    out: list[Finding] = []
    try:
        checker = pyflakes.checker.Checker(tree, filename="<answer>")
    except (RecursionError, Exception) as exc:  # noqa: BLE001 - pyflakes bug on odd input
        return [Finding(2, "unknown", "linter", f"pyflakes could not analyse the block: {type(exc).__name__}")]
    bases = _attr_bases(tree)
    known = (answer_names | BUILTIN_NAMES) - {"_"}
    known_sorted: list[str] | None = None  # built on the first undefined name only
    by_lower: dict[str, list[str]] = {}
    lookups = 0
    for msg in sorted(checker.messages, key=lambda m: (m.lineno, m.col)):
        line, col = msg.lineno, (msg.col or 0) + 1
        if isinstance(msg, pm.UndefinedName):
            name = msg.message_args[0]
            if name in answer_names or name in AMBIENT or answer_star:
                continue
            # near-miss search: difflib against every known name costs ~1-2 ms per undefined name,
            # so a block of 1,000 undefined names took seconds; past NEAR_MISS_LOOKUPS names the
            # rest are `unknown` (a miss, never a false alarm)
            near: list[str] = []
            ci: list[str] = []
            if lookups < NEAR_MISS_LOOKUPS:
                lookups += 1
                if known_sorted is None:
                    known_sorted = sorted(known)
                    for k in known_sorted:
                        by_lower.setdefault(k.lower(), []).append(k)
                near = difflib.get_close_matches(name, known_sorted, n=1, cutoff=0.8)
                ci = [k for k in by_lower.get(name.lower(), ()) if k != name]
            if len(name) >= 3 and (near or ci):
                guess = (ci or near)[0]
                out.append(Finding(2, "fail", "undefined-name", f"name '{name}' is not defined (did you mean '{guess}'?)", line, col, name))
            elif name in MODULE_ALIASES and name in bases and answer_imports:
                out.append(Finding(2, "fail", "missing-import", f"name '{name}' is not defined: missing `import {MODULE_ALIASES[name]}"
                                   + (f" as {name}`" if MODULE_ALIASES[name] != name else "`"), line, col, name))
            else:
                out.append(Finding(2, "unknown", "context-name", f"name '{name}' is not defined in the answer (may come from the user's code)", line, col, name))
        elif isinstance(msg, DEFINITE):
            out.append(Finding(2, "fail", type(msg).__name__, msg.message % msg.message_args, line, col))
    return out


def stdlib_or_installed(name: str) -> bool:
    """True for a standard-library top-level module name (``sys.stdlib_module_names``)."""
    return name in sys.stdlib_module_names


#: Value types of the standard library whose behaviour a subclass can disguise.
_VALUE_TYPES = frozenset("int float complex str bytes bool list tuple dict set frozenset Decimal Fraction".split())
#: Methods through which ``==``, truth, ``print`` and ``repr`` read an object.
_JUDGING = frozenset("__eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __len__ __repr__ __str__ __format__".split())
#: Enum mixins (``class Color(str, Enum)`` with its own ``__str__``) are no disguise.
_ENUMS = frozenset("Enum IntEnum StrEnum Flag IntFlag".split())
_COMPARING = frozenset("__eq__ __ne__ __bool__".split())
_REFLECTIVE = frozenset("globals vars locals".split())


def _constant_returns(fn: ast.AST) -> bool:
    """True when function or lambda ``fn`` answers the same whatever it is given: a lambda whose
    body is a constant, or a ``def`` whose every ``return`` gives a constant (at least one)."""
    if isinstance(fn, ast.Lambda):
        return isinstance(fn.body, ast.Constant)
    if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        rets = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
        return bool(rets) and all(isinstance(r.value, ast.Constant) for r in rets)
    return False


def _base_name(b: ast.expr) -> str | None:
    return b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else None


def _names_modules(e: ast.expr) -> bool:
    """``e`` reads the module table: ``sys.modules[...]``, ``modules[...]`` after ``from sys import
    modules`` (a name or attribute ``modules``; not any identifier or string that contains the word,
    ``setattr(modules_cfg, ...)``)."""
    return any((isinstance(n, ast.Attribute) and n.attr == "modules") or (isinstance(n, ast.Name) and n.id == "modules")
               for n in ast.walk(e))


def self_judging(tree: ast.AST | None) -> str | None:
    """Why a block's run cannot vouch for it because the block writes how its results are
    judged, or None. The harness runs a block's own ``assert`` with the block's ``==`` and
    prints its values with the block's ``repr``/``str`` (``_harness``); so a block that

    * subclasses a value type (``int``, ``str``, ``list``, ...) and redefines how it compares,
      tests true or prints (``class R(int): __eq__ = lambda s, o: True``; ``__repr__`` returning
      ``'4'``) -- a disguised value, seldom honest code;
    * defines ``__eq__``/``__ne__``/``__bool__`` that answer a constant whatever they compare
      (an object equal to everything);
    * rebinds ``print`` at top level to its own definition (its stated outputs are then the
      block's own words; ``from rich import print`` is another library's and stays);
    * rewrites its own namespace by reflection (``globals()[...] = ``, ``vars().update``,
      ``setattr(sys.modules[__name__], ...)``) -- the name under test replaced behind its
      definition;

    wrote its own verdict (docs/design.md "A verdict rests on what the checked content cannot write").
    The caller turns the run's passes into ``unknown``; failures stand."""
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            members: dict[str, ast.AST] = {}
            for s in node.body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    members[s.name] = s
                elif isinstance(s, ast.Assign):
                    for t in s.targets:
                        if isinstance(t, ast.Name):
                            members[t.id] = s.value
            judged = sorted(set(members) & _JUDGING)
            bases = {_base_name(b) for b in node.bases}
            if judged and bases & _VALUE_TYPES and not bases & _ENUMS:
                return f"it disguises a value: class {node.name} subclasses a value type and redefines {judged[0]}"
            for name in sorted(set(members) & _COMPARING):
                if _constant_returns(members[name]):
                    return f"its {node.name}.{name} answers the same whatever it compares"
        elif isinstance(node, ast.Call) and _base_name(node.func) == "type" and len(node.args) == 3 \
                and isinstance(node.args[2], ast.Dict):
            keys = {k.value for k in node.args[2].keys if isinstance(k, ast.Constant)}
            if keys & _JUDGING:
                return "it builds a class with type() that redefines how its objects compare or print"
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in _COMPARING:
                    return f"it assigns {t.attr} to an object after its class was made"
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Call) \
                        and _base_name(t.value.func) in _REFLECTIVE:
                    return f"it rewrites its own namespace through {_base_name(t.value.func)}()"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
                "update", "__setitem__", "setdefault") and isinstance(node.func.value, ast.Call) \
                and _base_name(node.func.value.func) in _REFLECTIVE:
            return f"it rewrites its own namespace through {_base_name(node.func.value.func)}()"
        elif isinstance(node, ast.Call) and _base_name(node.func) == "setattr" and node.args \
                and _names_modules(node.args[0]):
            return "it rewrites a module's namespace through setattr(sys.modules[...])"
    for s in getattr(tree, "body", []) or []:
        bound: list[str] = []
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound = [s.name]
        elif isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            ts = s.targets if isinstance(s, ast.Assign) else [s.target]
            bound = [n.id for t in ts for n in ast.walk(t) if isinstance(n, ast.Name)]
        # (an import of another module's print, ``from rich import print``, is that library's)
        if "print" in bound:
            return "it rebinds print, so what it prints is its own word"
    return None
