"""The answers of last resort: a request no route serves, and an exception no handler caught.

Starlette's routing errors in OpenAI's shape (:func:`http_exception`): 404 ``unknown_url``
naming the routes (and the ``/v1`` prefix a client's ``base_url`` may lack), 405
``method_not_allowed`` whose ``Allow`` lists every method served on the path (RFC 9110 section
10.2.1; Starlette lists only the first route's). An exception that escaped a handler
(:func:`unhandled`) is a 500 ``internal_error`` without a stack trace; a pass-through body
that failed after its status line (:class:`proxy.routes.passthrough.UpstreamBodyError`) is
left to abort the connection.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

from proxy.routes._respond import JSON, log, record
from proxy.routes.passthrough import UpstreamBodyError
from proxy.wire.json import dumps
from proxy.wire.errors import error_body

__all__ = ["ROUTES_HINT", "http_exception", "unhandled", "allowed_methods"]

#: the routes named by a 404 ``unknown_url``
ROUTES_HINT = ("This gateway serves the OpenAI API under /v1 (POST /v1/chat/completions, GET /v1/models, "
               "POST /v1/veracity/verify, GET /v1/veracity/reports/{request_id}, GET/POST /v1/veracity/reviews; "
               "other /v1/* paths go to the upstream) and GET /healthz, /readyz, /metrics.")


async def http_exception(request: Request, exc: StarletteHTTPException) -> Response:
    """Starlette's routing errors in OpenAI's shape: 404 ``unknown_url`` naming the routes
    (and the ``/v1`` prefix a client's ``base_url`` lacks), 405 ``method_not_allowed`` whose
    ``Allow`` lists every method served on the path (Starlette lists only the first route's)."""
    rec = record(request, None)
    # Starlette's own ``Allow`` is dropped: the 405 below sets the complete one (both were sent)
    headers = {k: v for k, v in (getattr(exc, "headers", None) or {}).items() if k.lower() != "allow"}
    headers["x-request-id"] = rec.rid
    method, path = request.method, request.url.path[:200]
    if exc.status_code == 404:
        code = "unknown_url"
        message = f"Unknown request URL: {method} {path}. {ROUTES_HINT}"
        if not path.startswith("/v1/") and path not in ("/", "/v1"):
            message += f" Did you mean /v1{path}? A client's base_url ends in /v1 ({str(request.base_url).rstrip('/')}/v1)."
    elif exc.status_code == 405:
        code = "method_not_allowed"
        allow = allowed_methods(request)
        headers["allow"] = ", ".join(allow)
        message = f"Method Not Allowed: {method} {path}. Allowed: {', '.join(allow)}."
    else:
        code, message = None, str(exc.detail)
    rec.fields["error_code"] = code
    return Response(dumps(error_body(message, code=code)), exc.status_code, headers=headers, media_type=JSON)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route serves on the request's path, sorted (the ``Allow`` of a 405,
    RFC 9110 section 10.2.1)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


async def unhandled(request: Request, exc: Exception) -> Response:
    """An exception no handler caught: 500 ``internal_error`` (logged with the path and the
    exception's type); an empty 502 for :class:`UpstreamBodyError`, whose response had started
    (logged where raised)."""
    if isinstance(exc, UpstreamBodyError):  # logged where raised; the response had started
        return Response(b"", 502)
    log.error("unhandled error", path=request.url.path, exception=type(exc).__name__)
    return Response(dumps(error_body("The gateway hit an internal error.", type="server_error",
                                     code="internal_error")), 500, media_type=JSON)
