"""What the reader sees of text holding a right-to-left override, shared by the verifiers that
check text as displayed (arithmetic: ``_normalize.normalize``; facts: ``_text.display_order``).

A right-to-left override (U+202E RLO, to its U+202C PDF, U+2069 PDI or the line's end) makes every
character after it display in reverse order, digits included (Unicode Bidirectional Algorithm,
UAX #9, rules X6 and L2), mirrored brackets flipped (rule L4): "= \u202e391" shows "= 193".
"""

from __future__ import annotations

import re

__all__ = ["display_order"]

_RLO_RUN = re.compile("\u202e([^\u202c\u2069\n]*)")
_MIRROR = str.maketrans("()[]{}<>", ")(][}{><")


def display_order(text: str) -> str:
    """``text`` with each right-to-left override run reversed, brackets mirrored: the order the
    reader sees ("employs \u202e58\u202c people" shows "85"). The override becomes a zero-width
    space (U+200B), so the result is read once (idempotent) and has the same length: spans and
    position maps into ``text`` still hold. Linear in ``len(text)``; never raises on a ``str``."""
    if "\u202e" not in text:
        return text
    return _RLO_RUN.sub(lambda m: "\u200b" + m.group(1)[::-1].translate(_MIRROR), text)
