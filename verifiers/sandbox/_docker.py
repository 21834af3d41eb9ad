"""Docker backend: one fresh, locked-down container per run (via the ``docker`` SDK).

Container settings (``docker run`` equivalents):

    --network none --memory M --memory-swap M --cpus 1 --pids-limit P --read-only
    --tmpfs /tmp:rw,nosuid,nodev,size=T --cap-drop ALL --security-opt no-new-privileges
    --user 65534:65534 --init --ipc none --log-opt max-size=1m
    (+ rlimits CPU, FSIZE, NOFILE, CORE set by the bootstrap inside)

``--init`` matters: without an init as PID 1, Python as PID 1 ignores SIGTERM (a ``while True``
container was measured outliving its timeout by minutes). On timeout or output
overflow the container is removed with force (SIGKILL to every process in it), and it is
always removed at the end of the run, so nothing outlives a run. Containers carry the label
``veracity.sandbox=1`` so operators (and ``deploy/ci/dockerd.sh stop``) can find strays.

Warm pool (``warm=N`` or env ``VERACITY_SANDBOX_WARM``, default 0): N containers are started
ahead of time, idle (PID 1 = init, a paused ``python3``); a run ``exec``s the program in one of
them as uid 65534 and the container is then removed, never reused, so one run's leftovers
(detached children, files in /tmp) cannot meet the next. Only runs with the sandbox's default
limits use the pool (cgroup limits are fixed at creation); others take the cold path. The pool
refills in a background thread.

The engine is the one ``DOCKER_HOST`` names (or ``base_url``); the image is
``VERACITY_SANDBOX_IMAGE`` (default ``veracity-sandbox:latest``; CI builds
``veracity-sandbox:ci`` with ``deploy/sandbox/build-ci-image.sh``). It needs ``python3`` on
``PATH``; numpy, pandas and sympy let smoke runs of data code succeed.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
import weakref
from typing import Any

from verifiers.sandbox import CANCEL_POLL_S, Limits, Result, Sandbox, max_concurrency
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

    def __init__(self, limits: Limits | None = None, *, image: str | None = None, base_url: str | None = None,
                 warm: int | None = None) -> None:
        super().__init__(limits)
        self.image = image or os.environ.get("VERACITY_SANDBOX_IMAGE") or DEFAULT_IMAGE
        self.base_url = base_url or os.environ.get("DOCKER_HOST") or None
        self.warm = int(os.environ.get("VERACITY_SANDBOX_WARM", "0") or 0) if warm is None else int(warm)
        self._client: Any = None
        self._reason: str | None | bool = False  # False = not probed yet
        self._seccomp = "no seccomp filter (engine not probed)"
        self._lock = threading.Lock()
        self._idle: "queue.Queue[str]" = queue.Queue()
        self._idle_ids: set[str] = set()
        self._refill = threading.Event()
        self._closed = threading.Event()
        self._filler: threading.Thread | None = None

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
        import importlib.util

        if importlib.util.find_spec("docker") is None:
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
        try:
            opts = api.info().get("SecurityOptions") or []
        except Exception:  # noqa: BLE001
            opts = []
        prof = next((o for o in opts if o.startswith("name=seccomp")), None)
        if prof is None:
            self._seccomp = "no seccomp filter (the Docker engine reports no seccomp support)"
        elif "profile=unconfined" in prof:
            self._seccomp = "no seccomp filter (the Docker engine runs containers unconfined)"
        else:
            self._seccomp = f"Docker engine profile ({prof.split('profile=', 1)[-1]}; allow list)"
        return None

    def isolation(self) -> dict[str, str]:
        """``{"seccomp": ..., "memory": ...}`` (see :meth:`Sandbox.isolation`); the seccomp
        entry comes from the engine's ``SecurityOptions`` (``docker info``)."""
        if self.unavailable_reason() is not None:
            return {"seccomp": "no seccomp filter (engine not reachable)", "memory": "none (engine not reachable)"}
        return {"seccomp": self._seccomp, "memory": "cgroup memory + swap limit (OOM kill)"}

    def close(self) -> None:
        self._closed.set()
        self._refill.set()
        if self._filler is not None:
            self._filler.join(10)
            self._filler = None
        while True:
            try:
                cid = self._idle.get_nowait()
            except queue.Empty:
                break
            self._remove(cid)
        self._idle_ids.clear()
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

    # -- warm pool -----------------------------------------------------------------------------
    @property
    def idle_containers(self) -> set[str]:
        """Ids of the pre-started containers waiting for a run (empty without a pool)."""
        return set(self._idle_ids)

    def _remove(self, cid: str) -> None:
        try:
            self._api().remove_container(cid, force=True)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def _start_idle(self) -> str:
        api = self._api()
        cid = api.create_container(
            self.image, command=["python3", "-I", "-c", "import signal; signal.pause()"], user="65534:65534",
            working_dir="/tmp", environment=dict(SANDBOX_ENV), network_disabled=True,
            labels={LABEL: "warm"}, host_config=self.host_config(self.limits), stdin_open=False, tty=False,
        )["Id"]
        try:
            api.start(cid)
        except Exception:
            self._remove(cid)
            raise
        return cid

    def _fill(self) -> None:
        while not self._closed.is_set():
            while self._idle.qsize() < self.warm and not self._closed.is_set():
                try:
                    cid = self._start_idle()
                except Exception:  # noqa: BLE001 - engine trouble: retry later, runs go cold
                    self._closed.wait(1.0)
                    break
                self._idle_ids.add(cid)
                self._idle.put(cid)
            self._refill.wait(5.0)
            self._refill.clear()

    def _take_warm(self, limits: Limits) -> str | None:
        if self.warm <= 0 or limits != self.limits or self._closed.is_set():
            return None
        self._take_warm_start()
        try:
            cid = self._idle.get_nowait()
        except queue.Empty:
            self._refill.set()
            return None
        self._idle_ids.discard(cid)
        self._refill.set()
        return cid

    def prewarm(self, timeout: float = 30.0) -> int:
        """Start the pool now and wait until it is full (or ``timeout`` s). Returns its size
        (0 when the engine or image is unavailable)."""
        if self.unavailable_reason() is not None:
            return 0
        self._take_warm_start()
        deadline = time.monotonic() + timeout
        while self._idle.qsize() < self.warm and time.monotonic() < deadline:
            time.sleep(0.05)
        return self._idle.qsize()

    def _take_warm_start(self) -> None:
        if self.warm > 0 and self._filler is None:
            with self._lock:
                if self._filler is None:
                    self._filler = threading.Thread(target=self._fill, daemon=True, name="veracity-docker-warm")
                    self._filler.start()
                    _POOLS.add(self)

    def _run(self, code: str, stdin: str, limits: Limits, cancel: threading.Event | None = None) -> Result:
        cmd = boot_argv("python3", code, stdin, rlimits(limits, address_space=False, nproc=False))
        cancel = cancel or threading.Event()
        warm = self._take_warm(limits)
        if warm is not None:
            try:
                return self._run_exec(warm, cmd, limits, cancel)
            except _WarmGone:
                pass  # the idle container died (engine restart?): run cold instead
        return self._run_cold(cmd, limits, cancel)

    def _run_exec(self, cid: str, cmd: list[str], limits: Limits, cancel: threading.Event) -> Result:
        """Run in a pre-started container via exec; the container is removed afterwards."""
        api = self._api()
        cap = OutputCap(limits.output_bytes)
        timed_out = False
        exit_code: int | None = None
        oom_kills: int | None = None
        cancelled = False
        done = threading.Event()
        reader: threading.Thread | None = None
        t0 = time.monotonic()
        try:
            eid = api.exec_create(cid, cmd, stdout=True, stderr=True, user="65534:65534", workdir="/tmp",
                                  environment=dict(SANDBOX_ENV))["Id"]
        except Exception as exc:  # noqa: BLE001
            self._remove(cid)
            raise _WarmGone() from exc
        try:
            stream = api.exec_start(eid, stream=True, demux=True)

            reader = _start_pump(stream, cap, done, "veracity-docker-exec")
            ended = _wait(done, cancel, limits.timeout_s)
            timed_out, cancelled = ended == "timeout", ended == "cancelled"
            if not (timed_out or cancelled or cap.exceeded):
                reader.join(2.0)
                exit_code = api.exec_inspect(eid).get("ExitCode")
                if exit_code == 137:  # SIGKILL: the cgroup OOM killer, or the CPU rlimit
                    oom_kills = self._oom_kills(cid)
        finally:
            duration = time.monotonic() - t0
            if timed_out or cap.exceeded or exit_code is None:
                self._remove(cid)  # kill now: the program is still running
            else:
                # The program has exited; detached children (if any) die with the container
                # a moment later. Removing off the critical path saves ~100 ms per run.
                threading.Thread(target=self._remove, args=(cid,), daemon=True).start()
            if reader is not None:
                reader.join(2.0)
        out, err = cap.text()
        # The engine only flags OOM when PID 1 dies, so ask the container's memory cgroup. If
        # that fails: one CPU of quota means CPU seconds <= wall seconds, so a SIGKILL before
        # `cpu_s` wall seconds cannot be the CPU rlimit.
        oom = exit_code == 137 and (oom_kills > 0 if oom_kills is not None else duration < limits.cpu_s)
        # One CPU of quota: CPU seconds <= wall seconds, so `duration` bounds the CPU used and
        # a SIGKILL well before the CPU limit is the program's own (classify()).
        killed_by = "cancelled" if cancelled else classify(
            exit_code, err, timed_out=timed_out, output=cap.exceeded, oom=oom,
            cpu_s_max=duration, cpu_s=limits.cpu_s)
        return Result(exit_code=exit_code, stdout=out, stderr=err, duration_s=duration,
                      killed_by=killed_by, truncated=cap.exceeded,  # type: ignore[arg-type]
                      extra={"warm": True, "container": cid, **self.isolation()})

    _OOM_PROBE = (
        "import re\n"
        "for p in ('/sys/fs/cgroup/memory.events', '/sys/fs/cgroup/memory/memory.oom_control'):\n"
        "    try:\n"
        "        m = re.search(r'oom_kill (\\d+)', open(p).read())\n"
        "    except OSError:\n"
        "        continue\n"
        "    if m:\n"
        "        print(m.group(1)); break\n"
    )

    def _oom_kills(self, cid: str) -> int | None:
        """OOM kills recorded by the container's memory cgroup (v2 ``memory.events`` or v1
        ``memory.oom_control``), or None when unreadable."""
        try:
            api = self._api()
            eid = api.exec_create(cid, ["python3", "-I", "-c", self._OOM_PROBE], user="65534:65534")["Id"]
            out = api.exec_start(eid)
            return int(out.decode().strip())
        except Exception:  # noqa: BLE001
            return None

    def _run_cold(self, cmd: list[str], limits: Limits, cancel: threading.Event) -> Result:
        api = self._api()
        cap = OutputCap(limits.output_bytes)
        cid = api.create_container(
            self.image, command=cmd, user="65534:65534", working_dir="/tmp",
            environment=dict(SANDBOX_ENV), network_disabled=True, labels={LABEL: "1"},
            host_config=self.host_config(limits), stdin_open=False, tty=False,
        )["Id"]
        timed_out = cancelled = False
        exit_code: int | None = None
        oom = False
        reader: threading.Thread | None = None
        t0 = time.monotonic()
        try:
            stream = api.attach(cid, stdout=True, stderr=True, stream=True, demux=True, logs=True)

            done = threading.Event()

            reader = _start_pump(stream, cap, done, "veracity-docker-attach")
            api.start(cid)
            t0 = time.monotonic()
            deadline = t0 + limits.timeout_s
            ended = _wait(done, cancel, limits.timeout_s)
            timed_out, cancelled = ended == "timeout", ended == "cancelled"
            if timed_out or cancelled or cap.exceeded:
                api.kill(cid)
            else:
                left = max(1.0, deadline - time.monotonic())
                exit_code = int(api.wait(cid, timeout=left)["StatusCode"])
                oom = bool(api.inspect_container(cid)["State"].get("OOMKilled"))
        except Exception as exc:  # noqa: BLE001
            if not (timed_out or cancelled or cap.exceeded):
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
        # State.OOMKilled for memory; one CPU of quota bounds CPU seconds by wall seconds.
        killed_by = "cancelled" if cancelled else classify(
            exit_code, err, timed_out=timed_out, output=cap.exceeded, oom=oom,
            cpu_s_max=duration, cpu_s=limits.cpu_s)
        return Result(exit_code=exit_code, stdout=out, stderr=err, duration_s=duration,
                      killed_by=killed_by, truncated=cap.exceeded,  # type: ignore[arg-type]
                      extra={"container": cid, **self.isolation()})


