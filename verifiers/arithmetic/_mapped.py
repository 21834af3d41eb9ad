"""A string that remembers where each of its characters came from.

Normalisation (LaTeX, Unicode operators, spoken operators) rewrites the answer before it is
tokenised; claims must still point at the *original* text. ``MappedText`` keeps, for every
character of the rewritten string, the index of the original character it stands for, so a
token's span maps back with ``orig_span``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# A replacement piece: a literal string (mapped to the start of the match) or an int group
# number (copied with its own original positions).
Piece = str | int


class MappedText:
    """Rewritable text with a per-character map back to the original string."""

    __slots__ = ("text", "pos", "orig_len")

    def __init__(self, text: str, pos: list[int] | None = None, orig_len: int | None = None):
        self.text = text
        self.pos = pos if pos is not None else list(range(len(text)))
        self.orig_len = len(text) if orig_len is None else orig_len

    def sub(
        self,
        pattern: re.Pattern[str],
        repl: Sequence[Piece] | Callable[[re.Match[str]], Sequence[Piece] | None],
    ) -> MappedText:
        """Replace every match of ``pattern``; ``repl`` gives the pieces (or ``None`` to keep
        the match unchanged). Returns a new ``MappedText`` (``self`` when nothing matched)."""
        text, pos = self.text, self.pos
        out: list[str] = []
        out_pos: list[int] = []
        last = 0
        changed = False
        for m in pattern.finditer(text):
            pieces = repl(m) if callable(repl) else repl
            if pieces is None:
                continue
            changed = True
            out.append(text[last : m.start()])
            out_pos.extend(pos[last : m.start()])
            anchor = pos[m.start()] if m.start() < len(pos) else self.orig_len
            tail = pos[m.end() - 1] if m.end() > m.start() else anchor
            seen_group = False
            for piece in pieces:
                if isinstance(piece, int):
                    s, e = m.span(piece)
                    if s < 0:
                        continue
                    out.append(text[s:e])
                    out_pos.extend(pos[s:e])
                    seen_group = True
                else:
                    out.append(piece)
                    out_pos.extend([tail if seen_group else anchor] * len(piece))
            last = m.end()
        if not changed:
            return self
        out.append(text[last:])
        out_pos.extend(pos[last:])
        return MappedText("".join(out), out_pos, self.orig_len)

    def orig_span(self, start: int, end: int) -> tuple[int, int]:
        """Original ``(start, end)`` offsets of the rewritten slice ``[start, end)``."""
        if end <= start:
            p = self.pos[start] if start < len(self.pos) else self.orig_len
            return (p, p)
        a = self.pos[start]
        b = self.pos[end - 1] + 1
        return (min(a, b - 1), max(a + 1, b))
