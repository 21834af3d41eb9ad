"""The retrieval vocabulary of the facts verifier: :class:`Passage`, :class:`SearchBackend`.

docs/design.md "passage": a piece of retrieved text (text, title, url or document id,
published date, source) that a fact claim is judged against. Every backend
(``context``, ``local``, ``wikipedia``, ``searxng``, ``brave``) answers one call,
``await backend.search(query, k) -> list[Passage]`` (SAFE's ``call_search(query)`` shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["Passage", "SearchBackend", "SourceUnavailable"]


@dataclass(slots=True, frozen=True)
class Passage:
    """One retrieved passage.

    ``text``: the passage text (plain, whitespace-normalised); ``title``: page/document title;
    ``url``: where it came from (web backends) or None; ``doc_id``: a document id (context
    message index such as ``context:system:0``, local corpus row id); ``published``: ISO date
    ``YYYY-MM-DD`` (or a prefix of it) when the source gives one; ``source``: the backend name
    (``context`` | ``local`` | ``wikipedia`` | ``searxng`` | ``brave``); ``domain``: the host
    of ``url`` (lower case, no ``www.``), used for credibility and independence; ``truncated``:
    the source's text was longer than a backend reads (:data:`MAX_PASSAGE_CHARS`, a result over
    ``MAX_RESULT_CHARS`` before cleaning) and this passage holds its beginning only.
    """

    text: str
    title: str = ""
    url: str | None = None
    doc_id: str | None = None
    published: str | None = None
    source: str = ""
    domain: str | None = None
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        d = {"title": self.title, "url": self.url, "doc_id": self.doc_id, "published": self.published,
             "source": self.source, "domain": self.domain, "text": self.text}
        if self.truncated:
            d["truncated"] = True
        return d


class SourceUnavailable(Exception):
    """A backend could not answer (timeout, connection refused, HTTP 403/429/5xx, a body that
    is not the expected shape). Never evidence: the claims it would have judged stay
    ``not_enough_info`` with this reason. ``backend``: its name; ``status``: HTTP status or None."""

    def __init__(self, backend: str, message: str, status: int | None = None):
        super().__init__(f"{backend}: {message}")
        self.backend = backend
        self.message = message
        self.status = status

    def __reduce__(self) -> tuple:
        # raised in a worker process (verifiers.facts._offload) and re-raised here: pickle
        # rebuilds an exception from its arguments, which are not the formatted message
        return (type(self), (self.backend, self.message, self.status))


@runtime_checkable
class SearchBackend(Protocol):
    """``name``: the backend name used in reports and cache keys. ``search(query, k)``: up to
    ``k`` passages, best first. Raises :class:`SourceUnavailable`; never fetches a URL found
    in model text (only the configured host is contacted)."""

    name: str

    async def search(self, query: str, k: int = 5) -> list[Passage]: ...
