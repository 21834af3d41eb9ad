"""``GET /v1/models``: the models this gateway serves the caller, as OpenAI lists them.

The union of the upstreams' own lists (fetched concurrently with the caller's upstream
credential), each entry kept as the upstream sent it, restricted to the models the gateway
routes to that upstream and the key's ``models`` allow-list; litellm upstreams contribute
their literal (non-glob) model patterns. One upstream failing only drops its models; when
none answers and the list is empty, the first upstream error is the answer.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from proxy.observability import metrics
from proxy.routes._access import credential, glob
from proxy.routes._respond import JSON, error_response, log, record, upstream_error_response
from proxy.upstreams import is_http_upstream
from proxy.wire.json import dumps
from proxy.wire.errors import GatewayError, UpstreamError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["MODELS_ROUTE", "list_models"]

MODELS_ROUTE = "/v1/models"


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the union of the upstreams' model lists, each entry kept as the
    upstream sent it, restricted to models this gateway routes to that upstream; litellm
    upstreams contribute their literal (non-glob) model patterns."""
    state: Gateway = request.app.state.gw
    rec = record(request, MODELS_ROUTE)
    rid = rec.rid
    try:
        principal = rec.principal = state.auth.authenticate(credential(request.headers))
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return error_response(exc, rid)
    assert state.upstreams is not None
    ups = state.upstreams
    http_ups = [u for u in ups.all if is_http_upstream(u)]
    results = await asyncio.gather(*(u.list_models(auth=principal.upstream_auth) for u in http_ups),
                                   return_exceptions=True)
    data: list[dict[str, Any]] = []
    seen: set[str] = set()
    first_error: UpstreamError | None = None
    for u, res in zip(http_ups, results):
        if isinstance(res, BaseException):
            if isinstance(res, UpstreamError):
                first_error = first_error or res
                metrics.upstream_error(res.reason, "_none", principal.team, res.status)  # a route without a model
            log.warning("model list failed", request_id=rid, upstream=u.name, error=type(res).__name__)
            continue
        for m in res:
            mid = m.get("id")
            if isinstance(mid, str) and mid not in seen and ups.route(mid) is u:
                seen.add(mid)
                data.append(m)
    for u in ups.all:
        if is_http_upstream(u):
            continue
        for p in u.config.models:
            if not any(c in p for c in "*?[") and p not in seen and ups.route(p) is u:
                seen.add(p)
                data.append({"id": p, "object": "model", "created": 0, "owned_by": u.name})
    if principal.models is not None:
        data = [m for m in data if any(glob(m["id"], p) for p in principal.models)]
    if not data and first_error is not None:
        rec.fields["error_code"] = first_error.code
        return upstream_error_response(first_error, rid, rec.timing)
    return Response(dumps({"object": "list", "data": data}), 200, headers={"x-request-id": rid}, media_type=JSON)
