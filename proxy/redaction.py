"""One redaction path for everything the gateway writes or relays: log lines, audit records,
review records, stored reports, relayed upstream error bodies and headers.

The gateway knows its secrets -- the upstream keys of its config and the values of upstream
headers named like credentials (``api-key``, ``x-api-key``, ``authorization``, ``*token*``,
``*secret*``) -- and :func:`register` records them at start-up. Two entry points:

* :func:`scrub` / :func:`scrub_text`: every registered secret replaced by ``[REDACTED]``, in
  the encodings an upstream or a model may echo it in: verbatim, URL-encoded (``%2D`` or
  ``%2d`` for any character, also doubly: ``%252D``), JSON-escaped (``\\u002d``, ``\\/``), mixed
  freely within one occurrence. For what is relayed to the client (upstream error bodies, SSE
  error events, response headers): a key-shaped string that is not a registered secret (the
  client's own key under pass-through auth, OpenAI's masked ``sk-...abcd``) is left alone.
* :func:`redact` / :func:`redact_obj`: the same, plus anything shaped like an API key
  (``sk-...``, ``Bearer ...``), for what the gateway stores or prints (logs, audit, reviews,
  reports): the same text is masked the same way in every one of them.

Out of scope: a secret that is base64-encoded (or encrypted, hashed, split, reversed) is not
recognised -- base64 shifts with the offset, and an upstream that does that on purpose is an
attacker no substring rule stops. docs/metrics.md says so.

Cost: a text is first checked for a registered secret's longest alphanumeric run (the part no
standard encoder changes) or a ``%``, ``\\u`` or ``\\/`` escape; only then does the per-secret regex run
(~2.5 us on a 400-byte log line, measured). The common log line costs a few substring scans.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["REDACTED", "register", "registered", "clear", "config_secrets", "scrub", "scrub_text", "redact",
           "redact_obj", "might_leak"]

REDACTED = "[REDACTED]"
_REDACTED_B = REDACTED.encode()

#: Shorter values are not registered: they would mask ordinary words.
MIN_SECRET_LEN = 6

#: key-shaped strings masked in what the gateway stores or prints (not in what it relays)
_KEYLIKE = re.compile(r"(?:\bsk-[A-Za-z0-9_\-]{8,}|\bBearer\s+[A-Za-z0-9_\-\.=:/+]{8,})")
#: header names whose upstream values are credentials
_CREDENTIAL_HEADER = re.compile(r"key|auth|token|secret|password", re.I)

_secrets: list[str] = []
_anchors: list[str] = []
_anchors_b: list[bytes] = []
_pattern: re.Pattern[str] | None = None
_pattern_b: re.Pattern[bytes] | None = None


def _char(c: str) -> str:
    """A regex for one character of a secret in any of the encodings (see module doc)."""
    code = ord(c)
    if code > 0xFF:
        hexes = [f"{code:04x}"]
        alts = [re.escape(c), r"\\u" + _hex(hexes[0])]
        return "(?:" + "|".join(alts) + ")"
    h = _hex(f"{code:02x}")
    alts = [re.escape(c), "%" + h, "%25" + h, r"\\u00" + h]
    if c == "/":
        alts.append(r"\\/")
    if c == " ":
        alts.append(r"\+")
    return "(?:" + "|".join(alts) + ")"


def _hex(digits: str) -> str:
    return "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits)


def _anchor(secret: str) -> str:
    """The secret's longest run of ASCII letters and digits: URL and JSON encoders leave it as it is."""
    runs = re.findall(r"[A-Za-z0-9]+", secret)
    return max(runs, key=len) if runs else secret


