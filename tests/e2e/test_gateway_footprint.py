"""What a ``veracity serve`` process loads: a checks-off gateway (every policy verifies nothing)
never imports what only verification needs -- SymPy (~42 MiB), pint, the verifier packages,
the Docker SDK of the code sandbox probe -- neither at start-up nor while it answers; a gateway
whose policy verifies still imports and warms them up before its first request (the first risky
answer does not pay for them).

The real server runs in a subprocess started through a small wrapper that, when a marker file
appears, waits for the gateway's start-up threads and writes ``sorted(sys.modules)`` to a file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fixtures.mock import scripted_mock
from tests.fixtures.polling import stop_process

ROOT = Path(__file__).resolve().parents[2]

SCRIPT: dict[str, Any] = {
    "models": ["m"],
    "rules": [{"reply": {"content": "17 * 23 = 391, and 391 + 9 = 400."}}],
}
CHECKS_OFF = """name: default
verifiers:
  arithmetic: {enabled: false}
  code: {enabled: false}
  citations: {enabled: false}
  facts: {enabled: false}
  planner: {enabled: false}
sentinel: {mode: "off"}
"""
ARITHMETIC = """name: default
verifiers:
  arithmetic: {enabled: true}
  code: {enabled: false}
  citations: {enabled: false}
  facts: {enabled: false}
  planner: {enabled: false}
sentinel: {mode: "off"}
"""
#: runs ``python -m proxy serve ARGS``; on ``<out>.go`` it joins the start-up threads (sandbox
#: probe, price table, verifier warm-up) and writes the imported module names to ``<out>``
WRAPPER = textwrap.dedent("""
    import json, os, runpy, sys, threading, time
    out = os.environ["FOOTPRINT_OUT"]
    def dump():
        while not os.path.exists(out + ".go"):
            time.sleep(0.05)
        for t in threading.enumerate():
            if t.name.startswith("veracity-"):
                t.join(60)
        with open(out + ".tmp", "w") as f:
            json.dump(sorted(sys.modules), f)
        os.replace(out + ".tmp", out)
    threading.Thread(target=dump, daemon=True).start()
    sys.argv = ["proxy", *sys.argv[1:]]
    runpy.run_module("proxy", run_name="__main__", alter_sys=True)
""")
#: modules only verification needs (each a top-level package or a verifier package)
VERIFICATION_ONLY = ("sympy", "mpmath", "pint", "docker", "verifiers.code", "verifiers.citations",
                     "verifiers.facts", "verifiers.sandbox.docker")

mock, _reset_mock = scripted_mock(SCRIPT)


def _modules_after_requests(tmp: Path, policy: str, mock_url: str, n: int = 3) -> set[str]:
    """Start the gateway with ``policy`` as its only policy, send ``n`` chat completions, and
    return the names in its ``sys.modules`` once its start-up threads are done."""
    (tmp / "policies").mkdir()
    (tmp / "policies" / "default.yaml").write_text(policy)
    cfg = {"upstreams": [{"name": "mock", "models": ["*"], "base_url": mock_url}],
           "policies": {"dir": str(tmp / "policies")}}
    (tmp / "veracity.yaml").write_text(yaml.safe_dump(cfg))
    out = tmp / "modules.json"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "VERACITY_CONFIG", "VERACITY_POLICIES")}
    env.update(PYTHONPATH=str(ROOT), FOOTPRINT_OUT=str(out))
    port_file = tmp / "gateway.log"
    with open(port_file, "w") as logf:
        proc = subprocess.Popen([sys.executable, "-c", WRAPPER, "serve", "--config", str(tmp / "veracity.yaml"),
                                 "--host", "127.0.0.1", "--port", "0"], cwd=tmp, env=env, stdout=logf,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        url = _wait_url(proc, port_file)
        with httpx.Client(trust_env=False, timeout=60) as h:
            for _ in range(n):
                r = h.post(url + "/v1/chat/completions", headers={"Authorization": "Bearer sk-test"},
                           json={"model": "m", "messages": [{"role": "user", "content": "What is 17 * 23 + 9?"}]})
                assert r.status_code == 200, r.text
        (tmp / "modules.json.go").touch()
        deadline = time.monotonic() + 120
        while not out.exists():
            assert proc.poll() is None and time.monotonic() < deadline, port_file.read_text()
            time.sleep(0.05)
        return set(json.loads(out.read_text()))
    finally:
        stop_process(proc)


def _wait_url(proc: subprocess.Popen, log: Path, timeout: float = 240.0) -> str:
    import re

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(r"Uvicorn running on (http://[\d.]+:\d+)", log.read_text(errors="replace"))
        if m:
            return m.group(1)
        assert proc.poll() is None, log.read_text()
        time.sleep(0.05)
    raise AssertionError("gateway did not start:\n" + log.read_text())


def test_a_checks_off_gateway_never_imports_what_only_verification_needs(tmp_path: Path, mock: Any) -> None:
    mods = _modules_after_requests(tmp_path, CHECKS_OFF, mock.base_url)
    assert "proxy.app" in mods                       # the wrapper saw the gateway's own process
    assert sorted(m for m in VERIFICATION_ONLY if m in mods) == []


def test_a_verifying_gateway_imports_and_warms_its_verifiers_at_start(tmp_path: Path, mock: Any) -> None:
    mods = _modules_after_requests(tmp_path, ARITHMETIC, mock.base_url, n=1)
    assert {"sympy", "pint", "verifiers.code", "verifiers.citations", "verifiers.facts"} <= mods
    # the code verifier is off in its only policy: no sandbox probe, so no Docker SDK
    assert "docker" not in mods


@pytest.mark.parametrize("policy,verifies", [(CHECKS_OFF, False), (ARITHMETIC, True)])
def test_runtime_verifies_says_whether_any_policy_enables_a_verifier(tmp_path: Path, policy: str,
                                                                     verifies: bool) -> None:
    from proxy.runtime import PoliciesSettings, VerificationRuntime, VerificationSettings

    (tmp_path / "default.yaml").write_text(policy)
    rt = VerificationRuntime(PoliciesSettings(dir=str(tmp_path)), VerificationSettings())
    assert rt.verifies() is verifies
    (tmp_path / "strict.yaml").write_text(ARITHMETIC.replace("name: default", "name: strict"))
    rt = VerificationRuntime(PoliciesSettings(dir=str(tmp_path)), VerificationSettings())
    assert rt.verifies() is True                     # another policy verifies: the gateway does
    empty = tmp_path / "empty"
    empty.mkdir()
    rt = VerificationRuntime(PoliciesSettings(dir=str(empty)), VerificationSettings())
    assert rt.verifies() is True                     # no files: the built-in default verifies
