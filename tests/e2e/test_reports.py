"""``GET /v1/veracity/reports/{request_id}`` and the summary headers (proxy/stores/reports.py): the
store's rules in-process, then the real gateway driven by the real clients that lose the report
on the way (openai-python's ``chat.completions.stream()`` helper, LangChain's ``ChatOpenAI``),
then Redis shared by two gateway processes (``redis`` marker)."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from typing import Any

import httpx
import openai
import pytest

from proxy.stores import reports
from proxy.auth import Principal
from proxy.config import hash_key
from proxy.upstreams.mock import MockUpstream

KEY_A = "vk-reports-a-" + uuid.uuid4().hex
KEY_B = "vk-reports-b-" + uuid.uuid4().hex
KEY_C = "vk-reports-c-" + uuid.uuid4().hex    # C and D: virtual keys without a name
KEY_D = "vk-reports-d-" + uuid.uuid4().hex
ADMIN = "vk-reports-admin-" + uuid.uuid4().hex
WRONG = "What is 1234 * 5678?"        # demo script: a wrong product first (7,006,552)

SCRIPT = {
    "models": ["gpt-4o-mini"],
    "rules": [
        {"match": {"last_user": "slow stream"},
         "reply": {"content": "12 × 12 = 144. " * 6, "stream": {"chunk_size": 8, "delay_ms": 150}}},
        {"match": {"last_user": r"1234 \* 5678"}, "reply": {"content": "1234 × 5678 = 7,006,552."}},
    ],
}


def _principal(name: str | None, auth: str | None = None, admin: bool = False) -> Principal:
    return Principal(key_name=name, team="t", policy="default", allow_policy_header=False, upstream_auth=auth,
                     admin=admin)


# ------------------------------------------------------------------------------ unit: the store


def test_summary_header_counts_per_verifier_and_outcome() -> None:
    report = {"status": "failed", "checks": [
        {"verifier": "arithmetic", "outcome": "pass"}, {"verifier": "arithmetic", "outcome": "fail"},
        {"verifier": "code", "outcome": "unknown"}, {"verifier": "arithmetic", "outcome": "pass"}]}
    assert reports.summary_header(report) == "status=failed; arithmetic=1 fail,2 pass; code=1 unknown"
    assert reports.summary_header({"status": "pending"}) == "status=pending"
    many = {"status": "passed", "checks": [{"verifier": f"v{i}", "outcome": "pass"} for i in range(11)]}
    assert reports.summary_header(many).endswith("; v7=1 pass; +3 more")


async def test_store_keys_records_by_owner_so_a_chosen_request_id_cannot_take_anothers() -> None:
    store = reports.ReportStore(ttl_s=60, max_in_memory=3)
    a, b = reports.owner_of(_principal("a")), reports.owner_of(_principal("b"))
    assert a != b and "a" not in (a, b)
    store.put_local(a, "req-1", b"A", False)
    store.put_local(b, "req-1", b"B", True)          # another key sends x-request-id: req-1
    assert await store.get(a, "req-1") == (b"A", False)
    assert await store.get(b, "req-1") == (b"B", True)
    assert await store.get(reports.owner_of(_principal("c")), "req-1") is None
    # an admin's look-up lists both, the first write first; neither overwrote the other
    assert await store.get_all("req-1") == ([(a, b"A", False), (b, b"B", True)], False)
    store.put_local(a, "req-1", b"A2", False)        # the same owner again: its record, replaced
    assert await store.get_all("req-1") == ([(a, b"A2", False), (b, b"B", True)], False)
    # virtual keys are told apart by their configured hash, not their name (which may be absent
    # or shared): two unnamed keys were one owner, "anonymous", and read each other's reports
    k1, k2 = (Principal(key_name=None, team="t", policy="default", allow_policy_header=False, key_hash=h)
              for h in ("1" * 64, "2" * 64))
    assert len({reports.owner_of(k1), reports.owner_of(k2), reports.owner_of(_principal(None))}) == 3
    assert reports.owner_of(k1) == reports.owner_of_key("1" * 64) and "1" * 64 not in reports.owner_of(k1)
    # pass-through callers are told apart by their Authorization value; its hash only is kept
    pt = reports.owner_of(_principal(None, "Bearer sk-one"))
    assert pt != reports.owner_of(_principal(None, "Bearer sk-two")) and "sk-one" not in pt


async def test_redis_keeps_every_owners_record_for_one_request_id() -> None:
    """Two replicas write the same request id for two owners into one Redis (fakeredis: the
    redis-py API, no server); a third replica, holding nothing itself, reads each owner's own
    record and, for an admin, both in write order; the Redis keys hold owner hashes only."""
    fakeredis = pytest.importorskip("fakeredis")
    server = fakeredis.FakeServer()
    one, two, three = (reports.ReportStore(ttl_s=60) for _ in range(3))
    for s in (one, two, three):
        s._redis = fakeredis.aioredis.FakeRedis(server=server)
    a = reports.owner_of(Principal(key_name="same", team="t", policy="p", allow_policy_header=False, key_hash="a" * 64))
    b = reports.owner_of(Principal(key_name="same", team="t", policy="p", allow_policy_header=False, key_hash="b" * 64))
    await one.put_shared(a, "req-x", b'{"n": "A"}', False)
    await two.put_shared(b, "req-x", b'{"n": "B"}', True)
    await one.put_shared(a, "req-x", b'{"n": "A2"}', False)     # a's record again: still listed first
    assert await three.get(a, "req-x") == (b'{"n": "A2"}', False)
    assert await three.get(b, "req-x") == (b'{"n": "B"}', True)
    assert await three.get(reports.owner_of_key("c" * 64), "req-x") is None
    assert await three.get_all("req-x") == ([(a, b'{"n": "A2"}', False), (b, b'{"n": "B"}', True)], False)
    keys = sorted(k.decode() for k in await three._redis.keys("*"))
    assert keys == sorted([f"veracity:report:{a}:req-x", f"veracity:report:{b}:req-x", "veracity:report-owners:req-x"])
    assert 0 < await three._redis.ttl("veracity:report-owners:req-x") <= 60
    for s in (one, two, three):
        await s.close()


async def test_store_bounds_memory_and_expires() -> None:
    store = reports.ReportStore(ttl_s=0.2, max_in_memory=2)
    for i in range(3):
        store.put_local("o", f"r{i}", b"x", False)
    assert await store.get("o", "r0") is None and await store.get("o", "r2") == (b"x", False)
    assert "r0" not in store._owners
    await asyncio.sleep(0.3)
    assert await store.get("o", "r2") is None
    # ids fetched after they expired leave nothing behind (the admin index grew without bound)
    short = reports.ReportStore(ttl_s=0.02, max_in_memory=2)
    for i in range(10):
        short.put_local("o", f"gone{i}", b"x", False)
        await asyncio.sleep(0.05)
        assert await short.get_all(f"gone{i}") == ([], False)
    assert not short._mem and not short._owners


def test_gateway_request_ids_are_not_guessable_from_one_another() -> None:
    """A report is fetched by its request id: callers sharing one identity (a key used by many
    end users, anonymous pass-through callers) must not reach each other's reports by counting
    from their own id (hostile1: ids were a per-process prefix + a counter)."""
    import re

    from proxy._asgi.request_ids import RequestIds

    gen = RequestIds()
    ids = [gen.next() for _ in range(500)]
    assert all(re.fullmatch(r"req_[0-9a-f]{24}", i) for i in ids) and len(set(ids)) == len(ids)
    # no shared prefix, no counter: consecutive ids of one process differ all along
    assert len({i[4:16] for i in ids}) == len(ids) and len({i[-6:] for i in ids}) > len(ids) * 0.9


@pytest.mark.parametrize("rid, kept", [
    ("req-1", True), ("a.b:c_d-e", True), ("..x", True), ("a" * 128, True),
    ("abc\n", False), ("..", False), (".", False), ("a" * 129, False), ("", False), ("a/b", False), ("é", False),
])
def test_client_request_id_must_be_one_safe_url_path_segment(rid: str, kept: bool) -> None:
    """``x-veracity-report-url`` is ``/v1/veracity/reports/<id>``: an id of ``..`` made a URL that
    clients resolve to ``/v1/veracity/`` (RFC 3986 dot segments), and ``$`` let a final newline
    through."""
    from proxy._asgi.request_ids import request_id

    assert (request_id({"x-request-id": rid}) == rid) is kept


async def test_store_bounds_the_bytes_it_keeps_not_only_the_count() -> None:
    """hostile1: a report of a many-claim answer is ~130 KB; 10,000 of them (the count bound) held
    over 1 GB of one process. The store also bounds its bodies' total size."""
    store = reports.ReportStore(ttl_s=60, max_in_memory=10_000, max_in_memory_bytes=1000)
    for i in range(10):
        store.put_local("o", f"r{i}", b"x" * 300, False)
    assert store.bytes_in_memory == 900 and [k[1] for k in store._mem] == ["r7", "r8", "r9"]
    assert await store.get("o", "r6") is None and await store.get("o", "r9") == (b"x" * 300, False)
    store.put_local("o", "r9", b"y" * 50, False)            # a replaced record frees its old size
    assert store.bytes_in_memory == 650
    store.put_local("o", "huge", b"z" * 5000, False)        # larger than the bound: Redis only
    assert store.bytes_in_memory == 0 and not store._mem and "huge" not in store._owners
    from proxy.config import parse_config

    assert parse_config("reports: {max_in_memory_bytes: 1000}\n").reports.max_in_memory_bytes == 1000


