"""The gateway's HTTP/1.1 server protocol: uvicorn's httptools one, with the request head bounded.

uvicorn's httptools protocol has no limit on a request's head: llhttp keeps an unfinished URL
or header field and the protocol keeps every field, so one client sending an endless header
grows the gateway's memory for as long as it sends (measured before this module: 20 MB of
header lines were buffered and answered 200; uvicorn issue #157, PR #1684 closed without a
limit). uvicorn's h11 protocol has one: h11's ``max_incomplete_event_size``, 16 KiB by default.
:class:`BoundedHttpToolsProtocol` applies the same 16 KiB to a request head (request line and
header fields) and refuses a larger one with a 400 and the connection closed, as uvicorn's h11
protocol does when h11 refuses one.

Every request the server layer refuses before the app sees it -- malformed framing that llhttp
rejects (``Content-Length: abc``, ``-1``, two different values, ``Content-Length`` with
``Transfer-Encoding``, an obs-fold line, a bare CR, a NUL in a header), or a head over the limit
-- is answered in OpenAI's error shape (the product's rule for bad input; uvicorn writes ``400 text/plain``
"Invalid HTTP request received."): ``400 application/json``
``{"error": {"message", "type": "invalid_request_error", "param": null, "code":
"invalid_request"}}``, the message naming llhttp's reason (e.g. "Invalid character in
Content-Length"), and ``connection: close``, as before.
"""

from __future__ import annotations

import json
import sys

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

#: Largest request head (request line and header fields), bytes: h11's
#: ``DEFAULT_MAX_INCOMPLETE_EVENT_SIZE``, uvicorn's ``--h11-max-incomplete-event-size`` default.
MAX_REQUEST_HEAD = 16 * 1024

_TOO_LARGE = f"Request head (request line and header fields) larger than {MAX_REQUEST_HEAD} bytes."


def error_400(message: str) -> bytes:
    """The body of a server-layer 400: OpenAI's error object, ``code`` ``invalid_request``
    (https://platform.openai.com/docs/guides/error-codes)."""
    return json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": "invalid_request"}}).encode()


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's ``HttpToolsProtocol`` refusing a request whose head is still unfinished after
    :data:`MAX_REQUEST_HEAD` bytes (so at most that plus one socket read is ever buffered).
    A head is unfinished while the request's scope has no ``method`` yet (uvicorn creates the
    scope when a message begins and sets ``method`` when its headers are complete); no parser
    callback is overridden, so a request costs one check per read (~0.3 us measured in a
    Python replica on this machine; the gateway spends ~400 us of CPU per request,
    bench/results/gateway.md)."""

    _head_scope: object = None
    _unfinished = 0

    def data_received(self, data: bytes) -> None:
        HttpToolsProtocol.data_received(self, data)  # not super(): ~0.1 us less per read
        scope = self.scope
        if scope is not None and "method" not in scope and not self.transport.is_closing():
            if scope is not self._head_scope:  # a new request's head began in this read
                self._head_scope, self._unfinished = scope, 0
            self._unfinished += len(data)
            if self._unfinished > MAX_REQUEST_HEAD:
                self.logger.warning(_TOO_LARGE)
                self.send_400_response(_TOO_LARGE)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's refusal (malformed request, or the head limit above) in OpenAI's error
        shape. Called by uvicorn inside its ``except httptools.HttpParserError`` block: the
        parser's own reason, when there is one, replaces uvicorn's generic message."""
        exc = sys.exc_info()[1]
        if isinstance(exc, httptools.HttpParserError) and exc.args and isinstance(exc.args[0], str):
            msg = f"Invalid HTTP request: {exc.args[0].rstrip('.')}."
        body = error_400(msg)
        content = [STATUS_LINE[400]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content += [b"content-type: application/json\r\ncontent-length: ", str(len(body)).encode("ascii"),
                    b"\r\nconnection: close\r\n\r\n", body]
        self.transport.write(b"".join(content))
        self.transport.close()
