"""The speed layer (private): ASGI pieces under the routes — the HTTP/1.1 server protocol, CORS,
giving memory back to the OS. Nothing here decides what a request means."""

__all__ = ["cors", "inbound", "memory"]
