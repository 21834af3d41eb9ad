"""The ``on_unverified: annotate | block`` policy action (docs/design.md "report"): schema, validation in
``veracity policy check`` and ``veracity config check``, which statuses a policy blocks, the
blocked response for one and several choices, and the shipped ``research`` policy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxy.pipeline import choices
from proxy.pipeline.plan import Plan as _Plan
from proxy.pipeline.respond import block as _block, blocked_body as _blocked_body, blocked_statuses
from proxy.stores.budget import RequestBudget
from proxy.policy import Policy, PolicyError, PolicyStore, apply_overrides, check_file, load_file
from verifiers._types import Check, Report

ROOT = Path(__file__).resolve().parents[2]


def test_default_is_annotate_and_block_validates(tmp_path):
    assert Policy().on_unverified == "annotate"
    p = tmp_path / "p.yaml"
    p.write_text("name: p\non_failure: correct\non_unverified: block\n")
    assert load_file(p).on_unverified == "block"


def test_a_bad_value_names_the_file_line_and_choices(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("name: p\non_failure: correct\non_unverified: reject\n")
    problems = check_file(p)
    assert len(problems) == 1
    assert problems[0].startswith(f"{p}:3: on_unverified:") and "'annotate' or 'block'" in problems[0]


def _serve_config(tmp_path: Path, policy_text: str) -> Path:
    pdir = tmp_path / "policies"
    pdir.mkdir()
    (pdir / "team.yaml").write_text(policy_text)
    cfg = tmp_path / "veracity.yaml"
    cfg.write_text(yaml.safe_dump({"upstreams": [{"name": "a", "base_url": "http://127.0.0.1:9/v1"}],
                                   "policies": {"dir": str(pdir)}}))
    return cfg


def _config_check(cfg: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proxy", "config", "check", str(cfg)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_config_check_validates_the_policies_of_its_folder(tmp_path):
    bad = _config_check(_serve_config(tmp_path, "name: team\non_unverified: maybe\n"))
    assert bad.returncode == 2, bad
    assert "team.yaml:2: on_unverified:" in bad.stderr
    good_dir = tmp_path / "good"
    good_dir.mkdir()
    ok = _config_check(_serve_config(good_dir, "name: team\non_unverified: block\n"))
    assert ok.returncode == 0, ok.stderr
    assert "policy names:" in ok.stdout and "team" in ok.stdout


@pytest.mark.parametrize("on_failure,on_unverified,blocked", [
    ("correct", "annotate", set()),
    ("block", "annotate", {"failed"}),
    ("correct", "block", {"unverified"}),
    ("annotate", "block", {"unverified"}),
    ("block", "block", {"failed", "unverified"}),
    ("observe", "block", set()),  # observe answers before verifying: nothing to block
])
def test_blocked_statuses(on_failure, on_unverified, blocked):
    assert blocked_statuses(Policy(on_failure=on_failure, on_unverified=on_unverified)) == blocked


def _plan(policy: Policy) -> _Plan:
    return _Plan(policy=policy, body={}, question=None, budget=RequestBudget.from_policy(policy.budgets.request),
                 skip_reason=None, t0=0.0)


UNKNOWN = Check("citations", "Smith (2019). Quantum Gradient Transformers.", "unknown", confidence=0.0,
                note="no source answered")
PASS = Check("arithmetic", "17 * 23 = 391", "pass")
FAIL = Check("arithmetic", "17 * 23 = 392", "fail")


def _completion(*texts: str) -> dict:
    return {"id": "c", "object": "chat.completion",
            "choices": [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                        for i, t in enumerate(texts)]}


def test_one_unverified_choice_is_blocked_with_its_own_code():
    rep = Report(status="unverified", checks=[UNKNOWN])
    assert _block(_plan(Policy(on_unverified="annotate")), _completion("x"), rep)[1] is False
    assert _block(_plan(Policy(on_unverified="block")), _completion("x"), rep)[1] is True
    body = _blocked_body(rep)
    assert body["error"]["type"] == "veracity_blocked" and body["error"]["code"] == "verification_unverified"
    assert body["error"]["veracity"]["status"] == "unverified"
    assert "nothing in it could be verified" in body["error"]["message"] and "citations" in body["error"]["message"]
    # a passed answer is never blocked by on_unverified
    assert _block(_plan(Policy(on_unverified="block")), _completion("x"), Report("passed", [PASS]))[1] is False


def test_several_choices_withhold_the_blocked_statuses_only():
    reports = [(0, Report("passed", [PASS])), (1, Report("unverified", [UNKNOWN])), (2, Report("failed", [FAIL]))]
    combined = choices.combine(reports)
    assert combined.status == "failed"
    comp = _completion("a", "b", "c")
    out, whole = _block(_plan(Policy(on_failure="annotate", on_unverified="block")), comp, combined)
    assert not whole
    assert [c["message"]["content"] for c in out["choices"]] == ["a", None, "c"]
    assert "nothing in it could be verified" in out["choices"][1]["message"]["refusal"]
    # both actions: the failed and the unverified choice withheld, the passed one returned
    combined = choices.combine(reports)
    out, whole = _block(_plan(Policy(on_failure="block", on_unverified="block")), _completion("a", "b", "c"), combined)
    assert not whole and [c["message"]["content"] for c in out["choices"]] == ["a", None, None]
    assert "check(s) failed" in out["choices"][2]["message"]["refusal"]


def test_every_choice_unverified_blocks_the_response_unverified_and_failed_says_failed():
    only = choices.combine([(0, Report("unverified", [UNKNOWN])), (1, Report("unverified", [UNKNOWN]))])
    assert _block(_plan(Policy(on_unverified="block")), _completion("a", "b"), only)[1] is True
    assert _blocked_body(only)["error"]["code"] == "verification_unverified"
    mixed = choices.combine([(0, Report("failed", [FAIL])), (1, Report("unverified", [UNKNOWN]))])
    assert _block(_plan(Policy(on_failure="block", on_unverified="block")), _completion("a", "b"), mixed)[1] is True
    assert _blocked_body(mixed)["error"]["code"] == "verification_failed"


def test_unverified_request_status_with_an_error_choice_still_withholds_it():
    # request status "error" (STATUS_ORDER puts error first) while one choice is unverified
    combined = choices.combine([(0, Report("error", [Check("code", "", "error")])), (1, Report("unverified", [UNKNOWN]))])
    assert combined.status == "error"
    out, whole = _block(_plan(Policy(on_unverified="block")), _completion("a", "b"), combined)
    assert not whole and out["choices"][1]["message"]["content"] is None


def test_shipped_research_policy_blocks_unverified_and_holds_streams():
    pol = PolicyStore(ROOT / "policies").get("research")
    assert pol.on_failure == "block" and pol.on_unverified == "block"
    assert pol.streaming.mode == "buffer"  # a live stream could not be withheld
    assert "on_unverified" in pol.overridable
    # a client may lower it to annotate (as it may for on_failure), never needs to raise it
    assert apply_overrides(pol, {"on_unverified": "annotate"}).on_unverified == "annotate"
    with pytest.raises(PolicyError):
        apply_overrides(pol, {"on_unverified": "drop"})
    # every other shipped policy keeps annotating unverified answers
    store = PolicyStore(ROOT / "policies")
    assert {n for n in store.names() if store.get(n).on_unverified == "block"} == {"research"}

