"""Checkable units of an answer that is still being written (the ``verified`` stream mode).

A streamed answer is relayed unit by unit (:mod:`proxy.pipeline.verified_stream`): a unit is
the smallest piece of text a verifier can decide on its own -- docs/design.md "coverage" names them:
sentences, equations, code blocks, references. :class:`UnitSplitter` is fed the content deltas
as they arrive (cut anywhere: ``7,006,`` + ``552``, a code fence in two pieces) and returns each
unit once it is complete; only the unit being written stays inside.

Where a unit ends (first rule that applies, at the start of a line):

* a fenced code block (CommonMark 0.31 §4.5: a line opening with three or more backticks or
  tildes, up to three spaces of indent) is one unit, from its opening line through the line of
  its closing fence (same character, at least as many);
* a line that is a list item (``-``, ``*``, ``+``, ``1.``, ``1)``), a numbered reference
  (``[1]``), a heading (``#``), a table row (``|``) or a quote (``>``), or that opens like a
  reference entry (``Surname, I.``), is one unit, through its newline: a reference such as
  ``Vaswani, A. (2017). Attention Is All You Need. NeurIPS.`` is never cut at its full stops;
* prose ends at a sentence end -- ``.``, ``?``, ``!`` followed by white space (not a decimal
  point, an initial ``A.`` or an abbreviation such as ``e.g.``), or the full-width ``。``,
  ``？``, ``！`` (no space follows them in Chinese or Japanese) -- or at the end of its line;
  closing quotes and brackets after the mark stay in the sentence;
* blank lines are units of their own (nothing to check: relayed at once);
* a prose run longer than :data:`MAX_PROSE_CHARS` without a sentence end is cut at its last
  space, so what is held back stays bounded.

A mark at the very end of what arrived so far (``... 7,006,552.``) is a boundary only once the
next character (or the end of the answer, :meth:`UnitSplitter.finish`) shows it is one. Pure,
no I/O: the concatenation of the units returned always equals the text fed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Unit", "UnitKind", "UnitSplitter", "split_units", "MAX_PROSE_CHARS"]

UnitKind = Literal["sentence", "line", "code", "blank"]

#: A prose run held without a sentence end is cut at its last space past this many characters.
MAX_PROSE_CHARS = 1000

_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})")
_LINE_UNIT = re.compile(r"[ \t]{0,3}(?:[-*+][ \t]|\d{1,3}[.)][ \t]|\[\d{1,4}\]|#{1,6}[ \t]|\||>)")
#: what a line start that may still become a line unit or a fence looks like (wait for more)
_MAYBE_MARKER = re.compile(r"[ \t]{0,3}(?:`{1,2}|~{1,2}|[-*+]|\d{1,3}[.)]?|\[\d{0,4}|#{1,6})?")
#: a reference entry's opening: "Vaswani, A." / "Van Dyke, J." / "Smith, John" (APA, Harvard, Vancouver)
_REF_START = re.compile(r"[ \t]{0,3}[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?, (?:[A-Z]\.|[A-Z][a-z]+,)")
_REF_MAYBE = re.compile(r"[ \t]{0,3}[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)?(?:,(?: (?:[A-Z](?:[a-z]+)?)?)?)?")
_SENT_END = re.compile(r"[.!?]+[)\"'”’\]*_]*|[。！？]+[」』”’）)\]]*")
_MARKS = ".!?。！？)\"'”’]*_」』）"
_ABBREV = frozenset({"e.g", "i.e", "etc", "vs", "dr", "mr", "mrs", "ms", "prof", "st", "no", "fig", "al",
                     "approx", "cf", "inc", "ltd", "jr", "sr", "eq", "vol", "pp", "ed", "eds"})
_WORD_BEFORE = re.compile(r"([\w.]+)$")


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of an answer: ``text`` exactly as written (white space included) and ``kind``
    (``sentence``, ``line``, ``code`` or ``blank``). ``checkable``: it holds anything but
    white space (a blank unit is relayed without a check)."""

    text: str
    kind: UnitKind

    @property
    def checkable(self) -> bool:
        return not self.text.isspace() and self.text != ""


