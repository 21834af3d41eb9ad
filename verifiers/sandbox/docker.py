"""Docker backend: one fresh, locked-down container per run (via the ``docker`` SDK).

Container settings (``docker run`` equivalents):

    --network none --memory M --memory-swap M --cpus 1 --pids-limit P --read-only
    --tmpfs /tmp:rw,nosuid,nodev,size=T --cap-drop ALL --security-opt no-new-privileges
    --user 65534:65534 --init --ipc none --log-opt max-size=1m
    (+ rlimits CPU, FSIZE, NOFILE, CORE set by the bootstrap inside)

``--init`` matters: without an init as PID 1, Python as PID 1 ignores SIGTERM (issue #4
measured a ``while True`` container outliving its timeout by minutes). On timeout or output
overflow the container is removed with force (SIGKILL to every process in it), and it is
always removed at the end of the run, so nothing outlives a run. Containers carry the label
``veracity.sandbox=1`` so operators (and ``deploy/ci/dockerd.sh stop``) can find strays.

The engine is the one ``DOCKER_HOST`` names (or ``base_url``); the image is
``VERACITY_SANDBOX_IMAGE`` (default ``veracity-sandbox:latest``; CI builds
``veracity-sandbox:ci`` with ``deploy/sandbox/build-ci-image.sh``). It needs ``python3`` on
``PATH``; numpy, pandas and sympy let smoke runs of data code succeed.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from verifiers.sandbox import Limits, Result, Sandbox, max_concurrency
from verifiers.sandbox._common import SANDBOX_ENV, OutputCap, boot_argv, classify, rlimits

DEFAULT_IMAGE = "veracity-sandbox:latest"
LABEL = "veracity.sandbox"


class DockerSandbox(Sandbox):
    """Sandbox backend using a Docker engine.

    Args:
        limits: default :class:`Limits`.
        image: image name (env ``VERACITY_SANDBOX_IMAGE``, default ``veracity-sandbox:latest``).
        base_url: engine address, e.g. ``unix:///var/run/docker.sock`` (default: ``DOCKER_HOST``
            or the SDK's default socket).
    """

    name = "docker"

    def __init__(self, limits: Limits | None = None, *, image: str | None = None, base_url: str | None = None) -> None:
        super().__init__(limits)
        self.image = image or os.environ.get("VERACITY_SANDBOX_IMAGE") or DEFAULT_IMAGE
        self.base_url = base_url or os.environ.get("DOCKER_HOST") or None
        self._client: Any = None
        self._reason: str | None | bool = False  # False = not probed yet
        self._lock = threading.Lock()

    # -- availability --------------------------------------------------------------------------
    def _api(self) -> Any:
        if self._client is None:
            import docker

            kw: dict[str, Any] = {"timeout": 30, "max_pool_size": max_concurrency() * 2 + 2}
            self._client = docker.DockerClient(base_url=self.base_url, **kw) if self.base_url else docker.from_env(**kw)
        return self._client.api

    def unavailable_reason(self) -> str | None:
        with self._lock:
            if self._reason is False:
                self._reason = self._probe()
            return self._reason  # type: ignore[return-value]

    def _probe(self) -> str | None:
        try:
            import docker  # noqa: F401
        except ImportError:
            return "the 'docker' Python package is not installed"
        try:
            api = self._api()
            api.ping()
        except Exception as exc:  # noqa: BLE001 - any failure means "no engine here"
            return f"Docker engine not reachable ({self.base_url or 'default socket'}): {type(exc).__name__}"
        try:
            api.inspect_image(self.image)
        except Exception:  # noqa: BLE001
            return f"sandbox image {self.image!r} not found in the Docker engine"
        return None

    def close(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # noqa: BLE001
                pass
            self._client = None
            self._reason = False

    # -- run -----------------------------------------------------------------------------------
    def host_config(self, limits: Limits) -> dict:
        """The ``HostConfig`` used for every sandbox container (see module docstring)."""
        import docker

        mem = f"{limits.memory_mb}m"
        return self._api().create_host_config(
            network_mode="none",
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=1_000_000_000,
            pids_limit=limits.pids,
            read_only=True,
            tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_mb}m,mode=1777"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            init=True,
            ipc_mode="none",
            log_config=docker.types.LogConfig(type="json-file", config={"max-size": "1m", "max-file": "1"}),
        )

    def _run(self, code: str, stdin: str, limits: Limits) -> Result:
        api = self._api()
        cmd = boot_argv("python3", code, stdin, rlimits(limits, address_space=False, nproc=False))
        cap = OutputCap(limits.output_bytes)
        cid = api.create_container(
            self.image, command=cmd, user="65534:65534", working_dir="/tmp",
            environment=dict(SANDBOX_ENV), network_disabled=True, labels={LABEL: "1"},
            host_config=self.host_config(limits), stdin_open=False, tty=False,
        )["Id"]
        timed_out = False
        exit_code: int | None = None
        oom = False
        reader: threading.Thread | None = None
        t0 = time.monotonic()
        try:
            stream = api.attach(cid, stdout=True, stderr=True, stream=True, demux=True, logs=True)

            done = threading.Event()

            def pump() -> None:
                # Signals at EOF/broken stream or at the output cap, but keeps draining after the
                # cap: dockerd blocks (kill included) while an attached client stops reading.
                try:
                    for out, err in stream:
                        if out:
                            cap.add(out, "stdout")
                        if err:
                            cap.add(err, "stderr")
                        if cap.exceeded:
                            done.set()
                except Exception:  # noqa: BLE001 - the stream breaks when we kill the container
                    pass
                finally:
                    done.set()

            reader = threading.Thread(target=pump, daemon=True, name="veracity-docker-attach")
            reader.start()
            api.start(cid)
            t0 = time.monotonic()
            deadline = t0 + limits.timeout_s
            if not done.wait(limits.timeout_s):
                timed_out = True
            if timed_out or cap.exceeded:
                api.kill(cid)
            else:
                left = max(1.0, deadline - time.monotonic())
                exit_code = int(api.wait(cid, timeout=left)["StatusCode"])
                oom = bool(api.inspect_container(cid)["State"].get("OOMKilled"))
        except Exception as exc:  # noqa: BLE001
            if not (timed_out or cap.exceeded):
                import requests

                if isinstance(exc, requests.exceptions.ReadTimeout):
                    timed_out = True
                else:
                    raise
        finally:
            duration = time.monotonic() - t0
            try:
                api.remove_container(cid, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
            if reader is not None:
                reader.join(2.0)
        out, err = cap.text()
        killed_by = classify(exit_code, err, timed_out=timed_out, output=cap.exceeded, oom=oom)
        return Result(exit_code=exit_code, stdout=out, stderr=err, duration_s=duration,
                      killed_by=killed_by, truncated=cap.exceeded)  # type: ignore[arg-type]
