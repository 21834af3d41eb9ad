"""The ``local`` search corpus: an SQLite FTS5 index of paragraph-sized passages.

Built by ``veracity corpus build FILES... --db PATH`` (:func:`build_corpus`) from

* Markdown (``.md``, ``.markdown``; parsed with markdown-it-py, text of every block),
* HTML (``.html``, ``.htm``; BeautifulSoup, text of the innermost block elements; script,
  style, nav, header, footer and aside dropped),
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

import json
import re
import sqlite3
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


def read_html(path: Path) -> Iterator[Document]:
    """An HTML file through BeautifulSoup: block elements become paragraph breaks and inline
    markup stays inside its sentence (``<p>founded in <b>1998</b></p>`` -> one paragraph); table
    cells are joined by spaces, one row per paragraph; script, style, nav, header, footer and
    aside are dropped. ``<title>`` (else the first ``<h1>``) is the title;
    ``<meta name="date">`` / ``article:published_time`` / ``dcterms.date`` the date."""
    from bs4 import BeautifulSoup

    from verifiers.facts.backends._text import iso_date

    soup = BeautifulSoup(path.read_bytes(), "html.parser")
    title_el = soup.find("title") or soup.find("h1")
    title = _WS.sub(" ", title_el.get_text(" ")).strip() if title_el else ""
    published = None
    for attrs in ({"name": "date"}, {"property": "article:published_time"}, {"name": "dcterms.date"}):
        m = soup.find("meta", attrs=attrs)
        published = iso_date(str(m["content"])) if m and m.get("content") else None
        if published:
            break
    for tag in soup(list(_DROP_TAGS)):
        tag.decompose()
    for el in soup.find_all(list(_CELL_TAGS)):
        el.insert_after(" ")
    for el in soup.find_all(re.compile(r"^h[1-6]$")):
        el.insert(0, _HEADING)  # inside the heading: the block breaks below go around it
    for el in soup.find_all(list(_BLOCK_TAGS)):
        el.insert_before("\n\n")
        el.insert_after("\n\n")
    body = soup.body or soup
    blocks: list[tuple[str, str]] = []
    for para in re.split(r"\n\s*\n", body.get_text()):
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


def read_jsonl(path: Path) -> Iterator[Document]:
    """One document per line: ``text`` (required), ``title``, ``url``, ``date`` (ISO), ``id``
    (the document key; else ``url``; else ``path:line``). Blank lines are skipped; a line that
    is not a JSON object with a string ``text`` raises ValueError naming ``path:line``."""
    from verifiers.facts.backends._text import iso_date

    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
                raise ValueError(f"{path}:{n}: expected an object with a string 'text'")
            url = obj.get("url") if isinstance(obj.get("url"), str) else None
            key = obj.get("id") if isinstance(obj.get("id"), (str, int)) else None
            source = f"{path.name}:{key}" if key is not None else (url or f"{path}:{n}")
            yield Document(source, str(obj.get("title") or ""), url=url,
                           published=iso_date(obj.get("date")), blocks=_paragraphs(obj["text"]))


READERS = {"markdown": read_markdown, "html": read_html, "text": read_text, "pdf": read_pdf, "jsonl": read_jsonl}


def read_file(path: str | Path) -> Iterator[Document]:
    """Documents of one file, by suffix (:data:`SUFFIXES`); ValueError for another suffix,
    OSError for an unreadable file."""
    p = Path(path)
    kind = SUFFIXES.get(p.suffix.lower())
    if kind is None:
        raise ValueError(f"{p}: unsupported file type {p.suffix or '(none)'!r} "
                         f"(supported: {', '.join(sorted(SUFFIXES))})")
    if not p.is_file():
        raise OSError(f"{p}: no such file")
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
    ``passages`` written; ``total_passages`` in the corpus afterwards."""

    files: int = 0
    documents: int = 0
    passages: int = 0
    total_passages: int = 0


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
    suffix (recursively, sorted; hidden files and folders skipped)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(f for f in sorted(p.rglob("*"))
                       if f.is_file() and f.suffix.lower() in SUFFIXES
                       and not any(part.startswith(".") for part in f.relative_to(p).parts))
        else:
            out.append(p)
    return out


def build_corpus(files: Sequence[str | Path], db: str | Path) -> BuildStats:
    """Add ``files`` (or every supported file under a directory, :func:`expand_paths`) to the
    corpus at ``db`` (created when missing), one transaction per file.

    Returns :class:`BuildStats`. Raises ValueError (unsupported type, bad JSONL line, not a
    corpus) or OSError (missing/unreadable file) before anything of that file is written."""
    stats = BuildStats()
    conn = connect(db, create=True)
    try:
        for f in expand_paths(files):
            docs = list(read_file(f))  # read fully first: a bad file writes nothing
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
