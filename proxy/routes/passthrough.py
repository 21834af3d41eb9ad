"""Every other ``/v1/*`` request (embeddings, audio, files, stored completions, ``/v1/models/{id}``,
...): passed through to the matching upstream untouched.

The request goes to the upstream serving the body's ``model`` (or the ``/v1/models/{model}``
path's model; else the first OpenAI-compatible upstream) and its answer is relayed byte for
byte, streamed. What is not relayed: framing and hop-by-hop headers, the upstream's cookies and
CORS headers (:data:`DROP_RESPONSE_HEADERS`); relayed header values and error bodies are
scrubbed of the gateway's secrets. A path that would leave the upstream's API prefix
(``..``, encoded or not) is 404, and so is an unknown ``/v1/veracity/*`` path (the gateway's
own namespace is never forwarded; a known one with another method is 405). Metrics label
these requests :data:`PASSTHROUGH_ROUTE` / model ``_passthrough`` (bounded cardinality), with the
caller's team.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from urllib.parse import unquote

import aiohttp
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Match

from proxy import redaction
from proxy.observability import metrics
from proxy.observability.log import scrub_secrets
from proxy.routes._access import credential, route_model
from proxy.routes._respond import JSON, RequestRecord, error_response, log, record, upstream_error_response
from proxy._asgi.body import receive_body
from proxy.upstreams import ERROR_BODY_LIMIT, is_http_upstream
from proxy.wire.json import dumps, loads
from proxy.wire import azure
from proxy.wire.errors import GatewayError, UpstreamError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["PASSTHROUGH_ROUTE", "DROP_RESPONSE_HEADERS", "passthrough", "UpstreamBodyError", "escapes_api_prefix"]

#: the ``route`` label of every pass-through request (never the raw path: bounded cardinality)
PASSTHROUGH_ROUTE = "/v1/*"
#: upstream response headers a pass-through answer does not relay: framing and hop-by-hop
#: headers (RFC 9110 section 7.6.1; the gateway frames its own answer), the upstream's cookies
#: (scoped to the upstream's domain, meaningless and a leak on the gateway's) and CORS headers
#: (:data:`DROP_RESPONSE_PREFIXES`; CORS is the gateway's own ``cors:`` section: an upstream's
#: ``*`` or credentials grant must not reach a browser through it)
DROP_RESPONSE_HEADERS = frozenset({"content-length", "content-encoding", "transfer-encoding", "connection",
                                   "keep-alive", "server", "date", "set-cookie"})
DROP_RESPONSE_PREFIXES = ("access-control-",)


class UpstreamBodyError(Exception):
    """A pass-through answer failed after its status line went out (connection lost, body over
    ``limits.max_response_bytes``): raised out of the response so that the server aborts the
    client connection (the client sees a cut body, e.g. an unterminated chunked encoding)
    instead of a shorter body presented as complete."""


def escapes_api_prefix(path: str) -> bool:
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


def own_methods(request: Request) -> list[str]:
    """The methods the gateway's own ``/v1/veracity/*`` routes serve on the request's path,
    sorted (empty when none of them matches the path): the ``Allow`` of a 405 there."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        if getattr(route, "path", "").startswith("/v1/veracity"):
            match, _ = route.matches(request.scope)
            if match != Match.NONE:
                methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def _count_error(rec: RequestRecord, reason: str, status: int) -> None:
    """One failed upstream call of a pass-through request: ``veracity_upstream_errors_total``
    with the request's metrics labels (model ``_passthrough``, the caller's team)."""
    metrics.upstream_error(reason, rec.model_label or "_passthrough",
                           rec.principal.team if rec.principal is not None else metrics.NO_TEAM, status)


