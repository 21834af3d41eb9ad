"""All configured upstreams of one process (:class:`Upstreams`): built from the config, routed by
model name, warmed up at start-up and closed at shutdown."""

from __future__ import annotations

import aiohttp

from proxy.config import GatewayConfig
from proxy.upstreams import http1
from proxy.upstreams.litellm import LiteLLMUpstream
from proxy.upstreams.openai import OpenAIUpstream
from proxy.upstreams.protocol import HttpUpstream, Upstream, is_http_upstream

__all__ = ["Upstreams"]


class Upstreams:
    """All configured upstreams of one process, sharing one aiohttp session and one
    :class:`http1.Http1Client` (keep-alive pools per origin).

    Create inside the event loop (``await Upstreams.start(cfg)``) and ``await close()`` at
    shutdown. ``route(model)`` returns the first upstream serving ``model`` (config order).
    """

    def __init__(self, cfg: GatewayConfig, session: aiohttp.ClientSession) -> None:
        self.session = session
        self.http = http1.Http1Client(keepalive_s=30.0)
        lim = cfg.limits
        self.all: list[Upstream] = []
        for u in cfg.upstreams:
            if u.provider == "litellm":
                self.all.append(LiteLLMUpstream(u))
            else:
                self.all.append(OpenAIUpstream(u, session, connect_timeout_s=lim.connect_timeout_s,
                                               read_timeout_s=lim.read_timeout_s,
                                               connect_retries=lim.connect_retries,
                                               max_response_bytes=lim.max_response_bytes,
                                               max_event_bytes=lim.max_event_bytes,
                                               http=self.http))
        self._cache: dict[str, Upstream] = {}

    @classmethod
    async def start(cls, cfg: GatewayConfig) -> "Upstreams":
        """Open the shared session (keep-alive pool, no limit on connections per host,
        ``trust_env=False``: no proxy env lookups per request)."""
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, keepalive_timeout=30)
        session = aiohttp.ClientSession(connector=connector, trust_env=False,
                                        skip_auto_headers=("User-Agent",), auto_decompress=True)
        ups = cls(cfg, session)
        for u in ups.all:  # pools, the TLS trust store, litellm's import: now, not on the first request
            await u.warm_up()
        return ups

    def route(self, model: str) -> Upstream | None:
        """The upstream for ``model`` or None (results cached per model name)."""
        hit = self._cache.get(model)
        if hit is not None:
            return hit
        for u in self.all:
            if u.config.serves(model):
                if len(self._cache) < 4096:
                    self._cache[model] = u
                return u
        return None

    def default(self) -> HttpUpstream | None:
        """The first OpenAI-compatible upstream (``http_api``: for pass-through routes without a model)."""
        return next((u for u in self.all if is_http_upstream(u)), None)

    async def close(self) -> None:
        """Close the HTTP/1.1 pools and the shared aiohttp session."""
        self.http.close()
        await self.session.close()
