"""Policies: named YAML documents that decide how hard the gateway tries to verify.

A policy file (``policies/default.yaml``)::

    name: default
    description: Verify risky answers, correct them with evidence, annotate.
    verifiers:
      arithmetic: {enabled: true, timeout_ms: 2000, options: {}}
      code: {enabled: true, timeout_ms: 15000, sandbox: {backend: auto, limits: {}}}
      citations: {enabled: true, timeout_ms: 8000, sources: {use: [crossref, openalex]}}
    risk: {threshold: 0.3}
    sentinel: {mode: off, when: multi_part, max_rounds: 3}
    correction: {max_rounds: 3, model: null}
    on_failure: correct          # annotate | correct | block | observe
    on_unverified: annotate      # annotate | block   (no check failed, none passed)
    budgets:
      request: {extra_calls: 4, extra_tokens: 8000, deadline_ms: 30000}
      key_daily: {extra_tokens: 2000000, cost_usd: 20}
      team_daily: {extra_tokens: null, cost_usd: null}
    streaming: {mode: passthrough, keepalive_s: 5}
    audit: {enabled: true, include_text: false}
    review: {enabled: true, when: [max_retry_exceeded, divergence], include_text: true}   # human review queue
    overridable: [on_failure, streaming, sentinel.mode]

Selection (:func:`resolve`): the key's policy; the ``x-veracity-policy`` header only when the
key allows it (``keys[].allow_policy_header``); then the request's ``veracity`` object
(``extra_body={"veracity": {...}}``) overrides fields listed in the selected policy's
``overridable`` (the policy is the key's ceiling). Budgets and round limits in an override can
only be lowered, never raised (raising one is a 403 naming the policy's cap).

:class:`PolicyStore` loads a folder of policy files and reloads a file when its mtime changes
(checked at most once per ``check_interval_s``), so edits apply without a restart; a file that
no longer validates keeps its last good version, the error is kept in ``store.errors`` and
logged once as a warning (``policy_invalid``, naming the file and the problem).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from proxy.observability.log import get_logger

__all__ = [
    "Policy", "PolicyError", "PolicyStore", "KeyGrant", "check_file", "load_file",
    "apply_overrides", "resolve", "default_policies_dir",
]


class PolicyError(Exception):
    """A policy that cannot be loaded, found, or overridden. ``str()`` is user-facing;
    ``param`` names the offending field (OpenAI error ``param``) when there is one."""

    def __init__(self, message: str, param: str | None = None, status: int = 400,
                 code: str = "veracity_policy"):
        super().__init__(message)
        self.param = param
        self.status = status
        #: OpenAI error ``code``: ``veracity_policy`` (the request's choice or override),
        #: ``veracity_config`` (status 500: the gateway's own config names a missing policy)
        self.code = code


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifierToggle(_Strict):
    """Common verifier settings. ``timeout_ms``: this verifier's own deadline inside the
    request's verification deadline. ``options``: keyword arguments for the verifier's entry
    point (see each verifier's docstring, e.g. arithmetic tolerances)."""

    enabled: bool = True
    timeout_ms: int = Field(5000, gt=0, le=600_000)
    options: dict[str, Any] = Field(default_factory=dict)


class SandboxOptions(_Strict):
    """``backend``: ``auto`` | ``docker`` | ``bwrap`` (see ``verifiers.sandbox.get``);
    ``limits``: memory/CPU/process/output/wall limits passed to the sandbox."""

    backend: str = "auto"
    limits: dict[str, Any] = Field(default_factory=dict)


class CodeVerifier(VerifierToggle):
    timeout_ms: int = Field(15000, gt=0, le=600_000)
    sandbox: SandboxOptions = Field(default_factory=SandboxOptions)


class CitationRelevance(_Strict):
    """Content relevance (``verifiers.citations._relevance``; docs/citations.md): ``enabled`` compares the
    sentence that cites each resolved reference with the work's abstract (supported /
    unsupported / abstract_unavailable, recorded in the check's ``evidence["relevance"]``);
    ``fail_unsupported`` makes an unsupported reference a failed check."""

    enabled: bool = False
    fail_unsupported: bool = False


class CitationVerifier(VerifierToggle):
    """``sources``: the ``verifiers.citations.Sources`` configuration (``use``: crossref,
    openalex, arxiv, semantic_scholar, dblp, local; ``local_index: {path}``; ``mailto``,
    ``cache``...); validated with that model when the citations verifier is installed."""

    timeout_ms: int = Field(8000, gt=0, le=600_000)
    sources: dict[str, Any] = Field(default_factory=dict)
    relevance: CitationRelevance = Field(default_factory=lambda: CitationRelevance())

    @field_validator("sources")
    @classmethod
    def _valid_sources(cls, v: dict[str, Any]) -> dict[str, Any]:
        try:
            from verifiers.citations import Sources
        except ImportError:  # verifier not installed: validated when it runs
            return v
        Sources.from_dict(v)
        return v


class ArithmeticVerifier(VerifierToggle):
    timeout_ms: int = Field(2000, gt=0, le=600_000)


class PlannerVerifier(VerifierToggle):
    """The AMTFV planner (``verifiers.planner``; docs/verifier-model.md, "The planner"). Off unless a
    policy turns it on. ``templates``: run template plans (no model call) for the common
    shapes (a named formula with its inputs in the question; an expression in the question and
    its value in the answer). ``when``: when the verifier model writes a plan -- ``never``,
    ``unexplained`` (a risky answer where no rule check passed or failed), ``high_risk``
    (unexplained, or risk >= ``high_risk``), ``always``. ``max_steps``: plan steps executed."""

    enabled: bool = False
    timeout_ms: int = Field(20000, gt=0, le=600_000)
    templates: bool = True
    when: Literal["never", "unexplained", "high_risk", "always"] = "never"
    high_risk: float = Field(0.7, ge=0.0, le=1.0)
    max_steps: int = Field(6, ge=1, le=20)


class FactsVerifier(VerifierToggle):
    """Fact checking and grounding (``verifiers.facts``; docs/facts.md): claims split, searched over
    ``backends`` (``{"use": [context, local, wikipedia, searxng, brave], <name>: {...}}``, see
    ``verifiers.facts.backends``), judged (deterministic tier first, then the verifier model when
    ``use_model``), looped up to ``max_rounds``. ``max_claims`` per answer, ``k`` passages per
    query, ``weights`` per domain/source, ``unconfirmed_note``: append the templated "could not
    be confirmed" note for claims that stay unknown. ``cache``: verdict cache (``memory`` |
    ``off`` | a SQLite path; Redis when ``verification.redis_url`` is set and this is ``redis``)."""

    enabled: bool = False
    timeout_ms: int = Field(20000, gt=0, le=600_000)
    backends: dict[str, Any] = Field(default_factory=lambda: {"use": ["context"]})
    use_model: bool = True
    max_claims: int = Field(8, ge=1, le=100)
    max_rounds: int = Field(3, ge=1, le=10)
    k: int = Field(5, ge=1, le=50)
    weights: dict[str, float] = Field(default_factory=dict)
    unconfirmed_note: bool = False
    cache: str = "memory"

    @field_validator("backends")
    @classmethod
    def _valid_backends(cls, v: dict[str, Any]) -> dict[str, Any]:
        """A typo in ``backends`` (an unknown backend or setting, ``local`` without ``db``,
        ``searxng`` without ``url``) is a policy error, not an ``error`` check on every request
        (``verifiers.facts.backends.check_config``; the corpus file and the Brave key variable
        are checked when the backends are made, on the machine that runs them)."""
        try:
            from verifiers.facts.backends import check_config
        except ImportError:  # verifier not installed: validated when it runs
            return v
        check_config(v)
        return v


class Verifiers(_Strict):
    arithmetic: ArithmeticVerifier = Field(default_factory=ArithmeticVerifier)
    code: CodeVerifier = Field(default_factory=CodeVerifier)
    citations: CitationVerifier = Field(default_factory=CitationVerifier)
    facts: FactsVerifier = Field(default_factory=FactsVerifier)
    planner: PlannerVerifier = Field(default_factory=PlannerVerifier)

    def enabled(self) -> list[str]:
        """Names of the enabled verifiers."""
        return [n for n in VERIFIER_NAMES if getattr(self, n).enabled]

    def run_options(self) -> dict[str, dict[str, Any]]:
        """Per-verifier options in the shape ``verifiers.run.run(options=...)`` takes (the
        per-request objects -- verifier model, context messages -- are added by the pipeline)."""
        out: dict[str, dict[str, Any]] = {}
        for n in VERIFIER_NAMES:
            v = getattr(self, n)
            o: dict[str, Any] = dict(v.options)
            o["timeout_ms"] = v.timeout_ms
            if n == "code":
                o["sandbox"] = {"backend": v.sandbox.backend, "limits": dict(v.sandbox.limits)}
            if n == "citations":
                o["sources"] = dict(v.sources)
                if v.relevance.enabled:
                    o["relevance"] = {"fail_unsupported": v.relevance.fail_unsupported}
            if n == "facts":
                o.update(backends=dict(v.backends), max_claims=v.max_claims, max_rounds=v.max_rounds, k=v.k,
                         weights=dict(v.weights))
            if n == "planner":
                o.update(when=v.when, high_risk=v.high_risk, max_steps=v.max_steps, templates=v.templates)
            out[n] = o
        return out


#: Every verifier a policy can name, in run order.
VERIFIER_NAMES = ("arithmetic", "code", "citations", "facts", "planner")


class VerificationModel(_Strict):
    """The verifier model (docs/design.md "The verifier model"): ``model`` plans and judges (null =
    the client's model on the client's upstream; any model a configured upstream serves, e.g. a
    cheaper one; an upstream other than the client's must hold its own ``api_key``).
    ``max_tokens``: completion cap per call. Every call is charged to ``budgets.request``.
    ``trust_model_passes``: count a ``pass`` that rests on the verifier model (its plan's inputs
    or assertions, its verdict) as decided, so it can make an answer ``passed``. Off in every
    shipped policy (docs/design.md "Asymmetric trust": the verifier model reads untrusted text and
    may be talked into anything); its failures drive re-asks either way."""

    model: str | None = None
    max_tokens: int = Field(1024, gt=0, le=32768)
    trust_model_passes: bool = False


class RiskPolicy(_Strict):
    """``threshold``: risk score (0..1) below which an answer goes through unverified."""

    threshold: float = Field(0.3, ge=0.0, le=1.0)


class SentinelPolicy(_Strict):
    """``mode``: ``off`` | ``offered`` (tool + rule injected, model may call it) | ``forced``
    (offered, plus one forced ``verify_result`` call when the model answered without it).
    ``when``: ``always`` or ``multi_part`` (only when the question has several sub-tasks).
    ``max_rounds``: sentinel round trips per request."""

    mode: Literal["off", "offered", "forced"] = "off"
    when: Literal["always", "multi_part"] = "multi_part"
    max_rounds: int = Field(3, ge=0, le=10)


class CorrectionPolicy(_Strict):
    """``max_rounds``: correction rounds (re-asks with evidence). ``model``: model for the
    correction call; None = the client's model and parameters."""

    max_rounds: int = Field(3, ge=0, le=10)
    model: str | None = None


class RequestBudget(_Strict):
    """Per request: extra upstream calls, extra tokens, verification deadline (ms)."""

    extra_calls: int = Field(4, ge=0)
    extra_tokens: int = Field(8000, ge=0)
    deadline_ms: int = Field(30000, gt=0)


class DailyBudget(_Strict):
    """Per key or team per UTC day: extra tokens and extra cost (USD). None = unlimited."""

    extra_tokens: int | None = Field(None, ge=0)
    cost_usd: float | None = Field(None, ge=0)


class Budgets(_Strict):
    request: RequestBudget = Field(default_factory=RequestBudget)
    key_daily: DailyBudget = Field(default_factory=DailyBudget)
    team_daily: DailyBudget = Field(default_factory=DailyBudget)


class StreamingPolicy(_Strict):
    """``mode``: ``buffer`` (hold, verify, stream the final answer), ``passthrough`` (relay
    live, verify before ``[DONE]``, report on the last chunk; see :mod:`proxy.pipeline.streams`)
    or ``verified`` (relay unit by unit what passed, hold only the unit being checked, splice a
    correction into the same stream; :mod:`proxy.pipeline.verified_stream`).
    ``continuation``: how a ``verified`` stream asks for the rest of a corrected answer --
    ``continue`` (the evidence and "write only what follows the relayed text") or ``whole``
    (the usual correction round; the part after the relayed prefix is used).
    ``keepalive_s``: interval of SSE comment keep-alives while holding."""

    mode: Literal["buffer", "passthrough", "verified"] = "passthrough"
    continuation: Literal["continue", "whole"] = "continue"
    keepalive_s: float = Field(5.0, gt=0)


class AuditPolicy(_Strict):
    """``include_text``: put the prompt and answer text in the audit record."""

    enabled: bool = True
    include_text: bool = False


ReviewWhen = Literal["divergence", "max_retry_exceeded", "failed", "unverified", "error"]


class ReviewPolicy(_Strict):
    """Which answers go to the human review queue (:mod:`proxy.stores.review`). ``when``: any of
    ``max_retry_exceeded`` (the correction loop gave up), ``divergence`` (a correction dropped
    or reversed the claim), ``failed``, ``unverified``, ``error`` (the report's status); the
    default is the two the correction loop cannot settle (docs/review.md).
    ``include_text`` (default true): the review keeps the question, drafts and answer, masked
    by :mod:`proxy.redaction`; false keeps only the report (checks and evidence)."""

    enabled: bool = True
    when: list[ReviewWhen] = Field(default_factory=lambda: ["max_retry_exceeded", "divergence"])
    #: keep the question, the drafts and the answer (masked by proxy/redaction.py) with the
    #: review, whatever ``audit.include_text`` says: a reviewer judges text
    include_text: bool = True


OnFailure = Literal["annotate", "correct", "block", "observe"]
OnUnverified = Literal["annotate", "block"]


def _field_path(path: str) -> str:
    """Check that the dotted ``overridable`` entry names a real :class:`Policy` field
    (``on_failure``, ``sentinel.mode``, ``verifiers.code.sandbox.limits.memory`` -- keys below a
    free-form dict field such as ``options``/``limits``/``sources`` are not checked). Raises
    ValueError listing the valid names at the first part that does not exist."""
    model: Any = Policy
    parts = path.split(".") if isinstance(path, str) else []
    for i, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            where = ".".join(parts[:i]) or "policy"
            raise ValueError(f"{path!r} is not a policy field ({where} has: {', '.join(fields)})")
        ann = fields[part].annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            model = ann
        else:  # a leaf, or a free-form dict: nothing below to check
            break
    return path


class Policy(_Strict):
    """One policy. ``on_failure``: ``annotate`` (answer + report), ``correct`` (run the
    correction loop, then annotate), ``block`` (correction loop, then an OpenAI-shaped error
    carrying the report if checks still fail), ``observe`` (answer at once; verify in the
    background for metrics and audit only). ``on_unverified``: what happens to an answer whose
    report is ``unverified`` (checks attempted, none passed, none failed; docs/design.md "report"):
    ``annotate`` (the default: the answer with the report) or ``block`` (the same OpenAI-shaped
    422 as ``on_failure: block``, error code ``verification_unverified``; with ``n > 1`` only
    those choices are withheld). Under ``on_failure: observe`` nothing is ever blocked."""

    name: str = "default"
    description: str = ""
    verifiers: Verifiers = Field(default_factory=Verifiers)
    risk: RiskPolicy = Field(default_factory=RiskPolicy)
    sentinel: SentinelPolicy = Field(default_factory=SentinelPolicy)
    correction: CorrectionPolicy = Field(default_factory=CorrectionPolicy)
    on_failure: OnFailure = "correct"
    on_unverified: OnUnverified = "annotate"
    budgets: Budgets = Field(default_factory=Budgets)
    streaming: StreamingPolicy = Field(default_factory=StreamingPolicy)
    audit: AuditPolicy = Field(default_factory=AuditPolicy)
    verification: VerificationModel = Field(default_factory=VerificationModel)
    review: ReviewPolicy = Field(default_factory=ReviewPolicy)
    #: dotted field paths a request's ``veracity`` object may override ("streaming" covers
    #: "streaming.mode"); budgets and round limits may always be lowered.
    overridable: list[Annotated[str, AfterValidator(_field_path)]] = Field(default_factory=list)


# ------------------------------------------------------------------------------ loading


def _line_of(node: Any, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the YAML node at pydantic error location ``loc``."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = None
            for k, v in node.value:
                if k.value == str(part):
                    nxt = v
                    line = k.start_mark.line + 1
                    break
            if nxt is None:
                break
            node = nxt
            line = node.start_mark.line + 1 if not isinstance(node, (yaml.MappingNode,)) else line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def _parse(text: str, source: str) -> Policy:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        raise PolicyError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyError(f"{source}:1: a policy must be a mapping, got {type(data).__name__}")
    data.setdefault("name", Path(source).stem)
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = tuple(err.get("loc", ()))
            line = _line_of(node, loc)
            path = ".".join(str(p) for p in loc) or "(root)"
            msg = str(err.get("msg", "")).removeprefix("Value error, ")  # as config errors read
            lines.append(f"{source}:{line or 1}: {path}: {msg}")
        raise PolicyError("\n".join(lines), param=".".join(str(p) for p in exc.errors()[0]["loc"])) from None


def load_file(path: str | os.PathLike[str]) -> Policy:
    """Load and validate one policy file. Raises PolicyError (``file:line: field: message``
    per problem) on unreadable/invalid input. The name defaults to the file's stem."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return _parse(text, str(p))


def check_file(path: str | os.PathLike[str]) -> list[str]:
    """Validate a policy file for ``veracity policy check FILE``. Returns the list of problems
    (``file:line: field: message``); empty when the file is valid."""
    try:
        load_file(path)
    except PolicyError as exc:
        return str(exc).splitlines()
    return []


def default_policies_dir() -> Path:
    """``$VERACITY_POLICIES`` or the ``policies/`` folder next to the ``proxy`` package."""
    env = os.environ.get("VERACITY_POLICIES")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "policies"


_log = get_logger("veracity.policy")


class PolicyStore:
    """The policies of a folder (``*.yaml``/``*.yml``), by name, reloaded on change.

    ``get(name)`` is cheap: the folder is re-scanned (``stat`` per file) at most once per
    ``check_interval_s``; a changed file is re-parsed; a new file appears; a deleted one
    disappears. A file that fails to validate keeps its last good version (if any) and its
    error text is in ``errors[path]``. Thread-safe.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None, *,
                 check_interval_s: float = 1.0, extra: dict[str, Policy] | None = None):
        self.directory = Path(directory) if directory is not None else default_policies_dir()
        self.check_interval_s = check_interval_s
        self.errors: dict[str, str] = {}
        self._by_path: dict[str, tuple[float, int, Policy]] = {}
        self._extra = dict(extra or {})
        self._policies: dict[str, Policy] = {}
        self._checked = 0.0
        self._lock = threading.Lock()
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Re-scan the folder now if ``force`` or the check interval has passed."""
        now = time.monotonic()
        if not force and now - self._checked < self.check_interval_s:
            return
        with self._lock:
            self._checked = now
            seen: set[str] = set()
            changed = force
            try:
                entries = sorted(self.directory.iterdir()) if self.directory.is_dir() else []
            except OSError:
                entries = []
            for p in entries:
                if p.suffix not in (".yaml", ".yml"):
                    continue
                key = str(p)
                try:
                    st = p.stat()
                except OSError:
                    continue
                seen.add(key)
                old = self._by_path.get(key)
                if old is not None and old[0] == st.st_mtime and old[1] == st.st_size:
                    continue
                changed = True
                try:
                    pol = load_file(p)
                except PolicyError as exc:
                    if self.errors.get(key) != str(exc):  # once per distinct error, not per re-scan
                        _log.warning("policy_invalid", file=key, error=str(exc),
                                     kept=("the last good version" if old is not None else "none (not loaded)"))
                    self.errors[key] = str(exc)
                    if old is not None:  # keep the last good version, but note the mtime
                        self._by_path[key] = (st.st_mtime, st.st_size, old[2])
                    continue
                self.errors.pop(key, None)
                self._by_path[key] = (st.st_mtime, st.st_size, pol)
            for key in list(self._by_path):
                if key not in seen:
                    del self._by_path[key]
                    self.errors.pop(key, None)
                    changed = True
            if changed:
                pols = dict(self._extra)
                for _, _, pol in self._by_path.values():
                    pols[pol.name] = pol
                self._policies = pols

    def names(self) -> list[str]:
        """Names of the loaded policies."""
        self.refresh()
        return sorted(self._policies)

    def get(self, name: str) -> Policy:
        """The policy ``name``; PolicyError(status 400, param ``x-veracity-policy``) if unknown.
        The built-in ``default`` (all defaults) exists even without files."""
        self.refresh()
        pol = self._policies.get(name)
        if pol is None:
            if name == "default":
                return Policy()
            known = ", ".join(sorted(set(self._policies) | {"default"}))
            if not self.directory.is_dir():
                known += f" (the policy folder {self.directory} does not exist)"
            raise PolicyError(f"unknown policy {name!r}; known: {known}", param="x-veracity-policy", status=400)
        return pol


# ---------------------------------------------------------------------------- selection


@dataclass(slots=True)
class KeyGrant:
    """What the caller's key allows: its ``policy`` name, its ``team``, whether the
    ``x-veracity-policy`` header may choose another policy (``allow_policy_header``)."""

    policy: str = "default"
    team: str = "default"
    allow_policy_header: bool = False
    key_id: str = "anonymous"


# Fields that may only go down in an override (a client cannot buy itself more work).
_LOWER_ONLY = {
    ("budgets", "request", "extra_calls"), ("budgets", "request", "extra_tokens"),
    ("budgets", "request", "deadline_ms"), ("correction", "max_rounds"), ("sentinel", "max_rounds"),
}


def _flatten(d: Any, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(d, dict) and d:
        out = []
        for k, v in d.items():
            out.extend(_flatten(v, prefix + (str(k),)))
        return out
    return [(prefix, d)]


def _allowed(path: tuple[str, ...], overridable: list[str]) -> bool:
    dotted = ".".join(path)
    return any(dotted == o or dotted.startswith(o + ".") for o in overridable)


def _describe(policy: Policy, chosen_by: str | None) -> str:
    """How a 403 names the policy: ``this key's policy 'x'`` when it is the key's own, else
    ``the policy 'x' (chosen by <chosen_by>)``, e.g. by the ``x-veracity-policy`` header."""
    if chosen_by is None:
        return f"this key's policy {policy.name!r}"
    return f"the policy {policy.name!r} (chosen by {chosen_by})"


def apply_overrides(policy: Policy, overrides: Any, *, chosen_by: str | None = None) -> Policy:
    """``policy`` with the request's ``veracity`` object applied.

    A field may change when its dotted path (or a parent) is in ``policy.overridable``.
    Budget and round-limit fields (``budgets.request.*``, ``correction.max_rounds``,
    ``sentinel.max_rounds``) may always be lowered, never raised: a value above the policy's
    is a PolicyError(status 403, param ``veracity.<path>``) naming the policy's cap, as for a
    field the policy does not allow (a client cannot buy itself more work, and a request that
    asked for more must not silently get less). PolicyError(400) for a value that does not
    validate. ``chosen_by``: where the policy came from when it is not the key's own
    (``the x-veracity-policy header``, ``veracity.policy``), for the 403 message.
    """
    if overrides is None:
        return policy
    if not isinstance(overrides, dict):
        raise PolicyError("'veracity' must be an object", param="veracity")
    overrides = {k: v for k, v in overrides.items() if k not in ("policy",)}
    if not overrides:
        return policy
    base = policy.model_dump()
    merged = policy.model_dump()
    for path, value in _flatten(overrides):
        if path in (("name",), ("overridable",), ("description",)):
            raise PolicyError(f"veracity.{'.'.join(path)} cannot be overridden", param="veracity." + ".".join(path), status=403)
        cur: Any = base
        for part in path:
            if not isinstance(cur, dict) or part not in cur:
                raise PolicyError(f"unknown policy field veracity.{'.'.join(path)}",
                                  param="veracity." + ".".join(path))
            cur = cur[part]
        if path in _LOWER_ONLY:
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise PolicyError(f"veracity.{'.'.join(path)} must be a number", param="veracity." + ".".join(path))
            if value > cur:
                raise PolicyError(f"veracity.{'.'.join(path)}: {value!r} is above the cap of "
                                  f"{_describe(policy, chosen_by)}, {cur!r}; an override may only lower "
                                  "budgets and round limits", param="veracity." + ".".join(path), status=403)
        elif not _allowed(path, policy.overridable):
            allowed = ", ".join(policy.overridable) or "nothing"
            raise PolicyError(f"{_describe(policy, chosen_by)} does not allow overriding "
                              f"veracity.{'.'.join(path)} (it allows: {allowed})",
                              param="veracity." + ".".join(path), status=403)
        tgt = merged
        for part in path[:-1]:
            tgt = tgt[part]
        tgt[path[-1]] = value
    try:
        return Policy.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise PolicyError(f"veracity.{where}: {err['msg']}", param=f"veracity.{where}") from None


def resolve(store: PolicyStore, grant: KeyGrant, header: str | None = None,
            overrides: Any = None) -> Policy:
    """Select the policy for one request (see module docstring).

    A header naming the key's own policy is always accepted; another name needs
    ``grant.allow_policy_header`` (else PolicyError 403, param ``x-veracity-policy``).
    ``overrides`` may also name a policy (``{"policy": "strict"}``) under the same rule.
    """
    name = grant.policy
    wanted, chosen_by = header, "the x-veracity-policy header"
    if not wanted and isinstance(overrides, dict) and isinstance(overrides.get("policy"), str):
        wanted, chosen_by = overrides["policy"], "veracity.policy"
    if wanted and wanted != name:
        if not grant.allow_policy_header:
            raise PolicyError(f"this key may not choose policy {wanted!r}", param="x-veracity-policy",
                              status=403)
        name = wanted
    else:
        chosen_by = None  # the key's own policy
    try:
        policy = store.get(name)
    except PolicyError as exc:
        if name != grant.policy:  # the client's choice (header / veracity.policy): its error
            raise
        # the key's own policy is missing (file deleted or broken since start-up): the
        # gateway's config is wrong, not the request
        raise PolicyError(f"Veracity is misconfigured: the policy {name!r} of key "
                          f"{grant.key_id!r} does not exist ({exc}); fix keys[].policy in the "
                          "config or restore the policy file", param=None, status=500,
                          code="veracity_config") from None
    return apply_overrides(policy, overrides, chosen_by=chosen_by)
