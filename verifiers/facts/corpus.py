"""The ``local`` search corpus: an SQLite FTS5 index of paragraph-sized passages.

Built by ``veracity corpus build FILES... --db PATH`` (:func:`build_corpus`) from

* Markdown (``.md``, ``.markdown``; parsed with markdown-it-py, text of every block),
* HTML (``.html``, ``.htm``; one linear pass of the standard library's tokenizer, text of the
  block elements; script, style, nav, header, footer and aside dropped),
* plain text (``.txt``, ``.text``, ``.rst``; paragraphs are separated by blank lines),
* PDF text (``.pdf``; pypdf's text layer, one document per page so a passage cites its page;
  scanned PDFs without a text layer add nothing),
* JSONL (``.jsonl``; one document per line: ``{"text": required, "title", "url", "date", "id"}``).

Each document is cut into passages of about one paragraph (:func:`chunk`: paragraphs are
merged up to ``TARGET_CHARS``, a paragraph longer than ``MAX_CHARS`` is split at sentence
ends); a heading starts a new passage. Re-building with the same file (or JSONL ``id``/``url``)
replaces that document's passages, so the command is repeatable.

Schema (``SCHEMA_VERSION``): ``documents(id, source UNIQUE, title, url, published)`` and the
FTS5 table ``passages(title, text, doc UNINDEXED, seq UNINDEXED)`` with the ``porter
unicode61 remove_diacritics 2`` tokenizer (English stemming, accents folded) and its ``rank``
set to ``bm25(2.0, 1.0)`` (title matches weigh double); searched by
:class:`verifiers.facts.backends.local.LocalBackend` (SQLite FTS5 documentation, §4.4 bm25,
§7.2 the ``rank`` configuration option).
"""

from __future__ import annotations

__all__ = ["build_corpus", "BuildStats", "Document", "read_file", "read_text", "read_markdown", "read_html",
           "read_pdf", "read_jsonl", "chunk", "connect", "add_documents", "collect_files", "expand_paths",
           "SCHEMA_VERSION", "TARGET_CHARS", "MAX_CHARS", "SUFFIXES"]

import json
import os
import re
import sqlite3
from html.parser import HTMLParser
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

SCHEMA_VERSION = "1"
#: Passages are merged paragraphs up to about this many characters ...
TARGET_CHARS = 800
#: ... and a single paragraph longer than this is split at sentence ends.
MAX_CHARS = 1200

SUFFIXES = {".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html", ".txt": "text",
            ".text": "text", ".rst": "text", ".pdf": "pdf", ".jsonl": "jsonl"}

_SENT_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_WS = re.compile(r"\s+")


@dataclass(slots=True)
class Document:
    """One source document: ``source`` (unique key: path, ``path#page=N``, or a JSONL id/url),
    ``blocks`` as ``(kind, text)`` with kind ``"h"`` (heading) or ``"p"``."""

    source: str
    title: str = ""
    url: str | None = None
    published: str | None = None
    blocks: list[tuple[str, str]] = field(default_factory=list)


# -- readers ---------------------------------------------------------------------------------

def _paragraphs(text: str) -> list[tuple[str, str]]:
    return [("p", _WS.sub(" ", p).strip()) for p in re.split(r"\n\s*\n", text) if p.strip()]


def read_text(path: Path) -> Iterator[Document]:
    """A plain-text file: paragraphs separated by blank lines; title = file stem."""
    yield Document(str(path), path.stem, blocks=_paragraphs(path.read_text(encoding="utf-8", errors="replace")))


