"""The gateway's event loop stays free while a search backend answers something huge (docs/design.md
"No CPU-heavy work on the event loop"): the real gateway (``veracity serve`` subprocess), the
scripted mock upstream, and a scripted SearXNG on 127.0.0.1 answering a 7 MB result (under the
8 MB body cap), 50,000 nested tags, the same 7 MB gzip-compressed, or a gzip bomb.

While the facts-checked request is in flight -- after the backend has written its whole answer
and before the gateway answers the client -- ``GET /healthz`` must be answered, and the report
must say the oversized result was read in part (or, for the bomb, that the source was
unavailable), never a verdict it cannot rest on. Latency figures are measured in
``bench/loop_stall_bench.py``, not asserted here.
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import tracemalloc

import httpx
import openai
import pytest
import yaml

from proxy.upstreams.mock import MockUpstream
from tests.fixtures.oversized_bodies import ANSWER, PROSE, SEVEN_MB, bodies
from tests.fixtures.policies import rag_policy
from tests.fixtures.search_servers import FakeAPI
from verifiers.facts.backends._http import BodyTooLarge, BoundedDecoder
from verifiers.facts.backends.searxng import SearxngBackend
from verifiers.facts import SourceUnavailable

def test_the_big_body_is_seven_mb_under_the_8_mb_cap() -> None:
    big = bodies()["big"][0]
    assert SEVEN_MB * 0.95 < len(big) < 8 * 1024 * 1024


@pytest.fixture(scope="module")
def env(tmp_path_factory, gateway_factory):
    tmp = tmp_path_factory.mktemp("loop-free")
    apis: dict[str, FakeAPI] = {}
    pdir = tmp / "policies"
    pdir.mkdir()
    for kind, (data, headers) in bodies().items():
        api = apis[kind] = FakeAPI().__enter__()
        api.routes["/search"] = lambda p, q, h, d=data, hd=headers: (200, "application/json", d, hd)
        doc = rag_policy(f"web-{kind}", {"backends": {"use": ["searxng"], "timeout_s": 10,
                                                      "searxng": {"url": api.url + "/search"}},
                                         "cache": "off", "unconfirmed_note": False})
        (pdir / f"web-{kind}.yaml").write_text(yaml.safe_dump(doc))
    rules = [{"name": "web", "match": {"last_user": r"\[case:web\]"}, "reply": {"content": ANSWER}}]
    mock = MockUpstream({"rules": rules, "models": ["gpt-test"]}).start()
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock.base_url}],
           "policies": {"dir": str(pdir), "check_interval_s": 0},
           "verification": {"budget_db": str(tmp / "budget.sqlite3")}}
    gw = gateway_factory(cfg)
    yield {"gw": gw, "apis": apis}
    mock.stop()
    for api in apis.values():
        api.__exit__(None, None, None)


class Prober(threading.Thread):
    """``GET /healthz`` one after the other until stopped; ``probes``: ``(sent, answered,
    status)`` in ``time.monotonic()`` seconds."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url = url
        self.probes: list[tuple[float, float, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=120) as c:
            while not self.stop.is_set():
                t0 = time.monotonic()
                r = c.get(self.url + "/healthz")
                self.probes.append((t0, time.monotonic(), r.status_code))
                self.stop.wait(0.01)


@pytest.mark.parametrize("kind", ["big", "deep", "gzip", "bomb"])
def test_healthz_answers_while_a_backend_answers_something_huge(env, kind):
    api = env["apis"][kind]
    api.sent.clear()
    prober = Prober(env["gw"].url)
    prober.start()
    try:
        c = openai.OpenAI(base_url=env["gw"].base_url, api_key="sk-test", max_retries=0, timeout=180,
                          default_headers={"x-veracity-policy": f"web-{kind}"})
        resp = c.chat.completions.create(model="gpt-test", messages=[
            {"role": "user", "content": "[case:web] Tell me about the Eiffel Tower."}])
        done = time.monotonic()
    finally:
        prober.stop.set()
        prober.join(timeout=130)
    assert resp.choices[0].message.content == ANSWER        # the answer itself is never touched
    rep = resp.model_extra["veracity"]
    facts = [ch for ch in rep["checks"] if ch["verifier"] == "facts"]
    assert facts and all(ch["outcome"] == "unknown" for ch in facts), rep
    assert rep["status"] not in ("passed", "failed", "corrected")
    if kind == "bomb":   # stopped while inflating: the source is unavailable, never evidence
        assert all("unavailable: searxng" in ch["note"] for ch in facts), facts
    else:                # read in part, and said so
        assert all("read in part" in ch["note"] and "searxng" in ch["note"] for ch in facts), facts
    # the loop was free: a probe sent after the backend had written its whole answer was
    # answered while the gateway was still working on the request
    assert api.sent, "the backend was never asked"
    first_sent = api.sent[0][1]
    assert all(status == 200 for _, _, status in prober.probes)
    in_flight = [p for p in prober.probes if p[0] >= first_sent and p[1] < done]
    assert in_flight, (first_sent, done, prober.probes[-5:])


# -- the pieces, without a gateway ---------------------------------------------------------------

def test_a_gzip_bomb_is_stopped_while_inflating_not_after():
    """64 kB of compressed zeros inflate to ~64 MB: the decoder holds at most limit + 1 bytes."""
    limit = 1024 * 1024
    bomb = gzip.compress(b"\0" * (512 * 1024 * 1024), 9)
    d = BoundedDecoder("gzip", limit)
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge):
            for i in range(0, len(bomb), 65536):
                d.feed(bomb[i:i + 65536])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(d.body()) <= limit + 1
    assert peak < 4 * limit, peak


