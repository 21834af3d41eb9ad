"""Config loading: interpolation, validation errors naming field and line, defaults, CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.auth import Authenticator
from proxy.config import ConfigError, default_config, hash_key, interpolate, load_config, parse_config
from proxy.wire.errors import GatewayError

ROOT = Path(__file__).resolve().parents[2]

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
  check_interval_s: 5
verification: {audit: audit.jsonl}
"""


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


def test_good_config_interpolated_and_routed() -> None:
    cfg = parse_config(GOOD % hash_key("vk-1"), env={"OPENAI_KEY": "sk-abc"})
    assert cfg.upstreams[0].api_key.get_secret_value() == "sk-abc"
    assert "sk-abc" not in repr(cfg)  # SecretStr
    assert cfg.upstreams[0].base_url == "https://api.openai.com/v1"
    assert cfg.upstreams[1].base_url == "http://127.0.0.1:8001/v1"
    assert cfg.route("gpt-4o").name == "openai" and cfg.route("o1-mini").name == "openai"
    assert cfg.route("llama3").name == "local"
    assert cfg.limits.max_body_bytes == 1024 and cfg.limits.connect_timeout_s == 5.0
    assert cfg.policies.check_interval_s == 5 and cfg.policies.dir is None
    assert cfg.verification.audit == "audit.jsonl" and cfg.verification.redis_url is None


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


# ----------------------------------------------------------------- a wrong field stops the process

UP = "upstreams:\n  - name: a\n    base_url: http://127.0.0.1:9/v1\n"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VERACITY_CONFIG", "OPENAI_API_KEY", "VERACITY_POLICIES")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-m", "proxy", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


@pytest.mark.parametrize("text,expected", [
    ("upstream:\n  - name: a\n    base_url: http://x/v1\n",
     "<config>:1: upstream: Extra inputs are not permitted (unknown field; did you mean 'upstreams'?; known: "
     "upstreams, keys, limits, logging, cors, policies, verification, reports)"),
    (UP + "foo: 1\n", "<config>:4: foo: Extra inputs are not permitted (unknown field; known: upstreams,"),
    (UP + "mode: demo\n", "<config>:4: mode: Extra inputs are not permitted"),  # set by Veracity, not a file
    (UP + "verification: {audit: 5, redis_url: 'nope://', bogus: 1}\n",
     "<config>:4: verification.redis_url: must be a Redis URL"),
    (UP + "verification:\n  audit: 5\n", "<config>:5: verification.audit: Input should be a valid string"),
    (UP + "verification:\n  bogus: 1\n", "<config>:5: verification.bogus: Extra inputs are not permitted"),
    (UP + "policies: ./policies\n", "<config>:4: policies: Input should be a valid dictionary"),
    (UP + "policies:\n  dri: ./policies\n", "<config>:5: policies.dri: Extra inputs are not permitted (unknown "
     "field; did you mean 'dir'?"),
    (UP + "policies: {check_interval_s: -1}\n", "<config>:4: policies.check_interval_s: Input should be greater"),
])
def test_unknown_fields_and_bad_sections_name_field_and_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(text, env={})
    assert str(ei.value).startswith(expected), str(ei.value)


def test_every_problem_of_the_verification_section_is_listed() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config(UP + "verification: {audit: 5, redis_url: 'nope://', bogus: 1}\n")
    fields = [line.split(": ")[1] for line in str(ei.value).splitlines()]
    assert sorted(fields) == ["verification.audit", "verification.bogus", "verification.redis_url"]


def test_empty_sections_take_defaults() -> None:
    cfg = parse_config(UP + "policies:\nverification:\n")
    assert cfg.policies.check_interval_s == 1.0 and cfg.verification.audit is None


@pytest.mark.parametrize("text,expected", [
    ("", "v.yaml:1: upstreams: the file is empty, so every request would be a 404 model_not_found"),
    ("upstreams: []\n", "v.yaml:1: upstreams: no upstream is configured"),
    ("logging: {level: debug}\n", "v.yaml:1: upstreams: no upstream is configured"),
])
def test_a_config_file_without_upstreams_is_refused(tmp_path: Path, text: str, expected: str) -> None:
    p = tmp_path / "v.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert str(ei.value).startswith(f"{tmp_path}/{expected}"), str(ei.value)
    assert "OPENAI_API_KEY or the demo mode" in str(ei.value)  # no file at all is the documented way


def test_relative_paths_are_resolved_against_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conf = tmp_path / "conf"
    (conf / "pol").mkdir(parents=True)
    (conf / "pol" / "team.yaml").write_text("name: finance\n")
    p = conf / "veracity.yaml"
    p.write_text(UP + "policies: {dir: pol}\nverification: {audit: logs/audit.jsonl, budget_db: ':memory:'}\n"
                 f"keys:\n  - hash: {hash_key('vk')}\n    policy: finance\n")
    monkeypatch.chdir(tmp_path)  # not the config's folder
    cfg = load_config(p)
    assert cfg.policies.dir == str(conf / "pol")
    check = _cli("config", "check", str(p), cwd=tmp_path)
    assert check.returncode == 0 and f"policies: {conf / 'pol'}\n" in check.stdout, check.stderr
    assert cfg.verification.audit == str(conf / "logs" / "audit.jsonl")
    assert cfg.verification.budget_db == ":memory:"
    # the key's policy is the file's `name:` (finance), not its file name (team)
    p.write_text(p.read_text().replace("policy: finance", "policy: team"))
    with pytest.raises(ConfigError, match=r"keys.0.policy: unknown policy 'team' \(known: default, finance; "):
        load_config(p)


