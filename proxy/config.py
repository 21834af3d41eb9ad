"""Gateway configuration: a YAML file with ``${ENV}`` interpolation, validated with pydantic.

Shape (every section optional; see docs/configuration.md)::

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
        hash: sha256:5e884898...            # sha256 hex of the key: the output of `veracity key hash`
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
    cors:                                   # absent -> no CORS headers at all (see CORSConfig)
      allow_origins: ["https://app.example.com"]
    policies: {dir: ./policies}             # see PoliciesSettings; relative to this file, must exist
    verification: {audit: audit.jsonl}      # see VerificationSettings

Every key at every level must be known (``upstream:`` for ``upstreams:`` is an error, with a
"did you mean"); a file must configure an upstream (no file at all is the OPENAI_API_KEY / demo
mode of :func:`default_config`); relative paths are resolved against the file's folder.

Interpolation: ``${NAME}`` is replaced by the environment variable ``NAME``; ``${NAME:-default}``
falls back to ``default``; a missing variable without default is an error. ``$${`` escapes.

Errors: :class:`ConfigError` names the field path *and* ``file:line`` (from the YAML node marks),
e.g. ``veracity.yaml:7: upstreams.0.base_url: Input should be a valid URL``.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import importlib.util
import os
import re
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, ValidationError, ValidationInfo,
                      field_validator, model_validator)

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
#: Largest upstream answer relayed (a non-stream body, or all bytes of one stream): 64 MiB,
#: far above any chat completion (128k output tokens of text is ~0.5 MiB; with logprobs and
#: n > 1, a few MiB) yet bounded, so a broken or hostile upstream cannot exhaust memory.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
#: Largest SSE event the stream relay holds while waiting for its end (bytes; proxy.wire.relay.SSERelay):
#: an OpenAI chunk is a few hundred bytes; 4 MiB is about a million tokens of text in one event. An
#: event still unterminated past this is refused as it arrives, instead of being buffered up to
#: max_response_bytes (an unterminated 64 MiB event took 9 s and stalled the event loop).
DEFAULT_MAX_EVENT_BYTES = 4 * 1024 * 1024


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
    #: how ``POST /v1/responses`` reaches this upstream: ``native`` (its own ``/v1/responses``) or
    #: ``translated`` (as chat completions); unset: native for ``provider: openai``, translated
    #: for litellm (docs/responses.md, :func:`proxy.upstreams.responses.mode_of`)
    responses: Literal["native", "translated"] | None = None

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
        if self.provider == "litellm" and importlib.util.find_spec("litellm") is None:  # found, not imported
            raise ValueError("provider: litellm needs the litellm package, which is optional: "
                             "install it with `.venv/bin/pip install -e '.[litellm]'`")
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
    #: may use the human review routes (``/v1/veracity/reviews``, the ``/veracity/review`` page);
    #: an admin key is an ordinary key otherwise (chat, models, its team and policy)
    admin: bool = False

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
    body, or the sum of one stream's bytes; 502 ``upstream_response_too_large`` above);
    ``max_event_bytes``: largest single SSE event of an upstream stream (the same error, as
    soon as an unterminated event passes it; default 4 MiB)."""

    max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, gt=0)
    max_response_bytes: int = Field(DEFAULT_MAX_RESPONSE_BYTES, gt=0)
    max_event_bytes: int = Field(DEFAULT_MAX_EVENT_BYTES, gt=0)
    connect_timeout_s: float = Field(5.0, gt=0)
    read_timeout_s: float = Field(600.0, gt=0)
    connect_retries: int = Field(2, ge=0, le=10)


#: Log levels ``logging.level`` accepts: the stdlib ``logging`` level names that
#: :func:`proxy.observability.log.configure` and uvicorn's ``log_level`` both understand.
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


