"""CORS for browser clients: Starlette's ``CORSMiddleware`` around the whole ASGI app.

Only when the config has a ``cors:`` section (:class:`proxy.config.CORSConfig`); without one
the app is returned unwrapped, so responses carry no CORS headers and the chat fast path
(:class:`proxy._asgi.fastpath.FastPath`) pays nothing. Wrapped outside ``FastPath``, the middleware sees
every request: it answers preflights (``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) itself, on any path, and adds the CORS response headers to
every other response, whichever layer sent it (the lean lane, streams, errors of the gateway,
pass-through answers, FastAPI's 404/405/500).
"""

from __future__ import annotations

from typing import Any

import json

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response

from proxy.config import CORSConfig
from proxy.wire.errors import error_body


class CORS(CORSMiddleware):
    """``CORSMiddleware`` whose attribute access falls through to the wrapped app (as
    :class:`proxy._asgi.fastpath.FastPath` does to FastAPI's): ``create_app(cfg).state`` (the
    ``Gateway``), ``.lean``, ``.router`` work with or without CORS; ``.app`` is the
    wrapped ``FastPath`` here.

    Two changes to Starlette's answers, no change to its CORS decisions:

    * ``Access-Control-Allow-Headers`` lists each name once, lower-case. Starlette adds the
      CORS-safelisted names in their capitalised spelling (``Content-Type``) to the configured
      ones, so the default list said ``Content-Type`` and ``content-type``; header names are
      case-insensitive (RFC 9110 section 5.1; the Fetch standard compares them byte-lowercased).
    * A refused preflight (400) carries OpenAI's error JSON (``code``
      ``cors_preflight_refused``, the message naming what was refused) instead of Starlette's
      ``text/plain`` "Disallowed CORS origin": browsers do not show a preflight's body, but a
      developer replaying it with curl reads it. Status and headers are Starlette's.
    """

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        names = self.preflight_headers.get("Access-Control-Allow-Headers")
        if names:
            unique = dict.fromkeys(n.strip().lower() for n in names.split(",") if n.strip())
            self.preflight_headers["Access-Control-Allow-Headers"] = ", ".join(unique)
        self.allow_headers = list(dict.fromkeys(self.allow_headers))

    def preflight_response(self, request_headers: Headers) -> Response:
        """Starlette's preflight answer; a refusal re-shaped as OpenAI's error JSON."""
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        refused = bytes(response.body).decode("latin-1")  # "Disallowed CORS origin, headers"
        what = refused.removeprefix("Disallowed CORS ").strip() or "request"
        message = (f"CORS preflight refused: {what} not allowed by this gateway's `cors:` section "
                   f"(Origin {request_headers.get('origin', '')[:200]!r}).")
        headers = {k: v for k, v in response.headers.items() if k not in ("content-length", "content-type")}
        return Response(json.dumps(error_body(message, code="cors_preflight_refused")).encode(),
                        response.status_code, headers=headers, media_type="application/json")

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
