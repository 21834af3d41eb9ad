"""``POST /v1/veracity/verify``: check an answer the caller already has, with no upstream call.

The body is ``{messages, answer}`` (see :func:`proxy.pipeline.sequence.verify_request`); the
caller's policy decides which checks run, exactly as for a chat completion, and the answer is
the report with the same verdict headers (``x-veracity-status``, ``x-veracity-risk``,
``x-veracity-coverage``). Metrics label the model ``_offline``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from proxy._asgi.body import parse_json_object, receive_body
from proxy.pipeline import sequence as pipeline
from proxy.routes._access import credential
from proxy.routes._respond import JSON, error_response, record
from proxy.wire.json import dumps
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["VERIFY_ROUTE", "veracity_verify"]

VERIFY_ROUTE = "/v1/veracity/verify"


async def veracity_verify(request: Request) -> Response:
    """``POST /v1/veracity/verify``: check ``{messages, answer}`` with the caller's policy and
    no upstream call (see :func:`proxy.pipeline.sequence.verify_request`)."""
    state: Gateway = request.app.state.gw
    rec = record(request, VERIFY_ROUTE)
    rec.model = "_offline"  # as pipeline.verify_request labels its metrics
    rid = rec.rid
    try:
        principal = rec.principal = state.auth.authenticate(credential(request.headers))
        body = parse_json_object(await receive_body(request.receive, request.headers, state.max_body),
                                 request.headers.get("content-encoding"))
        out = await pipeline.verify_request(state, principal, request.headers, body, rid)
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return error_response(exc, rid)
    rep = out["veracity"]
    rec.veracity_status = rep["status"]
    headers = {"x-request-id": rid, "x-veracity-status": rep["status"]}
    if isinstance(rep.get("risk"), dict):  # the same verdict headers as on chat completions
        headers["x-veracity-risk"] = f"{rep['risk'].get('score', 0.0):.3f}"
    if isinstance(rep.get("coverage"), dict):
        headers["x-veracity-coverage"] = f"{rep['coverage']['decided']}/{rep['coverage']['units']}"
    return Response(dumps(out), 200, media_type=JSON, headers=headers)
