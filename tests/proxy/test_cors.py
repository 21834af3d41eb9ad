"""CORS for browser clients (the ``cors:`` config section, :mod:`proxy._asgi.cors`).

A real gateway with ``cors:`` is driven like a browser would: preflights (``OPTIONS`` with
``Origin`` and ``Access-Control-Request-*``) as raw HTTP, actual requests with the real
``openai`` SDK sending an ``Origin`` header, on the normal path, the lean lane, streams and
error answers. A second gateway without the section must send no CORS header at all and
answer ``OPTIONS`` as before (405). In-process: the lean lane is really taken under CORS, the
app is not wrapped without the section, ``*`` origins; config validation.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import openai
import orjson
import pytest

from proxy import app as app_mod
from proxy._asgi.fastpath import FastPath
from proxy.pipeline import sequence
from proxy.config import (DEFAULT_CORS_ALLOW_HEADERS, ConfigError, GatewayConfig, UpstreamConfig, hash_key,
                          parse_config)
from proxy.upstreams.mock import MockUpstream
from proxy.upstreams import Upstreams
from tests.fixtures.policies import checks_off

ORIGIN = "https://app.example.com"
OTHER_ORIGIN = "https://evil.example.net"
VERIFY_KEY = "vk-cors-verify-0123456789abcdef"  # default policy: the normal path
LEAN_KEY = "vk-cors-lean-0123456789abcdef"  # checks-off policy: the lean lane

SCRIPT: dict[str, Any] = {
    "models": ["gpt-4o"],
    "rules": [
        {"name": "err429", "match": {"last_user": "^err429"},
         "reply": {"status": 429, "error": "Rate limit reached", "headers": {"Retry-After": "7"}}},
        # an upstream (or the CDN in front of it) with CORS and cookies of its own
        {"name": "upstream-cors", "match": {"path": "/v1/embeddings"},
         "reply": {"headers": {"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Credentials": "true",
                               "Set-Cookie": "__cf_bm=abc; path=/; domain=.openai.com; HttpOnly",
                               "openai-processing-ms": "12"}}},
    ],
}

CHECKS_OFF = checks_off("lean")


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockUpstream(SCRIPT) as m:
        yield m


@pytest.fixture(scope="module")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("cors-policies")
    (d / "lean.yaml").write_text(CHECKS_OFF)
    return d


def _config(mock: Any, policies: Path, cors: dict[str, Any] | None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "upstreams": [{"name": "mock", "models": ["gpt-*"], "base_url": mock.base_url, "api_key": "sk-up-cors"}],
        "keys": [{"name": "verify", "hash": hash_key(VERIFY_KEY), "policy": "default"},
                 {"name": "lean", "hash": hash_key(LEAN_KEY), "policy": "lean"}],
        "policies": {"dir": str(policies)},
    }
    if cors is not None:
        cfg["cors"] = cors
    return cfg


@pytest.fixture(scope="module")
def gw(mock: Any, policies: Path, gateway_factory: Any) -> Any:
    return gateway_factory(_config(mock, policies, {"allow_origins": [ORIGIN], "max_age": 300}))


@pytest.fixture(scope="module")
def gw_plain(mock: Any, policies: Path, gateway_factory: Any) -> Any:
    return gateway_factory(_config(mock, policies, None))


def _client(gw: Any, key: str, origin: str = ORIGIN) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0, timeout=30,
                         default_headers={"Origin": origin})


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _preflight(gw: Any, path: str = "/v1/chat/completions", origin: str = ORIGIN,
               req_headers: str = "authorization, content-type, x-stainless-retry-count, x-stainless-os, "
                                  "x-stainless-timeout") -> httpx.Response:
    """What a browser sends before the openai JS SDK's POST (header names lower-case, sorted)."""
    return httpx.options(gw.url + path, trust_env=False, timeout=30, headers={
        "Origin": origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": req_headers})


def _list(value: str | None) -> set[str]:
    return {v.strip().lower() for v in (value or "").split(",") if v.strip()}


def _assert_cors(headers: Any, origin: str = ORIGIN) -> None:
    """The headers a browser needs to hand the response (and Veracity's headers) to the page."""
    assert headers.get("access-control-allow-origin") == origin
    exposed = _list(headers.get("access-control-expose-headers"))
    assert {"x-request-id", "x-veracity-status", "x-veracity-overhead-ms", "retry-after"} <= exposed
    assert "origin" in _list(headers.get("vary"))  # caches must not serve it to another origin
    assert "access-control-allow-credentials" not in headers


# --------------------------------------------------------------------------- preflight


def test_preflight_allowed_origin(gw: Any) -> None:
    r = _preflight(gw)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == ORIGIN
    assert {"get", "post", "options"} <= _list(r.headers["access-control-allow-methods"])
    assert {"authorization", "content-type", "x-stainless-retry-count", "openai-organization",
            "x-veracity-policy"} <= _list(r.headers["access-control-allow-headers"])
    assert r.headers["access-control-max-age"] == "300"
    # each name once, whatever its case (Starlette added its safelisted `Content-Type` to ours)
    names = [n.strip() for n in r.headers["access-control-allow-headers"].split(",")]
    assert len(names) == len({n.lower() for n in names}), names
    assert {"accept", "content-type", "content-language"} <= set(names)  # the safelisted ones stay
    # any path, e.g. the model list the SDK's models.list() reads
    assert _preflight(gw, "/v1/models").headers["access-control-allow-origin"] == ORIGIN


def test_preflight_default_headers_cover_the_js_sdk(gw: Any) -> None:
    """Every default allowed header passes a preflight (the browser asks for them all at once)."""
    r = _preflight(gw, req_headers=",".join(sorted(DEFAULT_CORS_ALLOW_HEADERS)))
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("origin,req_headers", [
    (OTHER_ORIGIN, "authorization, content-type"),
    ("https://app.example.com.evil.example.net", "authorization"),  # exact match, not a prefix
    (ORIGIN, "authorization, x-not-allowed"),
])
def test_preflight_denied(gw: Any, origin: str, req_headers: str) -> None:
    r = _preflight(gw, origin=origin, req_headers=req_headers)
    assert r.status_code == 400
    if origin != ORIGIN:
        assert "access-control-allow-origin" not in r.headers  # the browser refuses the call
    # OpenAI's error shape (curl users read it), naming what was refused
    assert r.headers["content-type"] == "application/json"
    err = r.json()["error"]
    assert err["code"] == "cors_preflight_refused" and err["type"] == "invalid_request_error"
    assert ("origin" if origin != ORIGIN else "headers") in err["message"]


# --------------------------------------------------------------------------- actual requests


@pytest.mark.parametrize("key,path", [(VERIFY_KEY, "normal"), (LEAN_KEY, "lean lane")])
def test_chat_answer_has_cors_headers(gw: Any, key: str, path: str) -> None:
    raw = _client(gw, key).chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("hello"))
    _assert_cors(raw.headers)
    assert raw.headers["x-veracity-status"] in ("skipped", "passed")
    assert raw.parse().choices[0].message.content == "Mock reply to: hello"


def test_stream_has_cors_headers(gw: Any) -> None:
    with _client(gw, VERIFY_KEY).chat.completions.with_streaming_response.create(
            model="gpt-4o", messages=_user("stream me"), stream=True) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        _assert_cors(raw.headers)
        text = "".join(c.choices[0].delta.content or "" for c in raw.parse() if c.choices)
    assert text == "Mock reply to: stream me"


def test_model_list_has_cors_headers(gw: Any) -> None:
    raw = _client(gw, VERIFY_KEY).models.with_raw_response.list()
    _assert_cors(raw.headers)
    assert [m.id for m in raw.parse().data] == ["gpt-4o"]


def test_bad_key_401_has_cors_headers(gw: Any) -> None:
    """A 401 without CORS headers reaches the page as an opaque network error."""
    with pytest.raises(openai.AuthenticationError) as ei:
        _client(gw, "vk-not-a-key").chat.completions.create(model="gpt-4o", messages=_user("x"))
    _assert_cors(ei.value.response.headers)
    assert ei.value.code == "invalid_api_key"


@pytest.mark.parametrize("key", [VERIFY_KEY, LEAN_KEY])
def test_upstream_429_has_cors_headers_and_exposes_retry_after(gw: Any, key: str) -> None:
    with pytest.raises(openai.RateLimitError) as ei:
        _client(gw, key).chat.completions.create(model="gpt-4o", messages=_user("err429"))
    _assert_cors(ei.value.response.headers)
    assert ei.value.response.headers["retry-after"] == "7"


def test_gateway_errors_outside_chat_have_cors_headers(gw: Any) -> None:
    r = httpx.get(gw.url + "/not-a-route", headers={"Origin": ORIGIN}, trust_env=False, timeout=30)
    assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_url"
    _assert_cors(r.headers)
    r = httpx.post(gw.base_url + "/chat/completions", content=b"{not json", headers={
        "Origin": ORIGIN, "Authorization": f"Bearer {VERIFY_KEY}", "Content-Type": "application/json"},
        trust_env=False, timeout=30)
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_json"
    _assert_cors(r.headers)


def test_other_origin_gets_no_allow_origin(gw: Any) -> None:
    raw = _client(gw, VERIFY_KEY, origin=OTHER_ORIGIN).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=_user("hello"))
    assert "access-control-allow-origin" not in raw.headers  # the browser withholds the answer
    assert raw.parse().choices[0].message.content == "Mock reply to: hello"


