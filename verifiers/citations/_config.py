"""Configuration of the bibliographic sources: :class:`Sources` (pydantic), built from a dict.

Example (YAML in a policy or the gateway config)::

    citations:
      use: [crossref, openalex, arxiv, semantic_scholar]   # + "dblp", "local"
      mailto: ops@example.com          # Crossref/OpenAlex polite pool
      deadline: 3.0                    # seconds for all citations of one answer
      crossref: {rate_per_sec: 10, concurrency: 3}
      semantic_scholar: {api_key: ${S2_API_KEY}}
      local_index: {path: /var/lib/veracity/citations.sqlite3}
      cache: {backend: sqlite, path: ~/.cache/veracity/citations-cache.sqlite3, ttl: 604800}   # the default

Only the hosts in ``base_url`` are ever contacted; URLs found in model text are never fetched.
Default rate limits follow each API's published guidance: Crossref "polite" pool 10 req/s,
concurrency 3 (public pool 5 req/s, 1 concurrent) — Crossref REST API docs, "Etiquette";
OpenAlex 10 req/s — OpenAlex docs "Rate limits"; arXiv one request every 3 s — arXiv API Terms
of Use; Semantic Scholar 1 req/s for keyed use — S2 API docs; DBLP 1 req/s (be gentle — dblp FAQ).
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, field_validator

SOURCE_NAMES = ("crossref", "openalex", "arxiv", "semantic_scholar", "dblp", "local")


class SourceSettings(BaseModel):
    """One network source: where it is and how politely to call it.

    ``timeout`` (s) is per HTTP request; ``retries`` extra attempts on 429 / 5xx / timeouts with
    exponential backoff starting at ``backoff`` s (tenacity), honouring ``Retry-After``;
    ``rate_per_sec`` spaces request starts; ``concurrency`` caps requests in flight.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str
    timeout: float = Field(2.0, gt=0)
    retries: int = Field(2, ge=0, le=10)
    backoff: float = Field(0.2, ge=0)
    rate_per_sec: float = Field(5.0, gt=0)
    concurrency: int = Field(2, ge=1, le=64)
    api_key: SecretStr | None = None
    rows: int = Field(5, ge=1, le=50)

    @field_validator("base_url")
    @classmethod
    def _http_only(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("base_url must be an http(s) URL")
        return v.rstrip("/")


class CacheSettings(BaseModel):
    """Result cache: ``backend`` ``sqlite`` (default, file at ``path``), ``redis`` (``redis_url``)
    or ``none``; entries live ``ttl`` seconds (default 7 days). Only definitive answers are cached."""

    model_config = ConfigDict(extra="forbid")

    backend: str = "sqlite"
    path: str = Field(default_factory=lambda: os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "veracity", "citations-cache.sqlite3"))
    redis_url: str | None = None
    ttl: float = Field(7 * 24 * 3600, gt=0)

    @field_validator("backend")
    @classmethod
    def _backend(cls, v: str) -> str:
        if v not in ("sqlite", "redis", "none"):
            raise ValueError("cache.backend must be sqlite, redis or none")
        return v


class LocalIndexSettings(BaseModel):
    """The offline index (``veracity index build``). ``authoritative``: a miss there counts as a
    definitive NOT_FOUND (the library is the whole world, e.g. air-gapped); set False when the
    index is only a partial library, so a miss stays ``unknown``."""

    model_config = ConfigDict(extra="forbid")

    path: str | None = None
    authoritative: bool = True


def _default(name: str, url: str, **kw: Any) -> Any:
    return Field(default_factory=lambda: SourceSettings(base_url=url, **kw))


class Sources(BaseModel):
    """Which sources to ask and how. Build with :meth:`from_dict` (or pass a dict to ``check``).

    ``use`` lists the enabled sources; ``local`` is added automatically when
    ``local_index.path`` is set. ``deadline`` (s) bounds the verification of one answer.
    """

    model_config = ConfigDict(extra="forbid")

    use: list[str] = Field(default_factory=lambda: ["crossref", "openalex", "arxiv", "semantic_scholar"])
    mailto: str | None = None
    deadline: float = Field(3.0, gt=0)
    user_agent: str = "veracity-citations/0.1 (+https://github.com/veracity)"
    crossref: SourceSettings = _default("crossref", "https://api.crossref.org", rate_per_sec=10, concurrency=3)
    openalex: SourceSettings = _default("openalex", "https://api.openalex.org", rate_per_sec=10, concurrency=3)
    arxiv: SourceSettings = _default("arxiv", "https://export.arxiv.org", rate_per_sec=1 / 3, concurrency=1, retries=1)
    semantic_scholar: SourceSettings = _default("semantic_scholar", "https://api.semanticscholar.org",
                                                rate_per_sec=1, concurrency=1)
    dblp: SourceSettings = _default("dblp", "https://dblp.org", rate_per_sec=1, concurrency=1)
    local_index: LocalIndexSettings = Field(default_factory=LocalIndexSettings)
    cache: CacheSettings = Field(default_factory=CacheSettings)
    _fp: str | None = PrivateAttr(default=None)

    @field_validator("use")
    @classmethod
    def _known(cls, v: list[str]) -> list[str]:
        bad = [s for s in v if s not in SOURCE_NAMES]
        if bad:
            raise ValueError(f"unknown citation source(s) {bad}; known: {list(SOURCE_NAMES)}")
        return list(dict.fromkeys(v))

    @property
    def enabled(self) -> list[str]:
        """Enabled source names in order (``local`` first when an index path is set)."""
        names = list(self.use)
        if self.local_index.path and "local" not in names:
            names.insert(0, "local")
        if not self.local_index.path and "local" in names:
            names.remove("local")
        return names

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "Sources":
        """Validate a plain dict (YAML/JSON config). Raises ``pydantic.ValidationError``."""
        return cls.model_validate(d or {})

    @classmethod
    def coerce(cls, v: "Sources | dict[str, Any] | None") -> "Sources":
        """Accept a :class:`Sources`, a dict or None (defaults)."""
        return v if isinstance(v, Sources) else cls.from_dict(v)

    def fingerprint(self) -> str:
        """Stable identity of this configuration (runtime objects are shared per fingerprint)."""
        if self._fp is None:
            self._fp = self.model_dump_json(exclude={"deadline"})
        return self._fp
