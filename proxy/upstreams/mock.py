"""A scripted, OpenAI-compatible upstream: the model the tests, the benchmarks and the demo talk to.

Like pydantic-ai's ``TestModel``, this is a first-class part of the library, not a test helper:
``veracity mock-upstream --script FILE`` serves it on 127.0.0.1, and :class:`MockUpstream`
runs it from Python (a thread or a subprocess) for tests and demos.

Endpoints (raw ASGI on uvicorn with uvloop + httptools, so its per-request cost stays tiny;
it is also the load benchmark's upstream):

* ``POST /v1/chat/completions`` -- stream and non-stream, answered from the script;
* ``POST /v1/responses`` -- the Responses API (stream and not), answered from the same script
  (:mod:`proxy.upstreams.mock_responses`);
* ``GET /v1/models``, ``GET /v1/models/{id}``;
* ``POST /v1/embeddings`` (deterministic vectors; ``encoding_format: base64`` honoured) and
  ``POST /v1/completions`` (legacy text completions, stream and not) -- canned answers, to
  test the gateway's pass-through;
* introspection: ``GET /_mock/requests`` (every request received: method, path, headers,
  JSON body, matched rule, and events such as ``client_disconnected``), ``DELETE
  /_mock/requests`` (forget them and restart every rule's ``replies``), ``PUT /_mock/script``
  (replace the script), ``GET /_mock/healthz``.

The script (YAML/JSON file, a dict, or a :class:`Script`) is an ordered list of rules; the
first rule whose ``match`` fits the request answers it. See :class:`Match` and :class:`Reply`
for every field, and docs/mock-upstream.md for an example. A script that does not validate
raises :class:`ScriptError` naming the field (``rules.0.reply.finish_reason: ...``).

Wire shapes follow OpenAI's API reference ("The chat completion object", "The chat
completion chunk object", "Create embeddings", "Error codes").

Its parts, a private module each: the script (:mod:`proxy.upstreams._mock_script`), the reply
bodies (:mod:`proxy.upstreams._mock_bodies`), sending them (:mod:`proxy.upstreams._mock_send`),
stream framing (:mod:`proxy.upstreams._mock_stream`), the ASGI app
(:mod:`proxy.upstreams._mock_app`); this module runs it (:class:`MockUpstream`, :func:`main`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from proxy.upstreams._mock_app import MockApp
from proxy.upstreams._mock_bodies import build_completion  # importable here as before (not in __all__)
from proxy.upstreams._mock_script import (  # Fault: importable here as before (not in __all__)
    ChoiceSpec,
    Fault,
    Match,
    Reply,
    Rule,
    Script,
    ScriptError,
    StreamSpec,
    ToolCallSpec,
    load_script,
)
from proxy.upstreams._mock_send import _DROP_FILTER


__all__ = [
    "Match",
    "ToolCallSpec",
    "ChoiceSpec",
    "StreamSpec",
    "Reply",
    "Rule",
    "Script",
    "ScriptError",
    "load_script",
    "MockApp",
    "MockUpstream",
    "DEMO_SCRIPT",
    "main",
]


#: The demo script shipped with the package (used by ``veracity serve`` in demo mode).
DEMO_SCRIPT = Path(__file__).resolve().parents[1] / "demo_script.yaml"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: accepted sockets inherit it, and asyncio's loop sets TCP_NODELAY
    # only on sockets whose proto says TCP (base_events._set_nodelay); with 0 (uvloop sets it
    # anyway) the thread-mode mock sent a body written after its head ~40 ms late on a reused
    # connection (Nagle waiting for the client's delayed ACK)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _url(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _uvicorn_server(app: MockApp, *, in_thread: bool) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app,
        loop="asyncio" if in_thread else "auto",  # uvloop in its own process; plain in a thread
        http="httptools",
        lifespan="on",
        access_log=False,
        log_level="warning",
        server_header=False,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=30,
        backlog=2048,
    )
    logging.getLogger("uvicorn.error").addFilter(_DROP_FILTER)  # once: addFilter ignores repeats
    server = uvicorn.Server(config)
    if in_thread:
        server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    return server


class MockUpstream:
    """Run the mock upstream for tests and demos: ``with MockUpstream(script) as mock: ...``.

    Args:
        script: a :class:`Script`, dict, or YAML/JSON path (``None``: echo everything).
        host: interface to bind (loopback by default); the port is chosen by the OS.
        mode: ``"thread"`` (uvicorn in a daemon thread of this process; starts in ~10 ms) or
            ``"subprocess"`` (``python -m proxy.upstreams.mock``; its own GIL and uvloop, as
            the benchmark wants).
        startup_timeout: seconds to wait for the server; ``RuntimeError`` past it.

    Attributes: ``url`` (``http://127.0.0.1:PORT``), ``base_url`` (``url + "/v1"``, what an
    ``openai`` client takes). ``requests()`` returns the recorded requests, ``reset()``
    forgets them and restarts every rule's ``replies``, ``set_script()`` swaps the script.
    Stopping is clean: the thread is joined / the process terminated and reaped.
    """

    def __init__(self, script: Script | dict[str, Any] | str | os.PathLike[str] | None = None, *,
                 host: str = "127.0.0.1", mode: Literal["thread", "subprocess"] = "thread",
                 startup_timeout: float = 20.0) -> None:
        self._script = load_script(script)  # validate early, in the caller's process
        self.host = host
        self.mode = mode
        self.startup_timeout = startup_timeout
        self.url = ""
        self.app: MockApp | None = None
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[str] | None = None
        self._tmp: str | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ending in ``/v1``."""
        return self.url + "/v1"

    def start(self) -> MockUpstream:
        """Start serving; returns ``self``."""
        if self.mode == "thread":
            self._start_thread()
        elif self.mode == "subprocess":
            self._start_subprocess()
        else:
            raise ValueError(f"mode must be 'thread' or 'subprocess', not {self.mode!r}")
        return self

    def _start_thread(self) -> None:
        self.app = MockApp(self._script)
        sock = _bind(self.host, 0)
        self.url = _url(sock)
        self._server = _uvicorn_server(self.app, in_thread=True)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        name="veracity-mock-upstream", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + self.startup_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                sock.close()
                raise RuntimeError("mock upstream thread did not start")
            time.sleep(0.005)

    def _start_subprocess(self) -> None:
        fd, self._tmp = tempfile.mkstemp(prefix="veracity-mock-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(self._script.model_dump(mode="json", by_alias=True), fh)
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "proxy.upstreams.mock", "--script", self._tmp, "--host", self.host, "--port", "0"],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env,
        )
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(self._proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(self.startup_timeout)
        first = line[0].strip() if line else ""
        if not first.startswith("listening "):
            self.stop()
            raise RuntimeError(f"mock upstream subprocess did not start (first line: {first!r})")
        self.url = first.split(" ", 1)[1]

    def stop(self) -> None:
        """Stop the server and release everything (idempotent)."""
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            self._server = None
            self._thread = None
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait(5)
            if self._proc.stdout:
                self._proc.stdout.close()
            self._proc = None
        if self._tmp:
            Path(self._tmp).unlink(missing_ok=True)
            self._tmp = None

    def __enter__(self) -> MockUpstream:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- introspection (over HTTP, so both modes behave alike)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        with httpx.Client(trust_env=False, timeout=10) as client:
            resp = client.request(method, self.url + path, json=body)
        if resp.status_code >= 400:
            raise ValueError(resp.json().get("error", {}).get("message", resp.text))
        return resp.json()

    def requests(self) -> list[dict[str, Any]]:
        """Recorded requests, oldest first: ``method``, ``path``, ``query``, ``headers``
        (lower-case names), ``body`` (parsed JSON), ``rule`` (name or ``rules.N`` or
        ``default``), ``reply`` (index in ``replies``), ``events`` (e.g. ``{"event":
        "client_disconnected", "phase": "mid_stream", "frames_sent": 3}``)."""
        return self._call("GET", "/_mock/requests")["data"]

    def reset(self) -> None:
        """Forget recorded requests and restart every rule's ``replies``."""
        self._call("DELETE", "/_mock/requests")

    def set_script(self, script: Script | dict[str, Any] | str | os.PathLike[str]) -> None:
        """Replace the running server's script (validated here first; raises ScriptError)."""
        self._call("PUT", "/_mock/script", load_script(script).model_dump(mode="json", by_alias=True))


def main(argv: Sequence[str] | None = None) -> int:
    """``veracity mock-upstream --script FILE [--host 127.0.0.1] [--port N] [--no-record]``.

    Prints ``listening http://HOST:PORT`` as its first stdout line once the socket is bound
    (``--port 0`` lets the OS choose), then serves until SIGINT/SIGTERM. Without ``--script``
    the shipped demo script answers. Exit status 2 on a bad script (message names the field)."""
    parser = argparse.ArgumentParser(prog="veracity mock-upstream", description="Scripted OpenAI-compatible upstream.")
    parser.add_argument("--script", help="YAML/JSON script (default: the demo script)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001, help="0: any free port")
    parser.add_argument("--no-record", action="store_true", help="do not keep requests (benchmarks)")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script or DEMO_SCRIPT)
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.no_record:
        script = script.model_copy(update={"record_requests": False})
    try:
        sock = _bind(args.host, args.port)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"listening {_url(sock)}", flush=True)
    server = _uvicorn_server(MockApp(script), in_thread=False)
    server.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