def read_markdown(path: Path) -> Iterator[Document]:
    """A Markdown file through markdown-it-py (CommonMark + tables): headings, paragraphs,
    list items, table cells and code blocks as text, inline markup dropped; title = first
    heading, else the file stem."""
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark").enable("table")
    tokens = md.parse(path.read_text(encoding="utf-8", errors="replace"))
    blocks: list[tuple[str, str]] = []
    title = ""
    in_heading = False
    for t in tokens:
        if t.type == "heading_open":
            in_heading = True
        elif t.type == "heading_close":
            in_heading = False
        elif t.type == "inline":
            parts = []
            for c in t.children or []:
                if c.type in ("text", "code_inline", "html_inline"):
                    parts.append(c.content)
                elif c.type in ("softbreak", "hardbreak"):
                    parts.append(" ")
                elif c.type == "image":
                    parts.append(c.content)
            text = _WS.sub(" ", "".join(parts)).strip()
            if text:
                blocks.append(("h" if in_heading else "p", text))
                if in_heading and not title:
                    title = text
        elif t.type in ("fence", "code_block") and t.content.strip():
            blocks.append(("p", _WS.sub(" ", t.content).strip()))
    yield Document(str(path), title or path.stem, blocks=blocks)


_BLOCK_TAGS = ("p", "li", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "dd", "dt", "figcaption",
               "caption", "div", "section", "article", "main", "tr", "table", "ul", "ol", "dl", "br", "hr")
_CELL_TAGS = ("td", "th")
_DROP_TAGS = ("script", "style", "noscript", "nav", "header", "footer", "aside", "template", "svg", "form", "head")
_HEADING = "\x01"  # marks a heading paragraph between the text pass and the block split


#: Elements without content (HTML Living Standard §13.1.2 "void elements"): never opened.
_VOID_TAGS = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
                        "source", "track", "wbr"))
#: Elements whose text is code or a template, never prose (BeautifulSoup's string containers).
_STRING_TAGS = frozenset(("script", "style", "template"))
_HEADING_TAGS = frozenset(("h1", "h2", "h3", "h4", "h5", "h6"))
_DATE_METAS = (("name", "date"), ("property", "article:published_time"), ("name", "dcterms.date"))


