"""Gateway overhead benchmark: the mock upstream directly, through Veracity, through the LiteLLM proxy.

One run, one mock upstream (``veracity mock-upstream`` in its own process, uvloop + httptools,
request recording off), three targets measured one after the other with the same load:

* ``direct``   -- the mock upstream itself (the baseline every "added" number subtracts);
* ``veracity`` -- ``veracity serve`` with bench/veracity_bench.yaml (one upstream = the mock)
  and ``VERACITY_POLICIES=bench/policies_off`` (every check disabled): the cost of the core;
* ``veracity_default`` (optional) -- the same with the shipped policies/: the answer (a short
  worked multiplication) is risk-scored and its arithmetic checked, so this row shows what
  verification of a risky answer adds;
* ``veracity_default_low`` (optional) -- the same server setup as ``veracity_default`` (shipped
  policies/) asked a low-risk question ("Say hello ..."), answered with a greeting (risk below
  the threshold, nothing verified): the "low-risk added latency" floor's row (bench/RESULTS.md),
  to compare with ``veracity`` (checks off);
* ``veracity_base`` (with ``--base-tree DIR``) -- ``veracity serve`` from another checkout (an
  older commit, e.g. ``git worktree add --detach ../base a4443178``), same settings as
  ``veracity`` (the tree's own bench/veracity_bench.yaml and bench/policies_off if it has them),
  started by ``--base-python`` (default: DIR/.venv/bin/python if present, else this interpreter)
  with ``PYTHONPATH=DIR``: two trees measured in one run, interleaved, against the same floor;
* ``floor`` (reference) -- bench/floor_proxy.py, a ~60-line raw-ASGI uvicorn + aiohttp
  pass-through without any gateway feature: the cost of one more Python hop on this stack;
* ``floor_heavy`` (optional, diagnostic) -- the same floor app in a process that first loads
  and warms Veracity's modules (``--veracity-heap``): does process size alone cost time?
* ``floor_session`` (optional, diagnostic) -- the floor app with Veracity's aiohttp session
  options and timeout (``--veracity-session``);
* ``litellm``  -- ``litellm --config bench/litellm_config.yaml`` from bench/.venv-litellm
  (``pip install 'litellm[proxy]==1.108.7'``, offline env as in shared/BENCH-NOTES.md).

Load: wrk (``-t1``, keep-alive, POST via bench/wrk_post.lua) at 1 and 32 connections for
``--duration`` seconds each after a warm-up; a non-stream chat completion whose answer is
~1 kB of JSON. Reported: p50/p99 latency, added p50/p99 (target minus direct at the same
connection count), requests/s, and each gateway's RSS after the runs (>= 10k requests; the
script tops up with extra load if fewer were sent). Floors (bench/RESULTS.md): added p50 <= 0.5 ms at
1 connection, req/s >= 10x LiteLLM at 32 connections, RSS <= 120 MB.

Repeats: ``--repeat`` interleaved rounds per point (every target once per round, so a burst of
foreign load hits all of them alike); the table gives medians with min-max ranges, and "added"
numbers are paired per round (target minus ``direct`` of the same round). CPU microseconds per
request come from /proc (user + system of the target's own processes). On a shared machine,
``--rt PRIO`` runs everything under SCHED_FIFO (root only) so that other jobs do not preempt the
measured processes; the report says whether it was used, with the load average at start and end.

Usage::

    .venv/bin/python bench/gateway_bench.py                # writes bench/results/gateway.md
    .venv/bin/python bench/gateway_bench.py --skip-litellm --targets direct,floor,veracity --conns 1
    .venv/bin/python bench/gateway_bench.py --litellm-bin /path/to/.venv-litellm/bin/litellm --rt 10
    .venv/bin/python bench/gateway_bench.py --skip-litellm --base-tree ../base-a444 --rt 10

Needs ``wrk`` (``apt-get install -y wrk``). A target whose server cannot start is reported as
such and the others still run. Absolute numbers depend on the machine; quote ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PY = sys.executable
LITELLM_BIN = BENCH / ".venv-litellm" / "bin" / "litellm"
NOTES_MARKER = "<!-- notes below are kept by gateway_bench.py when it rewrites this file -->"
LITELLM_MASTER_KEY = "sk-bench-master"  # from bench/litellm_config.yaml; a local, throw-away key

LOW_RISK_ANSWER = "Hello! Nice to meet you. How can I help you today?"
MOCK_SCRIPT = {
    "record_requests": False,
    "models": ["mock-model"],
    "rules": [{"match": {"last_user": "^Say hello"}, "reply": {
        "content": LOW_RISK_ANSWER, "usage": {"prompt_tokens": 20, "completion_tokens": 12, "total_tokens": 32}}},
              {"reply": {
        "content": ("The product of 17 and 23 is 391. To check: 17 x 20 = 340 and 17 x 3 = 51, "
                    "and 340 + 51 = 391. So the answer is 391."),
        "usage": {"prompt_tokens": 24, "completion_tokens": 38, "total_tokens": 62},
    }}],
}
REQUEST_BODY = {
    "model": "mock-model",
    "messages": [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What is 17 * 23? Show your work."},
    ],
    "temperature": 0,
}
LOW_RISK_BODY = {
    "model": "mock-model",
    "messages": [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Say hello to me in one sentence."},
    ],
    "temperature": 0,
}


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    """A port the OS reports free on 127.0.0.1 (tiny race before the server binds it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """A server process we started (its own process group, so stop() ends its workers too)."""

    name: str
    proc: subprocess.Popen
    url: str
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def cpu_s(self) -> float:
        """User + system CPU seconds used so far by the process and its descendants (/proc stat)."""
        ticks = 0
        for pid in _tree(self.proc.pid):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat)
            except (OSError, IndexError, ValueError):
                pass
        return ticks / os.sysconf("SC_CLK_TCK")

    def rss_mb(self) -> float:
        """Resident set size of the process and all its descendants, MiB (/proc VmRSS)."""
        total = 0
        for pid in _tree(self.proc.pid):
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            except OSError:
                pass
        return total / 1024


