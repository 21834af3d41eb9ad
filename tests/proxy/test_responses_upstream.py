"""proxy/upstreams/responses.py in-process: which mode an upstream gets, and a native call's
failures mapped as the chat client maps them (a real OpenAIUpstream; the scripted upstream in a
thread, or a port nothing listens on)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import aiohttp
import pytest

from proxy.config import UpstreamConfig
from proxy.upstreams import BoundUpstream, LiteLLMUpstream, OpenAIUpstream, Timing
from proxy.upstreams.mock import MockUpstream
from proxy.upstreams.responses import ResponsesUpstream, mode_of
from proxy.wire.errors import UpstreamError
from proxy.wire.responses import to_chat


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _call(base_url: str, req: dict[str, Any], **kw: Any) -> tuple[Any, BoundUpstream, ResponsesUpstream]:
    async with aiohttp.ClientSession() as session:
        up = OpenAIUpstream(UpstreamConfig(name="u", base_url=base_url), session, connect_timeout_s=2,
                            read_timeout_s=5, connect_retries=kw.get("retries", 1))
        bound = BoundUpstream(up, "Bearer sk-test", Timing())
        tr = to_chat(req)
        ad = ResponsesUpstream(bound, req, tr, native=True, client_headers={"openai-beta": "x"})
        try:
            return await ad.complete(tr.chat), bound, ad
        except UpstreamError as exc:
            return exc, bound, ad


def test_modes():
    openai_up = OpenAIUpstream.__new__(OpenAIUpstream)
    openai_up.config = UpstreamConfig(name="a", base_url="http://x/v1")
    assert mode_of(openai_up) == "native"
    openai_up.config = UpstreamConfig(name="a", base_url="http://x/v1", responses="translated")
    assert mode_of(openai_up) == "translated"
    lite = LiteLLMUpstream(UpstreamConfig(name="l", provider="litellm", responses="native"))
    assert mode_of(lite) == "translated"          # litellm speaks chat completions only


def test_native_call_through_the_http1_client_keeps_the_response():
    with MockUpstream({"rules": [{"match": {"last_user": "hi"}, "reply": {"content": "Hello.",
                                                                          "headers": {"x-request-id": "up-1"}}}]}) as mock:
        req = {"model": "m", "input": "hi", "store": False, "vendor": 1}
        out, bound, ad = asyncio.run(_call(mock.base_url, req))
        sent = [r for r in mock.requests() if r["path"] == "/v1/responses"][-1]
    assert out["choices"][0]["message"]["content"] == "Hello."
    assert ad.responses[out["id"]]["object"] == "response"
    assert ad.headers["x-upstream-request-id"] == "up-1"
    assert sent["body"] == req and sent["headers"]["authorization"] == "Bearer sk-test"
    assert sent["headers"]["openai-beta"] == "x"
    assert bound.timing.upstream_calls == 1 and bound.timing.upstream_s > 0


def test_native_call_maps_failures():
    err, bound, _ = asyncio.run(_call(f"http://127.0.0.1:{_closed_port()}/v1", {"model": "m", "input": "hi"}))
    assert isinstance(err, UpstreamError) and (err.status, err.reason) == (502, "connect")
    with MockUpstream({"rules": [{"match": {"path": "/v1/responses"},
                                  "reply": {"status": 429, "error": "Slow down.", "headers": {"retry-after": "3"}}}]}) as mock:
        err, _, _ = asyncio.run(_call(mock.base_url, {"model": "m", "input": "hi"}))
    assert isinstance(err, UpstreamError) and err.status == 429 and b"Slow down." in err.body
    assert err.headers["retry-after"] == "3"


@pytest.mark.parametrize("stream", [False, True])
def test_the_verifier_models_calls_go_to_chat_completions(stream):
    with MockUpstream({"rules": []}) as mock:
        async def go():
            async with aiohttp.ClientSession() as session:
                up = OpenAIUpstream(UpstreamConfig(name="u", base_url=mock.base_url), session, connect_timeout_s=2,
                                    read_timeout_s=5, connect_retries=0)
                req = {"model": "m", "input": "hi"}
                ad = ResponsesUpstream(BoundUpstream(up, None, Timing()), req, to_chat(req), native=True,
                                       client_headers={})
                plan = {"model": "m", "messages": [{"role": "user", "content": "plan this"}]}
                if stream:
                    s = await ad.open_stream(dict(plan, stream=True))
                    async for _ in s:
                        pass
                    await s.aclose()
                else:
                    await ad.complete(plan)
        asyncio.run(go())
        paths = [r["path"] for r in mock.requests()]
    assert paths == ["/v1/chat/completions"]
