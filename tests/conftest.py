"""Shared fixtures: the scripted upstream (``proxy.upstreams.mock``) and the real gateway
process (``python -m proxy serve`` on a port the OS picks), both on 127.0.0.1.

``gateway_factory(config_dict, workers=1)`` writes the config to a temp file, starts the
server, waits for ``/readyz`` and returns a :class:`Gateway` (``base_url``, ``url``, ``log()``
with everything the process printed). Processes are stopped at the end of the test module.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fixtures.polling import stop_process

ROOT = Path(__file__).resolve().parent.parent
_RUNNING = re.compile(r"Uvicorn running on http://[\d.]+:(\d+)")

# litellm (the `provider: litellm` upstream, the price-table test) fetches its model price map
# from GitHub at import, with retries: no test may touch the internet, and on a machine without
# it the retries cost seconds in every process that imports litellm (gateways inherit this).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class Gateway:
    """A running ``veracity serve`` subprocess."""

    def __init__(self, config: dict[str, Any] | None, *, workers: int = 1, env: dict[str, str] | None = None,
                 args: list[str] | None = None) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="veracity-gw-")
        self.log_path = Path(self._dir.name) / "gateway.log"
        cmd = [sys.executable, "-m", "proxy", "serve", "--host", "127.0.0.1", "--port", "0",
               "--workers", str(workers), *(args or [])]
        if config is not None:
            cfg_path = Path(self._dir.name) / "veracity.yaml"
            cfg_path.write_text(yaml.safe_dump(config))
            cmd += ["--config", str(cfg_path)]
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("OPENAI_API_KEY", "VERACITY_CONFIG", "PROMETHEUS_MULTIPROC_DIR")}
        full_env["PYTHONPATH"] = str(ROOT)
        full_env.update(env or {})
        self._logf = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=self._dir.name, env=full_env, stdout=self._logf,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.port = self._wait_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.base_url = self.url + "/v1"
        self._wait_ready()

    def _wait_port(self, timeout: float = 240.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = _RUNNING.search(self.log())
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"gateway did not start:\n{self.log()}")

    def _wait_ready(self, timeout: float = 120.0) -> None:
        # generous: with --workers N the port is bound before the workers import the app and
        # warm the verifiers up, which takes tens of seconds on a loaded CI machine
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=5, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"gateway exited with {self.proc.returncode}:\n{self.log()}")
            time.sleep(0.05)
        self.stop()  # the caller never gets this Gateway to clean up: do not leave the process running
        raise RuntimeError(f"gateway not ready:\n{self.log()}")

    def wait_workers(self, n: int, timeout: float = 120.0) -> None:
        """Block until ``n`` worker processes finished their start-up (``--workers n``:
        ``/readyz`` answers as soon as the first one is up)."""
        deadline = time.monotonic() + timeout
        while self.log().count("Application startup complete.") < n:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{n} workers did not start:\n{self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        """Everything the gateway process printed so far (stdout + stderr)."""
        return self.log_path.read_text(errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines, parsed (non-JSON lines skipped)."""
        import json

        out = []
        for line in self.log().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def metrics(self) -> str:
        return httpx.get(self.url + "/metrics", timeout=5, trust_env=False).text

    def stop(self) -> None:
        stop_process(self.proc)
        self._logf.close()

    def cleanup(self) -> None:
        self.stop()
        self._dir.cleanup()


@pytest.fixture(scope="module")
def gateway_factory() -> Iterator[Any]:
    """``make(config_dict | None, workers=1, env=None) -> Gateway``; all stopped at module end."""
    started: list[Gateway] = []

    def make(config: dict[str, Any] | None, **kw: Any) -> Gateway:
        gw = Gateway(config, **kw)
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.cleanup()


# --------------------------------------------------------------------------- CI: no silent skips

_REAL_COMPONENT_MARKERS = ("docker", "bwrap", "redis", "cases", "prometheus", "haproxy", "llama", "node")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Under ``VERACITY_CI=1`` (set by ``.ci/run``, which starts dockerd, Redis and provides the
    bubblewrap, prometheus and haproxy packages, the case files, the llama-cpp-python server and
    openai-node) a test marked ``docker``/``bwrap``/``redis``/``cases``/``prometheus``/``haproxy``/``llama``/``node``
    that skips is turned into a failure: in CI a missing real component is a broken CI, not a pass.
    """
    outcome = yield
    rep = outcome.get_result()
    if (rep.skipped and os.environ.get("VERACITY_CI") == "1"
            and any(item.get_closest_marker(m) for m in _REAL_COMPONENT_MARKERS)
            and not hasattr(rep, "wasxfail")):
        rep.outcome = "failed"
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.longrepr = f"skipped in CI, where every real component must be present: {reason}"
