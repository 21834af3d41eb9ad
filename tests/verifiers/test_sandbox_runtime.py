"""The bwrap sandbox runtime (docs/code.md): `veracity sandbox setup` / `info`, the runtime bound
read-only, the pandas case of docs/code.md (``and`` on two Series) caught with it and `unknown`
(naming the setup command) without it, the CPU limit named as such (found by a newcomer).

The runtime built from PyPI comes from CI (`deploy/ci/sandbox-runtime.sh`, which runs
`veracity sandbox setup` before `make test` and exports VERACITY_TEST_SANDBOX_RUNTIME); locally
the tests that need it use that variable or a runtime at the default location, and skip
without one (marked `bwrap`: under VERACITY_CI=1 a skip is a failure). No test here touches the
network: the setup command itself is tested against a local wheel (pip --no-index).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from verifiers import code
from verifiers.sandbox import Limits, runtime as rt
from verifiers.sandbox._common import classify, cpu_signal
from verifiers.sandbox._bwrap import BwrapSandbox

ROOT = Path(__file__).resolve().parents[2]

# The data-cleaning case of docs/verifier-model.md and docs/code.md: `and` between two boolean
# Series ("stated to work").
PANDAS_CASE = """To keep only plausible ages, filter the DataFrame like this:

```python
import pandas as pd

df = pd.DataFrame({'Name': ['Ann', 'Bob', 'Cy'], 'Age': [34, -1, 150]})
clean = df[(df['Age'] > 0) and (df['Age'] < 120)]
print(clean)
```

This works and keeps Ann.
"""


#: starts sandboxes, servers or sweeps the case files: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _need_bwrap() -> None:
    why = BwrapSandbox(python="/usr/bin/python3").unavailable_reason()
    if why is not None:
        pytest.skip(f"bwrap backend unavailable: {why}")


def _shared_tmpdir() -> str:
    """A temporary directory the sandbox user can enter: under root the bwrap backend runs as
    uid 65534, and pytest's tmp_path (/tmp/pytest-of-root, mode 0700) is closed to it."""
    d = tempfile.mkdtemp(prefix="veracity-rt-test-", dir="/tmp")
    os.chmod(d, 0o755)
    return d


@pytest.fixture(scope="session")
def built_runtime() -> rt.Runtime:
    """The runtime `veracity sandbox setup` built from PyPI (CI) or the local default one."""
    path = os.environ.get("VERACITY_TEST_SANDBOX_RUNTIME")
    if not path:
        d = rt.default_path()
        if not (d / rt.MANIFEST).is_file():
            pytest.skip("no sandbox runtime built: run `veracity sandbox setup` (or set "
                        "VERACITY_TEST_SANDBOX_RUNTIME); CI builds it with deploy/ci/sandbox-runtime.sh")
        path = str(d)
    r = rt.load(path)
    assert {"numpy", "pandas", "sympy"} <= set(r.manifest["packages"]), r.manifest
    return r


@pytest.fixture(scope="module")
def empty_runtime():
    """A runtime without the scientific stack: a bare venv of /usr/bin/python3 (no network).
    It does not see the system's dist-packages, so even a host with Debian's pandas lacks it."""
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("no /usr/bin/python3")
    d = _shared_tmpdir()
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", f"{d}/rt"], check=True)
    yield rt.load(f"{d}/rt")
    shutil.rmtree(d, ignore_errors=True)


# --- the package set, hints, vocabulary (no sandbox needed) -------------------------------------

def test_default_packages_are_the_docker_images():
    """Both backends run the same libraries: the Dockerfile's pip line == DEFAULT_PACKAGES."""
    text = (ROOT / "deploy/sandbox/Dockerfile").read_text()
    line = re.search(r"pip install [^\n]*", text).group(0)
    assert sorted(re.findall(r'"([^"]+)"', line)) == sorted(rt.DEFAULT_PACKAGES)


