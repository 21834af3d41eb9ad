"""Three gateway replicas behind a real load balancer, sharing one Redis (docs/deploying.md), the way
an operator runs them: three ``veracity serve`` processes with the same config
(``verification.redis_url``), HAProxy (Debian's ``haproxy``) in front balancing round robin, a
real Prometheus scraping each replica, and the real ``openai`` SDK talking to HAProxy.

Which replica served a request is proven, not assumed: HAProxy names the server it chose in a
response header (``x-veracity-replica``, from ``%[srv_name]``), each server name maps to one
gateway process and port, and the Prometheus test checks that each replica's own counter
equals the number of answers HAProxy says it served.

Shown here: one daily budget enforced by every replica after one of them spent it; a report
fetched from the replicas that did not serve the request (``GET /v1/veracity/reports/{id}``);
a review created by one replica, resolved on a second, read as resolved on the third; and
Prometheus summing the replicas to the total HAProxy saw.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml

from proxy.config import hash_key
from proxy.upstreams.mock import MockUpstream
from tests.conftest import ROOT, Gateway
from tests.fixtures.polling import stop_process, wait_for
from tests.fixtures.prometheus import Prometheus, binary, free_port

pytestmark = [pytest.mark.haproxy, pytest.mark.redis, pytest.mark.prometheus]

REPLICAS = 3
RIGHT_TXT = f"{5000 * 1.06 ** 4:,.2f}"
WRONG_TXT = "6,200.00"
EVIDENCE = "Automatic verification found"  # start of proxy.pipeline.correction.evidence_prompt()


def question(tag: str) -> str:
    return f"[case:{tag}] I invest $5,000 at 6% interest compounded annually. What is the total after 4 years?"


def answer(value: str) -> str:
    return f"With annual compounding the total is 5000 * 1.06^4 = ${value}."


SCRIPT = {"rules": [
    {"name": "fix", "match": {"any_message": r"\[case:wrongfix\]", "last_user": EVIDENCE},
     "reply": {"content": answer(RIGHT_TXT)}},
    {"name": "wrongfix", "match": {"last_user": r"\[case:wrongfix\]"}, "reply": {"content": answer(WRONG_TXT)}},
    {"name": "wrong", "match": {"any_message": r"\[case:wrong\]"}, "reply": {"content": answer(WRONG_TXT)}},
    {"name": "right", "match": {"any_message": r"\[case:right\]"}, "reply": {"content": answer(RIGHT_TXT)}},
]}

POLICIES = {
    "annotate": {"on_failure": "annotate"},
    # one extra token a day: the first corrected answer spends it, every later one is skipped
    "daily": {"on_failure": "correct", "budgets": {"key_daily": {"extra_tokens": 1}}},
    # failed answers go to people
    "review": {"on_failure": "annotate", "review": {"enabled": True, "when": ["failed"]}},
}


def _redis_url(tmp: Path) -> tuple[str, subprocess.Popen[bytes] | None]:
    """CI's Redis (``VERACITY_TEST_REDIS_URL``), else a private ``redis-server`` on a free port."""
    url = os.environ.get("VERACITY_TEST_REDIS_URL")
    if url:
        return url, None
    server = shutil.which("redis-server")
    if server is None:
        pytest.skip("no Redis: set VERACITY_TEST_REDIS_URL or install redis-server")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    def up() -> bool:
        try:
            return bool(redis.Redis(port=port, socket_timeout=1).ping())
        except redis.RedisError:
            return False
    wait_for(up, "the private redis-server", timeout=30)
    return f"redis://127.0.0.1:{port}/0", proc


HAPROXY_CFG = ROOT / "deploy" / "haproxy" / "veracity.cfg"


