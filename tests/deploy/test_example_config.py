"""``deploy/veracity.example.yaml``, the config the README and docs/configuration.md point a newcomer to:
it passes ``veracity config check`` as it is, in a clean environment (no ``OPENAI_API_KEY``,
no ``VERACITY_POLICIES``, run from another folder), and a gateway started with it serves.
The annotated block (README then, docs/configuration.md now) failed that check three times in a row (an unset
``OPENAI_API_KEY``, the ``sha256:...`` placeholder, a ``policies.dir`` that did not exist)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import httpx
import yaml

from tests.conftest import ROOT, Gateway

EXAMPLE = ROOT / "deploy" / "veracity.example.yaml"
#: variables a newcomer's shell would not have; the check must pass without them
_UNSET = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VERACITY_POLICIES", "VERACITY_CONFIG", "VERACITY_REDIS_URL",
          "VERACITY_AUDIT")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _UNSET}
    env["PYTHONPATH"] = str(ROOT)
    return env


def test_example_config_passes_config_check_as_it_is(tmp_path):
    out = subprocess.run([sys.executable, "-m", "proxy", "config", "check", str(EXAMPLE)], capture_output=True,
                         text=True, cwd=tmp_path, env=_clean_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "upstream openai:" in out.stdout and "keys: 1 (virtual keys)" in out.stdout
    assert f"policies: {ROOT / 'policies'}" in out.stdout  # no policies.dir: the shipped folder


def test_example_config_starts_a_gateway_that_refuses_unknown_keys(tmp_path):
    cfg = tmp_path / "veracity.yaml"  # a copy, as the comment at its top says: the audit folder lands here
    shutil.copy(EXAMPLE, cfg)
    doc = yaml.safe_load(cfg.read_text())
    assert doc["keys"][0]["hash"].startswith("sha256:") and "..." not in doc["keys"][0]["hash"]
    gw = Gateway(None, args=["--config", str(cfg)])
    try:
        assert httpx.get(gw.url + "/readyz", timeout=10, trust_env=False).status_code == 200
        r = httpx.post(gw.base_url + "/chat/completions", headers={"Authorization": "Bearer vk-not-a-key"},
                       json={"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
                       timeout=30, trust_env=False)
        assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"
    finally:
        gw.cleanup()


def test_readme_points_to_the_example_config():
    for page in ("README.md", "docs/configuration.md"):
        assert "deploy/veracity.example.yaml" in (ROOT / page).read_text(), page