class _WarmGone(Exception):
    """A pooled container could not take the exec; the run falls back to a cold container."""


_POOLS: "weakref.WeakSet[DockerSandbox]" = weakref.WeakSet()


@atexit.register
def _close_pools() -> None:
    """Remove idle warm containers when the process exits."""
    for box in list(_POOLS):
        try:
            box.close()
        except Exception:  # noqa: BLE001
            pass


def _wait(done: threading.Event, cancel: threading.Event, timeout: float) -> str:
    """Wait for the output stream's end: ``"done"``, ``"timeout"`` after ``timeout`` s, or
    ``"cancelled"`` as soon as ``cancel`` is set (looked at every ``CANCEL_POLL_S``)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return "timeout"
        if done.wait(min(left, CANCEL_POLL_S)):
            return "done"
        if cancel.is_set():
            return "cancelled"


def _start_pump(stream: Any, cap: Any, done: threading.Event, name: str) -> threading.Thread:
    """Start a daemon thread that copies a demuxed docker stream (``(stdout, stderr)`` byte
    pairs) into ``cap`` and sets ``done`` at EOF, on a broken stream (we kill the container) or
    when the output cap is exceeded. It keeps draining after the cap: dockerd blocks (kill
    included) while an attached client stops reading."""

    def pump() -> None:
        try:
            for out, err in stream:
                if out:
                    cap.add(out, "stdout")
                if err:
                    cap.add(err, "stderr")
                if cap.exceeded:
                    done.set()
        except Exception:  # noqa: BLE001 - the stream breaks when the container is killed
            pass
        finally:
            done.set()

    reader = threading.Thread(target=pump, daemon=True, name=name)
    reader.start()
    return reader
