"""The reviewer page (proxy/review_page.py) in a real headless browser: Debian's ``chromium``
driven through ``chromedriver`` by Selenium. A reviewer signs in with the admin key, sees the
open review with its drafts and the failed check's evidence (hostile answer text shown as
text, never run), resolves it, and the API shows it resolved. Plus the cookie's attributes
and the CSRF token, over plain HTTP.

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
]})


@pytest.fixture(scope="module")
def gw(gateway_factory, mock, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review-page")
    pdir = tmp / "policies"
    pdir.mkdir()
    (pdir / "reviewed.yaml").write_text(yaml.safe_dump({
        "name": "reviewed", "on_failure": "correct", "risk": {"threshold": 0.1}, "correction": {"max_rounds": 1},
        "verifiers": {"code": {"enabled": False}, "citations": {"enabled": False}},
        "audit": {"enabled": True, "include_text": True}}))
    return gateway_factory({
        "upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
        "policies": {"dir": str(pdir), "check_interval_s": 0},
        "verification": {"review_db": str(tmp / "reviews.sqlite3")},
        "keys": [{"hash": hash_key(ADMIN_KEY), "name": "reviewer-bo", "policy": "reviewed", "admin": True},
                 {"hash": hash_key(USER_KEY), "name": "app", "policy": "reviewed"}]})


def _open_review(gw) -> dict[str, Any]:
    c = openai.OpenAI(base_url=gw.base_url, api_key=USER_KEY, max_retries=0, timeout=60)
    resp = c.chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": "17 * 23? [case:page]"}])
    assert resp.model_extra["veracity"]["status"] == "failed"
    data = httpx.get(gw.url + "/v1/veracity/reviews?limit=100", headers={"authorization": f"Bearer {ADMIN_KEY}"},
                     trust_env=False).json()["data"]
    return next(r for r in data if r["request_id"] == resp._request_id)


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

    r = _open_review(gw)
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

    section = b.find_element(By.ID, f"review-{r['id']}")
    assert section.get_attribute("data-status") == "open"
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

    Select(section.find_element(By.NAME, "verdict")).select_by_value("incorrect")
    section.find_element(By.NAME, "note").send_keys("17 * 23 is 391; the model kept 401")
    _submit(b, section.find_element(By.CSS_SELECTOR, "form.resolve button[type=submit]"))
    assert f"Resolved {r['id']}" in b.find_element(By.ID, "message").text
    assert b.find_elements(By.ID, f"review-{r['id']}") == []               # no longer in the open list

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
    # without the session cookie the form token does nothing
    anon = httpx.post(f"{gw.url}/veracity/review/{r['id']}", data={"verdict": "correct", "csrf_token": token},
                      trust_env=False)
    assert anon.status_code == 401