def test_packages_option_keeps_commas_inside_a_specifier():
    from proxy.cli.main import _split_requirements

    assert _split_requirements("numpy>=1.26,<3,pandas>=2.1,<3,sympy>=1.12,scikit-learn") == [
        "numpy>=1.26,<3", "pandas>=2.1,<3", "sympy>=1.12", "scikit-learn"]


def test_missing_package_hint_names_the_package_and_the_command():
    assert "`veracity sandbox setup`" in rt.provide_hint("pandas.core")
    h = rt.provide_hint("sklearn.linear_model")
    assert "`veracity sandbox setup --packages numpy,pandas,sympy,scikit-learn`" in h and "scikit-learn" in h
    assert rt.provide_hint("/x/pandas/_libs/hashtable.so") == ""


def test_sigxcpu_is_the_cpu_limit_not_a_timeout():
    """Exit 152 (128 + SIGXCPU) after the CPU limit's worth of time: `cpu`, and the signal's
    name is SIGXCPU (found by a newcomer: it was reported as `timeout`)."""
    assert signal.SIGXCPU == 24 and cpu_signal(152) == "SIGXCPU" and cpu_signal(-24) == "SIGXCPU"
    assert cpu_signal(137) == "SIGKILL" and cpu_signal(1) == ""
    assert classify(152, "", timed_out=False, output=False, oom=False, cpu_s_max=20.0, cpu_s=10) == "cpu"
    assert classify(137, "", timed_out=False, output=False, oom=False, cpu_s_max=22.0, cpu_s=10) == "cpu"
    assert classify(None, "", timed_out=True, output=False, oom=False) == "timeout"
    assert classify(152, "", timed_out=False, output=False, oom=False, cpu_s_max=1.0, cpu_s=10) == "none"


