"""Gateway configuration: a YAML file with ``${ENV}`` interpolation, validated with pydantic.

Shape (every section optional; see README "Configuration")::

    upstreams:
      - name: openai
        models: ["gpt-*", "o*"]            # glob patterns (fnmatch); first matching upstream wins
        base_url: https://api.openai.com/v1
        api_key: ${OPENAI_API_KEY}          # omit -> the client's Authorization is passed through
      - name: claude
        models: ["claude-*"]
        provider: litellm                   # translated by litellm (imported only if used)
        litellm_params: {api_key: "${ANTHROPIC_API_KEY}"}
    keys:                                   # virtual keys; none -> pass-through auth
      - name: alice
        hash: sha256:5e884898...            # sha256 hex of the key (`veracity key hash`)
        team: research
        policy: default
        allow_policy_header: false
    limits:
      max_body_bytes: 10485760
      connect_timeout_s: 5
      read_timeout_s: 600
      connect_retries: 2
    logging:
      log_content: false                    # prompt/answer text in the request log line
    policies: {...}                         # owned by the policy engine (free-form here)
    verification: {...}

Interpolation: ``${NAME}`` is replaced by the environment variable ``NAME``; ``${NAME:-default}``
falls back to ``default``; a missing variable without default is an error. ``$${`` escapes.

Errors: :class:`ConfigError` names the field path *and* ``file:line`` (from the YAML node marks),
e.g. ``veracity.yaml:7: upstreams.0.base_url: Input should be a valid URL``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, field_validator,
                      model_validator)

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
#: Largest upstream answer relayed (a non-stream body, or all bytes of one stream): 64 MiB,
#: far above any chat completion (128k output tokens of text is ~0.5 MiB; with logprobs and
#: n > 1, a few MiB) yet bounded, so a broken or hostile upstream cannot exhaust memory.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


class ConfigError(Exception):
    """A config file that cannot be read, interpolated or validated. ``str()`` is user-facing:
    ``file:line: field.path: message`` per problem, one per line."""


# --------------------------------------------------------------------------- models


def _header_value_ok(value: str) -> bool:
    """A value an HTTP/1.1 header can carry as is: Latin-1 (RFC 9110 section 5.5 obs-text) and
    no CR, LF or NUL, which would end the header line early (request splitting)."""
    return not re.search(r"[\r\n\0]", value) and all(ord(c) < 256 for c in value)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UpstreamConfig(_Strict):
    """One upstream: an OpenAI-compatible server (``base_url`` + optional ``api_key``) or a
    provider translated by litellm (``provider: litellm``; ``litellm_params`` are passed to
    ``litellm.acompletion``)."""

    name: str
    models: list[str] = Field(default_factory=lambda: ["*"])
    provider: Literal["openai", "litellm"] = "openai"
    base_url: str | None = None
    api_key: SecretStr | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    litellm_params: dict[str, Any] = Field(default_factory=dict)
    connect_timeout_s: float | None = None
    read_timeout_s: float | None = None

    @field_validator("base_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("must be an http(s) URL, e.g. https://api.openai.com/v1")
        return v.rstrip("/")

    @field_validator("headers")
    @classmethod
    def _headers(cls, v: dict[str, str]) -> dict[str, str]:
        for k, val in v.items():
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", k):
                raise ValueError(f"header name {k[:40]!r} is not an HTTP token (RFC 9110 section 5.1)")
            if not _header_value_ok(val):
                raise ValueError(f"header {k!r}: value must be Latin-1 text without CR, LF or NUL")
        return v

    @field_validator("api_key")
    @classmethod
    def _api_key(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not _header_value_ok(v.get_secret_value()):
            raise ValueError("must be Latin-1 text without CR, LF or NUL (it is sent in a header)")
        return v

    @field_validator("models")
    @classmethod
    def _models(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("list at least one model pattern (use '*' for all)")
        return v

    @model_validator(mode="after")
    def _needs_url(self) -> "UpstreamConfig":
        if self.provider == "openai" and not self.base_url:
            raise ValueError("an OpenAI-compatible upstream needs base_url (or set provider: litellm)")
        return self

    def serves(self, model: str) -> bool:
        """True if ``model`` matches one of the glob patterns in ``models``."""
        return any(fnmatch.fnmatchcase(model, p) for p in self.models)


class KeyConfig(_Strict):
    """A virtual key, stored as ``sha256:<64 hex>`` (or bare hex) of the key's UTF-8 bytes."""

    hash: str
    name: str | None = None
    team: str = "default"
    policy: str = "default"
    allow_policy_header: bool = False
    models: list[str] | None = None  # glob patterns this key may use; None = all

    @field_validator("hash")
    @classmethod
    def _hash(cls, v: str) -> str:
        h = v.removeprefix("sha256:").lower()
        if not re.fullmatch(r"[0-9a-f]{64}", h):
            raise ValueError("must be sha256 hex (64 hex digits, optional 'sha256:' prefix); "
                             "make one with `veracity key hash`")
        return h


