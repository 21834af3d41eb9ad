"""Step 1 of the sequence, ``plan``: the request's context, its policy and its budgets.

:class:`RequestContext` is what the app hands the pipeline for one request; :func:`make_plan`
resolves the policy (the key's; ``x-veracity-policy`` when the key allows it; the request's
``veracity`` object within the policy's ``overridable``), checks the daily budgets, binds the
verifier model and returns the :class:`Plan` every later step reads. :func:`inject_sentinel`
is step 2 (docs/design.md "The path of one request"); :func:`counting` is the upstream call of the
extra rounds (sentinel, correction), counting their tokens for the daily cost budget.
:class:`PipelineResult` / :class:`StreamResult` are what the sequence returns to the app.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.auth import Principal
from proxy.gateway import Gateway, VerificationResources
from proxy.observability import verification_metrics as vmetrics
from proxy.pipeline import sentinel
from proxy.pipeline.correction import Complete, walked_states
from proxy.pipeline.verifier_model import GatewayChatModel
from proxy.policy import KeyGrant, Policy, PolicyError, resolve
from proxy.stores.budget import RequestBudget, is_token_count
from proxy.upstreams import BoundUpstream, Timing
from proxy.wire.errors import GatewayError
from verifiers import risk as risk_mod
from proxy.wire.messages import last_user_text
from verifiers import Report

__all__ = ["RequestContext", "PipelineResult", "StreamResult", "Plan", "make_plan", "resolve_policy", "key_id",
           "needs_model", "verifier_model", "forwards_only", "checks_off_report", "inject_sentinel", "counting"]

@dataclass(slots=True)
class RequestContext:
    """Everything one request carries through the pipeline.

    ``request_id``: the ``x-request-id`` echoed to the client and logged.
    ``model``: the requested model name; ``upstream``: the upstream serving it, bound to this
    request (see :class:`proxy.upstreams.BoundUpstream`). ``principal``: who called (team,
    virtual key name, policy name; the policy itself is resolved once, by the plan step,
    :func:`make_plan`). ``headers``: the client's request headers (lower-case names).
    ``timing``: the request clock. ``log``: extra fields for the request's log line (steps may
    add to it; never put secrets or, unless ``config.logging.log_content``, prompt/answer text
    in it). ``gateway``: the running :class:`proxy.gateway.Gateway` (config, runtime, stores)
    the request reaches state through.
    """

    request_id: str
    model: str
    upstream: BoundUpstream
    principal: Principal
    headers: Mapping[str, str]
    timing: Timing
    gateway: Gateway
    log: dict[str, Any] = field(default_factory=dict)
    #: ``(model name) -> upstream or None``: routes the policy's ``verification.model`` when it
    #: names another model than the client's (None: only the client's upstream is usable)
    route: Callable[[str], Any] | None = None

    @property
    def team(self) -> str:
        return self.principal.team


@dataclass(slots=True)
class PipelineResult:
    """A finished non-stream answer: ``response`` (the dict sent as JSON, ``veracity`` field
    included), ``report``, extra response ``headers`` (relayed upstream headers)."""

    response: dict[str, Any]
    report: Report
    headers: dict[str, str] = field(default_factory=dict)
    status_code: int = 200


@dataclass(slots=True)
class StreamResult:
    """An opened stream: ``events`` yields SSE bytes ready to send; ``report`` is the
    verification status known when the headers go out (``pending`` while a verifying stream
    mode has not finished; updated in place at the end); ``headers`` are relayed upstream
    headers."""

    events: AsyncIterator[bytes]
    report: Report
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class Plan:
    policy: Policy
    body: dict[str, Any]            # what goes upstream (the client's body minus `veracity`)
    question: str | None
    budget: RequestBudget
    skip_reason: str | None         # set when a daily budget is exhausted
    t0: float
    sentinel_on: bool = False
    checks_off: bool = False        # no verifier enabled and the sentinel off: forward only
    sentinel_info: dict[str, Any] | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"prompt": 0, "completion": 0})
    model: GatewayChatModel | None = None   # the verifier model, bound on first use
    messages: Any = None                    # the client's messages (grounding context)
    drafts: list[str] = field(default_factory=list)  # the drafts the correction loop saw, in order (review queue)
    resources: VerificationResources | None = None  # the gateway's facts caches and sandboxes

    def start_verification(self) -> None:
        """Start the request budget's clock: the deadline covers verification and correction,
        not the client's own upstream call."""
        self.budget = RequestBudget.from_policy(self.policy.budgets.request)
        if self.model is not None:
            self.model.budget = self.budget


@functools.lru_cache(maxsize=4096)
def _auth_hash(auth: str) -> str:
    return "pt-" + hashlib.sha256(auth.encode()).hexdigest()[:16]


def key_id(principal: Principal) -> str:
    """Budget identity of the caller: the virtual key's name, or in pass-through auth a short
    hash of the client's Authorization header (so each upstream key has its own daily
    budget); never the key itself."""
    if principal.key_name:
        return principal.key_name
    if principal.upstream_auth:
        return _auth_hash(principal.upstream_auth)
    return "anonymous"


def resolve_policy(gateway: Gateway, principal: Principal, headers: Mapping[str, str],
                    overrides: Any) -> Policy:
    try:
        rt = gateway.runtime
    except (ValueError, OSError) as exc:  # bad `policies`/`verification` section, unwritable audit path
        raise GatewayError(500, f"Veracity is misconfigured: {exc}", type="server_error",
                           code="veracity_config") from None
    grant = KeyGrant(policy=principal.policy, team=principal.team,
                     allow_policy_header=principal.allow_policy_header, key_id=key_id(principal))
    try:
        return resolve(rt.policies, grant, headers.get("x-veracity-policy"), overrides)
    except PolicyError as exc:
        etype = ("permission_error" if exc.status == 403 else "server_error" if exc.status >= 500
                 else "invalid_request_error")
        raise GatewayError(exc.status, str(exc), type=etype, code=exc.code, param=exc.param) from None


