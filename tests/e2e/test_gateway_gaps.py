"""Faithfulness and robustness gaps of the gateway core, each a kind of fault driven through the
running gateway with the real ``openai`` SDK against the scripted upstream:

* a client that leaves before the response starts (non-stream, before a stream's first event,
  during correction rounds) makes the gateway close the upstream request (the mock records
  the close);
* an upstream's own error event mid-stream is relayed with the upstream key redacted;
* upstream answers over ``limits.max_response_bytes`` become a 502 / a final error event, and
  the upstream connection is closed;
* integers beyond 64 bits cross the gateway exactly, both ways.

No timing assertions: the waits below are generous deadlines for an event that either comes
(the fix works) or does not (the upstream is scripted to answer only after minutes).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from typing import Any

import httpx
import openai
import pytest
import yaml

from tests.fixtures.mock import scripted_mock
from tests.fixtures.polling import wait_for

UPSTREAM_KEY = "sk-proj-" + secrets.token_urlsafe(36)  # key-shaped: must never reach a client
BIG = 2**70                                             # 1180591620717411303424: beyond 64 bits
LIMIT = 1024 * 1024                                     # limits.max_response_bytes of the gateway
NEVER_MS = 600_000                                      # "slow": the upstream answers after 10 min
EVIDENCE = "Automatic verification found"               # start of the correction prompt
WRONG = "With annual compounding the total is 5000 * 1.06^4 = $6,200.00."
RIGHT = f"With annual compounding the total is 5000 * 1.06^4 = ${5000 * 1.06 ** 4:,.2f}."
QUESTION = "I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"

SCRIPT: dict[str, Any] = {
    "models": ["gpt-4o"],
    "rules": [
        {"name": "slow", "match": {"last_user": "^slow"}, "reply": {"content": "late", "delay_ms": NEVER_MS}},
        # a wrong first draft, then a correction round that never answers
        {"name": "slowfix-correction", "match": {"any_message": r"\[slowfix\]", "last_user": EVIDENCE},
         "reply": {"content": RIGHT, "delay_ms": NEVER_MS}},
        {"name": "slowfix", "match": {"last_user": r"\[slowfix\]"}, "reply": {"content": WRONG}},
        {"name": "error-key", "match": {"last_user": "^error-key"},
         "reply": {"content": "this stream fails halfway through", "fault": "error_mid_stream",
                   "error": f"Incorrect API key provided: {UPSTREAM_KEY}.", "stream": {"chunk_size": 4}}},
        {"name": "huge", "match": {"last_user": "^huge"},
         "reply": {"content": "x" * (4 * LIMIT), "stream": {"chunk_size": 16384, "delay_ms": 20}}},
        {"name": "huge-event", "match": {"last_user": "^one-huge-event"},
         "reply": {"content": "small", "extra": {"pad": "y" * (2 * LIMIT)}}},  # on every chunk: the first too
        # pass-through routes (/v1/embeddings, /v1/completions)
        {"name": "emb-error", "match": {"path": "/v1/embeddings", "model": "gpt-4o-big-error"},
         "reply": {"status": 400, "error": {"error": {"message": "bad input " + "z" * (LIMIT // 2),
                                                      "type": "invalid_request_error", "param": "input",
                                                      "code": None}}}},
        {"name": "emb", "match": {"path": "/v1/embeddings"}, "reply": {}},
        {"name": "legacy-huge", "match": {"path": "/v1/completions"},
         "reply": {"content": "w" * (4 * LIMIT), "stream": {"chunk_size": 16384}}},
        {"name": "big-int", "match": {"last_user": "^big-int"},
         "reply": {"content": "big", "extra": {"vendor_counter": BIG, "vendor_negative": -BIG}}},
    ],
}


mock, _reset_mock = scripted_mock(SCRIPT)


POLICIES: dict[str, dict[str, Any]] = {
    "default": {},
    # checks off: the plain relay
    "off": {"verifiers": {"arithmetic": {"enabled": False}, "code": {"enabled": False},
                          "citations": {"enabled": False}}},
    # verification with a deadline far beyond the test: only the client's leaving can stop it
    "fix": {"risk": {"threshold": 0.1}, "on_failure": "correct", "correction": {"max_rounds": 2},
            "budgets": {"request": {"extra_calls": 4, "extra_tokens": 8000, "deadline_ms": 3_600_000}},
            "streaming": {"mode": "buffer", "keepalive_s": 0.05}},
}


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any, tmp_path_factory: Any) -> Any:
    tmp = tmp_path_factory.mktemp("gaps")
    pdir = tmp / "policies"
    pdir.mkdir()
    for name, doc in POLICIES.items():
        (pdir / f"{name}.yaml").write_text(yaml.safe_dump(dict(doc, name=name)))
    return gateway_factory({
        "upstreams": [{"name": "mock", "models": ["gpt-*"], "base_url": mock.base_url, "api_key": "${GAPS_KEY}"}],
        "policies": {"dir": str(pdir), "check_interval_s": 0},
        "verification": {"audit": str(tmp / "audit.jsonl"), "budget_db": str(tmp / "budget.sqlite3")},
        "limits": {"max_response_bytes": LIMIT, "connect_retries": 0},
    }, env={"GAPS_KEY": UPSTREAM_KEY})


def _user(text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def _client(gw: Any, policy: str = "off", **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=60,
                         default_headers={"x-veracity-policy": policy}, **kw)


def _aclient(gw: Any, policy: str = "off") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=gw.base_url, api_key="sk-client", max_retries=0, timeout=60,
                              default_headers={"x-veracity-policy": policy})



def _requests_by_rule(mock: Any, rule: str) -> list[dict[str, Any]]:
    return [r for r in mock.requests() if r.get("rule") == rule]


def _closed(mock: Any, rule: str) -> list[dict[str, Any]]:
    return [e for r in _requests_by_rule(mock, rule) for e in r["events"] if e["event"] == "client_disconnected"]


async def _abandon_when_upstream_called(coro: Any, mock: Any, rule: str) -> None:
    """Run the SDK call ``coro`` until the upstream has received the request matching ``rule``,
    then abandon it (the task is cancelled: httpx closes the connection to the gateway)."""
    task = asyncio.ensure_future(coro)
    deadline = time.monotonic() + 60
    while not await asyncio.to_thread(_requests_by_rule, mock, rule):
        assert not task.done(), f"the call ended before reaching the upstream: {task.result()!r}"
        assert time.monotonic() < deadline, f"the upstream never received the {rule!r} request"
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


# --------------------------------------------------------------------------- 1. client leaves early


@pytest.mark.parametrize("stream", [False, True], ids=["non-stream", "stream-before-first-event"])
async def test_client_leaving_before_the_response_closes_the_upstream(gw: Any, mock: Any, stream: bool) -> None:
    client = _aclient(gw)
    await _abandon_when_upstream_called(
        client.chat.completions.create(model="gpt-4o", messages=_user("slow please"), stream=stream), mock, "slow")
    events = await asyncio.to_thread(wait_for, lambda: _closed(mock, "slow"), "the upstream sees the close")
    assert events[0]["phase"] == "before_headers"
    line = await asyncio.to_thread(wait_for, lambda: [
        r for r in gw.log_records() if r.get("event") == "request" and r.get("client_disconnected")],
        "the request log line")
    assert line[-1]["status"] == 499
    await client.close()


async def test_client_leaving_during_a_correction_round_stops_it(gw: Any, mock: Any) -> None:
    client = _aclient(gw, "fix")
    await _abandon_when_upstream_called(
        client.chat.completions.create(model="gpt-4o", messages=_user(f"[slowfix] {QUESTION}")), mock,
        "slowfix-correction")
    await asyncio.to_thread(wait_for, lambda: _closed(mock, "slowfix-correction"),
                            "the correction call sees the close")
    await client.close()


def test_client_leaving_a_buffered_stream_stops_its_correction(gw: Any, mock: Any) -> None:
    """Buffer mode has already sent keep-alives: the response started, the correction runs."""
    with httpx.stream("POST", gw.base_url + "/chat/completions", trust_env=False, timeout=60,
                      headers={"x-veracity-policy": "fix", "Authorization": "Bearer sk-client"},
                      json={"model": "gpt-4o", "stream": True, "messages": _user(f"[slowfix] {QUESTION}")}) as r:
        assert r.status_code == 200
        it = r.iter_raw()
        assert next(it).startswith(b":")  # a keep-alive comment: the answer is held
        wait_for(lambda: _requests_by_rule(mock, "slowfix-correction"), "the correction call")
    wait_for(lambda: _closed(mock, "slowfix-correction"), "the correction call sees the close")


def test_gateway_still_answers_after_abandoned_requests(gw: Any) -> None:
    resp = _client(gw).chat.completions.create(model="gpt-4o", messages=_user("hello"))
    assert resp.choices[0].message.content == "Mock reply to: hello"
    assert "veracity_in_flight_requests 0.0" in gw.metrics()


# --------------------------------------------------------------------------- 2. error events redacted


def test_upstream_error_event_mid_stream_has_the_upstream_key_redacted(gw: Any) -> None:
    client = _client(gw)
    seen = ""
    with pytest.raises(openai.APIError) as ei:
        for chunk in client.chat.completions.create(model="gpt-4o", messages=_user("error-key"), stream=True):
            seen += "".join(c.delta.content or "" for c in chunk.choices)
    assert seen  # content before the failure was relayed
    assert "Incorrect API key provided: [REDACTED]." in str(ei.value)
    assert UPSTREAM_KEY not in str(ei.value) and UPSTREAM_KEY not in json.dumps(ei.value.body)
    # the raw bytes too (nothing else in the stream carries it)
    r = httpx.post(gw.base_url + "/chat/completions", trust_env=False, timeout=60,
                   headers={"x-veracity-policy": "off"},
                   json={"model": "gpt-4o", "stream": True, "messages": _user("error-key")})
    assert b"event: error" in r.content and b"[REDACTED]" in r.content
    assert UPSTREAM_KEY.encode() not in r.content


# --------------------------------------------------------------------------- 3. response size cap


def test_non_stream_answer_over_the_cap_is_a_502(gw: Any) -> None:
    with pytest.raises(openai.APIStatusError) as ei:
        _client(gw).chat.completions.create(model="gpt-4o", messages=_user("huge"))
    assert ei.value.status_code == 502
    err = ei.value.body
    assert set(err) == {"message", "type", "param", "code"}  # the SDK unwraps {"error": ...}
    assert err["code"] == "upstream_response_too_large" and str(LIMIT) in err["message"]


def test_stream_over_the_cap_ends_with_an_error_event_and_closes_the_upstream(gw: Any, mock: Any) -> None:
    got = ""
    with pytest.raises(openai.APIError) as ei:
        for chunk in _client(gw).chat.completions.create(model="gpt-4o", messages=_user("huge"), stream=True):
            got += "".join(c.delta.content or "" for c in chunk.choices)
    assert ei.value.body["code"] == "upstream_response_too_large"
    assert 0 < len(got) <= LIMIT  # what was relayed stayed under the cap
    events = wait_for(lambda: _closed(mock, "huge"), "the upstream sees the close")
    assert events[0]["phase"] == "mid_stream"


def test_first_stream_event_over_the_cap_is_a_json_502(gw: Any) -> None:
    with pytest.raises(openai.APIStatusError) as ei:
        _client(gw).chat.completions.create(model="gpt-4o", messages=_user("one-huge-event"), stream=True)
    assert ei.value.status_code == 502 and ei.value.body["code"] == "upstream_response_too_large"


# --------------------------------------------------------------------------- 4. integers beyond 64 bits


@pytest.mark.parametrize("policy", ["off", "fix"])
def test_integers_beyond_64_bits_cross_unchanged(gw: Any, mock: Any, policy: str) -> None:
    raw = _client(gw, policy).chat.completions.with_raw_response.create(
        model="gpt-4o", messages=_user("big-int"), seed=7,
        extra_body={"vendor_id": BIG, "vendor_nested": {"values": [-BIG, BIG + 1, 2**63 - 1]}})
    sent = _requests_by_rule(mock, "big-int")[-1]["body"]
    assert sent["vendor_id"] == BIG and sent["vendor_nested"] == {"values": [-BIG, BIG + 1, 2**63 - 1]}
    data = json.loads(raw.http_response.content)  # stdlib: integers exact
    assert data["vendor_counter"] == BIG and data["vendor_negative"] == -BIG
    assert isinstance(data["vendor_counter"], int)
    assert b"1180591620717411303424" in raw.http_response.content


# --------------------------------------------------------------------------- 5. pass-through routes


def test_passthrough_error_body_is_relayed_whole(gw: Any) -> None:
    """A 512 kB error body arrives in several reads: the client gets all of it, as JSON."""
    with pytest.raises(openai.BadRequestError) as ei:
        _client(gw).embeddings.create(model="gpt-4o-big-error", input="hi")
    body = ei.value.body
    assert isinstance(body, dict), "the error body was cut"
    assert body["message"] == "bad input " + "z" * (LIMIT // 2) and body["param"] == "input"


def test_passthrough_answer_over_the_cap_is_a_502(gw: Any) -> None:
    with pytest.raises(openai.APIStatusError) as ei:  # 64 inputs x 4096 dimensions: ~5 MB of floats
        _client(gw).embeddings.create(model="gpt-4o", input=[f"text {i}" for i in range(64)], dimensions=4096,
                                      encoding_format="float")
    assert ei.value.status_code == 502 and ei.value.body["code"] == "upstream_response_too_large"
    small = _client(gw).embeddings.create(model="gpt-4o", input="hi", encoding_format="float")
    assert len(small.data[0].embedding) == 8  # a normal answer still passes


def test_passthrough_stream_over_the_cap_is_cut_not_ended_cleanly(gw: Any) -> None:
    """A chunked pass-through body that fails mid-way must not end as if complete: the client
    connection is aborted, so the client sees an incomplete body."""
    got = b""
    with pytest.raises(httpx.RemoteProtocolError):
        with httpx.stream("POST", gw.base_url + "/completions", trust_env=False, timeout=60,
                          json={"model": "gpt-4o", "prompt": "hi", "stream": True}) as r:
            assert r.status_code == 200
            for part in r.iter_raw():
                got += part
    assert 0 < len(got) <= LIMIT and b"data: [DONE]" not in got