class UnitSplitter:
    """Cut a stream of text into :class:`Unit` s as it arrives (rules in the module doc).

    ``feed(text)`` returns the units completed by ``text`` (maybe none); ``finish()`` returns
    the rest at the end of the answer (an unclosed code block is one last ``code`` unit).
    ``pending`` is the text held (the unit being written). ``at_line_start``: whether the
    first text fed starts a line (False when continuing after a relayed sentence).
    """

    def __init__(self, *, at_line_start: bool = True) -> None:
        self._buf = ""
        self._line_start = at_line_start
        self._fence: str | None = None

    @property
    def pending(self) -> str:
        """The text fed and not yet returned as a unit."""
        return self._buf

    def flowable(self) -> int:
        """How many characters at the start of :attr:`pending` are prose of a unit already
        begun, which the caller may relay before the unit ends (:meth:`release`): 0 inside a
        code block, on a line that is or may still become a list item, reference, heading or
        fence, and for a trailing sentence mark (with its closers) whose end the next character
        decides, so the boundary stays visible to the splitter."""
        buf = self._buf
        if self._fence is not None or not buf:
            return 0
        if self._line_start and (_MAYBE_MARKER.fullmatch(buf) or _REF_MAYBE.fullmatch(buf) or _FENCE_OPEN.match(buf)
                                 or _LINE_UNIT.match(buf) or _REF_START.match(buf)):
            return 0
        return len(buf.rstrip(_MARKS))

    def release(self, n: int) -> str:
        """Take the first ``n`` characters of :attr:`pending` (at most :meth:`flowable`), which
        the caller relays now; the unit they begin ends as it would have, without them."""
        out, self._buf = self._buf[:n], self._buf[n:]
        if out:
            self._line_start = False
        return out

    def feed(self, text: str) -> list[Unit]:
        """Add ``text`` (any cut of the answer); return the units it completed, in order."""
        self._buf += text
        return self._drain(final=False)

    def finish(self) -> list[Unit]:
        """The end of the answer: every unit left, the last one whatever its end."""
        out = self._drain(final=True)
        if self._buf:
            kind: UnitKind = "code" if self._fence is not None else ("blank" if self._buf.isspace() else "sentence")
            out.append(Unit(self._buf, kind))
            self._buf, self._fence = "", None
        return out

    def _drain(self, *, final: bool) -> list[Unit]:
        out: list[Unit] = []
        while self._buf:
            unit = self._next(final)
            if unit is None:
                break
            out.append(unit)
            self._buf = self._buf[len(unit.text):]
            self._line_start = unit.text.endswith("\n")
        return out

    def _next(self, final: bool) -> Unit | None:
        buf = self._buf
        if self._fence is not None:
            return self._in_fence(final)
        nl = buf.find("\n")
        line = buf if nl < 0 else buf[: nl + 1]
        if self._line_start:
            if nl < 0 and not final and (_MAYBE_MARKER.fullmatch(line) or _REF_MAYBE.fullmatch(line)):
                return None  # could still open a fence, a list item or a reference entry
            m = _FENCE_OPEN.match(line)
            if m and not (m.group(1)[0] == "`" and "`" in line[m.end():]):
                if nl < 0 and not final:
                    return None  # the opening line decides the fence's length: wait for its end
                self._fence = m.group(1)
                return self._in_fence(final)
            if line.isspace():
                return Unit(line, "blank") if nl >= 0 else None
            if _LINE_UNIT.match(line) or _REF_START.match(line):
                return Unit(line, "line") if nl >= 0 or final else None
        return self._sentence(buf, nl, final)

    def _in_fence(self, final: bool) -> Unit | None:
        buf, fence = self._buf, self._fence or "```"
        first = buf.find("\n")
        if first < 0:
            return None
        close = re.compile(rf"\n {{0,3}}{re.escape(fence[0])}{{{len(fence)},}}[ \t]*(\n|$)")
        m = close.search(buf, first)
        if m is None or (m.group(1) == "" and not final):
            return None
        self._fence = None
        return Unit(buf[: m.end()], "code")

    def _sentence(self, buf: str, nl: int, final: bool) -> Unit | None:
        scope = buf if nl < 0 else buf[: nl + 1]
        for m in _SENT_END.finditer(scope):
            end = m.end()
            mark = m.group(0)
            if mark[0] in "。！？":
                return Unit(buf[:end], "sentence")
            if end >= len(scope):
                if nl < 0 and not final:
                    return None  # the next character decides
                return Unit(buf[:end], "sentence")
            if scope[end] not in " \t\n\r":
                continue  # 3.14, example.com, a?b
            if mark[0] == "." and len(mark) == 1 and _abbreviation(scope[: m.start()]):
                continue
            return Unit(buf[:end], "sentence")
        if nl >= 0:
            return Unit(buf[: nl + 1], "sentence")
        if len(buf) > MAX_PROSE_CHARS:
            cut = buf.rfind(" ", 0, MAX_PROSE_CHARS)
            return Unit(buf[: cut + 1 if cut > 0 else MAX_PROSE_CHARS], "sentence")
        return None


def _abbreviation(before: str) -> bool:
    """Whether the word just before a full stop makes it no sentence end: an initial (``A.``),
    a known abbreviation (``e.g.``, ``Dr.``, ``et al.``)."""
    m = _WORD_BEFORE.search(before)
    if m is None:
        return False
    word = m.group(1).rstrip(".")
    return (len(word) == 1 and word.isalpha() and word.isupper()) or word.lower() in _ABBREV


def split_units(text: str) -> list[Unit]:
    """All units of a complete ``text`` (one :class:`UnitSplitter` fed at once)."""
    s = UnitSplitter()
    return s.feed(text) + s.finish()