class _HtmlText(HTMLParser):
    """One pass over an HTML document (the standard library's tokenizer), text collected into
    lists and joined once: linear in the size of the document, whatever its depth (no tree is
    built; an open-element stack with a count per tag name replaces it).

    Nesting follows BeautifulSoup's ``html.parser`` tree builder, which this replaces: an end tag
    closes the most recent open element of its name and every element opened inside it; an end
    tag with no open element of its name is ignored; what is still open at the end is closed
    there. The old reader (BeautifulSoup plus ``insert_before``/``insert_after`` around every
    block element, each of which looks the element up among its siblings) was quadratic in the
    number of sibling blocks: 40,000 ``<p>`` took 153 s."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._stack: list[str] = []
        self._open: dict[str, int] = {}
        self._drop = 0
        self._body = 0
        self._title = 0
        self._h1 = 0
        self._strings = 0  # open script/style/template: their text is no element's text
        self._pre = 0      # open pre/textarea: whitespace kept as written
        self.seen_body = False
        self.seen_title = False
        self.text: list[str] = []           # outside any <body> too
        self.body_text: list[str] = []
        self.title: list[str] = []
        self.first_h1: list[str] | None = None
        self.h1_done = False
        self.metas: dict[tuple[str, str], str] = {}

    def _emit(self, s: str) -> None:
        if self._drop:
            return
        self.text.append(s)
        if self._body:
            self.body_text.append(s)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "meta":
            a = {k: v for k, v in attrs if v is not None}
            for key, value in _DATE_METAS:
                if a.get(key) == value and (key, value) not in self.metas and "content" in a:
                    self.metas[(key, value)] = a["content"]
        if tag in _VOID_TAGS:
            if tag in ("br", "hr"):
                self._emit("\n\n")
            return
        self._stack.append(tag)
        self._open[tag] = self._open.get(tag, 0) + 1
        if tag in _STRING_TAGS:
            self._strings += 1
        if tag in ("pre", "textarea"):
            self._pre += 1
        if tag in _DROP_TAGS:
            self._drop += 1
        elif tag == "body":
            self._body += 1
            self.seen_body = self.seen_body or not self._drop  # a dropped <body> is no body
        if tag == "title":
            self._title += 1
            self.seen_title = True
        elif tag == "h1" and not self.h1_done:
            self._h1 += 1
            if self.first_h1 is None:
                self.first_h1 = []
        if tag in _BLOCK_TAGS:
            self._emit("\n\n")
        if tag in _HEADING_TAGS:
            self._emit(_HEADING)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        # <br/>, <p/>: an element opened and closed at once
        self.handle_starttag(tag, attrs)
        if tag not in _VOID_TAGS:
            self._pop_to(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open.get(tag):
            self._pop_to(tag)

    def _pop_to(self, tag: str) -> None:
        while self._stack:
            t = self._stack.pop()
            self._open[t] -= 1
            self._close(t)
            if t == tag:
                return

    def _close(self, tag: str) -> None:
        if tag in _BLOCK_TAGS:
            self._emit("\n\n")
        elif tag in _CELL_TAGS:
            self._emit(" ")
        if tag in _STRING_TAGS:
            self._strings -= 1
        if tag in ("pre", "textarea"):
            self._pre -= 1
        if tag in _DROP_TAGS:
            self._drop -= 1
        elif tag == "body":
            self._body -= 1
        if tag == "title":
            self._title -= 1
        elif tag == "h1" and self._h1:
            self._h1 -= 1
            if not self._h1:
                self.h1_done = True

    def handle_data(self, data: str) -> None:
        if self._strings:
            return  # script, style, template: dropped, and not part of a title either
        if not self._pre and data.isspace():
            data = "\n" if "\n" in data else " "  # a blank text node is one blank (as BeautifulSoup reads it)
        if self._title:
            self.title.append(data)
        if self._h1 and self.first_h1 is not None:
            self.first_h1.append(data)
        self._emit(data)

    def close(self) -> None:
        super().close()
        while self._stack:
            self._pop_to(self._stack[-1])


def read_html(path: Path) -> Iterator[Document]:
    """An HTML file, in one linear pass (:class:`_HtmlText`): block elements become paragraph
    breaks and inline markup stays inside its sentence (``<p>founded in <b>1998</b></p>`` -> one
    paragraph); table cells are joined by spaces, one row per paragraph; script, style, nav,
    header, footer and aside are dropped; only the ``<body>`` when there is one. ``<title>``
    (else the first ``<h1>``) is the title; ``<meta name="date">`` /
    ``article:published_time`` / ``dcterms.date`` the date. The bytes are decoded as
    BeautifulSoup does (``UnicodeDammit``: BOM, declared charset, UTF-8, Windows-1252)."""
    from bs4.dammit import UnicodeDammit

    from verifiers.facts.backends._text import iso_date

    raw = path.read_bytes()
    markup = UnicodeDammit(raw, is_html=True).unicode_markup or raw.decode("utf-8", "replace")
    del raw
    p = _HtmlText()
    # a tag left open at the end of the file ("<a <a <a ..." without a ">" after it) makes the
    # standard library's tokenizer rescan the rest once per "<" at close() (quadratic, fixed in
    # CPython 3.13.4, gh-135462); a browser drops a tag cut off by the end of file: so do we
    end = markup.rfind(">") + 1
    tail = markup.find("<", end)
    p.feed(markup if tail < 0 else markup[:tail])
    p.close()
    del markup
    title = _WS.sub(" ", " ".join(p.title)).strip()
    if not p.seen_title and p.first_h1:
        title = _WS.sub(" ", " ".join(p.first_h1)).strip()
    published = None
    for key in _DATE_METAS:
        if key in p.metas:
            published = iso_date(str(p.metas[key]))
            if published:
                break
    blocks: list[tuple[str, str]] = []
    for para in re.split(r"\n\s*\n", "".join(p.body_text if p.seen_body else p.text)):
        heading = _HEADING in para
        text = _WS.sub(" ", para.replace(_HEADING, " ")).strip()
        if text:
            blocks.append(("h" if heading else "p", text))
    yield Document(str(path), title or path.stem, published=published, blocks=blocks)


def read_pdf(path: Path) -> Iterator[Document]:
    """A PDF's text layer through pypdf, one document per page (``source`` = ``path#page=N``,
    1-based); lines are joined into paragraphs at blank lines."""
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    meta_title = ""
    try:
        if reader.metadata and reader.metadata.title:
            meta_title = str(reader.metadata.title)
    except Exception:  # broken info dictionary: keep the file name
        meta_title = ""
    title = meta_title or path.stem
    for n, page in enumerate(reader.pages, start=1):
        text = page.extract_text() or ""
        if text.strip():
            yield Document(f"{path}#page={n}", title, blocks=_paragraphs(text))


def read_jsonl(path: Path, skipped: list[tuple[str, str]] | None = None) -> Iterator[Document]:
    """One document per line: ``text`` (required), ``title``, ``url``, ``date`` (ISO), ``id``
    (the document key; else ``url``; else ``path:line``). Blank lines are skipped. A line that
    is not a JSON object with a string ``text`` (or nests deeper than the JSON parser's
    recursion limit) raises ValueError naming ``path:line``; with a ``skipped`` list it is
    appended there as ``("path:line", reason)`` instead and the other lines are read."""
    from verifiers.facts.backends._text import iso_date

    def bad(n: int, why: str) -> None:
        if skipped is None:
            raise ValueError(f"{path}:{n}: {why}")
        skipped.append((f"{path}:{n}", why))

    with path.open(encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                bad(n, f"not JSON ({exc.msg})")
                continue
            except RecursionError:
                bad(n, "not read: JSON nested too deeply")
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                bad(n, "expected an object with a string 'text'")
                continue
            url = obj.get("url") if isinstance(obj.get("url"), str) else None
            key = obj.get("id") if isinstance(obj.get("id"), (str, int)) else None
            source = f"{path.name}:{key}" if key is not None else (url or f"{path}:{n}")
            yield Document(source, str(obj.get("title") or ""), url=url,
                           published=iso_date(obj.get("date")), blocks=_paragraphs(obj["text"]))


READERS = {"markdown": read_markdown, "html": read_html, "text": read_text, "pdf": read_pdf, "jsonl": read_jsonl}


def read_file(path: str | Path, skipped: list[tuple[str, str]] | None = None) -> Iterator[Document]:
    """Documents of one file, by suffix (:data:`SUFFIXES`); ValueError for another suffix,
    OSError for an unreadable file. ``skipped``: where a JSONL reader lists the lines it could
    not read (else such a line raises ValueError)."""
    p = Path(path)
    kind = SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise ValueError(f"{p}: unsupported file type {p.suffix or '(none)'!r} "
                         f"(supported: {', '.join(sorted(SUFFIXES))})")
    if not p.is_file():
        raise OSError(f"{p}: no such file")
    if kind == "jsonl":
        return read_jsonl(p, skipped)
    return READERS[kind](p)


# -- chunking --------------------------------------------------------------------------------

def _split_long(text: str, max_chars: int) -> list[str]:
    if len(text) <= max_chars:
        return [text]
    out: list[str] = []
    cur = ""
    for sent in _SENT_END.split(text):
        while len(sent) > max_chars:  # a "sentence" longer than the cap: cut at a space
            cut = sent.rfind(" ", 0, max_chars)
            cut = cut if cut > max_chars // 2 else max_chars
            if cur:
                out.append(cur)
                cur = ""
            out.append(sent[:cut].strip())
            sent = sent[cut:].strip()
        if cur and len(cur) + 1 + len(sent) > max_chars:
            out.append(cur)
            cur = sent
        else:
            cur = f"{cur} {sent}".strip()
    if cur:
        out.append(cur)
    return out


def chunk(blocks: Sequence[tuple[str, str]], target: int = TARGET_CHARS, max_chars: int = MAX_CHARS) -> list[str]:
    """Passages from ``(kind, text)`` blocks: consecutive paragraphs merged while the passage
    stays within ``target`` characters; a heading always starts a new passage; a paragraph
    over ``max_chars`` is split at sentence ends (a simple end-of-sentence rule: this only
    sizes passages, it does not split claims)."""
    out: list[str] = []
    cur: list[str] = []
    size = 0
    heading_only = False  # the passage so far is a lone heading: it stays with what follows
    for kind, text in blocks:
        for piece in _split_long(text, max_chars):
            if kind == "h":
                if cur:
                    out.append(" ".join(cur))
                cur, size, heading_only = [piece], len(piece), True
                continue
            if cur and not heading_only and size + 1 + len(piece) > target:
                out.append(" ".join(cur))
                cur, size = [], 0
            cur.append(piece)
            size += len(piece) + 1
            heading_only = False
    if cur:
        out.append(" ".join(cur))
    return [_WS.sub(" ", c).strip() for c in out if c.strip()]


# -- the index -------------------------------------------------------------------------------

def connect(db: str | Path, *, create: bool = False) -> sqlite3.Connection:
    """An SQLite connection to the corpus at ``db``; with ``create`` the schema is made.
    Raises ValueError when the file is not a corpus of this schema version, or when
    SQLite lacks FTS5."""
    if not create and not Path(db).is_file():
        raise ValueError(f"{db}: no such corpus (build one with `veracity corpus build FILES... --db {db}`)")
    if create:
        conn = sqlite3.connect(str(db))
    else:
        conn = sqlite3.connect(f"file:{Path(db).resolve()}?mode=ro", uri=True, check_same_thread=False)
    try:
        if create:
            conn.executescript(
                """
                CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS documents(id INTEGER PRIMARY KEY, source TEXT NOT NULL UNIQUE,
                                                     title TEXT NOT NULL, url TEXT, published TEXT);
                CREATE VIRTUAL TABLE IF NOT EXISTS passages USING fts5(
                    title, text, doc UNINDEXED, seq UNINDEXED,
                    tokenize = 'porter unicode61 remove_diacritics 2');
                """)
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
            # ORDER BY rank with the weights configured is the same order as ORDER BY
            # bm25(passages, 2.0, 1.0) at ~60 % of its time (measured on SciFact: 15 vs 25 ms)
            # (written once: changing it makes open readers fail their next query)
            if conn.execute("SELECT 1 FROM passages_config WHERE k = 'rank'").fetchone() is None:
                conn.execute("INSERT INTO passages(passages, rank) VALUES ('rank', 'bm25(2.0, 1.0)')")
            conn.commit()
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
    except sqlite3.DatabaseError as exc:
        conn.close()
        if "fts5" in str(exc).lower():
            raise ValueError(f"{db}: this SQLite has no FTS5 ({exc})") from None
        raise ValueError(f"{db}: not a veracity corpus ({exc})") from None
    if not row or row[0] != SCHEMA_VERSION:
        conn.close()
        raise ValueError(f"{db}: not a veracity corpus of schema {SCHEMA_VERSION}")
    return conn


@dataclass(slots=True)
class BuildStats:
    """What :func:`build_corpus` did: ``files`` read, ``documents`` added or replaced,
    ``passages`` written; ``total_passages`` in the corpus afterwards; ``skipped``: what was
    not indexed, as ``(path or "path:line", reason)`` -- unreadable files, unsupported or
    missing ones, JSONL lines, links to files outside the given folders."""

    files: int = 0
    documents: int = 0
    passages: int = 0
    total_passages: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)


def add_documents(conn: sqlite3.Connection, docs: Iterable[Document]) -> tuple[int, int]:
    """Insert (or replace, by ``source``) documents and their passages; (documents, passages)."""
    nd = npass = 0
    for d in docs:
        passages = chunk(d.blocks)
        old = conn.execute("SELECT id FROM documents WHERE source = ?", (d.source,)).fetchone()
        if old:
            conn.execute("DELETE FROM passages WHERE doc = ?", (old[0],))
            conn.execute("DELETE FROM documents WHERE id = ?", (old[0],))
        if not passages:
            continue
        cur = conn.execute("INSERT INTO documents(source, title, url, published) VALUES (?, ?, ?, ?)",
                           (d.source, d.title, d.url, d.published))
        doc_id = cur.lastrowid
        conn.executemany("INSERT INTO passages(title, text, doc, seq) VALUES (?, ?, ?, ?)",
                         [(d.title, p, doc_id, i) for i, p in enumerate(passages)])
        nd += 1
        npass += len(passages)
    return nd, npass


def expand_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Files named in ``paths``; a directory stands for every file under it with a supported
    suffix (recursively, sorted; hidden files and folders skipped; links to files outside the
    directory left out, see :func:`collect_files`)."""
    return collect_files(paths)[0]


