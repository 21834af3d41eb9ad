"""The gateway's JSON codec (RFC 8259): one ``dumps``/``loads`` pair for every body it reads or writes.

* :func:`dumps` -- compact UTF-8 bytes (orjson; the stdlib with ASCII escapes for the values
  orjson refuses: a lone surrogate, an integer beyond 64 bits).
* :func:`loads` -- upstream answers: a ``\\ud800``-style escape of a lone surrogate is accepted,
  integers beyond 64 bits stay exact, nesting past :data:`MAX_JSON_DEPTH` is refused.
* :func:`loads_strict` -- client request bodies: a lone surrogate is refused, a UTF-8 byte order
  mark ignored, integers stay exact.
* :func:`deeper_than`, :func:`has_long_digit_run` -- the two cheap pre-checks those rest on.

orjson is ~3-5x faster than the stdlib on completion-sized bodies; without it (an optional
install) the stdlib is used throughout.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["MAX_JSON_DEPTH", "deeper_than", "dumps", "has_long_digit_run", "loads", "loads_strict"]


def _no_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON (RFC 8259 section 6); the stdlib would accept them."""
    raise ValueError(f"{name} is not valid JSON")


#: Deepest JSON nesting the gateway parses and re-serialises (orjson writes at most 255 levels).
MAX_JSON_DEPTH = 255


def _bracket_count(raw: bytes | str) -> int:
    """Opening brackets in ``raw`` (C-speed): an upper bound of its nesting depth."""
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{")
    return raw.count(b"[") + raw.count(b"{")


def deeper_than(obj: Any, limit: int) -> bool:
    """True when ``obj`` nests dicts/lists more than ``limit`` levels (iterative walk)."""
    stack = [(obj, 1)]
    while stack:
        o, depth = stack.pop()
        if depth > limit:
            return True
        children = o.values() if isinstance(o, dict) else o
        stack.extend((v, depth + 1) for v in children if isinstance(v, (dict, list)))
    return False


try:  # orjson is ~3-5x faster on completion-sized bodies; stdlib json is the fallback
    import orjson as _orjson

    def dumps(obj: Any) -> bytes:
        """JSON bytes (compact, UTF-8). Values orjson refuses (a lone UTF-16 surrogate in a
        string, an integer beyond 64 bits) are written by the stdlib with ASCII escapes."""
        try:
            return _orjson.dumps(obj)
        except TypeError:
            return json.dumps(obj, separators=(",", ":")).encode("ascii")

    def loads(raw: bytes | str) -> Any:
        """Parse JSON; raises ValueError. A ``\\ud800``-style escape of a lone surrogate is
        valid JSON (RFC 8259 section 8.2) that orjson refuses: the stdlib parses it, so a
        model answer with one odd character is not lost as an "unusable" response. Integers
        beyond 64 bits come back exact (see :func:`loads_strict`). A value nested deeper than
        :data:`MAX_JSON_DEPTH` levels is refused (ValueError): it could not be written back
        (orjson stops at 255 levels, the stdlib's recursion near 1,000)."""
        try:
            obj = _orjson.loads(raw)
        except _orjson.JSONDecodeError as exc:
            text = raw if isinstance(raw, (bytes, bytearray, str)) else bytes(raw)
            if ("\\u" if isinstance(text, str) else b"\\u") not in text:
                raise
            try:
                out = json.loads(text, parse_constant=_no_constant)
            except (ValueError, UnicodeDecodeError, RecursionError):
                raise exc from None
        else:
            out = _exact(raw, obj)
        if _bracket_count(raw) > MAX_JSON_DEPTH and deeper_than(out, MAX_JSON_DEPTH):
            raise ValueError(f"JSON nested more than {MAX_JSON_DEPTH} levels deep")
        return out

    def loads_strict(raw: bytes | str) -> Any:
        """Parse a client request body; raises ValueError. Stricter than :func:`loads`: a
        lone surrogate is refused (400), as it could not be written to logs, audit files or
        metric labels as UTF-8. orjson turns an integer beyond 64 bits into a float
        (``2**70`` -> ``1.1805916207174113e+21``); a faithful proxy must not change a
        client's or an upstream's numbers, so such a body is parsed again by the stdlib,
        whose integers are exact (and :func:`dumps` writes them back exactly). A leading UTF-8
        byte order mark is ignored, as RFC 8259 section 8.1 allows a parser to do (.NET and
        PowerShell clients send one)."""
        if raw[:3] == _BOM:
            raw = raw[3:]
        return _exact(raw, _orjson.loads(raw))
except ImportError:  # pragma: no cover - exercised only without orjson
    def dumps(obj: Any) -> bytes:
        """JSON bytes (compact, UTF-8)."""
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()

    loads = loads_strict = json.loads

_BOM = b"\xef\xbb\xbf"
#: bytes.translate table: ASCII digit -> b"0", any other byte -> b" "
_DIGIT_MAP = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))
#: orjson parses integers in [-2**63, 2**64 - 1] exactly; every integer outside that range
#: has at least 19 digits (-9223372036854775809 has 19, 18446744073709551616 has 20)
_BIG_INT_DIGITS = 19
_BIG_RUN = b"0" * _BIG_INT_DIGITS


def has_long_digit_run(raw: bytes | bytearray | memoryview | str) -> bool:
    """True when ``raw`` holds 19 or more consecutive ASCII digits, i.e. it may hold an integer
    that orjson cannot represent (it returns a float for it). Costs about 0.3 ns a byte on a
    typical body: a run of 19 digits covers two adjacent bytes of ``raw[::9]`` (any 19
    consecutive positions hold two consecutive multiples of 9), so only bodies where that
    sample shows two digits side by side are scanned in full. False positives (long
    decimals, digits in strings) only cost a slower exact parse."""
    if type(raw) is not bytes:
        raw = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else bytes(raw)
    if b"00" not in raw[::9].translate(_DIGIT_MAP):
        return False
    return _BIG_RUN in raw.translate(_DIGIT_MAP)


def _exact(raw: Any, obj: Any) -> Any:
    """``obj`` (orjson's parse of ``raw``), or the stdlib's parse of ``raw`` when ``raw`` may
    hold an integer beyond 64 bits. The stdlib is used only then: it is ~3x slower. Its parse
    equals orjson's in every other value (orjson has already accepted ``raw``: valid UTF-8,
    no lone surrogate, no NaN); a body too deeply nested for the stdlib keeps orjson's parse."""
    if type(obj) is dict and has_long_digit_run(raw):  # only objects are forwarded (other bodies are refused)
        try:
            return json.loads(raw, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return obj
    return obj
