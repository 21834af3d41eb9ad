"""The HTTP surface (FastAPI/Starlette): HTTP <-> :mod:`proxy.pipeline.sequence`, nothing more.

Routes: ``POST /v1/chat/completions`` (stream and not), ``GET /v1/models`` (union of the
upstreams' lists), ``GET /healthz``, ``GET /readyz``, ``GET /metrics``, and every other
``/v1/*`` path passed through to the matching upstream untouched. The Azure OpenAI client's
paths (``/openai/deployments/{deployment}/...``, ``/openai/v1/...``) are served as the ``/v1``
route they map to (:mod:`proxy.wire.azure`, :class:`FastPath`), and so are ``/chat/completions`` and
``/models`` (:data:`BARE_PREFIXES`, for clients whose ``base_url`` lacks ``/v1``). Unknown URLs are
404 ``unknown_url`` naming the routes; a method a path does not serve is 405 with every served
method in ``Allow``. Every request but ``/healthz``, ``/readyz``, ``/metrics`` writes one request
log line and one ``veracity_requests_total`` count (:func:`_finish`, :class:`_RequestRecord`).

The hot path is a plain Starlette endpoint (no FastAPI body validation: the gateway forwards
dicts it does not own). Each request: request id -> auth -> read body (size limit) -> parse ->
route model -> pipeline -> response with ``x-request-id``, ``x-veracity-status``,
``x-veracity-overhead-ms``; then metrics and one log line. Every failure is an OpenAI-shaped
error (:mod:`proxy.wire.errors`); an unexpected exception is a 500 without a stack trace.
"""

from __future__ import annotations

import asyncio
import fnmatch
import gc
import hashlib
import itertools
import os
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import unquote

import aiohttp
from fastapi import FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Match

from proxy.wire import azure

from proxy._asgi import cors

from proxy.observability import metrics

from proxy.pipeline import sequence as pipeline

from proxy import redaction

from proxy.stores import reports

from proxy.stores import review

from proxy.routes import review_page

from proxy.pipeline import sentinel
from proxy.observability import verification_metrics as vmetrics
from proxy.auth import Authenticator, Principal, client_authorization, client_authorization_bytes
from proxy.config import GatewayConfig, UpstreamConfig, resolve_config
from proxy.wire.errors import GatewayError, UpstreamError, error_body
from proxy.observability.log import add_secrets, get_logger, info_enabled, scrub_secrets
from proxy.upstreams.clients import (
    ERROR_BODY_LIMIT,
    BoundUpstream,
    OpenAIUpstream,
    Timing,
    Upstreams,
    deeper_than,
    dumps,
    loads,
    loads_strict,
    tenant_headers,
)

log = get_logger("veracity")

CHAT_ROUTE = "/v1/chat/completions"
MODELS_ROUTE = "/v1/models"
VERIFY_ROUTE = "/v1/veracity/verify"
REVIEWS_ROUTE = "/v1/veracity/reviews"
REVIEW_ROUTE = "/v1/veracity/reviews/{review_id}"
REVIEW_PAGE_ROUTE = "/veracity/review"
REPORT_ROUTE = reports.REPORT_ROUTE
#: the ``route`` label of every pass-through request (never the raw path: bounded cardinality)
PASSTHROUGH_ROUTE = "/v1/*"
#: the ``route`` label of a request no route serves (404 ``unknown_url``, 405)
UNMATCHED_ROUTE = "_unmatched"
#: paths without a request log line or ``veracity_requests_total`` count: probes and scrapes
#: (every few seconds from an orchestrator or Prometheus: noise in the log, not API traffic)
UNLOGGED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
#: OpenAI API paths also served without the ``/v1`` prefix, for clients whose ``base_url`` is the
#: bare host (LiteLLM's proxy serves both forms): chat completions and the model list, with
#: their sub-paths (``/models/{model}``, stored completions). ``POST /chat/completions`` is
#: in ``_CHAT_PATHS``; the rest is served as the ``/v1`` path.
BARE_PREFIXES = ("/chat/completions", "/models")
_RECORD_KEY = "veracity.request"
#: a client's ``x-request-id`` kept as the request id: a token of 1-128 ``A-Za-z0-9._:-`` that is a
#: usable URL path segment (``x-veracity-report-url``): not ``.`` or ``..``, which clients resolve
#: away (RFC 3986 section 5.2.4). ``\Z``, not ``$``: ``$`` also matches before a final newline.
_RID_RE = re.compile(r"(?!\.{1,2}\Z)[A-Za-z0-9._:\-]{1,128}\Z")
_JSON = "application/json"
#: response headers of a pass-through answer that must not be copied (hop-by-hop / re-encoded)
#: upstream response headers a pass-through answer does not relay: framing and hop-by-hop
#: headers (RFC 9110 section 7.6.1; the gateway frames its own answer), the upstream's cookies
#: (scoped to the upstream's domain, meaningless and a leak on the gateway's) and CORS headers
#: (CORS is the gateway's own ``cors:`` section: an upstream's ``*`` or credentials grant must
#: not reach a browser through it)
_DROP_RESPONSE_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection",
                                    "keep-alive", "server", "date", "set-cookie"})
_DROP_RESPONSE_PREFIXES = ("access-control-",)


class GatewayState:
    """Per-process state: config, authenticator, upstreams (opened at start-up)."""

    def __init__(self, cfg: GatewayConfig) -> None:
        self.cfg = cfg
        self.auth = Authenticator(cfg.keys)
        self.max_body = cfg.limits.max_body_bytes
        self.log_content = cfg.logging.log_content
        self.upstreams: Upstreams | None = None
        self.pid = os.getpid()
        self.sweeper = _WatchSweeper()
        #: reports kept for GET /v1/veracity/reports/{id} (``reports.enabled``)
        self.reports_on = cfg.reports.enabled


class _RequestIds:
    """Unique, unguessable request ids without a syscall per request: ``req_`` + 24 hex digits,
    the keyed BLAKE2b (RFC 7693; key: 32 random bytes drawn once per process, again after
    ``fork``) of a per-process counter. Unguessable because a request id is what a report is
    fetched by (``GET /v1/veracity/reports/{id}``): callers sharing one identity (a virtual key
    used by many end users, pass-through callers without a credential) must not reach each
    other's reports by counting from their own id (the former prefix + counter ids allowed it).
    ~0.5 us per id (the counter form: ~0.3 us; ``os.urandom(12)``: ~0.6 us, a syscall)."""

    def __init__(self) -> None:
        self.reset()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self.reset)

    def reset(self) -> None:
        self._mac = hashlib.blake2b(key=os.urandom(32), digest_size=12)
        self.counter = itertools.count(1)

    def next(self) -> str:
        mac = self._mac.copy()
        mac.update(next(self.counter).to_bytes(16, "little"))
        return "req_" + mac.hexdigest()


_request_ids = _RequestIds()


def _request_id(headers: Any) -> str:
    """The client's ``x-request-id`` when it is a safe token, else a new id."""
    rid = headers.get("x-request-id")
    if rid and _RID_RE.match(rid):
        return rid
    return _request_ids.next()


class _RequestRecord:
    """What the request log line and ``veracity_requests_total`` say about a request served
    by the FastAPI app (every route but chat completions, which log themselves): created by
    :class:`FastPath` per request (in the ASGI scope), filled in by the route's handler,
    written by :func:`_finish` once the response is sent. ``route`` is a bounded label
    (a route template, :data:`PASSTHROUGH_ROUTE`, or :data:`UNMATCHED_ROUTE`)."""

    __slots__ = ("rid", "timing", "route", "model", "model_label", "principal", "upstream", "fields",
                 "veracity_status")

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


