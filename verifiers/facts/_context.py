"""The ``context`` search backend: grounding in the request's own messages (issue 11, step 3).

A RAG app puts its retrieved documents in the system or user message, an agent gets tool
results back as ``tool`` messages: that text is the evidence the answer should rest on, and it
needs no network. :class:`ContextBackend` splits the text of the ``system``, ``developer``,
``user``, ``tool`` and ``function`` messages (never ``assistant``: the model's own words are not
evidence for the model) into passages (questions left out: they state nothing) and ranks them with BM25 (Robertson & Zaragoza, "The
Probabilistic Relevance Framework: BM25 and Beyond", 2009) as implemented by ``rank_bm25``'s
``BM25Plus`` (Lv & Zhai, CIKM 2011: its lower-bounded term frequency keeps every IDF positive,
which plain Okapi BM25 does not on a corpus of one or two passages).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from verifiers.facts._passage import Passage
from verifiers.facts._text import keys, sentences

__all__ = ["ContextBackend", "message_text", "CHUNK_CHARS"]

#: Roles whose text is evidence. ``assistant`` is never: the model cannot ground itself.
EVIDENCE_ROLES = ("system", "developer", "user", "tool", "function")
#: A paragraph longer than this is cut into passages of whole sentences of about this size.
CHUNK_CHARS = 700


def message_text(content: Any) -> str:
    """The text of an OpenAI message ``content``: a string, or the ``text`` of its ``text``
    parts (images and audio parts are skipped); anything else -> ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = []
        for p in content:
            if isinstance(p, Mapping) and p.get("type") in ("text", "input_text") and isinstance(p.get("text"), str):
                parts.append(p["text"])
            elif isinstance(p, str):
                parts.append(p)
        return "\n".join(parts)
    return ""


def _drop_questions(para: str) -> str:
    """The paragraph without its questions: a question states nothing, so a claim that repeats
    the user's question must not find its support there."""
    if "?" not in para:
        return para
    return " ".join(para[a:b] for a, b in sentences(para) if not para[a:b].rstrip().endswith("?"))


def _chunks(text: str) -> list[str]:
    out: list[str] = []
    for para in re.split(r"\n\s*\n", text):
        para = _drop_questions(para.strip()).strip()
        if not para:
            continue
        if len(para) <= CHUNK_CHARS:
            out.append(" ".join(para.split()))
            continue
        cur = ""
        for a, b in sentences(para):
            s = " ".join(para[a:b].split())
            if cur and len(cur) + len(s) + 1 > CHUNK_CHARS:
                out.append(cur)
                cur = s
            else:
                cur = f"{cur} {s}".strip()
        if cur:
            out.append(cur)
    return out


class ContextBackend:
    """Search over the request's own messages (the ``context`` backend).

    Args:
        messages: OpenAI chat messages (``role``, ``content`` as a string or content parts;
            tool messages may carry ``name``/``tool_call_id``). Assistant messages are ignored.
        name: the backend name in reports and cache keys (default ``context``).

    Passages: one per paragraph of a message (long paragraphs cut at sentence ends into about
    :data:`CHUNK_CHARS` characters), ``doc_id`` ``context:<role>:<message index>`` (plus
    ``:<chunk>`` when a message has several), ``title`` such as ``system message``,
    ``source="context"``, ``domain="context"``, no url. ``cache_key`` identifies the backend
    *and its text*, so a cached verdict never crosses into a request with other context.
    ``search`` never raises and never touches the network.
    """

    def __init__(self, messages: Sequence[Mapping[str, Any]] | None, name: str = "context") -> None:
        self.name = name
        self.passages: list[Passage] = []
        for i, m in enumerate(messages or ()):
            if not isinstance(m, Mapping):
                continue
            role = str(m.get("role") or "")
            if role not in EVIDENCE_ROLES:
                continue
            chunks = _chunks(message_text(m.get("content")))
            label = f"{role} message" + (f" ({m['name']})" if isinstance(m.get("name"), str) else "")
            for j, c in enumerate(chunks):
                doc_id = f"context:{role}:{i}" + (f":{j}" if len(chunks) > 1 else "")
                self.passages.append(Passage(text=c, title=label, doc_id=doc_id, source="context", domain="context"))
        self._tokens = [keys(p.title + " " + p.text) for p in self.passages]
        self._bm25 = None
        if self.passages:
            from rank_bm25 import BM25Plus

            self._bm25 = BM25Plus([t or ["_"] for t in self._tokens])
        digest = hashlib.sha256("\x1e".join(p.doc_id + "\x1f" + p.text for p in self.passages).encode()).hexdigest()
        self.cache_key = f"{name}:{digest[:16]}"

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages sharing at least one key term with ``query``, best BM25 score
        first (ties: message order)."""
        return self.search_sync(query, k)

    def search_sync(self, query: str, k: int = 5) -> list[Passage]:
        """:meth:`search` without the event loop (benchmarks, scripts)."""
        q = keys(query)
        if not q or self._bm25 is None or k <= 0:
            return []
        qs = set(q)
        scores = self._bm25.get_scores(q)
        ranked = sorted((i for i, t in enumerate(self._tokens) if qs & set(t)), key=lambda i: (-scores[i], i))
        return [self.passages[i] for i in ranked[:k]]

    def __repr__(self) -> str:
        return f"ContextBackend({len(self.passages)} passages)"