def _tree(pid: int) -> list[int]:
    out = [pid]
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            kids = (task / "children").read_text().split()
            for k in kids:
                out += _tree(int(k))
    except OSError:
        pass
    return out


def _spawn(name: str, cmd: list[str], env: dict[str, str], workdir: Path,
           cwd: Path = ROOT) -> tuple[subprocess.Popen, Path]:
    log = workdir / f"{name}.log"
    fh = open(log, "w")
    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, cwd=cwd, start_new_session=True)
    fh.close()
    return proc, log


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float, headers: dict[str, str] | None = None) -> bool:
    deadline = time.monotonic() + timeout
    with httpx.Client(trust_env=False, timeout=5) as h:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            try:
                if h.get(url, headers=headers).status_code == 200:
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
    return False


def start_mock(workdir: Path) -> Server:
    script = workdir / "mock_script.json"
    script.write_text(json.dumps(MOCK_SCRIPT))
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc, log = _spawn("mock", [PY, "-m", "proxy.upstreams.mock", "--script", str(script), "--port", str(port),
                                "--no-record"], env, workdir)
    url = f"http://127.0.0.1:{port}"
    if not _wait_ready(url + "/v1/models", proc, 20):
        raise SystemExit(f"mock upstream did not start; see {log}")
    return Server("mock", proc, url, log)


