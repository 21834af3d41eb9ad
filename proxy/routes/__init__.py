"""HTTP routes of the gateway, one module per concern: what a request means (the route table
itself is in :mod:`proxy.app`; the ASGI speed layer under it in :mod:`proxy._asgi`)."""

__all__ = ["chat", "fallback", "health", "models", "passthrough", "reports", "responses", "review_page", "reviews", "verify"]
