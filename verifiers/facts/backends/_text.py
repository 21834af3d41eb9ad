"""Text helpers shared by the search backends: markup-free snippets, domains, ISO dates, and the
size bounds of what a backend reads of one result.

A search API's result is a snippet (tens to hundreds of characters; Brave's extra snippets, a
MediaWiki lead section: a few kB). A result's text is cut to :data:`MAX_RESULT_CHARS` *before*
its markup is parsed, and the cleaned passage to :data:`MAX_PASSAGE_CHARS` (at a sentence end
near it): parsing and judging cost grows with the text (~3 us per character), so a server that
answers one multi-megabyte "snippet" (or 50,000 nested tags) costs a bounded amount of work.
Such a passage is marked ``truncated``.
"""

from __future__ import annotations

import html
import re
import warnings
from datetime import datetime

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

#: Characters of one result's raw text (markup included) read at most.
MAX_RESULT_CHARS = 64_000
#: Characters of one passage's clean text kept at most (a MediaWiki lead section, the longest
#: honest passage of these APIs, is cut at 1,500 by default).
MAX_PASSAGE_CHARS = 4_000
#: Characters of a title kept at most.
MAX_TITLE_CHARS = 500

_WS = re.compile(r"\s+")
_SENT_END = re.compile(r"[.!?][\"')\]]?\s")
_ISO_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
_ISO_PREFIX = re.compile(r"^\d{4}(-\d{2}){0,2}$")


def clean_text(s: str | None) -> str:
    """Plain, whitespace-normalised text of a snippet that may carry HTML highlight markup
    (MediaWiki's ``<span class="searchmatch">``, Brave's ``<strong>``) and entities
    (``&quot;``, ``&#39;``). Tags are dropped, their text kept; ``None`` -> ``""``."""
    if not s:
        return ""
    if "<" in s or "&" in s:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
            s = BeautifulSoup(s, "html.parser").get_text()
        s = html.unescape(s)  # double-escaped entities (``&amp;quot;``) survive one parse
    return _WS.sub(" ", s).strip()


def bounded(text: str, max_chars: int = MAX_PASSAGE_CHARS) -> tuple[str, bool]:
    """``(text, truncated)``: ``text`` itself when it has at most ``max_chars`` characters, else
    its beginning cut at the last sentence end in the second half of the bound (else the last
    space, else at the bound)."""
    if len(text) <= max_chars:
        return text, False
    head = text[:max_chars]
    cut = -1
    for m in _SENT_END.finditer(head, max_chars // 2):
        cut = m.end()
    if cut < 0:
        sp = head.rfind(" ", max_chars // 2)
        cut = sp if sp > 0 else max_chars
    return head[:cut].rstrip(), True


def passage_text(raw: str | None) -> tuple[str, bool]:
    """The clean text of one result (:func:`clean_text`) within the bounds of this module:
    ``(text, truncated)``; the raw text is cut to :data:`MAX_RESULT_CHARS` before parsing."""
    if not raw:
        return "", False
    cut_raw = len(raw) > MAX_RESULT_CHARS
    text, cut = bounded(clean_text(raw[:MAX_RESULT_CHARS]))
    return text, cut or cut_raw


def title_text(raw: object) -> str:
    """A clean title (:func:`clean_text`) of at most :data:`MAX_TITLE_CHARS` characters; ``""``
    for a missing or non-string title."""
    if not isinstance(raw, str):
        return ""
    return bounded(clean_text(raw[:MAX_TITLE_CHARS * 4]), MAX_TITLE_CHARS)[0]


def domain_of(url: str | None) -> str | None:
    """Host of ``url`` in lower case without a leading ``www.``; None for no/relative URL."""
    if not url:
        return None
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url.strip()).hostname
    except ValueError:
        return None
    if not host:
        return None
    host = host.lower().rstrip(".")
    return host[4:] if host.startswith("www.") else host


def iso_date(value: object) -> str | None:
    """``YYYY-MM-DD`` (or a ``YYYY``/``YYYY-MM`` prefix) from an API date: ISO 8601 with or
    without time (``2023-10-12T00:00:00``, ``2024-01-05T10:00:00Z``) or a long English date
    (``October 12, 2023``, Brave's ``age``). Relative ages ("2 days ago") and anything else
    -> None (an unknown date is not evidence of recency)."""
    if not isinstance(value, str):
        return None
    v = value.strip()
    m = _ISO_DAY.match(v)
    if m:
        try:
            datetime(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return None
        return m.group(0)
    if _ISO_PREFIX.match(v):
        return v
    for fmt in ("%B %d, %Y", "%b %d, %Y", "%d %B %Y"):
        try:
            return datetime.strptime(v, fmt).date().isoformat()
        except ValueError:
            continue
    return None
