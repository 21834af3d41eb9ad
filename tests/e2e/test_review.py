"""The human review queue (proxy/stores/review.py): when an answer goes to review, the stores
(SQLite; Redis under the ``redis`` marker), the routes through the real gateway with the
three kinds of caller, and the ``veracity review`` CLI as a subprocess."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.stores import review
from proxy.config import hash_key
from proxy.policy import Policy
from tests.conftest import ROOT
from tests.fixtures.mock import scripted_mock
from verifiers._types import Report

ADMIN_KEY = "vk-admin-" + "a" * 20
USER_KEY = "vk-user-" + "b" * 20
QUESTION = "What is 17 * 23? [case:review]"
WRONG = "17 * 23 = 401 apples."

#: the model stays wrong whatever the evidence says: every round answers "17 * 23 = 401"
mock, _reset_mock = scripted_mock({"models": ["gpt-test"], "rules": [
    *({"name": f"other{n}", "match": {"any_message": rf"\[case:other{n}\]"}, "reply": {"content": f"17 * {n} = 401."}}
      for n in (24, 25, 26, 27)),
    {"name": "wrong", "match": {"any_message": r"\[case:review\]"}, "reply": {"content": WRONG}},
    {"name": "right", "match": {"any_message": r"\[case:right\]"}, "reply": {"content": "17 * 23 = 391."}},
]})


# ----------------------------------------------------------------------------- review_reason


def _report(status: str, correction: dict[str, Any] | None = None, choices: list | None = None) -> Report:
    rep = Report(status=status)  # type: ignore[arg-type]
    if correction is not None:
        rep.extra["correction"] = correction
    if choices is not None:
        rep.extra["choices"] = choices
    return rep


GAVE_UP = {"state": "MAX_RETRY_EXCEEDED", "stop_reason": "max_rounds"}
DIVERGED = {"state": "MAX_RETRY_EXCEEDED", "stop_reason": "divergence"}


@pytest.mark.parametrize("report, when, expected", [
    (_report("failed", GAVE_UP), None, "max_retry_exceeded"),
    (_report("failed", DIVERGED), None, "divergence"),              # the more specific reason wins
    (_report("failed", {"state": "VERIFICATION_FAILED", "stop_reason": "not_attempted"}), None, None),
    (_report("failed", {"state": "VERIFICATION_FAILED", "stop_reason": "not_attempted"}), ["failed"], "failed"),
    (_report("corrected", {"state": "VERIFICATION_PASSED", "stop_reason": "passed"}), None, None),
    (_report("passed"), ["failed", "unverified", "error"], None),
    (_report("unverified"), ["unverified"], "unverified"),
    (_report("error"), ["error"], "error"),
    (_report("failed", DIVERGED), ["max_retry_exceeded"], "max_retry_exceeded"),
    # n > 1: one choice that gave up is enough
    (_report("failed", None, [{"index": 0, "status": "passed"}, {"index": 1, "status": "failed", "correction": GAVE_UP}]),
     None, "max_retry_exceeded"),
])
def test_review_reason(report, when, expected):
    policy = Policy() if when is None else Policy.model_validate({"review": {"when": when}})
    assert review.review_reason(report, policy) == expected


def test_review_reason_disabled():
    policy = Policy.model_validate({"review": {"enabled": False}})
    assert review.review_reason(_report("failed", GAVE_UP), policy) is None


def test_policy_rejects_unknown_review_when():
    with pytest.raises(Exception, match="review.when"):
        Policy.model_validate({"review": {"when": ["sometimes"]}})


def test_make_review_keeps_text_unless_told_not_to():
    report = {"status": "failed", "checks": []}
    kept = review.make_review(request_id="r1", model="m", team="t", key="k", policy="p", reason="failed",
                              report=report, question="Q", drafts=["a", "b"], answer="b")
    dropped = review.make_review(request_id="r1", model="m", team="t", key="k", policy="p", reason="failed",
                                 report=report, question="Q", drafts=["a", "b"], answer="b", include_text=False)
    assert (kept["question"], kept["drafts"], kept["answer"]) == ("Q", ["a", "b"], "b")
    assert (dropped["question"], dropped["drafts"], dropped["answer"]) == (None, None, None)
    assert kept["status"] == "open" and kept["resolution"] is None and kept["id"].startswith("rev_")
    assert kept["delivered"] == "answer" and kept["count"] == 1
    blocked = review.make_review(request_id="r2", model="m", team="t", key="k", policy="p", reason="failed",
                                 report=report, answer="b", blocked=True)
    assert blocked["delivered"] == "blocked" and blocked["occurrences"][0]["delivered"] == "blocked"


def test_review_text_is_masked():
    secret = "sk-" + "Z" * 30
    rec = review.make_review(request_id="r1", model="m", team="t", key="k", policy="p", reason="failed",
                             report={"status": "failed", "checks": []}, question=f"my key is {secret}",
                             answer=f"Bearer {secret}")
    assert secret not in json.dumps(rec) and "[REDACTED]" in rec["question"]


# ----------------------------------------------------------------------------- the stores


def _new(n: int, claim: str | None = None, team: str = "t") -> dict[str, Any]:
    """A review whose failed check's claim is ``claim`` (default: one of its own per ``n``)."""
    check = {"verifier": "arithmetic", "outcome": "fail", "claim": claim or f"17 * {n} = 0"}
    return review.make_review(request_id=f"req-{n}", model="gpt-test", team=team, key="k", policy="p",
                              reason="max_retry_exceeded", question=f"q{n} <b>", answer="a",
                              report={"status": "failed", "checks": [check]}, include_text=True)