def start_veracity(workdir: Path, mock: Server, config: Path, name: str = "veracity",
                    policies: Path | None = BENCH / "policies_off", tree: Path = ROOT,
                    python: str = PY) -> Server | str:
    """``veracity serve`` on a free port; ``policies``: the VERACITY_POLICIES folder (default:
    bench/policies_off, every check disabled; ``None``: the shipped policies/). ``tree``: the
    checkout whose ``proxy`` package runs (``PYTHONPATH=tree``, working directory ``tree``),
    started as ``python -m proxy serve`` (the entry point every tree since the gateway core has)."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(tree), BENCH_MOCK_BASE_URL=mock.url + "/v1")
    env.pop("OPENAI_API_KEY", None)
    env.pop("VERACITY_POLICIES", None)
    if policies is not None:
        env["VERACITY_POLICIES"] = str(policies)
    proc, log = _spawn(name, [python, "-m", "proxy", "serve", "--config", str(config), "--port", str(port),
                              "--log-level", "warning"], env, workdir, cwd=tree)
    url = f"http://127.0.0.1:{port}"
    if not _wait_ready(url + "/healthz", proc, 30):
        srv = Server(name, proc, url, log)
        srv.stop()
        return f"did not start (see {log}): " + log.read_text()[-400:].strip().replace("\n", " | ")
    return Server(name, proc, url, log)


@dataclass
class BaseTree:
    """Another checkout measured as ``veracity_base``: its directory, the interpreter that runs
    it, its commit (``git rev-parse``) and the config / policies folder it is started with."""

    path: Path
    python: str
    commit: str
    config: Path
    policies: Path

    @classmethod
    def open(cls, path: Path, python: str | None) -> "BaseTree":
        """``path`` must hold a ``proxy`` package; ``python`` defaults to path/.venv/bin/python
        if present, else this interpreter. Raises SystemExit when the folder is no tree."""
        path = path.resolve()
        if not (path / "proxy" / "__main__.py").exists():
            raise SystemExit(f"--base-tree {path}: no proxy/__main__.py there")
        venv = path / ".venv" / "bin" / "python"
        py = python or (str(venv) if venv.exists() else PY)
        try:
            commit = subprocess.run(["git", "-C", str(path), "rev-parse", "--short=8", "HEAD"], capture_output=True,
                                    text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            commit = "unknown commit"
        config = path / "bench" / "veracity_bench.yaml"
        policies = path / "bench" / "policies_off"
        return cls(path, py, commit, config if config.exists() else BENCH / "veracity_bench.yaml",
                   policies if policies.is_dir() else BENCH / "policies_off")


def start_floor(workdir: Path, mock: Server, name: str = "floor") -> Server | str:
    """bench/floor_proxy.py: the minimal uvicorn + aiohttp pass-through (reference row);
    ``floor_heavy``: the same app in a process that first loads Veracity's modules."""
    port = free_port()
    extra = {"floor_heavy": ["--veracity-heap"], "floor_session": ["--veracity-session"]}.get(name, [])
    proc, log = _spawn(name, [PY, str(BENCH / "floor_proxy.py"), "--upstream", mock.url + "/v1",
                              "--port", str(port), *extra], dict(os.environ), workdir)
    url = f"http://127.0.0.1:{port}"
    if not _wait_ready(url + "/healthz", proc, 60):
        Server(name, proc, url, log).stop()
        return f"did not start (see {log})"
    return Server(name, proc, url, log)


def start_litellm(workdir: Path, mock: Server, litellm_bin: Path = LITELLM_BIN) -> Server | str:
    if not litellm_bin.exists():
        return (f"not installed: python3 -m venv {BENCH}/.venv-litellm && "
                f"{BENCH}/.venv-litellm/bin/pip install 'litellm[proxy]==1.108.7'")
    port = free_port()
    env = dict(os.environ, BENCH_MOCK_BASE_URL=mock.url + "/v1", LITELLM_LOCAL_MODEL_COST_MAP="True",
               LITELLM_DONT_SHOW_FEEDBACK_BOX="True", HF_HUB_OFFLINE="1", LITELLM_LOG="ERROR")
    env.pop("OPENAI_API_KEY", None)
    proc, log = _spawn("litellm", [str(litellm_bin), "--config", str(BENCH / "litellm_config.yaml"),
                                   "--host", "127.0.0.1", "--port", str(port), "--num_workers", "1"], env, workdir)
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {LITELLM_MASTER_KEY}"}
    if not _wait_ready(url + "/v1/models", proc, 90, auth):
        srv = Server("litellm", proc, url, log)
        srv.stop()
        return f"did not start (see {log}): " + log.read_text()[-400:].strip().replace("\n", " | ")
    return Server("litellm", proc, url, log)


# --------------------------------------------------------------------------- load


@dataclass
class Run:
    target: str
    conns: int
    requests: int
    rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    cpu_us: float = float("nan")   # CPU of the target's own process(es) per request, microseconds
    raw: dict = field(default_factory=dict)
    round: int = 0