def test_redacted_report_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    """The per-report redaction cache behind record_body (the checks-off report, identical for
    every request, is redacted once) holds at most ``size`` reports and none larger than
    ``max_bytes``; a hit is the same JSON as redacting afresh."""
    cache = reports.RedactedReports(size=2, max_bytes=200)
    r = [{"status": "skipped", "reason": f"r{i}"} for i in range(3)]
    for rep in r:
        assert cache.get(rep) == reports.dumps(rep)
    assert len(cache) == 2                        # r0 evicted
    cache.get(r[1])                               # r1 used: r2 is now the oldest
    cache.get({"status": "skipped", "reason": "r3"})
    keys = list(cache._entries)
    assert keys == [reports.dumps(r[1]), reports.dumps({"status": "skipped", "reason": "r3"})]
    big = {"status": "skipped", "reason": "x" * 300}
    assert cache.get(big) == reports.dumps(big) and len(cache) == 2 and reports.dumps(big) not in cache._entries
    assert cache.get({"n": 2 ** 70}) is None     # orjson cannot write it: record_body's general path


def test_redacted_report_cache_forgets_on_a_new_secret_and_record_body_matches_the_general_path() -> None:
    from proxy import redaction

    before = redaction.registered()
    secret = "sk-cache-" + uuid.uuid4().hex
    report = {"status": "skipped", "reason": f"echoed {secret}", "checks": [], "cost": {"ms": 0.0}}
    try:
        first = reports.record_body("req-1", "m", 1, report, pending=False)
        assert first == reports.dumps({"object": "veracity.report", "id": "req-1", "model": "m", "created": 1,
                                       "status": "complete", "veracity": redaction.redact_obj(report)})
        redaction.register([secret.removeprefix("sk-")])   # a secret registered after the first record
        again = reports.record_body("req-2", "m", 1, report, pending=True)
        assert secret[3:].encode() not in again and b'"status":"pending"' in again
        assert again == reports.dumps({"object": "veracity.report", "id": "req-2", "model": "m", "created": 1,
                                       "status": "pending", "veracity": redaction.redact_obj(report)})
        odd = reports.record_body("req-\ud800", "m", 1, report, pending=False)   # a lone surrogate
        assert json.loads(odd)["id"] == "req-\ud800"
    finally:
        redaction.clear()
        redaction.register(before)


