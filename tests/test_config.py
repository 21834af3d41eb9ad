"""Config loading: interpolation, validation errors naming field and line, defaults, CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from proxy.auth import Authenticator
from proxy.config import ConfigError, default_config, hash_key, interpolate, load_config, parse_config
from proxy.errors import GatewayError

ROOT = Path(__file__).resolve().parent.parent

GOOD = """\
upstreams:
  - name: openai
    models: ["gpt-*", "o?-*"]
    base_url: https://api.openai.com/v1/
    api_key: ${OPENAI_KEY}
  - name: local
    base_url: http://127.0.0.1:${PORT:-8001}/v1
keys:
  - name: alice
    hash: %s
    team: research
    policy: strict
limits:
  max_body_bytes: 1024
  read_timeout_s: 30
policies:
  strict: {anything: [goes, here]}
verification: {arithmetic: true}
"""


def test_good_config_interpolated_and_routed() -> None:
    cfg = parse_config(GOOD % hash_key("vk-1"), env={"OPENAI_KEY": "sk-abc"})
    assert cfg.upstreams[0].api_key.get_secret_value() == "sk-abc"
    assert "sk-abc" not in repr(cfg)  # SecretStr
    assert cfg.upstreams[0].base_url == "https://api.openai.com/v1"
    assert cfg.upstreams[1].base_url == "http://127.0.0.1:8001/v1"
    assert cfg.route("gpt-4o").name == "openai" and cfg.route("o1-mini").name == "openai"
    assert cfg.route("llama3").name == "local"
    assert cfg.limits.max_body_bytes == 1024 and cfg.limits.connect_timeout_s == 5.0
    assert cfg.policies == {"strict": {"anything": ["goes", "here"]}}
    assert cfg.verification == {"arithmetic": True}


@pytest.mark.parametrize("text,expected", [
    ("upstreams:\n  - name: a\n    base_url: ftp://x\n", "<config>:3: upstreams.0.base_url: must be an http(s) URL"),
    ("upstreams:\n  - name: a\n    base_url: http://x\n    colour: red\n", "<config>:4: upstreams.0.colour: Extra inputs"),
    ("upstreams:\n  - name: a\n    provider: openai\n", "<config>:2: upstreams.0: an OpenAI-compatible upstream needs base_url"),
    ("keys:\n  - hash: abc\n", "<config>:2: keys.0.hash: must be sha256 hex"),
    ("limits:\n  max_body_bytes: lots\n", "<config>:2: limits.max_body_bytes: Input should be a valid integer"),
    ("upstreams:\n  - name: a\n    base_url: http://x\n    api_key: ${NOPE}\n",
     "<config>:4: upstreams.0.api_key: environment variable NOPE is not set"),
    ("upstreams: [\n", "<config>:2: invalid YAML"),
    ("- 1\n- 2\n", "<config>:1: the config must be a mapping"),
])
def test_errors_name_field_and_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, env={})
    assert expected in str(ei.value)


def test_error_does_not_echo_secret_values() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config("upstreams:\n  - name: a\n    base_url: http://x\n    api_key: [sk-proj-SECRETSECRET]\n")
    assert "SECRETSECRET" not in str(ei.value)


def test_interpolation_escape_and_default() -> None:
    assert interpolate("$${X} ${Y:-d} ${Z}", {"Z": "z"}) == "${X} d z"
    with pytest.raises(KeyError):
        interpolate("${MISSING}", {})


def test_default_config_modes(tmp_path: Path) -> None:
    env_cfg = default_config({"OPENAI_API_KEY": "sk-x"})
    assert env_cfg.mode == "env" and env_cfg.upstreams[0].base_url == "https://api.openai.com/v1"
    assert default_config({}).mode == "demo"
    p = tmp_path / "v.yaml"
    p.write_text("")
    assert load_config(p).upstreams == []
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_virtual_key_auth() -> None:
    cfg = parse_config(GOOD % hash_key("vk-1"), env={"OPENAI_KEY": "sk-abc"})
    auth = Authenticator(cfg.keys)
    p = auth.authenticate("Bearer vk-1")
    assert (p.key_name, p.team, p.policy, p.upstream_auth) == ("alice", "research", "strict", None)
    for header in (None, "", "Bearer", "Basic vk-1", "Bearer vk-2"):
        with pytest.raises(GatewayError) as ei:
            auth.authenticate(header)
        assert ei.value.status == 401
    passthrough = Authenticator([]).authenticate("Bearer sk-client")
    assert passthrough.upstream_auth == "Bearer sk-client"


def test_cli_config_check_and_key_hash(tmp_path: Path) -> None:
    p = tmp_path / "v.yaml"
    p.write_text("upstreams:\n  - name: a\n    base_url: http://x/v1\n")
    ok = subprocess.run([sys.executable, "-m", "proxy", "config", "check", str(p)], capture_output=True,
                        text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0 and "upstream a" in ok.stdout
    p.write_text("upstreams:\n  - name: a\n")
    bad = subprocess.run([sys.executable, "-m", "proxy", "config", "check", str(p)], capture_output=True,
                         text=True, cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and f"{p}:2: upstreams.0" in bad.stderr
    h = subprocess.run([sys.executable, "-m", "proxy", "key", "hash"], input="vk-1\n", capture_output=True,
                       text=True, cwd=ROOT, timeout=60)
    assert h.stdout.strip() == f"hash: {hash_key('vk-1')}"
