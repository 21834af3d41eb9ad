"""The reviewer page (proxy/routes/review_page.py) in a real headless browser: Debian's ``chromium``
driven through ``chromedriver`` by Selenium. A reviewer signs in with the admin key, sees the
open review with its drafts and the failed check's evidence (hostile answer text shown as
text, never run), the true open count in the title, the same failure counted on one review,
must choose a verdict (none is preselected: the browser refuses the form without one),
resolves it, and the API shows it resolved; a blocked answer is labelled "Blocked (422)".
Plus, over plain HTTP: the session cookie (a random id, never the key; its attributes), the
server-side session ending on sign-out (the store keeps hashes only), the CSRF
token, and ``Authorization: Bearer`` on the page routes.

In CI (``VERACITY_CI=1``, where ``.ci/run`` installs chromium and chromium-driver) a missing
browser fails the test instead of skipping it (the convention of tests/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.config import hash_key
from tests.fixtures.mock import scripted_mock

ADMIN_KEY = "vk-admin-" + "c" * 20
USER_KEY = "vk-user-" + "d" * 20
#: an answer that stays wrong and tries to run script in the reviewer's browser
HOSTILE = "17 * 23 = 401 <img src=x onerror=\"document.title='pwned'\"><script>document.title='pwned'</script>"
CHROMIUM = os.environ.get("VERACITY_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("VERACITY_CHROMEDRIVER", "/usr/bin/chromedriver")

mock, _reset_mock = scripted_mock({"models": ["gpt-test"], "rules": [
    {"name": "wrong", "match": {"any_message": r"\[case:page\]"}, "reply": {"content": HOSTILE}},
    {"name": "blocked", "match": {"any_message": r"\[case:blocked\]"}, "reply": {"content": "12 * 12 = 150."}},
]})


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review-page")
    pdir = tmp / "policies"
    pdir.mkdir()
    (pdir / "reviewed.yaml").write_text(yaml.safe_dump({
        "name": "reviewed", "on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 1},
        "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}},
        "audit": {"enabled": True, "include_text": False}}))     # the review keeps text all the same
    (pdir / "blocking.yaml").write_text(yaml.safe_dump({
        "name": "blocking", "on_failure": "block", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 0},
        "review": {"when": ["failed"]}, "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}}}))
    g = gateway_factory({
        "upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
        "policies": {"dir": str(pdir), "check_interval_s": 0},
        "verification": {"review_db": str(tmp / "reviews.sqlite3")},
        "keys": [{"hash": hash_key(ADMIN_KEY), "name": "reviewer-bo", "policy": "reviewed", "admin": True},
                 {"hash": hash_key(USER_KEY), "name": "app", "policy": "reviewed", "allow_policy_header": True}]})
    g.review_db = str(tmp / "reviews.sqlite3")
    return g


def _ask(gw, content: str, policy: str | None = None) -> Any:
    c = openai.OpenAI(base_url=gw.base_url, api_key=USER_KEY, max_retries=0, timeout=60,
                      default_headers={"x-veracity-policy": policy} if policy else None)
    return c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": content}])


def _reviews(gw, status: str = "open") -> dict[str, Any]:
    return httpx.get(f"{gw.url}/v1/veracity/reviews?limit=100&status={status}", trust_env=False,
                     headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()


def _open_review(gw, times: int = 1) -> dict[str, Any]:
    """Ask ``times`` times for an answer that stays wrong; the open review that holds them."""
    ids = []
    for _ in range(times):
        resp = _ask(gw, "17 * 23? [case:page]")
        assert resp.model_extra["veracity"]["status"] == "failed"
        ids.append(resp._request_id)
    found = [r for r in _reviews(gw)["data"] if ids[0] in [o["request_id"] for o in r["occurrences"]]]
    assert len(found) == 1 and {o["request_id"] for o in found[0]["occurrences"]} >= set(ids)
    return found[0]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip)")
    if missing:
        if os.environ.get("VERACITY_CI") == "1":
            pytest.fail(f"CI must provide a headless browser; missing: {', '.join(missing)}")
        pytest.skip(f"no headless browser: missing {', '.join(missing)} (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 "--no-first-run", "--no-default-browser-check"):
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _submit(b: Any, button: Any) -> None:
    """Click a form's submit ``button`` and wait until the browser has left the page (the old
    document's root went stale): reading the next page's elements before that raced the
    navigation and hit the old page (StaleElementReferenceException, seen on a loaded machine).
    Mid-navigation chromedriver may instead answer "unknown error: ... Node with given id does not
    belong to the document" (seen in a .ci/run): the same fact, the old root is gone."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root = b.find_element(By.TAG_NAME, "html")
    button.click()

    def left_the_page(_: Any) -> bool:
        try:
            root.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as e:
            if "does not belong to the document" in str(e):
                return True
            raise
        return False

    WebDriverWait(b, 30).until(left_the_page)