async def _contract(store: review.ReviewStore) -> None:
    ids = [await store.add(_new(n)) for n in range(5)]
    assert ids == [r for r in ids if r.startswith("rev_")] and len(set(ids)) == 5     # 5 distinct failures
    assert await store.count("open") == 5 and await store.count(None) == 5
    # the same failure again (other request, other team): counted on the open review, not queued twice
    assert await store.add(_new(7, claim="17 * 2 = 0", team="u")) == ids[2]
    assert await store.add(_new(8, claim="17 * 2 = 0", team="u")) == ids[2]
    merged = await store.get(ids[2])
    assert merged["count"] == 3 and [o["request_id"] for o in merged["occurrences"]] == ["req-2", "req-7", "req-8"]
    assert merged["question"] == "q2 <b>"                                       # the first answer's text
    assert await store.count("open") == 5 and await store.open_by() == {("gpt-test", "t"): 5}
    got = await store.get(ids[0])
    assert got["question"] == "q0 <b>" and got["status"] == "open"
    page, more = await store.list("open", 2)
    assert [r["id"] for r in page] == ids[:2] and more                       # oldest first
    page, more = await store.list("open", 2, after=ids[1])
    assert [r["id"] for r in page] == ids[2:4] and more
    page, more = await store.list("open", 2, after=ids[3])
    assert [r["id"] for r in page] == ids[4:] and not more

    done = await store.resolve(ids[1], "incorrect", "17*23 is 391", "alice")
    assert done["status"] == "resolved"
    assert done["resolution"]["verdict"] == "incorrect" and done["resolution"]["reviewer"] == "alice"
    assert (await store.get(ids[1]))["resolution"]["note"] == "17*23 is 391"
    with pytest.raises(review.ReviewConflict):                                 # no silent overwrite
        await store.resolve(ids[1], "correct", "", "bob")
    assert (await store.get(ids[1]))["resolution"]["verdict"] == "incorrect"
    with pytest.raises(ValueError):
        await store.resolve(ids[2], "probably", "", "bob")
    with pytest.raises(review.ReviewNotFound):
        await store.resolve("rev_nope", "correct", "", "bob")
    with pytest.raises(review.ReviewNotFound):
        await store.get("rev_nope")
    with pytest.raises(review.ReviewNotFound):
        await store.list("open", 2, after="rev_nope")

    assert [r["id"] for r in (await store.list("open", 10))[0]] == [ids[0], *ids[2:]]
    assert [r["id"] for r in (await store.list("resolved", 10))[0]] == [ids[1]]
    assert [r["id"] for r in (await store.list(None, 10))[0]] == ids
    assert (await store.count("open"), await store.count("resolved"), await store.count(None)) == (4, 1, 5)
    assert await store.open_by() == {("gpt-test", "t"): 4}

    # a resolved group is closed: the same failure afterwards opens a new review
    await store.resolve(ids[2], "incorrect", "", "alice")
    again = await store.add(_new(9, claim="17 * 2 = 0"))
    assert again not in ids and (await store.get(again))["count"] == 1
    assert await store.count("open") == 4

    # server-side sessions of the reviewer page: kept for their ttl, deleted on sign-out
    await store.session_put("h1", {"key_name": "alice", "csrf": "c"}, 60)
    assert (await store.session_get("h1"))["key_name"] == "alice"
    assert await store.session_get("h2") is None
    await store.session_delete("h1")
    assert await store.session_get("h1") is None
    await store.session_put("h3", {"key_name": "bob"}, 1)
    await asyncio.sleep(2.1)
    assert await store.session_get("h3") is None                               # expired


