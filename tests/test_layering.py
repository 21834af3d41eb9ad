"""The layering docs/design.md "Folders" states: ``verifiers`` is a library of pure checks and never
imports ``proxy`` (the gateway binds it, not the other way round). Read from the source's import
statements (ast), lazy imports inside functions included."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.append((node.lineno, node.module))
    return out


def test_verifiers_never_import_proxy() -> None:
    files = sorted((ROOT / "verifiers").rglob("*.py"))
    assert len(files) > 20  # the library is there: the walk read something
    bad = [f"{p.relative_to(ROOT)}:{line} imports {mod}" for p in files for line, mod in _imports(p)
           if mod == "proxy" or mod.startswith("proxy.")]
    assert not bad, bad


def test_the_walk_sees_a_lazy_import_inside_a_function(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from proxy.policy import PolicyStore\n    import proxy.config\n")
    assert [m for _, m in _imports(f)] == ["proxy.policy", "proxy.config"]
