"""``POST /v1/chat/completions``, the normal path: HTTP <-> :mod:`proxy.pipeline.sequence`.

Each request: request id -> auth -> read body (size limit) -> parse -> route the model ->
pipeline (:func:`proxy.pipeline.sequence.chat_completion` or, with ``stream: true``,
:func:`~proxy.pipeline.sequence.chat_completion_stream`) -> the answer with ``x-request-id``,
``x-veracity-status``, ``x-veracity-overhead-ms`` and the report headers; then metrics and one
log line (:func:`proxy.routes._respond.finish`). Every failure is an OpenAI-shaped error
(:func:`proxy.routes._respond.failure_reply`). The gateway forwards a body it does not own, so
there is no body model: a dict in, a dict out.

Three ways in, one handler (:func:`_chat`): :func:`chat_asgi` (what
:class:`proxy._asgi.fastpath.FastPath` calls, with the client's disconnect watched), the
Starlette endpoint :func:`chat_completions` (the route table's entry, used when the app runs
without ``FastPath``), and the lean lane (:class:`proxy._asgi.fastpath.LeanLane`), which answers a checks-off
request itself with the same shared helpers and hands every other one to :func:`chat_asgi`.
The policy is resolved once, by the pipeline's plan step.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from proxy._asgi.body import parse_json_object, receive_body, scope_headers
from proxy._asgi.disconnect import DisconnectWatch
from proxy._asgi.request_ids import request_id
from proxy.auth import Principal
from proxy.observability import metrics
from proxy.pipeline import sequence as pipeline
from proxy.routes._access import credential, route_model
from proxy.routes._respond import Reply, answer_headers, end_stream, failure_reply, finish
from proxy.stores import reports
from proxy.upstreams import BoundUpstream, Timing, tenant_headers
from proxy.wire.json import dumps
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["CHAT_ROUTE", "chat_completions", "handle_chat_completions", "chat_asgi", "check_stream_flag"]

CHAT_ROUTE = "/v1/chat/completions"


def check_stream_flag(value: Any) -> None:
    """``stream`` must be a boolean or absent/null: a truthy string or number would make the
    upstream stream while the gateway expects JSON (a 502 for a client mistake). Error text
    and code as the OpenAI API's for a wrong type (GatewayError 400 ``invalid_type``)."""
    if value is not None and not isinstance(value, bool):
        kind = {str: "a string", int: "an integer", float: "a decimal", list: "an array", dict: "an object"}.get(
            type(value), "another type")
        raise GatewayError(400, f"Invalid type for 'stream': expected a boolean, but got {kind} instead.",
                           code="invalid_type", param="stream")


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions`` as a Starlette endpoint (the fast path is used first)."""
    return await handle_chat_completions(request.app.state.gw, request)


async def handle_chat_completions(state: Gateway, request: Request) -> Response:
    """``POST /v1/chat/completions`` from a Starlette ``Request``: see :func:`_chat`."""
    out = await _chat(state, request.headers, lambda limit: receive_body(request.receive, request.headers, limit))
    return out.response() if isinstance(out, Reply) else out


async def chat_asgi(state: Gateway, scope: dict[str, Any], receive: Any, send: Any, raw: bytes | None,
                    deployment: str | None = None) -> None:
    """``POST /v1/chat/completions`` on the normal path (:func:`_chat`) as ASGI, watched for
    the client's disconnect (:class:`proxy._asgi.disconnect.DisconnectWatch`). ``raw``: the body
    when the lean lane already read it (its size already checked against the limit), else None;
    ``deployment``: see :func:`_chat`."""
    watch = DisconnectWatch(receive, scope_headers(scope), state.sweeper)
    if raw is None:
        read = watch.read_body
    else:
        async def read(limit: int) -> bytes:
            watch.arm()
            return raw
    with watch:
        out = await _chat(state, watch.headers, read, deployment)
        watch.stop()  # from here on the response (StreamingResponse) watches receive()
        if isinstance(out, Reply):
            await out.send(send)
        else:
            await out(scope, receive, send)


async def _chat(state: Gateway, headers: Any, read_body: Any, deployment: str | None = None) -> Reply | Response:
    """``POST /v1/chat/completions``: see the module doc and :mod:`proxy.wire.errors`. ``headers``:
    the request headers (lower-case names); ``read_body(limit)``: awaitable body reader;
    ``deployment``: the Azure-shaped path's deployment (:mod:`proxy.wire.azure`), which replaces
    the body's ``model``. Returns a :class:`~proxy.routes._respond.Reply` (JSON answers and
    errors) or a ``StreamingResponse``."""
    timing = Timing()
    rid = request_id(headers)
    metrics.request_started()
    model_label = "_unknown"
    status = 500
    principal: Principal | None = None
    upstream_name: str | None = None
    streaming = False
    fields: dict[str, Any] = {}
    vstatus: str | None = None
    try:
        principal = state.auth.authenticate(credential(headers))
        body = parse_json_object(await read_body(state.max_body), headers.get("content-encoding"))
        if deployment is not None:  # Azure: the deployment is the model
            body["model"] = deployment
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise GatewayError(400, "you must provide a model parameter", code="missing_model", param="model")
        check_stream_flag(body.get("stream"))
        up = route_model(state, principal, model)
        model_label, upstream_name = model, up.name
        ctx = pipeline.RequestContext(
            request_id=rid, model=model,
            upstream=BoundUpstream(up, principal.upstream_auth, timing, tenant=tenant_headers(headers)),
            principal=principal, headers=headers, timing=timing,
            gateway=state, log=fields, route=state.upstreams.route)
        if state.log_content:
            fields["messages"] = body.get("messages")
        if body.get("stream") is True:
            result = await pipeline.chat_completion_stream(ctx, body)
            status, streaming, vstatus = 200, True, result.report.status
            sheaders = {**result.headers, "x-request-id": rid, "x-veracity-status": result.report.status,
                        "x-veracity-overhead-ms": f"{timing.overhead() * 1000:.3f}",
                        **reports.report_headers(rid, result.report, state.reports_on),
                        "cache-control": "no-cache", "x-accel-buffering": "no"}
            events = _finish_stream(state, result.events, timing=timing, rid=rid, principal=principal,
                                    model=model_label, upstream=upstream_name, report=result.report,
                                    fields=fields)
            return StreamingResponse(events, status_code=200, headers=sheaders, media_type="text/event-stream")
        result = await pipeline.chat_completion(ctx, body)
        status, vstatus = result.status_code, result.report.status
        if status >= 400:  # a policy block (422): the log line names the error like any other
            err = result.response.get("error")
            fields["error_code"] = err.get("code") if isinstance(err, dict) else None
        if state.log_content:
            fields["choices"] = result.response.get("choices")
        payload = dumps(result.response)
        return Reply(payload, status, answer_headers(
            result.headers, rid, result.report.status, f"{timing.overhead() * 1000:.3f}",
            reports.report_header_pairs(rid, reports.summary_header(result.report).encode("latin-1"), state.reports_on),
            payload))
    except asyncio.CancelledError:  # the client went away (see DisconnectWatch)
        status = 499
        fields["client_disconnected"] = True
        raise
    except Exception as exc:  # noqa: BLE001 - every failure an OpenAI-shaped error, never a stack trace
        reply = failure_reply(exc, rid, timing, fields, model=model_label,
                              team=principal.team if principal is not None else metrics.NO_TEAM)
        status = reply.status
        return reply
    finally:
        if not streaming:
            finish(state, route=CHAT_ROUTE, model=model_label, status=status, timing=timing, rid=rid,
                   principal=principal, upstream=upstream_name, stream=False, veracity_status=vstatus,
                   fields=fields)


async def _finish_stream(state: Gateway, events: AsyncIterator[bytes], *, timing: Timing, rid: str,
                         principal: Principal, model: str, upstream: str | None, report: Any,
                         fields: dict[str, Any]) -> AsyncIterator[bytes]:
    """Relay ``events``; when the stream ends or the client goes away, close the upstream at
    once and record metrics + the log line. Gateway overhead = time spent outside upstream
    reads and client writes. ``report`` is read at the end (a buffered mode may update it)."""
    overhead = timing.overhead()  # up to the response headers
    perf = time.perf_counter
    try:
        async for chunk in events:
            t0 = perf()
            yield chunk
            t1 = perf()
            # time blocked on the client (back-pressure) is not gateway overhead
            fields["_client_s"] = fields.get("_client_s", 0.0) + (t1 - t0)
    except (asyncio.CancelledError, GeneratorExit):
        fields["client_disconnected"] = True
        raise
    finally:
        await end_stream(state, events, report.status, principal, rid, model, timing)
        client_s = fields.pop("_client_s", 0.0)
        fields["overhead_s"] = max(overhead, timing.elapsed() - timing.upstream_s - client_s)
        finish(state, route=CHAT_ROUTE, model=model, status=200, timing=timing, rid=rid, principal=principal,
               upstream=upstream, stream=True, veracity_status=report.status, fields=fields)
