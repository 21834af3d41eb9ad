"""Where an answer is in LaTeX math mode, and the context rules that depend on it.

``math_spans(text)`` finds the math regions of an answer, in original offsets:

* display ``\\[ .. \\]``, ``$$ .. $$``, inline ``\\( .. \\)``;
* environments ``\\begin{equation|align|gather|multline|eqnarray}[*] .. \\end{..}`` (and the
  ``aligned``/``cases``/``array`` blocks inside them, which lie within);
* inline ``$ .. $`` by Pandoc's rule for ``tex_math_dollars`` (pandoc.org, MANUAL "Math"):
  the opening ``$`` has a non-blank character right after it, the closing ``$`` a non-blank
  character right before it and no digit right after it, and both are on one line. Money
  (``$5 and $10``) fails that rule: its would-be closing ``$`` is followed by a digit.

Inside a math region the verifier reads the text as a formula (see ``_claims`` and
``_tokens``): single letters are symbols (``3^{6k}``, ``2k - 1``: never the magnitude suffix
"thousand"), blanks do not separate factors (``6 \\cdot 27 \\sqrt{3}``), a claim never crosses the
region's delimiters, an ``align`` row break ``\\\\`` or a ``\\quad`` between listed items, and a
side that meets a symbol or command it cannot read is not cut short but left unchecked.
"""

from __future__ import annotations

import bisect
import re

_ENVS = r"(?:equation|align|alignat|gather|multline|eqnarray|displaymath|math)\*?"
_REGION = re.compile(
    r"\\\[(?P<d>.*?)\\\]"
    r"|\$\$(?P<dd>.*?)\$\$"
    r"|\\\((?P<i>.*?)\\\)"
    r"|\\begin\{(?P<env>" + _ENVS + r")\}(?P<e>.*?)\\end\{(?P=env)\}"
    r"|(?<![\\$])\$(?P<s>[^\s$](?:[^$\n]*?[^\s$\\])?)\$(?!\d)",
    re.S,
)
# Words that cannot be in a $..$ formula: two prose words in a row ("$5 and $" is money)
_PROSE = re.compile(r"(?<!\\)(?<![a-zA-Z])[a-zA-Z]{3,}\s+[a-zA-Z]{3,}(?![^{]*\})")


class MathSpans:
    """Sorted, disjoint ``(start, end)`` math regions of one text (original offsets), each
    given as the content *between* the delimiters."""

    __slots__ = ("starts", "ends", "dollars")

    def __init__(self, spans: list[tuple[int, int]], dollars: set[int] | None = None):
        spans = sorted(spans)
        self.starts = [s for s, _ in spans]
        self.ends = [e for _, e in spans]
        self.dollars = dollars or set()  # offsets of single "$" delimiters (not money)

    def __bool__(self) -> bool:
        return bool(self.starts)

    def region(self, pos: int) -> int:
        """Index of the region holding original offset ``pos``, or -1."""
        k = bisect.bisect_right(self.starts, pos) - 1
        if k >= 0 and pos < self.ends[k]:
            return k
        return -1


def math_spans(text: str) -> MathSpans:
    """The math regions of ``text`` (see the module docstring). Never raises."""
    out: list[tuple[int, int]] = []
    dollars: set[int] = set()
    if "\\" not in text and "$" not in text:
        return MathSpans(out)
    for m in _REGION.finditer(text):
        for g in ("d", "dd", "i", "e", "s"):
            if m.group(g) is not None:
                if g == "s":
                    body = m.group(g)
                    if _PROSE.search(body) or not _formula_like(body):
                        break
                    dollars.update((m.start(), m.end() - 1))
                out.append(m.span(g))
                break
    return MathSpans(out, dollars)


_FORMULA_SIGNS = re.compile(r"[\\^_{}=<>+*/()-]|^[A-Za-z]$|^\d")


def _formula_like(body: str) -> bool:
    return bool(_FORMULA_SIGNS.search(body))


# Delimiters (as found in the original text); the normaliser turns each into a line break so
# that no claim crosses one.
DELIMITER = re.compile(
    r"\\\[|\\\]|\\\(|\\\)|\$\$|\\(?:begin|end)\{[a-zA-Z*]+\}(?:\{[^{}]*\})?"
)
