"""``local``: search the SQLite FTS5 corpus built by ``veracity corpus build`` (no network).

The query is never handed to FTS5 as syntax: :func:`fts_query` keeps its word tokens (Unicode
``\\w+``), drops common English stop words (unless nothing else is left), quotes each token as
an FTS5 string and joins them with ``OR``; ``bm25()`` then ranks passages by how many of the
rarer terms they contain (title column weighted 2, text 1). So ``"``, ``AND(``, ``*``,
``NEAR``, ``col:term`` or unbalanced parentheses in user text are plain words or nothing,
never an FTS5 syntax error (SQLite FTS5 documentation §3, "Full-text Query Syntax").

The SQLite work runs in a thread (``asyncio.to_thread``) on a read-only connection opened
per search, so the event loop never blocks on disk and the file can be rebuilt meanwhile.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
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


class LocalBackend:
    """The ``local`` backend over the corpus file ``db`` (module doc). Raises ValueError at
    construction when ``db`` is not a corpus; ``search`` raises :class:`SourceUnavailable`
    when the file went away or is corrupt."""

    def __init__(self, db: str | Path, *, name: str = "local"):
        self.name = name
        self.db = Path(db)
        connect(self.db).close()  # fail early: missing file, not a corpus, no FTS5

    async def aclose(self) -> None:
        """Nothing to close (a connection per search)."""

    def _search_sync(self, match: str, k: int) -> list[Passage]:
        try:
            conn = connect(self.db)
        except ValueError as exc:
            raise SourceUnavailable(self.name, str(exc)) from None
        try:
            rows = conn.execute(
                """SELECT p.text, p.title, p.seq, d.source, d.url, d.published
                   FROM passages AS p JOIN documents AS d ON d.id = p.doc
                   WHERE passages MATCH ? ORDER BY bm25(passages, 2.0, 1.0) LIMIT ?""",
                (match, k)).fetchall()
        except sqlite3.Error as exc:
            raise SourceUnavailable(self.name, f"corpus error: {exc}") from None
        finally:
            conn.close()
        return [Passage(text=text, title=title or "", url=url, doc_id=f"{source}#{seq}", published=published,
                        source=self.name, domain=domain_of(url))
                for text, title, seq, source, url, published in rows]

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages, best bm25 first; [] when the query has no words."""
        match = fts_query(str(query))
        if match is None or k <= 0:
            return []
        return await asyncio.to_thread(self._search_sync, match, int(k))
