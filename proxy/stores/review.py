"""The human review queue: answers the gateway could not settle, handed to people.

docs/design.md vocabulary "review": an answer handed to people (queue, API, CLI); a resolved
review is a labelled case, the human feedback loop of docs/review.md (by default the answers whose
correction loop gave up or diverged: what the loop could not correct automatically).

When (:func:`review_reason`, policy ``review: {enabled, when}``), first that applies:

==========================  =============================================================
reason                      the answer's report
==========================  =============================================================
``divergence``              the correction loop stopped on divergence (``correction.stop_reason``)
``max_retry_exceeded``      the correction loop gave up (``correction.state`` MAX_RETRY_EXCEEDED:
                            max rounds, oscillation, budget, deadline, upstream error)
``failed``                  ``status`` is ``failed`` (e.g. ``on_failure: annotate``: no correction tried)
``unverified``              ``status`` is ``unverified`` (checks attempted, none passed or failed)
``error``                   ``status`` is ``error``
==========================  =============================================================

The default ``when`` is ``[max_retry_exceeded, divergence]``. With several choices (``n > 1``)
each choice's report is looked at (``extra["choices"]``).

A review (a JSON object, ``object: "veracity.review"``)::

    {"id": "rev_...", "object": "veracity.review", "created": 1767000000 (unix s),
     "request_id", "model", "team", "key" (the key's name, never the key), "policy",
     "reason", "status": "open" | "resolved", "veracity_status" (the report's status),
     "question", "drafts" [every text the upstream wrote, in order], "answer" (the last
        draft: the text returned, or the text withheld when blocked) -- kept by default
        (policy ``review.include_text``, default true: a reviewer judges text), masked by
        :mod:`proxy.redaction`; null when the policy turns it off,
     "delivered": "answer" (the client got the answer) | "blocked" (the client got HTTP 422
        or a stream's error event instead: ``on_failure``/``on_unverified: block``),
     "group" (:func:`fingerprint`: reason + the failed checks' verifier and claim) | null,
     "count" (how many answers had this same failure; 1 for a new review),
     "occurrences" [{"request_id", "created", "model", "team", "delivered"}, ...] (the first
        :data:`MAX_OCCURRENCES`),
     "report" (the ``veracity`` report: checks, evidence, rounds, states),
     "resolution": null | {"verdict", "note", "reviewer", "resolved_at" (unix s)}}

Identical failures are one review: :meth:`ReviewStore.add` of a review whose ``group`` equals
an *open* review's adds one to that review's ``count`` (and its request to ``occurrences``)
instead of queueing a copy, so a model that repeats one wrong claim 400 times is one item for
the reviewer, with its count. A resolved group is closed: the next such answer opens a new one.

What is stored and for how long: the review (with the text above, unless
``review.include_text: false``) stays in the store until it is deleted by hand -- nothing
expires (the SQLite file or the Redis keys below); reviewer-page sessions expire after
:data:`SESSION_TTL_S`.

Stores: :class:`SQLiteReviewStore` (stdlib ``sqlite3``, inline under a lock as
:class:`proxy.stores.budget.SQLiteStore` does: a review is rare -- one per unsettled answer -- and
its insert takes microseconds, so neither a thread hop nor a new dependency such as
aiosqlite pays for itself) and :class:`RedisReviewStore` (redis-py's asyncio client, shared
by every replica) when ``verification.redis_url`` is configured. Both page oldest first with
OpenAI's list conventions (``after`` = the last id seen, ``has_more``), count open reviews
(:meth:`ReviewStore.count`, :meth:`ReviewStore.open_by`) and keep the reviewer page's
server-side sessions (:meth:`ReviewStore.session_put`; the session id is random, only its
SHA-256 is stored, next to the admin key's SHA-256 -- never the key).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, Protocol

from proxy import redaction
from proxy.observability.log import get_logger

__all__ = ["REASONS", "DEFAULT_WHEN", "VERDICTS", "ReviewStore", "SQLiteReviewStore", "RedisReviewStore",
           "ReviewNotFound", "ReviewConflict", "review_reason", "make_review", "open_store", "nothing_to_read",
           "backlog", "submit", "export_line", "review_db_path", "DEFAULT_REVIEW_DB", "terminal_safe", "terminal_json",
           "fingerprint", "SESSION_TTL_S"]

log = get_logger("veracity.review")

#: every ``review.when`` value, in precedence order (the first that applies names the reason)
REASONS = ("divergence", "max_retry_exceeded", "failed", "unverified", "error")
Reason = Literal["divergence", "max_retry_exceeded", "failed", "unverified", "error"]
#: the policy default: the two cases docs/review.md hands to people (the loop could not settle the answer)
DEFAULT_WHEN: tuple[str, ...] = ("max_retry_exceeded", "divergence")
#: a reviewer's verdict on the *answer*: ``correct`` (the checks were a false alarm),
#: ``incorrect`` (the answer is wrong), ``partially_correct``, ``cannot_tell``
VERDICTS = ("correct", "incorrect", "partially_correct", "cannot_tell")
#: SQLite file used when ``verification.review_db`` is not set (relative to the config file)
DEFAULT_REVIEW_DB = ".veracity/reviews.sqlite3"
#: most drafts kept per review (a sentinel + correction loop makes a handful)
MAX_DRAFTS = 16
#: longest note a reviewer may write (characters)
MAX_NOTE = 4000
#: most ``occurrences`` kept per review (``count`` keeps counting past it)
MAX_OCCURRENCES = 50
#: a reviewer-page session lasts this long (seconds), then the reviewer signs in again
SESSION_TTL_S = 8 * 3600


class ReviewNotFound(KeyError):
    """No review with this id."""


class ReviewConflict(Exception):
    """The review is already resolved (a second reviewer must not overwrite the first)."""


# ------------------------------------------------------------------------------ terminal output

#: Unicode general categories never written raw to a terminal: ``Cc`` (C0 controls with ESC,
#: DEL, C1 controls with CSI U+009B), ``Cf`` (format characters: the bidi embeddings, overrides
#: and isolates U+202A-U+202E and U+2066-U+2069 of Unicode Technical Report #36 "Bidirectional
#: text spoofing", zero-width characters), ``Zl``/``Zp`` (line and paragraph separators), ``Cs``
#: (lone surrogates: printing one raises UnicodeEncodeError), ``Co``/``Cn`` (private and unassigned)
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in _UNSAFE_CATEGORIES


def terminal_safe(value: Any, *, json_text: bool = False) -> str:
    """``value`` (any text from a model, a user or a key's owner: model names, teams, answers,
    claims, notes) as text that is safe to print to a terminal: every control or format
    character (:data:`_UNSAFE_CATEGORIES`: ESC and the escape sequences it starts, C1 controls,
    bidi overrides such as U+202E, newlines and tabs) is written as a visible Python-style
    escape (``\\x1b``, ``\\u202e``), so one field stays on one line and cannot move the
    cursor, recolour, retitle or reorder the terminal. ``None`` and other values are ``str()``-ed
    first. Printable text (any script, emoji without joiners) is unchanged.

    ``json_text``: ``value`` is JSON text (``json.dumps(..., ensure_ascii=False)`` output, one
    document or several separated by newlines): the characters are written as JSON ``\\uXXXX``
    escapes instead (a surrogate pair beyond U+FFFF), which decode to the same values, and
    newlines are kept (``json.dumps`` escapes those inside strings itself, so a raw one
    separates documents or indents). ``json.dumps`` escapes only C0 controls; DEL, C1 controls
    and bidi overrides would otherwise go out raw."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():   # fast path: no Cc/Cf/Zl/Zp/Cs/Co/Cn (nor non-ASCII spaces)
        return text
    out = []
    for ch in text:
        if ch == " " or (json_text and ch == "\n") or not _unsafe(ch):
            out.append(ch)
        elif json_text:
            out.append(json.dumps(ch)[1:-1])   # ASCII escapes: \\u202e, a surrogate pair
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return "".join(out)


