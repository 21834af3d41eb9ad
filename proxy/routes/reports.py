"""``GET /v1/veracity/reports/{request_id}``: a chat completion's stored verification report.

What a client fetches from ``x-veracity-report-url`` (the store and its rules:
:mod:`proxy.stores.reports`): 200 with the final report, 202 (``Retry-After: 1``) while it is
not final yet (a stream or ``observe`` still verifying), 404 ``report_not_found`` (unknown,
expired, or another key's: the two are not told apart), 401 without a valid key, 503
``report_store_unavailable``. The key that made the request may read it, and so may an admin
key (several keys used the id: all records as a list, or one with ``?owner=<owner hash>``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from proxy._asgi.request_ids import RID_RE
from proxy.routes._access import credential
from proxy.routes._respond import JSON, error_response, log, record
from proxy.stores import reports as report_store
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["REPORT_ROUTE", "get_report"]

REPORT_ROUTE = report_store.REPORT_ROUTE


async def get_report(request: Request) -> Response:
    """``GET /v1/veracity/reports/{request_id}``: the stored report of a chat completion (see
    :mod:`proxy.stores.reports`): 200 final, 202 (``Retry-After: 1``) not final yet, 404
    ``report_not_found`` (unknown, expired, or another key's), 401 without a valid key, 503
    ``report_store_unavailable``. The key that made the request, or an admin key: when several
    keys used the id, an admin gets them all as a list, or one with ``?owner=<owner hash>``."""
    state: Gateway = request.app.state.gw
    rec = record(request, REPORT_ROUTE)
    request_id = request.path_params["request_id"]
    try:
        principal = rec.principal = state.auth.authenticate(credential(request.headers))
        try:
            owner = request.query_params.get("owner")   # an admin picks one of several records
            hit = (await report_store.lookup(state.reports, state.cfg.keys, principal, request_id, owner)
                   if RID_RE.match(request_id) else None)
        except Exception as exc:  # noqa: BLE001 - Redis unreachable and the record not in this process
            log.error("report_store_error", request_id=rec.rid, error=type(exc).__name__, message=str(exc)[:300])
            raise GatewayError(503, "The report store is unavailable; see the gateway's logs.", type="server_error",
                               code="report_store_unavailable") from None
        if hit is None:
            raise GatewayError(404, f"No report with request id {request_id[:128]!r} for this key (reports are "
                               "kept for reports.ttl_s seconds).", code="report_not_found")
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return error_response(exc, rec.rid)
    body, pending = hit
    headers = {"x-request-id": rec.rid}
    if pending:
        headers["retry-after"] = "1"
    return Response(body, 202 if pending else 200, headers=headers, media_type=JSON)