async def make_plan(ctx: RequestContext, body: dict[str, Any]) -> Plan:
    policy = resolve_policy(ctx.gateway, ctx.principal, ctx.headers, body.get("veracity"))
    forwarded = {k: v for k, v in body.items() if k != "veracity"} if "veracity" in body else body
    ctx.log["policy"] = policy.name
    rt = ctx.gateway.runtime
    skip = None
    b = policy.budgets
    if forwards_only(policy):
        # checks off (see chat_completion): no extra tokens can be spent, nothing to budget
        return Plan(policy=policy, body=forwarded, question=None, budget=RequestBudget.from_policy(b.request),
                     skip_reason=None, t0=time.perf_counter(), checks_off=True)
    if b.key_daily.extra_tokens is not None or b.key_daily.cost_usd is not None or \
            b.team_daily.extra_tokens is not None or b.team_daily.cost_usd is not None:
        try:
            skip = await rt.daily.check(key_id(ctx.principal), ctx.principal.team,
                                        b.key_daily, b.team_daily)
        except Exception as exc:  # a budget store outage must not fail requests
            skip = None
            ctx.log["budget_store_error"] = type(exc).__name__
        if skip:
            vmetrics.BUDGET_EXHAUSTED.labels("key" if skip.startswith("key") else "team").inc()
    plan = Plan(policy=policy, body=forwarded, question=last_user_text(forwarded.get("messages")),
                 budget=RequestBudget.from_policy(b.request), skip_reason=skip, t0=time.perf_counter(),
                 messages=forwarded.get("messages"), resources=ctx.gateway.verification)
    if needs_model(policy):
        plan.model = verifier_model(ctx, plan)
    return plan


def needs_model(policy: Policy) -> bool:
    """True when a verifier of ``policy`` may call the verifier model (model-written plans,
    model-judged facts, citation relevance)."""
    v = policy.verifiers
    return ((v.planner.enabled and v.planner.when != "never") or (v.facts.enabled and v.facts.use_model)
            or (v.citations.enabled and v.citations.relevance.enabled))


def verifier_model(ctx: RequestContext, plan: Plan) -> GatewayChatModel:
    """The verifier model of one request (policy ``verification.model``): the client's model
    on the client's upstream by default; another model on the upstream that serves it, which
    must hold its own ``api_key`` (the client's credentials never go to another upstream).
    Calls are charged to the request budget and their tokens to the request's usage."""
    conf = plan.policy.verification
    name = conf.model or ctx.model

    def on_usage(u: dict[str, int]) -> None:
        plan.usage["prompt"] += u.get("prompt_tokens", 0)
        plan.usage["completion"] += u.get("completion_tokens", 0)

    up = ctx.upstream
    if name != ctx.model:
        target = ctx.route(name) if ctx.route is not None else None
        if target is None:
            return GatewayChatModel(None, name, plan.budget, unavailable="no_model",
                                    max_tokens=conf.max_tokens)
        if target is not ctx.upstream.upstream:
            own_key = getattr(target.config, "api_key", None) is not None or \
                getattr(target.config, "provider", "openai") == "litellm"
            if not own_key:
                return GatewayChatModel(None, name, plan.budget, unavailable="no_model",
                                        max_tokens=conf.max_tokens)
            up = BoundUpstream(target, None, ctx.timing)
    return GatewayChatModel(up.complete, name, plan.budget, upstream=up.name, max_tokens=conf.max_tokens,
                            on_usage=on_usage)


def forwards_only(policy: Policy) -> bool:
    """True when ``policy`` verifies nothing ("checks off": every verifier disabled and the
    sentinel off): a non-stream answer is then forwarded with the ``skipped`` report
    :func:`checks_off_report` and nothing else happens (no risk score, sentinel, correction,
    budget check or charge, audit record; see :func:`chat_completion`). Cached per policy
    object by the app's lean lane (:class:`proxy.app.LeanLane`)."""
    return policy.sentinel.mode == "off" and not policy.verifiers.enabled()


def checks_off_report(policy: Policy) -> Report:
    """The report of an answer forwarded under a :func:`forwards_only` policy."""
    return Report(status="skipped", reason="no verifier enabled",
                  extra={"policy": policy.name, "states": walked_states(Report())})


def inject_sentinel(plan: Plan, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    s = plan.policy.sentinel
    if plan.skip_reason or s.mode == "off":
        return body, False
    multi = bool(risk_mod.question_signals(plan.question))
    ok, why = sentinel.should_inject(body, s.mode, s.when, multi_part=multi)
    if not ok:
        plan.sentinel_info = {"injected": False, "reason": why}
        return body, False
    return sentinel.inject(body), True


def counting(ctx: RequestContext, plan: Plan) -> Complete:
    """``ctx.upstream.complete`` that also counts the extra calls' prompt/completion tokens
    (for the daily cost budget)."""
    async def complete(req: dict[str, Any]) -> dict[str, Any]:
        out = await ctx.upstream.complete(req)
        usage = out.get("usage") if isinstance(out, dict) else None
        if isinstance(usage, dict):
            for key, field_ in (("prompt", "prompt_tokens"), ("completion", "completion_tokens")):
                n = usage.get(field_)
                plan.usage[key] += n if is_token_count(n) else 0  # a broken server's usage is not counted
        return out
    return complete