#: Request headers a browser may send cross-origin by default (``cors.allow_headers``): what
#: the openai JS SDK (openai-node ``src/client.ts`` ``buildHeaders``,
#: ``src/internal/detect-platform.ts``, the ``X-Stainless-Helper-Method`` of its stream/runTools
#: helpers and the ``X-Stainless-Poll-Helper`` / ``-Custom-Poll-Interval`` of its polling helpers)
#: and ``AzureOpenAI`` (``api-key``) set, plus the headers Veracity reads itself
#: (``x-request-id``, ``x-veracity-policy``). Starlette compares names exactly (no ``x-stainless-*``
#: patterns), so each is listed; the CORS-safelisted ``accept``, ``accept-language``,
#: ``content-language``, ``content-type`` are always allowed (Starlette adds them).
DEFAULT_CORS_ALLOW_HEADERS = (
    "authorization", "content-type", "user-agent", "api-key", "idempotency-key",
    "openai-organization", "openai-project", "openai-beta",
    "x-stainless-lang", "x-stainless-package-version", "x-stainless-os", "x-stainless-arch",
    "x-stainless-runtime", "x-stainless-runtime-version", "x-stainless-retry-count", "x-stainless-timeout",
    "x-stainless-helper-method", "x-stainless-poll-helper", "x-stainless-custom-poll-interval",
    "x-request-id", "x-veracity-policy",
)

#: Response headers a browser script may read by default (``cors.expose_headers``; beyond the
#: CORS-safelisted ones: cache-control, content-language, content-length, content-type,
#: expires, last-modified, pragma). Veracity's own (``x-request-id``, which the JS SDK returns
#: as ``_request_id``; ``x-veracity-status``, ``x-veracity-risk``, ``x-veracity-overhead-ms``,
#: ``x-veracity-summary``, ``x-veracity-report-url`` (:mod:`proxy.stores.reports`), ``x-veracity-coverage``;
#: ``x-upstream-request-id``) and the relayed upstream headers a client acts on: ``retry-after``
#: / ``retry-after-ms`` (the JS SDK's retry delay), OpenAI's ``x-ratelimit-*`` names and
#: ``openai-processing-ms`` / ``openai-version`` (names from the OpenAI API reference,
#: "Rate limits" and "Debugging requests"). ``Access-Control-Expose-Headers`` has no prefix
#: patterns (Fetch standard), hence the explicit list.
DEFAULT_CORS_EXPOSE_HEADERS = (
    "x-request-id", "x-veracity-status", "x-veracity-risk", "x-veracity-overhead-ms", "x-upstream-request-id",
    "x-veracity-summary", "x-veracity-report-url", "x-veracity-coverage",
    "retry-after", "retry-after-ms",
    "x-ratelimit-limit-requests", "x-ratelimit-limit-tokens", "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens", "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
    "openai-processing-ms", "openai-version",
)

#: An origin as browsers send it in ``Origin`` (RFC 6454 section 6.2): ``scheme://host[:port]``,
#: no path, query or trailing slash.
_ORIGIN_RE = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s?#@]+$")
#: An HTTP token (RFC 9110 section 5.6.2): header and method names.
_TOKEN_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
#: Origins no deployment owns: the opaque origin and reserved ``.invalid`` names (RFC 6761).
_CORS_PROBE_ORIGINS = ("null", "https://veracity-probe.invalid", "http://veracity-probe.invalid")


