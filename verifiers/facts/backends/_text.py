"""Text helpers shared by the search backends: markup-free snippets, domains, ISO dates."""

from __future__ import annotations

import html
import re
import warnings
from datetime import datetime

from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

_WS = re.compile(r"\s+")
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