def test_fingerprint_is_the_failed_checks_verifier_and_claim():
    def rep(*checks: tuple[str, str, str]) -> dict[str, Any]:
        return {"checks": [{"verifier": v, "claim": c, "outcome": o, "evidence": {"x": i}}
                           for i, (v, c, o) in enumerate(checks)]}
    a = review.fingerprint("failed", rep(("arithmetic", "2+2=5", "fail"), ("facts", "sky", "pass")))
    # the same failed claim, whatever passed beside it and whatever the evidence says
    assert a == review.fingerprint("failed", rep(("facts", "grass", "pass"), ("arithmetic", "2+2=5", "fail")))
    assert a != review.fingerprint("failed", rep(("arithmetic", "2+2=6", "fail")))          # another claim
    assert a != review.fingerprint("failed", rep(("code", "2+2=5", "fail")))                # another verifier
    assert a != review.fingerprint("divergence", rep(("arithmetic", "2+2=5", "fail")))      # another reason
    # nothing failed: the undecided checks tell unverified answers apart
    u = review.fingerprint("unverified", rep(("citations", "Smith 2019", "unknown")))
    assert u and u != review.fingerprint("unverified", rep(("citations", "Lee 2020", "unknown")))
    assert review.fingerprint("error", {"checks": []}) is None                              # never merged


async def test_sqlite_store(tmp_path):
    store = review.SQLiteReviewStore(tmp_path / "sub" / "reviews.sqlite3")
    try:
        await _contract(store)
    finally:
        await store.close()
    again = review.SQLiteReviewStore(tmp_path / "sub" / "reviews.sqlite3")      # a file: kept across opens
    try:
        assert len((await again.list(None, 100))[0]) == 6
    finally:
        await again.close()


async def test_sqlite_file_of_the_previous_version_is_migrated(tmp_path):
    """A reviews file written before grouping (no grp/model/team columns) opens, keeps its
    reviews and counts them under their model and team."""
    import sqlite3
    path = tmp_path / "old.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE review (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, "
               "status TEXT NOT NULL, record TEXT NOT NULL)")
    old = {k: v for k, v in _new(1).items() if k not in ("group", "count", "occurrences", "delivered")}
    db.execute("INSERT INTO review (id, status, record) VALUES (?,?,?)", (old["id"], "open", json.dumps(old)))
    db.commit()
    db.close()
    store = review.SQLiteReviewStore(path)
    try:
        assert (await store.get(old["id"]))["question"] == "q1 <b>"
        assert await store.open_by() == {("gpt-test", "t"): 1}
        assert await store.add(_new(2)) != old["id"] and await store.count("open") == 2
    finally:
        await store.close()