def test_fixed_record_body_is_record_body_byte_for_byte_and_follows_new_secrets() -> None:
    """The lean lane writes its records with fixed_record_body (the report never changes, so it
    is not serialised per request): the same bytes as record_body, for model names orjson
    escapes or cannot write, and redacted anew once a secret is registered."""
    from proxy import redaction

    before = redaction.registered()
    secret = "fixed-" + uuid.uuid4().hex  # not key-shaped: redacted only once registered
    report = {"status": "skipped", "reason": f"echoed {secret}", "checks": [], "policy": "off"}
    fixed = reports.FixedReport(report)
    try:
        for model in ("mock-model", 'q"uo\\te\u2028\x01', "caf\u00e9 \U0001F600", "lone \ud800"):
            for rid in ("req_0123456789abcdef01234567", "client.id:7-_"):
                assert reports.fixed_record_body(rid, model, 1765000000, fixed) == \
                    reports.record_body(rid, model, 1765000000, report, pending=False)
        assert secret.encode() in reports.fixed_record_body("r1", "m", 1, fixed)
        redaction.register([secret])
        body = reports.fixed_record_body("r1", "m", 1, fixed)
        assert secret.encode() not in body and body == reports.record_body("r1", "m", 1, report, pending=False)
        # kept as parts by the store: the same bodies read back, the same bytes counted, the same eviction
        who = Principal(key_name="k", team="t", policy="off", allow_policy_header=False)
        as_parts, as_bytes = reports.ReportStore(max_in_memory=2), reports.ReportStore(max_in_memory=2)
        for i, model in enumerate(("m", "caf\u00e9", "lone \ud800")):
            reports.store_local(as_parts, who, f"r{i}", model, 7 + i, fixed, False)
            reports.store_local(as_bytes, who, f"r{i}", model, 7 + i, report, False)
        assert list(as_parts._mem) == list(as_bytes._mem) and as_parts.bytes_in_memory == as_bytes.bytes_in_memory
        owner = reports.owner_of(who)
        assert [as_parts.get_local(owner, f"r{i}") for i in range(3)] == [as_bytes.get_local(owner, f"r{i}")
                                                                          for i in range(3)]
        assert isinstance(as_parts._mem[(owner, "r1")][1], tuple)   # the parts, not a body
    finally:
        redaction.clear()
        redaction.register(before)


