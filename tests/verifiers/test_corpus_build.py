"""``veracity corpus build``: HTML read in one linear pass, unreadable files (and JSONL lines)
skipped and reported rather than aborting the build, links out of a given folder not followed.

The reading time of 40,000 ``<p>`` is measured in ``bench/corpus_html_bench.py`` (153 s before
the linear reader, under a second after); the test below only carries a hang guard far above it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from verifiers.facts.backends.local import LocalBackend
from verifiers.facts.corpus import build_corpus, collect_files, read_html

ROOT = Path(__file__).resolve().parents[2]


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proxy", "corpus", "build", *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)


def _search(db: Path, q: str) -> list[str]:
    return [p.text for p in asyncio.run(LocalBackend(db).search(q, 5))]


@pytest.mark.timeout(120)   # a hang guard only (the quadratic reader took 153 s); timings: bench/
def test_forty_thousand_paragraphs_are_read_each_in_order(tmp_path):
    f = tmp_path / "big.html"
    f.write_text("<html><head><title>Shipments</title></head><body>"
                 + "".join(f"<p>Depot {i} shipped <b>{i * 3}</b> parcels.</p>\n" for i in range(40_000))
                 + "</body></html>", encoding="utf-8")
    (doc,) = read_html(f)
    assert doc.title == "Shipments"
    assert len(doc.blocks) == 40_000
    assert doc.blocks[0] == ("p", "Depot 0 shipped 0 parcels.")
    assert doc.blocks[39_999] == ("p", "Depot 39999 shipped 119997 parcels.")


@pytest.mark.timeout(120)
def test_deeply_nested_html_is_read_without_recursion(tmp_path):
    f = tmp_path / "deep.html"
    f.write_text("<body>" + "<div><span>" * 50_000 + "The vault is 40 metres deep." + "</span></div>" * 50_000
                 + "<p>After the nest.</p></body>", encoding="utf-8")
    (doc,) = read_html(f)
    assert doc.blocks == [("p", "The vault is 40 metres deep."), ("p", "After the nest.")]


@pytest.mark.timeout(120)   # a hang guard (the tokenizer rescans an unterminated tag: quadratic)
def test_a_tag_cut_off_by_the_end_of_the_file_is_dropped(tmp_path):
    f = tmp_path / "cut.html"
    f.write_text("<p>Kept text.</p>" + "<a " * 50_000, encoding="utf-8")
    (doc,) = read_html(f)
    assert doc.blocks == [("p", "Kept text.")]


def test_html_reader_matches_the_tree_reading_on_malformed_nesting(tmp_path):
    """End tags close what was opened inside them; stray end tags are ignored; a dropped region
    left open drops the rest of its parent only; blank text between blocks is one blank."""
    f = tmp_path / "odd.html"
    f.write_text("<html><head><title>Odd <b>one</b></title><meta name='date' content='2024-02-03'>"
                 "</head><body><div><p>First <i>para</p> goes on</div></span>\n\n<ul><li>one<li>two</ul>"
                 "<section><nav>menu<p>inside nav</section><p>after</p><h3>Head\n\n</h3>tail</body></html>",
                 encoding="utf-8")
    (doc,) = read_html(f)
    assert doc.title == "Odd one" and doc.published == "2024-02-03"
    assert doc.blocks == [("p", "First para"), ("p", "goes on"), ("p", "one"), ("p", "two"), ("p", "after"),
                          ("h", "Head"), ("p", "tail")]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "good.txt").write_text("The Porto warehouse opened in 2015.\n", encoding="utf-8")
    (d / "broken.pdf").write_bytes(b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >>\nthis is not a pdf\n")
    (d / "kb.jsonl").write_text(json.dumps({"id": "a", "text": "Mont Blanc is 4,806 metres high."}) + "\n"
                                + "[" * 100_000 + "]" * 100_000 + "\n"
                                + json.dumps({"id": "b", "text": "The Danube flows through ten countries."}) + "\n",
                                encoding="utf-8")
    return d


def test_an_unreadable_pdf_and_a_deeply_nested_jsonl_line_are_skipped_and_reported(tmp_path, folder):
    db = tmp_path / "c.sqlite3"
    st = build_corpus([folder], db)
    assert st.documents == 3                           # good.txt and the two readable JSONL lines
    skipped = dict(st.skipped)
    assert set(skipped) == {str(folder / "broken.pdf"), f"{folder / 'kb.jsonl'}:2"}
    assert "nested too deeply" in skipped[f"{folder / 'kb.jsonl'}:2"]
    assert any("Danube" in t for t in _search(db, "Danube countries"))
    assert any("Porto" in t for t in _search(db, "Porto warehouse"))


def test_cli_reports_skipped_files_and_exits_zero_unless_nothing_was_indexed_or_strict(tmp_path, folder):
    db = tmp_path / "cli.sqlite3"
    r = _cli(str(folder), "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert "3 documents" in r.stdout and "2 skipped" in r.stdout
    assert f"skipped {folder / 'broken.pdf'}:" in r.stderr and f"skipped {folder / 'kb.jsonl'}:2:" in r.stderr
    strict = _cli(str(folder), "--db", str(tmp_path / "strict.sqlite3"), "--strict")
    assert strict.returncode == 2 and "broken.pdf" in strict.stderr
    nothing = _cli(str(folder / "broken.pdf"), "--db", str(tmp_path / "none.sqlite3"))
    assert nothing.returncode == 2 and "nothing was indexed" in nothing.stderr


def test_links_out_of_the_given_folder_are_not_followed(tmp_path):
    d = tmp_path / "docs"
    (d / "sub").mkdir(parents=True)
    (d / "notes.txt").write_text("The depot in Lyon opened in 2011.\n", encoding="utf-8")
    outside = tmp_path / "secret.txt"
    outside.write_text("root:x:0:0 classified launch code 7741\n", encoding="utf-8")
    (d / "passwd.txt").symlink_to(outside)                       # a file link leaving the folder
    (d / "etc.txt").symlink_to("/etc/passwd")
    (d / "alias.txt").symlink_to(d / "notes.txt")                 # a link inside the folder: read
    (d / "sub" / "outdir").symlink_to(tmp_path, target_is_directory=True)  # a directory link: not entered
    files, skipped = collect_files([d])
    assert sorted(f.name for f in files) == ["alias.txt", "notes.txt"]
    assert sorted(Path(w).name for w, _ in skipped) == ["etc.txt", "passwd.txt"]
    db = tmp_path / "c.sqlite3"
    st = build_corpus([d], db)
    assert st.files == 2 and len(st.skipped) == 2
    assert _search(db, "classified launch code") == [] and _search(db, "root") == []
    assert any("Lyon" in t for t in _search(db, "depot Lyon"))
    # a file named on the command line is read as given, link or not
    assert build_corpus([d / "passwd.txt"], tmp_path / "given.sqlite3").documents == 1
