"""Who is calling and which upstream serves them: the request's credential and the model's route.

Shared by every route that authenticates (:class:`proxy.auth.Authenticator` does the checking)
and by the lean lane (:class:`proxy._asgi.fastpath.LeanLane`), so a key's model allow-list and the 404
``model_not_found`` read the same on every path.
"""

from __future__ import annotations

import fnmatch
from typing import TYPE_CHECKING, Any

from proxy.auth import Principal, client_authorization
from proxy.wire.errors import GatewayError

if TYPE_CHECKING:
    from proxy.gateway import Gateway

__all__ = ["credential", "route_model", "glob"]


def credential(headers: Any) -> str | None:
    """The client credential of a request (``Authorization``, else an ``api-key`` header):
    see :func:`proxy.auth.client_authorization`."""
    return client_authorization(headers.get("authorization"), headers.get("api-key"))


def route_model(state: Gateway, principal: Principal, model: str) -> Any:
    """The upstream serving ``model`` for ``principal``; GatewayError 404 ``model_not_found``
    (param ``model``) when no upstream serves it or the key's ``models`` do not allow it (one
    message for both: a key does not learn which models exist beyond its own)."""
    assert state.upstreams is not None
    up = state.upstreams.route(model)
    allowed = principal.models is None or any(glob(model, p) for p in principal.models)
    if up is None or not allowed:
        raise GatewayError(404, f"The model `{model}` does not exist or you do not have access to it.",
                           code="model_not_found", param="model")
    return up


def glob(name: str, pattern: str) -> bool:
    """``name`` matches the shell-style ``pattern`` (case-sensitive, :func:`fnmatch.fnmatchcase`)."""
    return fnmatch.fnmatchcase(name, pattern)
