"""Clients of the Azure OpenAI shape (``openai.AzureOpenAI`` / ``AsyncAzureOpenAI`` with
``azure_endpoint`` = the gateway), driven against a real gateway process and the scripted
upstream: ``/openai/deployments/{deployment}/...`` paths, ``api-version`` query, ``api-key``
header (virtual keys and pass-through auth), metrics labels and secrets."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.config import hash_key
from tests.fixtures.mock import scripted_mock
from tests.fixtures.polling import wait_for

API_VERSION = "2024-10-21"
# Azure keys are 32 hex digits: nothing key-shaped (sk-..., Bearer ...) for the log redaction to catch
UPSTREAM_KEY = secrets.token_hex(16)
VIRTUAL_KEY = secrets.token_hex(16)

SCRIPT: dict[str, Any] = {
    "models": ["gpt-4o", "gpt-4o-mini"],
    "rules": [
        {"name": "math-right", "match": {"last_user": "^What is 17 \\* 23"},
         "reply": {"content": "17 * 23 = 391, so the answer is 391.", "stream": {"chunk_size": 6}}},
    ],
}

POLICY = {"name": "default", "on_failure": "correct", "risk": {"threshold": 0.1},
          "verifiers": {"arithmetic": {"enabled": True}, "code": {"enabled": False},
                        "citations": {"enabled": False}},
          "sentinel": {"mode": "off"}, "streaming": {"mode": "passthrough"}}


mock, _reset_mock = scripted_mock(SCRIPT)


def _config(mock: Any, tmp: Path, **extra: Any) -> dict[str, Any]:
    pdir = tmp / "policies"
    pdir.mkdir(exist_ok=True)
    (pdir / "default.yaml").write_text(yaml.safe_dump(POLICY))
    return {"upstreams": [{"name": "mock", "models": ["gpt-*", "text-embedding-*"], "base_url": mock.base_url,
                           **extra.pop("upstream", {})}],
            "policies": {"dir": str(pdir), "check_interval_s": 0},
            "verification": {"audit": str(tmp / "audit.jsonl"), "budget_db": str(tmp / "budget.sqlite3")},
            **extra}


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    """Virtual keys; the upstream has its own key."""
    return gateway_factory(_config(mock, tmp_path_factory.mktemp("azure-keys"),
                                   upstream={"api_key": "${TEST_UPSTREAM_KEY}"},
                                   keys=[{"name": "azure-app", "hash": hash_key(VIRTUAL_KEY), "team": "blue",
                                          "policy": "default"}]),
                           env={"TEST_UPSTREAM_KEY": UPSTREAM_KEY})


@pytest.fixture(scope="module")
def gw_pass(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    """Pass-through auth: no virtual keys, the upstream has no key of its own."""
    return gateway_factory(_config(mock, tmp_path_factory.mktemp("azure-pass")))


def _azure(gw: Any, key: str = VIRTUAL_KEY, **kw: Any) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(azure_endpoint=gw.url, api_key=key, api_version=API_VERSION, max_retries=0,
                              timeout=60, **kw)


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _requests(mock: Any, path: str) -> list[dict[str, Any]]:
    return [r for r in mock.requests() if r["path"] == path]


def test_chat_non_stream_is_verified_and_reaches_the_upstream_as_v1(gw: Any, mock: Any) -> None:
    raw = _azure(gw).chat.completions.with_raw_response.create(model="gpt-4o", messages=_user("What is 17 * 23?"))
    resp = raw.parse()
    assert resp.choices[0].message.content == "17 * 23 = 391, so the answer is 391."
    rep = resp.model_extra["veracity"]
    assert rep["status"] == "passed"
    assert rep["checks"] and {(c["verifier"], c["outcome"]) for c in rep["checks"]} == {("arithmetic", "pass")}
    assert raw.headers["x-veracity-status"] == "passed"
    sent = _requests(mock, "/v1/chat/completions")
    assert len(sent) == 1
    assert sent[0]["body"]["model"] == "gpt-4o"
    assert sent[0]["query"] == ""  # api-version is not forwarded
    assert sent[0]["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the upstream's key, not the client's
    assert "api-key" not in sent[0]["headers"]


def test_the_deployment_wins_over_the_body_model(gw: Any, mock: Any) -> None:
    # azure_deployment= puts the deployment in the URL; the body still says model="gpt-4o-mini"
    client = _azure(gw, azure_deployment="gpt-4o")
    resp = client.chat.completions.create(model="gpt-4o-mini", messages=_user("which model?"))
    assert resp.choices[0].message.content == "Mock reply to: which model?"
    assert [r["body"]["model"] for r in _requests(mock, "/v1/chat/completions")] == ["gpt-4o"]


async def test_async_stream_carries_the_report(gw: Any) -> None:
    client = openai.AsyncAzureOpenAI(azure_endpoint=gw.url, api_key=VIRTUAL_KEY, api_version=API_VERSION,
                                     max_retries=0, timeout=60)
    stream = await client.chat.completions.create(model="gpt-4o", messages=_user("What is 17 * 23?"), stream=True)
    text, reports, finishes = "", [], []
    async for chunk in stream:
        extra = chunk.model_extra or {}
        if "veracity" in extra:
            reports.append(extra["veracity"])
        for ch in chunk.choices:
            text += ch.delta.content or ""
            if ch.finish_reason:
                finishes.append(ch.finish_reason)
    await client.close()
    assert text == "17 * 23 = 391, so the answer is 391."
    assert finishes == ["stop"]
    assert [r["status"] for r in reports] == ["passed"]


def test_bad_key_is_401_in_openai_shape_and_never_echoed(gw: Any) -> None:
    wrong = secrets.token_hex(16)
    with pytest.raises(openai.AuthenticationError) as ei:
        _azure(gw, key=wrong).chat.completions.create(model="gpt-4o", messages=_user("hi"))
    assert ei.value.status_code == 401
    assert ei.value.body["code"] == "invalid_api_key" and ei.value.body["type"] == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError):
        _azure(gw, key=wrong).embeddings.create(model="text-embedding-3-small", input="x")
    # and the accepted key, the rejected one and the upstream's key appear nowhere
    _azure(gw).chat.completions.create(model="gpt-4o", messages=_user("ok"))
    wait_for(lambda: len([r for r in gw.log_records() if r.get("event") == "request"]) >= 1, "request lines")
    everything = gw.log() + gw.metrics() + json.dumps(ei.value.body)
    for secret in (wrong, VIRTUAL_KEY, UPSTREAM_KEY):
        assert secret not in everything


def test_authorization_wins_over_api_key(gw: Any) -> None:
    body = {"messages": _user("both headers")}
    url = gw.url + "/openai/deployments/gpt-4o/chat/completions?api-version=" + API_VERSION
    ok = httpx.post(url, json=body, headers={"authorization": f"Bearer {VIRTUAL_KEY}", "api-key": "wrong"},
                    trust_env=False, timeout=30)
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"] == "Mock reply to: both headers"
    bad = httpx.post(url, json=body, headers={"authorization": "Bearer wrong-key", "api-key": VIRTUAL_KEY},
                     trust_env=False, timeout=30)
    assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_api_key"


def test_azure_ad_token_is_a_bearer_token(gw: Any) -> None:
    # azure_ad_token= makes the SDK send Authorization: Bearer (no api-key): a virtual key works there too
    client = openai.AzureOpenAI(azure_endpoint=gw.url, azure_ad_token=VIRTUAL_KEY, api_version=API_VERSION,
                                max_retries=0, timeout=60)
    resp = client.chat.completions.create(model="gpt-4o", messages=_user("entra"))
    assert resp.choices[0].message.content == "Mock reply to: entra"


def test_api_key_header_works_on_v1_routes_too(gw: Any) -> None:
    r = httpx.post(gw.base_url + "/chat/completions", json={"model": "gpt-4o", "messages": _user("v1")},
                   headers={"api-key": VIRTUAL_KEY}, trust_env=False, timeout=30)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "Mock reply to: v1"
    assert httpx.get(gw.base_url + "/models", headers={"api-key": VIRTUAL_KEY}, trust_env=False).status_code == 200
    assert httpx.get(gw.base_url + "/models", trust_env=False).status_code == 401


def test_embeddings_via_the_deployment_path_reach_the_upstream_as_v1(gw: Any, mock: Any) -> None:
    client = _azure(gw, azure_deployment="text-embedding-3-small")
    out = client.embeddings.create(model="ignored-by-azure", input=["a", "b"])
    assert [d.index for d in out.data] == [0, 1] and len(out.data[0].embedding) == 8
    sent = _requests(mock, "/v1/embeddings")
    assert len(sent) == 1
    assert sent[0]["body"]["model"] == "text-embedding-3-small" and sent[0]["body"]["input"] == ["a", "b"]
    assert "api-version" not in sent[0]["query"]
    assert sent[0]["headers"]["authorization"] == f"Bearer {UPSTREAM_KEY}" and "api-key" not in sent[0]["headers"]


def test_unknown_deployment_is_404_in_openai_shape(gw: Any) -> None:
    with pytest.raises(openai.NotFoundError) as ei:
        _azure(gw).chat.completions.create(model="no-such-deployment", messages=_user("hi"))
    assert ei.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError) as ei:
        _azure(gw, azure_deployment="no-such-deployment").embeddings.create(model="x", input="x")
    assert ei.value.body["code"] == "model_not_found"
    # a deployment path with nothing after the deployment
    r = httpx.post(gw.url + "/openai/deployments/gpt-4o", json={}, headers={"api-key": VIRTUAL_KEY}, trust_env=False)
    assert r.status_code == 404 and "error" in r.json()


def test_openai_v1_base_path_and_model_list(gw: Any, mock: Any) -> None:
    # Azure's newer surface: a plain OpenAI client with base_url {endpoint}/openai/v1
    client = openai.OpenAI(base_url=gw.url + "/openai/v1", api_key=VIRTUAL_KEY, max_retries=0, timeout=60)
    resp = client.chat.completions.create(model="gpt-4o", messages=_user("What is 17 * 23?"))
    assert resp.model_extra["veracity"]["status"] == "passed"
    # non-deployment calls of a client bound to a deployment go to {endpoint}/openai/{path}
    ids = {m.id for m in _azure(gw, azure_deployment="gpt-4o").models.list()}
    assert ids == {"gpt-4o", "gpt-4o-mini"}


def test_metrics_use_the_canonical_route(gw: Any) -> None:
    _azure(gw).chat.completions.create(model="gpt-4o", messages=_user("metrics"))
    text = gw.metrics()
    assert 'route="/v1/chat/completions"' in text
    assert "/openai/" not in text and "deployments" not in text


def test_pass_through_forwards_api_key_as_bearer(gw_pass: Any, mock: Any) -> None:
    client_key = secrets.token_hex(16)
    resp = _azure(gw_pass, key=client_key).chat.completions.create(model="gpt-4o", messages=_user("pass me"))
    assert resp.choices[0].message.content == "Mock reply to: pass me"
    _azure(gw_pass, key=client_key, azure_deployment="text-embedding-3-small").embeddings.create(
        model="x", input="x")
    sent = _requests(mock, "/v1/chat/completions") + _requests(mock, "/v1/embeddings")
    assert len(sent) == 2
    for r in sent:
        assert r["headers"]["authorization"] == f"Bearer {client_key}"
        assert "api-key" not in r["headers"]
    assert client_key not in gw_pass.log() + gw_pass.metrics()


# ------------------------------------------------------------------------- in-process: the mapping


@pytest.mark.parametrize("raw,deployment,path", [
    (b"/openai/deployments/gpt-4o/chat/completions", "gpt-4o", "/v1/chat/completions"),
    (b"/openai/deployments/org%2Fmodel/embeddings", "org/model", "/v1/embeddings"),  # slash inside the name
    (b"/openai/deployments/d/audio/transcriptions", "d", "/v1/audio/transcriptions"),
    (b"/openai/v1/chat/completions", None, "/v1/chat/completions"),
    (b"/openai/models", None, "/v1/models"),
    (b"/openai/files/file%20x", None, "/v1/files/file x"),
])
def test_parse_maps_azure_paths_onto_v1(raw: bytes, deployment: str | None, path: str) -> None:
    from proxy.wire import azure

    got = azure.parse(raw)
    assert got is not None
    assert (got.deployment, got.path) == (deployment, path)
    assert got.is_chat == (path == "/v1/chat/completions")


@pytest.mark.parametrize("raw", [b"/openai/deployments/", b"/openai/deployments/gpt-4o",
                                 b"/openai/deployments/gpt-4o/", b"/openai/deployments/%20/chat/completions",
                                 b"/openai/", b"/v1/chat/completions", b"/openaix/models"])
def test_parse_rejects_what_is_not_an_azure_route(raw: bytes) -> None:
    from proxy.wire import azure

    assert azure.parse(raw) is None


def test_api_version_is_dropped_from_the_query_only() -> None:
    from proxy.wire import azure

    assert azure.without_api_version(b"api-version=2024-10-21") == b""
    assert azure.without_api_version(b"limit=2&api-version=2024-10-21&after=x") == b"limit=2&after=x"
    assert azure.without_api_version(b"limit=2") == b"limit=2"