# ------------------------------------------------------------------------- the real gateway


@pytest.fixture(scope="module")
def mock() -> Any:
    with MockUpstream(SCRIPT) as m:
        yield m


def _config(mock: Any, tmp: Any = None, **extra: Any) -> dict[str, Any]:
    return {"upstreams": [{"name": "m", "models": ["*"], "base_url": mock.base_url}],
            "keys": [{"hash": hash_key(KEY_A), "name": "app-a", "policy": "default"},
                     {"hash": hash_key(KEY_B), "name": "app-b", "policy": "default"},
                     {"hash": hash_key(KEY_C), "policy": "default"},
                     {"hash": hash_key(KEY_D), "policy": "default"},
                     {"hash": hash_key(KEY_A + "-observe"), "name": "app-observe", "policy": "observe"},
                     {"hash": hash_key(ADMIN), "name": "ops", "policy": "default", "admin": True}],
            **extra}


@pytest.fixture(scope="module")
def gw(mock: Any, gateway_factory: Any) -> Any:
    return gateway_factory(_config(mock))


def _get(gw: Any, rid: str, key: str | None) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.get(f"{gw.url}/v1/veracity/reports/{rid}", headers=headers, trust_env=False, timeout=10)


def _final(gw: Any, rid: str, key: str, timeout: float = 20.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        r = _get(gw, rid, key)
        if r.status_code != 202 or time.monotonic() > deadline:
            return r
        time.sleep(float(r.headers["retry-after"]) / 10)


def test_non_stream_report_headers_and_access(gw: Any) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key=KEY_A, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": WRONG}], extra_body={"veracity": {"on_failure": "annotate"}})
    completion = raw.parse()
    rid = raw.headers["x-request-id"]
    summary = raw.headers["x-veracity-summary"]
    assert summary.startswith("status=failed; ") and "arithmetic=1 fail" in summary
    assert raw.headers["x-veracity-report-url"] == f"/v1/veracity/reports/{rid}"
    got = _get(gw, rid, KEY_A)
    assert got.status_code == 200
    body = got.json()
    assert body["object"] == "veracity.report" and body["id"] == rid and body["model"] == "gpt-4o-mini"
    assert body["status"] == "complete" and abs(body["created"] - time.time()) < 60
    assert body["veracity"] == completion.model_extra["veracity"]     # the very report the response carried
    assert body["veracity"]["checks"][0]["expected"]                   # the evidence, not only a status
    # the openai SDK's own low-level call reads it too (docs/report.md's line)
    assert client.get(f"/veracity/reports/{rid}", cast_to=object)["veracity"]["status"] == "failed"
    # an admin key may read any report; another key, an unknown id and a wrong key may not
    assert _get(gw, rid, ADMIN).json() == body
    other, unknown = _get(gw, rid, KEY_B), _get(gw, "req_doesnotexist", KEY_A)
    assert other.status_code == unknown.status_code == 404
    assert other.json()["error"]["code"] == unknown.json()["error"]["code"] == "report_not_found"
    assert other.json()["error"]["type"] == "invalid_request_error"
    assert _get(gw, rid, None).status_code == 401
    assert _get(gw, rid, "vk-wrong").status_code == 401
    log = gw.log()
    assert KEY_A not in log and "app-a" not in "".join(r.text for r in (got,))


@pytest.mark.parametrize("first, second, names", [
    (KEY_A, KEY_B, ["app-a", "app-b"]),
    (KEY_C, KEY_D, [None, None]),          # keys without a name were one owner ("anonymous")
], ids=["named-keys", "unnamed-keys"])
def test_two_keys_sending_one_request_id_each_read_their_own(gw: Any, first: str, second: str,
                                                              names: list[str | None]) -> None:
    """Two virtual keys send the same ``x-request-id``: each reads its own report (the second
    write overwrites nothing), an admin gets both, oldest first, told apart by ``owner`` and
    ``key``, and picks one with ``?owner=``."""
    rid = f"req-shared-{uuid.uuid4().hex}"
    got = {}
    for key, question in ((first, WRONG), (second, "hello there")):
        client = openai.OpenAI(base_url=gw.base_url, api_key=key, max_retries=0)
        raw = client.chat.completions.with_raw_response.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": question}],
            extra_headers={"x-request-id": rid}, extra_body={"veracity": {"on_failure": "annotate"}})
        assert raw.headers["x-request-id"] == rid
        got[key] = raw.parse().model_extra["veracity"]
    assert got[first]["status"] == "failed" and got[second]["status"] != "failed"
    mine = {key: _get(gw, rid, key) for key in (first, second)}
    assert all(r.status_code == 200 for r in mine.values())
    assert {key: r.json()["veracity"] for key, r in mine.items()} == got
    admin = _get(gw, rid, ADMIN)
    assert admin.status_code == 200
    listed = admin.json()
    assert listed["object"] == "list" and listed["id"] == rid and listed["has_more"] is False
    assert [r["veracity"] for r in listed["data"]] == [got[first], got[second]]
    assert [r["key"] for r in listed["data"]] == names
    owners = [r["owner"] for r in listed["data"]]
    assert len(set(owners)) == 2 and all(first not in o and second not in o for o in owners)
    for owner, key in zip(owners, (first, second)):
        picked = httpx.get(f"{gw.url}/v1/veracity/reports/{rid}", params={"owner": owner}, trust_env=False,
                           headers={"authorization": f"Bearer {ADMIN}"}, timeout=10)
        assert picked.status_code == 200 and picked.json() == mine[key].json()
    # a key cannot reach the other's record by naming its owner
    other = httpx.get(f"{gw.url}/v1/veracity/reports/{rid}", params={"owner": owners[1]}, trust_env=False,
                      headers={"authorization": f"Bearer {first}"}, timeout=10)
    assert other.status_code == 404 and other.json()["error"]["code"] == "report_not_found"


