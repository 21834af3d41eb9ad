"""proxy.upstreams: the ``Upstream`` protocol is the type callers use, and they ask its
capabilities (``http_api``, ``warm_up``) rather than the provider's class.

In-process, no server: the registry is built from a config with a litellm upstream listed
before an OpenAI-compatible one (litellm is never imported here: ``warm_up`` is not awaited)."""

from __future__ import annotations

import asyncio

import proxy.upstreams as upstreams
from proxy.config import GatewayConfig, UpstreamConfig
from proxy.upstreams import HttpUpstream, LiteLLMUpstream, OpenAIUpstream, Upstream, Upstreams, is_http_upstream


def _cfg() -> GatewayConfig:
    return GatewayConfig(upstreams=[
        UpstreamConfig(name="claude", provider="litellm", models=["claude-*"]),
        UpstreamConfig(name="local", base_url="http://127.0.0.1:9/v1", models=["*"]),
    ])


def test_public_surface_is_importable():
    assert sorted(upstreams.__all__) == sorted(set(upstreams.__all__))
    for name in upstreams.__all__:
        assert getattr(upstreams, name) is not None, name


def test_capabilities_decide_routes_not_classes():
    async def go() -> None:
        import aiohttp

        session = aiohttp.ClientSession()
        try:
            ups = Upstreams(_cfg(), session)
            lite, http = ups.all
            assert isinstance(lite, LiteLLMUpstream) and isinstance(http, OpenAIUpstream)
            # the litellm upstream serves chat completions only: no pass-through, no lean lane
            assert not is_http_upstream(lite) and is_http_upstream(http)
            assert not is_http_upstream(None)
            assert ups.route("claude-3") is lite and ups.route("gpt-4o") is http
            # pass-through without a model: the first upstream that speaks the HTTP API, not the first one
            assert ups.default() is http
            # the pool is opened by warm_up, before any request
            assert http._pool is None
            await http.warm_up()
            assert http._pool is not None
        finally:
            ups.http.close()
            await session.close()

    asyncio.run(go())


def test_providers_satisfy_the_protocol_statically():
    # the annotations are what a type checker sees; the attributes are what callers read
    up: Upstream = LiteLLMUpstream(UpstreamConfig(name="c", provider="litellm", models=["c-*"]))
    assert up.http_api is False and callable(up.warm_up)
    assert OpenAIUpstream.http_api is True
    for name in ("request", "list_models", "read_capped", "too_large_error"):
        assert callable(getattr(OpenAIUpstream, name)), name
        assert name in HttpUpstream.__dict__, name