@dataclass
class Point:
    """All repeats of one (target, conns) point: medians and spreads. ``added`` holds, per
    round, this target's p50/p99 minus ``direct``'s in the same round (paired, so a burst of
    foreign load that hits one round shifts both)."""

    target: str
    conns: int
    runs: list[Run]
    added_p50: list[float] = field(default_factory=list)
    added_p99: list[float] = field(default_factory=list)

    @staticmethod
    def _med(xs: list[float]) -> float:
        return statistics.median(xs) if xs else float("nan")

    @property
    def p50_ms(self) -> float:
        return self._med([r.p50_ms for r in self.runs])

    @property
    def p99_ms(self) -> float:
        return self._med([r.p99_ms for r in self.runs])

    @property
    def rps(self) -> float:
        return self._med([r.rps for r in self.runs])

    @property
    def cpu_us(self) -> float:
        return self._med([r.cpu_us for r in self.runs])

    @property
    def errors(self) -> int:
        return sum(r.errors for r in self.runs)

    @property
    def requests(self) -> int:
        return sum(r.requests for r in self.runs)

    def spread(self, attr: str) -> str:
        xs = [getattr(r, attr) for r in self.runs]
        return f"{min(xs):,.3f}-{max(xs):,.3f}" if attr.endswith("ms") else f"{min(xs):,.0f}-{max(xs):,.0f}"

    @property
    def added_p50_med(self) -> float:
        return self._med(self.added_p50)

    @property
    def added_p99_med(self) -> float:
        return self._med(self.added_p99)

    def added_spread(self) -> str:
        return f"{min(self.added_p50):.3f}-{max(self.added_p50):.3f}" if self.added_p50 else "-"


def wrk(url: str, conns: int, seconds: float, body_file: Path, auth: str) -> dict:
    """One wrk run (-t1) against url; returns the JSON line printed by wrk_post.lua."""
    env = dict(os.environ, WRK_BODY_FILE=str(body_file), WRK_AUTH=auth)
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{max(1, round(seconds))}s", "--timeout", "10s",
           "-s", str(BENCH / "wrk_post.lua"), url]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("WRKJSON "):
            return json.loads(line[len("WRKJSON "):])
    raise RuntimeError(f"wrk printed no summary:\n{out}")


def measure(target: str, url: str, conns: int, seconds: float, body_file: Path, auth: str,
            server: Server) -> Run:
    """Warm up 2 s, then one measured wrk run; ``server``'s CPU time is sampled around it."""
    wrk(url, conns, 2, body_file, auth)  # warm-up: connections, lazy imports, caches
    cpu0 = server.cpu_s()
    r = wrk(url, conns, seconds, body_file, auth)
    cpu = server.cpu_s() - cpu0
    errors = r["connect_errors"] + r["read_errors"] + r["write_errors"] + r["timeouts"] + r["status_errors"]
    return Run(target, conns, r["requests"], r["requests"] / (r["duration_us"] / 1e6), r["p50_us"] / 1000,
               r["p99_us"] / 1000, errors, cpu / max(1, r["requests"]) * 1e6, r)


def check_answer(url: str, auth: str, body_file: Path) -> str:
    """One request through the target: returns '' if the answer is the mock's, else a problem."""
    body = json.loads(body_file.read_text())
    with httpx.Client(trust_env=False, timeout=30) as h:
        r = h.post(url, json=body, headers={"Authorization": auth})
    if r.status_code != 200:
        return f"HTTP {r.status_code}: {r.text[:200]}"
    content = r.json()["choices"][0]["message"]["content"]
    if "x-veracity-status" in r.headers:
        print(f"  {url}: x-veracity-status {r.headers['x-veracity-status']}, "
              f"report {json.dumps(r.json().get('veracity'))[:200]}", flush=True)
    expected = LOW_RISK_ANSWER if body == LOW_RISK_BODY else MOCK_SCRIPT["rules"][1]["reply"]["content"]
    return "" if content == expected else f"unexpected answer {content[:80]!r}"


# --------------------------------------------------------------------------- report


def _load() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_note(load_start: str) -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} cores ({cpu}), {platform.system()} {platform.release()}, Python "
            f"{platform.python_version()}; load average (1/5/15 min) {load_start} at the start, {_load()} at the "
            f"end. The load generator (wrk -t1), the gateway and the mock upstream share these cores, and other "
            f"engineers' jobs may have been running on the machine too: quote ratios from one run, not absolute "
            f"numbers.")


def aggregate(runs: list[Run]) -> list[Point]:
    """Group runs by (target, conns) in first-seen order; pair each with ``direct``'s run of
    the same round for the added latency."""
    points: dict[tuple[str, int], Point] = {}
    for r in runs:
        points.setdefault((r.target, r.conns), Point(r.target, r.conns, [])).runs.append(r)
    direct = {(r.conns, r.round): r for r in runs if r.target == "direct"}
    for pt in points.values():
        if pt.target == "direct":
            continue
        for r in pt.runs:
            d = direct.get((r.conns, r.round))
            if d:
                pt.added_p50.append(r.p50_ms - d.p50_ms)
                pt.added_p99.append(r.p99_ms - d.p99_ms)
    return list(points.values())


