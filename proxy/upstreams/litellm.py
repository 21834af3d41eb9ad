"""Providers reached through litellm (``provider: litellm``): the ones that need translation to
and from the OpenAI wire format. litellm is imported lazily (at start-up, in a thread, only when
such an upstream is configured) with ``LITELLM_LOCAL_MODEL_COST_MAP=True``, so it never fetches
the cost map from the network.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from proxy.config import UpstreamConfig
from proxy.redaction import scrub_text
from proxy.upstreams.protocol import Tenant, Timing, UpstreamStream
from proxy.wire.errors import UpstreamError
from proxy.wire.json import dumps
from proxy.wire.sse import DONE_FRAME, frame

__all__ = ["LiteLLMUpstream"]


class LiteLLMUpstream:
    """A provider reached through litellm (``provider: litellm``). ``litellm_params`` are passed
    to ``litellm.acompletion`` (e.g. ``model: anthropic/claude-3-5-sonnet-20240620``,
    ``api_key``, ``api_base``); without ``model`` there, the request's model is used as is.
    litellm is imported at start-up only when such an upstream is configured (3.5-4.8 s,
    ~200 MB; BENCH-NOTES.md), with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (no network at import).
    Chat completions only (``http_api`` false): the pass-through routes need an OpenAI-compatible
    upstream."""

    #: chat completions only: not an :class:`proxy.upstreams.protocol.HttpUpstream`
    http_api = False

    def __init__(self, config: UpstreamConfig) -> None:
        self.name = config.name
        self.config = config
        self._litellm: Any = None

    async def warm_up(self) -> None:
        """Import litellm now (in a thread), not on the first request: it takes seconds."""
        await asyncio.to_thread(self._lib)

    def _lib(self) -> Any:
        if self._litellm is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm  # noqa: PLC0415 - lazily: heavy import

            litellm.drop_params = False
            self._litellm = litellm
        return self._litellm

    def _args(self, body: dict[str, Any]) -> dict[str, Any]:
        args = {**body, **self.config.litellm_params}
        if self.config.api_key and "api_key" not in args:
            args["api_key"] = self.config.api_key.get_secret_value()
        if self.config.base_url and "api_base" not in args:
            args["api_base"] = self.config.base_url
        return args

    def _error(self, exc: Exception) -> UpstreamError:
        lib = self._lib()
        status = getattr(exc, "status_code", None)
        if isinstance(exc, getattr(lib, "Timeout", ())):
            return UpstreamError(504, f"upstream {self.name!r} timed out", reason="timeout")
        if isinstance(exc, getattr(lib, "APIConnectionError", ())) or not isinstance(status, int):
            return UpstreamError(502, f"cannot reach upstream {self.name!r} through litellm", reason="connect")
        body = dumps({"error": {"message": scrub_text(str(getattr(exc, "message", ""))) or type(exc).__name__,
                                "type": "upstream_error", "param": None, "code": f"http_{status}"}})
        return UpstreamError(status, f"upstream {self.name!r} answered HTTP {status}", reason=f"http_{status}",
                             body=body)

    async def complete(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                       tenant: Tenant = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """``litellm.acompletion`` -> the OpenAI-shaped dict. Raises :class:`UpstreamError`."""
        lib = self._lib()
        t0 = time.perf_counter()
        try:
            resp = await lib.acompletion(**self._args(body))
        except Exception as exc:  # noqa: BLE001 - litellm raises many types; map them all
            raise self._error(exc) from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            timing.upstream_calls += 1
        return resp.model_dump(), {}

    async def open_stream(self, body: dict[str, Any], *, auth: str | None, timing: Timing,
                          tenant: Tenant = ()) -> UpstreamStream:
        """``litellm.acompletion(stream=True)`` re-encoded as SSE bytes."""
        lib = self._lib()
        t0 = time.perf_counter()
        try:
            wrapper = await lib.acompletion(**{**self._args(body), "stream": True})
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc) from None
        finally:
            timing.upstream_s += time.perf_counter() - t0
            timing.upstream_calls += 1

        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for chunk in wrapper:
                    yield frame(dumps(chunk.model_dump(exclude_none=True)))
            except Exception as exc:  # noqa: BLE001
                raise self._error(exc) from None
            yield DONE_FRAME

        return UpstreamStream(chunks(), headers={}, timing=timing)