# --------------------------------------------------------------------------- no section: as before


def test_no_cors_section_no_cors_headers(gw_plain: Any) -> None:
    for key in (VERIFY_KEY, LEAN_KEY):
        raw = _client(gw_plain, key).chat.completions.with_raw_response.create(model="gpt-4o",
                                                                               messages=_user("hello"))
        assert raw.parse().choices[0].message.content == "Mock reply to: hello"
        assert not [h for h in raw.headers if h.lower().startswith("access-control-")]
        assert "vary" not in raw.headers
    r = httpx.get(gw_plain.url + "/not-a-route", headers={"Origin": ORIGIN}, trust_env=False, timeout=30)
    assert r.status_code == 404 and not [h for h in r.headers if h.startswith("access-control-")]


def test_upstream_cors_and_cookies_are_not_relayed(gw: Any, gw_plain: Any) -> None:
    """The gateway's origin is not the upstream's: CORS is the gateway's own decision (its
    ``cors:`` section) and the upstream's cookies are scoped to the upstream's domain, so a
    pass-through answer keeps neither; its other headers are relayed."""
    for g in (gw, gw_plain):
        raw = _client(g, LEAN_KEY).embeddings.with_raw_response.create(model="gpt-4o", input="hi")
        assert raw.parse().data and raw.headers.get("openai-processing-ms") == "12"
        assert "set-cookie" not in raw.headers
        assert "access-control-allow-credentials" not in raw.headers
        if g is gw:
            assert raw.headers.get("access-control-allow-origin") == ORIGIN
        else:
            assert not [h for h in raw.headers if h.lower().startswith("access-control-")]