def test_default_path_follows_xdg_and_avoids_root_home(monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", "/srv/cache")
    assert rt.default_path() == Path("/srv/cache/veracity/sandbox-runtime")
    monkeypatch.delenv("XDG_CACHE_HOME")
    want = Path("/var/cache/veracity/sandbox-runtime") if os.geteuid() == 0 else \
        Path.home() / ".cache/veracity/sandbox-runtime"
    assert rt.default_path() == want


def test_a_configured_runtime_that_is_missing_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    monkeypatch.delenv("VERACITY_SANDBOX_ROOTFS", raising=False)
    monkeypatch.delenv("VERACITY_SANDBOX_PYTHON", raising=False)
    monkeypatch.setenv(rt.ENV_VAR, str(tmp_path / "nothing"))
    box = BwrapSandbox()
    why = box.unavailable_reason()
    assert why is not None and "no sandbox runtime" in why and "veracity sandbox setup" in why


# --- with the runtime -----------------------------------------------------------------------------

@pytest.mark.bwrap
def test_pandas_case_fails_on_bwrap_with_the_runtime(built_runtime):
    _need_bwrap()
    box = BwrapSandbox(runtime=built_runtime.path)
    checks = code.check(PANDAS_CASE, sandbox=box)
    c = next((c for c in checks if c.outcome == "fail"), None)
    assert c is not None, [(c.outcome, c.note) for c in checks]
    assert "ValueError" in c.note and "truth value of a Series is ambiguous" in c.note
    assert c.evidence["sandbox"] == "bwrap"


@pytest.mark.bwrap
def test_pandas_case_is_unknown_without_the_stack_and_names_the_command(empty_runtime):
    _need_bwrap()
    box = BwrapSandbox(runtime=empty_runtime.path)
    checks = code.check(PANDAS_CASE, sandbox=box)
    assert checks and all(c.outcome != "fail" for c in checks)
    c = next(c for c in checks if "package" in c.note)
    assert c.outcome == "unknown"
    assert "(pandas)" in c.note and "`veracity sandbox setup`" in c.note, c.note


@pytest.mark.bwrap
def test_the_environment_variable_selects_the_runtime(built_runtime, monkeypatch):
    """The line `veracity sandbox setup` prints is all the configuration the backend needs."""
    _need_bwrap()
    monkeypatch.delenv("VERACITY_SANDBOX_ROOTFS", raising=False)
    monkeypatch.delenv("VERACITY_SANDBOX_PYTHON", raising=False)
    monkeypatch.setenv(rt.ENV_VAR, built_runtime.path)
    from verifiers import sandbox

    box = sandbox.get("bwrap")
    res = box.run("import sys, pandas\nprint(sys.executable, pandas.__version__)")
    assert res.ok, res.stderr
    assert res.stdout.split() == [built_runtime.python, built_runtime.manifest["packages"]["pandas"]]
    assert res.extra["interpreter"] == built_runtime.python


@pytest.mark.bwrap
def test_runtime_files_cannot_be_modified_from_inside_a_run(built_runtime):
    _need_bwrap()
    box = BwrapSandbox(runtime=built_runtime.path)
    init = Path(built_runtime.path, "lib")
    target = next(init.glob("python3*/site-packages/pandas/__init__.py"))
    manifest = Path(built_runtime.path, rt.MANIFEST)
    before = {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in (target, manifest)}
    res = box.run(f"""
import os, errno
out = []
def attempt(name, fn):
    try:
        fn(); out.append(name + ' WROTE')
    except OSError as e:
        out.append(name + ' ' + errno.errorcode.get(e.errno, str(e.errno)))
attempt('append', lambda: open({str(target)!r}, 'a').write('raise SystemExit("pwned")\\n'))
attempt('create', lambda: open({built_runtime.path + '/evil.pth'!r}, 'w').write('import os\\n'))
attempt('sitecustomize', lambda: open({str(target.parent.parent / 'sitecustomize.py')!r}, 'w').write('x'))
attempt('unlink', lambda: os.unlink({str(manifest)!r}))
attempt('chmod', lambda: os.chmod({str(target)!r}, 0o777))
attempt('rename', lambda: os.rename({str(manifest)!r}, {built_runtime.path + '/m.json'!r}))
attempt('mkdir', lambda: os.mkdir({built_runtime.path + '/lib/x'!r}))
print(*out, sep='\\n')
""")
    assert res.ok, res.stderr
    lines = res.stdout.split("\n")[:-1]
    assert len(lines) == 7 and not any("WROTE" in x for x in lines), lines
    assert all(x.split()[1] in ("EROFS", "EACCES", "EPERM") for x in lines), lines
    after = {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns) for p in (target, manifest)}
    assert after == before and not Path(built_runtime.path, "evil.pth").exists()