class HAProxy:
    """``haproxy -db`` with the shipped ``deploy/haproxy/veracity.cfg``, its addresses from the
    environment: listening on a free port, balancing ``servers`` (``r1``.. -> port) round robin
    and naming the chosen server in the ``x-veracity-replica`` response header."""

    def __init__(self, servers: dict[str, int], workdir: Path) -> None:
        exe = binary("haproxy", "/usr/sbin/haproxy")
        self.port = free_port()
        env = {**os.environ, "VERACITY_LB_BIND": f"127.0.0.1:{self.port}"}
        for i, (name, port) in enumerate(servers.items(), 1):
            assert name == f"r{i}"
            env[f"VERACITY_REPLICA_{i}"] = f"127.0.0.1:{port}"
        self.log_path = workdir / "haproxy.log"
        check = subprocess.run([exe, "-c", "-f", str(HAPROXY_CFG)], capture_output=True, text=True, timeout=30, env=env)
        assert check.returncode == 0, check.stdout + check.stderr
        self._logf = open(self.log_path, "w")
        self.proc = subprocess.Popen([exe, "-db", "-f", str(HAPROXY_CFG)], stdout=self._logf, env=env,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"

        def all_up() -> bool:  # every server passed its health check: /readyz through the LB names each
            seen = set()
            for _ in range(3 * len(servers)):
                try:
                    r = httpx.get(self.url + "/readyz", timeout=5, trust_env=False)
                except httpx.HTTPError:
                    return False
                if r.status_code == 200:
                    seen.add(r.headers.get("x-veracity-replica"))
            return seen == set(servers)
        assert self.proc.poll() is None, self.log_path.read_text()
        wait_for(all_up, "haproxy with every replica up", timeout=60)

    def stop(self) -> None:
        stop_process(self.proc)
        self._logf.close()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    binary("haproxy", "/usr/sbin/haproxy")
    binary("prometheus", "/usr/bin/prometheus")
    tmp = tmp_path_factory.mktemp("replicas")
    started: list[Any] = []
    redis_proc = None
    try:
        redis_url, redis_proc = _redis_url(tmp)
        run = uuid.uuid4().hex[:10]  # fresh budget and review identities on a shared Redis
        pdir = tmp / "policies"
        pdir.mkdir()
        for name, doc in POLICIES.items():
            doc = dict(doc, name=name, risk={"threshold": 0.1}, overridable=["on_failure"])
            doc["audit"] = {"enabled": True, "include_text": True}
            (pdir / f"{name}.yaml").write_text(yaml.safe_dump(doc))
        mock = MockUpstream(SCRIPT).start()
        started.append(mock)
        keys = {"app": f"vk-app-{run}", "budget": f"vk-budget-{run}", "admin": f"vk-admin-{run}"}
        cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
               "keys": [{"name": f"{name}-{run}", "hash": hash_key(key), "team": f"team-{run}",
                         "policy": "annotate", "allow_policy_header": True, "admin": name == "admin"}
                        for name, key in keys.items()],
               "policies": {"dir": str(pdir), "check_interval_s": 0},
               "verification": {"redis_url": redis_url}}
        gws = []
        for _ in range(REPLICAS):
            gw = Gateway(cfg)
            started.append(gw)
            gws.append(gw)
        names = {f"r{i + 1}": gw for i, gw in enumerate(gws)}
        lb = HAProxy({name: gw.port for name, gw in names.items()}, tmp)
        started.append(lb)
        prom = Prometheus([f"127.0.0.1:{gw.port}" for gw in gws], tmp / "prometheus")
        started.append(prom)
        yield {"lb": lb, "gws": names, "keys": keys, "prom": prom, "served": Counter(), "run": run}
    finally:
        for thing in reversed(started):
            (thing.cleanup if isinstance(thing, Gateway) else thing.stop)()
        stop_process(redis_proc, grace_s=10)


def chat(fleet, key: str, policy: str, tag: str, request_id: str | None = None) -> tuple[str, dict[str, Any], str]:
    """One chat completion through HAProxy: (replica name, report, request id)."""
    headers = {"x-veracity-policy": policy}
    if request_id:
        headers["x-request-id"] = request_id
    client = openai.OpenAI(base_url=fleet["lb"].url + "/v1", api_key=fleet["keys"][key], max_retries=0,
                           timeout=120, default_headers=headers)
    raw = client.chat.completions.with_raw_response.create(
        model="gpt-test", messages=[{"role": "user", "content": question(tag)}])
    replica = raw.headers["x-veracity-replica"]
    assert replica in fleet["gws"], raw.headers
    fleet["served"][replica] += 1
    return replica, raw.parse().model_extra["veracity"], raw.headers["x-request-id"]


def _direct(fleet, replica: str, method: str, path: str, key: str, **kw: Any) -> httpx.Response:
    """A request to one replica's own port, bypassing the load balancer."""
    return httpx.request(method, fleet["gws"][replica].url + path, timeout=60, trust_env=False,
                         headers={"Authorization": f"Bearer {fleet['keys'][key]}"}, **kw)


