"""The running gateway's state lives in one object (proxy/gateway.py), not in module registries:
two gateways in one process share nothing, closing one closes what it opened, importing the
gateway starts no thread, and the verifiers library gets its sandboxes from an object the caller
owns (verifiers.run.Sandboxes). In-process: no server, no upstream call."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.config import GatewayConfig, UpstreamConfig
from proxy.gateway import Gateway, VerificationResources
from proxy.stores.review import make_review
from verifiers.run import Sandboxes, run

ROOT = Path(__file__).resolve().parents[2]


def _cfg(tmp_path: Path, **verification: object) -> GatewayConfig:
    (tmp_path / "default.yaml").write_text("name: default\n")
    return GatewayConfig(upstreams=[UpstreamConfig(name="up", base_url="http://127.0.0.1:9/v1", models=["*"])],
                         policies={"dir": str(tmp_path)},
                         verification={"review_db": str(tmp_path / "reviews.sqlite3"), **verification})


def test_two_gateways_for_one_config_share_no_state(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    a, b = Gateway(cfg), Gateway(cfg)
    assert a.runtime is not b.runtime and a.runtime is a.runtime
    assert a.reports is not None and a.reports is not b.reports and a.reports is a.reports
    assert a.verification.facts_cache("memory") is not b.verification.facts_cache("memory")
    assert a.verification.facts_cache("memory") is a.verification.facts_cache("memory")
    assert a.verification.facts_cache("off") is None

    async def close() -> None:
        await a.aclose()
        await b.aclose()

    asyncio.run(close())


def test_a_gateway_makes_nothing_until_used(tmp_path: Path) -> None:
    """Making one does no I/O: the review file appears only when a review store is first used."""
    gw = Gateway(_cfg(tmp_path, audit=str(tmp_path / "audit.jsonl")))
    assert not (tmp_path / "reviews.sqlite3").exists() and not (tmp_path / "audit.jsonl").exists()
    assert asyncio.run(gw.review_backlog()) is None  # nothing to read: no store opened for a scrape
    assert not (tmp_path / "reviews.sqlite3").exists()
    gw.runtime  # noqa: B018
    assert (tmp_path / "audit.jsonl").exists()
    asyncio.run(gw.aclose())


def test_closing_a_gateway_closes_what_it_opened(tmp_path: Path) -> None:
    gw = Gateway(_cfg(tmp_path, audit=str(tmp_path / "audit.jsonl")))
    ran: list[str] = []

    async def go() -> None:
        await gw.start()  # upstream clients, runtime, warm-up
        assert gw.upstreams is not None and gw._warming is not None
        rid = await gw.review.add(make_review(request_id="r1", model="m", team="t", key=None, policy="default",
                                              reason="failed", report={"status": "failed", "checks": []}))
        assert (await gw.review.get(rid))["request_id"] == "r1"
        gate = asyncio.Event()

        async def background() -> None:
            try:
                await gate.wait()
            finally:
                ran.append("ended")

        assert gw.runtime.spawn(background()) is not None
        await asyncio.sleep(0)
        audit, review = gw.runtime.audit, gw.review
        await asyncio.wait_for(gw.aclose(timeout=0.1), 30)  # the background task is cancelled, not awaited for ever
        assert ran == ["ended"] and not gw.runtime._tasks
        assert audit is not None and audit._fh is not None and audit._fh.closed
        with pytest.raises(Exception):  # the SQLite review store's connection is closed
            await review.get(rid)
        await gw.aclose()  # idempotent

    asyncio.run(go())


def test_importing_the_gateway_starts_no_thread() -> None:
    code = ("import threading, proxy.app, proxy.pipeline.sequence, proxy.gateway;"
            "print(sorted(t.name for t in threading.enumerate()))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['MainThread']"


def test_run_takes_its_sandboxes_from_the_caller() -> None:
    answer = "```python\nprint(6 * 7)\n```\nThis prints:\n```\n42\n```\n"
    spec = {"sandbox": {"backend": "none"}}
    boxes = Sandboxes()

    async def twice() -> None:
        for _ in range(2):
            await run(answer, ["code"], options={"code": spec}, sandboxes=boxes)

    asyncio.run(twice())
    assert len(boxes) == 1  # one sandbox per (backend, limits), kept across calls
    made = boxes.get({"backend": "none"})
    assert made.name == "none"
    boxes.close()
    assert len(boxes) == 0


def test_a_bad_sandbox_spec_is_the_code_verifier_error_not_a_failed_run() -> None:
    rep = asyncio.run(run("```python\nprint(1)\n```", ["code"], options={"code": {"sandbox": {"backend": "nope"}}},
                          sandboxes=Sandboxes()))
    assert [c.outcome for c in rep.checks] == ["error"] and "nope" in rep.checks[0].note


def test_verification_resources_close_their_caches_and_sandboxes() -> None:
    res = VerificationResources()
    res.sandboxes.get({"backend": "none"})
    cache = res.facts_cache("memory")
    if cache is None:
        pytest.skip("the facts verifier is not installed")
    asyncio.run(res.aclose())
    assert len(res.sandboxes) == 0 and res.facts_cache("memory") is not cache
