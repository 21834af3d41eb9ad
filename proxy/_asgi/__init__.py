"""The speed layer (private): ASGI pieces under the routes. :mod:`~proxy._asgi.fastpath` (the app
the server runs and the checks-off chat lane), request ids, body reading, disconnect watching,
the HTTP/1.1 server protocol, CORS, giving memory back to the OS. Nothing here decides what a
request means: that is :mod:`proxy.routes`."""

__all__ = ["body", "cors", "disconnect", "fastpath", "inbound", "memory", "request_ids"]
