"""Structured logs: structlog, one JSON object per line on stdout.

Each request produces exactly one ``event="request"`` line with ``request_id``, ``team``,
``key`` (the virtual key's *name*), ``model``, ``upstream``, ``route``, ``status``, ``stream``,
``duration_ms``, ``upstream_ms``, ``overhead_ms``, ``veracity_status`` and, on failure,
``error_code``. Prompt and answer text appear only with ``logging.log_content: true``.

Secrets: nothing in the gateway passes keys to the logger, and as a second line of defence the
last processor masks every configured secret (also URL- or JSON-escaped) and anything shaped
like an API key (``sk-...``, ``Bearer ...``) in every string value: :mod:`proxy.redaction`,
the one redaction path that audit and review records use too.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import structlog

from proxy import redaction


def add_secrets(values: list[str]) -> None:
    """Register secret strings (upstream keys) that must never appear in a log line, an audit
    or review record, or a relayed error (:func:`proxy.redaction.register`)."""
    redaction.register(values)


def scrub_secrets(data: bytes) -> bytes:
    """``data`` (an upstream's response body relayed to a client) with every registered secret,
    verbatim or URL/JSON-escaped, replaced by ``[REDACTED]`` (:func:`proxy.redaction.scrub`):
    an upstream that echoes the request's key in its error message must not hand the gateway's
    upstream key to the client. Key-shaped strings that are not registered secrets are left
    alone (the client's own key in pass-through auth, OpenAI's masked ``sk-...abcd``)."""
    return redaction.scrub(data)


def redact(text: str) -> str:
    """``text`` with registered secrets and key-shaped substrings replaced by ``[REDACTED]``
    (:func:`proxy.redaction.redact`: the same masking as audit and review records)."""
    return redaction.redact(text)


def _render(_logger: Any, _name: str, event: dict[str, Any]) -> str:
    """JSON line (orjson); if the rendered line might contain a secret, every string value is
    redacted and the line rendered again (the common case costs one scan of the line)."""
    line = _dumps(event)
    if redaction.needs_redaction(line):
        line = _dumps(redaction.redact_obj(event))
    return line


try:
    import orjson as _orjson

    def _dumps(obj: Any) -> str:
        try:
            return _orjson.dumps(obj, default=str).decode()
        except TypeError:  # a lone surrogate in model text, an int beyond 64 bits: never lose the line
            import json as _json

            return _json.dumps(obj, default=str)
except ImportError:  # pragma: no cover
    import json as _json

    def _dumps(obj: Any) -> str:
        return _json.dumps(obj, default=str)


_ts_cache: list[Any] = [-1, ""]


def _timestamp(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    """``timestamp``: ISO 8601 UTC with microseconds (the seconds part formatted once a second)."""
    now = time.time()
    sec = int(now)
    if sec != _ts_cache[0]:
        _ts_cache[0], _ts_cache[1] = sec, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    event["timestamp"] = f"{_ts_cache[1]}.{int((now - sec) * 1e6):06d}Z"
    return event


_level = [logging.INFO]


def info_enabled() -> bool:
    """True when ``info`` lines are written (the level :func:`configure` set is info or
    debug): lets the hot path skip building a request line that would be dropped."""
    return _level[0] <= logging.INFO


def configure(level: str = "info") -> None:
    """Set up structlog (JSON lines to stdout) and route stdlib logging (uvicorn's) through
    the same format. Idempotent."""
    lvl = getattr(logging, level.upper(), logging.INFO)
    _level[0] = lvl
    processors = [
        _logger_name,
        structlog.processors.add_log_level,
        _timestamp,
        _render,
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.WriteLoggerFactory(sys.stdout),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *processors[:-1],
                    structlog.processors.format_exc_info, _render],
        foreign_pre_chain=[structlog.stdlib.add_logger_name],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(lvl)
    for name in ("uvicorn", "uvicorn.error"):
        lg = logging.getLogger(name)
        lg.handlers[:] = []
        lg.propagate = True
    # The gateway writes its own request line; access lines (e.g. of the in-process demo
    # upstream) would only double the volume. None is written: no handler and no propagation,
    # so uvicorn's protocol (which asks ``hasHandlers()`` once per connection) skips building
    # each line's arguments too (client address, path: ~4 us a response, bench/results/gateway.md).
    access = logging.getLogger("uvicorn.access")
    access.handlers[:] = []
    access.propagate = False
    access.setLevel(logging.WARNING)


def get_logger(name: str = "veracity") -> Any:
    """A structlog logger whose lines carry ``logger=name``. Lazy: safe to call at import time,
    before :func:`configure` runs (as in uvicorn worker processes)."""
    return structlog.get_logger(_logger=name)


def _logger_name(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
    name = event.pop("_logger", None)
    if name is not None:
        event["logger"] = name
    return event
