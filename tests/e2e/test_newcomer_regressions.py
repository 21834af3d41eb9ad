"""Regressions a newcomer hit trying the README on a clean clone: each test failed before its fix.

1. a virtual key naming a policy that does not exist; ``logging.level: loud`` accepted;
2. demo mode corrected only the first ``1234*5678`` request;
3. ``overridable: [nonsense.field]`` passed ``veracity policy check``;
4. ``on_failure: annotate`` reported ``MAX_RETRY_EXCEEDED``/``max_rounds`` with no round run;
5. a policy file broken while the gateway runs was kept silently;
6. only the first missing ``${VAR}`` of a value was reported;
8. ``cost.ms`` and ``durations_ms`` were unrounded floats;
9. the README did not say how to script the verifier model (planner, facts) in the mock upstream.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from proxy.config import ConfigError, hash_key, load_config, parse_config
from proxy.policy import KeyGrant, PolicyError, PolicyStore, check_file, resolve
from verifiers._types import Check, Cost, Report

ROOT = Path(__file__).resolve().parents[2]

KEYED = """\
upstreams:
  - name: a
    base_url: http://127.0.0.1:9/v1
policies:
  dir: {pdir}
keys:
  - name: good
    hash: {h1}
    policy: mine
  - name: typo
    hash: {h2}
    policy: nosuchpolicy