def collect_files(paths: Sequence[str | Path]) -> tuple[list[Path], list[tuple[str, str]]]:
    """``(files, skipped)`` for ``paths``: a file is taken as named (links included: it was
    given); a directory stands for every file under it with a supported suffix (recursively,
    sorted, hidden files and folders skipped). Under a directory, links to directories are not
    entered and a link to a file is followed only when the file it names lies inside that
    directory: ``docs/passwd.txt -> /etc/passwd`` is skipped (``(path, reason)`` in
    ``skipped``), so building from a folder reads only that folder."""
    out: list[Path] = []
    skipped: list[tuple[str, str]] = []
    for p in map(Path, paths):
        if not p.is_dir():
            out.append(p)
            continue
        root = p.resolve()
        found: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(p, followlinks=False):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in filenames:
                f = Path(dirpath) / name
                if name.startswith(".") or f.suffix.lower() not in SUFFIXES:
                    continue
                if f.is_symlink():
                    target = f.resolve()
                    if not target.is_relative_to(root):
                        skipped.append((str(f), f"a link to {target}, outside {p}: not followed"))
                        continue
                if f.is_file():
                    found.append(f)
        out.extend(sorted(found))
    return out, skipped


def build_corpus(files: Sequence[str | Path], db: str | Path, *, strict: bool = False) -> BuildStats:
    """Add ``files`` (or every supported file under a directory, :func:`collect_files`) to the
    corpus at ``db`` (created when missing), one transaction per file; a file is read fully
    before any of it is written.

    A file that cannot be read (unsupported type, missing, a broken PDF, ...), a JSONL line
    that cannot be read and a link out of a given folder are skipped and listed in
    ``BuildStats.skipped``; the rest is indexed. With ``strict`` the first such problem raises
    instead (ValueError naming the file; files before it stay indexed). Raises ValueError when
    ``db`` is not a corpus."""
    stats = BuildStats()
    paths, stats.skipped = collect_files(files)
    if strict and stats.skipped:
        raise ValueError(f"{stats.skipped[0][0]}: {stats.skipped[0][1]}")
    conn = connect(db, create=True)
    try:
        for f in paths:
            lines: list[tuple[str, str]] | None = None if strict else []
            try:
                docs = list(read_file(f, lines))  # read fully first: a bad file writes nothing
            except Exception as exc:  # noqa: BLE001 - any reader failure (pypdf raises many kinds)
                if strict:
                    if isinstance(exc, (OSError, ValueError)):
                        raise
                    raise ValueError(f"{f}: not readable ({type(exc).__name__}: {exc})"[:300]) from exc
                why = str(exc) if isinstance(exc, (OSError, ValueError)) else f"{type(exc).__name__}: {exc}"
                stats.skipped.append((str(f), why.removeprefix(f"{f}: ")[:300]))
                continue
            stats.skipped.extend(lines or [])
            with conn:
                nd, np_ = add_documents(conn, docs)
            stats.files += 1
            stats.documents += nd
            stats.passages += np_
        with conn:
            conn.execute("INSERT INTO passages(passages) VALUES ('optimize')")
        stats.total_passages = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
    finally:
        conn.close()
    return stats