@pytest.mark.parametrize("coding", ["gzip", "x-gzip", "deflate", "deflate-raw", ""])
def test_bounded_decoder_reads_what_it_is_given(coding):
    data = json.dumps({"results": [{"content": PROSE * 50}]}).encode()
    if coding in ("gzip", "x-gzip"):
        raw = gzip.compress(data) + gzip.compress(b"")      # two members: both read
    elif coding == "deflate":
        import zlib
        raw = zlib.compress(data)
    elif coding == "deflate-raw":
        import zlib
        c = zlib.compressobj(wbits=-15)
        raw, coding = c.compress(data) + c.flush(), "deflate"
    else:
        raw = data
    d = BoundedDecoder(coding, len(data))
    for i in range(0, len(raw), 100):
        d.feed(raw[i:i + 100])
    d.finish()
    assert d.body() == data
    assert BoundedDecoder("br", 10).unsupported == "br"


async def test_an_oversized_snippet_is_cut_before_parsing_and_marked():
    with FakeAPI() as api:
        api.routes["/search"] = lambda p, q, h: (200, "application/json", bodies()["big"][0], {})
        b = SearxngBackend(api.url + "/search", retries=0)
        try:
            got = await b.search("eiffel tower", 5)
        finally:
            await b.aclose()
    assert [p.truncated for p in got] == [True, False]
    assert 1000 < len(got[0].text) <= 4000 and got[0].text.endswith("France.")
    assert got[1].text == PROSE.strip()


async def test_source_unavailable_raised_in_a_worker_keeps_its_fields():
    with FakeAPI() as api:
        api.routes["/search"] = lambda p, q, h: (200, "application/json", b"[" * 100_000, {})
        b = SearxngBackend(api.url + "/search", retries=0)
        try:
            with pytest.raises(SourceUnavailable) as ei:
                await b.search("eiffel tower", 5)
        finally:
            await b.aclose()
    assert ei.value.backend == "searxng" and ei.value.status == 200 and "malformed JSON" in str(ei.value)


# -- the pool: a cancelled step is stopped, not left running ----------------------------------------

@pytest.mark.timeout(60)   # a hang guard: were the sleeping steps left running, the last one would wait 600 s
async def test_a_cancelled_step_stops_its_worker_and_frees_the_pool():
    import asyncio

    from verifiers.facts import _offload

    big = _offload.INLINE_CHARS + 1
    steps = [asyncio.ensure_future(_offload.run(time.sleep, 600, size=big)) for _ in range(_offload.MAX_WORKERS)]
    await asyncio.sleep(1.0)                  # both workers busy sleeping
    for s in steps:
        s.cancel()
    for s in steps:
        with pytest.raises(asyncio.CancelledError):
            await s
    assert await _offload.run(sum, [1, 2, 3], size=big) == 6
    # small inputs run inline: no pool round trip for a snippet
    assert await _offload.run(len, "abc", size=3) == 3