class LimitsConfig(_Strict):
    """Request and upstream limits. Seconds and bytes. ``max_body_bytes``: largest client
    request body (413 above); ``max_response_bytes``: largest upstream answer (a non-stream
    body, or the sum of one stream's bytes; 502 ``upstream_response_too_large`` above)."""

    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    max_response_bytes: int = Field(DEFAULT_MAX_RESPONSE_BYTES, gt=0)
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(600.0, gt=0)
    connect_retries: int = Field(2, ge=0, le=10)


#: Log levels ``logging.level`` accepts: the stdlib ``logging`` level names that
#: :func:`proxy.log.configure` and uvicorn's ``log_level`` both understand.
LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class LoggingConfig(_Strict):
    """``level``: one of :data:`LogLevel` (case-insensitive). ``log_content``: include prompt
    and answer text in request log lines (off by default)."""

    level: LogLevel = "info"
    log_content: bool = False

    @field_validator("level", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.lower() if isinstance(v, str) else v


class GatewayConfig(BaseModel):
    """The whole file. ``policies`` / ``verification`` (and any other top-level section the
    pipeline adds) are kept as free-form data for their owners to validate."""

    model_config = ConfigDict(extra="allow")

    upstreams: list[UpstreamConfig] = Field(default_factory=list)
    keys: list[KeyConfig] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    policies: Any = None
    verification: Any = None
    #: how the config came to be: "file", "env" (OPENAI_API_KEY), "demo"
    mode: Literal["file", "env", "demo"] = "file"
    source: str | None = None
    #: 1-based line of every field path in the source file (set by :func:`parse_config`)
    _lines: dict[tuple, int] = PrivateAttr(default_factory=dict)

    @field_validator("upstreams")
    @classmethod
    def _unique_names(cls, v: list[UpstreamConfig]) -> list[UpstreamConfig]:
        names = [u.name for u in v]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate upstream names: {sorted(dup)}")
        return v

    def route(self, model: str) -> UpstreamConfig | None:
        """The first upstream whose patterns match ``model``, or None."""
        for u in self.upstreams:
            if u.serves(model):
                return u
        return None


def hash_key(key: str) -> str:
    """``sha256:<hex>`` of a virtual key, the form stored in ``keys[].hash``."""
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- loading

_ENV_RE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def interpolate(text: str, env: dict[str, str] | None = None) -> str:
    """Replace ``${NAME}`` / ``${NAME:-default}`` in ``text``; ``$${`` yields a literal ``${``.

    Raises KeyError(name, ...) naming every variable that is unset and has no default, in
    order of appearance (``exc.args``).
    """
    env = os.environ if env is None else env
    missing: list[str] = []

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        name, default = m.group(1), m.group(2)
        if name in env:
            return env[name]
        if default is not None:
            return default
        if name not in missing:
            missing.append(name)
        return ""

    out = _ENV_RE.sub(sub, text)
    if missing:
        raise KeyError(*missing)
    return out


def _to_data(loader: yaml.SafeLoader, node: yaml.Node, path: tuple, marks: dict[tuple, int],
             env: dict[str, str] | None, errors: list[str], fname: str) -> Any:
    """Construct plain data from a YAML node tree, recording the 1-based line of every path."""
    marks[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            key = loader.construct_object(knode, deep=True)
            out[key] = _to_data(loader, vnode, path + (key,), marks, env, errors, fname)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_data(loader, n, path + (i,), marks, env, errors, fname) for i, n in enumerate(node.value)]
    value = loader.construct_object(node, deep=True)
    if isinstance(value, str) and "$" in value:
        try:
            value = interpolate(value, env)
        except KeyError as exc:
            for name in exc.args:
                errors.append(f"{fname}:{marks[path]}: {_dotted(path)}: environment variable "
                              f"{name} is not set (use ${{{name}:-default}} for a default)")
    return value


def _dotted(loc: tuple) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def parse_config(text: str, *, filename: str = "<config>", env: dict[str, str] | None = None) -> GatewayConfig:
    """Parse and validate config text. Raises :class:`ConfigError` naming field and line."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"{mark.line + 1}" if mark is not None else "?"
        raise ConfigError(f"{filename}:{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if root is None:
        data: Any = {}
        marks: dict[tuple, int] = {(): 1}
    else:
        marks = {}
        errors: list[str] = []
        loader = yaml.SafeLoader("")
        data = _to_data(loader, root, (), marks, env, errors, filename)
        if errors:
            raise ConfigError("\n".join(errors))
    if not isinstance(data, dict):
        raise ConfigError(f"{filename}:1: the config must be a mapping (upstreams:, keys:, limits:, ...)")
    for reserved in ("mode", "source"):
        data.pop(reserved, None)
    try:
        cfg = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = None
            for n in range(len(loc), -1, -1):  # the deepest path that exists in the file
                if loc[:n] in marks:
                    line = marks[loc[:n]]
                    break
            msg = err["msg"].removeprefix("Value error, ")
            lines.append(f"{filename}:{line or '?'}: {_dotted(loc)}: {msg}")
        raise ConfigError("\n".join(lines)) from None
    cfg.source = filename
    cfg._lines = marks
    return cfg


def policies_dir(cfg: GatewayConfig, env: dict[str, str] | None = None) -> Path:
    """The policy folder the gateway will read for ``cfg``: ``policies.dir`` (relative to the
    working directory, as :class:`proxy.policy.PolicyStore` opens it), else
    ``$VERACITY_POLICIES``, else the shipped ``policies/`` folder."""
    section = cfg.policies if isinstance(cfg.policies, dict) else {}
    d = section.get("dir")
    if isinstance(d, str) and d:
        return Path(d)
    env = os.environ if env is None else env
    if env.get("VERACITY_POLICIES"):
        return Path(env["VERACITY_POLICIES"])
    from proxy.policy import default_policies_dir

    return default_policies_dir()


def key_policy_problems(cfg: GatewayConfig, env: dict[str, str] | None = None) -> list[str]:
    """``file:line: keys.N.policy: unknown policy 'x' (known: ...)`` for every virtual key whose
    policy is not in the policy store of :func:`policies_dir` (the built-in ``default`` always
    exists). Empty when every key's policy is known. A policy file that does not validate does
    not count as known (``veracity policy check`` tells why)."""
    if not cfg.keys:
        return []
    from proxy.policy import PolicyStore

    known = set(PolicyStore(policies_dir(cfg, env), check_interval_s=3600).names()) | {"default"}
    out = []
    for i, k in enumerate(cfg.keys):
        if k.policy in known:
            continue
        marks = cfg._lines
        line = marks.get(("keys", i, "policy")) or marks.get(("keys", i)) or "?"
        out.append(f"{cfg.source or '<config>'}:{line}: keys.{i}.policy: unknown policy {k.policy!r} "
                   f"(known: {', '.join(sorted(known))}; policy folder {policies_dir(cfg, env)})")
    return out


def load_config(path: str | os.PathLike[str], *, env: dict[str, str] | None = None,
                check_policies: bool = True) -> GatewayConfig:
    """Read, interpolate and validate a config file. Raises :class:`ConfigError`.

    ``check_policies``: also check that every virtual key names a policy that exists in the
    policy folder (:func:`key_policy_problems`), so a typo fails ``veracity config check``
    and start-up instead of every request of that key."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config: {exc.strerror or exc}") from None
    cfg = parse_config(text, filename=str(p), env=env)
    if check_policies:
        problems = key_policy_problems(cfg, env)
        if problems:
            raise ConfigError("\n".join(problems))
    return cfg