@pytest.mark.bwrap
def test_sandbox_info_reports_backend_interpreter_packages_and_limits(built_runtime, tmp_path):
    _need_bwrap()
    (tmp_path / "p.yaml").write_text("name: p\nverifiers:\n  code: {enabled: true, sandbox: {backend: bwrap, "
                                     "limits: {memory_mb: 640, cpu_s: 7}}}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("VERACITY_SANDBOX_ROOTFS", "VERACITY_SANDBOX_PYTHON")}
    env.update({rt.ENV_VAR: built_runtime.path, "PYTHONPATH": str(ROOT)})
    run = lambda *a: subprocess.run([sys.executable, "-m", "proxy", "sandbox", "info", "--policy",  # noqa: E731
                                     str(tmp_path / "p.yaml"), *a], capture_output=True, text=True, env=env,
                                    timeout=120)
    proc = run("--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert d["backend"] == "bwrap" and d["available"] is True
    assert d["interpreter"] == built_runtime.python and d["runtime"] == built_runtime.path
    assert d["stack"] == "ok"  # numpy, pandas and sympy import and work under these limits
    assert d["limits"]["memory_mb"] == 640 and d["limits"]["cpu_s"] == 7
    for name in ("numpy", "pandas", "sympy"):
        assert d["packages"][name] == built_runtime.manifest["packages"][name]
    assert d["seccomp"] and d["memory"].startswith("RLIMIT_AS")
    text = run().stdout
    assert f"interpreter: {built_runtime.python}" in text and "memory_mb=640" in text
    assert f"  pandas {built_runtime.manifest['packages']['pandas']}" in text and "hint:" not in text


@pytest.mark.bwrap
def test_shipped_limits_fit_the_shipped_package_set(built_runtime):
    """The default limits (what every shipped policy uses: `limits: {}`) run the test suite's
    stack program -- imports, a thread, a fork, a subprocess -- with the runtime; the measured
    floor is in bench/results/sandbox_memory_floor.md."""
    _need_bwrap()
    import yaml

    shipped = []
    for f in (ROOT / "policies").glob("*.yaml"):
        sb = ((yaml.safe_load(f.read_text()).get("verifiers") or {}).get("code") or {}).get("sandbox") or {}
        shipped.append(Limits(**(sb.get("limits") or {})))
    tightest = Limits(memory_mb=min(x.memory_mb for x in shipped), cpu_s=min(x.cpu_s for x in shipped),
                      pids=min(x.pids for x in shipped), timeout_s=60)
    box = BwrapSandbox(runtime=built_runtime.path)
    res = box.run("""
import multiprocessing, subprocess, threading
import numpy as np, pandas as pd, sympy as sp
df = pd.DataFrame({'age': [10, 130, 40]})
print(int(df[(df['age'] > 0) & (df['age'] < 120)]['age'].sum()), sp.factor(sp.Symbol('x')**2 - 1))
t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()
a, b = multiprocessing.get_context('fork').Pipe()
p = multiprocessing.get_context('fork').Process(target=lambda: b.send(6)); p.start(); print(a.recv()); p.join()
print(subprocess.run(['python3', '-c', 'print(7)'], capture_output=True, text=True).stdout.strip())
""", limits=tightest)
    assert res.ok and res.killed_by == "none", (res.killed_by, res.exit_code, res.stderr[-300:])
    assert res.stdout.split() == ["50", "(x", "-", "1)*(x", "+", "1)", "thread", "6", "7"]
    # threaded data code: 8 threads of BLAS + pandas (without MALLOC_ARENA_MAX=2 in the sandbox's
    # environment this failed at 512 MiB: every thread's malloc arena reserves 64 MiB)
    res = box.run("""
import numpy as np, pandas as pd
from concurrent.futures import ThreadPoolExecutor
def work(i):
    a = np.random.default_rng(i).random((200, 200))
    return float((a @ a).sum() > 0) + len(pd.DataFrame({'x': range(1000)}).query('x > 5'))
with ThreadPoolExecutor(8) as ex:
    print(sum(ex.map(work, range(32))))
""", limits=tightest)
    assert res.ok and res.stdout.strip() == "31840.0", (res.killed_by, res.exit_code, res.stderr[-300:])


@pytest.mark.bwrap
def test_startup_note_names_the_missing_stack_and_the_command(empty_runtime, built_runtime, monkeypatch):
    _need_bwrap()
    monkeypatch.delenv("VERACITY_SANDBOX_ROOTFS", raising=False)
    monkeypatch.delenv("VERACITY_SANDBOX_PYTHON", raising=False)
    monkeypatch.setenv(rt.ENV_VAR, empty_runtime.path)
    msg, fields = rt.startup_note("bwrap")
    assert fields["missing"] == ["numpy", "pandas", "sympy"] and "`veracity sandbox setup`" in msg
    monkeypatch.setenv(rt.ENV_VAR, built_runtime.path)
    assert rt.startup_note("bwrap") is None


@pytest.mark.bwrap
def test_gateway_says_once_at_start_up_when_the_stack_is_missing(gateway_factory, empty_runtime, tmp_path):
    _need_bwrap()
    (tmp_path / "default.yaml").write_text("name: default\nverifiers:\n  code: {enabled: true, sandbox: {backend: bwrap}}\n")
    env = {rt.ENV_VAR: empty_runtime.path, "VERACITY_POLICIES": str(tmp_path),
           "VERACITY_SANDBOX_ROOTFS": "", "VERACITY_SANDBOX_PYTHON": ""}
    gw = gateway_factory(None, env=env)
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "code sandbox:" not in gw.log():
        time.sleep(0.2)
    lines = [r for r in gw.log_records() if str(r.get("event", "")).startswith("code sandbox:")]
    assert len(lines) == 1, gw.log()[-2000:]
    assert lines[0]["missing"] == ["numpy", "pandas", "sympy"] and "veracity sandbox setup" in lines[0]["event"]
    assert not (Path(empty_runtime.path) / rt.MANIFEST).exists()  # nothing was built unasked


# --- the setup command itself, offline ------------------------------------------------------------

def _wheel(dirpath: Path, name: str = "vprobe", version: str = "1.0") -> None:
    """A minimal pure-Python wheel (PEP 427) for pip --no-index."""
    files = {f"{name}/__init__.py": b"VALUE = 42\n",
             f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
             f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    rec = "".join(f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(b).digest()).rstrip(b'=').decode()},{len(b)}\n"
                  for p, b in files.items()) + f"{name}-{version}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(dirpath / f"{name}-{version}-py3-none-any.whl", "w") as z:
        for p, b in files.items():
            z.writestr(p, b)
        z.writestr(f"{name}-{version}.dist-info/RECORD", rec)


def test_setup_builds_a_runtime_and_prints_the_one_line_that_uses_it():
    d = Path(_shared_tmpdir())
    try:
        _wheel(d)
        env = dict(os.environ, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(d), PYTHONPATH=str(ROOT))
        env.pop("VERACITY_SANDBOX_RUNTIME", None)
        proc = subprocess.run([sys.executable, "-m", "proxy", "sandbox", "setup", "--packages", "vprobe",
                               "--path", str(d / "rt")], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == f"export VERACITY_SANDBOX_RUNTIME={d / 'rt'}\n"
        r = rt.load(d / "rt")
        assert r.manifest["requested"] == ["vprobe"] and r.manifest["packages"] == {"vprobe": "1.0"}
        assert r.manifest["size_bytes"] > 0 and not list(d.glob(".rt.building-*"))
        if BwrapSandbox(python="/usr/bin/python3").unavailable_reason() is None:
            assert "checked in the bwrap sandbox" in proc.stderr
            res = BwrapSandbox(runtime=r.path).run("import vprobe, sys\nprint(vprobe.VALUE, sys.prefix)")
            assert res.ok and res.stdout.split() == ["42", r.path], res.stderr
        # a failed rebuild says why, exits 1 and leaves the working runtime as it was
        proc = subprocess.run([sys.executable, "-m", "proxy", "sandbox", "setup", "--packages", "no-such-pkg-xyz",
                               "--path", str(d / "rt")], capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 1 and proc.stdout == "" and "no-such-pkg-xyz" in proc.stderr
        assert rt.load(d / "rt").manifest == r.manifest and not list(d.glob(".rt.*"))
    finally:
        shutil.rmtree(d, ignore_errors=True)


@pytest.mark.bwrap
def test_runtime_at_the_default_location_needs_no_configuration(built_runtime, monkeypatch, tmp_path):
    """`veracity sandbox setup` without --path, then the gateway: nothing to configure."""
    _need_bwrap()
    for k in ("VERACITY_SANDBOX_ROOTFS", "VERACITY_SANDBOX_PYTHON", rt.ENV_VAR):
        monkeypatch.delenv(k, raising=False)
    (tmp_path / "veracity").mkdir()
    (tmp_path / "veracity" / "sandbox-runtime").symlink_to(built_runtime.path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    box = BwrapSandbox()
    assert box.runtime is not None and box.python == built_runtime.python
    monkeypatch.setenv("VERACITY_SANDBOX_PYTHON", "/usr/bin/python3")  # an explicit interpreter wins
    assert BwrapSandbox().runtime is None


@pytest.mark.bwrap
def test_gateway_catches_the_design_pandas_case_with_the_runtime(gateway_factory, built_runtime, tmp_path):
    """The real openai SDK -> `veracity serve` -> scripted upstream answering with the
    pandas case of docs/code.md: the report fails the code check with pandas' own error."""
    _need_bwrap()
    import openai
    import yaml

    from proxy.upstreams.mock import MockUpstream

    (tmp_path / "default.yaml").write_text(yaml.safe_dump({
        "name": "default", "on_failure": "annotate", "risk": {"threshold": 0.0},
        "verifiers": {"code": {"enabled": True, "timeout_ms": 60000, "sandbox": {"backend": "bwrap",
                                                                                "limits": {"timeout_s": 30}}},
                      "citations": {"enabled": False}}}))
    mock = MockUpstream({"rules": [{"name": "pandas", "match": {"last_user": "plausible"},
                                    "reply": {"content": PANDAS_CASE}}], "models": ["gpt-test"]}).start()
    try:
        gw = gateway_factory({"upstreams": [{"name": "mock", "models": ["gpt-*"], "base_url": mock.base_url}],
                              "policies": {"dir": str(tmp_path), "check_interval_s": 0}},
                             env={rt.ENV_VAR: built_runtime.path, "VERACITY_SANDBOX_ROOTFS": "",
                                  "VERACITY_SANDBOX_PYTHON": ""})
        c = openai.OpenAI(base_url=gw.base_url, api_key="sk-test", max_retries=0, timeout=120)
        resp = c.chat.completions.create(model="gpt-test", messages=[
            {"role": "user", "content": "Keep only the rows with a plausible Age in my DataFrame."}])
        rep = resp.model_extra["veracity"]
        failed = [x for x in rep["checks"] if x["verifier"] == "code" and x["outcome"] == "fail"]
        assert failed, rep
        assert "truth value of a Series is ambiguous" in failed[0]["note"]
        assert failed[0]["evidence"]["interpreter"] == built_runtime.python
        assert "code sandbox:" not in gw.log()  # the stack is there: no start-up warning
    finally:
        mock.stop()


@pytest.mark.bwrap
def test_planner_run_python_without_pandas_names_the_setup_command(empty_runtime):
    """The planner's run_python step on the same pandas case: `unknown`, naming pandas and the
    command that provides it (not a failure of the draft)."""
    _need_bwrap()
    import asyncio

    from verifiers import planner
    from verifiers.model import ScriptedModel

    line = "df = df[(df['Age'] > 0) and (df['Age'] < 120)]"
    step = {"step_id": 1, "description": "", "expected_check": "", "tool": "run_python", "claim": line,
            "input": {"setup": "import pandas as pd\ndf = pd.DataFrame({'Age': [25, -5, 150, 30]})",
                      "code": line, "assertions": ["list(df['Age']) == [25, 30]"]}}
    model = ScriptedModel([(lambda m, name, purpose: name == "Plan",
                            {"verification_needed": True, "verification_steps": [step]})])
    draft = f"```python\nimport pandas as pd\ndf = pd.read_csv('data.csv')\n{line}\n```"
    tools = planner.Toolbox(sandbox=BwrapSandbox(runtime=empty_runtime.path))
    out = asyncio.run(planner.acheck(draft, "Clean data.csv: keep plausible ages, using pandas.", model=model,
                                     use_model=True, tools=tools, deadline_s=60))
    [c] = out.checks
    assert c.outcome == "unknown" and "pandas" in c.note and "`veracity sandbox setup`" in c.note, c.note