def _record(request: Request, route: str | None) -> _RequestRecord:
    """The request's :class:`_RequestRecord` with ``route`` set (None: left as is); a detached
    one (never logged) when the app runs without :class:`FastPath`."""
    rec = request.scope.get(_RECORD_KEY)
    if rec is None:
        rec = request.scope[_RECORD_KEY] = _RequestRecord(_request_id(request.headers))
    if route is not None:
        rec.route = route
    return rec


class _Reply:
    """A complete (non-stream) JSON answer: sent as two ASGI messages on the fast path, or
    as a Starlette ``Response`` elsewhere (:meth:`response`)."""

    __slots__ = ("status", "headers", "body")

    def __init__(self, body: bytes, status: int, headers: dict[str, str]) -> None:
        self.body, self.status, self.headers = body, status, headers

    def response(self) -> Response:
        return Response(self.body, self.status, headers=self.headers, media_type=_JSON)

    async def send(self, send: Any) -> None:
        """Send as ``http.response.start`` + ``http.response.body`` (the same header list a
        Starlette ``Response`` would build: given headers lower-cased, then length and type)."""
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]
        if "content-length" not in self.headers:
            raw.append((b"content-length", str(len(self.body)).encode()))
        if "content-type" not in self.headers:
            raw.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": self.status, "headers": raw})
        await send({"type": "http.response.body", "body": self.body})


def _error_reply(exc: GatewayError, rid: str, timing: Timing | None = None) -> _Reply:
    headers = {"x-request-id": rid, **exc.headers}
    if timing is not None:
        headers["x-veracity-overhead-ms"] = f"{timing.overhead() * 1000:.3f}"
    return _Reply(dumps(exc.body()), exc.status, headers)


def _error_response(exc: GatewayError, rid: str, timing: Timing | None = None) -> Response:
    return _error_reply(exc, rid, timing).response()


def _upstream_error_reply(exc: UpstreamError, rid: str, timing: Timing) -> _Reply:
    headers = {**exc.headers, "x-request-id": rid, "x-veracity-overhead-ms": f"{timing.overhead() * 1000:.3f}"}
    return _Reply(exc.response_body(), exc.status, headers)


def _upstream_error_response(exc: UpstreamError, rid: str, timing: Timing) -> Response:
    return _upstream_error_reply(exc, rid, timing).response()


def _content_length(headers: Any, limit: int) -> int | None:
    cl = headers.get("content-length")
    if cl is None:
        return None
    try:
        n = int(cl)
    except ValueError:
        raise GatewayError(400, "Invalid Content-Length header.", code="invalid_request") from None
    if n > limit:
        raise GatewayError(413, f"Request body is {n} bytes; the limit is {limit} bytes.",
                           code="request_too_large")
    return n


async def _receive_body(receive: Any, headers: Any, limit: int) -> bytes:
    """The request body read from ASGI ``receive`` (no Starlette ``Request``), or 413 once it
    exceeds ``limit`` bytes (``Content-Length`` first, then while reading)."""
    _content_length(headers, limit)
    msg = await receive()
    if msg["type"] == "http.request" and not msg.get("more_body", False):
        body = msg.get("body", b"")
        if len(body) > limit:
            raise GatewayError(413, f"Request body exceeds the limit of {limit} bytes.", code="request_too_large")
        return body
    parts: list[bytes] = []
    size = 0
    while True:
        if msg["type"] != "http.request":  # http.disconnect
            raise GatewayError(499, "The client closed the connection before sending the whole body.",
                               code="client_closed_request")
        chunk = msg.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise GatewayError(413, f"Request body exceeds the limit of {limit} bytes.", code="request_too_large")
        parts.append(chunk)
        if not msg.get("more_body", False):
            return b"".join(parts)
        msg = await receive()


def _parse_json_object(raw: bytes, encoding: str | None = None) -> dict[str, Any]:
    """The body as a JSON object, else GatewayError 400 ``invalid_json``; a compressed body
    (``Content-Encoding`` other than ``identity``: ``encoding``) is 415, not a parse error."""
    if encoding and encoding.strip().lower() not in ("identity", ""):
        raise GatewayError(415, f"Content-Encoding {encoding.strip()[:40]!r} is not supported; send the JSON body "
                           "uncompressed.", code="unsupported_content_encoding")
    try:
        body = loads_strict(raw)
    except ValueError:
        raise GatewayError(400, "We could not parse the JSON body of your request. The body must be a "
                           "JSON object.", code="invalid_json") from None
    if not isinstance(body, dict):
        raise GatewayError(400, "The request body must be a JSON object.", code="invalid_json")
    # cheap pre-check (C-speed counts) before walking the tree: only bodies with many brackets
    if raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH and deeper_than(body, MAX_JSON_DEPTH):
        raise GatewayError(400, f"The JSON body is nested more than {MAX_JSON_DEPTH} levels deep.",
                           code="invalid_json")
    return body


#: Deepest JSON nesting accepted in a request body: orjson serialises at most 255 levels, so a
#: deeper body (which orjson still parses, up to 1024) could not be forwarded and broke
#: recursive steps (policy overrides: RecursionError, a 500).
MAX_JSON_DEPTH = 255


def _check_stream_flag(value: Any) -> None:
    """``stream`` must be a boolean or absent/null: a truthy string or number would make the
    upstream stream while the gateway expects JSON (a 502 for a client mistake). Error text
    and code as the OpenAI API's for a wrong type."""
    if value is not None and not isinstance(value, bool):
        kind = {str: "a string", int: "an integer", float: "a decimal", list: "an array", dict: "an object"}.get(
            type(value), "another type")
        raise GatewayError(400, f"Invalid type for 'stream': expected a boolean, but got {kind} instead.",
                           code="invalid_type", param="stream")


def _escapes_api_prefix(path: str) -> bool:
    """True when a request path, percent-decoded (repeatedly: ``%252e``), has a ``.`` or
    ``..`` segment or a backslash. Appended to an upstream's ``base_url`` (``.../v1``) such a
    path resolves outside the upstream's API prefix (RFC 3986 section 5.2.4, as aiohttp/yarl
    apply it), and the gateway would send the upstream's own key there."""
    for _ in range(4):
        if "\\" in path or any(seg in (".", "..") for seg in path.split("/")):
            return True
        decoded = unquote(path)
        if decoded == path:
            return False
        path = decoded
    return True  # still changing after 4 rounds of decoding: refuse


def _route(state: GatewayState, principal: Principal, model: str) -> Any:
    assert state.upstreams is not None
    up = state.upstreams.route(model)
    allowed = principal.models is None or any(_glob(model, p) for p in principal.models)
    if up is None or not allowed:
        raise GatewayError(404, f"The model `{model}` does not exist or you do not have access to it.",
                           code="model_not_found", param="model")
    return up