def terminal_json(obj: Any, **kw: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, **kw)`` made safe for a terminal by
    :func:`terminal_safe` (``json_text=True``): the same JSON values, any script still readable,
    nothing a terminal would act on."""
    return terminal_safe(json.dumps(obj, ensure_ascii=False, **kw), json_text=True)


# ------------------------------------------------------------------------------ when + what


def _reports(report: Any) -> list[dict[str, Any]]:
    """The report's own ``extra`` plus each choice's report dict (``n > 1``)."""
    extra = getattr(report, "extra", None)
    if extra is None and isinstance(report, dict):
        extra = report
    extra = extra or {}
    out = [extra]
    for c in extra.get("choices") or ():
        if isinstance(c, dict):
            out.append(c)
    return out


def review_reason(report: Any, policy: Any) -> str | None:
    """Why ``report`` (a :class:`verifiers._types.Report` or its dict) goes to review under
    ``policy`` (its ``review: {enabled, when}``), or None. See the module doc's table for the
    reasons and their order."""
    cfg = getattr(policy, "review", None)
    if cfg is None or not cfg.enabled or not cfg.when:
        return None
    when = set(cfg.when)
    parts = _reports(report)
    status = getattr(report, "status", None) or (report.get("status") if isinstance(report, dict) else None)
    statuses = {status} | {p.get("status") for p in parts[1:]}
    corrections = [p.get("correction") for p in parts if isinstance(p.get("correction"), dict)]
    found = {
        "divergence": any(c.get("stop_reason") == "divergence" for c in corrections),
        "max_retry_exceeded": any(c.get("state") == "MAX_RETRY_EXCEEDED" for c in corrections),
        "failed": "failed" in statuses,
        "unverified": "unverified" in statuses,
        "error": "error" in statuses,
    }
    return next((r for r in REASONS if r in when and found[r]), None)


def fingerprint(reason: str, report: dict[str, Any]) -> str | None:
    """What makes two reviews "the same failure": the review ``reason`` and the set of
    ``(verifier, claim)`` of the report's failed checks (every choice's, ``n > 1``); when no
    check failed (``unverified``, ``error``), of its undecided checks with their outcome. A
    hex SHA-256 prefix (24 chars), or None when the report has no check to compare (such a
    review is never merged)."""
    checks = [c for p in _reports(report) for c in (p.get("checks") or ()) if isinstance(c, dict)]
    failed = sorted({(str(c.get("verifier")), str(c.get("claim"))) for c in checks if c.get("outcome") == "fail"})
    key: list[Any] = failed or sorted({(str(c.get("verifier")), str(c.get("claim")), str(c.get("outcome")))
                                       for c in checks if c.get("outcome") in ("unknown", "error")})
    if not key:
        return None
    return hashlib.sha256(json.dumps([reason, key], ensure_ascii=False).encode("utf-8", "surrogateescape")
                          ).hexdigest()[:24]


def make_review(*, request_id: str, model: str, team: str, key: str | None, policy: str, reason: str,
                report: dict[str, Any], question: str | None = None, drafts: list[str] | None = None,
                answer: Any = None, include_text: bool = True, blocked: bool = False,
                created: int | None = None) -> dict[str, Any]:
    """A new open review (see the module doc for the shape). ``question``/``drafts``/``answer``
    are kept with ``include_text`` (the policy's ``review.include_text``, default true).
    ``blocked``: the client got an error (HTTP 422 or a stream's error event) instead of
    ``answer``. Secrets are masked as in the log and the audit record
    (:func:`proxy.redaction.redact_obj`)."""
    created = int(time.time()) if created is None else created
    delivered = "blocked" if blocked else "answer"
    rec = {
        "id": "rev_" + secrets.token_hex(12), "object": "veracity.review", "created": created,
        "request_id": request_id, "model": model, "team": team, "key": key, "policy": policy,
        "reason": reason, "status": "open", "veracity_status": report.get("status"),
        "question": question if include_text else None,
        "drafts": list(drafts or [])[:MAX_DRAFTS] if include_text else None,
        "answer": answer if include_text else None,
        "delivered": delivered, "group": fingerprint(reason, report), "count": 1,
        "occurrences": [{"request_id": request_id, "created": created, "model": model, "team": team,
                         "delivered": delivered}],
        "report": report, "resolution": None,
    }
    return redaction.redact_obj(rec) if redaction.needs_redaction(_dumps(rec)) else rec


def export_line(review: dict[str, Any]) -> dict[str, Any]:
    """One labelled case for ``veracity review export`` (one JSON object per line)::

        {"id", "request_id", "created", "model", "team", "policy", "reason",
         "question", "answer", "drafts",          (null when the policy kept no text)
         "delivered", "count", "request_ids" (the occurrences' request ids),
         "veracity_status", "checks": [Check dicts], "failed_checks": [Check dicts],
         "label": {"verdict", "note", "reviewer", "resolved_at"} | null (open)}

    ``label.verdict`` is the human's verdict on ``answer`` (:data:`VERDICTS`); ``checks`` are
    the gateway's, so ``verdict == "correct"`` with failed checks marks a false alarm."""
    report = review.get("report") or {}
    checks = list(report.get("checks") or [])
    return {
        "id": review["id"], "request_id": review.get("request_id"), "created": review.get("created"),
        "model": review.get("model"), "team": review.get("team"), "policy": review.get("policy"),
        "reason": review.get("reason"), "question": review.get("question"), "answer": review.get("answer"),
        "drafts": review.get("drafts"), "delivered": review.get("delivered", "answer"),
        "count": review.get("count", 1),
        "request_ids": [o.get("request_id") for o in review.get("occurrences") or ()] or [review.get("request_id")],
        "veracity_status": review.get("veracity_status"),
        "checks": checks, "failed_checks": [c for c in checks if c.get("outcome") == "fail"],
        "label": review.get("resolution"),
    }


def _resolution(verdict: str, note: str | None, reviewer: str | None) -> dict[str, Any]:
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {', '.join(VERDICTS)}")
    note = note or ""
    if len(note) > MAX_NOTE:
        raise ValueError(f"note is longer than {MAX_NOTE} characters")
    return {"verdict": verdict, "note": note, "reviewer": reviewer, "resolved_at": int(time.time())}


# ------------------------------------------------------------------------------ stores


class ReviewStore(Protocol):
    """What the routes, the CLI and the pipeline use. ``status``: ``open``, ``resolved`` or
    None (all). ``add`` returns the id the review is stored under: its own, or that of the open
    review of the same ``group`` it was merged into (``count`` + 1, see the module doc).
    ``list`` returns ``(reviews oldest first, has_more)``; ``after`` is the id of the last
    review of the previous page (unknown id: :class:`ReviewNotFound`). ``count(status)``: how
    many reviews have that status (None: all); ``open_by()``: open reviews per ``(model,
    team)``. ``resolve`` raises :class:`ReviewNotFound`, :class:`ReviewConflict` (already
    resolved) or ValueError (verdict not in :data:`VERDICTS`, note too long).

    Sessions of the reviewer page: ``session_put(sid_hash, data, ttl_s)`` keeps ``data`` (a
    JSON-ready dict) under the SHA-256 hex of a random session id for ``ttl_s`` seconds;
    ``session_get`` returns it, or None once expired or deleted; ``session_delete`` ends it."""

    async def add(self, review: dict[str, Any]) -> str: ...
    async def get(self, review_id: str) -> dict[str, Any]: ...
    async def list(self, status: str | None = "open", limit: int = 50,
                   after: str | None = None) -> tuple[list[dict[str, Any]], bool]: ...
    async def count(self, status: str | None = "open") -> int: ...
    async def open_by(self) -> dict[tuple[str, str], int]: ...
    async def resolve(self, review_id: str, verdict: str, note: str | None,
                      reviewer: str | None) -> dict[str, Any]: ...
    async def session_put(self, sid_hash: str, data: dict[str, Any], ttl_s: int) -> None: ...
    async def session_get(self, sid_hash: str) -> dict[str, Any] | None: ...
    async def session_delete(self, sid_hash: str) -> None: ...
    async def close(self) -> None: ...


def _dumps(obj: Any) -> str:
    line = json.dumps(obj, ensure_ascii=False, default=str)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from model text: escape it, keep the review
        line = json.dumps(obj, default=str)
    return line


def _merge(rec: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """``rec`` (an open review) with one more occurrence of its failure, ``new``."""
    rec["count"] = int(rec.get("count", 1)) + 1
    occ = rec.setdefault("occurrences", [])
    if len(occ) < MAX_OCCURRENCES:
        occ.extend(new.get("occurrences") or ())
    return rec


class SQLiteReviewStore:
    """Reviews in one SQLite table ``review(seq INTEGER PRIMARY KEY, id UNIQUE, status, grp,
    model, team, record)`` (``record``: the review as JSON; ``grp``, ``model``, ``team``
    copied out of it for the merge and the counts) and sessions in ``review_session(id
    PRIMARY KEY, expires, data)``. ``path``: a file (folders created) or ``:memory:``. Calls
    run inline under a lock (microseconds each; see the module doc). A file from an older
    version (no ``grp``/``model``/``team`` columns) gets them added (``ALTER TABLE``) and
    filled from each record once; its reviews have no ``group``, so they are never merged."""

    def __init__(self, path: str | os.PathLike[str] = ":memory:"):
        path = str(path)
        if path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10)
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")  # the CLI reads while the gateway writes
            # WAL + NORMAL: no fsync per commit (SQLite docs "WAL mode": consistent, and durable
            # except for the last commits on power loss); an add took 4.5 ms with FULL, 0.16 ms with NORMAL (measured, 500 reviews of ~7 kB)
            self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS review (seq INTEGER PRIMARY KEY AUTOINCREMENT, "
                         "id TEXT UNIQUE NOT NULL, status TEXT NOT NULL, record TEXT NOT NULL)")
        cols = {r[1] for r in self._db.execute("PRAGMA table_info(review)")}
        missing = [col for col in ("grp", "model", "team") if col not in cols]
        for col in missing:
            self._db.execute(f"ALTER TABLE review ADD COLUMN {col} TEXT")
        if missing:  # a file from before the columns: fill them from the records (SQLite's JSON functions)
            try:
                self._db.execute("UPDATE review SET grp = json_extract(record, '$.group'), "
                                 "model = json_extract(record, '$.model'), team = json_extract(record, '$.team')")
            except sqlite3.OperationalError:  # an SQLite built without JSON: old rows count under ""
                pass
        self._db.execute("CREATE INDEX IF NOT EXISTS review_open_grp ON review (grp) WHERE status = 'open'")
        self._db.execute("CREATE INDEX IF NOT EXISTS review_status ON review (status, model, team)")
        self._db.execute("CREATE TABLE IF NOT EXISTS review_session (id TEXT PRIMARY KEY, expires REAL NOT NULL, "
                         "data TEXT NOT NULL)")
        self._lock = threading.Lock()

    async def add(self, review: dict[str, Any]) -> str:
        grp = review.get("group")
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = (self._db.execute("SELECT id, record FROM review WHERE grp=? AND status='open' ORDER BY seq "
                                        "LIMIT 1", (grp,)).fetchone() if grp else None)
                if row is not None:
                    rec = _merge(json.loads(row[1]), review)
                    self._db.execute("UPDATE review SET record=? WHERE id=?", (_dumps(rec), row[0]))
                    rid = row[0]
                else:
                    self._db.execute("INSERT INTO review (id, status, grp, model, team, record) VALUES (?,?,?,?,?,?)",
                                     (review["id"], review["status"], grp, review.get("model"), review.get("team"),
                                      _dumps(review)))
                    rid = review["id"]
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return str(rid)

    async def get(self, review_id: str) -> dict[str, Any]:
        with self._lock:
            row = self._db.execute("SELECT record FROM review WHERE id=?", (review_id,)).fetchone()
        if row is None:
            raise ReviewNotFound(review_id)
        return json.loads(row[0])

    async def list(self, status: str | None = "open", limit: int = 50,
                   after: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        with self._lock:
            start = 0
            if after is not None:
                row = self._db.execute("SELECT seq FROM review WHERE id=?", (after,)).fetchone()
                if row is None:
                    raise ReviewNotFound(after)
                start = row[0]
            sql, args = "SELECT record FROM review WHERE seq > ?", [start]
            if status is not None:
                sql += " AND status = ?"
                args.append(status)
            rows = self._db.execute(sql + " ORDER BY seq LIMIT ?", (*args, limit + 1)).fetchall()
        return [json.loads(r[0]) for r in rows[:limit]], len(rows) > limit

    async def count(self, status: str | None = "open") -> int:
        with self._lock:
            if status is None:
                return int(self._db.execute("SELECT COUNT(*) FROM review").fetchone()[0])
            return int(self._db.execute("SELECT COUNT(*) FROM review WHERE status=?", (status,)).fetchone()[0])

    async def open_by(self) -> dict[tuple[str, str], int]:
        with self._lock:
            rows = self._db.execute("SELECT COALESCE(model, ''), COALESCE(team, ''), COUNT(*) FROM review "
                                    "WHERE status='open' GROUP BY 1, 2").fetchall()
        return {(m, t): int(n) for m, t, n in rows}

    async def resolve(self, review_id: str, verdict: str, note: str | None,
                      reviewer: str | None) -> dict[str, Any]:
        resolution = _resolution(verdict, note, reviewer)
        with self._lock:
            row = self._db.execute("SELECT record FROM review WHERE id=?", (review_id,)).fetchone()
            if row is None:
                raise ReviewNotFound(review_id)
            rec = json.loads(row[0])
            rec["status"], rec["resolution"] = "resolved", resolution
            cur = self._db.execute("UPDATE review SET status='resolved', record=? WHERE id=? AND status='open'",
                                   (_dumps(rec), review_id))
            if cur.rowcount != 1:
                raise ReviewConflict(review_id)
        return rec

    async def session_put(self, sid_hash: str, data: dict[str, Any], ttl_s: int) -> None:
        now = time.time()
        with self._lock:
            self._db.execute("DELETE FROM review_session WHERE expires < ?", (now,))  # the expired ones
            self._db.execute("INSERT OR REPLACE INTO review_session (id, expires, data) VALUES (?,?,?)",
                             (sid_hash, now + ttl_s, _dumps(data)))

    async def session_get(self, sid_hash: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT data FROM review_session WHERE id=? AND expires >= ?",
                                   (sid_hash, time.time())).fetchone()
        return json.loads(row[0]) if row else None

    async def session_delete(self, sid_hash: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM review_session WHERE id=?", (sid_hash,))

    async def close(self) -> None:
        with self._lock:
            self._db.close()


class RedisReviewStore:
    """Reviews in Redis, shared by every replica on the same ``redis_url``:
    ``{prefix}:r:{id}`` the review as JSON; sorted sets ``{prefix}:all``, ``{prefix}:open``,
    ``{prefix}:resolved`` of ids scored by a sequence number (``INCR {prefix}:seq``) for paging
    oldest first; ``{prefix}:g:{group}`` the id of the open review of that group (the merge);
    hash ``{prefix}:open_by`` open reviews per ``model`` + US (0x1f) + ``team``;
    ``{prefix}:s:{session hash}`` a reviewer-page session (expires with ``EX``). Adding,
    merging and resolving are ``WATCH``/``MULTI`` transactions, so two replicas cannot both
    open one group, and two reviewers cannot both resolve one review. Reviews never expire:
    one is kept until someone deletes it."""

    def __init__(self, url: str, prefix: str = "veracity:review"):
        import redis.asyncio as aioredis  # redis-py's asyncio client (as proxy.stores.budget.RedisStore)

        from proxy.stores.reports import REDIS_TIMEOUTS

        self._r = aioredis.from_url(url, **REDIS_TIMEOUTS)  # a frozen Redis: ~1 s, then the outage path
        self.prefix = prefix

    def _k(self, name: str) -> str:
        return f"{self.prefix}:{name}"

    @staticmethod
    def _by(review: dict[str, Any]) -> str:
        return f"{review.get('model') or ''}\x1f{review.get('team') or ''}"

    async def add(self, review: dict[str, Any]) -> str:
        from redis.exceptions import WatchError

        grp = review.get("group")
        gkey = self._k("g:" + grp) if grp else None
        while True:
            async with self._r.pipeline(transaction=True) as pipe:
                try:
                    if gkey is not None:
                        await pipe.watch(gkey)
                        open_id = await pipe.get(gkey)
                        if open_id is not None:
                            open_id = open_id.decode() if isinstance(open_id, bytes) else open_id
                            rkey = self._k("r:" + open_id)
                            await pipe.watch(rkey)
                            raw = await pipe.get(rkey)
                            rec = json.loads(raw) if raw is not None else None
                            if rec is not None and rec.get("status") == "open":
                                pipe.multi()
                                pipe.set(rkey, _dumps(_merge(rec, review)))
                                await pipe.execute()
                                return str(open_id)
                    rid = review["id"]
                    seq = await self._r.incr(self._k("seq"))
                    pipe.multi()
                    pipe.set(self._k("r:" + rid), _dumps(review))
                    pipe.zadd(self._k("all"), {rid: seq})
                    pipe.zadd(self._k(review["status"]), {rid: seq})
                    pipe.hincrby(self._k("open_by"), self._by(review), 1)
                    if gkey is not None:
                        pipe.set(gkey, rid)
                    await pipe.execute()
                    return str(rid)
                except WatchError:  # another replica opened or merged this group meanwhile: again
                    continue

    async def get(self, review_id: str) -> dict[str, Any]:
        raw = await self._r.get(self._k("r:" + review_id))
        if raw is None:
            raise ReviewNotFound(review_id)
        return json.loads(raw)

    async def list(self, status: str | None = "open", limit: int = 50,
                   after: str | None = None) -> tuple[list[dict[str, Any]], bool]:
        start = "-inf"
        if after is not None:
            score = await self._r.zscore(self._k("all"), after)
            if score is None:
                raise ReviewNotFound(after)
            start = f"({int(score)}"
        ids = await self._r.zrangebyscore(self._k(status or "all"), start, "+inf", start=0, num=limit + 1)
        page = [i.decode() if isinstance(i, bytes) else i for i in ids[:limit]]
        raws = await self._r.mget([self._k("r:" + i) for i in page]) if page else []
        return [json.loads(r) for r in raws if r is not None], len(ids) > limit

    async def count(self, status: str | None = "open") -> int:
        return int(await self._r.zcard(self._k(status or "all")))

    async def open_by(self) -> dict[tuple[str, str], int]:
        raw = await self._r.hgetall(self._k("open_by"))
        out: dict[tuple[str, str], int] = {}
        for field, n in raw.items():
            field = field.decode() if isinstance(field, bytes) else field
            model, _, team = field.partition("\x1f")
            if int(n) > 0:
                out[(model, team)] = int(n)
        return out

    async def resolve(self, review_id: str, verdict: str, note: str | None,
                      reviewer: str | None) -> dict[str, Any]:
        from redis.exceptions import WatchError

        resolution = _resolution(verdict, note, reviewer)
        key = self._k("r:" + review_id)
        async with self._r.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(key)
                    raw = await pipe.get(key)
                    if raw is None:
                        raise ReviewNotFound(review_id)
                    rec = json.loads(raw)
                    if rec.get("status") != "open":
                        raise ReviewConflict(review_id)
                    rec["status"], rec["resolution"] = "resolved", resolution
                    score = await pipe.zscore(self._k("all"), review_id)
                    pipe.multi()
                    pipe.set(key, _dumps(rec))
                    pipe.zrem(self._k("open"), review_id)
                    pipe.zadd(self._k("resolved"), {review_id: score or 0})
                    pipe.hincrby(self._k("open_by"), self._by(rec), -1)
                    if rec.get("group"):  # the group is closed: its next failure opens a new review
                        pipe.delete(self._k("g:" + rec["group"]))
                    await pipe.execute()
                    return rec
                except WatchError:  # changed meanwhile: read again (it may be resolved now)
                    continue

    async def session_put(self, sid_hash: str, data: dict[str, Any], ttl_s: int) -> None:
        await self._r.set(self._k("s:" + sid_hash), _dumps(data), ex=max(1, int(ttl_s)))

    async def session_get(self, sid_hash: str) -> dict[str, Any] | None:
        raw = await self._r.get(self._k("s:" + sid_hash))
        return json.loads(raw) if raw is not None else None

    async def session_delete(self, sid_hash: str) -> None:
        await self._r.delete(self._k("s:" + sid_hash))

    async def close(self) -> None:
        await self._r.aclose()


# ------------------------------------------------------------------------------ per config


def review_db_path(cfg: Any) -> str:
    """The SQLite file of gateway config ``cfg``: ``verification.review_db`` (made absolute by
    :func:`proxy.config.load_config`), else :data:`DEFAULT_REVIEW_DB` in the config file's
    folder (``cfg.source`` when it is a file), else in the working folder."""
    settings = getattr(cfg, "verification", None)
    path = getattr(settings, "review_db", None)
    if path:
        return str(path)
    source = getattr(cfg, "source", None)
    if source and Path(source).is_file():
        return str(Path(source).resolve().parent / DEFAULT_REVIEW_DB)
    return DEFAULT_REVIEW_DB


def open_store(cfg: Any) -> ReviewStore:
    """The store of gateway config ``cfg``: Redis when ``verification.redis_url`` (or
    ``$VERACITY_REDIS_URL``) is set, else SQLite at :func:`review_db_path`."""
    settings = getattr(cfg, "verification", None)
    url = getattr(settings, "redis_url", None) or os.environ.get("VERACITY_REDIS_URL") or None
    if url:
        return RedisReviewStore(url)
    return SQLiteReviewStore(review_db_path(cfg))


async def submit(store: ReviewStore | Callable[[], ReviewStore], review: dict[str, Any]) -> str | None:
    """Add ``review`` to ``store`` (or to the store a callable opens: opening may fail too);
    returns its id, or None when the store failed (the failure is logged as
    ``review_store_error``: the answer still goes out)."""
    try:
        return await (store() if callable(store) else store).add(review)
    except Exception as exc:  # noqa: BLE001 - a store outage must not fail the request
        log.warning("review_store_error", request_id=review.get("request_id"), error=type(exc).__name__,
                    message=str(exc)[:300])
        return None


#: longest a scrape waits for the review store's counts (seconds); past it the gauge keeps its last value
BACKLOG_TIMEOUT_S = 1.0


def nothing_to_read(cfg: Any) -> bool:
    """True when gateway config ``cfg``'s store cannot hold a review yet, so a scrape need not
    open it: no Redis and no SQLite file (nothing ever went to review; opening would create it)."""
    settings = getattr(cfg, "verification", None)
    if getattr(settings, "redis_url", None) or os.environ.get("VERACITY_REDIS_URL"):
        return False
    path = review_db_path(cfg)
    return path != ":memory:" and not Path(path).is_file()


async def backlog(store: ReviewStore | Callable[[], ReviewStore] | None) -> dict[tuple[str, str], int] | None:
    """Open reviews per ``(model, team)`` for the ``veracity_review_open`` gauge, read at each
    ``/metrics`` scrape from ``store`` (or the one a callable opens); None when there is
    nothing to read (``store`` None: see :func:`nothing_to_read`) or the store did not answer
    within :data:`BACKLOG_TIMEOUT_S` (logged as ``review_store_error``; a scrape must not hang
    or fail)."""
    import asyncio

    if store is None:
        return None
    try:
        return await asyncio.wait_for((store() if callable(store) else store).open_by(), BACKLOG_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the store is down: the scrape still answers
        log.warning("review_store_error", error=type(exc).__name__, message=str(exc)[:300])
        return None
