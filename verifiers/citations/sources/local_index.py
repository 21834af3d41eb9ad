"""The offline citation index: SQLite FTS5 over your own bibliographic records.

Built by :func:`build_index` (CLI: ``veracity index build FILE... --db PATH``) from

* BibTeX files (``.bib``; parsed with bibtexparser 1.x),
* CSL-JSON (``.json``: a list of CSL items, ``author: [{family, given}]``,
  ``issued.date-parts``, ``container-title``, ``DOI``; CSL 1.0.2 schema),
* JSONL (``.jsonl``): one record per line, either flat (``title``, ``author`` "A and B" or
  ``authors`` list, ``year``, ``venue``/``journal``/``booktitle``, ``doi``), HALLMARK-shaped
  (``{"fields": {...}, "label": ...}``) or carrying a ``bibtex`` string. Records with a
  ``label`` other than ``VALID`` are skipped: a benchmark's fabricated entries never enter the
  index.

Lookups are local and synchronous (sub-millisecond): by DOI, by arXiv ID, and by title through
FTS5 (``bm25`` ranking over folded title tokens; CJK titles indexed per character), re-ranked
with the matcher's title similarity. The ``doi_prefix`` table (records per canonical venue and DOI
registrant prefix) backs :meth:`LocalIndex.foreign_doi_prefix`, the offline evidence against a
made-up DOI on a real work. A record's ``abstract`` (BibTeX / CSL-JSON / JSONL field ``abstract``)
is kept when the file has one, for the citation relevance check; an index built before that
column existed gets it added on the next build and reads as "no abstract" until then.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from verifiers.citations._match import PREPRINT_VENUES, canonical_venue, normalize_title, title_similarity
from verifiers.citations._records import (Record, doi_prefix, normalize_arxiv, normalize_doi, parse_year, repository_doi,
                                         split_bibtex_authors)
from verifiers.citations.sources._abstract import clean_text
from verifiers.citations.sources._base import SourceResult

SCHEMA = """
CREATE TABLE IF NOT EXISTS records(
    id INTEGER PRIMARY KEY, title TEXT NOT NULL, norm_title TEXT NOT NULL, authors TEXT NOT NULL,
    year INTEGER, venue TEXT, doi TEXT, arxiv_id TEXT, url TEXT, origin TEXT, abstract TEXT);