class CORSConfig(_Strict):
    """Cross-origin resource sharing for browser clients (the ``cors:`` section; absent: no
    CORS headers at all). Applied by Starlette's ``CORSMiddleware`` around every route (see
    :func:`proxy.app.create_app`); the rules are the Fetch standard's
    (https://fetch.spec.whatwg.org/#http-cors-protocol).

    ``allow_origins``: origins (``https://app.example.com``, lower-cased on load) or ``"*"``;
    ``allow_origin_regex``: a Python regex an origin must match in full (e.g. preview deploys);
    at least one of the two is needed. ``allow_headers`` / ``allow_methods``: what a preflight
    may ask for (``"*"``: anything). ``expose_headers``: response headers scripts may read.
    ``allow_credentials``: cookies / TLS client certificates (an ``Authorization`` header set by
    the script is *not* a credential in this sense; Veracity needs none); the Fetch standard
    forbids ``*`` origins with credentials, and treats ``*`` in the header/method lists literally
    then, so these combinations are config errors. ``max_age``: seconds a browser may cache a
    preflight answer (browsers cap it: Chromium at 7200). ``allow_private_network``: answer
    Chromium's Private Network Access preflights (a public page calling a gateway on a private
    address)."""

    # allow_credentials first: the list validators below read it (fields validate in this order)
    allow_credentials: bool = False
    allow_origins: list[str] = Field(default_factory=list)
    allow_origin_regex: str | None = None
    allow_headers: list[str] = Field(default_factory=lambda: list(DEFAULT_CORS_ALLOW_HEADERS))
    allow_methods: list[str] = Field(default_factory=lambda: ["GET", "POST", "OPTIONS"])
    expose_headers: list[str] = Field(default_factory=lambda: list(DEFAULT_CORS_EXPOSE_HEADERS))
    max_age: int = Field(600, ge=0)
    allow_private_network: bool = False

    @field_validator("allow_origins")
    @classmethod
    def _origins(cls, v: list[str]) -> list[str]:
        out = []
        for origin in v:
            o = origin.strip().lower()
            if o != "*" and not _ORIGIN_RE.match(o):
                raise ValueError(f"{origin!r} is not an origin: use scheme://host[:port] with no path or "
                                 "trailing slash (e.g. https://app.example.com), or '*'")
            if o != "*" and "*" in o:  # compared literally: it would never match a browser's Origin
                raise ValueError(f"{origin!r}: origins are exact (no patterns); use allow_origin_regex")
            # a browser's Origin omits the scheme's default port (HTML "serialization of an origin")
            for scheme, port in (("https://", ":443"), ("http://", ":80")):
                if o.startswith(scheme) and o.endswith(port):
                    o = o[: -len(port)]
            out.append(o)
        return out

    @field_validator("allow_origin_regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a valid regular expression: {exc}") from None
        return v

    @field_validator("allow_headers", "expose_headers")
    @classmethod
    def _header_names(cls, v: list[str]) -> list[str]:
        for name in v:
            if name != "*" and ("*" in name or not _TOKEN_RE.match(name)):
                raise ValueError(f"{name!r} is not a header name (no patterns such as x-foo-*; use '*' "
                                 "for all)")
        return [name.lower() for name in v]

    @field_validator("allow_methods")
    @classmethod
    def _methods(cls, v: list[str]) -> list[str]:
        for name in v:
            if name != "*" and ("*" in name or not _TOKEN_RE.match(name)):
                raise ValueError(f"{name!r} is not an HTTP method")
        return [name.upper() for name in v]

    @field_validator("allow_origins", "allow_headers", "allow_methods", "expose_headers", mode="after")
    @classmethod
    def _no_wildcard_with_credentials(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if "*" in v and info.data.get("allow_credentials"):
            raise ValueError("'*' cannot be used with allow_credentials: true (the Fetch standard allows "
                             "no wildcard on credentialed requests); list the values, or drop "
                             "allow_credentials")
        return v

    @model_validator(mode="after")
    def _some_origin(self) -> "CORSConfig":
        if not self.allow_origins and self.allow_origin_regex is None:
            raise ValueError("list at least one origin in allow_origins (or '*'), or set allow_origin_regex")
        if self.allow_credentials and self.allow_origin_regex is not None:
            # the wildcard rule above, for a regex: one matching the opaque origin "null" (any
            # sandboxed iframe, file: or data: page sends it) or a name nobody owns (.invalid,
            # RFC 6761) grants credentialed access to every site, as '*' would
            rx = re.compile(self.allow_origin_regex)
            for probe in _CORS_PROBE_ORIGINS:
                if rx.fullmatch(probe):
                    raise ValueError(f"allow_origin_regex matches {probe!r}, so with allow_credentials: true "
                                     "every site would get credentialed access; anchor it to your own hosts")
        return self


#: URL schemes redis-py's ``from_url`` accepts (``redis.connection.parse_url``).
REDIS_URL_SCHEMES = ("redis", "rediss", "unix")


def _none_is_empty(v: Any) -> Any:
    """A section written with no value (``policies:``) means "all defaults"."""
    return {} if v is None else v


class PoliciesSettings(_Strict):
    """The ``policies:`` section. ``dir``: the policy folder (default: ``$VERACITY_POLICIES``,
    else the shipped ``policies/``); in a config file a relative ``dir`` is resolved against
    the file's folder and must exist (:func:`load_config`). ``check_interval_s``: how often the
    folder is checked for edits (seconds; reload without restart)."""

    dir: str | None = None
    check_interval_s: float = Field(1.0, ge=0)

    @field_validator("dir")
    @classmethod
    def _dir(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must be a folder path (omit it for $VERACITY_POLICIES or the shipped policies/)")
        return v


class VerificationSettings(_Strict):
    """The ``verification:`` section. ``redis_url``: Redis for daily budgets shared by replicas
    (``redis://``, ``rediss://`` or ``unix://``, see :data:`REDIS_URL_SCHEMES`; default: SQLite).
    ``budget_db``: SQLite file for daily budgets (default: in memory). ``audit``: audit log path,
    JSONL, or SQLite for a ``.sqlite3``/``.sqlite``/``.db`` suffix (default: none). In a config
    file, relative paths are resolved against the file's folder (:func:`load_config`).
    ``review_db``: SQLite file of the human review queue (:mod:`proxy.stores.review`; default
    ``.veracity/reviews.sqlite3`` next to the config file, else in the working folder;
    ``:memory:`` = this process only; unused when ``redis_url`` is set: the queue is then in
    Redis). Opened on the first review, so a gateway with nothing to review creates no file."""

    redis_url: str | None = None
    budget_db: str | None = None
    audit: str | None = None
    review_db: str | None = None

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, v: str | None) -> str | None:
        if v is not None:
            scheme, sep, rest = v.partition("://")
            if not sep or scheme.lower() not in REDIS_URL_SCHEMES or not rest:
                raise ValueError("must be a Redis URL: redis://host:port/db, rediss://... (TLS) or "
                                 "unix:///path/to/socket")
        return v

    @field_validator("budget_db", "audit", "review_db")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must be a file path (omit it or use null for none)")
        return v


#: longest ``reports.ttl_s``: a year (reports are for fetching a recent request's verdict; Redis'
#: own ``EX`` limit, about 9e15 s, is no useful bound)
MAX_REPORT_TTL_S = 31_536_000


class ReportsSettings(_Strict):
    """The ``reports:`` section: the report store behind ``GET /v1/veracity/reports/{request_id}``
    (:mod:`proxy.stores.reports`). ``enabled``: keep reports (off: the route answers 404 and responses
    carry no ``x-veracity-report-url``). ``ttl_s``: seconds a report is kept (in this process and,
    with ``verification.redis_url``, in Redis for every replica). ``max_in_memory``: reports kept
    in this process (least recently written dropped first; a few KB each, up to ~150 KB for an
    answer with hundreds of checks; checks-off answers' records in a ring of their own of this
    size, :class:`proxy.stores.reports.FixedRing`); ``max_in_memory_bytes``: their bodies' total size, the
    other bound. ``ttl_s`` is at most
    :data:`MAX_REPORT_TTL_S`: past Redis' range (``EX 1e20``, ``.inf``) every shared write failed
    (logged only) while ``config check`` passed."""

    enabled: bool = True
    ttl_s: float = Field(3600.0, gt=0, le=31_536_000)  # MAX_REPORT_TTL_S
    max_in_memory: int = Field(10_000, ge=0)
    #: bytes of report bodies kept in this process (least recently written dropped first): a
    #: count alone let 10,000 reports of many-claim answers (~130 KB each) hold over 1 GB
    max_in_memory_bytes: int = Field(256 * 1024 * 1024, ge=0)


class GatewayConfig(BaseModel):
    """The whole file. Every section is validated here, so a wrong or unknown field (at any
    level, e.g. ``upstream:`` for ``upstreams:``) is a :class:`ConfigError` at load time."""

    model_config = ConfigDict(extra="forbid")

    upstreams: list[UpstreamConfig] = Field(default_factory=list)
    keys: list[KeyConfig] = Field(default_factory=list)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    #: None (no ``cors:`` section): no CORS headers, the app is not wrapped
    cors: CORSConfig | None = None
    policies: PoliciesSettings = Field(default_factory=PoliciesSettings)
    verification: VerificationSettings = Field(default_factory=VerificationSettings)
    reports: ReportsSettings = Field(default_factory=ReportsSettings)
    #: how the config came to be: "file", "env" (OPENAI_API_KEY), "demo"
    mode: Literal["file", "env", "demo"] = "file"
    source: str | None = None
    #: 1-based line of every field path in the source file (set by :func:`parse_config`)
    _lines: dict[tuple, int] = PrivateAttr(default_factory=dict)

    @field_validator("policies", "verification", "reports", mode="before")
    @classmethod
    def _empty_sections(cls, v: Any) -> Any:
        return _none_is_empty(v)

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


#: first element of the ``marks`` entries that hold the line of a mapping *key* (the plain
#: entries hold the line where the value starts)
_KEY_LINE = object()


def _to_data(loader: yaml.SafeLoader, node: yaml.Node, path: tuple, marks: dict[tuple, int],
             env: dict[str, str] | None, errors: list[str], fname: str) -> Any:
    """Construct plain data from a YAML node tree, recording the 1-based line of every path."""
    marks[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for knode, vnode in node.value:
            key = loader.construct_object(knode, deep=True)
            marks[(_KEY_LINE,) + path + (key,)] = knode.start_mark.line + 1
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


#: GatewayConfig fields Veracity sets itself; a file that sets them gets "unknown field"
_RESERVED = ("mode", "source")


def _model_of(ann: Any) -> type[BaseModel] | None:
    """The pydantic model inside a field annotation (``X``, ``X | None``, ``list[X]``), or None."""
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return ann
    for arg in typing.get_args(ann):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def _unknown_field_msg(loc: tuple) -> str:
    """The message for an unknown field at ``loc``: pydantic's "Extra inputs are not permitted",
    the closest known name (``difflib``; a typo such as ``upstream``) and the known names."""
    model: type[BaseModel] | None = GatewayConfig
    for part in loc[:-1]:
        if isinstance(part, int):  # a list item: same model
            continue
        field = model.model_fields.get(str(part)) if model is not None else None
        model = _model_of(field.annotation) if field is not None else None
    known = [n for n in (model.model_fields if model is not None else ())
             if not (model is GatewayConfig and n in _RESERVED)]
    msg = "Extra inputs are not permitted (unknown field"
    close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
    if close:
        msg += f"; did you mean {close[0]!r}?"
    if known:
        msg += f"; known: {', '.join(known)}"
    return msg + ")"


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
    lines = []
    for reserved in _RESERVED:  # set by Veracity (how the config came to be), not by a file
        if reserved in data:
            lines.append(f"{filename}:{marks.get((_KEY_LINE, reserved), '?')}: {reserved}: {_unknown_field_msg((reserved,))}")
            del data[reserved]
    try:
        cfg = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            line = None
            for n in range(len(loc), -1, -1):  # the deepest path that exists in the file
                if loc[:n] in marks:
                    line = marks[loc[:n]]
                    break
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":  # point at the key itself, not at its value
                line = marks.get((_KEY_LINE,) + loc, line)
                msg = _unknown_field_msg(loc)
            lines.append(f"{filename}:{line or '?'}: {_dotted(loc)}: {msg}")
    if lines:
        raise ConfigError("\n".join(lines)) from None
    cfg.source = filename
    cfg._lines = marks
    return cfg


def policies_dir(cfg: GatewayConfig, env: dict[str, str] | None = None) -> Path:
    """The policy folder the gateway will read for ``cfg``: ``policies.dir`` (already made
    absolute against the config file's folder by :func:`load_config`; a relative one from
    code is opened from the working directory, as :class:`proxy.policy.PolicyStore` does),
    else ``$VERACITY_POLICIES``, else the shipped ``policies/`` folder."""
    if cfg.policies.dir:
        return Path(cfg.policies.dir)
    env = os.environ if env is None else env
    if env.get("VERACITY_POLICIES"):
        return Path(env["VERACITY_POLICIES"])
    from proxy.policy import default_policies_dir

    return default_policies_dir()


def _line(cfg: GatewayConfig, *paths: tuple) -> int | str:
    """The 1-based line of the first of ``paths`` found in ``cfg``'s source file, else ``?``."""
    for path in paths:
        if path in cfg._lines:
            return cfg._lines[path]
    return "?"


def key_policy_problems(cfg: GatewayConfig, env: dict[str, str] | None = None) -> list[str]:
    """``file:line: keys.N.policy: unknown policy 'x' (known: ...)`` for every virtual key whose
    policy is not in the policy store of :func:`policies_dir` (the built-in ``default`` always
    exists). Empty when every key's policy is known. A policy file that does not validate does
    not count as known (``veracity policy check`` tells why); a policy's name is its ``name:``
    field, or the file name without ``.yaml`` when the file has none."""
    if not cfg.keys:
        return []
    from proxy.policy import PolicyStore

    folder = policies_dir(cfg, env)
    known = set(PolicyStore(folder, check_interval_s=3600).names()) | {"default"}
    if folder.is_dir():
        where = f"known: {', '.join(sorted(known))}; policy folder {folder}"
    else:
        where = f"policy folder {folder} does not exist, so only the built-in 'default' is known"
    out = []
    for i, k in enumerate(cfg.keys):
        if k.policy in known:
            continue
        line = _line(cfg, ("keys", i, "policy"), ("keys", i))
        out.append(f"{cfg.source or '<config>'}:{line}: keys.{i}.policy: unknown policy {k.policy!r} ({where})")
    return out


def _resolve_paths(cfg: GatewayConfig, base: Path) -> None:
    """Make the relative paths of ``cfg`` (``policies.dir``, ``verification.audit``,
    ``verification.budget_db``) absolute against ``base``, the config file's folder -- as
    docker-compose and nginx resolve the paths in their files -- so the gateway reads the same
    files whatever its working directory. SQLite's ``:memory:`` is left alone."""
    def absolute(value: str | None) -> str | None:
        if not value or value == ":memory:":
            return value
        path = Path(value).expanduser()
        return str(path if path.is_absolute() else base / path)

    cfg.policies.dir = absolute(cfg.policies.dir)
    cfg.verification.audit = absolute(cfg.verification.audit)
    cfg.verification.budget_db = absolute(cfg.verification.budget_db)
    cfg.verification.review_db = absolute(cfg.verification.review_db)


def _unwritable(path: str | None) -> str | None:
    """Why the gateway could not create or append to the file ``path`` (the audit log, the
    budget database open it at start-up, creating missing folders), or None if it can. Checked
    without creating anything: the file, else its nearest existing folder, must be writable."""
    if not path or path == ":memory:":
        return None
    p = Path(path)
    if p.is_dir():
        return f"{p} is a folder; give a file path"
    if p.exists():
        return None if os.access(p, os.W_OK) else f"{p} is not writable"
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create {p}: {parent} is not a folder"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create {p}: folder {parent} is not writable"
    return None


def _file_problems(cfg: GatewayConfig, env: dict[str, str] | None, check_policies: bool) -> list[str]:
    """What makes a syntactically valid config file unusable: no upstream, a ``policies.dir``
    that is not a folder, keys naming unknown policies (``file:line: field: message`` each)."""
    src = cfg.source or "<config>"
    out = []
    if not cfg.upstreams:
        empty = not any(k and k[0] is _KEY_LINE for k in cfg._lines)  # no key at all in the file
        what = "the file is empty" if empty else "no upstream is configured"
        out.append(f"{src}:{_line(cfg, ('upstreams',), ())}: upstreams: {what}, so every request would be a 404 "
                   "model_not_found; add one (docs/configuration.md), or start without a config file "
                   "to use OPENAI_API_KEY or the demo mode")
    for name in ("audit", "budget_db", "review_db"):
        problem = _unwritable(getattr(cfg.verification, name))
        if problem:
            out.append(f"{src}:{_line(cfg, ('verification', name), ('verification',))}: verification.{name}: "
                       f"{problem}")
    d = cfg.policies.dir
    if d and not Path(d).is_dir():
        state = "is not a folder" if Path(d).exists() else "does not exist"
        out.append(f"{src}:{_line(cfg, ('policies', 'dir'), ('policies',))}: policies.dir: {d} {state} "
                   "(a relative dir is resolved against the config file's folder)")
    elif check_policies:
        out.extend(key_policy_problems(cfg, env))
    return out


def load_config(path: str | os.PathLike[str], *, env: dict[str, str] | None = None,
                check_policies: bool = True) -> GatewayConfig:
    """Read, interpolate and validate a config file. Raises :class:`ConfigError`.

    Relative paths in the file are resolved against the file's folder (:func:`_resolve_paths`).
    A file must configure at least one upstream (running with no file at all is the documented
    OPENAI_API_KEY / demo mode, :func:`default_config`), and ``policies.dir``, when set, must
    be an existing folder. ``check_policies``: also check that every virtual key names a
    policy that exists in the policy folder (:func:`key_policy_problems`), so a typo fails
    ``veracity config check`` and start-up instead of every request of that key."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read config: {exc.strerror or exc}") from None
    cfg = parse_config(text, filename=str(p), env=env)
    _resolve_paths(cfg, Path(os.path.abspath(p)).parent)
    problems = _file_problems(cfg, env, check_policies)
    if problems:
        raise ConfigError("\n".join(problems))
    return cfg


def default_config(env: dict[str, str] | None = None) -> GatewayConfig:
    """The config used when no file is given: OpenAI with ``OPENAI_API_KEY`` when set
    (``OPENAI_BASE_URL`` honoured), else demo mode (no upstream yet: the server starts the
    built-in scripted upstream and adds it, see :mod:`proxy.cli.serve`)."""
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