def default_config(env: dict[str, str] | None = None) -> GatewayConfig:
    """The config used when no file is given: OpenAI with ``OPENAI_API_KEY`` when set
    (``OPENAI_BASE_URL`` honoured), else demo mode (no upstream yet: the server starts the
    built-in scripted upstream and adds it, see :mod:`proxy.server`)."""
    env = os.environ if env is None else env
    key = env.get("OPENAI_API_KEY")
    if key:
        return GatewayConfig(
            upstreams=[UpstreamConfig(name="openai", models=["*"],
                                      base_url=env.get("OPENAI_BASE_URL") or OPENAI_BASE_URL,
                                      api_key=SecretStr(key))],
            mode="env", source="OPENAI_API_KEY")
    return GatewayConfig(mode="demo", source="demo")


def resolve_config(path: str | None, env: dict[str, str] | None = None) -> GatewayConfig:
    """Pick the config for ``veracity serve``: ``path``, else ``$VERACITY_CONFIG``, else
    ``./veracity.yaml`` if it exists, else :func:`default_config`."""
    env = os.environ if env is None else env
    path = path or env.get("VERACITY_CONFIG")
    if not path and Path("veracity.yaml").is_file():
        path = "veracity.yaml"
    if path:
        return load_config(path, env=env)
    return default_config(env)