CREATE INDEX IF NOT EXISTS records_doi ON records(doi);
CREATE INDEX IF NOT EXISTS records_arxiv ON records(arxiv_id);
CREATE INDEX IF NOT EXISTS records_norm ON records(norm_title);
CREATE VIRTUAL TABLE IF NOT EXISTS records_fts USING fts5(title, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS df(term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS doi_prefix(venue TEXT NOT NULL, prefix TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY(venue, prefix)) WITHOUT ROWID;
"""

#: A venue needs this many records in the library before its DOI practice (which registrant
#: prefixes its records carry, or none) counts as evidence against a stated DOI. Judgment: the
#: venues of shared/cases/citations hold 20-180 records each in the benchmark library.
MIN_VENUE_RECORDS = 20

_CJK = re.compile(r"([\u3400-\u9fff])")


def _fts_text(norm_title: str) -> str:
    return _CJK.sub(r" \1 ", norm_title)


# --------------------------------------------------------------------------- reading record files


def _from_fields(f: dict[str, Any], origin: str) -> Record | None:
    title = (f.get("title") or "").strip()
    if not title:
        return None
    title = html.unescape(re.sub(r"[{}]", "", title)).rstrip(".")
    authors = f.get("authors")
    if isinstance(authors, str):
        authors = split_bibtex_authors(authors)
    if not authors:
        authors = split_bibtex_authors(f.get("author") or "") if isinstance(f.get("author"), str) else []
    if isinstance(f.get("author"), list):  # CSL-JSON
        authors = [f"{a.get('family', '')}, {a.get('given', '')}".strip(", ") if isinstance(a, dict) else str(a)
                   for a in f["author"]]
    year = parse_year(f.get("year"))
    if year is None and isinstance(f.get("issued"), dict):
        parts = f["issued"].get("date-parts") or [[None]]
        year = parse_year(parts[0][0] if parts and parts[0] else None)
    venue = f.get("venue") or f.get("journal") or f.get("booktitle") or f.get("container-title") or f.get("publisher")
    if isinstance(venue, list):
        venue = venue[0] if venue else None
    doi = normalize_doi(f.get("doi") or f.get("DOI") or "")
    arxiv = normalize_arxiv(f.get("eprint") or f.get("arxiv_id") or "") if (f.get("eprint") or f.get("arxiv_id")) else None
    if not arxiv and doi and doi.startswith("10.48550/arxiv."):
        arxiv = normalize_arxiv(doi)
    url = f.get("url") or f.get("URL")
    if not venue and (arxiv or "arxiv.org" in str(url or "")):
        venue = "arXiv"  # an arXiv-identified record without a venue is the preprint
    authors = [html.unescape(a) for a in authors if a]
    abstract = clean_text(html.unescape(re.sub(r"[{}]", "", f["abstract"]))) if isinstance(f.get("abstract"), str) else None
    return Record(title=title, authors=authors, year=year, venue=venue, doi=doi, arxiv_id=arxiv,
                  url=url, source="local", extra={"origin": origin}, abstract=abstract,
                  abstract_kind="abstract" if abstract else None)


def _bibtex_records(text: str, origin: str) -> Iterator[Record]:
    import bibtexparser
    from bibtexparser.bparser import BibTexParser

    parser = BibTexParser(common_strings=True)
    parser.ignore_nonstandard_types = False
    for e in bibtexparser.loads(text, parser=parser).entries:
        r = _from_fields(e, origin)
        if r:
            yield r


def read_records(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Yield the :class:`Record` objects in one file (format by extension: .bib, .json, .jsonl).

    Raises ``ValueError`` for an unknown extension and ``OSError`` when the file cannot be read.
    """
    p = Path(path)
    origin = p.name
    ext = p.suffix.lower()
    if ext in (".bib", ".bibtex"):
        yield from _bibtex_records(p.read_text(encoding="utf-8", errors="replace"), origin)
    elif ext == ".json":
        data = json.loads(p.read_text(encoding="utf-8"))
        items = data if isinstance(data, list) else data.get("items", [data])
        for it in items:
            if isinstance(it, dict):
                r = _from_fields(it, origin)
                if r:
                    yield r
    elif ext in (".jsonl", ".ndjson"):
        with p.open(encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if not isinstance(obj, dict):
                    continue
                if obj.get("label") not in (None, "VALID"):
                    continue
                if isinstance(obj.get("fields"), dict):
                    r = _from_fields(obj["fields"], origin)
                    if r:
                        yield r
                elif isinstance(obj.get("bibtex"), str):
                    yield from _bibtex_records(obj["bibtex"], origin)
                else:
                    r = _from_fields(obj, origin)
                    if r:
                        yield r
    else:
        raise ValueError(f"{p}: unknown record format {ext!r} (expected .bib, .json or .jsonl)")


def build_index(files: Iterable[str | os.PathLike[str]], db_path: str | os.PathLike[str], *,
                records: Iterable[Record] = ()) -> int:
    """Build (or extend) the SQLite FTS5 index at ``db_path`` from ``files`` plus ``records``.

    Duplicates (same DOI, or same normalised title + year) are stored once. Returns the number
    of records added. Raises ``ValueError``/``OSError`` for unreadable inputs.
    """
    db = sqlite3.connect(str(db_path))
    try:
        db.executescript(SCHEMA)
        if "abstract" not in {row[1] for row in db.execute("PRAGMA table_info(records)")}:
            db.execute("ALTER TABLE records ADD COLUMN abstract TEXT")  # an index built before the column
        if not db.execute("SELECT 1 FROM doi_prefix LIMIT 1").fetchone():  # an index built before the table
            with db:
                for venue, doi in db.execute("SELECT venue, doi FROM records").fetchall():
                    db.execute("INSERT INTO doi_prefix(venue, prefix, n) VALUES (?, ?, 1) "
                               "ON CONFLICT(venue, prefix) DO UPDATE SET n = n + 1",
                               (canonical_venue(venue) or "", doi_prefix(doi) or ""))
        seen_doi = {r[0] for r in db.execute("SELECT doi FROM records WHERE doi IS NOT NULL")}
        seen_ty = {(r[0], r[1]) for r in db.execute("SELECT norm_title, year FROM records")}
        added = 0

        def normalized(r: Record) -> Record:
            # records given as objects get the same identifier normal form as those read from
            # files (lower-case DOI, bare arXiv ID), or lookups by identifier miss them
            doi = normalize_doi(r.doi) if r.doi else None
            arxiv = (normalize_arxiv(r.arxiv_id) or r.arxiv_id) if r.arxiv_id else None
            if doi == r.doi and arxiv == r.arxiv_id:
                return r
            return dataclasses.replace(r, doi=doi, arxiv_id=arxiv)

        def all_records() -> Iterator[Record]:
            for f in files:
                yield from read_records(f)
            yield from map(normalized, records)

        with db:
            for r in all_records():
                nt = normalize_title(r.title)
                if not nt or (r.doi and r.doi in seen_doi) or (nt, r.year) in seen_ty:
                    continue
                cur = db.execute(
                    "INSERT INTO records(title, norm_title, authors, year, venue, doi, arxiv_id, url, origin, abstract) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (r.title, nt, json.dumps(r.authors, ensure_ascii=False), r.year, r.venue, r.doi, r.arxiv_id, r.url,
                     r.extra.get("origin"), r.abstract))
                fts = _fts_text(nt)
                db.execute("INSERT INTO records_fts(rowid, title) VALUES (?, ?)", (cur.lastrowid, fts))
                for term in set(fts.split()):
                    db.execute("INSERT INTO df(term, n) VALUES (?, 1) ON CONFLICT(term) DO UPDATE SET n = n + 1", (term,))
                db.execute("INSERT INTO doi_prefix(venue, prefix, n) VALUES (?, ?, 1) "
                           "ON CONFLICT(venue, prefix) DO UPDATE SET n = n + 1",
                           (canonical_venue(r.venue) or "", doi_prefix(r.doi) or ""))
                if r.doi:
                    seen_doi.add(r.doi)
                seen_ty.add((nt, r.year))
                added += 1
        return added
    finally:
        db.close()


# --------------------------------------------------------------------------- querying


class LocalIndex:
    """Read-only access to an index built by :func:`build_index`.

    Thread-safe (one connection per thread). Raises ``FileNotFoundError`` when ``path`` does
    not exist. Methods return :class:`SourceResult` so the local index is one more source.
    """

    name = "local"

    def __init__(self, path: str | os.PathLike[str], *, authoritative: bool = True, limit: int = 20):
        self.path = str(path)
        if not Path(self.path).exists():
            raise FileNotFoundError(f"citation index not found: {self.path}")
        self.authoritative = authoritative
        self.limit = limit
        self._local = threading.local()

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
            self._local.db = db
        return db

    @staticmethod
    def _row(row: tuple) -> Record:
        title, authors, year, venue, doi, arxiv_id, url, origin, abstract = row
        return Record(title=title, authors=json.loads(authors), year=year, venue=venue, doi=doi, arxiv_id=arxiv_id,
                      url=url, source="local", extra={"origin": origin}, abstract=abstract or None,
                      abstract_kind="abstract" if abstract else None)

    @property
    def _COLS(self) -> str:  # noqa: N802 -- the column list, with NULL for an index built before ``abstract``
        cols = getattr(self, "_cols", None)
        if cols is None:
            have = {row[1] for row in self._db().execute("PRAGMA table_info(records)")}
            cols = self._cols = "title, authors, year, venue, doi, arxiv_id, url, origin, " + (
                "abstract" if "abstract" in have else "NULL")
        return cols

    def _done(self, recs: list[Record], what: str) -> SourceResult:
        """``found`` with the candidates, else ``not_found``. Either way the answer is definitive
        about what the library holds; whether the library's silence says anything about the
        world is :attr:`authoritative` (read by :func:`verifiers.citations._verify.expected_to_hold`):
        a partial library's ``not_found`` -- or its ``found`` with only other works -- is no
        evidence that a reference is made up."""
        if recs:
            return SourceResult("local", "found", recs)
        return SourceResult("local", "not_found", [], f"no {what} in the local index" + (
            "" if self.authoritative else " (a partial library: absence there is no evidence)"))

    def lookup_doi_sync(self, doi: str) -> SourceResult:
        rows = self._db().execute(f"SELECT {self._COLS} FROM records WHERE doi = ?", (doi.lower(),)).fetchall()
        return self._done([self._row(r) for r in rows], "record with this DOI")

    def lookup_arxiv_sync(self, arxiv_id: str) -> SourceResult:
        rows = self._db().execute(f"SELECT {self._COLS} FROM records WHERE arxiv_id = ?", (arxiv_id,)).fetchall()
        return self._done([self._row(r) for r in rows], "record with this arXiv ID")

    def search_sync(self, title: str, k: int = 5) -> SourceResult:
        nt = normalize_title(title)
        if not nt:
            return SourceResult("local", "not_found", [], "empty title")
        db = self._db()
        rows = db.execute(f"SELECT {self._COLS} FROM records WHERE norm_title = ?", (nt,)).fetchall()
        cands = [self._row(r) for r in rows]
        tokens = self._rare_tokens(_fts_text(nt).split())
        if tokens:
            q = " OR ".join('"' + t.replace('"', "") + '"' for t in tokens)
            try:
                rows = db.execute(
                    f"SELECT {', '.join(c if c == 'NULL' else 'r.' + c for c in (x.strip() for x in self._COLS.split(',')))} FROM records_fts f "
                    f"JOIN records r ON r.id = f.rowid WHERE records_fts MATCH ? ORDER BY bm25(records_fts) LIMIT ?",
                    (q, self.limit)).fetchall()
            except sqlite3.OperationalError:
                rows = []
            cands += [self._row(r) for r in rows]
        seen, uniq = set(), []
        for r in cands:
            key = (r.title, r.year, r.doi)
            if key not in seen:
                seen.add(key)
                uniq.append(r)
        uniq.sort(key=lambda r: title_similarity(title, r.title), reverse=True)
        return self._done(uniq[:k], "title match")

    def _prefix_profile(self) -> tuple[dict[str, dict[str, int]], set[str]]:
        """``({venue key: {DOI prefix or "": records}}, {every DOI prefix in the library})``,
        read once from the ``doi_prefix`` table (an index built before it existed is scanned)."""
        prof = getattr(self, "_profile", None)
        if prof is None:
            by_venue: dict[str, dict[str, int]] = {}
            try:
                rows = self._db().execute("SELECT venue, prefix, n FROM doi_prefix").fetchall()
            except sqlite3.OperationalError:
                acc: dict[tuple[str, str], int] = {}
                for venue, doi in self._db().execute("SELECT venue, doi FROM records"):
                    key = (canonical_venue(venue) or "", doi_prefix(doi) or "")
                    acc[key] = acc.get(key, 0) + 1
                rows = [(v, p, n) for (v, p), n in acc.items()]
            for venue, prefix, n in rows:
                by_venue.setdefault(venue, {})[prefix] = n
            prof = self._profile = (by_venue, {p for d in by_venue.values() for p in d if p})
        return prof

    def foreign_doi_prefix(self, doi: str, venue: str | None) -> str | None:
        """Offline evidence that ``doi`` was not issued for a work of ``venue`` (the venue of the
        library's own record of the work, which carries no DOI): a one-line reason, or None.

        The evidence: the library holds at least :data:`MIN_VENUE_RECORDS` records of that venue,
        none with the DOI's registrant prefix, and no record at all with that prefix. None for
        preprint venues and for repository / preprint prefixes (:func:`repository_doi`), where a
        second, legitimate DOI is normal.
        """
        prefix, key = doi_prefix(doi), canonical_venue(venue)
        if not prefix or not key or key in PREPRINT_VENUES or repository_doi(doi):
            return None
        by_venue, known = self._prefix_profile()
        counts = by_venue.get(key) or {}
        n = sum(counts.values())
        if prefix in known or n < MIN_VENUE_RECORDS:
            return None
        used = sorted(counts.items(), key=lambda pk: -pk[1])
        carry = ", ".join(f"{p + '/…' if p else 'no DOI'} ({k})" for p, k in used[:3])
        return f"the library's {n} {venue} records carry {carry}; none of its records has prefix {prefix}"

    def _rare_tokens(self, words: list[str], k: int = 6) -> list[str]:
        """The ``k`` query words with the lowest document frequency (words absent from the index
        are dropped: they cannot match). Rare words make the OR query small and its ranking cheap;
        the candidates are re-ranked by title similarity anyway."""
        uniq = list(dict.fromkeys(w for w in words if w))
        if not uniq:
            return []
        q = ",".join("?" * len(uniq))
        try:
            df = dict(self._db().execute(f"SELECT term, n FROM df WHERE term IN ({q})", uniq).fetchall())
        except sqlite3.OperationalError:  # an index built before the df table existed
            return sorted(uniq, key=len, reverse=True)[:16]
        present = [w for w in uniq if df.get(w)]
        return sorted(present, key=lambda w: df[w])[:k]

    # async face, same as the network sources
    async def lookup_doi(self, doi: str) -> SourceResult:
        return self.lookup_doi_sync(doi)

    async def lookup_arxiv(self, arxiv_id: str) -> SourceResult:
        return self.lookup_arxiv_sync(arxiv_id)

    async def search(self, title: str, authors: list[str] | None = None, year: int | None = None) -> SourceResult:
        return self.search_sync(title)

    async def aclose(self) -> None:
        return None

    def count(self) -> int:
        return int(self._db().execute("SELECT count(*) FROM records").fetchone()[0])
