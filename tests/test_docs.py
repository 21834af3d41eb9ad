"""README.md, ``docs/`` and ``bench/RESULTS.md`` as a newcomer follows them on a fresh clone.

* every Markdown link resolves: the file exists and, for a ``#fragment``, the page has that heading
  (GitHub's anchor rule: lower case, punctuation dropped, spaces to hyphens);
* every repository path the pages name (``proxy/...``, ``verifiers/...``, ``docs/...``, ``bench/...``,
  ``deploy/...``, ``policies/...``, ``tests/...``) exists, apart from the few files the pages tell
  the reader to create;
* the README stays a front page (at most 300 lines), its map names every page of ``docs/`` and
  every ``make`` target it names is in the Makefile;
* the README's one example, run as written against a gateway in demo mode, prints what its
  comments say;
* ``docs/layout.md`` names every module of the packages it maps module by module;
* every citation of ``docs/design.md`` names a heading of it, and nothing cites a numbered design
  document the repository does not hold.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

PAGES = [ROOT / "README.md", ROOT / "bench" / "RESULTS.md", *sorted((ROOT / "docs").glob("*.md"))]

# paths the pages tell the reader to create (or show in an example message); not in the tree
TO_CREATE = {
    "bench/.venv-litellm", "bench/.venv-litellm/bin/pip",   # docs/benchmarks.md: the LiteLLM venv
    "deploy/veracity.yaml",                                  # docs/deploying.md: cp the example
    "policies/team.yaml",                                    # docs/configuration.md: an error message
}

def _slug(heading: str) -> str:
    """GitHub's heading anchor: lower case, punctuation other than ``-``/``_`` dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _prose(text: str) -> list[str]:
    """The lines of a Markdown page outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return out


def _anchors(page: Path) -> set[str]:
    return {_slug(ln.lstrip("#")) for ln in _prose(page.read_text()) if ln.startswith("#")}


def test_docs_exist_and_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    assert len(pages) >= 15, pages
    unmapped = [p for p in pages if f"](docs/{p})" not in readme]
    assert not unmapped, f"docs pages the README's map does not name: {unmapped}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_resolves(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, fragment = target.partition("#")
        dest = (page.parent / path) if path else page
        if not dest.exists():
            broken.append(target)
        elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
            broken.append(target)
    assert not broken, broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(page: Path) -> None:
    named = re.findall(r"(?<![\w./-])((?:proxy|verifiers|bench|deploy|policies|tests|docs)/[\w./-]*\w)",
                       page.read_text())
    missing = sorted({p for p in named if not (ROOT / p).exists() and p not in TO_CREATE})
    assert not missing, missing


def test_every_make_target_the_readme_names_exists() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`make ([a-z][\w-]*)", readme)) | set(re.findall(r"^make ([a-z][\w-]*)", readme, re.M))
    assert {"run", "test"} <= named
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    assert {"test-fast"} <= named
    assert named - targets == set()


def test_readme_example_prints_what_its_comments_say(gateway_factory: Any) -> None:
    pytest.importorskip("openai")
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```python\n") + len("```python\n")
    code = readme[start:readme.index("```", start)]
    assert 'base_url="http://127.0.0.1:8080/v1"' in code
    gw = gateway_factory(None)                  # no config file, no OPENAI_API_KEY: demo mode
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code.replace("http://127.0.0.1:8080/v1", gw.base_url), "README example", "exec"), {})  # noqa: S102
    printed = out.getvalue().splitlines()
    comments = [ln.split("# ", 1)[1] for ln in code.splitlines() if ln.startswith("# ")]
    assert printed[0] == "1234 × 5678 = 7,006,652.", printed
    assert printed[1] == comments[0], (printed, comments)          # corrected [('arithmetic', 'pass', ...)]
    assert printed[2] == "1", printed                             # one correction round


# the packages whose modules docs/layout.md names one by one (its rows for proxy/'s packages, the
# shared modules of verifiers/ and the code verifier's steps); a module added or split there must
# be named in the map, in backticks, by its module name
MAPPED_PACKAGES = ["proxy/_asgi", "proxy/routes", "proxy/pipeline", "proxy/upstreams", "proxy/wire",
                   "proxy/stores", "proxy/observability", "proxy/cli", "verifiers", "verifiers/code"]


@pytest.mark.parametrize("package", MAPPED_PACKAGES)
def test_layout_names_every_module(package: str) -> None:
    """docs/layout.md is the map of the code: every module of a package it maps module by module
    (``__init__`` and ``__main__`` aside) is named there as `` `name` ``, so a split or a new module
    that the map does not mention fails here rather than misleading the next reader."""
    layout = (ROOT / "docs" / "layout.md").read_text()
    named = set(re.findall(r"`([\w.]+)`", layout))
    modules = sorted(p.stem for p in (ROOT / package).glob("*.py") if p.stem not in {"__init__", "__main__"})
    assert modules, package
    unnamed = [m for m in modules if m not in named and f"{m}.py" not in named]
    assert not unnamed, f"{package}: modules docs/layout.md does not name: {unnamed}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_cited_in_a_module_is_defined_there(page: Path) -> None:
    """A page that cites a function as `` `path/to/module.py` `name` `` sends the reader to that
    file for it: the module must define ``name`` (``def``, ``class`` or a top-level assignment), so
    a split that moves the function elsewhere fails here, not in the reader's editor."""
    cited = re.findall(r"`((?:proxy|verifiers)/[\w/]+\.py)` `([A-Za-z_]\w*)`", page.read_text())
    missing = []
    for path, name in cited:
        source = (ROOT / path).read_text() if (ROOT / path).exists() else ""
        if not re.search(rf"^\s*(?:async\s+def|def|class)\s+{name}\b|^{name}\s*[:=]", source, re.M):
            missing.append(f"{path} {name}")
    assert not missing, missing