async def test_page_session_needs_a_configured_admin_key():
    """The reviewer page's session holds the key's digest, checked on every request: a key
    removed from the config, or no longer an admin's, ends the session (proxy/routes/review_page.py)."""
    import hashlib
    from types import SimpleNamespace

    from starlette.requests import Request

    from proxy.routes import review_page
    from proxy.auth import Authenticator
    from proxy.config import KeyConfig

    cfg = SimpleNamespace(verification=SimpleNamespace(review_db=":memory:", redis_url=None), source=None)
    store = review.open_store(cfg)
    sid = "s" * 43
    await store.session_put(review_page._sid_hash(sid), {
        "key_sha256": hashlib.sha256(ADMIN_KEY.encode()).hexdigest(), "csrf": "c" * 64}, 60)
    request = Request({"type": "http", "method": "GET", "path": "/veracity/review", "query_string": b"",
                       "headers": [(b"cookie", f"veracity_review={sid}".encode())]})

    def state(admin: bool, configured: bool = True) -> Any:
        keys = [KeyConfig(hash=hash_key(ADMIN_KEY), name="ann", admin=admin)] if configured else []
        keys.append(KeyConfig(hash=hash_key(USER_KEY), name="app"))
        return SimpleNamespace(auth=Authenticator(keys), cfg=cfg, review=store)
    rec = SimpleNamespace(principal=None)
    got = await review_page._session(state(admin=True), request, rec)
    assert got is not None and got.principal.key_name == "ann" and got.csrf == "c" * 64
    assert await review_page._session(state(admin=False), request, rec) is None
    assert await review_page._session(state(admin=True, configured=False), request, rec) is None
    await store.close()


async def test_sqlite_store_keeps_lone_surrogates():
    store = review.SQLiteReviewStore()
    rec = _new(0)
    rec["answer"] = "bad \udc80 text"
    rid = await store.add(rec)
    assert (await store.get(rid))["answer"] == "bad \udc80 text"
    await store.close()


@pytest.mark.redis
async def test_redis_store():
    url = os.environ.get("VERACITY_TEST_REDIS_URL")
    if not url:
        pytest.skip("VERACITY_TEST_REDIS_URL not set")
    store = review.RedisReviewStore(url, prefix=f"veracity:test-review:{uuid.uuid4().hex}")
    try:
        await _contract(store)
    finally:
        keys = [k async for k in store._r.scan_iter(match=store.prefix + ":*")]
        if keys:
            await store._r.delete(*keys)
        await store.close()


def test_export_line_shape():
    rec = _new(1)
    rec["status"] = "resolved"
    rec["resolution"] = {"verdict": "incorrect", "note": "n", "reviewer": "r", "resolved_at": 1}
    line = review.export_line(rec)
    assert line["label"]["verdict"] == "incorrect"
    assert line["question"] == "q1 <b>" and line["failed_checks"] == [
        {"verifier": "arithmetic", "outcome": "fail", "claim": "17 * 1 = 0"}]
    assert (line["count"], line["request_ids"], line["delivered"]) == (1, ["req-1"], "answer")


# ----------------------------------------------------------------------------- through the gateway


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review")
    pdir = tmp / "policies"
    pdir.mkdir()
    base = {"on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 1},
            "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}}}
    (pdir / "reviewed.yaml").write_text(yaml.safe_dump({**base, "name": "reviewed",
                                                        "audit": {"enabled": True, "include_text": True}}))
    (pdir / "notext.yaml").write_text(yaml.safe_dump({**base, "name": "notext"}))
    (pdir / "reviewnotext.yaml").write_text(yaml.safe_dump({**base, "name": "reviewnotext",
                                                            "review": {"include_text": False}}))
    (pdir / "blocked.yaml").write_text(yaml.safe_dump({**base, "name": "blocked", "on_failure": "block",
                                                       "review": {"when": ["failed"]}}))
    (pdir / "noreview.yaml").write_text(yaml.safe_dump({**base, "name": "noreview", "review": {"enabled": False}}))
    db = tmp / "reviews.sqlite3"
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"review_db": str(db)},
           "keys": [{"hash": hash_key(ADMIN_KEY), "name": "reviewer-ann", "team": "qa", "policy": "reviewed",
                     "admin": True},
                    {"hash": hash_key(USER_KEY), "name": "app", "team": "shop", "policy": "reviewed",
                     "allow_policy_header": True}]}
    cfg_path = tmp / "veracity.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    g = gateway_factory(cfg)
    g.config_path = cfg_path
    g.db = db
    return g


