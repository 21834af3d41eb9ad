"""The stated public surface (``__all__``) of ``proxy``, ``verifiers`` and each of their
subpackages, kept as httpx keeps its own (tests/test_exported_members.py there): every package
states one; every name in it exists and is documented; ``proxy`` uses ``verifiers`` only through
it (docs/design.md "Folders": the gateway binds the library, through the library's public names).

"Documented": a module, class or function has its own docstring; any other value (a constant)
has a ``#:`` comment on the line above its assignment in its package, or is named in the
package docstring. Read from the source (ast) and by importing the packages.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _packages(top: str) -> list[str]:
    """``top`` and every subpackage under it (folders with an ``__init__.py``)."""
    base = ROOT / top
    return sorted(top + "".join("." + part for part in p.parent.relative_to(base).parts)
                  for p in base.rglob("__init__.py"))


PACKAGES = _packages("proxy") + _packages("verifiers")


def _own_doc(obj: object) -> str | None:
    if isinstance(obj, type):
        return obj.__dict__.get("__doc__")
    return getattr(obj, "__doc__", None)


def _has_doc_comment(package: str, name: str) -> bool:
    """A ``#:`` comment right above ``name = ...`` / ``name: T = ...`` in the package's files."""
    folder = ROOT / package.replace(".", "/")
    assign = re.compile(rf"^{re.escape(name)}\s*(?::[^=]*)?=")
    for path in folder.rglob("*.py"):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if assign.match(line) and i and lines[i - 1].lstrip().startswith("#:"):
                return True
    return False


def _member(module: types.ModuleType, name: str) -> object:
    """``module.name``, or the submodule ``module.name`` when the name is one."""
    if hasattr(module, name):
        return getattr(module, name)
    return importlib.import_module(f"{module.__name__}.{name}")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_states_a_documented_surface(package: str) -> None:
    module = importlib.import_module(package)
    assert module.__doc__ and module.__doc__.strip(), f"{package} has no docstring"
    names = getattr(module, "__all__", None)
    assert isinstance(names, list) and names, f"{package} states no __all__"
    assert len(names) == len(set(names)), f"{package}.__all__ repeats a name"
    undocumented = []
    for name in names:
        obj = _member(module, name)  # AttributeError / ImportError: a name that does not exist
        if isinstance(obj, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)) \
                or inspect.isfunction(obj):
            doc = _own_doc(obj)
            if not (doc and doc.strip()):
                undocumented.append(name)
        elif not (name in (module.__doc__ or "") or _has_doc_comment(package, name)):
            undocumented.append(name)
    assert not undocumented, f"{package}.__all__ names without documentation: {undocumented}"


def test_the_proxy_surface_is_what_an_embedder_needs() -> None:
    import proxy

    for name in ("create_app", "Gateway", "load_config", "parse_config", "GatewayConfig", "main"):
        assert name in proxy.__all__
    from proxy.app import create_app
    from proxy.gateway import Gateway

    assert proxy.create_app is create_app and proxy.Gateway is Gateway
    with pytest.raises(AttributeError):
        proxy.no_such_name  # noqa: B018


def _verifiers_imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, imported names)`` of each import of ``verifiers`` in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "verifiers"]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and node.module.split(".")[0] == "verifiers":
            out.append((node.lineno, node.module, [a.name for a in node.names]))
    return out


def _outside_surface(module_name: str, names: list[str]) -> list[str]:
    """What of ``from module_name import names`` is not public: a ``_private`` module on the
    path, a name its ``__all__`` does not list (a public submodule counts as listed)."""
    if any(part.startswith("_") for part in module_name.split(".")):
        return [module_name]
    module = importlib.import_module(module_name)
    public = set(getattr(module, "__all__", ()))
    bad = []
    for name in names:
        if name in public:
            continue
        is_package = hasattr(module, "__path__")
        if is_package and not name.startswith("_") and \
                any(m.name == name for m in pkgutil.iter_modules(module.__path__)):
            continue
        bad.append(f"{module_name}.{name}")
    return bad


def test_proxy_uses_verifiers_through_its_surface() -> None:
    files = sorted((ROOT / "proxy").rglob("*.py"))
    seen = 0
    bad = []
    for path in files:
        for line, module_name, names in _verifiers_imports(path):
            seen += 1
            bad += [f"{path.relative_to(ROOT)}:{line} imports {x}" for x in _outside_surface(module_name, names)]
    assert seen > 10  # the walk read the gateway's imports
    assert not bad, bad


def test_the_surface_check_sees_a_private_import() -> None:
    assert _outside_surface("verifiers._types", ["Check"]) == ["verifiers._types"]
    assert _outside_surface("verifiers.run", ["_timeout_of"]) == ["verifiers.run._timeout_of"]
    assert _outside_surface("verifiers", ["Report", "risk"]) == []