def test_a_missing_policies_dir_is_refused_naming_the_resolved_path(tmp_path: Path) -> None:
    p = tmp_path / "v.yaml"
    p.write_text(UP + "policies: {dir: ./nodir}\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert str(ei.value) == (f"{p}:4: policies.dir: {tmp_path / 'nodir'} does not exist (a relative dir is "
                             "resolved against the config file's folder)")
    (tmp_path / "afile").write_text("")
    p.write_text(UP + "policies: {dir: afile}\n")
    with pytest.raises(ConfigError, match="afile is not a folder"):
        load_config(p)


def test_unknown_key_policy_message_says_when_the_folder_is_missing(tmp_path: Path) -> None:
    p = tmp_path / "v.yaml"
    p.write_text(UP + f"keys:\n  - hash: {hash_key('vk')}\n    policy: math\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p, env={"VERACITY_POLICIES": str(tmp_path / "gone")})
    assert str(ei.value) == (f"{p}:6: keys.0.policy: unknown policy 'math' (policy folder {tmp_path / 'gone'} "
                             "does not exist, so only the built-in 'default' is known)")


@pytest.mark.parametrize("text,expected", [
    ("upstream:\n  - name: a\n    base_url: http://127.0.0.1:9/v1\n", "v.yaml:1: upstream: Extra inputs"),
    ("", "v.yaml:1: upstreams: the file is empty"),
    (UP + "verification: {redis_url: 'nope://'}\n", "v.yaml:4: verification.redis_url: must be a Redis URL"),
    (UP + "policies: {dir: ./nodir}\n", "v.yaml:4: policies.dir: "),
])
def test_config_check_and_serve_exit_2(tmp_path: Path, text: str, expected: str) -> None:
    (tmp_path / "v.yaml").write_text(text)
    check = _cli("config", "check", "v.yaml", cwd=tmp_path)
    assert check.returncode == 2 and expected in check.stderr, (check.stdout, check.stderr)
    serve = _cli("serve", "--config", "v.yaml", "--port", "0", cwd=tmp_path)
    assert serve.returncode == 2 and expected in serve.stderr, (serve.stdout, serve.stderr)


def test_audit_and_budget_files_that_cannot_be_created_are_refused(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("")
    p = tmp_path / "v.yaml"
    p.write_text(UP + "verification:\n  audit: afile/audit.jsonl\n  budget_db: .\n")
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert str(ei.value).splitlines() == [
        f"{p}:5: verification.audit: cannot create {tmp_path / 'afile' / 'audit.jsonl'}: {tmp_path / 'afile'} "
        "is not a folder",
        f"{p}:6: verification.budget_db: {tmp_path} is a folder; give a file path"]
    p.write_text(UP + "verification:\n  audit: new/sub/audit.jsonl\n  budget_db: budget.sqlite3\n")
    cfg = load_config(p)  # missing folders are created at start-up; nothing is created by the check
    assert cfg.verification.audit == str(tmp_path / "new" / "sub" / "audit.jsonl")
    assert not (tmp_path / "new").exists() and not (tmp_path / "budget.sqlite3").exists()


def test_serve_exits_2_when_the_verification_runtime_cannot_start(tmp_path: Path) -> None:
    """A budget database that is not one passes config validation (the file exists and is
    writable) but cannot be opened: start-up fails with status 2 instead of a gateway that says
    ready and answers every chat request with a 500."""
    (tmp_path / "budget.sqlite3").write_text("not a database\n" * 100)
    (tmp_path / "v.yaml").write_text(UP + "verification: {budget_db: budget.sqlite3}\n")
    assert _cli("config", "check", "v.yaml", cwd=tmp_path).returncode == 0
    serve = _cli("serve", "--config", "v.yaml", "--port", "0", cwd=tmp_path)
    assert serve.returncode == 2, (serve.stdout, serve.stderr)
    out = serve.stdout + serve.stderr
    assert "startup_failed" in out and "Veracity is misconfigured" in out and "not a database" in out
    # with several workers too (uvicorn's supervisor would exit 0 when its workers fail)
    serve = _cli("serve", "--config", "v.yaml", "--port", "0", "--workers", "2", cwd=tmp_path)
    assert serve.returncode == 2, (serve.stdout, serve.stderr)
    assert "Veracity is misconfigured: DatabaseError: file is not a database" in serve.stderr


def test_litellm_upstream_without_the_optional_package_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make run` installs the gateway without the litellm extra: a `provider: litellm` upstream
    is then refused at load (`config check` and `serve`), naming the field and the install
    command, instead of a start-up traceback after `config check` said OK."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "litellm" else real(name, *a))
    text = "upstreams:\n  - name: claude\n    provider: litellm\n    models: ['claude-*']\n"
    with pytest.raises(ConfigError) as ei:
        parse_config(text, filename="v.yaml")
    msg = str(ei.value)
    assert "v.yaml:2: upstreams.0" in msg and "pip install -e '.[litellm]'" in msg
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert parse_config(text).upstreams[0].provider == "litellm"
