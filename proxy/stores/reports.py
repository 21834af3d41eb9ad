"""The report store: every chat completion's final ``veracity`` report, fetchable by request id.

Some clients drop the report on the way (LangChain's ``ChatOpenAI`` keeps no unknown response
field; openai-python's ``chat.completions.stream()`` helper rebuilds the completion without it),
and a stream's headers go out before its verification ends. So the gateway keeps each report
for ``reports.ttl_s`` seconds and serves it at::

    GET /v1/veracity/reports/{request_id}        (request_id: the response's x-request-id)

* Auth: the key that made the request, or an admin key (``keys[].admin``). In pass-through auth
  the caller's ``Authorization`` value plays the key's part. Stored is a SHA-256 of that
  identity (:func:`owner_of`: of the virtual key's configured hash, so two keys with one name
  or none are two owners), never a key.
* Several records for one id (two keys sent the same ``x-request-id``): each key reads only its
  own. An admin reading the id gets the record when there is one, else all of them, oldest
  write first (:func:`list_body`): ``{"object": "list", "id", "data": [record + "owner" (the
  owner hash) + "key" (the key's name, or null)], "has_more"}``; ``?owner=<hash>`` picks one.
* ``200``: the final report; ``202`` (``Retry-After: 1``): the request is known but its report
  is not final yet (a stream still verifying, an ``observe`` answer verified in the background);
  ``404 report_not_found``: unknown id, expired, or another key's (existence is not revealed);
  ``401``: no valid key; ``503 report_store_unavailable``: Redis unreachable and the report is
  not in this process.
* Body (:func:`record_body`)::

    {"object": "veracity.report", "id": "<request id>", "model": "<requested model>",
     "created": <unix seconds the request arrived>, "status": "complete" | "pending",
     "veracity": {<the report, as in the response's veracity field>}}

Storage: in this process (an LRU bounded by ``reports.max_in_memory`` records and
``reports.max_in_memory_bytes`` of record bodies, entries expire after
``ttl_s``), and in Redis too when ``verification.redis_url`` (or ``$VERACITY_REDIS_URL``) is set,
so every replica can answer (keys ``veracity:report:{owner}:{request_id}`` with the record as JSON
and ``veracity:report-owners:{request_id}``, a sorted set of the id's owners scored by their first
write, for admin look-ups, both with ``EX ttl_s``). Records are keyed by owner *and* request id:
a client choosing another's ``x-request-id`` gets its own record, never overwrites the other's.
A Redis outage never fails a chat request: the write is logged (``report_store_error``) and the
report stays fetchable from the serving process.

The summary header (:func:`summary_header`) fits header pass-through (LangChain's
``include_response_headers=True``): ``x-veracity-summary: status=failed; arithmetic=1 fail,2
pass; code=1 unknown`` and ``x-veracity-report-url: /v1/veracity/reports/<id>``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
import time
from array import array
from collections import OrderedDict
from typing import Any

try:  # the redacted-report cache writes with orjson (a Fragment); without it, the general path
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a dependency
    _orjson = None  # type: ignore[assignment]

from proxy import redaction
from proxy.observability.log import get_logger
from proxy.wire.json import dumps

__all__ = ["REPORT_ROUTE", "ReportStore", "RedactedReports", "owner_of", "owner_of_key", "record_body", "list_body",
           "summary_header", "report_headers", "report_header_pairs", "REPORT_PATH", "open_store", "publish", "publish_soon", "lookup", "MAX_LISTED",
           "FixedReport", "RecordParts", "fixed_record_parts", "fixed_record_body", "record_bytes", "record_size",
           "store_local", "store_shared", "FixedRing"]

log = get_logger("veracity")

REPORT_ROUTE = "/v1/veracity/reports/{request_id}"
#: redis-py client timeouts (seconds) of every store the gateway keeps in Redis (reports, daily
#: budgets, reviews): a Redis that accepts connections but does not answer (frozen, overloaded)
#: costs a request about a second per store call, then the store's outage path runs. Without
#: them redis-py waits 5 s per try, retried (a frozen Redis cost a chat request ~16 s).
REDIS_TIMEOUTS = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0}
#: the order outcomes are listed in a verifier's summary entry (worst first)
OUTCOME_ORDER = ("fail", "error", "unknown", "pass")
#: most verifiers named in ``x-veracity-summary`` (the rest: ``+N more``): keeps the header short
MAX_SUMMARY_VERIFIERS = 8
#: most records an admin's look-up of one request id lists (``has_more`` says when there are more)
MAX_LISTED = 100
_OWNER_RE = re.compile(r"[0-9a-f]{64}")


def owner_of(principal: Any) -> str:
    """The stored identity of a caller: SHA-256 (hex) of ``keyhash:<the virtual key's configured
    hash>`` (``keys[].hash``, itself a SHA-256 of the key), else of ``key:<name>`` (a principal
    made without the hash), or in pass-through auth of ``auth:<Authorization value>``
    (``anonymous`` without one). Never the key itself; two keys that share a name, or have
    none, are two owners; the store lists no key names."""
    return _owner(getattr(principal, "key_hash", None), principal.key_name, principal.upstream_auth)


def owner_of_key(key_hash: str) -> str:
    """:func:`owner_of` of the virtual key whose ``keys[].hash`` is ``key_hash``."""
    return _owner(key_hash, None, None)


@functools.lru_cache(maxsize=4096)
def _owner(key_hash: str | None, key_name: str | None, upstream_auth: str | None) -> str:
    if key_hash:
        ident = "keyhash:" + key_hash
    elif key_name:
        ident = "key:" + key_name
    elif upstream_auth:
        ident = "auth:" + upstream_auth
    else:
        ident = "anonymous"
    return hashlib.sha256(("veracity-report-owner\0" + ident).encode("utf-8", "surrogateescape")).hexdigest()


class RedactedReports:
    """A bounded LRU of report JSON -> the JSON of that report redacted
    (:func:`proxy.redaction.redact_obj`): a gateway answers most requests with one of a few
    identical reports (a checks-off policy's ``skipped`` report, the same for every request), whose
    redaction (~35 us: every string scanned) would otherwise be paid per request. Keyed by the
    report's own compact JSON (equal JSON, equal report, equal redaction); emptied whenever the
    registered secrets change (:func:`proxy.redaction.registered`). At most ``size`` entries
    (least recently used dropped first), none whose JSON is longer than ``max_bytes``. Thread-safe."""

    def __init__(self, size: int = 64, max_bytes: int = 4096) -> None:
        self.size = size
        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, bytes] = OrderedDict()
        self._secrets: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, report: Any) -> bytes | None:
        """The redacted report as compact JSON (what orjson writes for it), or None when orjson
        cannot write the report (a lone surrogate, an integer past 64 bits, a key that is not a
        string: the caller's general path handles those)."""
        if _orjson is None:
            return None
        try:
            key = _orjson.dumps(report)
        except TypeError:
            return None
        secrets = redaction.registered()
        with self._lock:
            if secrets != self._secrets:
                self._entries.clear()
                self._secrets = secrets
            hit = self._entries.get(key)
            if hit is not None:
                self._entries.move_to_end(key)
                return hit
        try:
            hit = _exact(_orjson.dumps(redaction.redact_obj(report)))
        except TypeError:
            return None
        if len(key) <= self.max_bytes:
            with self._lock:
                if secrets == self._secrets:
                    self._entries[_exact(key)] = hit
                    while len(self._entries) > self.size:
                        self._entries.popitem(last=False)
        return hit


_REDACTED = RedactedReports()


def _exact(data: bytes) -> bytes:
    """A copy of ``data`` in an allocation of its own size. orjson writes into a buffer of at
    least 4 KiB that it does not shrink (measured: 20,000 bodies of ~300 bytes held 78 MiB, their
    copies 7 MiB): a body kept for long (a stored record) is copied once."""
    return memoryview(data).tobytes()


def record_body(request_id: str, model: str, created: int, report: dict[str, Any], *, pending: bool) -> bytes:
    """The JSON body ``GET /v1/veracity/reports/{id}`` answers (see the module doc), with every
    configured secret (verbatim, URL-encoded, JSON-escaped) and key-shaped string in the report
    replaced by ``[REDACTED]`` (:func:`proxy.redaction.redact_obj`, the path logs, audit and
    reviews share). The redacted report comes from :class:`RedactedReports` (the same bytes
    orjson writes in place); the body is in an allocation of its own size (it is stored)."""
    status = "pending" if pending else "complete"
    frag = _REDACTED.get(report)
    if frag is not None:
        try:
            return _exact(_orjson.dumps({"object": "veracity.report", "id": request_id, "model": model,
                                         "created": created, "status": status,
                                         "veracity": _orjson.Fragment(frag)}))
        except TypeError:  # an id or model orjson refuses: the general path below
            pass
    return _exact(dumps({"object": "veracity.report", "id": request_id, "model": model, "created": created,
                         "status": status, "veracity": redaction.redact_obj(report)}))


class FixedReport:
    """A report dict that never changes (a checks-off policy's ``skipped`` report, the same for
    every answer), kept with its redacted JSON (:class:`RedactedReports`) so that writing a
    record of it (:func:`fixed_record_body`) costs no serialisation of the report: the redacted
    JSON is looked up again only when the registered secrets change
    (:func:`proxy.redaction.registered`). ``report`` must not be mutated after this is made."""

    __slots__ = ("report", "_secrets", "_frag")

    def __init__(self, report: dict[str, Any]) -> None:
        self.report = report
        self._secrets: tuple[str, ...] | None = None
        self._frag: bytes | None = None

    def fragment(self) -> bytes | None:
        """The report redacted, as the compact JSON orjson writes (None: see :meth:`RedactedReports.get`)."""
        secrets = redaction.registered()
        if secrets != self._secrets:
            self._frag = _REDACTED.get(self.report)
            self._secrets = secrets
        return self._frag


class FixedRing:
    """The records of :class:`FixedReport` answers (a checks-off policy's, the lean lane's), kept
    as one ring of at most ``size`` slots instead of an object graph per record: per record
    only its request id stays a Python object; created, expiry and (owner, model, report) live in
    ``array`` columns and a small table of the (owner, model, report) kinds seen. The record body
    is written when read (:func:`fixed_record_parts` + :func:`record_bytes`, the same bytes as
    :func:`record_body`).

    Why: the gateway serves between other processes' work on a shared CPU; every request's
    short-lived objects reuse the memory that the oldest record frees, so 10,000 records of ~7
    objects each made each request touch cold memory (bench/results/gateway.md: CPU per
    checks-off request 136 -> 125 us at 32 connections with 100 records instead of 10,000).

    The slots are added as records arrive (amortised ``array``/``list`` appends) until there are
    ``size`` of them, then reused: memory follows the records kept, not ``max_in_memory`` (a
    large ``max_in_memory``, left to ``max_in_memory_bytes`` to bound, allocated every slot --
    ~70 bytes each, 344 MB and 0.3 s on the event loop for 5,000,000 -- at the first checks-off
    answer). One record per request id (:meth:`ReportStore.put_fixed` sends an id already kept to the
    general path); oldest written is overwritten first; expired records are dropped when read.
    At most :data:`MAX_KINDS` kinds: past that, :meth:`put` returns False (the general path)."""

    #: most distinct (owner, model, report) triples kept (then writes take the general path)
    MAX_KINDS = 4096

    __slots__ = ("size", "rids", "created", "expiry", "kind", "slot", "kinds", "kind_list", "next", "_ints")

    def __init__(self, size: int) -> None:
        self.size = size
        #: the slots so far (all of the columns have the same length, at most ``size``)
        self.rids: list[str | None] = []
        self.created = array("q")
        self.expiry = array("d")
        self.kind = array("l")
        #: request id -> its slot (the slot numbers are the shared objects of ``_ints``)
        self.slot: dict[str, int] = {}
        #: (owner, model, report) -> kind number; ``kind_list[n]`` is kind n
        self.kinds: dict[tuple[str, str, FixedReport], int] = {}
        self.kind_list: list[tuple[str, str, FixedReport]] = []
        self.next = 0
        self._ints: list[int] = []  # one int object per slot for ever, none per write

    def put(self, owner: str, request_id: str, model: str, created: int, fixed: FixedReport, expiry: float) -> bool:
        """Keep a record in the next slot (overwriting the oldest); False when the kinds table
        is full. ``request_id`` must not be in :attr:`slot` already."""
        key = (owner, model, fixed)
        k = self.kinds.get(key)
        if k is None:
            if len(self.kind_list) >= self.MAX_KINDS:
                return False
            k = self.kinds[key] = len(self.kind_list)
            self.kind_list.append(key)
        i = self.next
        if i == len(self.rids):  # the ring is still filling: a new slot
            self.rids.append(request_id)
            self.created.append(created)
            self.expiry.append(expiry)
            self.kind.append(k)
            self._ints.append(i)
        else:
            old = self.rids[i]
            if old is not None:
                del self.slot[old]
            self.rids[i] = request_id
            self.created[i] = created
            self.expiry[i] = expiry
            self.kind[i] = k
        self.slot[request_id] = self._ints[i]
        self.next = self._ints[i + 1] if i + 1 < len(self._ints) else (i + 1) % self.size
        return True

    def owner(self, request_id: str) -> str | None:
        """The owner of ``request_id``'s record here, or None."""
        i = self.slot.get(request_id)
        return None if i is None else self.kind_list[self.kind[i]][0]

    def get(self, request_id: str, now: float) -> bytes | None:
        """The record body of ``request_id`` (None: absent, or expired -- then dropped)."""
        i = self.slot.get(request_id)
        if i is None:
            return None
        if self.expiry[i] < now:
            self.drop(request_id)
            return None
        owner, model, fixed = self.kind_list[self.kind[i]]
        created = self.created[i]
        parts = fixed_record_parts(request_id, model, created, fixed)
        return record_bytes(parts) if parts is not None else record_body(request_id, model, created, fixed.report,
                                                                           pending=False)

    def drop(self, request_id: str) -> None:
        """Forget ``request_id``'s record (its slot stays empty until overwritten)."""
        i = self.slot.pop(request_id, None)
        if i is not None:
            self.rids[i] = None


#: the JSON string of a model name, per name (``fixed_record_parts``; bounded)
_MODEL_JSON: dict[str, bytes] = {}
#: a record kept as its parts (:func:`fixed_record_parts`): (request id, the model name's JSON
#: string, created, the redacted report's JSON); joined into its body when read
RecordParts = tuple[str, bytes, int, bytes]
_P0, _P1, _P2, _P3 = b'{"object":"veracity.report","id":"', b'","model":', b',"created":', \
    b',"status":"complete","veracity":'
_PARTS_LEN = len(_P0) + len(_P1) + len(_P2) + len(_P3) + 1


def fixed_record_parts(request_id: str, model: str, created: int, fixed: FixedReport) -> RecordParts | None:
    """The parts of :func:`record_body` of ``fixed.report`` (complete, not pending), or None when
    they cannot stand for it (a model name or report orjson cannot write, a request id that is
    not ASCII: :func:`record_body`'s general path). ``request_id`` must be a safe token
    (:data:`proxy._asgi.request_ids.RID_RE`: no character JSON escapes). Kept as a tuple of
    shared objects (the id is the store key's, the model's JSON and the report's are cached), a
    stored record costs about a third of its body's size and is joined only when read."""
    frag = fixed.fragment()
    if frag is None or not request_id.isascii():
        return None
    mj = _MODEL_JSON.get(model)
    if mj is None:
        try:
            mj = _orjson.dumps(model)
        except TypeError:  # a lone surrogate: the general path
            return None
        if len(_MODEL_JSON) >= 4096:
            _MODEL_JSON.clear()
        _MODEL_JSON[model] = mj
    return (request_id, mj, created, frag)


def record_bytes(body: bytes | RecordParts) -> bytes:
    """A stored record's body: ``body`` itself, or its :data:`RecordParts` joined (the JSON
    :func:`record_body` writes, key for key: object, id, model, created, status, veracity)."""
    if type(body) is bytes:
        return body
    rid, mj, created, frag = body
    return b"".join((_P0, rid.encode("ascii"), _P1, mj, _P2, b"%d" % created, _P3, frag, b"}"))


def record_size(body: bytes | RecordParts) -> int:
    """``len(record_bytes(body))`` without joining it (the store's byte bound counts bodies)."""
    if type(body) is bytes:
        return len(body)
    rid, mj, created, frag = body
    return _PARTS_LEN + len(rid) + len(mj) + len(b"%d" % created) + len(frag)


def fixed_record_body(request_id: str, model: str, created: int, fixed: FixedReport) -> bytes:
    """:func:`record_body` of ``fixed.report`` (complete, not pending), byte for byte, from its
    :func:`fixed_record_parts` when it has them (``request_id``: a safe token, as there)."""
    parts = fixed_record_parts(request_id, model, created, fixed)
    if parts is None:
        return record_body(request_id, model, created, fixed.report, pending=False)
    return record_bytes(parts)


def list_body(request_id: str, records: list[tuple[str, bytes, bool]], names: dict[str, str | None], *,
              has_more: bool = False) -> bytes:
    """What an admin gets for a request id that several owners used: ``{"object": "list", "id":
    request_id, "data": [...], "has_more"}``, one stored record (:func:`record_body`) per
    ``(owner, body, pending)`` of ``records`` (oldest write first), each with ``"owner"`` (the
    owner hash, for ``?owner=``) and ``"key"`` (``names[owner]``: the virtual key's name, or
    null when it has none or is not configured here)."""
    data = []
    for owner, body, _pending in records:
        rec = json.loads(body)
        rec["owner"] = owner
        rec["key"] = names.get(owner)
        data.append(rec)
    return dumps({"object": "list", "id": request_id, "data": data, "has_more": has_more})


def summary_header(report: Any) -> str:
    """``x-veracity-summary`` of a report (its dict, or a :class:`verifiers._types.Report`): ``status=<report status>`` then, per verifier (in order of first
    appearance), its check counts per outcome (``fail``, ``error``, ``unknown``, ``pass``; zero
    counts left out), ``; ``-separated: ``status=failed; arithmetic=1 fail,2 pass; code=1 unknown``.
    At most :data:`MAX_SUMMARY_VERIFIERS` verifiers, then ``+N more``. ASCII only."""
    if isinstance(report, dict):
        status, checks = report.get("status", "unknown"), report.get("checks") or ()
        if not checks and type(status) is str and status.isascii():  # a skipped report: no per-verifier part
            return "status=" + status
        pairs = [(c.get("verifier"), c.get("outcome")) for c in checks if isinstance(c, dict)]
    else:  # a verifiers._types.Report
        status, pairs = report.status, [(c.verifier, c.outcome) for c in report.checks]
    parts = [f"status={status}"]
    counts: dict[str, dict[str, int]] = {}
    for verifier, outcome in pairs:
        by = counts.setdefault(str(verifier or "unknown"), {})
        by[str(outcome or "unknown")] = by.get(str(outcome or "unknown"), 0) + 1
    for i, (verifier, by) in enumerate(counts.items()):
        if i == MAX_SUMMARY_VERIFIERS:
            parts.append(f"+{len(counts) - i} more")
            break
        listed = [f"{by[o]} {o}" for o in OUTCOME_ORDER if by.get(o)]
        listed += [f"{n} {o}" for o, n in by.items() if o not in OUTCOME_ORDER]
        parts.append(f"{verifier}={','.join(listed)}")
    return "; ".join(parts).encode("ascii", "replace").decode("ascii")


#: the report URL's path before the request id (:func:`report_url`, :func:`report_header_pairs`)
REPORT_PATH = "/v1/veracity/reports/"
_REPORT_PATH_B = REPORT_PATH.encode()


def report_url(request_id: str) -> str:
    """``/v1/veracity/reports/<id>`` (request ids are URL-safe tokens: ``proxy._asgi.request_ids.RID_RE``)."""
    return REPORT_PATH + request_id


def report_headers(request_id: str, report: Any, enabled: bool = True) -> dict[str, str]:
    """The two response headers: ``x-veracity-summary`` and (when the store is on)
    ``x-veracity-report-url`` (:func:`report_header_pairs`: the same as ASGI pairs)."""
    out = {"x-veracity-summary": summary_header(report)}
    if enabled:
        out["x-veracity-report-url"] = report_url(request_id)
    return out


def report_header_pairs(request_id: str, summary: bytes, enabled: bool = True) -> tuple[tuple[bytes, bytes], ...]:
    """:func:`report_headers` as ASGI header pairs, for a caller that has the summary encoded
    (``summary``: :func:`summary_header`'s value, Latin-1: the lean lane keeps it per policy)."""
    if enabled:
        return (b"x-veracity-summary", summary), (b"x-veracity-report-url", _REPORT_PATH_B + request_id.encode("latin-1"))
    return ((b"x-veracity-summary", summary),)


class ReportStore:
    """In-process records (+ Redis when ``redis_url``): see the module doc. ``ttl_s``: seconds a
    record is kept; ``max_in_memory``: records kept in this process, ``max_in_memory_bytes``:
    their bodies' total size (least recently written dropped first, past either bound; a body
    larger than the byte bound alone is kept in Redis only)."""

    def __init__(self, ttl_s: float = 3600.0, max_in_memory: int = 10_000, redis_url: str | None = None,
                 prefix: str = "veracity:report", max_in_memory_bytes: int = 256 * 1024 * 1024) -> None:
        self.ttl_s = float(ttl_s)
        self.max_in_memory = max_in_memory
        self.max_in_memory_bytes = max_in_memory_bytes
        #: total size of the bodies in ``_mem``
        self.bytes_in_memory = 0
        self.prefix = prefix
        #: (owner, request id) -> (monotonic expiry, record body, pending?)
        self._mem: OrderedDict[tuple[str, str], tuple[float, bytes | RecordParts, bool]] = OrderedDict()
        #: request id -> the owners of its records here, oldest write first (admin look-ups); tuples,
        #: which the cyclic GC stops tracking (a list per record: 10,000 more objects in each scan)
        self._owners: dict[str, tuple[str, ...]] = {}
        #: the records of checks-off answers (:meth:`put_fixed`), made at the first one
        self._fixed: FixedRing | None = None
        self._redis: Any = None
        #: Redis writes of :func:`publish_soon` still running (a reference each until done)
        self._writes: set[Any] = set()
        if redis_url:
            import redis.asyncio as aioredis  # redis-py's asyncio client (as proxy.stores.budget.RedisStore)

            # short timeouts: a slow Redis delays answers by at most ~1 s, then the write is skipped
            self._redis = aioredis.from_url(redis_url, **REDIS_TIMEOUTS)

    @property
    def shared(self) -> bool:
        """True when records also go to Redis (``redis_url`` was given): other replicas see them."""
        return self._redis is not None

    def put_fixed(self, owner: str, request_id: str, model: str, created: int, fixed: FixedReport) -> None:
        """Keep the final record of a :class:`FixedReport` answer in this process: in the
        :class:`FixedRing` (its own ``max_in_memory`` records, oldest overwritten first; not
        counted in :attr:`bytes_in_memory`: no body is stored), or through :meth:`put_local`
        when the id already has a record here, the ring cannot take it or ``max_in_memory`` is 0. Reads see it exactly
        as :func:`store_local` would have kept it. ``request_id``: a safe token
        (:data:`proxy._asgi.request_ids.RID_RE`)."""
        ring = self._fixed
        if ring is None and self.max_in_memory > 0:
            ring = self._fixed = FixedRing(self.max_in_memory)
        if (ring is None or request_id in ring.slot or request_id in self._owners
                or not ring.put(owner, request_id, model, created, fixed, time.monotonic() + self.ttl_s)):
            parts = fixed_record_parts(request_id, model, created, fixed)
            self.put_local(owner, request_id, parts if parts is not None else
                           record_body(request_id, model, created, fixed.report, pending=False), False)

    def put_local(self, owner: str, request_id: str, body: bytes | RecordParts, pending: bool) -> None:
        """Keep a record in this process (replacing the same owner's record for the id);
        ``body``: its bytes or its :data:`RecordParts` (counted by :func:`record_size`)."""
        ring = self._fixed
        if ring is not None and ring.owner(request_id) == owner:  # replaced: the new one is kept below,
            ring.drop(request_id)                                 # listed where its first write was
            others = self._owners.get(request_id)
            if others is not None and owner not in others:
                self._owners[request_id] = (owner,) + others
        key = (owner, request_id)
        mem = self._mem
        old = mem.pop(key, None)  # a replaced record goes to the end, as new ones do
        if old is not None:
            self.bytes_in_memory -= record_size(old[1])
        mem[key] = (time.monotonic() + self.ttl_s, body, pending)
        self.bytes_in_memory += record_size(body)
        owners = self._owners.get(request_id)
        if owners is None:
            self._owners[request_id] = (owner,)
        elif owner not in owners:
            self._owners[request_id] = owners + (owner,)
        while mem and (len(mem) > self.max_in_memory or self.bytes_in_memory > self.max_in_memory_bytes):
            (old_owner, old_id), (_, old_body, _) = mem.popitem(last=False)
            self.bytes_in_memory -= record_size(old_body)
            self._forget(old_owner, old_id)

    def _forget(self, owner: str, request_id: str) -> None:
        owners = self._owners.get(request_id)
        if owners is not None and owner in owners:
            if len(owners) == 1:
                del self._owners[request_id]
            else:
                self._owners[request_id] = tuple(o for o in owners if o != owner)

    async def put_shared(self, owner: str, request_id: str, body: bytes, pending: bool) -> None:
        """Write a record to Redis (raises what redis-py raises)."""
        if self._redis is None:
            return
        ttl = max(1, int(round(self.ttl_s)))
        value = (b"p" if pending else b"c") + body
        owners_key = f"{self.prefix}-owners:{request_id}"
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.set(f"{self.prefix}:{owner}:{request_id}", value, ex=ttl)
            pipe.zadd(owners_key, {owner: time.time()}, nx=True)   # scored by the first write
            pipe.expire(owners_key, ttl)
            await pipe.execute()

    def get_local(self, owner: str, request_id: str) -> tuple[bytes, bool] | None:
        """``(record body, pending?)`` kept in this process for ``owner``, or None when absent or
        past its TTL (an expired record is dropped here)."""
        hit = self._mem.get((owner, request_id))
        if hit is None:
            ring = self._fixed
            if ring is not None and ring.owner(request_id) == owner:
                body = ring.get(request_id, time.monotonic())
                return None if body is None else (body, False)
            return None
        if hit[0] < time.monotonic():
            del self._mem[(owner, request_id)]
            self.bytes_in_memory -= record_size(hit[1])
            self._forget(owner, request_id)   # else the index outgrows max_in_memory
            return None
        return record_bytes(hit[1]), hit[2]

    async def get_shared(self, owner: str, request_id: str) -> tuple[bytes, bool] | None:
        """``(record body, pending?)`` from Redis for ``owner``, or None (also without Redis);
        Redis keeps the TTL. Raises what redis-py raises."""
        if self._redis is None:
            return None
        raw = await self._redis.get(f"{self.prefix}:{owner}:{request_id}")
        if raw is None:
            return None
        return bytes(raw[1:]), raw[:1] == b"p"

    async def get(self, owner: str, request_id: str) -> tuple[bytes, bool] | None:
        """``(record body, pending?)`` of ``owner``'s record for ``request_id`` (never another
        owner's), or None. This process first, then Redis."""
        hit = self.get_local(owner, request_id)
        if hit is not None:
            return hit
        return await self.get_shared(owner, request_id)

    async def get_all(self, request_id: str, limit: int = MAX_LISTED) -> tuple[list[tuple[str, bytes, bool]], bool]:
        """Every owner's record for ``request_id``: ``([(owner, body, pending), ...], has_more)``,
        oldest first write first (Redis's order when shared, then owners only this process
        knows), at most ``limit``. This process's records answer when Redis fails; with none
        here, raises what redis-py raises."""
        ring = self._fixed
        first = ring.owner(request_id) if ring is not None else None  # a ring record is written first
        local = {o: hit for o in ((first,) if first is not None else ()) + self._owners.get(request_id, ())
                 if (hit := self.get_local(o, request_id)) is not None}
        owners = list(local)
        if self._redis is not None:
            try:
                raw = await self._redis.zrange(f"{self.prefix}-owners:{request_id}", 0, limit)
                shared = [o.decode() if isinstance(o, bytes) else str(o) for o in raw]
                owners = shared + [o for o in owners if o not in shared]
            except Exception:
                if not local:
                    raise
                log.warning("report_store_error", request_id=request_id, error="owners look-up failed")
        out: list[tuple[str, bytes, bool]] = []
        for owner in owners:
            if len(out) > limit:
                break
            hit = local.get(owner)
            if hit is None:
                try:
                    hit = await self.get_shared(owner, request_id)
                except Exception:
                    if not local:
                        raise
                    hit = None
            if hit is not None:
                out.append((owner, hit[0], hit[1]))
        return out[:limit], len(out) > limit

    async def close(self) -> None:
        """Wait for the Redis writes still running (at most ~1 s each: :data:`REDIS_TIMEOUTS`),
        then close the Redis connection pool, if any (the in-process records stay)."""
        if self._writes:
            import asyncio

            await asyncio.wait(list(self._writes), timeout=5.0)
        if self._redis is not None:
            await self._redis.aclose()


def open_store(cfg: Any) -> ReportStore | None:
    """A new report store for gateway config ``cfg`` (None when ``reports.enabled`` is false):
    in this process, and in Redis too when ``verification.redis_url`` (or
    ``$VERACITY_REDIS_URL``) is set. The gateway keeps one (:class:`proxy.gateway.Gateway`)."""
    settings = getattr(cfg, "reports", None)
    if settings is not None and not settings.enabled:
        return None
    ver = getattr(cfg, "verification", None)
    url = getattr(ver, "redis_url", None) or os.environ.get("VERACITY_REDIS_URL") or None
    return ReportStore(ttl_s=getattr(settings, "ttl_s", 3600.0),
                       max_in_memory=getattr(settings, "max_in_memory", 10_000), redis_url=url,
                       max_in_memory_bytes=getattr(settings, "max_in_memory_bytes", 256 * 1024 * 1024))


def _put_local(store: ReportStore | None, principal: Any, request_id: str, model: str, created: int,
               report: dict[str, Any] | FixedReport, pending: bool) -> tuple[ReportStore, str, bytes] | None:
    """Store the record in this process; ``(store, owner, body)`` for the Redis write, or None
    when reports are off (``store`` None) or the store is not shared. ``report``: its dict, or a
    :class:`FixedReport` (then ``request_id`` must be a safe token and ``pending`` false)."""
    if store is None:
        return None
    owner = owner_of(principal)
    parts = fixed_record_parts(request_id, model, created, report) if type(report) is FixedReport and not pending \
        else None
    body: bytes | RecordParts
    if parts is not None:
        body = parts
    else:
        body = record_body(request_id, model, created, report.report if type(report) is FixedReport else report,
                           pending=pending)
    store.put_local(owner, request_id, body, pending)
    return (store, owner, record_bytes(body)) if store.shared else None


async def _put_shared(store: ReportStore, owner: str, request_id: str, body: bytes, pending: bool) -> None:
    """The Redis write; a failure is logged, never raised (a store outage must not fail a request)."""
    try:
        await store.put_shared(owner, request_id, body, pending)
    except Exception as exc:  # noqa: BLE001 - a store outage must not fail the request
        log.warning("report_store_error", request_id=request_id, error=type(exc).__name__,
                    message=str(exc)[:300])


#: :func:`publish` in two steps, for a caller that awaits only when there is a Redis write
#: (the lean lane): the record in this process now (``(store, owner, body)`` when a shared
#: write follows, else None), then ``await store_shared(store, owner, body, request_id)``
store_local = _put_local


async def store_shared(store: ReportStore, owner: str, body: bytes, request_id: str, pending: bool = False) -> None:
    """The Redis write :func:`store_local` staged (see :func:`publish`); never raises."""
    await _put_shared(store, owner, request_id, body, pending)


async def publish(store: ReportStore | None, principal: Any, request_id: str, model: str, created: int,
                  report: dict[str, Any], *, pending: bool = False) -> None:
    """Store a request's report in ``store`` (None: reports are off; ``pending``: not final
    yet). In this process at once, then in Redis (awaited, so another replica finds it as soon
    as the client has the response); a Redis failure is logged, never raised."""
    staged = _put_local(store, principal, request_id, model, created, report, pending)
    if staged is not None:
        store, owner, body = staged
        await _put_shared(store, owner, request_id, body, pending)


def publish_soon(store: ReportStore | None, principal: Any, request_id: str, model: str, created: int,
                 report: dict[str, Any], *, pending: bool = False) -> None:
    """:func:`publish` from code that cannot await (a generator being closed): in this process
    now, the Redis write as a background task (none without a running loop: this process keeps it)."""
    import asyncio

    staged = _put_local(store, principal, request_id, model, created, report, pending)
    if staged is None:
        return
    store, owner, body = staged
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no running loop: this process keeps it
        return
    task = loop.create_task(_put_shared(store, owner, request_id, body, pending))
    store._writes.add(task)
    task.add_done_callback(store._writes.discard)


async def lookup(store: ReportStore | None, keys: Any, principal: Any, request_id: str,
                 owner: str | None = None) -> tuple[bytes, bool] | None:
    """``(body, pending?)`` for the caller from ``store``, or None (also when the store is off:
    ``store`` None). ``keys``: the config's ``keys`` (names for an admin's list).

    A key reads its own record only (``owner``, when given, must be its own). An admin key
    (``keys[].admin``) reads ``owner``'s record when given; else the id's record when one owner
    used the id, else every owner's as one :func:`list_body` (``pending`` when any is). Raises
    what redis-py raises when Redis is unreachable and this process does not have the record."""
    if store is None:
        return None
    mine, admin = owner_of(principal), bool(getattr(principal, "admin", False))
    if owner is not None and (not _OWNER_RE.fullmatch(owner) or (owner != mine and not admin)):
        return None
    if owner is not None or not admin:
        return await store.get(owner or mine, request_id)
    records, more = await store.get_all(request_id)
    if not records:
        return None
    if len(records) == 1:
        return records[0][1], records[0][2]
    names = {owner_of_key(k.hash): k.name for k in keys or ()}
    return list_body(request_id, records, names, has_more=more), any(p for _, _, p in records)