def register(values: Iterable[str | None]) -> None:
    """Add secret strings (at least :data:`MIN_SECRET_LEN` characters; shorter ones and
    duplicates are ignored) and recompile the matcher. Idempotent."""
    global _pattern, _pattern_b
    changed = False
    for v in values:
        if v and len(v) >= MIN_SECRET_LEN and v not in _secrets:
            _secrets.append(v)
            changed = True
    if not changed:
        return
    _secrets.sort(key=len, reverse=True)  # a secret that contains another is matched whole first
    alts = ["".join(_char(c) for c in s) for s in _secrets]
    _pattern = re.compile("|".join(alts))
    _pattern_b = re.compile("|".join(alts).encode("utf-8"))
    _anchors[:] = sorted({_anchor(s) for s in _secrets}, key=len)
    _anchors_b[:] = [a.encode("utf-8") for a in _anchors]


def registered() -> tuple[str, ...]:
    """The registered secrets (for tests)."""
    return tuple(_secrets)


def clear() -> None:
    """Forget every registered secret (tests)."""
    global _pattern, _pattern_b
    _secrets.clear()
    _anchors.clear()
    _anchors_b.clear()
    _pattern = _pattern_b = None


def config_secrets(cfg: Any) -> list[str]:
    """The secrets of a :class:`proxy.config.GatewayConfig`: every upstream's ``api_key`` and
    the values of its ``headers`` whose names look like credentials (``api-key``,
    ``Authorization``, ``x-api-key``, ``*token*``, ``*secret*``; a ``Bearer`` prefix dropped),
    and string values named like keys in a litellm upstream's ``litellm_params``."""
    out: list[str] = []
    for u in getattr(cfg, "upstreams", ()) or ():
        if getattr(u, "api_key", None):
            out.append(u.api_key.get_secret_value())
        for name, value in (getattr(u, "headers", None) or {}).items():
            if isinstance(value, str) and _CREDENTIAL_HEADER.search(name):
                out.append(value.removeprefix("Bearer ").strip())
        for name, value in (getattr(u, "litellm_params", None) or {}).items():
            if isinstance(value, str) and _CREDENTIAL_HEADER.search(name):
                out.append(value)
    return out


def might_leak(text: str) -> bool:
    """Cheap pre-check: False only when ``text`` cannot hold a registered secret in any
    encoding :func:`scrub_text` knows (no anchor, no ``%``/``\\u`` escape)."""
    if not _secrets:
        return False
    if "%" in text or "\\u" in text or "\\/" in text:
        return True
    return any(a in text for a in _anchors)


def _might_leak_b(data: bytes) -> bool:
    if not _secrets:
        return False
    if b"%" in data or b"\\u" in data or b"\\/" in data:
        return True
    return any(a in data for a in _anchors_b)


def scrub(data: bytes) -> bytes:
    """``data`` (bytes relayed to a client: an upstream error body, an SSE error event, a
    header value) with every registered secret, in any known encoding, replaced by
    ``[REDACTED]``. Key-shaped strings that are not registered are kept."""
    if _pattern_b is None or not _might_leak_b(data):
        return data
    return _pattern_b.sub(_REDACTED_B, data)


def scrub_text(text: str) -> str:
    """:func:`scrub` for a ``str``."""
    if _pattern is None or not might_leak(text):
        return text
    return _pattern.sub(REDACTED, text)


def redact(text: str) -> str:
    """``text`` with registered secrets (any known encoding) and key-shaped substrings
    (``sk-...``, ``Bearer ...``) replaced by ``[REDACTED]``: for logs, audit, reviews, reports."""
    text = scrub_text(text)
    if "sk-" in text or "Bearer" in text:
        text = _KEYLIKE.sub(REDACTED, text)
    return text


def redact_obj(obj: Any) -> Any:
    """A copy of ``obj`` (JSON-shaped: dicts, lists, strings, numbers) with :func:`redact`
    applied to every string, dict keys included; other values are returned as they are."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {(redact(k) if isinstance(k, str) else k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(x) for x in obj]
    return obj


def needs_redaction(text: str) -> bool:
    """Whether :func:`redact` could change ``text`` (a cheap pre-check: substring scans)."""
    return "sk-" in text or "Bearer" in text or might_leak(text)