def _ask(gw, question: str = QUESTION, policy: str | None = None) -> Any:
    c = openai.OpenAI(base_url=gw.base_url, api_key=USER_KEY, max_retries=0, timeout=60,
                      default_headers={"x-veracity-policy": policy} if policy else None)
    return c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": question}])


def _api(gw, method: str, path: str, key: str | None = ADMIN_KEY, **kw: Any) -> httpx.Response:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    return httpx.request(method, gw.url + path, headers=headers, timeout=30, trust_env=False, **kw)


def _all_reviews(gw) -> list[dict[str, Any]]:
    """Every review of the gateway's store, page by page."""
    out, after = [], ""
    while True:
        page = _api(gw, "GET", f"/v1/veracity/reviews?status=all&limit=100{after}").json()
        out += page["data"]
        if not page["has_more"]:
            return out
        after = f"&after={page['last_id']}"


def _review_of(gw, request_id: str) -> dict[str, Any]:
    found = [r for r in _all_reviews(gw) if request_id in [o["request_id"] for o in r["occurrences"]]]
    assert len(found) == 1, found
    return found[0]


def test_an_answer_that_stays_wrong_goes_to_review_with_text_and_evidence(gw):
    resp = _ask(gw)
    rep = resp.model_extra["veracity"]
    assert rep["status"] == "failed" and rep["correction"]["state"] == "MAX_RETRY_EXCEEDED"
    rid = resp._request_id
    r = _review_of(gw, rid)
    assert r["reason"] == "max_retry_exceeded" and r["status"] == "open" and r["object"] == "veracity.review"
    assert (r["model"], r["team"], r["key"], r["policy"]) == ("gpt-test", "shop", "app", "reviewed")
    assert r["question"] == QUESTION and r["answer"] == WRONG
    assert r["drafts"] == [WRONG, WRONG]                          # the first draft and the one correction
    failed = [c for c in r["report"]["checks"] if c["outcome"] == "fail"]
    assert failed and failed[0]["verifier"] == "arithmetic" and "391" in json.dumps(failed[0])
    assert ADMIN_KEY not in json.dumps(r) and USER_KEY not in json.dumps(r)
    # the request's log line names the review
    assert any(rec.get("review_id") == r["id"] for rec in gw.log_records() if rec.get("request_id") == rid)


def test_without_audit_text_the_review_still_keeps_the_text(gw):
    """The audit keeps no text under this policy; the review does (a reviewer judges text)."""
    resp = _ask(gw, "What is 17 * 24? [case:other24]", policy="notext")
    r = _review_of(gw, resp._request_id)
    assert (r["question"], r["answer"]) == ("What is 17 * 24? [case:other24]", "17 * 24 = 401.")
    assert any(c["outcome"] == "fail" for c in r["report"]["checks"])


def test_review_include_text_false_keeps_checks_but_no_text(gw):
    resp = _ask(gw, "What is 17 * 25? [case:other25]", policy="reviewnotext")
    r = _review_of(gw, resp._request_id)
    assert (r["question"], r["drafts"], r["answer"]) == (None, None, None)
    assert any(c["outcome"] == "fail" for c in r["report"]["checks"])


def test_a_blocked_answer_says_the_client_got_nothing(gw):
    with pytest.raises(openai.UnprocessableEntityError):
        _ask(gw, "What is 17 * 26? [case:other26]", policy="blocked")
    r = [x for x in _all_reviews(gw) if x["question"] == "What is 17 * 26? [case:other26]"]
    assert len(r) == 1 and r[0]["delivered"] == "blocked" and r[0]["answer"] == "17 * 26 = 401."
    page = _api(gw, "GET", f"/veracity/review/{r[0]['id']}")                 # the page, by Authorization
    assert page.status_code == 200 and "Blocked (422)" in page.text and "Answer returned" not in page.text


