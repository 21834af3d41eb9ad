"""The OpenAI wire format: errors in OpenAI's error shape, server-sent events, Azure paths."""

__all__ = ["errors", "sse", "azure"]
