"""Veracity's gateway: an OpenAI-compatible proxy that verifies answers with :mod:`verifiers`.

What an application embedding the gateway uses::

    import proxy

    cfg = proxy.load_config("veracity.yaml")      # or proxy.parse_config(text), proxy.default_config()
    app = proxy.create_app(cfg)                   # an ASGI app: uvicorn.run(app), or mount it
    # app.state.gw is the running proxy.Gateway (upstreams, runtime, stores), opened by the
    # app's lifespan and closed with it

The command line is :func:`main` (``veracity serve|eval|cases|verify|review``). Everything else
in the subpackages is the gateway's own machinery (see each subpackage's ``__all__``): names
there may change between releases. The names below are imported on first use (PEP 562), so
``import proxy`` stays cheap for code that only needs a submodule.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["create_app", "Gateway", "GatewayConfig", "ConfigError", "load_config", "parse_config",
           "resolve_config", "default_config", "hash_key", "main"]

#: public name -> the module that defines it
_HOME = {
    "create_app": "proxy.app",
    "Gateway": "proxy.gateway",
    "GatewayConfig": "proxy.config",
    "ConfigError": "proxy.config",
    "load_config": "proxy.config",
    "parse_config": "proxy.config",
    "resolve_config": "proxy.config",
    "default_config": "proxy.config",
    "hash_key": "proxy.config",
    "main": "proxy.cli.main",
}

if TYPE_CHECKING:
    from proxy.app import create_app
    from proxy.cli.main import main
    from proxy.config import (ConfigError, GatewayConfig, default_config, hash_key, load_config, parse_config,
                              resolve_config)
    from proxy.gateway import Gateway


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'proxy' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
