"""CORS for browser clients: Starlette's ``CORSMiddleware`` around the whole ASGI app.

Only when the config has a ``cors:`` section (:class:`proxy.config.CORSConfig`); without one
the app is returned unwrapped, so responses carry no CORS headers and the chat fast path
(:class:`proxy.app.FastPath`) pays nothing. Wrapped outside ``FastPath``, the middleware sees
every request: it answers preflights (``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) itself, on any path, and adds the CORS response headers to
every other response, whichever layer sent it (the lean lane, streams, errors of the gateway,
pass-through answers, FastAPI's 404/405/500).
"""

from __future__ import annotations

from typing import Any

from starlette.middleware.cors import CORSMiddleware

from proxy.config import CORSConfig


class CORS(CORSMiddleware):
    """``CORSMiddleware`` whose attribute access falls through to the wrapped app (as
    :class:`proxy.app.FastPath` does to FastAPI's): ``create_app(cfg).state`` (the
    ``GatewayState``), ``.lean``, ``.router`` work with or without CORS; ``.app`` is the
    wrapped ``FastPath`` here."""

    def __getattr__(self, name: str) -> Any:
        app = self.__dict__.get("app")
        if app is None:  # not initialised yet (copy, pickle): no fall-through
            raise AttributeError(name)
        return getattr(app, name)


def wrap(app: Any, cfg: CORSConfig | None) -> Any:
    """``app`` wrapped in :class:`CORS` configured from ``cfg``, or ``app`` itself when ``cfg``
    is None (no ``cors:`` section)."""
    if cfg is None:
        return app
    return CORS(app, allow_origins=cfg.allow_origins, allow_origin_regex=cfg.allow_origin_regex,
                allow_methods=cfg.allow_methods, allow_headers=cfg.allow_headers,
                allow_credentials=cfg.allow_credentials, expose_headers=cfg.expose_headers,
                max_age=cfg.max_age, allow_private_network=cfg.allow_private_network)
