"""Claim and passage text as the comparison rules read it: format and control characters dropped,
runs of spaces folded (:func:`clean_text`), ``[n]`` source markers removed
(:func:`strip_citation_markers`)."""

from __future__ import annotations

import re

from verifiers.facts._text import display_order


#: Source markers a cited answer carries (``[1]``, ``[2, 3]``, ``[4-6]``, ``【1】``): references to
#: the report's numbered sources, not part of the claim (a corrected answer cites them, docs/facts.md).
_CITATION_MARKER = re.compile(r"\s*(?:\[\s*\d{1,3}(?:\s*[,;\u2013-]\s*\d{1,3})*\s*\]|\u3010\d{1,3}\u3011)")


#: Characters that change how a text reads to these rules but not what it says: format characters
#: (soft hyphen U+00AD from PDF extraction, zero-width space/joiners, bidi marks, BOM) are dropped;
#: control characters become spaces; runs of spaces and tabs become one space ("$4.2  million"
#: must read as $4.2 million, not as $4.2 followed by a word).
_FORMAT_CHARS = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]")
_CONTROL_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SPACE_RUN = re.compile(r"[^\S\n]{2,}|[^\S\n ]")


def clean_text(text: str) -> str:
    """``text`` as the deterministic tier reads it (see :data:`_FORMAT_CHARS`); newlines kept
    (they end sentences)."""
    text = _FORMAT_CHARS.sub("", display_order(text))
    text = _CONTROL_CHARS.sub(" ", text)
    return _SPACE_RUN.sub(" ", text)


def strip_citation_markers(text: str) -> str:
    """``text`` without ``[n]``-style source markers (the claim as stated, without its citations)."""
    return _CITATION_MARKER.sub("", text) if ("[" in text or "\u3010" in text) else text