def test_dot_request_id_gets_a_report_url_that_resolves(gw: Any) -> None:
    for chosen in ("..", "."):
        r = httpx.post(gw.base_url + "/chat/completions", headers={"authorization": f"Bearer {KEY_A}", "x-request-id": chosen},
                       json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": WRONG}]},
                       trust_env=False, timeout=30)
        rid = r.headers["x-request-id"]
        assert r.status_code == 200 and rid.startswith("req_")
        got = httpx.get(gw.url + r.headers["x-veracity-report-url"], headers={"authorization": f"Bearer {KEY_A}"},
                        trust_env=False, timeout=10)
        assert got.status_code == 200 and got.json()["id"] == rid


def test_openai_stream_helper_gets_the_report(gw: Any) -> None:
    """``client.chat.completions.stream()``: ``get_final_completion()`` has no ``veracity`` and the
    helper exposes no response headers; docs/report.md's lines choose the request id
    (``x-request-id``, which the gateway keeps) and fetch the report by it."""
    client = openai.OpenAI(base_url=gw.base_url, api_key=KEY_A, max_retries=0)
    request_id = f"req-{uuid.uuid4().hex}"
    with client.chat.completions.stream(model="gpt-4o-mini", messages=[{"role": "user", "content": WRONG}],
                                        extra_headers={"x-request-id": request_id}) as stream:
        for _ in stream:
            pass
        final = stream.get_final_completion()
    assert "veracity" not in (final.model_extra or {})                  # what a newcomer found
    report = client.get(f"/veracity/reports/{request_id}", cast_to=object)
    assert report["status"] == "complete" and report["veracity"]["status"] == "failed"
    assert any(c["verifier"] == "arithmetic" and c["outcome"] == "fail" for c in report["veracity"]["checks"])