def _commit(tree: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short=8", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return out + (" + uncommitted changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"


def two_trees(by: dict[tuple[str, int], Point], rss: dict[str, tuple[float, int]], base: BaseTree) -> list[str]:
    """The ``--base-tree`` section: this tree (``veracity``) beside the base tree
    (``veracity_base``) and the floor proxy, all from this run, with the hot-path targets (CPU per
    request and req/s no worse than the base tree at 1 and 32 connections; CPU per request <=
    0.95x the floor proxy at 1 connection; req/s >= 1.25x the floor at 32; RSS <= 120 MiB)."""
    lines = ["", f"## Two trees in this run: this tree ({_commit(ROOT)}) and the base tree ({base.commit})", "",
             f"`veracity` is this checkout, `veracity_base` is `{base.path}` run by `{base.python}` with "
             "`PYTHONPATH` set to it; both checks off (their bench/policies_off), same mock, same load, "
             "interleaved round by round. Medians over the rounds; `x floor` = the row's value divided by the "
             "floor proxy's in the same run.", "",
             "| measure | this tree | x floor | base tree | x floor | floor proxy | this / base |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def row(label: str, attr: str, c: int, fmt: str) -> None:
        v, b, f = by.get(("veracity", c)), by.get(("veracity_base", c)), by.get(("floor", c))
        if not (v and b):
            return
        vv, bv = getattr(v, attr), getattr(b, attr)
        fv = getattr(f, attr) if f else float("nan")
        lines.append(f"| {label} | {vv:{fmt}} | {vv / fv:.2f}x | {bv:{fmt}} | {bv / fv:.2f}x | {fv:{fmt}} | "
                     f"{vv / bv:.2f}x |")

    for c in sorted({k[1] for k in by}):
        row(f"CPU us/request, {c} conn", "cpu_us", c, ",.0f")
        row(f"req/s, {c} conn", "rps", c, ",.0f")
        row(f"p50 ms, {c} conn", "p50_ms", c, ".3f")
    if "veracity" in rss and "veracity_base" in rss:
        (vm, vn), (bm, bn) = rss["veracity"], rss["veracity_base"]
        fm = rss["floor"][0] if "floor" in rss else float("nan")
        lines.append(f"| RSS MiB after the runs ({vn:,} / {bn:,} requests) | {vm:.1f} | {vm / fm:.2f}x | {bm:.1f} | "
                     f"{bm / fm:.2f}x | {fm:.1f} | {vm / bm:.2f}x |")
    lines += ["", "Targets (this tree, this run):", ""]

    def check(text: str, ok: bool) -> None:
        lines.append(f"- {text}: {'met' if ok else 'MISSED'}")

    for c in sorted({k[1] for k in by}):
        v, b, f = by.get(("veracity", c)), by.get(("veracity_base", c)), by.get(("floor", c))
        if v and b:
            check(f"CPU per request at {c} conn no worse than the base tree ({v.cpu_us:,.0f} vs {b.cpu_us:,.0f} us)",
                  v.cpu_us <= b.cpu_us)
            check(f"req/s at {c} conn no worse than the base tree ({v.rps:,.0f} vs {b.rps:,.0f})", v.rps >= b.rps)
        if v and f and c == 1:
            check(f"CPU per request at 1 conn <= 0.95x the floor proxy ({v.cpu_us / f.cpu_us:.2f}x)",
                  v.cpu_us <= 0.95 * f.cpu_us)
        if v and f and c == 32:
            check(f"req/s at 32 conns >= 1.25x the floor proxy ({v.rps / f.rps:.2f}x)", v.rps >= 1.25 * f.rps)
    if "veracity" in rss:
        check(f"RSS after {rss['veracity'][1]:,} requests <= 120 MiB ({rss['veracity'][0]:.1f} MiB)",
              rss["veracity"][0] <= 120)
    return lines


def render(runs: list[Run], rss: dict[str, tuple[float, int]], skipped: dict[str, str], args: argparse.Namespace,
           started: str, load_start: str) -> str:
    points = aggregate(runs)
    by = {(p.target, p.conns): p for p in points}
    sched = ("every process of the run (wrk, the mock, the targets) under SCHED_FIFO priority "
             f"{args.rt} (`--rt {args.rt}`), so that other jobs on the machine do not preempt them"
             if args.rt else "normal scheduling (no `--rt`)")
    lines = [
        "# Gateway overhead benchmark",
        "",
        f"Run {started} by `bench/gateway_bench.py` ({args.repeat} interleaved rounds of {args.duration:g} s per "
        "point, each after a 2 s warm-up; load generator: wrk -t1 with keep-alive, POST through "
        "`bench/wrk_post.lua`; one non-stream chat completion, ~0.9 kB response; the same mock upstream process "
        f"serves all targets; {sched}).",
        "",
        machine_note(load_start),
        "",
        "Each cell is the median over the rounds; `range` columns give min-max over the rounds. `added p50` is,",
        "per round, the target's p50 minus `direct`'s p50 in the same round, then the median of those. `CPU us/req`:",
        "user+system CPU of the target's own process(es) (the mock for `direct`) per request during the measured",
        "run, from /proc -- less sensitive to a busy machine than latency.",
        "",
        "| target | conns | req/s | p50 ms | p50 range | p99 ms | added p50 ms | added p50 range | added p99 ms "
        "| CPU us/req | CPU range | errors |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for p in points:
        if p.target != "direct" and p.added_p50:
            a50, a50r, a99 = f"{p.added_p50_med:.3f}", p.added_spread(), f"{p.added_p99_med:.3f}"
        else:
            a50 = a50r = a99 = "-"
        lines.append(f"| {p.target} | {p.conns} | {p.rps:,.0f} | {p.p50_ms:.3f} | {p.spread('p50_ms')} | "
                     f"{p.p99_ms:.3f} | {a50} | {a50r} | {a99} | {p.cpu_us:,.0f} | {p.spread('cpu_us')} | {p.errors} |")
    lines += ["", "| gateway | RSS after the runs (MiB) | requests it served |", "| --- | ---: | ---: |"]
    for name, (mb, n) in rss.items():
        lines.append(f"| {name} | {mb:.1f} | {n:,} |")
    for name, why in skipped.items():
        lines.append(f"\n**{name} not measured**: {why}")
    lines += ["", "## Floors (gateway, bench/RESULTS.md)", ""]
    v1, d1 = by.get(("veracity", 1)), by.get(("direct", 1))
    v32, l32 = by.get(("veracity", 32)), by.get(("litellm", 32))
    if v1 and d1 and v1.added_p50:
        added = v1.added_p50_med
        lines.append(f"- added p50 at 1 connection: {added:.3f} ms (rounds: {v1.added_spread()}; floor 0.5 ms): "
                     f"{'met' if added <= 0.5 else 'MISSED'}")
    f1 = by.get(("floor", 1))
    if v1 and f1 and f1.added_p50 and v1.added_p50:
        own = [a - b for a, b in zip(v1.added_p50, f1.added_p50)]
        lines.append(f"- for reference, the floor proxy adds {f1.added_p50_med:.3f} ms p50 at 1 connection in the "
                     f"same run (rounds: {f1.added_spread()}); Veracity minus floor per round: median "
                     f"{statistics.median(own):.3f} ms ({min(own):.3f} to {max(own):.3f}); CPU {v1.cpu_us:,.0f} vs "
                     f"{f1.cpu_us:,.0f} us/request ({v1.cpu_us / f1.cpu_us:.2f}x)")
    if v32 and l32:
        ratio = v32.rps / l32.rps if l32.rps else float("inf")
        lines.append(f"- req/s at 32 connections: Veracity {v32.rps:,.0f} vs LiteLLM {l32.rps:,.0f} = {ratio:.1f}x "
                     f"(floor 10x): {'met' if ratio >= 10 else 'MISSED'}")
    if "veracity" in rss:
        mb = rss["veracity"][0]
        lines.append(f"- Veracity RSS after {rss['veracity'][1]:,} requests: {mb:.1f} MiB (floor 120 MB): "
                     f"{'met' if mb <= 120 else 'MISSED'}")
    if "litellm" in rss:
        lines.append(f"- LiteLLM proxy RSS for comparison: {rss['litellm'][0]:.1f} MiB")
    low1, risky1 = by.get(("veracity_default_low", 1)), by.get(("veracity_default", 1))
    if low1 and v1:
        lines += ["", "## Floor (pipeline, bench/RESULTS.md): added latency when the risk score is low", ""]
        d = low1.p50_ms - v1.p50_ms
        lines.append(f"- default policy, low-risk answer vs checks off, 1 connection: p50 {low1.p50_ms:.3f} vs "
                     f"{v1.p50_ms:.3f} ms ({d:+.3f} ms; floor 0.1 ms: {'met' if d <= 0.1 else 'MISSED'} in this "
                     f"run), CPU {low1.cpu_us:,.0f} vs {v1.cpu_us:,.0f} us/request ({low1.cpu_us - v1.cpu_us:+,.0f} us)")
        for c in (32,):
            a, b = by.get(("veracity_default_low", c)), by.get(("veracity", c))
            if a and b:
                lines.append(f"- at {c} connections: {a.rps:,.0f} vs {b.rps:,.0f} req/s, CPU {a.cpu_us:,.0f} vs "
                             f"{b.cpu_us:,.0f} us/request")
        if risky1:
            lines.append(f"- a risky answer (default policy, arithmetic verified): CPU {risky1.cpu_us:,.0f} us/request "
                         f"at 1 connection: the price of verification, not of the pass-through")
    base = getattr(args, "base", None)
    if base is not None:
        lines += two_trees(by, rss, base)
    cmd = " ".join(["bench/gateway_bench.py", *sys.argv[1:]]) if sys.argv[1:] else "bench/gateway_bench.py"
    lines += ["", f"Reproduce: `.venv/bin/python {cmd}` (needs `wrk`; LiteLLM in `bench/.venv-litellm` or "
              "`--litellm-bin`, see the script's docstring).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--targets", default="direct,floor,veracity,litellm",
                   help="comma list of direct, floor, veracity, veracity_default, veracity_default_low, floor_heavy, floor_session, litellm "
                        "(direct is always measured: every added number subtracts it)")
    p.add_argument("--skip-litellm", action="store_true", help="drop litellm from --targets")
    p.add_argument("--litellm-bin", type=Path, default=LITELLM_BIN,
                   help="the litellm proxy executable (default bench/.venv-litellm/bin/litellm; missing: skipped)")
    p.add_argument("--conns", default="1,32", help="comma list of connection counts (points)")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per measured run")
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds per point (medians and spreads)")
    p.add_argument("--rt", type=int, default=0, metavar="PRIO",
                   help="run wrk, the mock and every target under SCHED_FIFO with this priority (1-99; needs "
                        "root): other jobs on a shared machine then do not preempt them. 0 = off (default)")
    p.add_argument("--min-requests", type=int, default=10_000, help="load each gateway at least this much before RSS")
    p.add_argument("--veracity-config", type=Path, default=BENCH / "veracity_bench.yaml")
    p.add_argument("--base-tree", type=Path, metavar="DIR",
                   help="another checkout (e.g. an older commit in a git worktree) measured as target veracity_base, "
                        "interleaved with the others; the report compares the two trees and the floor proxy")
    p.add_argument("--base-python", metavar="PATH",
                   help="interpreter for --base-tree (default DIR/.venv/bin/python if present, else this one; "
                        "the tree is put first on PYTHONPATH either way)")
    p.add_argument("--out", type=Path, default=BENCH / "results" / "gateway.md")
    args = p.parse_args(argv)
    if not shutil.which("wrk"):
        print("wrk not found: apt-get install -y wrk", file=sys.stderr)
        return 2
    targets = [t for t in args.targets.split(",") if t and not (args.skip_litellm and t == "litellm")]
    if "direct" not in targets:
        targets.insert(0, "direct")
    base = BaseTree.open(args.base_tree, args.base_python) if args.base_tree else None
    if base is not None and "veracity_base" not in targets:
        targets.insert(targets.index("veracity") + 1 if "veracity" in targets else len(targets), "veracity_base")
    args.base = base
    conns = [int(c) for c in args.conns.split(",")]
    if args.rt:  # inherited by every process started below
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(args.rt))
        except (PermissionError, OSError) as exc:
            print(f"--rt {args.rt}: cannot set SCHED_FIFO ({exc}); run as root or drop --rt", file=sys.stderr)
            return 2
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = _load()
    workdir = Path(tempfile.mkdtemp(prefix="veracity-bench-"))
    body_file = workdir / "body.json"
    body_file.write_text(json.dumps(REQUEST_BODY))
    low_body_file = workdir / "body_low.json"
    low_body_file.write_text(json.dumps(LOW_RISK_BODY))
    servers: dict[str, Server] = {}
    skipped: dict[str, str] = {}
    runs: list[Run] = []
    served: dict[str, int] = {}
    rss: dict[str, tuple[float, int]] = {}
    try:
        mock = start_mock(workdir)
        servers["mock"] = mock
        endpoints = {"direct": (mock.url + "/v1/chat/completions", "Bearer sk-bench", body_file)}
        if "veracity" in targets:
            v = start_veracity(workdir, mock, args.veracity_config)
            if isinstance(v, str):
                skipped["veracity"] = v
            else:
                servers["veracity"] = v
                endpoints["veracity"] = (v.url + "/v1/chat/completions", "Bearer sk-bench", body_file)
        if base is not None:
            v = start_veracity(workdir, mock, base.config, "veracity_base", policies=base.policies, tree=base.path,
                               python=base.python)
            if isinstance(v, str):
                skipped["veracity_base"] = v
            else:
                servers["veracity_base"] = v
                endpoints["veracity_base"] = (v.url + "/v1/chat/completions", "Bearer sk-bench", body_file)
        if "veracity_default" in targets:
            v = start_veracity(workdir, mock, args.veracity_config, "veracity_default", policies=None)
            if isinstance(v, str):
                skipped["veracity_default"] = v
            else:
                servers["veracity_default"] = v
                endpoints["veracity_default"] = (v.url + "/v1/chat/completions", "Bearer sk-bench", body_file)
        if "veracity_default_low" in targets:
            v = start_veracity(workdir, mock, args.veracity_config, "veracity_default_low", policies=None)
            if isinstance(v, str):
                skipped["veracity_default_low"] = v
            else:
                servers["veracity_default_low"] = v
                endpoints["veracity_default_low"] = (v.url + "/v1/chat/completions", "Bearer sk-bench", low_body_file)
        for fname in ("floor", "floor_heavy", "floor_session"):
            if fname in targets:
                fl = start_floor(workdir, mock, fname)
                if isinstance(fl, str):
                    skipped[fname] = fl
                else:
                    servers[fname] = fl
                    endpoints[fname] = (fl.url + "/v1/chat/completions", "Bearer sk-bench", body_file)
        if "litellm" in targets:
            lt = start_litellm(workdir, mock, args.litellm_bin)
            if isinstance(lt, str):
                skipped["litellm"] = lt
            else:
                servers["litellm"] = lt
                endpoints["litellm"] = (lt.url + "/v1/chat/completions", f"Bearer {LITELLM_MASTER_KEY}", body_file)
        for name in list(endpoints):
            if name not in targets:
                del endpoints[name]
                continue
            problem = check_answer(*endpoints[name])
            if problem:
                skipped[name] = f"wrong answer through the target: {problem}"
                del endpoints[name]
        for c in conns:
            for rep in range(args.repeat):  # interleaved, so a burst of foreign load hits all targets alike
                for name, (url, auth, bfile) in endpoints.items():
                    srv = servers["mock" if name == "direct" else name]
                    run = measure(name, url, c, args.duration, bfile, auth, srv)
                    run.round = rep
                    runs.append(run)
                    served[name] = served.get(name, 0) + run.requests
                    print(f"{name:20s} c={c:<3d} round {rep + 1}: {run.rps:9,.0f} req/s  p50 {run.p50_ms:8.3f} ms  "
                          f"p99 {run.p99_ms:8.3f} ms  cpu {run.cpu_us:6.0f} us/req  errors {run.errors}  "
                          f"load {_load()}", flush=True)
        for name in ("veracity", "veracity_base", "veracity_default", "veracity_default_low", "floor", "floor_heavy",
                     "floor_session", "litellm"):
            if name in endpoints:
                # Top up the Veracity targets so RSS is read after >= --min-requests requests;
                # the reference rows are read after whatever they served.
                while name.startswith("veracity") and served[name] < args.min_requests:
                    # under --rt, 32 busy connections would hold both cores away from everyone else
                    r = wrk(endpoints[name][0], 4 if args.rt else 32, 5, endpoints[name][2], endpoints[name][1])
                    served[name] += r["requests"]
                rss[name] = (servers[name].rss_mb(), served[name])
        rss_mock = servers["mock"].rss_mb()
        print("RSS: " + ", ".join(f"{k} {v[0]:.1f} MiB after {v[1]:,} req" for k, v in rss.items())
              + f"; mock {rss_mock:.1f} MiB")
    finally:
        for srv in servers.values():
            srv.stop()
    text = render(runs, rss, skipped, args, started, load_start)
    if args.out.exists():  # keep the hand-written analysis below the marker across re-runs
        old = args.out.read_text()
        if NOTES_MARKER in old:
            text += "\n" + old[old.index(NOTES_MARKER):]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