def test_identical_failures_are_one_review_with_a_count_and_true_totals(gw):
    before = _api(gw, "GET", "/v1/veracity/reviews?limit=1").json()
    resps = [_ask(gw, "What is 17 * 27? [case:other27]") for _ in range(3)]
    r = _review_of(gw, resps[0]._request_id)
    assert r["count"] == 3 and [o["request_id"] for o in r["occurrences"]] == [x._request_id for x in resps]
    after = _api(gw, "GET", "/v1/veracity/reviews?limit=1").json()
    assert after["total"] == before["total"] + 1 and len(after["data"]) == 1     # the true count, not the page's
    page = _api(gw, "GET", f"/veracity/review/{r['id']}")
    assert "Same failure in <span class=\"n\">3</span> answers" in page.text
    queue = _api(gw, "GET", "/veracity/review")
    assert f"<title>Veracity review ({after['total']} open)</title>" in queue.text


async def test_the_page_counts_every_open_review_and_pages_through_them(gw):
    """More open reviews than a page holds: the title gives them all, not the page's 50, and
    "next page" goes on from the 51st."""
    import html
    import re

    store = review.SQLiteReviewStore(gw.db)                       # the gateway's file (WAL: shared)
    try:
        for n in range(60):
            await store.add(_new(1000 + n, claim=f"paging claim {uuid.uuid4().hex}"))
        total = await store.count("open")
    finally:
        await store.close()
    assert total >= 60
    first = _api(gw, "GET", "/veracity/review")
    assert f"<title>Veracity review ({total} open)</title>" in first.text
    assert re.search(r"showing 1&ndash;50\b", first.text) and first.text.count('class="review"') == 50
    nxt = html.unescape(re.search(r'href="([^"]+)" id="next"', first.text).group(1))
    second = _api(gw, "GET", nxt)
    shown = second.text.count('class="review"')
    assert f"<title>Veracity review ({total} open)</title>" in second.text
    assert f"showing 51&ndash;{50 + shown}" in second.text and 'id="first"' in second.text
    ids = re.findall(r'data-review-id="(rev_\w+)"', first.text + second.text)
    assert len(ids) == len(set(ids)) == 50 + shown                  # no review twice across pages


def test_no_review_for_right_answers_or_when_the_policy_turns_it_off(gw):
    before = _all_reviews(gw)
    assert _ask(gw, "What is 17 * 23? [case:right]").model_extra["veracity"]["status"] == "passed"
    assert _ask(gw, policy="noreview").model_extra["veracity"]["status"] == "failed"
    assert _all_reviews(gw) == before


@pytest.mark.parametrize("method, path, body", [
    ("GET", "/v1/veracity/reviews", None),
    ("GET", "/v1/veracity/reviews/rev_x", None),
    ("POST", "/v1/veracity/reviews/rev_x", {"verdict": "correct"}),
])
def test_review_routes_need_an_admin_key(gw, method, path, body):
    none = _api(gw, method, path, key=None, json=body)
    assert none.status_code == 401 and none.json()["error"]["code"] == "invalid_api_key"
    wrong = _api(gw, method, path, key="vk-wrong", json=body)
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_api_key"
    user = _api(gw, method, path, key=USER_KEY, json=body)
    assert user.status_code == 403
    assert user.json()["error"] == {"message": user.json()["error"]["message"], "type": "permission_error",
                                    "param": None, "code": "admin_required"}
    with pytest.raises(openai.PermissionDeniedError):           # the SDK's typed error for the shape
        openai.OpenAI(base_url=gw.base_url, api_key=USER_KEY, max_retries=0).get(
            "/veracity/reviews", cast_to=object)