def test_stream_report_is_pending_until_the_stream_ends(gw: Any) -> None:
    with httpx.Client(trust_env=False, timeout=30) as http:
        with http.stream("POST", gw.base_url + "/chat/completions", headers={"authorization": f"Bearer {KEY_A}"},
                         json={"model": "gpt-4o-mini", "stream": True,
                               "messages": [{"role": "user", "content": "slow stream please"}]}) as resp:
            rid = resp.headers["x-request-id"]
            assert resp.headers["x-veracity-status"] == "pending"
            assert resp.headers["x-veracity-report-url"] == f"/v1/veracity/reports/{rid}"
            lines = resp.iter_lines()
            next(lines)
            early = _get(gw, rid, KEY_A)
            assert early.status_code == 202 and early.headers["retry-after"] == "1"
            assert early.json()["status"] == "pending" and early.json()["veracity"]["status"] == "pending"
            assert _get(gw, rid, KEY_B).status_code == 404
            rest = list(lines)
    assert [x for x in rest if x][-1] == "data: [DONE]"
    done = _get(gw, rid, KEY_A)           # stored before the report frame and [DONE] went out
    assert done.status_code == 200 and done.json()["veracity"]["status"] == "passed"


def test_client_leaving_a_stream_ends_its_pending_report(gw: Any) -> None:
    with httpx.Client(trust_env=False, timeout=30) as http:
        with http.stream("POST", gw.base_url + "/chat/completions", headers={"authorization": f"Bearer {KEY_A}"},
                         json={"model": "gpt-4o-mini", "stream": True,
                               "messages": [{"role": "user", "content": "slow stream, then I leave"}]}) as resp:
            rid = resp.headers["x-request-id"]
            next(resp.iter_lines())
    r = _final(gw, rid, KEY_A, timeout=10)
    assert r.status_code == 200 and r.json()["veracity"]["status"] == "error"
    assert "before its verification finished" in r.json()["veracity"]["reason"]


def test_observe_mode_report_is_the_background_verification(gw: Any) -> None:
    client = openai.OpenAI(base_url=gw.base_url, api_key=KEY_A + "-observe", max_retries=0)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": WRONG}])
    assert raw.parse().model_extra["veracity"]["status"] == "skipped"   # observe answers at once
    r = _final(gw, raw.headers["x-request-id"], KEY_A + "-observe")
    assert r.status_code == 200 and r.json()["veracity"]["status"] == "failed"
    assert r.json()["veracity"].get("observe") is True


def test_langchain_chat_openai_gets_the_report(gw: Any) -> None:
    """LangChain drops ``veracity`` from ``response_metadata``; with ``include_response_headers``
    the summary and the request id come through, and the report is one GET away."""
    langchain_openai = pytest.importorskip("langchain_openai")
    llm = langchain_openai.ChatOpenAI(model="gpt-4o-mini", base_url=gw.base_url, api_key=KEY_A, max_retries=0,
                                      include_response_headers=True)
    msg = llm.invoke(WRONG, extra_body={"veracity": {"on_failure": "annotate"}})
    headers = msg.response_metadata["headers"]
    assert "veracity" not in msg.response_metadata
    assert headers["x-veracity-summary"].startswith("status=failed")
    report = httpx.get(gw.url + headers["x-veracity-report-url"], headers={"authorization": f"Bearer {KEY_A}"},
                       trust_env=False).json()
    assert report["veracity"]["status"] == "failed"
    # stream: the first chunk carries the headers (the summary says pending); fetch after the end
    chunks = list(llm.stream(WRONG))
    first = next(c for c in chunks if c.response_metadata.get("headers"))
    sheaders = first.response_metadata["headers"]
    assert sheaders["x-veracity-summary"] == "status=pending"
    report = httpx.get(gw.url + sheaders["x-veracity-report-url"], headers={"authorization": f"Bearer {KEY_A}"},
                       trust_env=False).json()
    assert report["status"] == "complete" and report["veracity"]["status"] == "failed"


def test_reports_disabled(mock: Any, gateway_factory: Any) -> None:
    g = gateway_factory(_config(mock, reports={"enabled": False}))
    client = openai.OpenAI(base_url=g.base_url, api_key=KEY_A, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini",
                                                          messages=[{"role": "user", "content": "hello"}])
    assert "x-veracity-report-url" not in raw.headers and raw.headers["x-veracity-summary"] == "status=skipped"
    assert _get(g, raw.headers["x-request-id"], KEY_A).status_code == 404


