"""Client authentication: virtual keys or pass-through.

* **Virtual keys** (``keys:`` in the config): the client sends ``Authorization: Bearer <key>``;
  the gateway hashes it (SHA-256) and compares it with *every* configured hash using
  :func:`hmac.compare_digest` (no early exit), so timing does not reveal how much matched.
  The key maps to a team, a policy name and options. The client's header is never forwarded.
* **Pass-through** (no ``keys:``): any client is accepted; its ``Authorization`` header is sent to
  upstreams that have no key of their own (so the upstream does the authentication).

The client credential is the ``Authorization`` header, or else an ``api-key: <key>`` header
(what ``openai.AzureOpenAI`` sends; taken as ``Authorization: Bearer <key>``, so pass-through
forwards it upstream in that form): :func:`client_authorization`. ``Authorization`` wins when
both are sent.

Errors are 401 ``invalid_api_key`` and never echo the key.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from proxy.config import KeyConfig
from proxy.wire.errors import GatewayError


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is calling: ``key_name`` (None in pass-through), ``team``, ``policy`` (name),
    ``allow_policy_header`` (may ``x-veracity-policy`` pick another policy), ``models``
    (glob patterns allowed, None = all), ``upstream_auth`` (the Authorization value to pass
    upstream; only in pass-through mode), ``admin`` (``keys[].admin``: may use the review
    routes; never in pass-through mode)."""

    key_name: str | None
    team: str
    policy: str
    allow_policy_header: bool
    models: tuple[str, ...] | None = None
    upstream_auth: str | None = None
    admin: bool = False
    #: the virtual key's ``keys[].hash`` (SHA-256 hex of the key; None in pass-through): what
    #: tells two keys apart when their names are equal or absent (report owners, proxy.stores.reports)
    key_hash: str | None = None


_PASS_THROUGH = Principal(key_name=None, team="default", policy="default", allow_policy_header=True)


class Authenticator:
    """Resolves the ``Authorization`` header to a :class:`Principal` (see module doc)."""

    def __init__(self, keys: list[KeyConfig]) -> None:
        self._keys = [(bytes.fromhex(k.hash), Principal(
            key_name=k.name, team=k.team, policy=k.policy, allow_policy_header=k.allow_policy_header,
            models=tuple(k.models) if k.models is not None else None, admin=k.admin, key_hash=k.hash))
            for k in keys]
        self.mode = "virtual_keys" if self._keys else "pass_through"

    def authenticate(self, authorization: str | None) -> Principal:
        """Raises :class:`GatewayError` 401 when virtual keys are configured and the header
        does not carry one of them."""
        if not self._keys:
            if authorization:
                return Principal(None, "default", "default", True, None, authorization)
            return _PASS_THROUGH
        token = _bearer(authorization)
        if token is None:
            raise GatewayError(401, "Missing API key: send 'Authorization: Bearer <your Veracity key>' "
                               "(or 'api-key: <your Veracity key>').",
                               code="invalid_api_key")
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: Principal | None = None
        for h, principal in self._keys:
            if hmac.compare_digest(h, digest) and found is None:
                found = principal
        if found is None:
            raise GatewayError(401, "Incorrect API key provided.", code="invalid_api_key")
        return found

    def by_digest(self, digest: bytes) -> Principal | None:
        """The principal of the configured key whose SHA-256 digest is ``digest`` (32 bytes),
        or None (no such key now, e.g. revoked since; always None in pass-through mode). The
        reviewer page's server-side sessions keep the digest, never the key, and re-check it here
        on every request, so removing the key from the config ends its sessions."""
        found: Principal | None = None
        for h, principal in self._keys:
            if hmac.compare_digest(h, digest) and found is None:
                found = principal
        return found


def client_authorization(authorization: str | None, api_key: str | None) -> str | None:
    """The client's credential as an ``Authorization`` value: ``authorization`` when non-empty,
    else ``Bearer <api_key>`` for a non-empty ``api-key`` header (Azure OpenAI's key header,
    ``openai/lib/azure.py``), else None."""
    if authorization:
        return authorization
    if api_key:
        return "Bearer " + api_key
    return None


def client_authorization_bytes(authorization: bytes | None, api_key: bytes | None) -> bytes | None:
    """:func:`client_authorization` on raw ASGI header values (the lean lane's cache key)."""
    if authorization:
        return authorization
    if api_key:
        return b"Bearer " + api_key
    return None


def _bearer(header: str | None) -> str | None:
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()
