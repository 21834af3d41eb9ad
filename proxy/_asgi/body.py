"""Reading a request off ASGI: its headers, its body within the size limit, the body as a JSON
object.

The chat route reads straight from ASGI ``receive`` (no Starlette ``Request``): the body
arrives in one message for almost every request, and the size limit
(``limits.max_body_bytes``) is enforced from ``Content-Length`` first, then while reading, so
an oversized body is never held whole. Every failure is a :class:`proxy.wire.errors.GatewayError`
in OpenAI's shape: 400 ``invalid_request`` (a bad ``Content-Length``), 413
``request_too_large``, 415 ``unsupported_content_encoding``, 400 ``invalid_json``, and 499
``client_closed_request`` when the client leaves mid-body.
"""

from __future__ import annotations

from typing import Any

from proxy.wire.json import MAX_JSON_DEPTH, deeper_than, loads_strict
from proxy.wire.errors import GatewayError

__all__ = ["MAX_JSON_DEPTH", "scope_headers", "content_length", "receive_body", "parse_json_object", "replay"]


def scope_headers(scope: dict[str, Any]) -> dict[str, str]:
    """The request headers as a dict of lower-case names (the first of repeated headers wins,
    as with Starlette's ``Headers.get``)."""
    out: dict[str, str] = {}
    for k, v in scope["headers"]:
        name = k.decode("latin-1").lower()
        if name not in out:
            out[name] = v.decode("latin-1")
    return out


def content_length(headers: Any, limit: int) -> int | None:
    """The request's ``Content-Length`` (None without one); GatewayError 400 when it is not an
    integer, 413 when it exceeds ``limit`` bytes."""
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


async def receive_body(receive: Any, headers: Any, limit: int) -> bytes:
    """The request body read from ASGI ``receive`` (no Starlette ``Request``), or 413 once it
    exceeds ``limit`` bytes (``Content-Length`` first, then while reading); 499 when the client
    disconnects before the whole body arrived."""
    content_length(headers, limit)
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


def parse_json_object(raw: bytes, encoding: str | None = None) -> dict[str, Any]:
    """The body as a JSON object, else GatewayError 400 ``invalid_json`` (also for nesting
    deeper than :data:`MAX_JSON_DEPTH`: orjson writes at most 255 levels, so a deeper body
    could not be forwarded); a compressed body (``Content-Encoding`` other than ``identity``:
    ``encoding``) is 415, not a parse error."""
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


def replay(first: dict[str, Any], receive: Any) -> Any:
    """An ASGI ``receive`` that returns ``first`` (a message already received) once, then
    defers to ``receive``."""
    pending = [first]

    async def again() -> dict[str, Any]:
        return pending.pop() if pending else await receive()

    return again