def test_resolve_through_the_api(gw):
    r = _review_of(gw, _ask(gw)._request_id)
    bad = _api(gw, "POST", f"/v1/veracity/reviews/{r['id']}", json={"verdict": "maybe"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "verdict"
    ok = _api(gw, "POST", f"/v1/veracity/reviews/{r['id']}", json={"verdict": "incorrect", "note": "391"})
    assert ok.status_code == 200
    res = ok.json()["resolution"]
    assert ok.json()["status"] == "resolved" and res["verdict"] == "incorrect" and res["reviewer"] == "reviewer-ann"
    again = _api(gw, "POST", f"/v1/veracity/reviews/{r['id']}", json={"verdict": "correct"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "review_already_resolved"
    assert _api(gw, "GET", f"/v1/veracity/reviews/{r['id']}").json()["resolution"]["verdict"] == "incorrect"
    assert r["id"] not in [x["id"] for x in _api(gw, "GET", "/v1/veracity/reviews?limit=100").json()["data"]]
    missing = _api(gw, "GET", "/v1/veracity/reviews/rev_missing")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "review_not_found"


def test_list_pages_and_validates(gw):
    for _ in range(2):
        _ask(gw)
    first = _api(gw, "GET", "/v1/veracity/reviews?status=all&limit=1").json()
    assert first["object"] == "list" and len(first["data"]) == 1 and first["has_more"]
    second = _api(gw, "GET", f"/v1/veracity/reviews?status=all&limit=1&after={first['last_id']}").json()
    assert second["data"][0]["id"] != first["data"][0]["id"]
    for query, param in (("status=later", "status"), ("limit=0", "limit"), ("limit=x", "limit"),
                         ("after=rev_none", "after")):
        resp = _api(gw, "GET", f"/v1/veracity/reviews?{query}")
        assert resp.status_code in (400, 404) and resp.json()["error"]["param"] == param, query


# ----------------------------------------------------------------------------- the CLI


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VERACITY_CONFIG", "VERACITY_REDIS_URL")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=str(ROOT))


def test_cli_list_show_resolve_export(gw, tmp_path):
    rid = _review_of(gw, _ask(gw)._request_id)["id"]
    cfg = str(gw.config_path)
    listed = _cli("review", "list", "--config", cfg)
    assert listed.returncode == 0, listed.stderr
    assert rid in listed.stdout and "max_retry_exceeded" in listed.stdout
    shown = _cli("review", "show", rid, "--config", cfg)
    assert shown.returncode == 0 and json.loads(shown.stdout)["question"] == QUESTION
    assert _cli("review", "show", "rev_missing", "--config", cfg).returncode == 1
    bad = _cli("review", "resolve", rid, "--verdict", "maybe", "--config", cfg)
    assert bad.returncode == 2 and "verdict" in bad.stderr
    done = _cli("review", "resolve", rid, "--verdict", "incorrect", "--note", "wrong product",
                "--reviewer", "carol", "--config", cfg)
    assert done.returncode == 0, done.stderr
    # the gateway sees what the CLI wrote (one store)
    assert _api(gw, "GET", f"/v1/veracity/reviews/{rid}").json()["resolution"]["reviewer"] == "carol"
    assert _cli("review", "resolve", rid, "--verdict", "correct", "--config", cfg).returncode == 1
    out = tmp_path / "labelled.jsonl"
    exported = _cli("review", "export", "--out", str(out), "--config", cfg)
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    mine = [x for x in lines if x["id"] == rid]
    assert len(mine) == 1 and all(x["label"] is not None for x in lines)
    case = mine[0]
    assert case["label"]["verdict"] == "incorrect" and case["label"]["note"] == "wrong product"
    assert case["question"] == QUESTION and case["answer"] == WRONG and case["failed_checks"]


@pytest.mark.redis
def test_reviews_live_in_redis_when_configured(gateway_factory, mock, tmp_path):
    url = os.environ.get("VERACITY_TEST_REDIS_URL")
    if not url:
        pytest.skip("VERACITY_TEST_REDIS_URL not set")
    pdir = tmp_path / "policies"
    pdir.mkdir()
    (pdir / "reviewed.yaml").write_text(yaml.safe_dump({
        "name": "reviewed", "on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 1}}))
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"redis_url": url, "review_db": str(tmp_path / "unused.sqlite3")},
           "keys": [{"hash": hash_key(ADMIN_KEY), "name": "admin", "policy": "reviewed", "admin": True},
                    {"hash": hash_key(USER_KEY), "name": "app", "policy": "reviewed"}]}
    g = gateway_factory(cfg)
    rid = _review_of(g, _ask(g)._request_id)["id"]
    assert not (tmp_path / "unused.sqlite3").exists()
    cfg_path = tmp_path / "veracity.yaml"
    cfg_path.write_text(yaml.safe_dump(cfg))
    shown = _cli("review", "show", rid, "--config", str(cfg_path))           # another process, same Redis
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["reason"] == "max_retry_exceeded"
