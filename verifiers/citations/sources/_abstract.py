"""Abstracts in the shapes the sources send them, as plain text.

* OpenAlex ``abstract_inverted_index`` (Work object docs, "abstract_inverted_index": the abstract
  "as an inverted index, which encodes information about the abstract's words and their positions
  within the text"; OpenAlex sends no plain-text abstract for legal reasons): ``{word: [position,
  ...]}``. A word may have several positions ("the" at 3, 17, 40); every position is placed.
* Crossref ``abstract``: a JATS XML fragment in a JSON string (``<jats:title>Abstract</jats:title>
  <jats:p>...</jats:p>``, sometimes with ``<jats:sec>``, ``<jats:italic>``, HTML entities):
  markup removed with BeautifulSoup (html.parser: lenient with the unbound ``jats:`` prefix and
  with HTML entities that an XML parser refuses), a leading "Abstract" heading dropped.
* Semantic Scholar ``abstract`` (may be null when the publisher forbids it) and ``tldr``
  (``{"model": "tldr@v2.0.0", "text": ...}``), arXiv ``<summary>``: whitespace normalised.

Every function returns None when there is nothing usable (missing, empty, not the documented
shape): a missing abstract is its own state for the relevance check, never evidence.
"""

from __future__ import annotations

import re
from typing import Any

#: Longest abstract kept (characters). Abstracts run 1-3 k characters; a source that sends a
#: whole paper in the field is cut here so one reference cannot bloat the cache or a prompt.
MAX_ABSTRACT_CHARS = 8000
#: Largest position accepted in an inverted index: a corrupt index with a position of 10**9
#: must not allocate a list that long.
_MAX_POSITION = 20000


def clean_text(text: Any) -> str | None:
    """Whitespace-normalised ``text`` cut to :data:`MAX_ABSTRACT_CHARS`, or None when empty / not a str."""
    if not isinstance(text, str):
        return None
    t = " ".join(text.split())
    return t[:MAX_ABSTRACT_CHARS] or None


def from_inverted_index(index: Any) -> str | None:
    """Rebuild an OpenAlex ``abstract_inverted_index`` into text, placing every word at every one
    of its positions (``{"the": [0, 4], "cat": [1]}`` -> "the cat ... the"). Gaps (positions no
    word claims) are skipped. None for a missing, empty or malformed index."""
    if not isinstance(index, dict) or not index:
        return None
    slots: dict[int, str] = {}
    for word, positions in index.items():
        if not isinstance(word, str) or not isinstance(positions, list):
            continue
        for p in positions:
            if isinstance(p, int) and not isinstance(p, bool) and 0 <= p <= _MAX_POSITION:
                slots.setdefault(p, word)
    if not slots:
        return None
    return clean_text(" ".join(slots[p] for p in sorted(slots)))


def from_jats(fragment: Any) -> str | None:
    """Plain text of a Crossref JATS ``abstract`` fragment (tags removed, paragraphs and section
    titles separated by a space, entities decoded, a leading "Abstract" title dropped)."""
    if not isinstance(fragment, str) or not fragment.strip():
        return None
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(fragment, "html.parser")
    first = soup.find(["jats:title", "title"])
    if first is not None and first.get_text(strip=True).rstrip(":").lower() in ("abstract", "summary"):
        first.decompose()
    text = soup.get_text(" ")
    text = re.sub(r"\s+([.,;:)])", r"\1", " ".join(text.split()))
    return clean_text(text)


def from_s2(paper: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(text, kind)`` from a Semantic Scholar paper: ``abstract`` first, else ``tldr.text``
    (kind ``"tldr"``: a machine summary, shorter than an abstract); ``(None, None)`` when neither."""
    text = clean_text(paper.get("abstract"))
    if text:
        return text, "abstract"
    tldr = paper.get("tldr")
    text = clean_text(tldr.get("text")) if isinstance(tldr, dict) else None
    return (text, "tldr") if text else (None, None)
