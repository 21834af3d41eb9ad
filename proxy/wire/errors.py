"""Errors in OpenAI's wire shape, and the gateway's mapping of failures to HTTP statuses.

Every error body is ``{"error": {"message", "type", "param", "code"}}`` as the OpenAI API
returns it (https://platform.openai.com/docs/guides/error-codes), so the ``openai`` SDK raises
its usual typed exceptions (``BadRequestError`` 400, ``AuthenticationError`` 401,
``NotFoundError`` 404, ``RateLimitError`` 429, ``InternalServerError`` >= 500, ...).

Mapping (docs/errors.md):

=====================================  ======  =======================================
failure                                status  ``type`` / ``code``
=====================================  ======  =======================================
body is not JSON / not an object       400     invalid_request_error / invalid_json
``model`` missing                      400     invalid_request_error / missing_model
bad or missing virtual key             401     invalid_request_error / invalid_api_key
no upstream serves the model           404     invalid_request_error / model_not_found
body larger than ``limits.max_body``   413     invalid_request_error / request_too_large
upstream answered with an HTTP error   same    the upstream's body, relayed unchanged
                                               (plus ``Retry-After``/rate-limit headers)
upstream unreachable (connect failed)  502     upstream_error / upstream_connect_error
upstream sent something unusable       502     upstream_error / upstream_bad_response
upstream answer over the size limit    502     upstream_error / upstream_response_too_large
upstream timed out                     504     upstream_error / upstream_timeout
anything unexpected in the gateway     500     server_error / internal_error
=====================================  ======  =======================================

Mid-stream failures are sent as one SSE event ``data: {"error": {...}}``; the ``openai`` SDK
raises ``openai.APIError`` on it (``openai/_streaming.py``: a data object with an ``error`` key).
"""

from __future__ import annotations

import json
from typing import Any

from proxy.wire.sse import frame


class GatewayError(Exception):
    """A failure with a client-facing OpenAI-shaped error. ``status`` is the HTTP status;
    ``headers`` are extra response headers (e.g. ``Retry-After``)."""

    def __init__(self, status: int, message: str, *, type: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The ``{"error": {...}}`` dict."""
        return error_body(self.message, type=self.type, code=self.code, param=self.param)


class UpstreamError(Exception):
    """An upstream call failed. Raised by :mod:`proxy.upstreams` (``complete``, ``open_stream``,
    stream iteration).

    Attributes:
        status: HTTP status for the client: the upstream's own status when it answered with
            one (4xx/5xx), 502 for connect failures and unusable answers, 504 for timeouts.
        body: the upstream's error body (bytes) when it sent one, else None.
        headers: upstream response headers worth relaying (``Retry-After``, ``x-ratelimit-*``).
        reason: short label for ``veracity_upstream_errors_total{reason}``: ``http_<status>``,
            ``connect``, ``timeout``, ``disconnect`` (connection lost mid-response),
            ``bad_response``, ``too_large`` (answer over ``limits.max_response_bytes``).
        message: one line for logs and synthesized error bodies (never contains secrets).
    """

    def __init__(self, status: int, message: str, *, reason: str, body: bytes | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.body = body
        self.headers = headers or {}

    @property
    def code(self) -> str:
        """The ``error.code`` used when the gateway synthesizes the body."""
        return {
            "connect": "upstream_connect_error",
            "timeout": "upstream_timeout",
            "disconnect": "upstream_disconnected",
            "bad_response": "upstream_bad_response",
            "truncated": "upstream_stream_truncated",
            "too_large": "upstream_response_too_large",
        }.get(self.reason, "upstream_error")

    def response_body(self) -> bytes:
        """The body for the client: the upstream's JSON error unchanged when it sent a JSON
        object, else an OpenAI-shaped error synthesized from ``message``."""
        if self.body:
            try:
                parsed = json.loads(self.body)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                return self.body
        etype = "upstream_error" if self.status >= 500 else "invalid_request_error"
        return json.dumps(error_body(self.message, type=etype, code=self.code)).encode()

    def sse_event(self) -> bytes:
        """This failure as the final SSE event of a stream (``data: {"error": {...}}``)."""
        return sse_error_event(self.message, type="upstream_error", code=self.code)


def error_body(message: str, *, type: str = "invalid_request_error", code: str | None = None,
               param: str | None = None) -> dict[str, Any]:
    """OpenAI's error object: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def sse_error_event(message: str, *, type: str = "upstream_error", code: str | None = None) -> bytes:
    """One SSE event carrying an error, which the ``openai`` SDK raises as ``APIError``."""
    return frame(json.dumps(error_body(message, type=type, code=code)).encode())