@pytest.mark.redis
def test_report_fetched_from_another_replica_through_redis(mock: Any, gateway_factory: Any, tmp_path: Any) -> None:
    url = os.environ.get("VERACITY_TEST_REDIS_URL")
    if not url:
        pytest.skip("VERACITY_TEST_REDIS_URL not set")
    cfg = _config(mock, verification={"redis_url": url, "review_db": str(tmp_path / "r.sqlite3")},
                  reports={"ttl_s": 30})
    one, two = gateway_factory(cfg), gateway_factory(cfg)
    client = openai.OpenAI(base_url=one.base_url, api_key=KEY_A, max_retries=0)
    rid = f"req-{uuid.uuid4().hex}"
    with client.chat.completions.stream(model="gpt-4o-mini", messages=[{"role": "user", "content": WRONG}],
                                        extra_headers={"x-request-id": rid}) as s:
        for _ in s:
            pass
    got = _get(two, rid, KEY_A)                       # the other process: only Redis has it
    assert got.status_code == 200 and got.json()["veracity"]["status"] == "failed"
    assert _get(two, rid, KEY_B).status_code == 404 and _get(two, rid, ADMIN).status_code == 200
    import redis

    r = redis.Redis.from_url(url)
    keys = [k.decode() for k in r.scan_iter(match=f"veracity:report*{rid}")]
    assert len(keys) == 2 and all(KEY_A not in k and "app-a" not in k for k in keys)
    assert 0 < r.ttl(keys[0]) <= 30


def test_redis_down_never_fails_a_request(mock: Any, gateway_factory: Any, tmp_path: Any) -> None:
    """Redis unreachable (a closed port): the answer still goes out, its report is served from the
    process that holds it, and an id it does not hold is a 503 rather than a false 404."""
    import socket

    with socket.socket() as s:             # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    g = gateway_factory(_config(mock, verification={"redis_url": f"redis://127.0.0.1:{port}/0",
                                                    "review_db": str(tmp_path / "r.sqlite3")}))
    client = openai.OpenAI(base_url=g.base_url, api_key=KEY_A, max_retries=0)
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o-mini",
                                                          messages=[{"role": "user", "content": WRONG}])
    assert raw.parse().choices[0].message.content
    got = _get(g, raw.headers["x-request-id"], KEY_A)
    assert got.status_code == 200 and got.json()["veracity"]["status"] in ("failed", "corrected")
    missing = _get(g, "req-held-elsewhere", KEY_A)
    assert missing.status_code == 503 and missing.json()["error"]["code"] == "report_store_unavailable"
    assert "report_store_error" in g.log()


def _readme_python_after(marker: str) -> str:
    from tests.conftest import ROOT

    readme = (ROOT / "docs" / "report.md").read_text()
    start = readme.index("```python\n", readme.index(marker)) + len("```python\n")
    return readme[start:readme.index("```", start)]


def test_readme_snippets_run_as_written(gw: Any) -> None:
    """docs/report.md's LangChain and openai ``.stream()`` lines, run as written (only the gateway's
    address and the key filled in) against the real gateway."""
    pytest.importorskip("langchain_openai")
    for marker in ("LangChain (`langchain-openai` and `openai`:", "openai-python's `.stream()` helper"):
        code = _readme_python_after(marker).replace("http://localhost:8080", gw.url)
        assert 'KEY = "vk-..."' in code          # the block defines the key it uses: it runs as pasted
        code = code.replace('KEY = "vk-..."', f"KEY = {KEY_A!r}")
        scope: dict[str, Any] = {}
        exec(compile(code, f"docs/report.md {marker}", "exec"), scope)          # noqa: S102 - our own docs
        assert scope["report"]["status"] in ("failed", "corrected"), scope["report"]
        assert any(c["verifier"] == "arithmetic" for c in scope["report"]["checks"])


async def test_every_redis_store_gives_up_on_a_redis_that_never_answers() -> None:
    """A frozen Redis (accepts connections, never answers: hostile1 sent SIGSTOP to one) cost each
    chat request ~16 s: the report store timed out after 1 s, the budget and review stores' clients
    kept redis-py's defaults (5 s socket timeout, retried). All three now raise redis-py's
    TimeoutError after about a second, and their callers' outage paths (logged, never a failed
    request) run."""
    import socket

    import redis.exceptions

    from proxy.stores.budget import RedisStore
    from proxy.stores.review import RedisReviewStore

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)                      # the kernel completes connections; nobody ever reads
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    budget, review_store = RedisStore(url), RedisReviewStore(url)
    store = reports.ReportStore(redis_url=url)
    try:
        for call in (budget.get("key", "a", "2026-01-01"), review_store.get("rev_x"),
                     store.get_shared("o", "req-1")):
            with pytest.raises(redis.exceptions.TimeoutError):
                await asyncio.wait_for(call, 4)       # redis-py's defaults: asyncio's TimeoutError here
    finally:
        silent.close()


