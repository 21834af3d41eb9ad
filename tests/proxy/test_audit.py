"""Audit records: JSONL and SQLite sinks, text only when the policy allows it."""

import json
import threading

import pytest

from proxy.stores.audit import AuditLog, make_record

REPORT = {"status": "failed", "checks": [{"verifier": "arithmetic", "outcome": "fail"}]}


@pytest.mark.parametrize("name", ["audit.jsonl", "audit.sqlite3"])
def test_records_round_trip_and_never_interleave(tmp_path, name):
    log = AuditLog.open(tmp_path / name)
    assert log.format == ("sqlite" if name.endswith("sqlite3") else "jsonl")

    def write(i):
        for j in range(50):
            log.write(make_record(request_id=f"r{i}-{j}", team="t", model="m", policy="p", report=REPORT,
                                  key="alice", prompt=[{"role": "user", "content": "secret prompt"}],
                                  answer="an answer"))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recs = log.read_all()
    assert len(recs) == 200 and {r["request_id"] for r in recs} == {f"r{i}-{j}" for i in range(4) for j in range(50)}
    assert all(r["status"] == "failed" and r["report"] == REPORT for r in recs)
    assert all("prompt" not in r and "answer" not in r for r in recs)  # text off by default
    log.close()
    if name.endswith("jsonl"):
        assert all(json.loads(line) for line in (tmp_path / name).read_text().splitlines())


def test_text_only_when_policy_allows(tmp_path):
    rec = make_record(request_id="r", team="t", model="m", policy="p", report=REPORT, prompt="q", answer="a",
                      include_text=True)
    assert rec["prompt"] == "q" and rec["answer"] == "a"


def test_write_failure_is_counted_not_raised(tmp_path):
    log = AuditLog.open(tmp_path / "a.jsonl")
    log.close()
    log.write(make_record(request_id="r", team="t", model="m", policy="p", report=REPORT))
    assert log.errors == 1
