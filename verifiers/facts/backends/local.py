"""``local``: search the SQLite FTS5 corpus built by ``veracity corpus build`` (no network).

The query is never handed to FTS5 as syntax: :func:`fts_query` keeps its word tokens (Unicode
``\\w+``), drops common English stop words (unless nothing else is left), quotes each token as
an FTS5 string and joins them with ``OR``; ``bm25()`` then ranks passages by how many of the
rarer terms they contain (title column weighted 2, text 1). So ``"``, ``AND(``, ``*``,
``NEAR``, ``col:term`` or unbalanced parentheses in user text are plain words or nothing,
never an FTS5 syntax error (SQLite FTS5 documentation §3, "Full-text Query Syntax").

The SQLite work runs in a thread (``asyncio.to_thread``) on a read-only connection shared by
the process (one per corpus file), so the event loop never blocks on disk.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import threading
from pathlib import Path

from verifiers.facts._passage import Passage, SourceUnavailable
from verifiers.facts.backends._text import domain_of
from verifiers.facts.corpus import connect

#: Tokens kept per query (a long claim still makes a bounded FTS5 query).
MAX_TERMS = 32
_WORD = re.compile(r"\w+", re.UNICODE)
#: Very common English words that only add noise to an OR query (bm25 weights them low anyway).
STOP_WORDS = frozenset("""a an and are as at be been but by did do does for from had has have he her his i if in
into is it its of on or our she so than that the their them then there these they this to was we were what when
where which who whom why will with you your not no""".split())


def fts_query(text: str, max_terms: int = MAX_TERMS) -> str | None:
    """An FTS5 MATCH expression for free text: quoted word tokens joined by ``OR`` (see module
    doc); None when ``text`` has no word at all."""
    seen: dict[str, None] = {}
    for tok in _WORD.findall(text.lower()):
        tok = tok.strip("_")
        if tok:
            seen.setdefault(tok, None)
    words = list(seen)
    if not words:
        return None
    content = [w for w in words if w not in STOP_WORDS] or words
    return " OR ".join(f'"{w}"' for w in content[:max_terms])


#: Read-only connections shared by every LocalBackend in the process, keyed by the corpus
#: file's identity (path, device, inode): opening one costs ~12 ms per search on an 8.6k-passage
#: corpus (FTS5 structure and page cache are cold), and backends are made per request. A
#: corpus rebuilt in place is seen at the next query; a file replaced by another (new inode)
#: gets a new connection.
_CONNS: dict[tuple[str, int, int], tuple[sqlite3.Connection, threading.Lock]] = {}
_CONNS_LOCK = threading.Lock()


def _shared_connection(db: Path) -> tuple[sqlite3.Connection, threading.Lock]:
    path = db.resolve()
    try:
        st = os.stat(path)
    except OSError:
        connect(db)  # raises the ValueError that says how to build one
        raise  # pragma: no cover - the file appeared meanwhile
    key = (str(path), st.st_dev, st.st_ino)
    with _CONNS_LOCK:
        hit = _CONNS.get(key)
        if hit is None:
            for old in [k for k in _CONNS if k[0] == key[0]]:  # replaced file: drop the stale one
                _CONNS.pop(old)[0].close()
            hit = _CONNS[key] = (connect(path), threading.Lock())
        return hit


_SQL = """SELECT p.text, p.title, p.seq, d.source, d.url, d.published
          FROM (SELECT text, title, seq, doc, rank FROM passages WHERE passages MATCH ?
                ORDER BY rank LIMIT ?) AS p
          JOIN documents AS d ON d.id = p.doc ORDER BY p.rank"""


class LocalBackend:
    """The ``local`` backend over the corpus file ``db`` (module doc). Raises ValueError at
    construction when ``db`` is not a corpus; ``search`` raises :class:`SourceUnavailable`
    when the file went away or is corrupt."""

    def __init__(self, db: str | Path, *, name: str = "local"):
        self.name = name
        self.db = Path(db)
        _shared_connection(self.db)  # fail early: missing file, not a corpus, no FTS5

    async def aclose(self) -> None:
        """Nothing to close: the read-only connection is shared by the process."""

    def _search_sync(self, match: str, k: int) -> list[Passage]:
        for attempt in (1, 2):
            try:
                conn, lock = _shared_connection(self.db)
                with lock:
                    rows = conn.execute(_SQL, (match, k)).fetchall()
                break
            except ValueError as exc:
                raise SourceUnavailable(self.name, str(exc)) from None
            except sqlite3.Error as exc:
                # a reader can fail once while a build rewrites the index under it: read again
                if attempt == 2:
                    raise SourceUnavailable(self.name, f"corpus error: {exc}") from None
        return [Passage(text=text, title=title or "", url=url, doc_id=f"{source}#{seq}", published=published,
                        source=self.name, domain=domain_of(url))
                for text, title, seq, source, url, published in rows]

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages, best bm25 first; [] when the query has no words."""
        match = fts_query(str(query))
        if match is None or k <= 0:
            return []
        return await asyncio.to_thread(self._search_sync, match, int(k))