"""


def _keyed_config(tmp_path: Path, second_policy: str = "nosuchpolicy") -> Path:
    pdir = tmp_path / "pol"
    pdir.mkdir(exist_ok=True)
    (pdir / "mine.yaml").write_text("on_failure: annotate\n")
    p = tmp_path / "veracity.yaml"
    p.write_text(KEYED.format(pdir=pdir, h1=hash_key("vk-1"), h2=hash_key("vk-2"))
                 .replace("nosuchpolicy", second_policy))
    return p


# ----------------------------------------------------------------------------- 1. key policies


def test_load_config_rejects_a_key_with_an_unknown_policy(tmp_path: Path) -> None:
    p = _keyed_config(tmp_path)
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    msg = str(ei.value)
    assert msg.startswith(f"{p}:12: keys.1.policy: unknown policy 'nosuchpolicy' (known: default, mine")
    assert "keys.0" not in msg  # the key naming an existing policy is fine
    ok = _keyed_config(tmp_path, second_policy="default")  # the built-in default always exists
    assert [k.policy for k in load_config(ok).keys] == ["mine", "default"]


def test_config_check_and_serve_exit_2_on_unknown_key_policy(tmp_path: Path) -> None:
    p = _keyed_config(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("VERACITY_CONFIG", "OPENAI_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    check = subprocess.run([sys.executable, "-m", "proxy", "config", "check", str(p)], capture_output=True,
                           text=True, cwd=tmp_path, env=env, timeout=60)
    assert check.returncode == 2, check.stdout
    assert f"{p}:12: keys.1.policy: unknown policy 'nosuchpolicy'" in check.stderr
    serve = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", str(p), "--port", "0"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert serve.returncode == 2 and "unknown policy 'nosuchpolicy'" in serve.stderr


def test_key_policy_checked_against_veracity_policies_env(tmp_path: Path) -> None:
    pdir = tmp_path / "envpol"
    pdir.mkdir()
    (pdir / "research.yaml").write_text("name: research\n")
    text = f"upstreams: [{{name: a, base_url: 'http://127.0.0.1:9/v1'}}]\nkeys:\n  - hash: {hash_key('vk')}\n    policy: research\n"
    p = tmp_path / "v.yaml"
    p.write_text(text)
    assert load_config(p, env={"VERACITY_POLICIES": str(pdir)}).keys[0].policy == "research"
    with pytest.raises(ConfigError, match=r":4: keys.0.policy: unknown policy 'research'"):
        load_config(p, env={"VERACITY_POLICIES": str(tmp_path / "empty")})


def test_logging_level_is_validated() -> None:
    with pytest.raises(ConfigError) as ei:
        parse_config("logging:\n  level: loud\n")
    assert "<config>:2: logging.level:" in str(ei.value) and "'debug'" in str(ei.value)
    assert parse_config("logging: {level: WARNING}\n").logging.level == "warning"


def test_deleted_key_policy_is_a_config_error_not_a_header_error(tmp_path: Path) -> None:
    (tmp_path / "gone.yaml").write_text("on_failure: annotate\n")
    store = PolicyStore(tmp_path, check_interval_s=0)
    grant = KeyGrant(policy="gone", key_id="alice")
    assert resolve(store, grant).name == "gone"
    (tmp_path / "gone.yaml").unlink()
    with pytest.raises(PolicyError) as ei:
        resolve(store, grant)
    assert ei.value.status == 500 and ei.value.code == "veracity_config" and ei.value.param is None
    assert "'gone'" in str(ei.value) and "'alice'" in str(ei.value)
    # a policy the *client* asked for by header is still the client's 400
    with pytest.raises(PolicyError) as ei:
        resolve(store, KeyGrant(policy="default", allow_policy_header=True), header="nope")
    assert ei.value.status == 400 and ei.value.param == "x-veracity-policy"


def test_pipeline_maps_missing_key_policy_to_500_server_error(tmp_path: Path) -> None:
    from proxy.auth import Principal
    from proxy.config import GatewayConfig
    from proxy.wire.errors import GatewayError
    from proxy.gateway import Gateway
    from proxy.pipeline.plan import resolve_policy as _resolve_policy

    cfg = GatewayConfig(policies={"dir": str(tmp_path), "check_interval_s": 0})
    principal = Principal(key_name="alice", team="t", policy="nosuchpolicy", allow_policy_header=False)
    with pytest.raises(GatewayError) as ei:
        _resolve_policy(Gateway(cfg), principal, {}, None)
    err = ei.value
    assert (err.status, err.type, err.code, err.param) == (500, "server_error", "veracity_config", None)
    assert "nosuchpolicy" in err.message


# ----------------------------------------------------------------------------- 2. demo script


def test_demo_mode_corrects_every_wrong_arithmetic_request(gateway_factory) -> None:
    openai = pytest.importorskip("openai")
    gw = gateway_factory(None)  # no config, no OPENAI_API_KEY: demo mode (README's Python example)
    client = openai.OpenAI(base_url=gw.base_url, api_key="sk-demo", max_retries=0, timeout=60)
    for _ in range(3):
        resp = client.chat.completions.create(model="mock-model",
                                              messages=[{"role": "user", "content": "What is 1234*5678?"}])
        rep = resp.model_extra["veracity"]
        assert rep["status"] == "corrected", rep
        assert "7,006,652" in resp.choices[0].message.content
        assert "sorry" not in resp.choices[0].message.content.lower()
        assert "right, I made an error" not in resp.choices[0].message.content


# ----------------------------------------------------------------------------- 3. overridable


def test_overridable_paths_must_name_policy_fields(tmp_path: Path) -> None:
    p = tmp_path / "p.yaml"
    p.write_text("on_failure: annotate\noverridable:\n  - on_failure\n  - nonsense.field\n  - sentinel.mood\n"
                 "  - verifiers.code.sandbox.limits.memory\n")
    errs = check_file(p)
    assert len(errs) == 2, errs
    assert errs[0].startswith(f"{p}:4: overridable.1:") and "'nonsense.field' is not a policy field" in errs[0]
    assert errs[1].startswith(f"{p}:5: overridable.2:") and "sentinel has: mode, when, max_rounds" in errs[1]
    p.write_text("overridable: [on_failure, streaming, sentinel.mode, verifiers.code.options.x]\n")
    assert check_file(p) == []


# ----------------------------------------------------------------------------- 4. not attempted


def test_no_correction_by_policy_reports_not_attempted() -> None:
    from proxy.pipeline.correction import State, correct

    failed = Report(status="failed", checks=[Check("arithmetic", "2+2=5", "fail", expected=4, found=5)])
    calls: list[dict] = []

    async def complete(body: dict) -> dict:  # must not be called
        calls.append(body)
        return {}

    async def verify(text: str) -> Report:
        return failed

    draft = {"choices": [{"message": {"role": "assistant", "content": "2+2=5"}}]}
    res = asyncio.run(correct({"messages": []}, draft, complete=complete, verify=verify, max_rounds=0,
                              initial_report=failed))
    assert calls == [] and res.completion is draft
    assert res.stop_reason == "not_attempted" and res.state is State.VERIFICATION_FAILED
    assert res.report.to_dict()["correction"] == {"state": "VERIFICATION_FAILED", "stop_reason": "not_attempted"}
    assert res.report.status == "failed" and res.report.rounds == []


# ----------------------------------------------------------------------------- 5. broken policy


def test_broken_policy_edit_logs_a_warning_once(tmp_path: Path) -> None:
    f = tmp_path / "live.yaml"
    f.write_text("on_failure: annotate\n")
    store = PolicyStore(tmp_path, check_interval_s=0)
    assert store.get("live").on_failure == "annotate"
    time.sleep(0.01)
    f.write_text("on_failure: explode\n")
    os.utime(f, (time.time() + 5, time.time() + 5))  # a distinct mtime even on coarse clocks
    with capture_logs() as logs:
        assert store.get("live").on_failure == "annotate"  # last good version kept
        store.refresh(force=True)  # same broken file: no second warning
    warnings = [e for e in logs if e["event"] == "policy_invalid"]
    assert len(warnings) == 1, logs
    assert warnings[0]["log_level"] == "warning" and warnings[0]["file"] == str(f)
    assert "on_failure" in warnings[0]["error"] and warnings[0]["kept"] == "the last good version"


# ----------------------------------------------------------------------------- 6. every ${VAR}


def test_every_missing_env_var_is_reported() -> None:
    text = "upstreams:\n  - name: a\n    base_url: http://${HOST}:${PORT}/v1\n    api_key: ${KEY}\n"
    with pytest.raises(ConfigError) as ei:
        parse_config(text, env={})
    lines = str(ei.value).splitlines()
    assert [ln.split("environment variable ")[1].split()[0] for ln in lines] == ["HOST", "PORT", "KEY"]
    assert lines[1].startswith("<config>:3: upstreams.0.base_url:")


# ----------------------------------------------------------------------------- 8. rounded ms


def test_report_ms_fields_rounded_to_a_tenth() -> None:
    rep = Report(status="passed", cost=Cost(ms=53.963606000252184),
                 extra={"durations_ms": {"arithmetic": 12.3456789, "code": 0.04}})
    d = rep.to_dict()
    assert d["cost"]["ms"] == 54.0
    assert d["durations_ms"] == {"arithmetic": 12.3, "code": 0.0}
    assert rep.cost.ms == 53.963606000252184  # the record keeps full precision (metrics)


def _readme_block_after(marker: str, page: str = "docs/mock-upstream.md") -> str:
    readme = (ROOT / page).read_text()
    i = readme.index(marker)
    start = readme.index("```yaml\n", i) + len("```yaml\n")
    return readme[start:readme.index("```", start)]


def test_readme_verifier_model_script_drives_the_planner_and_facts(gateway_factory):
    # docs/mock-upstream.md "Scripting the verifier model" (was in the README): before it, nothing
    # said how the mock upstream answers the planner / facts calls (the `schema` match was
    # undocumented), and demo mode answers them with plain text (an `error` check). The page's own
    # script must plan and judge for real.
    import openai
    import yaml

    from proxy.upstreams.mock import MockUpstream
    from verifiers.facts._claims import ClaimList
    from verifiers.facts._judge import VerdictAnswer
    from verifiers.planner._prompt import Plan

    script = yaml.safe_load(_readme_block_after("**Scripting the verifier model.**"))
    by_name = {r["name"]: r for r in script["rules"]}
    Plan.model_validate_json(by_name["plan"]["reply"]["content"])
    ClaimList.model_validate_json(by_name["claims"]["reply"]["content"])
    VerdictAnswer.model_validate_json(by_name["verdict"]["reply"]["content"])

    with MockUpstream(script) as mock:
        gw = gateway_factory({"upstreams": [{"name": "mock", "base_url": mock.base_url, "api_key": "sk-mock"}]})
        c = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, timeout=60)
        r = c.chat.completions.create(model="gpt-test", extra_headers={"x-veracity-policy": "math"},
                                      extra_body={"veracity": {"on_failure": "annotate"}},
                                      messages=[{"role": "user", "content": "What does a $60 item with a 15% "
                                                                            "discount cost?"}])
        rep = r.model_extra["veracity"]
        assert rep["plan_source"] == "model", rep
        planned = [ch for ch in rep["checks"] if ch["verifier"] == "planner"]
        assert [ch["outcome"] for ch in planned] == ["fail"], rep
        assert float(planned[0]["expected"]) == 51.0 and planned[0]["claim"] == "$45.50"
        assert rep["status"] == "failed" and rep["cost"]["verifier_calls"] == 1
        rules = [q.get("rule") for q in mock.requests()]
        assert rules == ["discount", "plan"], rules


def test_cli_output_into_a_closed_pipe_ends_quietly():
    # `veracity review list | head` printed a BrokenPipeError traceback when head exited first
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the command writes: every write is EPIPE
    try:
        p = subprocess.run([sys.executable, "-m", "proxy", "key", "hash", "--generate"], cwd=ROOT,
                           stdout=w, stderr=subprocess.PIPE, timeout=60)
    finally:
        os.close(w)
    assert p.returncode == 141, p.stderr
    assert b"Traceback" not in p.stderr and b"BrokenPipeError" not in p.stderr, p.stderr


# --------------------------------------------------------------- second newcomer pass (09:00 UTC)


def test_eval_without_matplotlib_names_an_install_that_works_from_a_checkout(monkeypatch, capsys, tmp_path):
    # the hint was `pip install 'veracity[eval]'`: no `veracity` package is published to take the
    # extra from, so on a clone (where `make run` leaves matplotlib out) the hint led nowhere
    from proxy.cli.main import main

    monkeypatch.setitem(sys.modules, "matplotlib", None)        # import matplotlib -> ImportError
    data = tmp_path / "d.jsonl"
    data.write_text('{"question": "2+2?", "answer": "2 + 2 = 4", "label": true}\n')
    assert main(["eval", str(data), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "-e '.[eval]'" in err and "veracity[eval]" not in err, err
    assert not (tmp_path / "out").exists()


def test_every_route_label_the_gateway_exports_is_named_in_the_readme(gateway_factory):
    # /metrics showed route="/v1/veracity/reports/{request_id}" (and the review routes), which the
    # list of `route` values (README then, docs/metrics.md now) did not name
    import httpx

    readme = (ROOT / "docs" / "metrics.md").read_text()
    start = readme.index("`route` values are route templates")
    listed = readme[start:readme.index("\n\n", start)]
    gw = gateway_factory(None)                                 # demo mode: pass-through auth
    with httpx.Client(base_url=gw.url, trust_env=False, timeout=60) as http:
        chat = http.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 200
        assert http.get(chat.headers["x-veracity-report-url"]).status_code == 200
        http.get("/v1/models")
        http.post("/v1/veracity/verify", json={"answer": "2 + 2 = 4"})
        http.get("/v1/veracity/reviews")                        # 401/403: counted all the same
        http.get("/v1/veracity/reviews/rev_x")
        http.get("/veracity/review")
        http.get("/v1/nope")                                    # pass-through: demo upstream's 404
        http.get("/nope")                                       # _unmatched
    routes = {line.split('route="', 1)[1].split('"', 1)[0]
              for line in gw.metrics().splitlines() if line.startswith("veracity_requests_total{")}
    assert len(routes) >= 9, routes
    missing = sorted(r for r in routes if f"`{r}`" not in listed)
    assert not missing, f"route labels not named in docs/metrics.md: {missing}"


def test_the_image_lets_its_user_create_what_the_example_config_names(tmp_path):
    # `cp deploy/veracity.example.yaml deploy/veracity.yaml` + `docker compose up`: compose mounts
    # the file at /etc/veracity/veracity.yaml, the example's `audit: ./audit/audit.jsonl` is
    # resolved there, and /etc/veracity (made by Docker for the bind mount, root's) was not
    # writable by the image's non-root user: the gateway refused to start (exit 2)
    import json
    import re
    import shlex

    docker = (ROOT / "deploy" / "Dockerfile").read_text()
    user = re.search(r"^USER (\S+)", docker, re.M).group(1)
    cmd = json.loads(re.search(r"^CMD (\[.*\])", docker, re.M).group(1))
    config_dir = str(Path(cmd[cmd.index("--config") + 1]).parent)
    assert config_dir == "/etc/veracity"
    runs = [shlex.split(m.replace("\\\n", " ")) for m in re.findall(r"^RUN ((?:.*\\\n)*.*)", docker, re.M)]

    def operands(words: list[str], command: str) -> list[list[str]]:
        out = []
        for i, w in enumerate(words):
            if w == command:
                end = next((j for j in range(i + 1, len(words)) if words[j] in ("&&", "||", ";")), len(words))
                out.append([a for a in words[i + 1:end] if not a.startswith("-")])
        return out

    made = [d for words in runs for args in operands(words, "mkdir") for d in args]
    chowned = [args[1:] for words in runs for args in operands(words, "chown") if args and args[0] == user]
    assert config_dir in made, made
    assert any(config_dir in paths for paths in chowned), chowned

    # and the example's writable paths are relative to the config folder (so inside config_dir)
    cfg_file = tmp_path / "veracity.yaml"
    cfg_file.write_text((ROOT / "deploy" / "veracity.example.yaml").read_text())
    cfg = load_config(str(cfg_file), env={})
    assert Path(cfg.verification.audit).parent.parent == tmp_path


def test_a_405_sends_one_allow_header_and_own_routes_answer_405_not_404(gateway_factory):
    # `curl -X POST /healthz` showed `allow: GET, HEAD` twice (Starlette's header and the
    # gateway's), OPTIONS on the chat path `allow: POST` beside the full list; and DELETE on a
    # report or a review was a 404 "Unknown request URL" for a URL the gateway serves
    import httpx

    gw = gateway_factory(None)
    with httpx.Client(base_url=gw.url, trust_env=False, timeout=30) as http:
        for method, path, allow in [("POST", "/healthz", "GET, HEAD"), ("PUT", "/metrics", "GET, HEAD"),
                                    ("OPTIONS", "/v1/chat/completions", None),
                                    ("GET", "/v1/veracity/verify", "POST"),
                                    ("DELETE", "/v1/veracity/reports/req_x", "GET, HEAD"),
                                    ("DELETE", "/v1/veracity/reviews/rev_x", "GET, HEAD, POST"),
                                    ("PUT", "/v1/veracity/reviews", "GET, HEAD")]:
            r = http.request(method, path)
            assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed", (path, r.text)
            got = r.headers.get_list("allow")
            assert len(got) == 1, (path, got)
            if allow is not None:
                assert got == [allow], (path, got)
            else:
                assert {"GET", "POST"} <= {m.strip() for m in got[0].split(",")}, got
        r = http.delete("/v1/veracity/nothing-here")
        assert r.status_code == 404 and r.json()["error"]["code"] == "unknown_url"


def test_eval_of_a_text_less_review_export_says_why_nothing_was_read(capsys, tmp_path):
    # `veracity review export` under a policy with review.include_text: false writes reviews
    # without answer text; `veracity eval` on it only said "no labelled answer"
    pytest.importorskip("matplotlib")
    import json

    from proxy.cli.main import main

    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps({"id": "rev_1", "request_id": "req_1", "created": 1, "model": "m", "team": "t",
                                "policy": "default", "reason": "max_retry_exceeded", "question": None,
                                "answer": None, "drafts": None, "veracity_status": "failed", "checks": [],
                                "failed_checks": [], "label": {"verdict": "correct", "note": "",
                                                               "reviewer": "ann", "resolved_at": 2}}) + "\n")
    assert main(["eval", str(data), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "1 review(s) without answer text" in err and "review.include_text" in err, err
