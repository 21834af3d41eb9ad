"""The gateway's ASGI app: :func:`create_app` (state, lifespan, the route table) and the uvicorn factory.

A request's way through, by folder:

* :mod:`proxy._asgi` (private, the speed layer): :mod:`proxy._asgi.fastpath` holds the app
  the server runs (``FastPath``) and the lean lane (``LeanLane``): chat completions go
  straight to the lean lane or the normal path, everything else through FastAPI's routing.
  Request ids, body reading and disconnect watching live beside it.
* :mod:`proxy.routes`: what each route means, one module per concern: ``chat`` (the normal
  path into :mod:`proxy.pipeline`), ``models``, ``passthrough`` (every other ``/v1/*``
  path), ``verify``, ``reports``, ``reviews`` (+ ``review_page``), ``health``, ``fallback``
  (404/405/500); ``_respond`` holds what every answer shares (error mapping, headers, the
  request log line) and ``_access`` the credential and model routing.

Routes: ``POST /v1/chat/completions`` (stream and not), ``GET /v1/models`` (union of the
upstreams' lists), ``POST /v1/veracity/verify``, ``GET /v1/veracity/reports/{request_id}``,
the review API and page, ``GET /healthz``, ``GET /readyz``, ``GET /metrics``, and every other
``/v1/*`` path passed through to the matching upstream untouched. The Azure OpenAI client's
paths (``/openai/deployments/{deployment}/...``, ``/openai/v1/...``) are served as the ``/v1``
route they map to (:mod:`proxy.wire.azure`), and so are ``/chat/completions`` and ``/models``
(:data:`proxy._asgi.fastpath.BARE_PREFIXES`, for clients whose ``base_url`` lacks ``/v1``).
Unknown URLs are 404 ``unknown_url`` naming the routes; a method a path does not serve is 405
with every served method in ``Allow``. Every request but ``/healthz``, ``/readyz``,
``/metrics`` writes one request log line and one ``veracity_requests_total`` count
(:func:`proxy.routes._respond.finish`). Every failure is an OpenAI-shaped error
(:mod:`proxy.wire.errors`); an unexpected exception is a 500 without a stack trace.
"""

from __future__ import annotations

import gc
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from proxy import redaction
from proxy._asgi import cors
from proxy._asgi.fastpath import FastPath
from proxy.config import GatewayConfig, UpstreamConfig, resolve_config
from proxy.observability import metrics
from proxy.observability.log import add_secrets, get_logger
from proxy.routes import fallback, health, review_page
from proxy.routes.chat import CHAT_ROUTE, chat_completions
from proxy.routes.models import MODELS_ROUTE, list_models
from proxy.routes.passthrough import passthrough
from proxy.routes.reports import REPORT_ROUTE, get_report
from proxy.routes.responses import RESPONSES_ROUTE, create_response
from proxy.routes.reviews import (REVIEW_PAGE_ROUTE, REVIEW_ROUTE, REVIEWS_ROUTE, get_review, list_reviews,
                                  page_endpoint, resolve_review)
from proxy.routes.verify import VERIFY_ROUTE, veracity_verify
from proxy.gateway import Gateway

__all__ = ["create_app", "app_from_env"]

log = get_logger("veracity")

#: the route table: (path template, endpoint, methods), matched in this order. The path
#: template is also the ``route`` label of the request's metrics and log line.
ROUTES = (
    (CHAT_ROUTE, chat_completions, ["POST"]),  # FastPath serves it first; this is the app's own entry
    (MODELS_ROUTE, list_models, ["GET"]),
    (RESPONSES_ROUTE, create_response, ["POST"]),
    ("/healthz", health.healthz, ["GET"]),
    ("/readyz", health.readyz, ["GET"]),
    ("/metrics", health.metrics_endpoint, ["GET"]),
    (VERIFY_ROUTE, veracity_verify, ["POST"]),
    (REPORT_ROUTE, get_report, ["GET"]),
    (REVIEWS_ROUTE, list_reviews, ["GET"]),
    (REVIEW_ROUTE, get_review, ["GET"]),
    (REVIEW_ROUTE, resolve_review, ["POST"]),
    (REVIEW_PAGE_ROUTE, page_endpoint(review_page.page), ["GET"]),
    (REVIEW_PAGE_ROUTE + "/login", page_endpoint(review_page.login), ["POST"]),
    (REVIEW_PAGE_ROUTE + "/logout", page_endpoint(review_page.logout), ["POST"]),
    (REVIEW_PAGE_ROUTE + "/{review_id}", page_endpoint(review_page.detail), ["GET"]),
    (REVIEW_PAGE_ROUTE + "/{review_id}", page_endpoint(review_page.resolve), ["POST"]),
    ("/v1/{rest:path}", passthrough, ["GET", "POST", "PUT", "PATCH", "DELETE"]),  # every other /v1/* path
)


def create_app(cfg: GatewayConfig) -> FastAPI:
    """The ASGI app for ``cfg`` (a :class:`~proxy._asgi.fastpath.FastPath` around the FastAPI
    app, in CORS when the config has a ``cors:`` section; typed as the FastAPI app, whose
    attributes it passes through). Upstream clients open in the lifespan (inside the loop)."""
    state = Gateway(cfg)
    add_secrets(redaction.config_secrets(cfg))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.pid = os.getpid()
        await state.start()  # upstream clients, runtime, warm-up (RuntimeError: start-up fails)
        # the start-up heap (config, policies, verifier modules: most of the process's objects)
        # lives until exit: keep it out of the cyclic GC's scans from now on (gc.freeze docs)
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            await state.sweeper.close()
            await state.aclose()
            metrics.mark_process_dead()

    app = FastAPI(title="Veracity", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.gw = state
    for path, endpoint, methods in ROUTES:
        app.router.add_route(path, endpoint, methods=methods)
    app.add_exception_handler(StarletteHTTPException, fallback.http_exception)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, fallback.unhandled)
    # CORS (a `cors:` section) wraps everything, fast path included; no section: no wrapper
    return cors.wrap(FastPath(app, state), cfg.cors)  # type: ignore[no-any-return]


def app_from_env() -> FastAPI:
    """uvicorn factory (``proxy.app:app_from_env``): the config named by ``VERACITY_CONFIG``
    (see :func:`proxy.config.resolve_config`); in demo mode the scripted upstream's URL comes
    from ``VERACITY_DEMO_UPSTREAM_URL`` (set by :func:`proxy.cli.serve.serve`)."""
    from proxy.observability.log import configure

    cfg = resolve_config(None)  # VERACITY_CONFIG, set by proxy.cli.serve.serve
    # `veracity serve --log-level X` (X other than the default info) wins over logging.level
    configure(os.environ.get("VERACITY_LOG_LEVEL") or cfg.logging.level)
    if cfg.mode == "demo":
        url = os.environ.get("VERACITY_DEMO_UPSTREAM_URL")
        if not url:
            raise RuntimeError("demo mode needs VERACITY_DEMO_UPSTREAM_URL (start with `veracity serve`)")
        cfg.upstreams = [UpstreamConfig(name="demo", models=["*"], base_url=url)]
    return create_app(cfg)
