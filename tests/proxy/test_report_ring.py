"""The ring of checks-off records (:class:`proxy.stores.reports.FixedRing`, written by
:meth:`ReportStore.put_fixed` from the lean lane): a reader must see exactly what the general
path (:func:`proxy.stores.reports.store_local`, an object graph per record) would have kept --
the same bodies, the same owners' isolation, the same admin listing order -- while the ring keeps
its own bound of ``max_in_memory`` records and drops expired ones when read."""

from __future__ import annotations

import asyncio
import random

import pytest

from proxy.auth import Principal
from proxy.stores import reports


def _who(name: str) -> Principal:
    return Principal(key_name=name, team="t", policy="off", allow_policy_header=False)


FIXED = reports.FixedReport({"status": "skipped", "checks": [], "policy": "off", "reason": "checks are off"})
VERIFIED = {"status": "passed", "checks": [{"verifier": "arithmetic", "status": "pass"}], "policy": "default"}


def _read_all(store: reports.ReportStore, rids: list[str], owners: list[str]) -> list:
    out = []
    for rid in rids:
        out.append([store.get_local(o, rid) for o in owners])
        out.append(asyncio.run(store.get_all(rid)))
    return out


@pytest.mark.parametrize("seed", range(25))
def test_ring_reads_as_the_general_path_for_any_sequence_of_writes(seed: int) -> None:
    """Random interleavings of checks-off records (ring), verified reports and pending ones
    (general path), from three keys over a few request ids (clients choose x-request-id, so ids
    collide across keys and kinds): every read, per owner and an admin's list, matches a store
    that kept everything through the general path."""
    rng = random.Random(seed)
    ring_store, ref = reports.ReportStore(max_in_memory=1000), reports.ReportStore(max_in_memory=1000)
    people = [_who(n) for n in ("a", "b", "c")]
    owners = [reports.owner_of(p) for p in people]
    rids = [f"req-{i}" for i in range(6)]
    for step in range(60):
        who, rid, model = rng.choice(people), rng.choice(rids), rng.choice(["m", "caf\u00e9", "gpt-4o"])
        kind = rng.random()
        if kind < 0.6:
            ring_store.put_fixed(reports.owner_of(who), rid, model, 1000 + step, FIXED)
            reports.store_local(ref, who, rid, model, 1000 + step, FIXED.report, False)
        else:
            pending = kind > 0.85
            for store in (ring_store, ref):
                reports.store_local(store, who, rid, model, 1000 + step, VERIFIED, pending)
        assert _read_all(ring_store, rids, owners) == _read_all(ref, rids, owners), step


def test_ring_record_body_is_record_body_and_owner_bound() -> None:
    store = reports.ReportStore()
    a, b = reports.owner_of(_who("a")), reports.owner_of(_who("b"))
    store.put_fixed(a, "req-1", "mock-model", 1765000000, FIXED)
    assert store.get_local(a, "req-1") == (reports.record_body("req-1", "mock-model", 1765000000, FIXED.report,
                                                                pending=False), False)
    assert store.get_local(b, "req-1") is None  # another key's id: absent for it
    assert store.bytes_in_memory == 0 and not store._mem  # no body is kept for a ring record


def test_ring_keeps_its_last_max_in_memory_records() -> None:
    store = reports.ReportStore(max_in_memory=3)
    a = reports.owner_of(_who("a"))
    for i in range(5):
        store.put_fixed(a, f"r{i}", "m", i, FIXED)
    assert [store.get_local(a, f"r{i}") is not None for i in range(5)] == [False, False, True, True, True]
    assert len(store._fixed.slot) == 3  # the index is bounded with the ring


def test_ring_records_expire_after_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(reports.time, "monotonic", lambda: now[0])
    store = reports.ReportStore(ttl_s=10)
    a = reports.owner_of(_who("a"))
    store.put_fixed(a, "r1", "m", 1, FIXED)
    now[0] = 109.0
    assert store.get_local(a, "r1") is not None
    now[0] = 110.5
    assert store.get_local(a, "r1") is None and "r1" not in store._fixed.slot


def test_a_full_kinds_table_takes_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reports.FixedRing, "MAX_KINDS", 2)
    store = reports.ReportStore()
    a = reports.owner_of(_who("a"))
    for i, model in enumerate(("m1", "m2", "m3")):
        store.put_fixed(a, f"r{i}", model, i, FIXED)
    assert list(store._fixed.slot) == ["r0", "r1"] and list(store._mem) == [(a, "r2")]
    assert [store.get_local(a, f"r{i}")[0] for i in range(3)] == [
        reports.record_body(f"r{i}", m, i, FIXED.report, pending=False) for i, m in enumerate(("m1", "m2", "m3"))]


def test_max_in_memory_zero_keeps_no_checks_off_record_either() -> None:
    store = reports.ReportStore(max_in_memory=0)
    a = reports.owner_of(_who("a"))
    store.put_fixed(a, "r1", "m", 1, FIXED)
    assert store.get_local(a, "r1") is None and store._fixed is None and not store._mem


def test_the_ring_grows_with_its_records_not_with_max_in_memory() -> None:
    """A large ``max_in_memory`` (left to ``max_in_memory_bytes`` to bound) must not allocate every
    slot at the first checks-off answer: the ring holds as many slots as records until full, then
    overwrites the oldest as before."""
    store = reports.ReportStore(max_in_memory=50_000_000)
    a = reports.owner_of(_who("a"))
    for i in range(3):
        store.put_fixed(a, f"r{i}", "m", i, FIXED)
    ring = store._fixed
    assert len(ring.rids) == len(ring.created) == len(ring.expiry) == len(ring.kind) == 3
    assert [store.get_local(a, f"r{i}") is not None for i in range(3)] == [True, True, True]
    small = reports.FixedRing(2)
    for i in range(5):
        assert small.put("o", f"s{i}", "m", i, FIXED, 1e18)
    assert len(small.rids) == 2 and sorted(small.slot) == ["s3", "s4"] and small.next == 1