async def passthrough(request: Request) -> Response:
    """Any other ``/v1/*`` request: sent to the upstream serving the body's ``model`` (or the
    ``/v1/models/{model}`` path's model; else the first OpenAI-compatible upstream) and its
    answer relayed byte for byte (streamed). An Azure deployment path (:mod:`proxy.wire.azure`)
    routes by its deployment, which also replaces a JSON body's ``model``; other bodies
    (multipart audio) are forwarded as sent."""
    state: Gateway = request.app.state.gw
    rec = record(request, PASSTHROUGH_ROUTE)
    rec.model_label = "_passthrough"  # bounded: pass-through model names are whatever the client sent
    timing, rid = rec.timing, rec.rid
    path = request.url.path
    try:
        if escapes_api_prefix(path) or escapes_api_prefix(request.scope.get("raw_path", b"").decode("latin-1")):
            raise GatewayError(404, f"Unknown request URL: {request.method} {path[:200]}.", code="unknown_url")
        if path == "/v1/veracity" or path.startswith("/v1/veracity/"):  # the gateway's own routes
            allow = own_methods(request)
            if allow:  # a path the gateway serves, with another method (DELETE on a report): 405
                raise GatewayError(405, f"Method Not Allowed: {request.method} {path[:200]}. "
                                        f"Allowed: {', '.join(allow)}.",
                                   code="method_not_allowed", headers={"allow": ", ".join(allow)})
            raise GatewayError(404, f"Unknown request URL: {request.method} {path[:200]}.", code="unknown_url")
        principal = rec.principal = state.auth.authenticate(credential(request.headers))
        raw = await receive_body(request.receive, request.headers, state.max_body)
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
            up = route_model(state, principal, model)
        else:
            up = state.upstreams.default()
        rec.upstream = up.name if up is not None else None
        if not is_http_upstream(up):  # litellm upstreams serve chat completions only
            raise GatewayError(404, f"Unknown request URL: {request.method} {path[:200]}: no OpenAI-compatible "
                               "upstream serves it for this model.", code="unknown_url")
        resp = await up.request(request.method, path[len("/v1"):], query=request.url.query, body=raw,
                                headers=request.headers, auth=principal.upstream_auth, timing=timing)
    except GatewayError as exc:
        rec.fields["error_code"] = exc.code
        return error_response(exc, rid, timing)
    except UpstreamError as exc:
        rec.fields["error_code"] = exc.code
        _count_error(rec, exc.reason, exc.status)
        return upstream_error_response(exc, rid, timing)
    # an upstream may echo the key it was sent in a header of its own: relayed values are scrubbed
    headers = {k: redaction.scrub_text(v) for k, v in resp.headers.items()
               if k.lower() not in DROP_RESPONSE_HEADERS and not k.lower().startswith(DROP_RESPONSE_PREFIXES)}
    headers["x-request-id"] = rid
    if resp.status >= 400:  # error bodies are small: read, and never relay the upstream's key in one
        ctype = resp.headers.get("content-type")
        try:  # the whole body: one read() may return only what has arrived so far
            err = scrub_secrets(await up.read_capped(resp, min(up.max_response_bytes, ERROR_BODY_LIMIT)))
        except (UpstreamError, aiohttp.ClientError, asyncio.TimeoutError):  # too large, or lost: our own error
            err = UpstreamError(resp.status, f"upstream {up.name!r} answered HTTP {resp.status}",
                                reason=f"http_{resp.status}").response_body()
            ctype = JSON
        finally:
            resp.close()
        return Response(err, resp.status, headers=headers, media_type=ctype)
    length = resp.content_length
    if length is not None and length > up.max_response_bytes:
        exc = up.too_large_error(resp)
        rec.fields["error_code"] = exc.code
        _count_error(rec, exc.reason, exc.status)
        return upstream_error_response(exc, rid, timing)

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
            _count_error(rec, reason, resp.status)  # the status line went out: counted with it
            log.warning("pass-through answer cut: client connection aborted", request_id=rid, path=path[:200],
                        upstream=up.name, reason=reason)
            raise UpstreamBodyError(f"upstream {up.name!r} body failed mid-way ({reason}); the client "
                                    "connection is aborted") from None
        finally:
            resp.close()

    rec.stream = (resp.headers.get("content-type") or "").startswith("text/event-stream")  # the log line's
    return StreamingResponse(body(), status_code=resp.status, headers=headers,
                             media_type=resp.headers.get("content-type"))