def test_policy_defaults_differ_from_default_yaml_only_where_policies_md_says(tmp_path: Path) -> None:
    """docs/policies.md says a field a policy file leaves out takes the built-in default, which is
    ``policies/default.yaml``'s value but for ``streaming.mode``, ``verifiers.planner.enabled``,
    the daily budgets and ``overridable``: an empty policy and the shipped ``default`` differ in
    exactly those fields (and the name and description)."""
    from proxy.policy import load_file

    (tmp_path / "empty.yaml").write_text("name: empty\n")
    builtin = load_file(tmp_path / "empty.yaml").model_dump()
    shipped = load_file(ROOT / "policies" / "default.yaml").model_dump()

    def differ(a: Any, b: Any, path: str = "") -> list[str]:
        if isinstance(a, dict) and isinstance(b, dict):
            return [d for k in sorted(set(a) | set(b)) for d in differ(a.get(k), b.get(k), f"{path}.{k}")]
        return [path.lstrip(".")] if a != b else []

    fields = {f for f in differ(builtin, shipped) if f not in ("name", "description")}
    # no `use` in the policy means the citation verifier's own default list, the same as default.yaml's
    from verifiers.citations._config import Sources
    assert builtin["verifiers"]["citations"]["sources"].get("use") is None
    assert Sources().use == shipped["verifiers"]["citations"]["sources"]["use"]
    fields.discard("verifiers.citations.sources.use")
    assert fields == {"streaming.mode", "verifiers.planner.enabled", "overridable",
                      "budgets.key_daily.extra_tokens", "budgets.key_daily.cost_usd",
                      "budgets.team_daily.extra_tokens", "budgets.team_daily.cost_usd"}, fields
    text = (ROOT / "docs" / "policies.md").read_text()
    assert "except `streaming.mode`" in text and "`verifiers.planner.enabled` (`false`)" in text


# --- citations of docs/design.md --------------------------------------------------------------

# Where the code, tests, benchmarks, deployment files and pages may cite the design page.
_CITING_DIRS = ("proxy", "verifiers", "tests", "bench", "deploy", "docs", "policies", ".ci")
_CITING_SUFFIXES = {".py", ".md", ".yml", ".yaml", ".toml", ".html", ".txt", ".sh", ".cfg", ".ini", ".json"}
_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".venv", "node_modules", ".git"}

# One citation: the page's path, optionally ``vocabulary``, then one or more section titles in
# double quotes separated by commas (each may again say ``vocabulary``). Read on text whose line
# breaks and comment markers are collapsed (see :func:`_joined`), so a title wrapped over two
# comment or docstring lines is read whole.
_QUOTED = r'(?:vocabulary\s+)?"[^"]{1,100}"'
_CITATION = re.compile(rf'docs/design\.md,?\s+({_QUOTED}(?:,\s*{_QUOTED})*)')
_PAGE = re.compile(r"docs/design\.md")
_OLD_NAME = re.compile(r"\bDESIGN\b")   # the page as it was cited when it lived outside the repository


def _citing_files() -> list[Path]:
    """Every text file that may cite the design page: README.md, Makefile, pyproject.toml and the
    text files under :data:`_CITING_DIRS` (caches and virtualenvs left out)."""
    files = [ROOT / "README.md", ROOT / "Makefile", ROOT / "pyproject.toml"]
    for top in _CITING_DIRS:
        for p in sorted((ROOT / top).rglob("*")):
            if (p.is_file() and not _SKIP_DIRS.intersection(p.relative_to(ROOT).parts)
                    and (p.suffix in _CITING_SUFFIXES or p.name in ("Dockerfile", "Makefile"))):
                files.append(p)
    return [p for p in files if p.exists()]