@pytest.mark.parametrize("ttl", ["1e20", ".inf", "31536001"])
def test_report_ttl_past_what_redis_takes_is_a_config_error(ttl: str) -> None:
    """``reports.ttl_s: 1e20`` (or ``.inf``) passed ``veracity config check`` and then failed every
    Redis write (``EX`` out of range / OverflowError), so no replica but the serving one had the report."""
    from proxy.config import ConfigError, parse_config

    with pytest.raises(ConfigError, match="reports.ttl_s"):
        parse_config(f"reports: {{ttl_s: {ttl}}}\n")
    assert parse_config("reports: {ttl_s: 31536000}\n").reports.ttl_s == 31_536_000


def test_readme_litellm_recipe_runs_as_written(gw: Any) -> None:
    """docs/report.md's litellm SDK block, run as written (the gateway's address and the key filled
    in): litellm keeps ``veracity`` as an attribute of the response and of the stream's report
    chunk, and the headers under ``_hidden_params["additional_headers"]``."""
    pytest.importorskip("litellm")
    code = _readme_python_after("The litellm SDK (`litellm`").replace("http://localhost:8080", gw.url)
    assert 'KEY = "vk-..."' in code
    scope: dict[str, Any] = {}
    exec(compile(code.replace('KEY = "vk-..."', f"KEY = {KEY_A!r}"), "docs/report.md litellm", "exec"), scope)  # noqa: S102
    for report in (scope["report"], scope["stream_report"]):
        assert report["status"] in ("failed", "corrected")
        assert any(c["verifier"] == "arithmetic" for c in report["checks"])
    assert scope["summary"].startswith(f"status={scope['report']['status']}")


def test_readme_agents_sdk_recipe_runs_as_written(gw: Any) -> None:
    """docs/report.md's Agents SDK block (chat-completions mode), run as written (the gateway's
    address and the key filled in): the run makes one model call, the hook catches its report URL
    and the report fetched from it is the final one of the demo script's wrong product."""
    pytest.importorskip("agents")
    code = _readme_python_after("The OpenAI Agents SDK in chat-completions mode").replace("http://localhost:8080", gw.url)
    assert 'KEY = "vk-..."' in code
    scope: dict[str, Any] = {}
    exec(compile(code.replace('KEY = "vk-..."', f"KEY = {KEY_A!r}"), "docs/report.md agents", "exec"), scope)  # noqa: S102
    assert len(scope["report_urls"]) == 1 and len(scope["reports"]) == 1
    report = scope["reports"][0]
    assert report["status"] in ("failed", "corrected")
    assert any(c["verifier"] == "arithmetic" for c in report["checks"])


def test_readme_agents_sdk_hook_catches_every_report_url(gw: Any) -> None:
    """docs/report.md's Agents SDK recipe rests on an httpx response hook on the ``AsyncOpenAI``
    client it hands to ``OpenAIChatCompletionsModel``: the hook as written there, on a non-stream
    and a stream call, gives both reports."""
    code = _readme_python_after("The OpenAI Agents SDK in chat-completions mode")
    hook = code[code.index("report_urls: list[str] = []"):code.index("set_tracing_disabled(True)")]
    hook = hook.replace("http://localhost:8080", gw.url).replace("api_key=KEY", f"api_key={KEY_A!r}")
    scope: dict[str, Any] = {}
    exec(compile("import httpx\nfrom openai import AsyncOpenAI, DefaultAsyncHttpxClient\n" + hook,  # noqa: S102
                 "docs/report.md agents hook", "exec"), scope)
    client = scope["client"]

    async def calls() -> None:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": WRONG}])
        stream = await client.chat.completions.create(model="gpt-4o-mini", stream=True,
                                                      messages=[{"role": "user", "content": WRONG}])
        async for _ in stream:
            pass
        await client.close()

    asyncio.run(calls())
    assert len(scope["report_urls"]) == 2
    for url in scope["report_urls"]:
        r = _final(gw, url.rsplit("/", 1)[1], KEY_A)
        assert r.status_code == 200 and r.json()["veracity"]["status"] in ("failed", "corrected")
