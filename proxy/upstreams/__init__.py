"""Upstreams: the protocol the gateway talks to model servers through, the OpenAI and litellm
clients, the HTTP/1.1 hot-path client, and the scripted mock upstream (a first-class provider)."""

__all__ = ["clients", "http1", "mock", "mock_structured"]