def test_one_daily_budget_is_enforced_by_every_replica(fleet):
    first, rep, _ = chat(fleet, "budget", "daily", "wrongfix")
    assert rep["status"] == "corrected" and rep["cost"]["tokens"] > 1  # spends the day's one token
    later = [chat(fleet, "budget", "daily", "wrongfix") for _ in range(REPLICAS)]
    # round robin: the next three answers come from all three replicas, two of them not `first`
    assert {r for r, _, _ in later} == set(fleet["gws"]), later
    for replica, rep, _ in later:
        assert rep["status"] == "skipped", (replica, rep)
        assert "key daily extra_tokens budget exhausted" in rep["reason"], (replica, rep)
    # another key of the same team is not affected (the limit is the key's)
    _, other, _ = chat(fleet, "app", "daily", "wrongfix")
    assert other["status"] == "corrected"


def test_report_fetched_from_replicas_that_did_not_serve_the_request(fleet):
    rid = f"req-replicas-{fleet['run']}"
    served_by, rep, got_rid = chat(fleet, "app", "annotate", "wrong", request_id=rid)
    assert got_rid == rid and rep["status"] == "failed"
    others = [name for name in fleet["gws"] if name != served_by]
    assert len(others) == REPLICAS - 1
    for name in others:
        r = wait_for(lambda: (lambda resp: resp if resp.status_code == 200 else None)(
            _direct(fleet, name, "GET", f"/v1/veracity/reports/{rid}", "app")),
            f"the report on replica {name}", timeout=30)
        body = r.json()["veracity"]
        assert body["status"] == "failed"
        assert [(c["verifier"], c["outcome"]) for c in body["checks"]] == \
               [(c["verifier"], c["outcome"]) for c in rep["checks"]]
        # the admin key may read it too; a key that did not make the request may not
        assert _direct(fleet, name, "GET", f"/v1/veracity/reports/{rid}", "admin").status_code == 200
        assert _direct(fleet, name, "GET", f"/v1/veracity/reports/{rid}", "budget").status_code in (403, 404)


def test_review_created_on_one_replica_resolved_on_another_read_on_the_third(fleet):
    rid = f"req-review-{fleet['run']}"
    created_by, rep, _ = chat(fleet, "app", "review", "wrong", request_id=rid)
    assert rep["status"] == "failed"
    second, third = [name for name in fleet["gws"] if name != created_by]

    def find() -> dict[str, Any] | None:  # pages oldest first: a shared Redis may hold other tests' reviews
        after = None
        while True:
            r = _direct(fleet, second, "GET", "/v1/veracity/reviews", "admin",
                        params={"status": "open", "limit": 100, **({"after": after} if after else {})})
            assert r.status_code == 200, r.text
            page = r.json()
            # the same failure as an open review of an earlier run is counted on that review
            mine = [v for v in page["data"] if rid in [o["request_id"] for o in v.get("occurrences") or ()]]
            if mine:
                return mine[0]
            if not page["has_more"] or not page["data"]:
                return None
            after = page["data"][-1]["id"]

    review = wait_for(find, f"the review of {rid} listed by replica {second}", timeout=30)
    assert review["status"] == "open" and review["reason"] == "failed"
    assert review["answer"] == answer(WRONG_TXT)
    r = _direct(fleet, second, "POST", f"/v1/veracity/reviews/{review['id']}", "admin",
                json={"verdict": "incorrect", "note": f"wrong total, resolved on {second}"})
    assert r.status_code == 200, r.text
    got = _direct(fleet, third, "GET", f"/v1/veracity/reviews/{review['id']}", "admin").json()
    assert got["status"] == "resolved" and got["resolution"]["verdict"] == "incorrect"
    assert got["resolution"]["note"] == f"wrong total, resolved on {second}"
    # and the replica that created it cannot resolve it a second time
    again = _direct(fleet, created_by, "POST", f"/v1/veracity/reviews/{review['id']}", "admin",
                    json={"verdict": "correct"})
    assert again.status_code == 409 and again.json()["error"]["code"] == "review_already_resolved"


def test_prometheus_sums_the_replicas(fleet):
    for _ in range(2 * REPLICAS):
        chat(fleet, "app", "annotate", "right")
    served = fleet["served"]  # every chat completion of this module, by the replica HAProxy chose
    assert set(served) == set(fleet["gws"]) and sum(served.values()) >= 2 * REPLICAS
    prom = fleet["prom"]
    chat_sel = 'veracity_requests_total{route="/v1/chat/completions"}'
    prom.settled(chat_sel, sum(served.values()))
    by_instance = {r["metric"]["instance"]: float(r["value"][1])
                   for r in prom.query(f"sum by (instance) ({chat_sel})")}
    assert by_instance == {f"127.0.0.1:{gw.port}": float(served[name]) for name, gw in fleet["gws"].items()}
    assert prom.value(f"sum({chat_sel})") == sum(served.values())
    assert prom.value('count(up{job="veracity"} == 1)') == REPLICAS
