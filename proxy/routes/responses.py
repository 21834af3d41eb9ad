"""``POST /v1/responses``: OpenAI's Responses API, verified by the same pipeline as chat completions.

The request is read like a chat completion (auth, request id, body size limit, JSON, model
routing, OpenAI-shaped errors), translated to a chat request (:func:`proxy.wire.responses.to_chat`)
and run through :func:`proxy.pipeline.sequence.chat_completion` /
:func:`~proxy.pipeline.sequence.chat_completion_stream` -- the same policy, risk, verifiers,
planner, facts, correction, sentinel, budgets, review queue, metrics, audit record and report
store -- with ``ctx.upstream`` a :class:`proxy.upstreams.responses.ResponsesUpstream` (native
or translated, per upstream). The verified answer goes back as a response object
(:func:`proxy.wire.responses.response_from_completion`) with the report as its top-level
``veracity`` field and the chat route's headers (``x-request-id`` the gateway's id, the
upstream's as ``x-upstream-request-id``, ``x-veracity-status``, ``x-veracity-overhead-ms``,
``x-veracity-report-url``); a stream is the Responses event sequence
(:class:`proxy.wire.responses_stream.ChatToEvents`) with the report on the ``response`` of
``response.completed``. A policy block is the chat route's 422 error body. See docs/responses.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from proxy._asgi.body import parse_json_object, receive_body
from proxy.pipeline import sequence as pipeline
from proxy.routes._access import credential, route_model
from proxy.routes._respond import JSON, end_stream, failure_reply, record
from proxy.routes.chat import check_stream_flag
from proxy.stores import reports
from proxy.upstreams.openai import tenant_headers
from proxy.upstreams.protocol import BoundUpstream
from proxy.upstreams.responses import ResponsesUpstream, mode_of
from proxy.wire import azure
from proxy.wire.errors import GatewayError
from proxy.wire.json import dumps
from proxy.wire.responses import RESPONSES_ROUTE, RequestError, new_id, response_from_completion, to_chat, validate
from proxy.wire.responses_stream import ChatToEvents

__all__ = ["RESPONSES_ROUTE", "create_response"]


async def create_response(request: Request) -> Response:
    """``POST /v1/responses`` (stream and not): see the module doc. Every failure is an
    OpenAI-shaped error: 400 for a body that is not a Responses request (``param`` named),
    401/404 as on chat, the upstream's own error or 502/504."""
    state = request.app.state.gw
    rec = record(request, RESPONSES_ROUTE)
    timing, rid = rec.timing, rec.rid
    headers = request.headers
    try:
        principal = rec.principal = state.auth.authenticate(credential(headers))
        raw = await receive_body(request.receive, headers, state.max_body)
        body = parse_json_object(raw, headers.get("content-encoding"))
        deployment = request.scope.get(azure.SCOPE_KEY)
        if deployment is not None:
            body["model"] = deployment
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise GatewayError(400, "you must provide a model parameter", code="missing_model", param="model")
        check_stream_flag(body.get("stream"))
        try:
            validate(body)
        except RequestError as exc:
            raise GatewayError(400, str(exc), code=exc.code, param=exc.param) from None
        up = route_model(state, principal, model)
        rec.model, rec.upstream = model[:200], up.name
        mode = mode_of(up)
        rec.fields["responses_mode"] = mode
        if mode == "translated":
            for name in ("previous_response_id", "conversation"):
                if body.get(name) is not None:  # the state lives on a Responses server; chat has none
                    raise GatewayError(400, f"'{name}' needs an upstream that serves the Responses API: the model "
                                       f"`{model}` is served through chat completions (upstreams[].responses: "
                                       "translated), where no stored response exists. Send the whole "
                                       "conversation as input items instead.", code="unsupported_parameter",
                                       param=name)
        tr = to_chat(body)
        bound = BoundUpstream(up, principal.upstream_auth, timing, tenant=tenant_headers(headers))
        adapter = ResponsesUpstream(bound, body, tr, native=mode == "native", client_headers=headers)
        ctx = pipeline.RequestContext(request_id=rid, model=model, upstream=adapter,  # type: ignore[arg-type]
                                      principal=principal, headers=headers, timing=timing,
                                      gateway=state, log=rec.fields, route=state.upstreams.route)
        if state.log_content:
            rec.fields["input"] = body.get("input")
        if body.get("stream") is True:
            return await _stream(state, rec, ctx, adapter, body, tr.chat)
        result = await pipeline.chat_completion(ctx, tr.chat)
        rec.veracity_status = result.report.status
        out_headers = {**result.headers, "x-request-id": rid, "x-veracity-status": result.report.status,
                       "x-veracity-overhead-ms": f"{timing.overhead() * 1000:.3f}",
                       **reports.report_headers(rid, result.report, state.reports_on)}
        if result.status_code >= 400:  # a policy block: the chat route's 422 body
            err = result.response.get("error")
            rec.fields["error_code"] = err.get("code") if isinstance(err, dict) else None
            return Response(dumps(result.response), result.status_code, headers=out_headers, media_type=JSON)
        completion = result.response
        base = adapter.responses.get(str(completion.get("id"))) if adapter.native else None
        obj = response_from_completion(completion, body, base=base)
        obj["veracity"] = completion.get("veracity")
        if state.log_content:
            rec.fields["output"] = obj.get("output")
        return Response(dumps(obj), 200, headers=out_headers, media_type=JSON)
    except Exception as exc:  # noqa: BLE001 - every failure an OpenAI-shaped error, as on chat
        return failure_reply(exc, rid, timing, rec.fields).response()


