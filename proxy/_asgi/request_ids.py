"""Request ids: the ``x-request-id`` every answer carries, and what a report is fetched by.

A client's own ``x-request-id`` is kept when it is a safe token (:data:`RID_RE`); otherwise
the gateway draws one (:class:`RequestIds`). The id is echoed in the response, written in the
request log line, and is the key of ``GET /v1/veracity/reports/{request_id}``
(:mod:`proxy.stores.reports`), so it must be a usable URL path segment and must not be
guessable from another caller's id.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from typing import Any

__all__ = ["RID_RE", "RequestIds", "request_ids", "request_id"]

#: a client's ``x-request-id`` kept as the request id: a token of 1-128 ``A-Za-z0-9._:-`` that is a
#: usable URL path segment (``x-veracity-report-url``): not ``.`` or ``..``, which clients resolve
#: away (RFC 3986 section 5.2.4). ``\Z``, not ``$``: ``$`` also matches before a final newline.
RID_RE = re.compile(r"(?!\.{1,2}\Z)[A-Za-z0-9._:\-]{1,128}\Z")


class RequestIds:
    """Unique, unguessable request ids without a syscall per request: ``req_`` + 24 hex digits,
    the keyed BLAKE2b (RFC 7693; key: 32 random bytes drawn once per process, again after
    ``fork``) of a per-process counter. Unguessable because a request id is what a report is
    fetched by (``GET /v1/veracity/reports/{id}``): callers sharing one identity (a virtual key
    used by many end users, pass-through callers without a credential) must not reach each
    other's reports by counting from their own id (the former prefix + counter ids allowed it).
    ~0.5 us per id (the counter form: ~0.3 us; ``os.urandom(12)``: ~0.6 us, a syscall)."""

    def __init__(self) -> None:
        self.reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        """A new key and a counter from 1 (at start-up, and in a forked child)."""
        self._mac = hashlib.blake2b(key=os.urandom(32), digest_size=12)
        self.counter = itertools.count(1)

    def next(self) -> str:
        """The next id: ``req_`` + 24 lower-case hex digits."""
        mac = self._mac.copy()
        mac.update(next(self.counter).to_bytes(16, "little"))
        return "req_" + mac.hexdigest()


#: the process's id source
request_ids = RequestIds()


def request_id(headers: Any) -> str:
    """The client's ``x-request-id`` when it is a safe token (:data:`RID_RE`), else a new id.
    ``headers``: any mapping with ``get`` (lower-case names)."""
    rid = headers.get("x-request-id")
    if rid and RID_RE.match(rid):
        return rid
    return request_ids.next()
