"""The ``context`` search backend: grounding in the request's own messages (docs/facts.md, step 2).

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
    """Passages of the request's text: paragraphs, long ones packed from whole sentences up to
    :data:`CHUNK_CHARS`. Unlike the corpus builder (``corpus._split_long``, which cuts an
    over-long sentence to size an index row), a sentence is never cut here: the deterministic
    tier judges a claim against whole sentences of the passage it quotes."""
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
        self._texts: list[tuple[int, str, str]] = []  # (message index, role, label) + text below
        self._raw: list[str] = []
        for i, m in enumerate(messages or ()):
            if not isinstance(m, Mapping):
                continue
            role = str(m.get("role") or "")
            if role not in EVIDENCE_ROLES:
                continue
            label = f"{role} message" + (f" ({m['name']})" if isinstance(m.get("name"), str) else "")
            self._texts.append((i, role, label))
            self._raw.append(message_text(m.get("content")))
        digest = hashlib.sha256("\x1e".join(f"{i}:{r}\x1f{t}" for (i, r, _), t in zip(self._texts, self._raw))
                                .encode("utf-8", "surrogatepass")).hexdigest()
        self.cache_key = f"{name}:{digest[:16]}"
        self._passages: list[Passage] | None = None
        self._tokens: list[list[str]] = []
        self._bm25: Any = None
        self._lock: Any = None

    def _build(self) -> None:
        passages: list[Passage] = []
        for (i, role, label), text in zip(self._texts, self._raw):
            chunks = _chunks(text)
            for j, c in enumerate(chunks):
                doc_id = f"context:{role}:{i}" + (f":{j}" if len(chunks) > 1 else "")
                passages.append(Passage(text=c, title=label, doc_id=doc_id, source="context", domain="context"))
        self._tokens = [keys(p.title + " " + p.text) for p in passages]
        if passages:
            from rank_bm25 import BM25Plus

            self._bm25 = BM25Plus([t or ["_"] for t in self._tokens])
        self._passages = passages

    @property
    def texts(self) -> list[str]:
        """The text of every evidence message, whole and unsplit, in message order (questions
        included: what the user wrote is never an answer's invention)."""
        return list(self._raw)

    @property
    def passages(self) -> list[Passage]:
        """Every passage, in message order (built on first use)."""
        if self._passages is None:
            self._build()
        return self._passages

    async def search(self, query: str, k: int = 5) -> list[Passage]:
        """Up to ``k`` passages sharing at least one key term with ``query``, best BM25 score
        first (ties: message order). The first call splits and indexes the messages in a worker
        thread (sentence splitting of a long context is CPU work that must not stall the event
        loop)."""
        if self._passages is None:
            import asyncio

            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._passages is None:
                    await asyncio.to_thread(self._build)
        return self.search_sync(query, k)

    def search_sync(self, query: str, k: int = 5) -> list[Passage]:
        """:meth:`search` without the event loop (benchmarks, scripts)."""
        q = keys(query)
        if not q or not self.passages or self._bm25 is None or k <= 0:
            return []
        qs = set(q)
        scores = self._bm25.get_scores(q)
        ranked = sorted((i for i, t in enumerate(self._tokens) if qs & set(t)), key=lambda i: (-scores[i], i))
        return [self.passages[i] for i in ranked[:k]]

    def __repr__(self) -> str:
        return f"ContextBackend({len(self.passages)} passages)"