def _joined(text: str) -> str:
    """``text`` with each line break, and the indentation and comment marker (``#``, ``#:``,
    ``//``) that begin the next line, replaced by one space."""
    return re.sub(r"[ \t]*\n[ \t]*(?:#:?|//)?[ \t]*", " ", text)


def _design_sections() -> set[str]:
    """The headings of docs/design.md (outside code blocks), as written."""
    page = (ROOT / "docs" / "design.md").read_text()
    return {ln.lstrip("#").strip() for ln in _prose(page) if ln.startswith("#")}


def test_design_page_has_the_sections_the_code_relies_on() -> None:
    """The sections named in the task of docs/design.md stay headings of it (the page is cited by
    these names from the code; renaming one breaks every citation)."""
    assert {"The path of one request", "The verifier model", "Asymmetric trust", "What every verdict states",
            "False alarms cost more than misses", "Test against an independent oracle", "Folders",
            "Shared vocabulary", "Things that are easy to get wrong", "basis", "coverage", "report",
            } <= _design_sections()


def test_every_design_citation_names_a_section_that_exists() -> None:
    """A comment, docstring, test or page that cites docs/design.md names the section it means,
    and docs/design.md has a heading of that name, so a newcomer on a fresh clone can follow it.
    Every mention of the page is such a citation, but a Markdown link target (``](docs/design.md``,
    ``../docs/design.md``), which tests/test_docs.py's link check resolves."""
    sections = _design_sections()
    files = _citing_files()
    assert len(files) > 100, "the scan found too few files: is ROOT right?"
    unknown, unnamed, cited = [], [], 0
    for path in files:
        if path == Path(__file__).resolve():
            continue   # this file speaks about the page; it cites no section of it
        text = _joined(path.read_text(errors="replace"))
        where = str(path.relative_to(ROOT))
        for m in _PAGE.finditer(text):
            before = text[max(0, m.start() - 3):m.start()]
            if before.endswith(("](", "../")):
                continue   # a Markdown link target
            c = _CITATION.match(text, m.start())
            if c is None:
                unnamed.append(f"{where}: {text[m.start():m.start() + 60]!r}")
                continue
            for title in re.findall(r'"([^"]+)"', c.group(1)):
                cited += 1
                if title not in sections:
                    unknown.append(f"{where}: {title!r}")
    assert not unnamed, f"citations of docs/design.md that name no section: {unnamed}"
    assert not unknown, f"cited sections docs/design.md has no heading for: {unknown}"
    assert cited >= 50, cited   # the code cites the page throughout: a scan that finds few is broken


def test_no_reference_to_the_design_page_outside_the_repository() -> None:
    """The design page once lived outside the repository under an upper-case name that a fresh
    clone does not have; every reference now names docs/design.md."""
    stale = [f"{p.relative_to(ROOT)}:{n}" for p in _citing_files()
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1) if _OLD_NAME.search(line)]
    assert not stale, stale


# A numbered design document ("design §4.2", "design 003 §5", "Design 000 §2.2.3"), or an unnamed
# one ("(design: ...)", "the design's rule"), that is not in the repository: a newcomer on a fresh
# clone cannot follow it. Cite a docs/design.md heading, a docs/ page or the paper or spec the rule
# comes from instead. A section sign after a spec's name ("RFC 9110 §10.2.3", "CommonMark 0.31
# §4.5") is not such a citation.
_NUMBERED_DESIGN = re.compile(r"\bdesign\s+(?:\d{3}\s*)?§\s?\d|\bdesign\s+\d{3}\b"
                              r"|\(design(?:\s+rule)?:|\bthe\s+design's\b", re.IGNORECASE)


def test_numbered_design_citation_pattern() -> None:
    """The pattern finds the numbered forms, wrapped or not, and leaves spec sections and the
    cited docs/design.md alone (so the scan below can fail, and fails only on what it means)."""
    for cited in ("design §4.2", "(Design §3.2)", "design 003 §5", "design 000 §2.2.3", "design 003",
                  _joined("after the design\n    # §6.1 rule"), '(design: "a rule")', "the design's rule"):
        assert _NUMBERED_DESIGN.search(cited), cited
    for fine in ('docs/design.md "Asymmetric trust"', "RFC 9110 §10.2.3", "CommonMark 0.31 §4.5",
                 "the design page", "designs 2024", "recall is low by design (a few percent)"):
        assert not _NUMBERED_DESIGN.search(fine), fine


def test_no_citation_of_a_numbered_design_document() -> None:
    """No comment, docstring, test, page or deployment file cites a numbered (or unnamed) design
    document that is not in the repository; each names what a fresh clone has."""
    stale = []
    for path in _citing_files():
        if path == Path(__file__).resolve():
            continue   # this file names the forms it forbids
        text = _joined(path.read_text(errors="replace"))
        stale += [f"{path.relative_to(ROOT)}: {m.group(0)!r}" for m in _NUMBERED_DESIGN.finditer(text)]
    assert not stale, stale
