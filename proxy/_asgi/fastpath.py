"""The fast path: the ASGI app the server runs, in front of the FastAPI app.

``POST /v1/chat/completions`` (and the paths served as it: :data:`CHAT_PATHS`, Azure-shaped
chat paths) goes straight to the chat handler (the lean lane first, :mod:`proxy._asgi.lean`,
when enabled; else :func:`proxy.routes.chat.chat_asgi`), skipping the FastAPI/Starlette
middleware and routing layers: the handler catches every exception itself and writes its own
log line. Everything else goes to the FastAPI app, path-mapped first where needed (Azure's
``/openai/...`` paths, :mod:`proxy.wire.azure`; bare ``/models`` etc., :data:`BARE_PREFIXES`),
and gets its one log line and ``veracity_requests_total`` count here from the
:class:`~proxy.routes._respond.RequestRecord` its handler fills in (probes and scrapes,
:data:`proxy.routes.health.UNLOGGED_PATHS`, get neither).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI

from proxy._asgi.body import scope_headers
from proxy._asgi.lean import LeanLane
from proxy._asgi.request_ids import request_id
from proxy.observability import metrics
from proxy.routes._respond import RECORD_KEY, RequestRecord, finish
from proxy.routes.chat import CHAT_ROUTE, chat_asgi
from proxy.routes.health import UNLOGGED_PATHS
from proxy.routes.passthrough import UpstreamBodyError
from proxy.wire import azure

if TYPE_CHECKING:
    from proxy.app import GatewayState

__all__ = ["FastPath", "CHAT_PATHS", "BARE_PREFIXES"]

#: paths served as chat completions: clients configured with the bare host as ``base_url``
#: post to ``/chat/completions`` (a 404 before; as LiteLLM, serve both), some add a slash
CHAT_PATHS = frozenset({CHAT_ROUTE, CHAT_ROUTE + "/", "/chat/completions", "/chat/completions/"})
#: OpenAI API paths also served without the ``/v1`` prefix, for clients whose ``base_url`` is the
#: bare host (LiteLLM's proxy serves both forms): chat completions and the model list, with
#: their sub-paths (``/models/{model}``, stored completions). ``POST /chat/completions`` is
#: in :data:`CHAT_PATHS`; the rest is served as the ``/v1`` path.
BARE_PREFIXES = ("/chat/completions", "/models")


class FastPath:
    """ASGI wrapper: ``POST /v1/chat/completions`` goes straight to the handler, skipping the
    FastAPI/Starlette middleware and routing layers (the handler catches every exception
    itself); everything else goes to the FastAPI app. Azure-shaped paths (``/openai/...``,
    :mod:`proxy.wire.azure`) are served as the ``/v1`` path they map to: chat by the same handler
    (and lean lane), the rest by the FastAPI app with the path rewritten. Attribute access falls through to the
    FastAPI app (``.state``, ``.router``, ...)."""

    def __init__(self, app: FastAPI, state: GatewayState) -> None:
        self.app = app
        self.state = state
        self.sweeper = state.sweeper
        self.lean = LeanLane(state)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one ASGI connection scope: chat straight to the handler, the rest (path-mapped
        where needed) to the FastAPI app, logged unless a probe or scrape."""
        if scope["type"] == "http" and scope["path"] in CHAT_PATHS and scope["method"] == "POST":
            await self._chat(scope, receive, send, None)
            return
        if scope["type"] == "http" and scope["path"].startswith(azure.PREFIX):
            mapped = azure.parse(scope.get("raw_path") or scope["path"].encode("utf-8"))
            if mapped is not None:
                if mapped.is_chat and scope["method"] == "POST":
                    await self._chat(scope, receive, send, mapped.deployment)
                    return
                # any other Azure-shaped request: the /v1 route it maps to
                scope = {**scope, "path": mapped.path, "raw_path": mapped.raw_path,
                         "query_string": azure.without_api_version(scope.get("query_string", b"")),
                         azure.SCOPE_KEY: mapped.deployment}
        elif scope["type"] == "http" and scope["path"].startswith(BARE_PREFIXES):
            path = scope["path"]
            if any(path == p or path.startswith(p + "/") for p in BARE_PREFIXES):  # served as /v1 + path
                scope = {**scope, "path": "/v1" + path,
                         "raw_path": b"/v1" + (scope.get("raw_path") or path.encode("utf-8"))}
        if scope["type"] != "http" or scope["path"] in UNLOGGED_PATHS:
            await self._app(scope, receive, send)
            return
        await self._logged(scope, receive, send)

    async def _chat(self, scope: dict[str, Any], receive: Any, send: Any, deployment: str | None) -> None:
        """A chat completion: the lean lane when enabled (it hands what it does not take to
        the normal path), else the normal path; ``deployment``: see :func:`proxy.routes.chat.chat_asgi`."""
        if self.lean.enabled:
            await self.lean(scope, receive, send, deployment)
        else:
            await chat_asgi(self.state, scope, receive, send, None, deployment)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The FastAPI app; a pass-through body that failed after its status line
        (:class:`~proxy.routes.passthrough.UpstreamBodyError`) ends the response incomplete."""
        try:
            await self.app(scope, receive, send)
        except UpstreamBodyError:
            # a pass-through body failed after its status line: returning with the response
            # incomplete makes the server close the client connection
            return

    async def _logged(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve a request through the FastAPI app, then count it and write its one log line
        from the :class:`~proxy.routes._respond.RequestRecord` its handler filled in; the status
        is the one sent (499: the client left before any, 500: nothing was sent)."""
        rec = RequestRecord(request_id(scope_headers(scope)))
        scope = {**scope, RECORD_KEY: rec}
        status = 0

        async def send_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        metrics.request_started()
        try:
            await self._app(scope, receive, send_status)
        except asyncio.CancelledError:
            rec.fields["client_disconnected"] = True
            raise
        finally:
            if not status:
                status = 499 if rec.fields.get("client_disconnected") else 500
            finish(self.state, route=rec.route, model=rec.model, status=status, timing=rec.timing, rid=rec.rid,
                   principal=rec.principal, upstream=rec.upstream, stream=False,
                   veracity_status=rec.veracity_status, fields=rec.fields, model_label=rec.model_label)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)