def _glob(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


def _finish(state: GatewayState, *, route: str, model: str, status: int, timing: Timing, rid: str,
            principal: Principal | None, upstream: str | None, stream: bool, veracity_status: str | None,
            fields: dict[str, Any], model_label: str | None = None) -> None:
    """Metrics + the request's single log line. ``route``: a bounded route label (a route
    template, never a raw path); ``model_label``: the metrics' ``model`` value when it must
    differ from the logged ``model`` (pass-through: ``_passthrough``)."""
    duration = timing.elapsed()
    overhead = max(0.0, duration - timing.upstream_s) if "overhead_s" not in fields else fields.pop("overhead_s")
    metrics.observe_request(route, model_label or model, status, duration, overhead, upstream, timing.upstream_s)
    metrics.request_finished()
    if not info_enabled():  # the request line is an info line: skip building it
        return
    log.info("request", request_id=rid, pid=state.pid, route=route, model=model, upstream=upstream, status=status,
             stream=stream, team=principal.team if principal else None,
             key=principal.key_name if principal else None,
             duration_ms=round(duration * 1000, 3), upstream_ms=round(timing.upstream_s * 1000, 3),
             overhead_ms=round(overhead * 1000, 3), upstream_calls=timing.upstream_calls,
             veracity_status=veracity_status, **fields)


async def chat_completions(request: Request) -> Response:
    """``POST /v1/chat/completions`` as a Starlette endpoint (the fast path below is used first)."""
    return await handle_chat_completions(request.app.state.gw, request)


async def handle_chat_completions(state: GatewayState, request: Request) -> Response:
    """``POST /v1/chat/completions`` from a Starlette ``Request``: see :func:`_chat`."""
    out = await _chat(state, request.headers, lambda limit: _receive_body(request.receive, request.headers, limit))
    return out.response() if isinstance(out, _Reply) else out


def _credential(headers: Any) -> str | None:
    """The client credential of a request (``Authorization``, else an ``api-key`` header):
    see :func:`proxy.auth.client_authorization`."""
    return client_authorization(headers.get("authorization"), headers.get("api-key"))


def _scope_headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request headers as a dict of lower-case names (the first of repeated headers wins,
    as with Starlette's ``Headers.get``)."""
    out: dict[str, str] = {}
    for k, v in scope["headers"]:
        name = k.decode("latin-1").lower()
        if name not in out:
            out[name] = v.decode("latin-1")
    return out


async def _chat(state: GatewayState, headers: Any, read_body: Any, deployment: str | None = None) -> _Reply | Response:
    """``POST /v1/chat/completions``: see the module doc and :mod:`proxy.wire.errors`. ``headers``:
    the request headers (lower-case names); ``read_body(limit)``: awaitable body reader;
    ``deployment``: the Azure-shaped path's deployment (:mod:`proxy.wire.azure`), which replaces
    the body's ``model``. Returns a :class:`_Reply` (JSON answers and errors) or a ``StreamingResponse``."""
    timing = Timing()
    rid = _request_id(headers)
    metrics.request_started()
    model_label = "_unknown"
    status = 500
    principal: Principal | None = None
    upstream_name: str | None = None
    streaming = False
    fields: dict[str, Any] = {}
    vstatus: str | None = None
    try:
        principal = state.auth.authenticate(_credential(headers))
        body = _parse_json_object(await read_body(state.max_body), headers.get("content-encoding"))
        if deployment is not None:  # Azure: the deployment is the model
            body["model"] = deployment
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise GatewayError(400, "you must provide a model parameter", code="missing_model", param="model")
        _check_stream_flag(body.get("stream"))
        up = _route(state, principal, model)
        model_label, upstream_name = model, up.name
        policy = principal.policy
        if principal.allow_policy_header:
            policy = headers.get("x-veracity-policy") or policy
        ctx = pipeline.RequestContext(
            request_id=rid, model=model,
            upstream=BoundUpstream(up, principal.upstream_auth, timing, tenant=tenant_headers(headers)),
            principal=principal, policy=policy, headers=headers, timing=timing,
            config=state.cfg, log=fields, route=state.upstreams.route)
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
        out_headers = {**result.headers, "x-request-id": rid, "x-veracity-status": result.report.status,
                       "x-veracity-overhead-ms": f"{timing.overhead() * 1000:.3f}",
                       **reports.report_headers(rid, result.report, state.reports_on)}
        return _Reply(payload, status, out_headers)
    except GatewayError as exc:
        status = exc.status
        fields["error_code"] = exc.code
        return _error_reply(exc, rid, timing)
    except UpstreamError as exc:
        status = exc.status
        fields["error_code"] = exc.code
        metrics.UPSTREAM_ERRORS.labels(exc.reason).inc()
        return _upstream_error_reply(exc, rid, timing)
    except asyncio.CancelledError:  # the client went away (see _DisconnectWatch)
        status = 499
        fields["client_disconnected"] = True
        raise
    except Exception as exc:  # noqa: BLE001 - the catch-all: never a stack trace to the client
        status = 500
        fields["error_code"] = "internal_error"
        fields["exception"] = type(exc).__name__
        log.error("unhandled error", request_id=rid, exception=type(exc).__name__, message=str(exc)[:500])
        return _error_reply(GatewayError(500, "The gateway hit an internal error; see its logs "
                                         f"(request id {rid}).", type="server_error",
                                         code="internal_error"), rid, timing)
    finally:
        if not streaming:
            _finish(state, route=CHAT_ROUTE, model=model_label, status=status, timing=timing, rid=rid,
                    principal=principal, upstream=upstream_name, stream=False, veracity_status=vstatus,
                    fields=fields)


async def _finish_stream(state: GatewayState, events: AsyncIterator[bytes], *, timing: Timing, rid: str,
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
        try:
            await events.aclose()  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001
            pass
        if report.status == "pending":  # the stream ended before its verification did
            reports.publish_soon(state.cfg, principal, rid, model, int(time.time() - timing.elapsed()),
                                 {"status": "error", "reason": "the stream ended before its verification "
                                  "finished (the client disconnected or the stream failed)"})
        client_s = fields.pop("_client_s", 0.0)
        fields["overhead_s"] = max(overhead, timing.elapsed() - timing.upstream_s - client_s)
        _finish(state, route=CHAT_ROUTE, model=model, status=200, timing=timing, rid=rid, principal=principal,
                upstream=upstream, stream=True, veracity_status=report.status, fields=fields)


async def list_models(request: Request) -> Response:
    """``GET /v1/models``: the union of the upstreams' model lists, each entry kept as the
    upstream sent it, restricted to models this gateway routes to that upstream; litellm
    upstreams contribute their literal (non-glob) model patterns."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, MODELS_ROUTE)
    rid = rec.rid
    try:
        principal = rec.principal = state.auth.authenticate(_credential(request.headers))
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return _error_response(exc, rid)
    assert state.upstreams is not None
    ups = state.upstreams
    http_ups = [u for u in ups.all if isinstance(u, OpenAIUpstream)]
    results = await asyncio.gather(*(u.list_models(auth=principal.upstream_auth) for u in http_ups),
                                   return_exceptions=True)
    data: list[dict[str, Any]] = []
    seen: set[str] = set()
    first_error: UpstreamError | None = None
    for u, res in zip(http_ups, results):
        if isinstance(res, BaseException):
            if isinstance(res, UpstreamError):
                first_error = first_error or res
                metrics.UPSTREAM_ERRORS.labels(res.reason).inc()
            log.warning("model list failed", request_id=rid, upstream=u.name, error=type(res).__name__)
            continue
        for m in res:
            mid = m.get("id")
            if isinstance(mid, str) and mid not in seen and ups.route(mid) is u:
                seen.add(mid)
                data.append(m)
    for u in ups.all:
        if isinstance(u, OpenAIUpstream):
            continue
        for p in u.config.models:
            if not any(c in p for c in "*?[") and p not in seen and ups.route(p) is u:
                seen.add(p)
                data.append({"id": p, "object": "model", "created": 0, "owned_by": u.name})
    if principal.models is not None:
        data = [m for m in data if any(_glob(m["id"], p) for p in principal.models)]
    if not data and first_error is not None:
        rec.fields["error_code"] = first_error.code
        return _upstream_error_response(first_error, rid, rec.timing)
    return Response(dumps({"object": "list", "data": data}), 200, headers={"x-request-id": rid}, media_type=_JSON)


async def passthrough(request: Request) -> Response:
    """Any other ``/v1/*`` request: sent to the upstream serving the body's ``model`` (or the
    ``/v1/models/{model}`` path's model; else the first OpenAI-compatible upstream) and its
    answer relayed byte for byte (streamed). An Azure deployment path (:mod:`proxy.wire.azure`)
    routes by its deployment, which also replaces a JSON body's ``model``; other bodies
    (multipart audio) are forwarded as sent."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, PASSTHROUGH_ROUTE)
    rec.model_label = "_passthrough"  # bounded: pass-through model names are whatever the client sent
    timing, rid = rec.timing, rec.rid
    path = request.url.path
    try:
        if _escapes_api_prefix(path) or _escapes_api_prefix(request.scope.get("raw_path", b"").decode("latin-1")):
            raise GatewayError(404, f"Unknown request URL: {request.method} {path[:200]}.", code="unknown_url")
        if path == "/v1/veracity" or path.startswith("/v1/veracity/"):  # the gateway's own routes
            allow = _own_methods(request)
            if allow:  # a path the gateway serves, with another method (DELETE on a report): 405
                raise GatewayError(405, f"Method Not Allowed: {request.method} {path[:200]}. "
                                        f"Allowed: {', '.join(allow)}.",
                                   code="method_not_allowed", headers={"allow": ", ".join(allow)})
            raise GatewayError(404, f"Unknown request URL: {request.method} {path[:200]}.", code="unknown_url")
        principal = rec.principal = state.auth.authenticate(_credential(request.headers))
        raw = await _receive_body(request.receive, request.headers, state.max_body)
        model = None
        deployment = request.scope.get(azure.SCOPE_KEY)
        if raw and "json" in request.headers.get("content-type", ""):
            try:
                parsed = loads(raw)
                model = parsed.get("model") if isinstance(parsed, dict) else None
            except ValueError:
                parsed = model = None
            if deployment is not None and isinstance(parsed, dict) and model != deployment:
                parsed["model"] = deployment
                raw = dumps(parsed)
        elif path.startswith("/v1/models/"):
            model = path[len("/v1/models/"):]
        if deployment is not None:
            model = deployment
        assert state.upstreams is not None
        if isinstance(model, str) and model:
            rec.model = model[:200]
            up = _route(state, principal, model)
        else:
            up = state.upstreams.default()
        rec.upstream = up.name if up is not None else None
        if not isinstance(up, OpenAIUpstream):  # litellm upstreams serve chat completions only
            raise GatewayError(404, f"Unknown request URL: {request.method} {path[:200]}: no OpenAI-compatible "
                               "upstream serves it for this model.", code="unknown_url")
        resp = await up.request(request.method, path[len("/v1"):], query=request.url.query, body=raw,
                                headers=request.headers, auth=principal.upstream_auth, timing=timing)
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return _error_response(exc, rid, timing)
    except UpstreamError as exc:
        rec.fields["error_code"] = exc.code
        metrics.UPSTREAM_ERRORS.labels(exc.reason).inc()
        return _upstream_error_response(exc, rid, timing)
    # an upstream may echo the key it was sent in a header of its own: relayed values are scrubbed
    headers = {k: redaction.scrub_text(v) for k, v in resp.headers.items()
               if k.lower() not in _DROP_RESPONSE_HEADERS and not k.lower().startswith(_DROP_RESPONSE_PREFIXES)}
    headers["x-request-id"] = rid
    if resp.status >= 400:  # error bodies are small: read, and never relay the upstream's key in one
        ctype = resp.headers.get("content-type")
        try:  # the whole body: one read() may return only what has arrived so far
            err = scrub_secrets(await up.read_capped(resp, min(up.max_response_bytes, ERROR_BODY_LIMIT)))
        except (UpstreamError, aiohttp.ClientError, asyncio.TimeoutError):  # too large, or lost: our own error
            err = UpstreamError(resp.status, f"upstream {up.name!r} answered HTTP {resp.status}",
                                reason=f"http_{resp.status}").response_body()
            ctype = _JSON
        finally:
            resp.close()
        return Response(err, resp.status, headers=headers, media_type=ctype)
    length = resp.content_length
    if length is not None and length > up.max_response_bytes:
        exc = up.too_large_error(resp)
        rec.fields["error_code"] = exc.code
        metrics.UPSTREAM_ERRORS.labels(exc.reason).inc()
        return _upstream_error_response(exc, rid, timing)

    async def body() -> AsyncIterator[bytes]:
        limit, size = up.max_response_bytes, 0
        try:
            async for chunk in resp.content.iter_any():
                size += len(chunk)
                if size > limit:
                    raise up.too_large_error(resp)
                yield chunk
        except Exception as exc:  # mid-body failure: abort, never end a cut body as if complete
            reason = exc.reason if isinstance(exc, UpstreamError) else "disconnect"
            rec.fields["error_code"] = exc.code if isinstance(exc, UpstreamError) else "upstream_disconnected"
            metrics.UPSTREAM_ERRORS.labels(reason).inc()
            log.warning("pass-through answer cut: client connection aborted", request_id=rid, path=path[:200],
                        upstream=up.name, reason=reason)
            raise UpstreamBodyError(f"upstream {up.name!r} body failed mid-way ({reason}); the client "
                                    "connection is aborted") from None
        finally:
            resp.close()

    return StreamingResponse(body(), status_code=resp.status, headers=headers,
                             media_type=resp.headers.get("content-type"))


class UpstreamBodyError(Exception):
    """A pass-through answer failed after its status line went out (connection lost, body over
    ``limits.max_response_bytes``): raised out of the response so that the server aborts the
    client connection (the client sees a cut body, e.g. an unterminated chunked encoding)
    instead of a shorter body presented as complete."""


async def veracity_verify(request: Request) -> Response:
    """``POST /v1/veracity/verify``: check ``{messages, answer}`` with the caller's policy and
    no upstream call (see :func:`proxy.pipeline.sequence.verify_request`)."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, VERIFY_ROUTE)
    rec.model = "_offline"  # as pipeline.verify_request labels its metrics
    rid = rec.rid
    try:
        principal = rec.principal = state.auth.authenticate(_credential(request.headers))
        body = _parse_json_object(await _receive_body(request.receive, request.headers, state.max_body), request.headers.get("content-encoding"))
        out = await pipeline.verify_request(state.cfg, principal, request.headers, body, rid)
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return _error_response(exc, rid)
    rep = out["veracity"]
    rec.veracity_status = rep["status"]
    headers = {"x-request-id": rid, "x-veracity-status": rep["status"]}
    if isinstance(rep.get("risk"), dict):  # the same verdict headers as on chat completions
        headers["x-veracity-risk"] = f"{rep['risk'].get('score', 0.0):.3f}"
    if isinstance(rep.get("coverage"), dict):
        headers["x-veracity-coverage"] = f"{rep['coverage']['decided']}/{rep['coverage']['units']}"
    return Response(dumps(out), 200, media_type=_JSON, headers=headers)


# ------------------------------------------------------------------ human review (proxy/stores/review.py)


def _admin(state: GatewayState, headers: Any) -> Principal:
    """The caller of a review route: 401 ``invalid_api_key`` without a (valid) key, 403
    ``admin_required`` for a key without ``admin: true`` (and in pass-through auth, where no
    key is an admin)."""
    cred = _credential(headers)
    if not cred:
        raise GatewayError(401, "Missing API key: the review routes need an admin key "
                           "('Authorization: Bearer <key>' of a key with `admin: true`).", code="invalid_api_key")
    principal = state.auth.authenticate(cred)
    if not principal.admin:
        raise GatewayError(403, "This key may not use the review routes: they need a virtual key with "
                           "`admin: true` in the gateway config.", type="permission_error", code="admin_required")
    return principal


def _review_not_found(review_id: str, param: str | None = None) -> GatewayError:
    return GatewayError(404, f"No review with id {review_id[:100]!r}.", code="review_not_found", param=param)


async def _review_call(rec: _RequestRecord, work: Any) -> Response:
    """Run a review route's ``work()`` (-> JSON-ready dict), mapping failures to OpenAI-shaped
    errors: the store unreachable is 503 ``review_store_unavailable``."""
    try:
        return Response(dumps(await work()), 200, headers={"x-request-id": rec.rid}, media_type=_JSON)
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return _error_response(exc, rec.rid)
    except Exception as exc:  # noqa: BLE001 - the store (SQLite file, Redis) failed
        rec.fields["error_code"] = "review_store_unavailable"
        log.error("review_store_error", request_id=rec.rid, error=type(exc).__name__, message=str(exc)[:300])
        return _error_response(GatewayError(503, "The review store is unavailable; see the gateway's logs.",
                                            type="server_error", code="review_store_unavailable"), rec.rid)


async def list_reviews(request: Request) -> Response:
    """``GET /v1/veracity/reviews?status=open|resolved|all&limit=1..100&after=ID``: reviews
    oldest first, as OpenAI lists (``{"object": "list", "data", "first_id", "last_id",
    "has_more"}``; the next page: ``after=last_id``) plus ``total`` (how many reviews have that
    status, all pages). Admin key only."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, REVIEWS_ROUTE)

    async def work() -> dict[str, Any]:
        rec.principal = _admin(state, request.headers)
        q = request.query_params
        status = q.get("status", "open")
        if status not in ("open", "resolved", "all"):
            raise GatewayError(400, "status must be one of open, resolved, all.", code="invalid_request", param="status")
        try:
            limit = int(q.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 100:
            raise GatewayError(400, "limit must be an integer from 1 to 100.", code="invalid_request", param="limit")
        after = q.get("after") or None
        try:
            data, more = await review.store_for(state.cfg).list(None if status == "all" else status, limit, after)
        except review.ReviewNotFound:
            raise _review_not_found(after or "", "after") from None
        total = await review.store_for(state.cfg).count(None if status == "all" else status)
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": more, "total": total}

    return await _review_call(rec, work)


async def get_review(request: Request) -> Response:
    """``GET /v1/veracity/reviews/{id}``: one review (404 ``review_not_found``). Admin key only."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, REVIEW_ROUTE)
    review_id = request.path_params["review_id"]

    async def work() -> dict[str, Any]:
        rec.principal = _admin(state, request.headers)
        try:
            return await review.store_for(state.cfg).get(review_id)
        except review.ReviewNotFound:
            raise _review_not_found(review_id) from None

    return await _review_call(rec, work)


async def resolve_review(request: Request) -> Response:
    """``POST /v1/veracity/reviews/{id}`` with ``{"verdict": correct|incorrect|partially_correct|
    cannot_tell, "note": "..."}``: resolve (the reviewer is the admin key's name); 400
    ``invalid_value`` (param ``verdict``/``note``), 404 ``review_not_found``, 409
    ``review_already_resolved``. Admin key only."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, REVIEW_ROUTE)
    review_id = request.path_params["review_id"]

    async def work() -> dict[str, Any]:
        principal = rec.principal = _admin(state, request.headers)
        body = _parse_json_object(await _receive_body(request.receive, request.headers, state.max_body),
                                  request.headers.get("content-encoding"))
        verdict, note = body.get("verdict"), body.get("note")
        if verdict not in review.VERDICTS:
            raise GatewayError(400, f"verdict must be one of {', '.join(review.VERDICTS)}.", code="invalid_request",
                               param="verdict")
        if note is not None and (not isinstance(note, str) or len(note) > review.MAX_NOTE):
            raise GatewayError(400, f"note must be a string of at most {review.MAX_NOTE} characters.",
                               code="invalid_request", param="note")
        try:
            return await review.store_for(state.cfg).resolve(review_id, verdict, note, principal.key_name)
        except review.ReviewNotFound:
            raise _review_not_found(review_id) from None
        except review.ReviewConflict:
            raise GatewayError(409, f"Review {review_id!r} is already resolved.",
                               code="review_already_resolved") from None

    return await _review_call(rec, work)


# ------------------------------------------------------------------ reports (proxy/stores/reports.py)


async def get_report(request: Request) -> Response:
    """``GET /v1/veracity/reports/{request_id}``: the stored report of a chat completion (see
    :mod:`proxy.stores.reports`): 200 final, 202 (``Retry-After: 1``) not final yet, 404
    ``report_not_found`` (unknown, expired, or another key's), 401 without a valid key, 503
    ``report_store_unavailable``. The key that made the request, or an admin key: when several
    keys used the id, an admin gets them all as a list, or one with ``?owner=<owner hash>``."""
    state: GatewayState = request.app.state.gw
    rec = _record(request, REPORT_ROUTE)
    request_id = request.path_params["request_id"]
    try:
        principal = rec.principal = state.auth.authenticate(_credential(request.headers))
        try:
            owner = request.query_params.get("owner")   # an admin picks one of several records
            hit = (await reports.lookup(state.cfg, principal, request_id, owner)
                   if _RID_RE.match(request_id) else None)
        except Exception as exc:  # noqa: BLE001 - Redis unreachable and the record not in this process
            log.error("report_store_error", request_id=rec.rid, error=type(exc).__name__, message=str(exc)[:300])
            raise GatewayError(503, "The report store is unavailable; see the gateway's logs.", type="server_error",
                               code="report_store_unavailable") from None
        if hit is None:
            raise GatewayError(404, f"No report with request id {request_id[:128]!r} for this key (reports are "
                               "kept for reports.ttl_s seconds).", code="report_not_found")
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return _error_response(exc, rec.rid)
    body, pending = hit
    headers = {"x-request-id": rec.rid}
    if pending:
        headers["retry-after"] = "1"
    return Response(body, 202 if pending else 200, headers=headers, media_type=_JSON)


def _page(handler: Any) -> Any:
    """A :mod:`proxy.routes.review_page` handler as a Starlette endpoint (route label :data:`REVIEW_PAGE_ROUTE`)."""
    async def endpoint(request: Request) -> Response:
        rec = _record(request, REVIEW_PAGE_ROUTE)
        args = [request.path_params["review_id"]] if "review_id" in request.path_params else []
        return await handler(request.app.state.gw, request, rec, *args)
    return endpoint


async def healthz(request: Request) -> Response:
    """Liveness: the process answers."""
    return Response(b'{"status":"ok"}', 200, media_type=_JSON)


async def readyz(request: Request) -> Response:
    """Readiness: config loaded and upstream clients started (503 otherwise)."""
    state: GatewayState = request.app.state.gw
    if state.upstreams is None:
        return Response(dumps({"status": "starting"}), 503, media_type=_JSON)
    return Response(dumps({"status": "ready", "mode": state.cfg.mode, "auth": state.auth.mode,
                           "upstreams": [u.name for u in state.upstreams.all]}), 200, media_type=_JSON)


async def metrics_endpoint(request: Request) -> Response:
    """Prometheus text exposition (aggregated over workers in multiprocess mode); the review
    backlog gauge is read from the review store first (:func:`proxy.stores.review.backlog`)."""
    vmetrics.set_review_backlog(await review.backlog(request.app.state.gw.cfg))
    data, ctype = metrics.render()
    return Response(data, 200, media_type=ctype)


async def _http_exception(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette's routing errors in OpenAI's shape: 404 ``unknown_url`` naming the routes
    (and the ``/v1`` prefix a client's ``base_url`` lacks), 405 ``method_not_allowed`` whose
    ``Allow`` lists every method served on the path (Starlette lists only the first route's)."""
    rec = _record(request, None)
    # Starlette's own ``Allow`` is dropped: the 405 below sets the complete one (both were sent)
    headers = {k: v for k, v in (getattr(exc, "headers", None) or {}).items() if k.lower() != "allow"}
    headers["x-request-id"] = rec.rid
    method, path = request.method, request.url.path[:200]
    if exc.status_code == 404:
        code = "unknown_url"
        message = f"Unknown request URL: {method} {path}. {_ROUTES_HINT}"
        if not path.startswith("/v1/") and path not in ("/", "/v1"):
            message += f" Did you mean /v1{path}? A client's base_url ends in /v1 ({str(request.base_url).rstrip('/')}/v1)."
    elif exc.status_code == 405:
        code = "method_not_allowed"
        allow = _allowed_methods(request)
        headers["allow"] = ", ".join(allow)
        message = f"Method Not Allowed: {method} {path}. Allowed: {', '.join(allow)}."
    else:
        code, message = None, str(exc.detail)
    rec.fields["error_code"] = code
    return Response(dumps(error_body(message, code=code)), exc.status_code, headers=headers, media_type=_JSON)


_ROUTES_HINT = ("This gateway serves the OpenAI API under /v1 (POST /v1/chat/completions, GET /v1/models, "
                "POST /v1/veracity/verify, GET /v1/veracity/reports/{request_id}, GET/POST /v1/veracity/reviews; other /v1/* paths go to the upstream) and GET /healthz, /readyz, /metrics.")


def _allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on the request's path, sorted (the ``Allow`` of a 405,
    RFC 9110 section 10.2.1)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def _own_methods(request: Request) -> list[str]:
    """The methods the gateway's own ``/v1/veracity/*`` routes serve on the request's path,
    sorted (empty when none of them matches the path): the ``Allow`` of a 405 there."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if getattr(route, "path", "").startswith("/v1/veracity"):
            match, _ = route.matches(request.scope)
            if match != Match.NONE:
                methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


async def _unhandled(request: Request, exc: Exception) -> Response:
    if isinstance(exc, UpstreamBodyError):  # logged where raised; the response had started
        return Response(b"", 502)
    log.error("unhandled error", path=request.url.path, exception=type(exc).__name__)
    return Response(dumps(error_body("The gateway hit an internal error.", type="server_error",
                                     code="internal_error")), 500, media_type=_JSON)


async def _warm_up(cfg: GatewayConfig) -> None:
    """Start-up work that would otherwise land on the first requests (~80-240 ms): load the
    policies (verification runtime), finish importing the verifiers, build the arithmetic
    verifier's unit registry, and run the risk scorer once. Runs before the server accepts
    connections (uvicorn waits for the lifespan), in a thread so the loop stays free. A
    verification runtime that cannot be built (an audit or budget file that cannot be opened:
    what config validation cannot see) raises RuntimeError, so start-up fails (``veracity
    serve`` exits with status 2) instead of a ready gateway answering every request with 500."""
    def work() -> None:
        try:
            runtime = pipeline.runtime.get(cfg)
        except Exception as exc:  # noqa: BLE001 - any failure here is a start-up failure
            log.error("startup_failed", error=f"Veracity is misconfigured: {type(exc).__name__}: {exc}")
            raise RuntimeError(f"Veracity is misconfigured: {exc}") from None
        pipeline.runtime.wait_warm_up()
        try:
            if runtime.verifies():  # checks off: SymPy and the unit registry load on first use
                from verifiers import arithmetic

                arithmetic.warm_up()
            pipeline.risk_mod.score("What is 2 + 2?", "2 + 2 = 4")
        except Exception:  # noqa: BLE001 - a broken verifier shows up as an `error` check later
            pass
        # the sentinel's `schema_tokens` (loading the tiktoken encoding takes ~1 s and ~78 MiB
        # of RSS, measured): here when a policy offers the sentinel, or its first reports of
        # each process said null; otherwise on first use, off the request path
        # (proxy.pipeline.sentinel.overhead_tokens_cached), so a gateway without it stays small
        store = runtime.policies
        if any(store.get(n).sentinel.mode != "off" for n in store.names()):
            sentinel.overhead_tokens()

    await asyncio.to_thread(work)


def create_app(cfg: GatewayConfig) -> FastAPI:
    """The ASGI app for ``cfg``. Upstream clients open in the lifespan (inside the loop)."""
    state = GatewayState(cfg)
    add_secrets(redaction.config_secrets(cfg))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            state.upstreams = await Upstreams.start(cfg)
        except Exception as exc:  # e.g. a litellm upstream whose import fails: one line, then exit 2
            log.error("startup_failed", error=f"cannot start the upstream clients: {type(exc).__name__}: {exc}")
            raise RuntimeError(f"cannot start the upstream clients: {exc}") from None
        state.pid = os.getpid()
        try:
            await _warm_up(cfg)
        except BaseException:  # start-up fails: close the upstream sessions opened above
            await state.upstreams.close()
            raise
        # the start-up heap (config, policies, verifier modules: most of the process's objects)
        # lives until exit: keep it out of the cyclic GC's scans from now on (gc.freeze docs)
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            await state.sweeper.close()
            await state.upstreams.close()
            metrics.mark_process_dead()

    app = FastAPI(title="Veracity", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.gw = state
    app.router.add_route(CHAT_ROUTE, chat_completions, methods=["POST"])
    app.router.add_route(MODELS_ROUTE, list_models, methods=["GET"])
    app.router.add_route("/healthz", healthz, methods=["GET"])
    app.router.add_route("/readyz", readyz, methods=["GET"])
    app.router.add_route("/metrics", metrics_endpoint, methods=["GET"])
    app.router.add_route(VERIFY_ROUTE, veracity_verify, methods=["POST"])
    app.router.add_route(REPORT_ROUTE, get_report, methods=["GET"])
    app.router.add_route(REVIEWS_ROUTE, list_reviews, methods=["GET"])
    app.router.add_route(REVIEW_ROUTE, get_review, methods=["GET"])
    app.router.add_route(REVIEW_ROUTE, resolve_review, methods=["POST"])
    app.router.add_route(REVIEW_PAGE_ROUTE, _page(review_page.page), methods=["GET"])
    app.router.add_route(REVIEW_PAGE_ROUTE + "/login", _page(review_page.login), methods=["POST"])
    app.router.add_route(REVIEW_PAGE_ROUTE + "/logout", _page(review_page.logout), methods=["POST"])
    app.router.add_route(REVIEW_PAGE_ROUTE + "/{review_id}", _page(review_page.detail), methods=["GET"])
    app.router.add_route(REVIEW_PAGE_ROUTE + "/{review_id}", _page(review_page.resolve), methods=["POST"])
    app.router.add_route("/v1/{rest:path}", passthrough, methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    app.add_exception_handler(StarletteHTTPException, _http_exception)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unhandled)
    # CORS (a `cors:` section) wraps everything, fast path included; no section: no wrapper
    return cors.wrap(FastPath(app, state), cfg.cors)  # type: ignore[no-any-return]


#: paths served as chat completions: clients configured with the bare host as ``base_url``
#: post to ``/chat/completions`` (a 404 before; as LiteLLM, serve both), some add a slash
_CHAT_PATHS = frozenset({CHAT_ROUTE, CHAT_ROUTE + "/", "/chat/completions", "/chat/completions/"})


#: How long a chat request may run before the gateway starts watching for the client's
#: ``http.disconnect`` (seconds). Requests answered sooner (cached or tiny upstream answers,
#: benchmarks) pay only a set insertion, no timer and no task; slower ones (real model calls,
#: verification) are cancelled within about twice this delay of the client going away.
DISCONNECT_WATCH_AFTER_S = 0.05


class _DisconnectWatch:
    """Cancel a chat request's task when its client disconnects before the response starts.

    Until the response starts, nothing reads ASGI ``receive`` after the body, so a client
    that gives up while the gateway waits for the upstream (non-stream, or before a stream's
    first event) or runs correction rounds would go unnoticed until the upstream answered,
    and the upstream would keep generating (and billing) tokens. :meth:`read_body` reads the
    body and registers the watch with the process's :class:`_WatchSweeper`; a request still
    running after :data:`DISCONNECT_WATCH_AFTER_S` gets a task that awaits ``receive()`` and,
    on ``http.disconnect``, cancels the request's task: the ``CancelledError`` unwinds the
    pipeline, which closes the upstream connection (aiohttp closes a response whose read is
    cancelled) and stops verification and corrections. :meth:`stop` (called before the
    response starts; Starlette's ``StreamingResponse`` watches ``receive`` itself afterwards)
    disarms it. ``fired``: this watch cancelled the task.
    ASGI spec: https://asgi.readthedocs.io/en/latest/specs/www.html#disconnect-receive-event
    """

    __slots__ = ("receive", "headers", "sweeper", "task", "armed_at", "watcher", "fired", "stopped")

    def __init__(self, receive: Any, headers: dict[str, str], sweeper: "_WatchSweeper") -> None:
        self.receive = receive
        self.headers = headers
        self.sweeper = sweeper
        self.task: asyncio.Task[Any] | None = None
        self.armed_at = 0.0
        self.watcher: asyncio.Task[Any] | None = None
        self.fired = False
        self.stopped = False

    async def read_body(self, limit: int) -> bytes:
        """The request body (see :func:`_receive_body`); then arm the watch."""
        body = await _receive_body(self.receive, self.headers, limit)
        self.arm()
        return body

    def __enter__(self) -> "_DisconnectWatch":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        """Disarm; swallow the ``CancelledError`` this watch caused (the client is gone, there
        is no one to answer) when no other cancel is pending (``Task.uncancel``, Python >= 3.11);
        any other exception propagates."""
        self.stop()
        if not (self.fired and isinstance(exc, asyncio.CancelledError)):
            return False
        task = asyncio.current_task()
        return task is not None and task.uncancel() == 0

    def arm(self) -> None:
        """Watch the current task from now on (the body has been read)."""
        if not self.stopped:
            self.task = asyncio.current_task()
            self.sweeper.add(self)

    def start(self) -> None:
        """Called by the sweeper once the request is slow: start awaiting ``receive()``."""
        if not self.stopped:
            self.watcher = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while not self.stopped:
            msg = await self.receive()
            if msg.get("type") == "http.disconnect":
                if not self.stopped and self.task is not None:
                    self.fired = True
                    self.task.cancel()
                return
            # after the body a server should answer receive() only with http.disconnect; one
            # that repeats http.request (test harnesses do) is polled, never spun on
            await asyncio.sleep(DISCONNECT_WATCH_AFTER_S)

    def stop(self) -> None:
        """Disarm (idempotent): leave the sweeper, cancel the watching task."""
        if self.stopped:
            return
        self.stopped = True
        self.sweeper.pending.discard(self)
        if self.watcher is not None:
            if not self.watcher.done():
                self.watcher.cancel()
            self.watcher = None


class _WatchSweeper:
    """One task per process that starts the :class:`_DisconnectWatch` of every chat request
    running longer than :data:`DISCONNECT_WATCH_AFTER_S`. Cheaper on the hot path than a
    timer per request (a set insertion and removal); it sleeps on an event while no request
    is pending. Started lazily inside the running loop by the first request."""

    def __init__(self) -> None:
        self.pending: set[_DisconnectWatch] = set()
        self.task: asyncio.Task[None] | None = None
        self.wake: asyncio.Event | None = None

    def add(self, watch: _DisconnectWatch) -> None:
        loop = asyncio.get_running_loop()
        watch.armed_at = loop.time()
        self.pending.add(watch)
        if self.task is None or self.task.done() or self.task.get_loop() is not loop:
            self.wake = asyncio.Event()
            self.task = loop.create_task(self._run())
        elif not self.wake.is_set():  # type: ignore[union-attr]
            self.wake.set()  # type: ignore[union-attr]

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        wake = self.wake
        assert wake is not None
        while True:
            if not self.pending:
                wake.clear()
                await wake.wait()
            await asyncio.sleep(DISCONNECT_WATCH_AFTER_S)
            due = loop.time() - DISCONNECT_WATCH_AFTER_S
            for watch in [w for w in self.pending if w.armed_at <= due]:
                self.pending.discard(watch)
                watch.start()

    async def close(self) -> None:
        """Stop the sweeper task (at shutdown)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, RuntimeError):
                pass


class LeanLane:
    """The lean lane of ``POST /v1/chat/completions``: the common request whose answer nobody
    needs to look at, served with the least Python work, and the same client-visible result as
    :func:`_chat` (same body bytes, headers in the same order, ``veracity`` report, metrics
    and log line; tests/test_gateway_lean.py compares the two).

    Taken when all of these hold (else the request goes to :func:`_chat`, with the body
    already read handed over): no repeated request header, no ``content-encoding`` or
    ``x-veracity-policy`` header, a ``content-length`` within ``limits.max_body_bytes`` and
    the whole body in one ASGI message; the body a JSON object (shallower than
    :data:`MAX_JSON_DEPTH`) with a non-empty string ``model``, ``stream`` absent/null/false
    and no ``veracity`` object; the caller authenticated and the model routed to an
    OpenAI-compatible upstream (cached per ``(credential, model)``: the ``Authorization``
    header, else the ``api-key`` one, :func:`proxy.auth.client_authorization`); the key's policy
    :func:`proxy.pipeline.sequence.forwards_only` (decided once per policy object; policies are
    still looked up per request, so an edited policy file takes effect as before); and
    ``logging.log_content`` off. Then: one upstream call (:meth:`OpenAIUpstream.complete`),
    the ``skipped`` report added, the reply sent as two ASGI messages. Upstream errors,
    streams, litellm upstreams, verification: all on the normal path. An Azure deployment
    chat path is taken on the same terms, its deployment replacing the body's ``model``
    before the checks above (as :func:`_chat` does).
    """

    #: most cached ``(Authorization, model)`` routes and policies (a bound, not a working-set size)
    MAX_CACHED = 4096

    def __init__(self, state: GatewayState) -> None:
        self.state = state
        self.enabled = not state.log_content
        #: (credential bytes or None, model) -> (principal, upstream)
        self._routes: dict[tuple[bytes | None, str], tuple[Principal, OpenAIUpstream]] = {}
        #: id(policy) -> (policy, forwards only?, its report dict)
        self._policies: dict[int, tuple[Any, bool, dict[str, Any]]] = {}

    def _route(self, auth: bytes | None, model: str) -> tuple[Principal, OpenAIUpstream] | None:
        """Authenticate + route once per ``(auth, model)``; None: not for this lane (an error
        the normal path reports, or a non-OpenAI upstream). Only successes are cached."""
        key = (auth, model)
        hit = self._routes.get(key)
        if hit is not None:
            return hit
        state = self.state
        if state.upstreams is None:
            return None
        try:
            principal = state.auth.authenticate(auth.decode("latin-1") if auth is not None else None)
            up = _route(state, principal, model)
        except GatewayError:
            return None
        if not isinstance(up, OpenAIUpstream):
            return None
        hit = (principal, up)
        if len(self._routes) < self.MAX_CACHED:
            self._routes[key] = hit
        return hit

    def _policy(self, principal: Principal) -> tuple[Any, bool, dict[str, Any]] | None:
        """The key's policy (looked up per request: files reload on change) with its cached
        lane verdict; None when it cannot be resolved (the normal path reports why)."""
        try:
            policy = pipeline.runtime.get(self.state.cfg).policies.get(principal.policy)
        except Exception:  # noqa: BLE001 - misconfiguration / missing policy: _chat's error
            return None
        hit = self._policies.get(id(policy))
        if hit is None or hit[0] is not policy:
            lean = pipeline.forwards_only(policy)
            hit = (policy, lean, pipeline.checks_off_report(policy).to_dict() if lean else {})
            if len(self._policies) >= self.MAX_CACHED:
                self._policies.clear()
            self._policies[id(policy)] = hit
        return hit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any, deployment: str | None = None) -> None:
        """Serve one request (``deployment``: an Azure-shaped path's deployment, which
        replaces the body's ``model`` as in :func:`_chat`)."""
        timing = Timing()
        state = self.state
        raw_headers = scope["headers"]
        h = dict(raw_headers)
        cl = h.get(b"content-length")
        names = b"".join(h)
        if (len(h) != len(raw_headers) or cl is None or b"content-encoding" in h
                or b"x-veracity-policy" in h or names != names.lower()):
            return await self._normal(scope, receive, send, None, deployment)
        try:
            n = int(cl)
        except ValueError:
            n = -1
        if not 0 <= n <= state.max_body:
            return await self._normal(scope, receive, send, None, deployment)
        msg = await receive()
        raw = msg.get("body", b"")
        if msg["type"] != "http.request" or msg.get("more_body", False) or len(raw) > state.max_body:
            return await self._normal(scope, _replay(msg, receive), send, None, deployment)
        try:
            body = loads_strict(raw)
        except ValueError:
            return await self._normal(scope, receive, send, raw, deployment)
        if type(body) is not dict or "veracity" in body:
            return await self._normal(scope, receive, send, raw, deployment)
        if deployment is not None:
            body["model"] = deployment
        model = body.get("model")
        stream = body.get("stream")
        if (type(model) is not str or not model or (stream is not None and stream is not False)
                or raw.count(b"{") + raw.count(b"[") > MAX_JSON_DEPTH):
            return await self._normal(scope, receive, send, raw, deployment)
        if b"openai-organization" in h or b"openai-project" in h:  # tenant headers: the normal path sends them
            return await self._normal(scope, receive, send, raw, deployment)
        routed = self._route(client_authorization_bytes(h.get(b"authorization"), h.get(b"api-key")), model)
        if routed is None:
            return await self._normal(scope, receive, send, raw, deployment)
        principal, up = routed
        pol = self._policy(principal)
        if pol is None or not pol[1]:
            return await self._normal(scope, receive, send, raw, deployment)
        rid_b = h.get(b"x-request-id")
        rid = rid_b.decode("latin-1") if rid_b else ""
        if not (rid and _RID_RE.match(rid)):
            rid = _request_ids.next()
        watch = _DisconnectWatch(receive, None, state.sweeper)  # type: ignore[arg-type]
        watch.arm()
        with watch:
            await self._forward(watch, send, timing, body, model, principal, up, pol, rid)

    async def _forward(self, watch: "_DisconnectWatch", send: Any, timing: Timing, body: dict[str, Any],
                       model: str, principal: Principal, up: OpenAIUpstream, pol: tuple[Any, bool, dict[str, Any]],
                       rid: str) -> None:
        """The lane's work once taken: what :func:`_chat` + :func:`proxy.pipeline.sequence.chat_completion`
        do for a checks-off policy, then the two ASGI messages."""
        state = self.state
        metrics.request_started()
        fields: dict[str, Any] = {"policy": pol[0].name}
        status = 500
        vstatus: str | None = None
        reply: _Reply | None = None
        try:
            out, relayed = await up.complete(body, auth=principal.upstream_auth, timing=timing)
            fields["veracity_checks"] = 0
            out["veracity"] = pol[2]  # the report dict: serialised at once, never mutated
            payload = dumps(out)
            status, vstatus = 200, "skipped"
            await reports.publish(state.cfg, principal, rid, model, int(time.time() - timing.elapsed()), pol[2])
            overhead = f"{timing.overhead() * 1000:.3f}"
        except UpstreamError as exc:
            status = exc.status
            fields["error_code"] = exc.code
            metrics.UPSTREAM_ERRORS.labels(exc.reason).inc()
            reply = _upstream_error_reply(exc, rid, timing)
        except asyncio.CancelledError:  # the client went away (see _DisconnectWatch)
            status = 499
            fields["client_disconnected"] = True
            raise
        except Exception as exc:  # noqa: BLE001 - the catch-all, as in _chat
            fields["error_code"] = "internal_error"
            fields["exception"] = type(exc).__name__
            log.error("unhandled error", request_id=rid, exception=type(exc).__name__, message=str(exc)[:500])
            reply = _error_reply(GatewayError(500, "The gateway hit an internal error; see its logs "
                                              f"(request id {rid}).", type="server_error",
                                              code="internal_error"), rid, timing)
        finally:
            _finish(state, route=CHAT_ROUTE, model=model, status=status, timing=timing, rid=rid,
                    principal=principal, upstream=up.name, stream=False, veracity_status=vstatus, fields=fields)
        watch.stop()  # as in _chat_asgi: the client's disconnect no longer cancels the send
        if reply is not None:
            await reply.send(send)
            return
        # the header list _Reply.send builds for {**relayed, x-request-id, x-veracity-status,
        # x-veracity-overhead-ms} (relayed names are lower-case already), without the dict
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in relayed.items()]
        raw += ((b"x-request-id", rid.encode("latin-1")), (b"x-veracity-status", b"skipped"),
                (b"x-veracity-overhead-ms", overhead.encode()),
                *((k.encode("latin-1"), v.encode("latin-1"))
                  for k, v in reports.report_headers(rid, pol[2], state.reports_on).items()),
                (b"content-length", str(len(payload)).encode()), (b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": 200, "headers": raw})
        await send({"type": "http.response.body", "body": payload})

    async def _normal(self, scope: dict[str, Any], receive: Any, send: Any, raw: bytes | None,
                      deployment: str | None) -> None:
        """:func:`_chat` for a request this lane does not take; ``raw``: the body when it was
        already read (its size already checked against the limit)."""
        await _chat_asgi(self.state, scope, receive, send, raw, deployment)


async def _chat_asgi(state: GatewayState, scope: dict[str, Any], receive: Any, send: Any, raw: bytes | None,
                     deployment: str | None = None) -> None:
    """``POST /v1/chat/completions`` on the normal path (:func:`_chat`) as ASGI, watched for
    the client's disconnect (:class:`_DisconnectWatch`). ``raw``: the body when the lean lane
    already read it (its size already checked against the limit), else None; ``deployment``:
    see :func:`_chat`."""
    watch = _DisconnectWatch(receive, _scope_headers(scope), state.sweeper)
    if raw is None:
        read = watch.read_body
    else:
        async def read(limit: int) -> bytes:
            watch.arm()
            return raw
    with watch:
        out = await _chat(state, watch.headers, read, deployment)
        watch.stop()  # from here on the response (StreamingResponse) watches receive()
        if isinstance(out, _Reply):
            await out.send(send)
        else:
            await out(scope, receive, send)


def _replay(first: dict[str, Any], receive: Any) -> Any:
    """An ASGI ``receive`` that returns ``first`` (a message already received) once, then
    defers to ``receive``."""
    pending = [first]

    async def again() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return again


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
        if scope["type"] == "http" and scope["path"] in _CHAT_PATHS and scope["method"] == "POST":
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
        the normal path), else the normal path; ``deployment``: see :func:`_chat`."""
        if self.lean.enabled:
            await self.lean(scope, receive, send, deployment)
        else:
            await _chat_asgi(self.state, scope, receive, send, None, deployment)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        except UpstreamBodyError:
            # a pass-through body failed after its status line: returning with the response
            # incomplete makes the server close the client connection
            return

    async def _logged(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve a request through the FastAPI app, then count it and write its one log line
        from the :class:`_RequestRecord` its handler filled in; the status is the one sent
        (499: the client left before any, 500: nothing was sent)."""
        rec = _RequestRecord(_request_id(_scope_headers(scope)))
        scope = {**scope, _RECORD_KEY: rec}
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
            _finish(self.state, route=rec.route, model=rec.model, status=status, timing=rec.timing, rid=rec.rid,
                    principal=rec.principal, upstream=rec.upstream, stream=False,
                    veracity_status=rec.veracity_status, fields=rec.fields, model_label=rec.model_label)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


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
