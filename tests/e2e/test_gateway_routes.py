"""The gateway's URL surface, as a newcomer following the README meets it: a real gateway
process, the real ``openai`` SDK and the scripted upstream.

* clients whose ``base_url`` lacks ``/v1`` get the model list as well as chat completions;
* an unknown URL is a 404 ``unknown_url`` that names the routes (and the missing ``/v1``);
* a method the gateway does not serve on a path is a 405 ``method_not_allowed`` whose
  ``Allow`` lists every method served there; ``GET /v1/chat/completions`` is OpenAI's stored
  completions list and reaches the upstream like any other pass-through path;
* every request to an API route writes exactly one ``"event": "request"`` log line and one
  ``veracity_requests_total`` increment with a bounded ``route`` label; ``/healthz``,
  ``/readyz`` and ``/metrics`` write neither;
* every error code the gateway can emit is in the error table of docs/errors.md.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.upstreams.mock import MockUpstream
from tests.fixtures.polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
SCRIPT: dict[str, Any] = {"models": ["gpt-4o", "text-embedding-3-small"], "rules": []}


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockUpstream(SCRIPT) as m:
        yield m


def _config(mock: Any, tmp: Path) -> dict[str, Any]:
    return {"upstreams": [{"name": "mock", "models": ["gpt-*", "text-embedding-*"],
                                           "base_url": mock.base_url}],
                            "verification": {"audit": str(tmp / "audit.jsonl"),
                                             "budget_db": str(tmp / "budget.sqlite3")}}


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    return gateway_factory(_config(mock, tmp_path_factory.mktemp("routes")))


@pytest.fixture(scope="module")
def gw_counted(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    """A gateway only the counting test uses: each of its requests has written its log line
    (so it has been counted) before the next one starts, nothing else runs there."""
    return gateway_factory(_config(mock, tmp_path_factory.mktemp("routes-counted")))


def _http() -> httpx.Client:
    return httpx.Client(trust_env=False, timeout=60, headers={"authorization": "Bearer sk-client"})


def _error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    err = r.json()["error"]
    assert err["code"] == code and isinstance(err["message"], str)
    return err


# --------------------------------------------------------------------------- base_url without /v1


def test_bare_base_url_client_lists_and_retrieves_models(gw: Any, mock: Any) -> None:
    bare = openai.OpenAI(base_url=gw.url, api_key="sk-client", max_retries=0, timeout=60)
    v1 = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=60)
    assert {m.id for m in bare.models.list()} == {m.id for m in v1.models.list()} == {
        "gpt-4o", "text-embedding-3-small"}
    assert bare.models.retrieve("gpt-4o").id == "gpt-4o"
    with pytest.raises(openai.NotFoundError):
        bare.models.retrieve("gpt-nope")
    out = bare.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert out.choices[0].message.content


# --------------------------------------------------------------------------- 404 / 405


@pytest.mark.parametrize("path", ["/embeddings", "/not-a-route", "/v2/chat/completions"])
def test_unknown_url_names_the_routes_and_the_v1_prefix(gw: Any, path: str) -> None:
    with _http() as http:
        err = _error(http.post(gw.url + path, json={"model": "gpt-4o", "input": "x"}), 404, "unknown_url")
    assert path in err["message"] and "/v1/chat/completions" in err["message"]
    assert f"Did you mean /v1{path}?" in err["message"] and f"{gw.url}/v1" in err["message"]


def test_root_404_lists_the_routes_without_a_bogus_hint(gw: Any) -> None:
    with _http() as http:
        err = _error(http.get(gw.url + "/"), 404, "unknown_url")
    assert "/v1/chat/completions" in err["message"] and "Did you mean" not in err["message"]


def test_sdk_with_bare_base_url_gets_a_404_that_says_what_to_fix(gw: Any) -> None:
    bare = openai.OpenAI(base_url=gw.url, api_key="sk-client", max_retries=0, timeout=60)
    with pytest.raises(openai.NotFoundError) as ei:
        bare.embeddings.create(model="text-embedding-3-small", input="x")
    assert "/v1/embeddings" in str(ei.value)


def test_wrong_method_is_405_with_every_allowed_method(gw: Any) -> None:
    with _http() as http:
        r = http.request("OPTIONS", gw.base_url + "/chat/completions")
        _error(r, 405, "method_not_allowed")
        allow = {m.strip() for m in r.headers["allow"].split(",")}
        assert {"GET", "POST"} <= allow  # POST: chat; GET: passed through (stored completions)
        r = http.post(gw.url + "/healthz")
        _error(r, 405, "method_not_allowed")
        assert {m.strip() for m in r.headers["allow"].split(",")} == {"GET", "HEAD"}
        r = http.get(gw.base_url + "/veracity/verify")
        _error(r, 405, "method_not_allowed")
        assert r.headers["allow"] == "POST"


def test_get_chat_completions_is_passed_through(gw: Any, mock: Any) -> None:
    """``GET /v1/chat/completions`` is OpenAI's list of stored chat completions
    (``client.chat.completions.list()``): it goes to the upstream, whose answer is relayed
    (the scripted upstream does not implement it: its own 404)."""
    mock.reset()
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=60)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.list()
    assert [(r["method"], r["path"]) for r in mock.requests()] == [("GET", "/v1/chat/completions")]


# --------------------------------------------------------------------------- one log line, one count


def _count(gw: Any, route: str, status: int) -> float:
    total = 0.0
    for fam in text_string_to_metric_families(gw.metrics()):
        for s in fam.samples:
            if (s.name == "veracity_requests_total" and s.labels.get("route") == route
                    and s.labels.get("status") == str(status)):
                total += s.value
    return total


def _request_lines(gw: Any, rid: str) -> list[dict[str, Any]]:
    return [r for r in gw.log_records() if r.get("event") == "request" and r.get("request_id") == rid]


CASES = [  # method, URL suffix (gw.url + ...), body, route label, status
    ("GET", "/v1/models", None, "/v1/models", 200),
    ("GET", "/models", None, "/v1/models", 200),
    ("GET", "/v1/models/gpt-4o", None, "/v1/*", 200),
    ("POST", "/v1/embeddings", {"model": "text-embedding-3-small", "input": "x"}, "/v1/*", 200),
    ("GET", "/v1/files", None, "/v1/*", 404),                      # the upstream's 404, relayed
    ("POST", "/v1/veracity/verify", {"answer": "2 + 2 = 4"}, "/v1/veracity/verify", 200),
    ("POST", "/v1/veracity/verify", {"messages": []}, "/v1/veracity/verify", 400),
    ("GET", "/not-a-route", None, "_unmatched", 404),
    ("OPTIONS", "/v1/chat/completions", None, "_unmatched", 405),
]


@pytest.mark.parametrize("method,path,body,route,status", CASES)
def test_every_api_request_has_one_log_line_and_one_count(gw_counted: Any, method: str, path: str, body: Any,
                                                          route: str, status: int) -> None:
    gw = gw_counted
    before = _count(gw, route, status)
    rid = "req-" + uuid.uuid4().hex
    with _http() as http:
        r = http.request(method, gw.url + path, json=body, headers={"x-request-id": rid})
    assert r.status_code == status, r.text
    assert r.headers["x-request-id"] == rid
    wait_for(lambda: _request_lines(gw, rid), f"the request line of {method} {path}")
    (line,) = _request_lines(gw, rid)
    assert line["route"] == route and line["status"] == status
    assert line["duration_ms"] >= 0 and "overhead_ms" in line
    if status >= 400 and route != "/v1/*":  # the gateway's own errors are named (relayed ones are the upstream's)
        assert line["error_code"]
    assert _count(gw, route, status) == before + 1


def _route_labels(gw: Any) -> set[str]:
    return {s.labels["route"] for fam in text_string_to_metric_families(gw.metrics())
            for s in fam.samples if s.name == "veracity_requests_total"}


def test_route_labels_stay_bounded(gw: Any) -> None:
    with _http() as http:
        for i in range(5):
            http.get(f"{gw.base_url}/files/file-{i}")
            http.get(f"{gw.url}/random-{i}")
    labels = _route_labels(gw)
    assert not [lbl for lbl in labels if "file-" in lbl or "random-" in lbl]
    assert labels <= {"/v1/chat/completions", "/v1/models", "/v1/veracity/verify", "/v1/*", "_unmatched"}


def test_probes_and_scrapes_are_not_logged_or_counted(gw: Any) -> None:
    with _http() as http:
        for path in ("/healthz", "/readyz", "/metrics"):
            rid = "req-" + uuid.uuid4().hex
            assert http.get(gw.url + path, headers={"x-request-id": rid}).status_code == 200
            assert _request_lines(gw, rid) == []
    assert not {"/healthz", "/readyz", "/metrics"} & _route_labels(gw)


# ---------------------------------------------------------------------- docs/errors.md's table


def _emitted_codes() -> set[str]:
    """Every ``error.code`` the gateway's own code can put in an answer: the literal
    ``code="..."`` arguments of every gateway module, in every folder of ``proxy/`` (new ones
    included), and :class:`UpstreamError`'s codes."""
    from proxy.wire.errors import UpstreamError

    codes: set[str] = set()
    for f in sorted((ROOT / "proxy").rglob("*.py")):
        if f.parent.name != "upstreams" or not f.name.startswith("mock"):  # the scripted upstream's codes are the upstream's
            codes |= set(re.findall(r'\bcode="([a-z_]+)"', f.read_text()))
    for reason in ("connect", "timeout", "disconnect", "bad_response", "truncated", "too_large", "http_500"):
        codes.add(UpstreamError(502, "x", reason=reason).code)
    return codes


def test_error_table_lists_every_code() -> None:
    section = (ROOT / "docs" / "errors.md").read_text()
    table = set(re.findall(r"`([a-z_]+)`", "\n".join(ln for ln in section.splitlines() if ln.startswith("|"))))
    codes = _emitted_codes()
    assert {"unknown_url", "method_not_allowed", "invalid_json"} <= codes  # the scan finds them
    assert codes - table == set()
