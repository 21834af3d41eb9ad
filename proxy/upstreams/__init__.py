"""Upstreams: how the gateway talks to model servers.

* :mod:`~proxy.upstreams.protocol` -- :class:`Upstream` (what every provider implements; callers
  ask its capabilities, never its class), :class:`HttpUpstream`, :class:`BoundUpstream` (an
  upstream bound to one request), :class:`Timing`, :class:`UpstreamStream`;
* :mod:`~proxy.upstreams.openai` -- :class:`OpenAIUpstream`, any OpenAI-compatible server;
* :mod:`~proxy.upstreams.litellm` -- :class:`LiteLLMUpstream`, providers that need translation;
* :mod:`~proxy.upstreams.registry` -- :class:`Upstreams`, the configured ones of a process;
* :mod:`~proxy.upstreams.http1` -- the HTTP/1.1 client of the non-stream hot path;
* :mod:`~proxy.upstreams.responses` -- :class:`~proxy.upstreams.responses.ResponsesUpstream`,
  one ``POST /v1/responses`` request's upstream as the chat pipeline sees it (native or
  translated; imported on its own);
* :mod:`~proxy.upstreams.mock` -- the scripted OpenAI-compatible upstream (a first-class
  provider, as pydantic-ai keeps ``models/test.py`` beside its real providers; imported on its
  own: ``from proxy.upstreams.mock import MockUpstream``; its Responses API route is
  :mod:`~proxy.upstreams.mock_responses`).
"""

from proxy.upstreams.litellm import LiteLLMUpstream
from proxy.upstreams.openai import ERROR_BODY_LIMIT, OpenAIUpstream, relay_headers, tenant_headers
from proxy.upstreams.protocol import (
    BoundUpstream,
    HttpUpstream,
    Tenant,
    Timing,
    Upstream,
    UpstreamStream,
    is_http_upstream,
)
from proxy.upstreams.registry import Upstreams

__all__ = [
    "ERROR_BODY_LIMIT",
    "BoundUpstream",
    "HttpUpstream",
    "LiteLLMUpstream",
    "OpenAIUpstream",
    "Tenant",
    "Timing",
    "Upstream",
    "UpstreamStream",
    "Upstreams",
    "is_http_upstream",
    "relay_headers",
    "tenant_headers",
]
