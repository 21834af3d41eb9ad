"""What ``veracity review`` prints to a reviewer's terminal: model names, teams, answers, claims
and notes come from models, clients and key owners, so no control character, escape sequence or
bidi override may reach the terminal raw (:func:`proxy.stores.review.terminal_safe`,
:func:`proxy.stores.review.terminal_json`); the CLI runs as a subprocess on a store holding such text."""

from __future__ import annotations

import pytest

import asyncio
import json
import os
import subprocess
import sys
import unicodedata

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.stores import review
from proxy.stores.review import terminal_json, terminal_safe
from tests.conftest import ROOT

UNSAFE = {"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"}
#: clear the screen, set the window title, a CSI (C1) recolour, a bidi override, a line separator
HOSTILE_MODEL = "gpt-4o\x1b[2J\x1b]0;owned\x07\x9b31m\u202etxt.exe\u2028x"
HOSTILE_TEAM = "team\rFAKE ROW\x1b[1A\u2066"
HOSTILE_ANSWER = "17 * 23 = 401\x1b[8m hidden \x1b[0m\u202e"
HOSTILE_NOTE = "see\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\ \u200f"


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


def raw_unsafe(text: str) -> list[str]:
    """The characters of ``text`` a terminal would act on (newlines between lines aside)."""
    return [ch for ch in text if ch != "\n" and unicodedata.category(ch) in UNSAFE]


@given(st.text())
@settings(max_examples=300, derandomize=True)
def test_terminal_safe_leaves_nothing_a_terminal_acts_on(text):
    out = terminal_safe(text)
    assert not raw_unsafe(out) and "\n" not in out
    if text.isprintable():
        assert out == text           # ordinary text of any script is shown as it is
    assert json.loads(terminal_json({"v": text}))["v"] == text      # the same JSON value
    assert not raw_unsafe(terminal_json({"v": text}, indent=2))


def test_terminal_safe_shows_escapes_visibly():
    assert terminal_safe("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert terminal_safe("x\u202ey") == "x\\u202ey" and terminal_safe("\x9b") == "\\x9b"
    assert terminal_safe(None) == "None" and terminal_safe("Zürich 日本 😀") == "Zürich 日本 😀"


def _cli(cfg: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VERACITY_CONFIG", "VERACITY_REDIS_URL")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "proxy", "review", *args, "--config", cfg],
                          capture_output=True, text=True, env=env, timeout=120, cwd=str(ROOT))


def test_review_cli_escapes_model_team_answer_claims_and_notes(tmp_path):
    db = tmp_path / "reviews.sqlite3"
    cfg = tmp_path / "veracity.yaml"
    cfg.write_text(yaml.safe_dump({"upstreams": [{"name": "u", "models": ["*"], "base_url": "http://127.0.0.1:9/v1"}],
                                   "verification": {"review_db": str(db)}}))
    report = {"status": "failed", "checks": [{"verifier": "arithmetic", "claim": HOSTILE_ANSWER, "outcome": "fail",
                                              "evidence": "expected 391\x1b[0m"}]}
    rec = review.make_review(request_id="req\x1b[31m", model=HOSTILE_MODEL, team=HOSTILE_TEAM, key="app",
                             policy="default", reason="failed", report=report, question="17 * 23?",
                             drafts=[HOSTILE_ANSWER], answer=HOSTILE_ANSWER, include_text=True)

    async def add() -> None:
        store = review.SQLiteReviewStore(str(db))
        await store.add(rec)
        await store.close()

    asyncio.run(add())
    rid = rec["id"]
    listed = _cli(str(cfg), "list")
    assert listed.returncode == 0, listed.stderr
    assert not raw_unsafe(listed.stdout) and listed.stdout.count("\n") == 1   # one review, one line
    assert terminal_safe(HOSTILE_MODEL) in listed.stdout and terminal_safe(HOSTILE_TEAM) in listed.stdout
    as_json = _cli(str(cfg), "list", "--json")
    assert not raw_unsafe(as_json.stdout) and json.loads(as_json.stdout)["model"] == HOSTILE_MODEL
    shown = _cli(str(cfg), "show", rid)
    assert shown.returncode == 0 and not raw_unsafe(shown.stdout)
    got = json.loads(shown.stdout)                # escaped, yet the same values
    assert got["answer"] == HOSTILE_ANSWER and got["report"]["checks"][0]["claim"] == HOSTILE_ANSWER
    done = _cli(str(cfg), "resolve", rid, "--verdict", "incorrect", "--note", HOSTILE_NOTE, "--reviewer", "r\x1b[1m")
    assert done.returncode == 0 and not raw_unsafe(done.stdout + done.stderr)
    shown = _cli(str(cfg), "show", rid)
    assert not raw_unsafe(shown.stdout) and json.loads(shown.stdout)["resolution"]["note"] == HOSTILE_NOTE
    exported = _cli(str(cfg), "export", "--out", "-", "--status", "all")
    assert exported.returncode == 0 and not raw_unsafe(exported.stdout)
    line = json.loads(exported.stdout)
    assert line["label"]["note"] == HOSTILE_NOTE and line["team"] == HOSTILE_TEAM
    missing = _cli(str(cfg), "show", "rev_\x1b[2Jx")
    assert missing.returncode == 1 and not raw_unsafe(missing.stderr)


def test_verify_cli_reports_escape_the_answer(tmp_path):
    """``veracity verify`` prints a JSON report per answer; the claims quote the answer."""
    answer = "17 * 23\u202e\x9b = 401\x1b[8m"
    src = tmp_path / "a.json"
    src.write_text(json.dumps({"question": "What is 17 * 23?", "answer": answer}))
    env = {k: v for k, v in os.environ.items() if k not in ("VERACITY_CONFIG", "VERACITY_REDIS_URL")}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-m", "proxy", "verify", str(src)], capture_output=True, text=True,
                          env=env, timeout=120, cwd=str(ROOT))
    assert done.returncode in (0, 1), done.stderr
    assert not raw_unsafe(done.stdout) and done.stdout.count("\n") == 1
    claims = [c["claim"] for c in json.loads(done.stdout)["veracity"]["checks"]]
    assert "17 * 23\u202e\x9b = 401" in claims          # the claim quotes the answer: the same value
