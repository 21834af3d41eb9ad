"""Gateway start-up modes and deployment shapes, each on a real process: pass-through auth,
``OPENAI_API_KEY`` mode, demo mode, ``--workers 2`` metrics totals, content logging."""

from __future__ import annotations

import re
import secrets
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from proxy.upstreams.mock import MockUpstream

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockUpstream({"models": ["gpt-4o", "mock-model"]}) as m:
        yield m


def _chat_requests(mock: Any) -> list[dict[str, Any]]:
    return [r for r in mock.requests() if r["path"] == "/v1/chat/completions"]


def test_pass_through_auth_forwards_client_key(mock: Any, gateway_factory: Any) -> None:
    gw = gateway_factory({"upstreams": [{"name": "m", "base_url": mock.base_url}],
                          "logging": {"log_content": True}})
    client_key = "sk-proj-" + secrets.token_urlsafe(30)
    client = openai.OpenAI(base_url=gw.base_url, api_key=client_key, max_retries=0)
    mock.reset()
    r = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "pass me"}])
    assert r.choices[0].message.content == "Mock reply to: pass me"
    assert _chat_requests(mock)[-1]["headers"]["authorization"] == f"Bearer {client_key}"
    ready = httpx.get(gw.url + "/readyz", trust_env=False).json()
    assert ready["auth"] == "pass_through"
    # log_content: prompt and answer text are in the request line, the client's key is not
    records = [x for x in gw.log_records() if x.get("event") == "request"]
    assert records[-1]["messages"] == [{"role": "user", "content": "pass me"}]
    assert "Mock reply to: pass me" in str(records[-1]["choices"])
    assert client_key not in gw.log()
    # models: passthrough of the upstream's list, with the client's key
    assert {m.id for m in client.models.list()} == {"gpt-4o", "mock-model"}


def test_openai_api_key_mode(mock: Any, gateway_factory: Any) -> None:
    key = "sk-proj-" + secrets.token_urlsafe(30)
    gw = gateway_factory(None, env={"OPENAI_API_KEY": key, "OPENAI_BASE_URL": mock.base_url})
    mock.reset()
    client = openai.OpenAI(base_url=gw.base_url, api_key="anything", max_retries=0)
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert _chat_requests(mock)[-1]["headers"]["authorization"] == f"Bearer {key}"
    first = gw.log_records()[0]
    assert first["mode"] == "env" and "OPENAI_API_KEY" in first["event"]
    # the line names where requests go: OPENAI_BASE_URL's server, not "the OpenAI API"
    assert "OpenAI API" not in first["event"] and f"OPENAI_BASE_URL ({mock.base_url})" in first["event"]
    assert key not in gw.log()


def test_start_up_line_says_openai_api_only_for_its_url() -> None:
    from proxy.config import default_config
    from proxy.cli.serve import _source

    assert _source(default_config({"OPENAI_API_KEY": "sk-x"})) == "OPENAI_API_KEY (OpenAI API)"
    assert _source(default_config({"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "https://api.openai.com/v1/"})) \
        == "OPENAI_API_KEY (OpenAI API)"
    local = default_config({"OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": "http://u:pw@127.0.0.1:8000/v1?k=1"})
    assert _source(local) == "OPENAI_API_KEY and OPENAI_BASE_URL (http://127.0.0.1:8000/v1)"  # no credentials


def test_demo_mode_first_log_line(gateway_factory: Any) -> None:
    gw = gateway_factory(None)
    first = gw.log_records()[0]
    assert "DEMO MODE" in first["event"] and first["mode"] == "demo"
    client = openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)
    r = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "What is 17 * 23?"}])
    assert "391" in r.choices[0].message.content
    chunks = list(client.chat.completions.create(
        model="gpt-4o-mini", stream=True, messages=[{"role": "user", "content": "Write a Python function"}]))
    assert "def fib" in "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_workers_2_metrics_are_totals(mock: Any, gateway_factory: Any) -> None:
    gw = gateway_factory({"upstreams": [{"name": "m", "base_url": mock.base_url}]}, workers=2)
    gw.wait_workers(2)  # /readyz answered once the first worker was up; the second may still be starting
    n = 0
    pids: set[int] = set()
    deadline = time.monotonic() + 120
    while n < 20 or (len(pids) < 2 and time.monotonic() < deadline):  # a new connection per request: both serve
        r = httpx.post(gw.base_url + "/chat/completions", trust_env=False, timeout=10,
                       json={"model": "mock-model", "messages": [{"role": "user", "content": "count"}]})
        assert r.status_code == 200
        n += 1
        if n % 10 == 0:
            pids = {x["pid"] for x in gw.log_records() if x.get("event") == "request"}
    assert len(pids) == 2, "requests were not spread over both workers"
    pat = re.compile(r'veracity_requests_total\{model="mock-model",route="/v1/chat/completions",status="200",'
                     r'team="default"\} (\S+)')
    for _ in range(4):  # every scrape, whichever worker answers, reports the total
        text = httpx.get(gw.url + "/metrics", trust_env=False).text
        m = pat.search(text)
        assert m and float(m.group(1)) == n


def test_bad_config_exits_nonzero_naming_field_and_line(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("upstreams:\n  - name: a\n    base_url: http://x/v1\n    modelz: ['*']\n")
    p = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", str(cfg), "--port", "0"],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2
    assert f"{cfg}:4: upstreams.0.modelz" in p.stderr
    assert "Traceback" not in p.stderr


def test_litellm_provider_upstream(mock: Any, gateway_factory: Any) -> None:
    """``provider: litellm`` translated through litellm (here to the mock, as an OpenAI provider)."""
    pytest.importorskip("litellm")
    gw = gateway_factory({"upstreams": [{
        "name": "ll", "provider": "litellm", "models": ["claude-test"],
        "litellm_params": {"model": "openai/gpt-4o", "api_base": mock.base_url, "api_key": "sk-fake-for-mock"}}]})
    client = openai.OpenAI(base_url=gw.base_url, api_key="unused", max_retries=0)
    r = client.chat.completions.create(model="claude-test", messages=[{"role": "user", "content": "via litellm"}])
    assert r.choices[0].message.content == "Mock reply to: via litellm"
    chunks = list(client.chat.completions.create(model="claude-test", stream=True,
                                                 messages=[{"role": "user", "content": "streamed"}]))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Mock reply to: streamed"
    assert [m.id for m in client.models.list()] == ["claude-test"]