async def _stream(state: Any, rec: Any, ctx: pipeline.RequestContext, adapter: ResponsesUpstream,
                  body: dict[str, Any], chat: dict[str, Any]) -> Response:
    """The stream of a Responses request: the pipeline's chat stream (every stream mode of the
    policy) re-framed as Responses events as it goes."""
    rid, timing = rec.rid, rec.timing
    result = await pipeline.chat_completion_stream(ctx, chat)
    first = adapter.first if adapter.native else None
    response_id = first.get("id") if first and isinstance(first.get("id"), str) else new_id("resp")
    # response.created's settings: the upstream's (native), the client's own tools and tool_choice
    shell = response_from_completion({"choices": [{"message": {}}], "model": ctx.model}, body, base=first,
                                     response_id=response_id)

    def finalize(completion: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
        base = adapter.responses.get(str(completion.get("id"))) if adapter.native else None
        # one id from response.created to response.completed (SDK stream helpers check it),
        # even when a correction round's response holds the answer
        return response_from_completion(completion, body, base=base, item_ids=ids, response_id=response_id)

    def item_id(kind: str, key: str, chat_id: str) -> str | None:
        base = adapter.responses.get(chat_id) if adapter.native else None
        for item in (base or {}).get("output") or ():
            if not isinstance(item, dict):
                continue
            if kind == "message" and item.get("type") == "message":
                return item.get("id")
            if kind == "call" and item.get("type") == "function_call" and item.get("call_id") == key:
                return item.get("id")
        return None

    def base_items(chat_id: str) -> list[Any]:
        base = adapter.responses.get(chat_id) if adapter.native else None
        return list((base or {}).get("output") or ())

    writer = ChatToEvents(shell, finalize, item_id, base_items if adapter.native else None)
    sheaders = {**result.headers, "x-request-id": rid, "x-veracity-status": result.report.status,
                "x-veracity-overhead-ms": f"{timing.overhead() * 1000:.3f}",
                **reports.report_headers(rid, result.report, state.reports_on),
                "cache-control": "no-cache", "x-accel-buffering": "no"}
    rec.stream = True
    return StreamingResponse(_events(state, rec, ctx, result, writer), status_code=200, headers=sheaders,
                             media_type="text/event-stream")


async def _events(state: Any, rec: Any, ctx: pipeline.RequestContext, result: pipeline.StreamResult,
                  writer: ChatToEvents) -> AsyncIterator[bytes]:
    """Relay ``result.events`` as Responses events; at the end (or when the client leaves) close
    the pipeline's stream, publish an error report for a verification that never finished (as
    the chat route does) and leave the log line's figures on ``rec``."""
    timing = rec.timing
    overhead = timing.overhead()
    client_s = 0.0
    perf = time.perf_counter
    events = result.events
    try:
        start = writer.start()
        t0 = perf()
        yield start
        client_s += perf() - t0
        async for blob in events:
            out = writer.feed(blob)
            if out:
                t0 = perf()
                yield out
                client_s += perf() - t0
        tail = writer.end()
        if tail:
            yield tail
    except (asyncio.CancelledError, GeneratorExit):
        rec.fields["client_disconnected"] = True
        raise
    finally:
        report = result.report
        await end_stream(state, events, report.status, ctx.principal, rec.rid, ctx.model, timing)
        rec.veracity_status = report.status
        rec.fields["overhead_s"] = max(overhead, timing.elapsed() - timing.upstream_s - client_s)