def test_no_cors_section_preflight_is_405_as_before(gw_plain: Any) -> None:
    r = _preflight(gw_plain)
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed"
    assert not [h for h in r.headers if h.startswith("access-control-")]


# --------------------------------------------------------------------------- in-process


def _cfg(mock_url: str, tmp_path: Path, cors: Any) -> GatewayConfig:
    (tmp_path / "default.yaml").write_text(CHECKS_OFF.replace("name: lean", "name: default"))
    return GatewayConfig(upstreams=[UpstreamConfig(name="up", base_url=mock_url, models=["gpt-*"])],
                         policies={"dir": str(tmp_path)}, verification={}, cors=cors)


async def _asgi(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]],
                body: bytes = b"") -> tuple[int, dict[bytes, bytes], bytes]:
    scope = {"type": "http", "method": method, "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"content-length", str(len(body)).encode()), *headers], "http_version": "1.1",
             "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1234), "root_path": ""}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(msg: dict[str, Any]) -> None:
        sent.append(msg)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    return (start["status"], dict(start["headers"]),
            b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))


def test_lean_lane_is_taken_under_cors(mock: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CORS wrapper sits outside the fast path: the lean lane still serves the request
    (no pipeline call) and its raw ASGI answer gets the CORS headers."""
    app = app_mod.create_app(_cfg(mock.base_url, tmp_path, parse_config(
        f"cors: {{allow_origins: ['{ORIGIN}']}}").cors))
    calls: list[int] = []
    real = sequence.chat_completion

    async def spy(ctx: Any, b: dict[str, Any]) -> Any:
        calls.append(1)
        return await real(ctx, b)

    monkeypatch.setattr(sequence, "chat_completion", spy)
    body = orjson.dumps({"model": "gpt-4o", "messages": _user("lean")})

    async def go() -> tuple[int, dict[bytes, bytes], bytes]:
        state = app.state  # attribute access falls through CORS to FastPath's Gateway
        state.upstreams = await Upstreams.start(state.cfg)
        try:
            return await _asgi(app, "POST", "/v1/chat/completions", [
                (b"content-type", b"application/json"), (b"authorization", b"Bearer sk-client"),
                (b"origin", ORIGIN.encode())], body)
        finally:
            await state.upstreams.close()

    status, headers, payload = asyncio.run(go())
    assert status == 200 and calls == []  # served by the lean lane
    assert headers[b"access-control-allow-origin"] == ORIGIN.encode()
    assert b"x-veracity-status" in headers[b"access-control-expose-headers"]
    assert orjson.loads(payload)["veracity"]["status"] == "skipped"


def test_without_cors_section_the_app_is_not_wrapped(tmp_path: Path) -> None:
    assert type(app_mod.create_app(_cfg("http://127.0.0.1:9/v1", tmp_path, None))) is FastPath


def test_wildcard_origin(tmp_path: Path) -> None:
    cors = parse_config("cors: {allow_origins: ['*'], allow_headers: ['*']}").cors
    app = app_mod.create_app(_cfg("http://127.0.0.1:9/v1", tmp_path, cors))
    status, headers, _ = asyncio.run(_asgi(app, "OPTIONS", "/v1/chat/completions", [
        (b"origin", b"https://anything.example"), (b"access-control-request-method", b"POST"),
        (b"access-control-request-headers", b"authorization, x-some-new-sdk-header")]))
    assert status == 200 and headers[b"access-control-allow-origin"] == b"*"
    assert headers[b"access-control-allow-headers"] == b"authorization, x-some-new-sdk-header"
    status, headers, _ = asyncio.run(_asgi(app, "GET", "/healthz", [(b"origin", b"https://anything.example")]))
    assert status == 200 and headers[b"access-control-allow-origin"] == b"*"


# --------------------------------------------------------------------------- config


@pytest.mark.parametrize("text,expected", [
    ("cors:\n  allow_origins: ['*']\n  allow_credentials: true\n",
     "veracity.yaml:2: cors.allow_origins: '*' cannot be used with allow_credentials: true"),
    ("cors:\n  allow_credentials: true\n  allow_origins: [https://a.example]\n  expose_headers: ['*']\n",
     "veracity.yaml:4: cors.expose_headers: '*' cannot be used with allow_credentials: true"),
    ("cors:\n  allow_origins: ['https://app.example.com/']\n",
     "veracity.yaml:2: cors.allow_origins: 'https://app.example.com/' is not an origin"),
    ("cors:\n  allow_origins: ['*']\n  allow_headers: ['x-stainless-*']\n",
     "veracity.yaml:3: cors.allow_headers: 'x-stainless-*' is not a header name"),
    ("cors:\n  allow_origin_regex: '(['\n", "veracity.yaml:2: cors.allow_origin_regex: not a valid regular"),
    ("cors:\n  max_age: -1\n  allow_origins: ['*']\n", "veracity.yaml:2: cors.max_age:"),
    ("cors:\n  allow_origin: ['*']\n", "veracity.yaml:2: cors.allow_origin: Extra inputs are not permitted"),
    ("cors: {}\n", "veracity.yaml:1: cors: list at least one origin"),
])
def test_config_errors_name_field_and_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, filename="veracity.yaml")
    assert str(ei.value).startswith(expected), str(ei.value)


def test_config_defaults_and_normalisation() -> None:
    assert parse_config("upstreams: []\n").cors is None
    cors = parse_config("cors:\n  allow_origins: ['HTTPS://App.Example.com:8443', 'http://localhost:5173']\n"
                        "  allow_methods: [get, post]\n  allow_credentials: true\n").cors
    assert cors is not None
    assert cors.allow_origins == ["https://app.example.com:8443", "http://localhost:5173"]
    assert cors.allow_methods == ["GET", "POST"] and cors.allow_credentials
    assert "authorization" in cors.allow_headers and "x-request-id" in cors.expose_headers
    assert cors.max_age == 600
