"""Audit records: one per verified request, as JSON lines or in SQLite.

A record: ``ts`` (UTC ISO-8601), ``request_id``, ``team``, ``key`` (the key's name or hash
prefix, never the key), ``model``, ``policy``, ``status``, ``report`` (the ``veracity``
object), and ``prompt``/``answer`` text only when the policy's ``audit.include_text`` is set.

``AuditLog.open("audit.jsonl")`` appends JSON lines; a path ending in ``.sqlite3``/``.db``
(or ``format="sqlite"``) writes the table ``audit(ts, request_id, team, model, policy, status,
record)``. Writes are small and synchronous under a lock (append + flush: microseconds), so
records are never interleaved between concurrent requests.

Secrets: a record is masked as the request's log line is (:mod:`proxy.redaction`: configured
secrets, also URL- or JSON-escaped, and key-shaped strings become ``[REDACTED]``) before it is
written, text fields included.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from proxy import redaction

__all__ = ["AuditLog", "make_record"]


def make_record(*, request_id: str, team: str, model: str, policy: str, report: dict[str, Any],
                key: str | None = None, prompt: Any = None, answer: str | None = None,
                include_text: bool = False) -> dict[str, Any]:
    """The audit record dict (see module docstring). Text fields only with ``include_text``."""
    rec: dict[str, Any] = {
        "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds"),
        "request_id": request_id, "team": team, "key": key, "model": model, "policy": policy,
        "status": report.get("status"), "report": report,
    }
    if include_text:
        rec["prompt"] = prompt
        rec["answer"] = answer
    return rec


class AuditLog:
    """Append-only audit sink. ``write(record)`` never raises (an audit failure is counted in
    ``errors`` and must not fail the request); ``read_all()`` is for tests and tools."""

    def __init__(self, path: str | os.PathLike[str], format: str | None = None):
        self.path = Path(path)
        self.format = format or ("sqlite" if self.path.suffix in (".sqlite3", ".sqlite", ".db") else "jsonl")
        self.errors = 0
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.format == "sqlite":
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS audit (ts TEXT, request_id TEXT, team TEXT, "
                             "model TEXT, policy TEXT, status TEXT, record TEXT)")
            self._fh = None
        else:
            self._db = None
            self._fh = open(self.path, "a", encoding="utf-8")

    @classmethod
    def open(cls, path: str | os.PathLike[str], format: str | None = None) -> "AuditLog":
        return cls(path, format)

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` (redacted, see the module doc)."""
        try:
            line = json.dumps(record, ensure_ascii=False, default=str)
            if redaction.needs_redaction(line):  # the log line's masking, in every string
                record = redaction.redact_obj(json.loads(line))
                line = json.dumps(record, ensure_ascii=False, default=str)
            if not line.isascii():
                try:
                    line.encode("utf-8")
                except UnicodeEncodeError:  # a lone surrogate from model text: escape, keep the record
                    line = json.dumps(record, default=str)
            with self._lock:
                if self._db is not None:
                    self._db.execute("INSERT INTO audit VALUES (?,?,?,?,?,?,?)",
                                     (record.get("ts"), record.get("request_id"), record.get("team"),
                                      record.get("model"), record.get("policy"), record.get("status"), line))
                else:
                    self._fh.write(line + "\n")
                    self._fh.flush()
        except Exception:
            self.errors += 1

    def read_all(self) -> list[dict[str, Any]]:
        """Every record written so far (oldest first)."""
        with self._lock:
            if self._db is not None:
                return [json.loads(r[0]) for r in self._db.execute("SELECT record FROM audit ORDER BY rowid")]
            self._fh.flush()
            with open(self.path, encoding="utf-8") as fh:
                return [json.loads(line) for line in fh if line.strip()]

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
            elif self._fh is not None:
                self._fh.close()
