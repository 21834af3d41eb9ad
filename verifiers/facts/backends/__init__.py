"""The search backends of the facts verifier, built from the ``facts.backends`` config.

``make_backends(config, context_messages=...)`` returns one
:class:`~verifiers.facts._passage.SearchBackend` per name in ``config["use"]``, in that order:

========== ======================================= ===================================================
name       settings (``config[name]``)              cost per ``search(query, k)``
========== ======================================= ===================================================
context    none (the request's own messages)        no network
local      ``db`` (required): corpus path           no network; one SQLite FTS5 query
wikipedia  ``url`` | ``lang`` (default ``en``),     2 GETs (search, then extracts), one at a time per
           ``user_agent``, ``maxlag``,              wiki host in the process; free, no key; contactable
           ``max_chars``                            User-Agent expected
searxng    ``url`` (required: the ``/search``       1 GET to your instance; JSON must be enabled there
           endpoint), ``categories``, ``engines``,
           ``language``, ``safesearch``,
           ``time_range``, ``user_agent``
brave      ``api_key_env`` (default                 1 GET, one billable API query; key required
           ``BRAVE_API_KEY``), ``url``,
           ``country``, ``search_lang``,
           ``extra_snippets``
========== ======================================= ===================================================

Every network section also takes ``timeout_s`` (else the top-level ``timeout_s``, default 5)
and ``retries`` (transient failures only, default 1). Unknown names, unknown settings, bad
values and missing required settings raise ValueError with a message naming the setting.
Close what was made with :func:`aclose_backends`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from verifiers.facts._passage import Passage, SearchBackend, SourceUnavailable
from verifiers.facts.backends.brave import BraveBackend
from verifiers.facts.backends.local import LocalBackend, fts_query
from verifiers.facts.backends.searxng import SearxngBackend
from verifiers.facts.backends.wikipedia import DEFAULT_USER_AGENT, WikipediaBackend

__all__ = ["BACKEND_NAMES", "BraveBackend", "LocalBackend", "Passage", "SearchBackend", "SearxngBackend",
           "SourceUnavailable", "WikipediaBackend", "aclose_backends", "check_config", "fts_query",
           "make_backends"]

#: the backend names a ``backends.use`` list may hold
BACKEND_NAMES = ("context", "local", "wikipedia", "searxng", "brave")
DEFAULT_TIMEOUT_S = 5.0

#: Settings each backend's section accepts (anything else is a typo -> ValueError).
_SETTINGS: dict[str, frozenset[str]] = {
    "context": frozenset(),
    "local": frozenset({"db"}),
    "wikipedia": frozenset({"url", "lang", "user_agent", "maxlag", "max_chars", "timeout_s", "retries"}),
    "searxng": frozenset({"url", "categories", "engines", "language", "safesearch", "time_range", "user_agent",
                          "timeout_s", "retries"}),
    "brave": frozenset({"url", "api_key_env", "country", "search_lang", "extra_snippets", "timeout_s", "retries"}),
}


def _num(section: str, key: str, value: Any, *, integer: bool = False, minimum: float = 0.0) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        raise ValueError(f"facts backends: {section}.{key} must be a{'n integer' if integer else ' number'}, "
                         f"got {value!r}")
    if value < minimum or (not integer and value <= 0):
        raise ValueError(f"facts backends: {section}.{key} must be {'>= ' + str(minimum) if integer else '> 0'}, "
                         f"got {value!r}")
    return value


def _str(section: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"facts backends: {section}.{key} must be a non-empty string, got {value!r}")
    return value.strip()


def check_config(config: Any) -> dict[str, dict[str, Any]]:
    """Validate a backends ``config`` (the shape :func:`make_backends` takes) without building a
    client, opening a corpus or reading the environment: what a policy check can decide before
    the gateway runs (``veracity policy check``, policy loading).

    Returns the per-backend sections of the backends in ``use``, in order. Raises ValueError
    naming the problem: not a mapping, ``use`` not a list of names, an unknown backend name
    (known: :data:`BACKEND_NAMES`), a name used twice, a section that is not a mapping, an
    unknown setting in a used backend's section, a ``timeout_s``/``retries`` of the wrong
    type, ``local`` without ``db``, ``searxng`` without ``url``. Left to :func:`make_backends`
    (they depend on the machine the gateway runs on): that the corpus file exists and that the
    Brave key variable is set."""
    if not isinstance(config, Mapping):
        raise ValueError(f"facts backends: config must be a mapping, got {type(config).__name__}")
    use = config.get("use", ["context"])
    if isinstance(use, str) or not isinstance(use, (list, tuple)) or not all(isinstance(u, str) for u in use):
        raise ValueError(f"facts backends: 'use' must be a list of backend names, got {use!r}")
    for u in use:
        if u not in BACKEND_NAMES:
            raise ValueError(f"facts backends: unknown backend {u!r} (known: {', '.join(BACKEND_NAMES)})")
    dup = sorted({u for u in use if use.count(u) > 1})
    if dup:
        raise ValueError(f"facts backends: {', '.join(dup)} listed more than once in 'use'")
    timeout = _num("facts backends", "timeout_s", config.get("timeout_s", DEFAULT_TIMEOUT_S))

    sections: dict[str, dict[str, Any]] = {}
    for name in use:
        sec = config.get(name) or {}
        if not isinstance(sec, Mapping):
            raise ValueError(f"facts backends: '{name}' settings must be a mapping, got {sec!r}")
        unknown = sorted(set(sec) - _SETTINGS[name])
        if unknown:
            allowed = ", ".join(sorted(_SETTINGS[name])) or "none"
            raise ValueError(f"facts backends: unknown setting(s) {', '.join(f'{name}.{k}' for k in unknown)} "
                             f"(allowed: {allowed})")
        if name in ("wikipedia", "searxng", "brave"):
            _net_common(name, dict(sec), timeout)
        if name == "local" and "db" not in sec:
            raise ValueError("facts backends: local.db (the corpus file) is required")
        if name == "local":
            _str("local", "db", sec["db"])
        if name == "searxng" and not sec.get("url"):
            raise ValueError("facts backends: searxng.url (your instance's /search endpoint) is required")
        sections[name] = dict(sec)
    return sections


def make_backends(config: Mapping[str, Any], *, context_messages: list | None = None) -> list[SearchBackend]:
    """The backends named in ``config["use"]`` (default ``["context"]``), in that order.

    ``config``: ``{"use": [...], "local": {"db": PATH}, "wikipedia": {...}, "searxng":
    {"url": ...}, "brave": {"api_key_env": "BRAVE_API_KEY", ...}, "timeout_s": 5}`` (module
    doc for every setting). ``context_messages``: the request's chat messages for the
    ``context`` backend (None -> no messages). Raises ValueError: everything
    :func:`check_config` refuses, a missing ``local.db`` corpus file, an unset Brave key
    variable. Nothing is contacted here."""
    sections = check_config(config)
    timeout = _num("facts backends", "timeout_s", config.get("timeout_s", DEFAULT_TIMEOUT_S))
    use = list(sections)

    # a failure part-way drops what was made: a client that never sent a request holds no socket
    return [_make_one(name, sections[name], timeout, context_messages) for name in use]


def _net_common(name: str, sec: dict[str, Any], timeout: float) -> dict[str, Any]:
    return {"timeout_s": float(_num(name, "timeout_s", sec.get("timeout_s", timeout))),
            "retries": int(_num(name, "retries", sec.get("retries", 1), integer=True))}


def _make_one(name: str, sec: dict[str, Any], timeout: float, context_messages: list | None) -> SearchBackend:
    if name == "context":
        from verifiers.facts._context import ContextBackend  # written with the facts core

        return ContextBackend(list(context_messages or []), name="context")
    if name == "local":
        if "db" not in sec:
            raise ValueError("facts backends: local.db (the corpus file) is required")
        db = _str("local", "db", sec["db"])
        try:
            return LocalBackend(db)
        except ValueError as exc:
            raise ValueError(f"facts backends: local.db: {exc}") from None
    if name == "wikipedia":
        kw = _net_common(name, sec, timeout)
        url = _str(name, "url", sec["url"]) if sec.get("url") is not None else None
        maxlag = sec.get("maxlag", 5)
        if maxlag is not None:
            maxlag = _num(name, "maxlag", maxlag, integer=True)
        try:
            return WikipediaBackend(url, lang=_str(name, "lang", sec.get("lang", "en")),
                                    user_agent=_str(name, "user_agent", sec.get("user_agent", DEFAULT_USER_AGENT)),
                                    maxlag=maxlag,
                                    max_chars=_num(name, "max_chars", sec.get("max_chars", 1500), integer=True,
                                                   minimum=100), **kw)
        except ValueError as exc:
            raise ValueError(f"facts backends: {exc}") from None
    if name == "searxng":
        kw = _net_common(name, sec, timeout)
        if not sec.get("url"):
            raise ValueError("facts backends: searxng.url (your instance's /search endpoint) is required")
        params = {k: sec[k] for k in ("categories", "engines", "language", "safesearch", "time_range") if k in sec}
        for k, v in params.items():
            if isinstance(v, list):
                params[k] = ",".join(str(x) for x in v)
            elif not isinstance(v, (str, int)) or isinstance(v, bool):
                raise ValueError(f"facts backends: searxng.{k} must be a string, got {v!r}")
        ua = _str(name, "user_agent", sec["user_agent"]) if "user_agent" in sec else None
        try:
            return SearxngBackend(_str(name, "url", sec["url"]), params=params, user_agent=ua, **kw)
        except ValueError as exc:
            raise ValueError(f"facts backends: {exc}") from None
    if name == "brave":
        kw = _net_common(name, sec, timeout)
        env = _str(name, "api_key_env", sec.get("api_key_env", "BRAVE_API_KEY"))
        key = os.environ.get(env, "").strip()
        if not key:
            raise ValueError(f"facts backends: brave needs an API key in the environment variable {env} "
                             "(brave.api_key_env), which is not set")
        extra = sec.get("extra_snippets", False)
        if not isinstance(extra, bool):
            raise ValueError(f"facts backends: brave.extra_snippets must be true or false, got {extra!r}")
        opt = {k: _str(name, k, sec[k]) for k in ("url", "country", "search_lang") if sec.get(k) is not None}
        try:
            return BraveBackend(key, extra_snippets=extra, **opt, **kw)
        except ValueError as exc:
            raise ValueError(f"facts backends: {exc}") from None
    raise ValueError(f"facts backends: unknown backend {name!r}")  # pragma: no cover - checked above


async def aclose_backends(backends: list[Any]) -> None:
    """Close every backend that has ``aclose()`` (their httpx clients), each even if another
    one fails; never raises (a close failure is not worth a request error)."""
    for b in backends:
        close = getattr(b, "aclose", None)
        if close is None:
            continue
        try:
            await close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
