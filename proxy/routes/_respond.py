"""What every answer of the gateway shares: the reply object, error mapping, headers, the log line.

One home for the client-visible shape of an answer, used by every route and by both chat
lanes (the normal path, :mod:`proxy.routes.chat`, and the lean lane,
:class:`proxy._asgi.fastpath.LeanLane`), so the lanes cannot drift apart:

* :class:`Reply`: a complete JSON answer as its ASGI header list and body, sent as two ASGI
  messages or turned into a Starlette ``Response`` with the same header list.
* :func:`answer_headers`: the header list of a chat answer (relayed upstream headers, then
  ``x-request-id``, ``x-veracity-status``, ``x-veracity-overhead-ms``, the report headers,
  length and type).
* :func:`failure_reply`: an exception -> the OpenAI-shaped error answer (:mod:`proxy.wire.errors`):
  a :class:`GatewayError` as itself, an :class:`UpstreamError` with the upstream's status and
  body (counted in ``veracity_upstream_errors_total`` with the request's model and team),
  anything else a 500 ``internal_error`` naming the request id, never a stack trace.
* :func:`finish`: ``veracity_requests_total`` and the request's single log line
  (:class:`RequestRecord` carries what a non-chat route's line says).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from proxy.auth import Principal
from proxy.observability import metrics
from proxy.observability.log import get_logger, info_enabled
from proxy.stores import reports
from proxy.upstreams import Timing
from proxy.wire.json import dumps
from proxy.wire.errors import GatewayError, UpstreamError
from proxy._asgi.request_ids import request_id

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["JSON", "RECORD_KEY", "UNMATCHED_ROUTE", "Reply", "answer_headers", "end_stream", "error_reply", "error_response",
           "upstream_error_reply", "upstream_error_response", "failure_reply", "RequestRecord", "record", "finish",
           "log"]

log = get_logger("veracity")

JSON = "application/json"
#: the ASGI scope key of a request's :class:`RequestRecord`
RECORD_KEY = "veracity.request"
#: the ``route`` label of a request no route serves (404 ``unknown_url``, 405)
UNMATCHED_ROUTE = "_unmatched"

RawHeaders = list[tuple[bytes, bytes]]


def _raw_headers(headers: Mapping[str, str], body: bytes) -> RawHeaders:
    """The ASGI header list a Starlette ``Response(body, headers=headers, media_type=JSON)``
    builds: the given headers lower-cased, then ``content-length`` and ``content-type``
    unless given."""
    raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    if "content-length" not in headers:
        raw.append((b"content-length", str(len(body)).encode()))
    if "content-type" not in headers:
        raw.append((b"content-type", b"application/json"))
    return raw


class Reply:
    """A complete (non-stream) JSON answer: ``status``, ``raw`` (the ASGI header list, length
    and type included) and ``body``; sent as two ASGI messages on the fast path
    (:meth:`send`), or as a Starlette ``Response`` with the same headers elsewhere (:meth:`response`)."""

    __slots__ = ("status", "raw", "body")

    def __init__(self, body: bytes, status: int, raw: RawHeaders) -> None:
        self.body, self.status, self.raw = body, status, raw

    def response(self) -> Response:
        """A Starlette ``Response`` sending exactly :attr:`raw`."""
        out = Response(self.body, self.status, media_type=JSON)
        out.raw_headers = self.raw
        return out

    async def send(self, send: Any) -> None:
        """Send as ``http.response.start`` + ``http.response.body``."""
        await send({"type": "http.response.start", "status": self.status, "headers": self.raw})
        await send({"type": "http.response.body", "body": self.body})


def answer_headers(relayed: Mapping[str, str], rid: str, vstatus: str, overhead_ms: str,
                   report_headers: Sequence[tuple[bytes, bytes]], body: bytes) -> RawHeaders:
    """The ASGI header list of a chat completion answer: ``relayed`` (the upstream's relayable
    headers and the verdict headers, lower-case names), ``x-request-id``, ``x-veracity-status``
    (``vstatus``), ``x-veracity-overhead-ms`` (``overhead_ms``, milliseconds with 3 decimals),
    ``report_headers`` (:func:`proxy.stores.reports.report_header_pairs`), then ``content-length``
    of ``body`` and ``content-type: application/json``. Built once as a list (the fast path
    sends it as is)."""
    raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in relayed.items()]
    raw += ((b"x-request-id", rid.encode("latin-1")), (b"x-veracity-status", vstatus.encode("latin-1")),
            (b"x-veracity-overhead-ms", overhead_ms.encode()),
            *report_headers,
            (b"content-length", str(len(body)).encode()), (b"content-type", b"application/json"))
    return raw


def error_reply(exc: GatewayError, rid: str, timing: Timing | None = None) -> Reply:
    """The gateway's own error ``exc`` (its status, ``exc.headers``, OpenAI's error body), with
    ``x-request-id`` and, given ``timing``, ``x-veracity-overhead-ms``."""
    headers = {"x-request-id": rid, **exc.headers}
    if timing is not None:
        headers["x-veracity-overhead-ms"] = f"{timing.overhead() * 1000:.3f}"
    body = dumps(exc.body())
    return Reply(body, exc.status, _raw_headers(headers, body))


def error_response(exc: GatewayError, rid: str, timing: Timing | None = None) -> Response:
    """:func:`error_reply` as a Starlette ``Response``."""
    return error_reply(exc, rid, timing).response()


def upstream_error_reply(exc: UpstreamError, rid: str, timing: Timing) -> Reply:
    """An upstream's failure ``exc``: its status, relayed headers and (scrubbed) error body, with
    ``x-request-id`` and ``x-veracity-overhead-ms``."""
    headers = {**exc.headers, "x-request-id": rid, "x-veracity-overhead-ms": f"{timing.overhead() * 1000:.3f}"}
    body = exc.response_body()
    return Reply(body, exc.status, _raw_headers(headers, body))


def upstream_error_response(exc: UpstreamError, rid: str, timing: Timing) -> Response:
    """:func:`upstream_error_reply` as a Starlette ``Response``."""
    return upstream_error_reply(exc, rid, timing).response()


def failure_reply(exc: Exception, rid: str, timing: Timing, fields: dict[str, Any], *, model: str = "_unknown",
                  team: str = metrics.NO_TEAM) -> Reply:
    """The answer to a chat request that failed with ``exc`` (any ``Exception``; a
    ``CancelledError`` is the caller's: the client left, nobody to answer), noting
    ``error_code`` (and ``exception`` for an unexpected one) in the log line's ``fields``:
    :func:`error_reply` for a :class:`GatewayError`; :func:`upstream_error_reply` for an
    :class:`UpstreamError`, counted by reason, ``model`` (the routed model name, the metrics'
    ``_unknown`` before routing) and ``team`` (the caller's,
    :data:`proxy.observability.metrics.NO_TEAM` before authentication) in
    ``veracity_upstream_errors_total``; else a 500 ``internal_error`` (logged with the
    exception's type and message, the client gets neither)."""
    if isinstance(exc, GatewayError):
        fields["error_code"] = exc.code
        return error_reply(exc, rid, timing)
    if isinstance(exc, UpstreamError):
        fields["error_code"] = exc.code
        metrics.upstream_error(exc.reason, model, team, exc.status)
        return upstream_error_reply(exc, rid, timing)
    fields["error_code"] = "internal_error"
    fields["exception"] = type(exc).__name__
    log.error("unhandled error", request_id=rid, exception=type(exc).__name__, message=str(exc)[:500])
    return error_reply(GatewayError(500, "The gateway hit an internal error; see its logs "
                                    f"(request id {rid}).", type="server_error", code="internal_error"), rid, timing)


class RequestRecord:
    """What the request log line and ``veracity_requests_total`` say about a request served
    by the FastAPI app (every route but chat completions, which log themselves): created by
    :class:`proxy._asgi.fastpath.FastPath` per request (in the ASGI scope), filled in by the
    route's handler, written by :func:`finish` once the response is sent. ``route`` is a
    bounded label (a route template, :data:`proxy.routes.passthrough.PASSTHROUGH_ROUTE`, or
    :data:`UNMATCHED_ROUTE`)."""

    __slots__ = ("rid", "timing", "route", "model", "model_label", "principal", "upstream", "fields",
                 "veracity_status", "stream")

    def __init__(self, rid: str) -> None:
        self.rid = rid
        self.timing = Timing()
        self.route = UNMATCHED_ROUTE
        self.model = "_none"
        self.model_label: str | None = None
        self.principal: Principal | None = None
        self.upstream: str | None = None
        self.fields: dict[str, Any] = {}
        self.veracity_status: str | None = None
        #: the response is a stream (the log line's ``stream``)
        self.stream = False


def record(request: Request, route: str | None) -> RequestRecord:
    """The request's :class:`RequestRecord` with ``route`` set (None: left as is); a detached
    one (never logged) when the app runs without :class:`proxy._asgi.fastpath.FastPath`."""
    rec = request.scope.get(RECORD_KEY)
    if rec is None:
        rec = request.scope[RECORD_KEY] = RequestRecord(request_id(request.headers))
    if route is not None:
        rec.route = route
    return rec


def finish(state: Gateway, *, route: str, model: str, status: int, timing: Timing, rid: str,
           principal: Principal | None, upstream: str | None, stream: bool, veracity_status: str | None,
           fields: dict[str, Any], model_label: str | None = None) -> None:
    """Metrics + the request's single log line. ``route``: a bounded route label (a route
    template, never a raw path); ``model_label``: the metrics' ``model`` value when it must
    differ from the logged ``model`` (pass-through: ``_passthrough``); ``fields``: extra
    fields of the line (an ``overhead_s`` entry, seconds, replaces the measured overhead and
    is removed). The metrics' ``team`` is ``principal.team`` (:data:`proxy.observability.metrics.NO_TEAM`
    without a principal)."""
    duration = timing.elapsed()
    overhead = max(0.0, duration - timing.upstream_s) if "overhead_s" not in fields else fields.pop("overhead_s")
    metrics.observe_request(route, model_label or model, status, duration, overhead, upstream, timing.upstream_s,
                            principal.team if principal is not None else metrics.NO_TEAM)
    metrics.request_finished()
    if not info_enabled():  # the request line is an info line: skip building it
        return
    log.info("request", request_id=rid, pid=state.pid, route=route, model=model, upstream=upstream, status=status,
             stream=stream, team=principal.team if principal else None,
             key=principal.key_name if principal else None,
             duration_ms=round(duration * 1000, 3), upstream_ms=round(timing.upstream_s * 1000, 3),
             overhead_ms=round(overhead * 1000, 3), upstream_calls=timing.upstream_calls,
             veracity_status=veracity_status, **fields)


async def end_stream(state: Gateway, events: Any, status: str, principal: Principal | None, rid: str, model: str,
                     timing: Timing) -> None:
    """The end of a verified stream's relay (chat and Responses): close the pipeline's stream
    ``events`` (its failure ignored: the client left or the stream failed already) and, when the
    report's ``status`` is still ``pending`` (the stream ended before its verification did), store
    an ``error`` report for ``GET /v1/veracity/reports/{id}`` in its place."""
    try:
        await events.aclose()
    except Exception:  # noqa: BLE001
        pass
    if status == "pending":
        reports.publish_soon(state.reports, principal, rid, model, int(time.time() - timing.elapsed()),
                             {"status": "error", "reason": "the stream ended before its verification "
                              "finished (the client disconnected or the stream failed)"})
