"""Probes and the metrics scrape: ``GET /healthz``, ``GET /readyz``, ``GET /metrics``.

No authentication, no request log line and no ``veracity_requests_total`` count
(:data:`UNLOGGED_PATHS`): an orchestrator or Prometheus calls them every few seconds, which is
noise in the log, not API traffic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from proxy.observability import metrics
from proxy.observability import verification_metrics as vmetrics
from proxy.routes._respond import JSON
from proxy.wire.json import dumps

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["UNLOGGED_PATHS", "healthz", "readyz", "metrics_endpoint"]

#: paths without a request log line or ``veracity_requests_total`` count: probes and scrapes
UNLOGGED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return Response(b'{"status":"ok"}', 200, media_type=JSON)


async def readyz(request: Request) -> Response:
    """Readiness: config loaded and upstream clients started (503 otherwise)."""
    state: Gateway = request.app.state.gw
    if state.upstreams is None:
        return Response(dumps({"status": "starting"}), 503, media_type=JSON)
    return Response(dumps({"status": "ready", "mode": state.cfg.mode, "auth": state.auth.mode,
                           "upstreams": [u.name for u in state.upstreams.all]}), 200, media_type=JSON)


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus text exposition (aggregated over workers in multiprocess mode); the review
    backlog gauge is read from the review store first (:meth:`proxy.gateway.Gateway.review_backlog`)."""
    vmetrics.set_review_backlog(await request.app.state.gw.review_backlog())
    data, ctype = metrics.render()
    return Response(data, 200, media_type=ctype)
