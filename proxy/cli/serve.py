"""``veracity serve``: resolve the config, pick the mode, and run uvicorn.

Modes (the first log line says which):

* ``file``: a config file (``--config``, ``$VERACITY_CONFIG`` or ``./veracity.yaml``).
* ``env``: no file, ``OPENAI_API_KEY`` set -> every model goes to the OpenAI API with that key
  (or to the OpenAI-compatible server ``OPENAI_BASE_URL`` names, as with the ``openai`` SDK).
* ``demo``: neither -> the built-in scripted upstream (:mod:`proxy.upstreams.mock` with
  ``proxy/demo_script.yaml``) runs in a thread of this process and serves every model.

Workers: ``--workers N > 1`` runs N uvicorn processes; Prometheus metrics then use
prometheus-client's multiprocess mode in ``$PROMETHEUS_MULTIPROC_DIR`` (a fresh temporary
directory unless set), so ``/metrics`` on any worker reports the totals. The environment must
be set before :mod:`proxy.observability.metrics` is imported, which is why this module imports the app lazily.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any


def serve(*, config_path: str | None, host: str = "127.0.0.1", port: int = 8080, workers: int = 1,
          log_level: str = "info") -> int:
    """Run the gateway until interrupted. Returns the exit status (2: bad config)."""
    from proxy.config import ConfigError, resolve_config
    from proxy.observability.log import configure, get_logger

    configure(log_level)
    log = get_logger("veracity")
    path = config_path or os.environ.get("VERACITY_CONFIG")
    if not path and Path("veracity.yaml").is_file():
        path = "veracity.yaml"
    try:
        cfg = resolve_config(path)
    except ConfigError as exc:
        print(f"veracity: invalid configuration:\n{exc}", file=sys.stderr)
        return 2
    if workers > 1:  # uvicorn's supervisor exits 0 when workers fail to start: check here first
        from proxy.runtime import check_stores

        try:
            check_stores(cfg.verification)
        except Exception as exc:  # noqa: BLE001 - any failure to open them stops start-up
            print(f"veracity: invalid configuration: Veracity is misconfigured: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return 2
    if log_level.lower() != "info":  # an explicit --log-level wins over the config's logging.level
        os.environ["VERACITY_LOG_LEVEL"] = log_level
    if path:
        os.environ["VERACITY_CONFIG"] = str(Path(path).resolve())
    else:
        os.environ.pop("VERACITY_CONFIG", None)

    mock = None
    if cfg.mode == "demo":
        from proxy.upstreams.mock import DEMO_SCRIPT, MockUpstream

        mock = MockUpstream(DEMO_SCRIPT, mode="thread").start()
        os.environ["VERACITY_DEMO_UPSTREAM_URL"] = mock.base_url
        log.warning("veracity starting in DEMO MODE: no config file and no OPENAI_API_KEY, so answers come "
                 "from the built-in scripted upstream (proxy/demo_script.yaml)",
                 mode="demo", upstream=mock.base_url, listen=f"http://{host}:{port}/v1")
    else:
        log.info(f"veracity starting with {_source(cfg)}",
                 mode=cfg.mode, upstreams={u.name: _public_url(u.base_url) for u in cfg.upstreams},
                 auth="virtual_keys" if cfg.keys else "pass_through", listen=f"http://{host}:{port}/v1")
        if not cfg.keys:
            keyed = [u.name for u in cfg.upstreams if u.api_key]
            if keyed:
                log.warning("no virtual keys configured: every client reaching the gateway uses the "
                            "upstream keys of " + ", ".join(keyed), auth="pass_through")

    # one line when no sandbox with numpy/pandas/sympy is available; in a thread: start-up stays
    # fast. Only when a policy checks code: the probe imports the Docker SDK (~7 MiB, kept)
    import threading

    from proxy.config import policies_dir

    def default_sandbox() -> tuple[str, dict]:
        from proxy.policy import PolicyStore
        sb = PolicyStore(policies_dir(cfg)).get("default").verifiers.code.sandbox
        return sb.backend, dict(sb.limits)

    def sandbox_note() -> None:
        from proxy.policy import PolicyStore
        from verifiers.sandbox.runtime import log_startup_note

        try:
            store = PolicyStore(policies_dir(cfg))
            if not any(store.get(n).verifiers.code.enabled for n in {"default", *store.names()}):
                return
        except Exception:  # noqa: BLE001 - log_startup_note reads the policy again and says what failed
            pass
        log_startup_note(log, default_sandbox)

    threading.Thread(target=sandbox_note, daemon=True, name="veracity-sandbox-check").start()

    tmp_metrics = None
    if workers > 1:
        mdir = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not mdir:
            mdir = tmp_metrics = tempfile.mkdtemp(prefix="veracity-metrics-")
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = mdir
        else:
            Path(mdir).mkdir(parents=True, exist_ok=True)
            for f in Path(mdir).glob("*.db"):
                f.unlink()
    import uvicorn

    from uvicorn.config import STARTUP_FAILURE

    try:
        uvicorn.run("proxy.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                    loop="uvloop", http="proxy._asgi.inbound:BoundedHttpToolsProtocol", access_log=False, log_config=None,
                    log_level=log_level, server_header=False, proxy_headers=False,
                    timeout_graceful_shutdown=5)
    except SystemExit as exc:  # uvicorn exits with STARTUP_FAILURE when the lifespan fails
        if exc.code == STARTUP_FAILURE:
            print("veracity: start-up failed (see the startup_failed log line above)", file=sys.stderr)
            return 2
        raise
    finally:
        if mock is not None:
            mock.stop()
        if tmp_metrics:
            shutil.rmtree(tmp_metrics, ignore_errors=True)
    return 0


def _source(cfg: Any) -> str:
    """What the start-up line says the config came from: the file, or (no file) the
    ``OPENAI_API_KEY`` upstream and where it points: the OpenAI API, or the server that
    ``OPENAI_BASE_URL`` names (:func:`proxy.config.default_config` honours it, as the
    ``openai`` SDK does)."""
    if cfg.mode == "file":
        return f"config {cfg.source}"
    from proxy.config import OPENAI_BASE_URL

    url = cfg.upstreams[0].base_url if cfg.upstreams else None
    if not url or url.rstrip("/") == OPENAI_BASE_URL:
        return "OPENAI_API_KEY (OpenAI API)"
    return f"OPENAI_API_KEY and OPENAI_BASE_URL ({_public_url(url)})"


def _public_url(url: str | None) -> str | None:
    """``url`` without user info, query or fragment (they may carry credentials), for the
    start-up log line; ``None`` for a litellm upstream (no base URL)."""
    if not url:
        return None
    from urllib.parse import urlsplit, urlunsplit

    p = urlsplit(url)
    host = p.hostname or ""
    host = (f"[{host}]" if ":" in host else host) + (f":{p.port}" if p.port else "")
    return urlunsplit((p.scheme, host, p.path, "", ""))