def test_reviewer_signs_in_sees_the_evidence_and_resolves(gw, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    r = _open_review(gw, times=3)
    assert r["count"] == 3
    with pytest.raises(openai.UnprocessableEntityError):                 # blocked: the client got a 422
        _ask(gw, "12 * 12? [case:blocked]", policy="blocking")
    total = _reviews(gw)["total"]
    b = browser
    b.get(gw.url + "/veracity/review")
    b.find_element(By.ID, "key").send_keys("vk-not-a-key")
    _submit(b, b.find_element(By.ID, "login"))
    assert "Unknown key" in b.find_element(By.ID, "message").text
    b.find_element(By.ID, "key").send_keys(USER_KEY)                      # a key, but not an admin's
    _submit(b, b.find_element(By.ID, "login"))
    assert "not an admin key" in b.find_element(By.ID, "message").text
    b.find_element(By.ID, "key").send_keys(ADMIN_KEY)
    _submit(b, b.find_element(By.ID, "login"))

    cookie = b.get_cookie("veracity_review")["value"]
    assert ADMIN_KEY not in cookie and len(cookie) >= 40                  # a random session id, not the key
    assert b.title == f"Veracity review ({total} open)" and b.find_element(By.ID, "total").text == str(total)
    section = b.find_element(By.ID, f"review-{r['id']}")
    assert section.get_attribute("data-status") == "open"
    assert section.find_element(By.CSS_SELECTOR, ".count .n").text == "3"  # one review, the failure counted
    assert section.find_element(By.CSS_SELECTOR, "h3.delivered").text == "Answer returned"
    assert "max_retry_exceeded" in section.text
    drafts = [d.text for d in section.find_elements(By.CSS_SELECTOR, "pre.draft")]
    assert drafts == [HOSTILE, HOSTILE]                                    # shown as text, verbatim
    assert section.find_element(By.CSS_SELECTOR, "pre.question").text == "17 * 23? [case:page]"
    failed = section.find_elements(By.CSS_SELECTOR, "tr.check.fail")
    assert failed and "arithmetic" in failed[0].text and "391" in failed[0].text   # the evidence: 17 * 23 = 391
    assert "17 * 23" in failed[0].find_element(By.CSS_SELECTOR, "pre.evidence").text or "391" in failed[0].text
    # the hostile answer did not become markup or run
    assert b.find_elements(By.TAG_NAME, "img") == [] and b.find_elements(By.TAG_NAME, "script") == []
    assert b.title != "pwned"

    verdict = Select(section.find_element(By.NAME, "verdict"))
    assert verdict.first_selected_option.get_attribute("value") == ""      # no verdict chosen for the reviewer
    section.find_element(By.CSS_SELECTOR, "form.resolve button[type=submit]").click()
    assert b.find_element(By.ID, f"review-{r['id']}")                     # the browser kept the form: required
    assert section.find_element(By.NAME, "verdict").get_property("validity")["valueMissing"]
    blocked = [s for s in b.find_elements(By.CSS_SELECTOR, "section.review")
               if "12 * 12? [case:blocked]" in s.text]
    assert len(blocked) == 1
    assert blocked[0].find_element(By.CSS_SELECTOR, "h3.delivered").text.startswith("Blocked (422)")
    assert blocked[0].find_element(By.CSS_SELECTOR, "pre.answer").text == "12 * 12 = 150."

    verdict.select_by_value("incorrect")
    section.find_element(By.NAME, "note").send_keys("17 * 23 is 391; the model kept 401")
    _submit(b, section.find_element(By.CSS_SELECTOR, "form.resolve button[type=submit]"))
    assert f"Resolved {r['id']}" in b.find_element(By.ID, "message").text
    assert b.find_elements(By.ID, f"review-{r['id']}") == []               # no longer in the open list
    assert b.title == f"Veracity review ({total - 1} open)"

    got = httpx.get(f"{gw.url}/v1/veracity/reviews/{r['id']}", headers={"authorization": f"Bearer {ADMIN_KEY}"},
                    trust_env=False).json()
    assert got["status"] == "resolved"
    assert got["resolution"] == {**got["resolution"], "verdict": "incorrect", "reviewer": "reviewer-bo",
                                 "note": "17 * 23 is 391; the model kept 401"}

    b.get(gw.url + "/veracity/review?status=resolved")
    done = b.find_element(By.ID, f"review-{r['id']}")
    assert done.find_element(By.CSS_SELECTOR, ".verdict").text == "incorrect"
    _submit(b, b.find_element(By.ID, "logout"))
    assert b.find_elements(By.ID, "key")                                   # signed out: the sign-in form again


def test_session_cookie_and_csrf_token(gw):
    r = _open_review(gw)
    with httpx.Client(base_url=gw.url, trust_env=False, follow_redirects=False) as c:
        assert c.get("/veracity/review").status_code == 401                # the sign-in form
        login = c.post("/veracity/review/login", data={"key": ADMIN_KEY})
        assert login.status_code == 303
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and re.search(r"SameSite=strict", cookie, re.I) and "Path=/veracity/review" in cookie
        sid = c.cookies["veracity_review"]
        assert ADMIN_KEY not in cookie and sid != ADMIN_KEY and len(sid) >= 40
        # a second sign-in gets another random id
        with httpx.Client(base_url=gw.url, trust_env=False, follow_redirects=False) as c2:
            c2.post("/veracity/review/login", data={"key": ADMIN_KEY})
            assert c2.cookies["veracity_review"] != sid
        # a made-up session id is no session
        assert httpx.get(f"{gw.url}/veracity/review", cookies={"veracity_review": "x" * 43},
                         trust_env=False).status_code == 401
        page = c.get("/veracity/review")
        assert page.status_code == 200 and "script-src" not in page.headers["content-security-policy"]
        assert "default-src 'none'" in page.headers["content-security-policy"]
        token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page.text).group(1)
        # the cookie alone is not enough: a cross-site form cannot know the token
        forged = c.post(f"/veracity/review/{r['id']}", data={"verdict": "correct", "note": "x"})
        assert forged.status_code == 403
        wrong = c.post(f"/veracity/review/{r['id']}", data={"verdict": "correct", "csrf_token": "0" * 64})
        assert wrong.status_code == 403
        assert httpx.get(f"{gw.url}/v1/veracity/reviews/{r['id']}", trust_env=False,
                         headers={"authorization": f"Bearer {ADMIN_KEY}"}).json()["status"] == "open"
        ok = c.post(f"/veracity/review/{r['id']}", data={"verdict": "correct", "csrf_token": token})
        assert ok.status_code == 303
        # sign-out ends the session on the server: the old id no longer opens the page
        assert c.post("/veracity/review/logout", data={"csrf_token": token}).status_code == 303
        assert httpx.get(f"{gw.url}/veracity/review", cookies={"veracity_review": sid},
                         trust_env=False).status_code == 401
    # without the session cookie the form token does nothing
    anon = httpx.post(f"{gw.url}/veracity/review/{r['id']}", data={"verdict": "correct", "csrf_token": token},
                      trust_env=False)
    assert anon.status_code == 401
    # the session's store row holds hashes, never the key or the session id
    import sqlite3
    db = sqlite3.connect(gw.review_db)
    rows = " ".join(str(x) for row in db.execute("SELECT id, data FROM review_session") for x in row)
    db.close()
    assert rows and ADMIN_KEY not in rows and sid not in rows


