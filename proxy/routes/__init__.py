"""HTTP routes of the gateway, one module per concern (the route table itself is in :mod:`proxy.app`)."""

__all__ = ["review_page"]