def test_page_routes_take_an_authorization_header(gw):
    r = _open_review(gw)
    admin = {"authorization": f"Bearer {ADMIN_KEY}"}
    page = httpx.get(f"{gw.url}/veracity/review", headers=admin, trust_env=False)
    assert page.status_code == 200 and f"review-{r['id']}" in page.text
    assert httpx.get(f"{gw.url}/veracity/review", headers={"authorization": f"Bearer {USER_KEY}"},
                     trust_env=False).status_code == 401                 # not an admin key
    # a header cannot be set by another site's form: no CSRF token needed
    done = httpx.post(f"{gw.url}/veracity/review/{r['id']}", headers=admin, trust_env=False,
                      data={"verdict": "cannot_tell", "note": "by script"})
    assert done.status_code == 303
    assert httpx.get(f"{gw.url}/v1/veracity/reviews/{r['id']}", headers=admin,
                     trust_env=False).json()["resolution"]["verdict"] == "cannot_tell"
    # no verdict chosen: refused, not taken as `correct`
    r2 = _open_review(gw)
    none = httpx.post(f"{gw.url}/veracity/review/{r2['id']}", headers=admin, trust_env=False, data={"note": "x"})
    assert none.status_code == 400 and _reviews(gw)["data"] and r2["id"] in [x["id"] for x in _reviews(gw)["data"]]
