"""The chat-completion pipeline: what happens to one request between auth and response.

``proxy/app.py`` turns HTTP into a :class:`RequestContext` + the request body (a dict the
gateway does not own: every field is forwarded unchanged unless a step here changes it on
purpose), calls :func:`chat_completion` or :func:`chat_completion_stream`, and turns the result
back into HTTP (status, headers ``x-veracity-status`` / ``x-veracity-overhead-ms`` /
``x-request-id``, metrics, the request log line).

The sequence (DESIGN.md "The path of one request"), in :func:`chat_completion`:

1. ``plan``: resolve the policy (the key's; ``x-veracity-policy`` when the key allows it;
   the request's ``veracity`` object within the policy's ``overridable``), check the daily
   budgets, start the request budget; the ``veracity`` field is never sent upstream.
2. ``sentinel.inject`` (policy ``sentinel.mode``; never when the client's ``tool_choice`` is
   ``none``/``required``/forces its own tool; streams too, ``buffer`` and ``passthrough``).
3. ``upstream.complete``; 4. ``sentinel.settle`` (``verify_result`` calls intercepted).
5-7. ``correction.correct``: risk score -> verifiers (only those the risk triggers and the
   policy enables) -> evidence-based correction rounds within budget and deadline. With
   several choices (``n > 1``) each choice is verified and corrected on its own, concurrently,
   within the one request budget (:func:`_verify_choices`, :mod:`proxy.pipeline.choices`).
8. ``on_failure``: ``annotate`` / ``correct`` return the answer with the report, ``block``
   returns an OpenAI-shaped 422 error carrying the report (with several choices: withholds
   only the failing ones, 422 when all fail), ``observe`` answers at once and verifies in the
   background. ``on_unverified: block`` does the same for an ``unverified`` report (no check
   failed, none passed; :func:`blocked_statuses`).
Side effects: metrics (:mod:`proxy.observability.verification_metrics`), daily budget charge, audit record.

Streaming (:func:`chat_completion_stream`): ``buffer`` holds the stream (keep-alive comments),
runs the same sequence, then streams the final answer as valid chunks; ``passthrough`` relays
live and sends the report before ``[DONE]`` (with the sentinel offered, turns that may call
``verify_result`` are held and only the final turn is relayed, :func:`_sentinel_stream`);
``observe`` relays live and verifies in the background. Both verifying modes end with the report: on the last chunk with a
``finish_reason`` (one choice, no usage chunk asked), else in a ``choices: []`` chunk.

Contract for the steps:

* ``ctx.upstream.complete(body) -> dict`` and ``ctx.upstream.open_stream(body)`` raise
  :class:`proxy.wire.errors.UpstreamError` (status/body/headers/reason); letting it propagate makes
  the app answer with the upstream's error (or 502/504). Every call's waiting time is added to
  ``ctx.timing.upstream_s`` automatically, so ``x-veracity-overhead-ms`` stays "gateway time
  excluding upstream" even with extra correction rounds.
* Raise :class:`proxy.wire.errors.GatewayError` for a client-facing error of the gateway's own.
* The response dict keeps every upstream field; the pipeline adds the top-level ``veracity``
  report (:meth:`verifiers._types.Report.to_dict`).
* Streaming: :func:`chat_completion_stream` must raise *before* returning for failures that
  happen before the first byte (they become normal JSON errors); afterwards, failures are
  turned into a final ``data: {"error": ...}`` event by :func:`relay`.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy.pipeline import choices

from proxy.observability import metrics

from proxy.stores import reports

from proxy.stores import review

from proxy import runtime

from proxy.pipeline import sentinel
from proxy.observability import verification_metrics as vmetrics
from proxy.stores.audit import make_record
from proxy.auth import Principal
from proxy.stores.budget import RequestBudget, is_token_count

from proxy.config import GatewayConfig
from proxy.pipeline.correction import choice_text, completion_text, correct, walked_states
from proxy.wire.errors import GatewayError, UpstreamError, error_body, sse_error_event
from proxy.policy import KeyGrant, Policy, PolicyError, resolve
from proxy.wire.sse import IncompleteStream, assemble, parse_stream
from proxy.pipeline.streaming import (DONE_FRAME, completion_frames, has_finish, hold, include_usage, report_frame,
                             report_on_last_chunk, with_report, without_upstream_report)
from proxy.upstreams.clients import BoundUpstream, Timing, UpstreamStream
from proxy.pipeline.verifier_model import GatewayChatModel
from verifiers import risk as risk_mod
from verifiers._types import Check, Report
from verifiers.run import content_text, last_user_text, run as run_verifiers, status_of


@dataclass(slots=True)
class RequestContext:
    """Everything one request carries through the pipeline.

    ``request_id``: the ``x-request-id`` echoed to the client and logged.
    ``model``: the requested model name; ``upstream``: the upstream serving it, bound to this
    request (see :class:`proxy.upstreams.clients.BoundUpstream`). ``principal``: who called (team,
    virtual key name, policy name). ``policy``: the policy *name* chosen for this request
    (the key's, or ``x-veracity-policy`` when the key allows it). ``headers``: the client's
    request headers (lower-case names). ``timing``: the request clock. ``log``: extra fields
    for the request's log line (steps may add to it; never put secrets or, unless
    ``config.logging.log_content``, prompt/answer text in it).
    """

    request_id: str
    model: str
    upstream: BoundUpstream
    principal: Principal
    policy: str
    headers: Mapping[str, str]
    timing: Timing
    config: GatewayConfig
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


# ------------------------------------------------------------------------------ the sequence


async def chat_completion(ctx: RequestContext, body: dict[str, Any]) -> PipelineResult:
    """Non-stream chat completion (see the module doc for the steps). Raises UpstreamError
    for a failed first upstream call and GatewayError for a policy the key may not use."""
    plan = await _plan(ctx, body)
    if plan.checks_off:
        # checks off: nothing can be verified, corrected, charged or audited -> forward only
        draft = await ctx.upstream.complete(plan.body)
        report = checks_off_report(plan.policy)
        ctx.log["veracity_checks"] = 0
        return await _published(ctx, _respond(ctx, plan, draft, report))
    if plan.policy.on_failure == "observe":
        draft = await ctx.upstream.complete(plan.body)
        report = await _observe_in_background(ctx, plan, draft)
        return _respond(ctx, plan, draft, report)
    request, plan.sentinel_on = _inject_sentinel(plan, plan.body)
    draft = await ctx.upstream.complete(request)
    plan.start_verification()
    completion, report = await _verify_and_correct(ctx, plan, request, draft)
    completion, blocked = _block(plan, completion, report)  # before the audit record, which says what was withheld
    await _finish(ctx, plan, completion, report, checks_seen=True, blocked=blocked)
    return await _published(ctx, _respond(ctx, plan, completion, report))


async def chat_completion_stream(ctx: RequestContext, body: dict[str, Any]) -> StreamResult:
    """Streaming chat completion. The upstream stream is opened and its first event awaited
    here, so an upstream that fails before sending anything yields a JSON error (raised)."""
    plan = await _plan(ctx, body)
    mode = "observe" if plan.policy.on_failure == "observe" else plan.policy.streaming.mode
    request = plan.body
    if mode in ("buffer", "passthrough"):
        request, plan.sentinel_on = _inject_sentinel(plan, plan.body)
    stream = await ctx.upstream.open_stream(request)
    try:
        await stream.peek()
    except BaseException:
        await stream.aclose()
        raise
    report = Report(status="pending", reason=f"streaming {mode}: the report is sent in the last chunk")  # type: ignore[arg-type]
    if mode == "observe":
        report.status, report.reason = "skipped", "observe: verified in the background"
        report.extra["policy"] = plan.policy.name
        report.extra["states"] = walked_states(report)
        events = _observe_stream(ctx, plan, stream, report)
    elif mode == "passthrough" and plan.sentinel_on:
        events = _sentinel_stream(ctx, plan, request, stream, report)
    elif mode == "passthrough":
        events = _passthrough_stream(ctx, plan, stream, report)
    else:
        events = _buffer_stream(ctx, plan, request, stream, report)
    ctx.log["veracity_mode"] = mode
    await _publish(ctx, _PENDING_STREAM if mode != "observe" else _PENDING_OBSERVE, pending=True)
    return StreamResult(events=events, report=report, headers={**stream.headers, **_risk_header(None)})


async def verify_request(config: GatewayConfig, principal: Principal, headers: Mapping[str, str],
                         body: dict[str, Any], request_id: str = "") -> dict[str, Any]:
    """``POST /v1/veracity/verify``: check ``{"messages": [...], "answer": "..."}`` with the
    caller's policy, without calling an upstream (no correction). Returns ``{"veracity":
    report}``. Raises GatewayError (400) for a malformed body or a policy the key may not use."""
    answer = body.get("answer")
    if not isinstance(answer, str):
        raise GatewayError(400, "'answer' must be a string", code="invalid_request", param="answer")
    messages = body.get("messages")
    if messages is not None and not isinstance(messages, list):
        raise GatewayError(400, "'messages' must be a list", code="invalid_request", param="messages")
    policy = _resolve_policy(config, principal, headers, body.get("veracity"))
    question = body.get("question") if isinstance(body.get("question"), str) else last_user_text(messages)
    budget = RequestBudget.from_policy(policy.budgets.request)
    t0 = time.perf_counter()
    report = await verify_text(policy, question, answer, budget, messages=messages)
    report.cost.ms = (time.perf_counter() - t0) * 1000.0
    report.extra["policy"] = policy.name
    report.extra["states"] = walked_states(report)
    model = "_offline"  # a fixed label: client-given names would make metric cardinality unbounded
    vmetrics.observe_report(report, model=model, team=principal.team)
    rt = runtime.get(config)
    if rt.audit is not None and policy.audit.enabled:
        rt.audit.write(make_record(request_id=request_id, team=principal.team, key=principal.key_name, model=model,
                                   policy=policy.name, report=report.to_dict(), prompt=messages, answer=answer,
                                   include_text=policy.audit.include_text))
    return {"object": "veracity.report", "veracity": report.to_dict()}


# ------------------------------------------------------------------------------------ steps


@dataclass(slots=True)
class _Plan:
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

    def start_verification(self) -> None:
        """Start the request budget's clock: the deadline covers verification and correction,
        not the client's own upstream call."""
        self.budget = RequestBudget.from_policy(self.policy.budgets.request)
        if self.model is not None:
            self.model.budget = self.budget


@functools.lru_cache(maxsize=4096)
def _auth_hash(auth: str) -> str:
    return "pt-" + hashlib.sha256(auth.encode()).hexdigest()[:16]


def _key_id(principal: Principal) -> str:
    """Budget identity of the caller: the virtual key's name, or in pass-through auth a short
    hash of the client's Authorization header (so each upstream key has its own daily
    budget); never the key itself."""
    if principal.key_name:
        return principal.key_name
    if principal.upstream_auth:
        return _auth_hash(principal.upstream_auth)
    return "anonymous"


def _resolve_policy(config: GatewayConfig, principal: Principal, headers: Mapping[str, str],
                    overrides: Any) -> Policy:
    try:
        rt = runtime.get(config)
    except (ValueError, OSError) as exc:  # bad `policies`/`verification` section, unwritable audit path
        raise GatewayError(500, f"Veracity is misconfigured: {exc}", type="server_error",
                           code="veracity_config") from None
    grant = KeyGrant(policy=principal.policy, team=principal.team,
                     allow_policy_header=principal.allow_policy_header, key_id=_key_id(principal))
    try:
        return resolve(rt.policies, grant, headers.get("x-veracity-policy"), overrides)
    except PolicyError as exc:
        etype = ("permission_error" if exc.status == 403 else "server_error" if exc.status >= 500
                 else "invalid_request_error")
        raise GatewayError(exc.status, str(exc), type=etype, code=exc.code, param=exc.param) from None


async def _plan(ctx: RequestContext, body: dict[str, Any]) -> _Plan:
    policy = _resolve_policy(ctx.config, ctx.principal, ctx.headers, body.get("veracity"))
    forwarded = {k: v for k, v in body.items() if k != "veracity"} if "veracity" in body else body
    ctx.log["policy"] = policy.name
    rt = runtime.get(ctx.config)
    skip = None
    b = policy.budgets
    if forwards_only(policy):
        # checks off (see chat_completion): no extra tokens can be spent, nothing to budget
        return _Plan(policy=policy, body=forwarded, question=None, budget=RequestBudget.from_policy(b.request),
                     skip_reason=None, t0=time.perf_counter(), checks_off=True)
    if b.key_daily.extra_tokens is not None or b.key_daily.cost_usd is not None or \
            b.team_daily.extra_tokens is not None or b.team_daily.cost_usd is not None:
        try:
            skip = await rt.daily.check(_key_id(ctx.principal), ctx.principal.team,
                                        b.key_daily, b.team_daily)
        except Exception as exc:  # a budget store outage must not fail requests
            skip = None
            ctx.log["budget_store_error"] = type(exc).__name__
        if skip:
            vmetrics.BUDGET_EXHAUSTED.labels("key" if skip.startswith("key") else "team").inc()
    plan = _Plan(policy=policy, body=forwarded, question=last_user_text(forwarded.get("messages")),
                 budget=RequestBudget.from_policy(b.request), skip_reason=skip, t0=time.perf_counter(),
                 messages=forwarded.get("messages"))
    if needs_model(policy):
        plan.model = verifier_model(ctx, plan)
    return plan


def needs_model(policy: Policy) -> bool:
    """True when a verifier of ``policy`` may call the verifier model (model-written plans,
    model-judged facts, citation relevance)."""
    v = policy.verifiers
    return ((v.planner.enabled and v.planner.when != "never") or (v.facts.enabled and v.facts.use_model)
            or (v.citations.enabled and v.citations.relevance.enabled))


def verifier_model(ctx: RequestContext, plan: _Plan) -> GatewayChatModel:
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


def _inject_sentinel(plan: _Plan, body: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    s = plan.policy.sentinel
    if plan.skip_reason or s.mode == "off":
        return body, False
    multi = bool(risk_mod.question_signals(plan.question))
    ok, why = sentinel.should_inject(body, s.mode, s.when, multi_part=multi)
    if not ok:
        plan.sentinel_info = {"injected": False, "reason": why}
        return body, False
    return sentinel.inject(body), True


def _counting(ctx: RequestContext, plan: _Plan):
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


async def verify_text(policy: Policy, question: str | None, text: str, budget: RequestBudget, *,
                      model: GatewayChatModel | None = None, messages: Any = None) -> Report:
    """Risk-score ``text`` and run the verifiers the risk triggers and the policy enables,
    within the request budget's deadline. Low risk -> ``skipped``. With every verifier
    disabled nothing could run, so the answer is not even risk-scored (``skipped``, reason
    "no verifier enabled", no ``risk``): checks off costs no more than plain pass-through.

    ``model``: the request's verifier model (planner, facts, citation relevance); its calls
    made during this run are added to ``report.cost`` and ``report.extra["verifier_model"]``.
    ``messages``: the client's messages, the grounding context of the ``facts`` verifier."""
    enabled = policy.verifiers.enabled()
    if not enabled:
        return Report(status="skipped", reason="no verifier enabled")
    r = risk_mod.score(question, text)
    names = [v for v in r.verifiers if v in enabled]
    v = policy.verifiers
    # the app put documents in the prompt: ground the answer in them whatever the risk score
    grounding = "facts" in enabled and _grounding_context(v.facts.backends, messages)
    if grounding and "facts" not in names:
        names.append("facts")
    risky = r.score >= policy.risk.threshold
    if "planner" in enabled and "planner" not in names and risky and (names or v.planner.when != "never"):
        # template plans cost nothing (with a verifier that triggered); model plans follow
        # planner.when, also for a risky answer no rule could read (AMTFV: plan what rules miss)
        names.append("planner")
    if not risky and not grounding:
        report = Report(status="skipped", reason="risk below threshold")
    elif not names:
        report = Report(status="skipped", reason="no enabled verifier triggered")
    else:
        options = v.run_options()
        calls_before = len(model.calls) if model is not None else 0
        tokens_before = model.tokens if model is not None else 0
        if "planner" in names:
            options["planner"].update(model=model, risk_score=r.score,
                                      sandbox=options["code"]["sandbox"] if v.code.enabled else None,
                                      citation_sources=options["citations"]["sources"] if v.citations.enabled else None,
                                      search_facts=_search_facts_tool(policy, question, model, messages, budget)
                                      if v.facts.enabled else None)
        if "facts" in names:
            options["facts"].update(model=model if v.facts.use_model else None,
                                    context_messages=messages if isinstance(messages, list) else None,
                                    cache=runtime.facts_cache(v.facts.cache))
        if v.citations.relevance.enabled and "citations" in names:
            options["citations"]["model"] = model
        report = await run_verifiers(text, names, question=question, options=options,
                                     deadline_s=budget.remaining_s(),
                                     trust_model_passes=policy.verification.trust_model_passes,
                                     unchecked_facts=None if v.facts.enabled
                                     else "the policy does not enable the facts verifier")
        if model is not None and len(model.calls) > calls_before:
            new_calls = model.calls[calls_before:]
            report.cost.verifier_calls += len(new_calls)
            report.cost.tokens += model.tokens - tokens_before
            report.extra["verifier_model"] = {"model": model.model,
                                              "calls": [c.to_dict() for c in new_calls]}
    report.risk = r.to_dict()
    _add_unread(report, r.unread_checks(enabled))
    return report


def _add_unread(report: Report, unread: list[Any]) -> None:
    """Add the risk scan's ``unknown`` checks for an answer longer than it scans
    (:meth:`verifiers.risk.RiskScore.unread_checks`, issue 14 §5): a long answer is never
    ``skipped`` as if nothing in it were checkable; its status is recomputed from the checks
    (``unverified`` when nothing else was checked)."""
    if not unread:
        return
    was = report.status
    report.checks.extend(unread)
    report.status = status_of(report.checks, trust_model_passes=report.trust_model_passes)  # type: ignore[assignment]
    if was == "skipped" and report.reason:
        report.reason += "; the answer is longer than the risk scan reads (see the risk check)"


def _search_facts_tool(policy: Policy, question: str | None, model: GatewayChatModel | None, messages: Any,
                       budget: RequestBudget):
    """The planner's ``search_facts`` tool: ``await tool(claim) -> {"outcome", "verdict",
    "evidence", "note", "confidence", "sources", "basis"}`` -- one claim through the facts verifier with the
    policy's backends (``verifiers.facts.acheck``, ``max_claims=1``), inside the request deadline."""
    f = policy.verifiers.facts

    async def search_facts(claim: str) -> dict[str, Any]:
        from verifiers.facts import acheck
        from verifiers.facts.backends import aclose_backends, make_backends

        backends = make_backends(f.backends, context_messages=messages if isinstance(messages, list) else None)
        try:
            out = await acheck(claim, question, model=model if f.use_model else None, backends=backends,
                               max_claims=1, max_rounds=f.max_rounds, k=f.k, weights=f.weights,
                               cache=runtime.facts_cache(f.cache),
                               deadline_s=max(0.05, min(f.timeout_ms / 1000.0, budget.remaining_s()) * 0.9))
        finally:
            await aclose_backends(backends)
        if not out.checks:
            return {"outcome": "unknown", "note": "no check-worthy claim", "sources": out.sources}
        c = out.checks[0]
        verdict = {"pass": "supported", "fail": "refuted"}.get(c.outcome, "not_enough_info")
        return {"outcome": c.outcome, "verdict": verdict, "evidence": c.expected if c.expected is not None
                else c.evidence, "note": c.note, "confidence": c.confidence, "sources": out.sources,
                "basis": c.basis}  # what the verdict rests on; None: the planner counts it as the model's

    return search_facts


#: Characters of non-assistant message text from which a request counts as carrying documents
#: (a RAG prompt); below it the context is a question, not a source.
GROUNDING_MIN_CHARS = 200


def _grounding_context(backends: Mapping[str, Any], messages: Any) -> bool:
    """True when ``backends`` use the request's context and its messages carry documents
    (system/developer/tool text, or user text beyond the question) of at least
    :data:`GROUNDING_MIN_CHARS` characters."""
    use = backends.get("use") if isinstance(backends, Mapping) else None
    if not isinstance(use, list) or "context" not in use or not isinstance(messages, list):
        return False
    total = 0
    for m in messages:
        if isinstance(m, Mapping) and m.get("role") != "assistant":
            total += len(content_text(m.get("content")))
    return total >= GROUNDING_MIN_CHARS


async def _verify_and_correct(ctx: RequestContext, plan: _Plan, request: dict[str, Any],
                              draft: dict[str, Any]) -> tuple[dict[str, Any], Report]:
    policy, complete = plan.policy, _counting(ctx, plan)
    if plan.sentinel_on:
        settled = await sentinel.settle(request, draft, complete, mode=policy.sentinel.mode,
                                        max_rounds=policy.sentinel.max_rounds, budget=plan.budget)
        draft = settled.completion
        _settled(plan, settled)
    t_verify = time.perf_counter()
    text = completion_text(draft)
    rounds = policy.correction.max_rounds if policy.on_failure in ("correct", "block") else 0
    if len(choices.choice_list(draft)) > 1:  # n > 1: every choice on its own (proxy/pipeline/choices.py)
        text = None
        draft, report = await _verify_choices(ctx, plan, draft, complete, rounds)
    else:
        report = _skipped(plan, text)
        if report is None:
            draft, report = await _verify_one(ctx, plan, plan.body, draft, text, complete, rounds)
            _correction_metrics([report])
    report.extra["policy"] = policy.name
    if policy.verifiers.facts.unconfirmed_note and text is not None:
        draft = _with_unconfirmed_note(draft, report, request)
    if (added := _sentinel_entry(plan, report, completion_text(draft))) is not None:
        vmetrics.observe_checks(Report(checks=[added]), model=ctx.model, team=ctx.team)  # the runs' checks were counted run by run
    report.cost.ms = (time.perf_counter() - t_verify) * 1000.0
    if report.risk is None and text and policy.verifiers.enabled():
        report.risk = risk_mod.score(plan.question, text).to_dict()
    return draft, report


def _settled(plan: _Plan, settled: sentinel.SettleResult) -> None:
    """Keep the sentinel's record (``plan.sentinel_info``) and count its extra tokens."""
    schema = sentinel.overhead_tokens_cached()
    plan.sentinel_info = {"injected": True, "schema_tokens": schema, **settled.info}
    vmetrics.EXTRA_TOKENS.labels("sentinel").inc(settled.info["extra_tokens"])
    if schema:
        vmetrics.EXTRA_TOKENS.labels("sentinel_schema").inc(schema)


def _sentinel_entry(plan: _Plan, report: Report, answer: str | None = None) -> Check | None:
    """The report's ``sentinel`` entry (injected or why not) and the sentinel's extra calls and
    tokens in ``report.cost``; when its rounds ran out unready, its verdict (a ``sentinel`` check
    on the model's word, the status, the exhaustion ``reason`` in the language of ``answer``:
    :func:`proxy.pipeline.sentinel.exhaustion_verdict`). Returns that check, else None."""
    if plan.sentinel_info is not None:
        report.extra["sentinel"] = plan.sentinel_info
        if plan.sentinel_info.get("injected"):
            report.cost.tokens += plan.sentinel_info.get("extra_tokens", 0)
            report.cost.upstream_calls += plan.sentinel_info.get("extra_calls", 0)
            return sentinel.exhaustion_verdict(report, plan.sentinel_info, answer, plan.question)
    return None


def _note_blocked(request: Mapping[str, Any], msg: Mapping[str, Any]) -> str | None:
    """Why no text may be appended to this answer, or None: the client asked for JSON
    (``response_format`` ``json_object``/``json_schema``: OpenAI "JSON mode" and "Structured
    Outputs" promise content that parses), the turn carries tool or function calls (the client's
    code acts on it), or the content is itself a JSON document (prompted JSON)."""
    rf = request.get("response_format") if isinstance(request, Mapping) else None
    if isinstance(rf, Mapping) and rf.get("type") in ("json_object", "json_schema"):
        return f"response_format {rf.get('type')}"
    if msg.get("tool_calls") or msg.get("function_call"):
        return "the answer carries tool calls"
    content = msg.get("content")
    body = content.strip() if isinstance(content, str) else ""
    if body[:1] in ("{", "[") or body.startswith("```json"):
        try:
            json.loads(body.removeprefix("```json").removesuffix("```"))
            return "the answer is a JSON document"
        except ValueError:
            pass
    return None


def _with_unconfirmed_note(draft: dict[str, Any], report: Report,
                           request: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``draft`` with the facts verifier's templated note (``verifiers.facts.unconfirmed_note``)
    appended to choice 0's text when claims stayed unconfirmed (``report.extra["unconfirmed"]``)
    and no check failed (a failed answer is corrected, annotated or blocked instead). The note is
    a template, never generated text (design: state unknowns honestly, in a fixed form). When
    appending would break what the client parses (:func:`_note_blocked`: JSON mode, tool calls,
    a JSON answer) the answer is left as it is and the note goes to the report only
    (``report.extra["unconfirmed_note"]`` and ``["unconfirmed_note_not_appended"]``: why)."""
    claims = report.extra.get("unconfirmed")
    if not claims or report.failed_checks:
        return draft
    try:
        from verifiers.facts import unconfirmed_note
        msg = draft["choices"][0]["message"]
    except (ImportError, KeyError, IndexError, TypeError):
        return draft
    if not isinstance(msg, dict) or not isinstance(msg.get("content"), str):
        return draft
    note = unconfirmed_note([str(c) for c in claims])
    if not note:
        return draft
    report.extra["unconfirmed_note"] = note
    blocked = _note_blocked(request or {}, msg)
    if blocked is not None:
        report.extra["unconfirmed_note_not_appended"] = blocked
        return draft
    out = copy.deepcopy(draft)
    out["choices"][0]["message"]["content"] = msg["content"].rstrip() + "\n\n" + note
    return out


def _verifier(ctx: RequestContext, plan: _Plan, draft: str = "first"):
    """``verify(text) -> Report`` for the first draft (``draft="first"``) or the correction
    loop (``"correction"``): :func:`verify_text` within the request budget; every draft's
    checks are counted in the metrics (each choice's, each round's) with that ``draft`` label."""
    async def verify(t: str) -> Report:
        rep = await verify_text(plan.policy, plan.question, t, plan.budget, model=plan.model,
                                messages=plan.messages)
        vmetrics.observe_checks(rep, model=ctx.model, team=ctx.team, policy=plan.policy.name, draft=draft)
        return rep
    return verify


async def _verify_one(ctx: RequestContext, plan: _Plan, body: dict[str, Any], draft: dict[str, Any],
                      text: str, complete, rounds: int,
                      report: Report | None = None) -> tuple[dict[str, Any], Report]:
    """Verify one choice's ``text`` (unless ``report`` is given) and, when a check failed, run
    the correction loop with up to ``rounds`` rounds on ``draft`` (a one-choice completion).
    Returns the answer to send and its report."""
    if report is None:
        report = await _verifier(ctx, plan)(text)
    if not report.failed_checks:  # the correction loop only when something failed
        return draft, report
    plan.drafts.append(text)

    async def recording(req: dict[str, Any]) -> dict[str, Any]:  # keeps each draft for the review queue
        out = await complete(req)
        new = completion_text(out)
        if new and len(plan.drafts) < review.MAX_DRAFTS:
            plan.drafts.append(new)
        return out

    result = await correct(body, draft, complete=recording, verify=_verifier(ctx, plan, "correction"),
                           max_rounds=rounds,
                           budget=plan.budget, correction_model=plan.policy.correction.model,
                           initial_report=report)
    draft, report = result.completion, result.report
    if result.stop_reason.startswith("budget") or result.stop_reason == "deadline":
        report.reason = f"correction stopped: {result.stop_reason}"
        report.extra["budget_stop"] = True  # read (and removed) by the caller's metrics
    return draft, report


def _correction_metrics(reports: list[Report]) -> None:
    """Request-level metrics of the correction loops of one response (one report per choice):
    one ``veracity_budget_exhausted_total{scope="request"}`` when any loop was cut by the
    budget or deadline, and the loops' tokens in ``veracity_extra_tokens_total{kind="correction"}``."""
    if any([r.extra.pop("budget_stop", False) for r in reports]):
        vmetrics.BUDGET_EXHAUSTED.labels("request").inc()
    corrected = [r for r in reports if "correction" in r.extra]
    if corrected:
        vmetrics.EXTRA_TOKENS.labels("correction").inc(sum(r.cost.tokens for r in corrected))


async def _verify_choices(ctx: RequestContext, plan: _Plan, draft: dict[str, Any], complete,
                          rounds: int) -> tuple[dict[str, Any], Report]:
    """``n > 1``: verify every choice's text concurrently, then correct each failing choice on
    its own (a one-choice correction call with that choice's draft and evidence), concurrently,
    and put the corrected text back at the same ``index``. The request budget (calls, tokens,
    deadline) is shared by all choices; ``rounds`` bounds each choice's loop (the loops run side
    by side, so the request waits for at most ``rounds`` round trips). When the budget runs
    short, the first correction calls go to the failing choices in ``index`` order (each loop
    charges its call before its first await, :func:`proxy.pipeline.correction.correct`). Returns the completion and a :class:`choices.ChoicesReport`."""
    if plan.skip_reason:
        return draft, Report(status="skipped", reason=plan.skip_reason)
    parts = choices.split(draft)
    verify = _verifier(ctx, plan)
    texts = [choice_text(single["choices"][0]) for _, single in parts]

    spent = [0.0] * len(parts)  # each choice's own verification + correction wall time (s)

    async def first(i: int, text: str | None) -> Report:
        t0 = time.perf_counter()
        try:
            return _skipped(plan, text or "") or await verify(text or "")
        finally:
            spent[i] += time.perf_counter() - t0

    async def fix(i: int, single: dict[str, Any], text: str, rep: Report) -> tuple[dict[str, Any], Report]:
        t0 = time.perf_counter()
        try:  # correction_body() asks for one choice (drops `n`)
            return await _verify_one(ctx, plan, plan.body, single, text, complete, rounds, report=rep)
        finally:
            spent[i] += time.perf_counter() - t0

    reports = list(await asyncio.gather(*(first(i, t) for i, t in enumerate(texts))))
    results = await asyncio.gather(*(fix(i, single, text, rep)
                                     for i, ((_, single), text, rep) in enumerate(zip(parts, texts, reports))))
    final = []
    for i, ((index, single), (answer, rep)) in enumerate(zip(parts, results)):
        if answer is not single:
            draft = choices.put_back(draft, index, answer)
        # as for one choice (_verify_and_correct): the choice's `cost.ms` is the wall time its
        # verification added, its own correction rounds included (not only the last draft's checks)
        rep.cost.ms = spent[i] * 1000.0
        rep.extra["states"] = walked_states(rep)
        final.append((index, rep))
    _correction_metrics([rep for _, rep in final])
    return draft, choices.combine(final)


def _skipped(plan: _Plan, text: str) -> Report | None:
    """The ``skipped`` report when this answer is not verified (a plan-level reason such as low
    risk or budget, or no answer text: tool calls only / empty), else ``None``."""
    if plan.skip_reason:
        return Report(status="skipped", reason=plan.skip_reason)
    if not text:
        return Report(status="skipped", reason="no answer text to verify (tool calls or empty)")
    return None


#: the stored record of a stream whose verification has not ended (GET /v1/veracity/reports/{id}: 202)
_PENDING_STREAM = {"status": "pending", "reason": "the stream's verification has not finished"}
_PENDING_OBSERVE = {"status": "pending", "reason": "observe: the answer is being verified in the background"}


def _created(ctx: RequestContext) -> int:
    """Unix time (s) the request arrived: the stored report's ``created``."""
    return int(time.time() - ctx.timing.elapsed())


async def _publish(ctx: RequestContext, report: Report | dict[str, Any], *, pending: bool = False) -> None:
    """Store the request's report for ``GET /v1/veracity/reports/{request_id}`` (:mod:`proxy.stores.reports`);
    ``pending``: not final yet (a stream verifying, observe mode's background check)."""
    await reports.publish(ctx.config, ctx.principal, ctx.request_id, ctx.model, _created(ctx),
                          report.to_dict() if isinstance(report, Report) else report, pending=pending)


async def _published(ctx: RequestContext, result: PipelineResult) -> PipelineResult:
    """``result`` after storing its report (the dict already in the response; a blocked
    answer's is in its error body)."""
    body = result.response
    stored = body.get("veracity") if result.status_code < 400 else (body.get("error") or {}).get("veracity")
    await _publish(ctx, stored or result.report)
    return result


async def _finish(ctx: RequestContext, plan: _Plan, completion: dict[str, Any], report: Report,
                  checks_seen: bool = False, blocked: bool = False) -> None:
    """Metrics, daily budget charge, the audit record and the review queue (:mod:`proxy.stores.review`)
    of one verified answer (``checks_seen``: the checks were already counted run by run;
    ``blocked``: the client gets an error instead of the answer, which the review says). Sets
    the report's ``states`` (:func:`proxy.pipeline.correction.walked_states`) first, so every verifying
    path (non-stream, buffer, passthrough, observe) reports the states actually walked."""
    rt = runtime.get(ctx.config)
    if "choices" not in report.extra:  # n > 1: each choice's entry carries its own states
        report.extra["states"] = walked_states(report)
    cost = rt.prices.cost(ctx.model, plan.usage["prompt"], plan.usage["completion"]) if report.cost.tokens else 0.0
    vmetrics.observe_report(report, model=ctx.model, team=ctx.team, checks=not checks_seen,
                            policy=plan.policy.name, cost_usd=cost)
    ctx.log["veracity_checks"] = len(report.checks)
    if report.cost.tokens:
        try:
            await rt.daily.charge(_key_id(ctx.principal), ctx.team, report.cost.tokens, cost)
        except Exception as exc:  # noqa: BLE001 - the store is down: the answer still goes out
            ctx.log["budget_store_error"] = type(exc).__name__
    verified = report.checks or report.status != "skipped" or (plan.sentinel_info or {}).get("injected")
    if rt.audit is not None and plan.policy.audit.enabled and verified:
        rt.audit.write(make_record(request_id=ctx.request_id, team=ctx.team, key=ctx.principal.key_name,
                                   model=ctx.model, policy=plan.policy.name, report=report.to_dict(),
                                   prompt=plan.body.get("messages"), answer=_answer_text(completion),
                                   include_text=plan.policy.audit.include_text))
    reason = review.review_reason(report, plan.policy)
    if reason is not None:  # unsettled answers go to people (proxy/stores/review.py)
        rid = await review.submit(ctx.config, review.make_review(
            request_id=ctx.request_id, model=ctx.model, team=ctx.team, key=ctx.principal.key_name,
            policy=plan.policy.name, reason=reason, report=report.to_dict(), question=plan.question,
            drafts=plan.drafts, answer=_answer_text(completion), include_text=plan.policy.review.include_text,
            blocked=blocked))
        ctx.log["review_id"] = rid


def _answer_text(completion: dict[str, Any]) -> str | list[str | None] | None:
    """The answer text for the audit record: choice 0's text, or with several choices
    (``n > 1``) a list of every choice's text in order (None for a choice without text)."""
    several = choices.choice_list(completion)
    if len(several) > 1:
        return [choice_text(c) for c in several]
    return completion_text(completion)


def _risk_header(report: Report | None) -> dict[str, str]:
    """``x-veracity-risk`` (the risk score, 3 decimals) and ``x-veracity-coverage``
    (``<decided>/<units>``: check-worthy units decided on evidence the verifier model did not
    write, of those found; :func:`verifiers._types.coverage_of`) when there are checks."""
    if report is None:
        return {}
    out = {}
    if report.risk:
        out["x-veracity-risk"] = f"{report.risk.get('score', 0.0):.3f}"
    if report.checks:
        cov = report.coverage
        out["x-veracity-coverage"] = f"{cov['decided']}/{cov['units']}"
    return out


def _blocked_body(report: Report) -> dict[str, Any]:
    """The 422 body of a blocked answer (OpenAI's error shape, ``type: veracity_blocked``, the
    report in ``error.veracity``): ``code`` ``verification_failed`` when a check failed (with
    several choices: in any choice), else ``verification_unverified`` (``on_unverified: block``:
    nothing in the answer could be verified)."""
    failed = report.failed_checks
    if failed or report.status == "failed":
        what = "; ".join(f"{c.verifier}: {c.claim}"[:120] for c in failed[:3])
        message, code = f"Veracity blocked the answer: {len(failed)} check(s) failed ({what}).", "verification_failed"
    else:
        message, code = choices.unverified_message("Veracity blocked the answer", report.checks), \
            "verification_unverified"
    body = error_body(message, type="veracity_blocked", code=code)
    body["error"]["veracity"] = report.to_dict()
    return body


def blocked_statuses(policy: Policy) -> frozenset[str]:
    """The report statuses ``policy`` blocks: ``failed`` under ``on_failure: block``,
    ``unverified`` under ``on_unverified: block`` (never under ``on_failure: observe``, which
    answers before verifying)."""
    if policy.on_failure == "observe":
        return frozenset()
    out = {"failed"} if policy.on_failure == "block" else set()
    if policy.on_unverified == "block":
        out.add("unverified")
    return frozenset(out)


def _block(plan: _Plan, completion: dict[str, Any], report: Report) -> tuple[dict[str, Any], bool]:
    """``on_failure: block`` / ``on_unverified: block``: ``(completion to send, block the whole
    response?)``. A one-choice answer whose status the policy blocks (:func:`blocked_statuses`)
    blocks the response (HTTP 422); with several choices only those choices are withheld
    (:func:`choices.withhold`), and the response is blocked when every choice is."""
    blocked = blocked_statuses(plan.policy)
    entries = report.extra.get("choices")
    if not entries:
        return completion, report.status in blocked
    # per choice: the request's status may be `error` (STATUS_ORDER) while a choice is unverified
    statuses = [e.get("status") for e in entries]
    if not any(st in blocked for st in statuses):
        return completion, False
    if all(st in blocked for st in statuses):
        return completion, True
    return choices.withhold(completion, report, blocked)[0], False


def _respond(ctx: RequestContext, plan: _Plan, completion: dict[str, Any], report: Report) -> PipelineResult:
    headers = {**ctx.upstream.headers, **_risk_header(report)}
    completion, blocked = _block(plan, completion, report)
    if blocked:
        vmetrics.observe_blocked(ctx.model, ctx.team, plan.policy.name)
        return PipelineResult(response=_blocked_body(report), report=report, headers=headers, status_code=422)
    completion["veracity"] = report.to_dict()
    return PipelineResult(response=completion, report=report, headers=headers)


async def _observe_in_background(ctx: RequestContext, plan: _Plan, draft: dict[str, Any]) -> Report:
    """Observe mode: start verification in the background; return the report for the reply.
    The report store gets a pending record first, then the job's final report
    (:func:`_observe_job`); without a job (nothing to verify, shed) the reply's report."""
    report = Report(status="skipped", reason="observe: verified in the background for metrics and audit")
    report.extra["policy"] = plan.policy.name
    report.extra["states"] = walked_states(report)
    if _has_text(draft) and not plan.skip_reason:
        await _publish(ctx, _PENDING_OBSERVE, pending=True)  # written before the job can write its own
        if runtime.get(ctx.config).spawn(_observe_job(ctx, plan, draft)) is not None:
            return report
    await _publish(ctx, report)
    return report


def _has_text(completion: dict[str, Any]) -> bool:
    """True when some choice has answer text (tool calls only / empty: nothing to verify)."""
    return any(choice_text(c) for c in choices.choice_list(completion))


async def _verify_only(plan: _Plan, completion: dict[str, Any]) -> Report:
    """Verify every choice of ``completion`` without correcting it (passthrough streams,
    observe): :func:`verify_text` on choice 0, or with several choices on each choice
    concurrently, combined by :func:`choices.combine`. A choice without text is ``skipped``."""
    async def one(single: dict[str, Any]) -> Report:
        text = completion_text(single)
        return _skipped(plan, text) or await verify_text(plan.policy, plan.question, text or "", plan.budget,
                                                         model=plan.model, messages=plan.messages)

    parts = choices.split(completion)
    if len(parts) <= 1:
        return await one(completion)
    if plan.skip_reason:
        return Report(status="skipped", reason=plan.skip_reason)
    reports = await asyncio.gather(*(one(single) for _, single in parts))
    for rep in reports:
        rep.extra["states"] = walked_states(rep)
    return choices.combine([(index, rep) for (index, _), rep in zip(parts, reports)])


async def _observe_job(ctx: RequestContext, plan: _Plan, completion: dict[str, Any]) -> None:
    """Observe mode's background verification: metrics, audit, review queue, and the final
    report in the report store (an ``error`` report when verification itself broke)."""
    try:
        report = await _verify_only(plan, completion)
        report.extra["policy"] = plan.policy.name
        report.extra["observe"] = True
        await _finish(ctx, plan, completion, report)
    except Exception as exc:  # noqa: BLE001 - background work must never surface
        report = Report(status="error", reason=f"observe: background verification failed ({type(exc).__name__})")
        report.extra["policy"] = plan.policy.name
        report.extra["observe"] = True
    try:
        await _publish(ctx, report)
    except Exception:  # noqa: BLE001
        pass


# -------------------------------------------------------------------------------- streaming


async def _collect(stream: UpstreamStream) -> tuple[dict[str, Any] | None, bytes | None]:
    """Read the whole upstream stream: ``(completion, None)`` or ``(None, error_frame)``."""
    parts: list[bytes] = []
    try:
        async for blob in stream:
            parts.append(blob)
    except UpstreamError as exc:
        return None, exc.sse_event()
    parsed = parse_stream(b"".join(parts))
    if parsed.errors:
        return None, b"data: " + json.dumps(parsed.errors[0]).encode() + b"\n\n"
    try:
        return assemble(parsed.chunks, done=parsed.done, strict=True), None
    except IncompleteStream as exc:
        return None, sse_error_event(f"upstream stream ended incomplete ({'; '.join(exc.problems)})",
                                     code="upstream_stream_truncated")


def _update(target: Report, source: Report) -> None:
    for name in ("status", "checks", "risk", "rounds", "cost", "reason", "extra"):
        setattr(target, name, getattr(source, name))


def _answer_frames(ctx: RequestContext, plan: _Plan, completion: dict[str, Any], report: Report) -> list[bytes]:
    """A held answer as SSE frames: its chunks, the report, ``[DONE]``."""
    frames = completion_frames(completion, usage=include_usage(plan.body))
    return _with_report_frames(plan, frames, completion, report.to_dict(), ctx.model) + [DONE_FRAME]


async def _held_draft(plan: _Plan, stream: UpstreamStream, report: Report) -> tuple[dict[str, Any] | None, bytes | None]:
    """Collect a held stream into one completion and close it; on a failed stream the report
    says so and the error frame comes back, else the request budget's clock starts."""
    try:
        draft, err = await _collect(stream)
    finally:
        await stream.aclose()
    if err is not None:
        report.status, report.reason = "error", "upstream stream failed"
        return None, err
    plan.start_verification()
    return draft, None


async def _buffer_stream(ctx: RequestContext, plan: _Plan, request: dict[str, Any], stream: UpstreamStream,
                         report: Report) -> AsyncIterator[bytes]:
    """Buffer mode: hold the answer (keep-alives), verify and correct, then stream it."""
    async def work() -> list[bytes]:
        draft, err = await _held_draft(plan, stream, report)
        if err is not None:
            await _publish(ctx, report)
            return [err]
        completion, final = await _verify_and_correct(ctx, plan, request, draft)
        completion, blocked = _block(plan, completion, final)
        await _finish(ctx, plan, completion, final, checks_seen=True, blocked=blocked)
        _update(report, final)
        await _publish(ctx, report)  # before the client can see the end of the stream
        if blocked:
            vmetrics.observe_blocked(ctx.model, ctx.team, plan.policy.name)
            return [b"data: " + json.dumps(_blocked_body(final), default=str).encode() + b"\n\n"]
        return _answer_frames(ctx, plan, completion, final)

    stats: dict[str, Any] = {}
    try:
        async for frame in hold(work(), plan.policy.streaming.keepalive_s, stats=stats):
            yield frame
    finally:
        ctx.log["keepalives"] = stats.get("keepalives", 0)
        await stream.aclose()


def _with_report_frames(plan: _Plan, frames: list[bytes], completion: dict[str, Any] | None,
                        report: dict[str, Any], model: str) -> list[bytes]:
    """``frames`` with the report: on the usage chunk when the client asked for it, on the
    last chunk that has a ``finish_reason`` when :func:`proxy.pipeline.streaming.report_on_last_chunk`
    (no ``choices: []`` chunk the client did not ask for), else (or when there is no such
    chunk) in a ``choices: []`` chunk at the end."""
    if include_usage(plan.body) and frames and _is_usage_frame(frames[-1]):
        framed = with_report(frames[-1], report)
        if framed is not None:
            return frames[:-1] + [framed]
    if report_on_last_chunk(plan.body):
        for i in range(len(frames) - 1, -1, -1):
            if has_finish(frames[i]):
                framed = with_report(frames[i], report)
                if framed is not None:
                    return frames[:i] + [framed] + frames[i + 1:]
                break
    return frames + [report_frame(completion, report, model)]


def _is_usage_frame(frame: bytes) -> bool:
    """A ``data:`` frame whose chunk has ``choices: []`` and a ``usage`` (OpenAI's usage chunk).
    Other ``choices: []`` chunks (Azure's first chunk with ``prompt_filter_results``) are not
    usage: they are relayed in place, never held back or replaced."""
    if b'"choices"' not in frame or b"[]" not in frame or b'"usage"' not in frame:
        return False
    try:
        obj = json.loads(frame[frame.index(b"{"):])
    except (ValueError, TypeError, RecursionError):
        return False
    return isinstance(obj, dict) and obj.get("choices") == [] and obj.get("usage") is not None


async def _passthrough_stream(ctx: RequestContext, plan: _Plan, stream: UpstreamStream, report: Report, *,
                              started: bool = False,
                              frame_filter: Callable[[bytes], bytes] | None = None) -> AsyncIterator[bytes]:
    """Passthrough mode: relay live; hold back the usage chunk and ``[DONE]`` (and, when the
    report rides on the last chunk, everything from the first ``finish_reason`` on); verify;
    then send the report in the usage chunk (when the upstream sent one), on the last chunk
    with a ``finish_reason``, or in one added ``choices: []`` chunk (see
    :func:`_with_report_frames`), then ``[DONE]``. ``started``: the request budget already
    runs (the sentinel's rounds came first, :func:`_sentinel_stream`); ``frame_filter``: applied
    to every relayed piece before anything else (:class:`proxy.pipeline.sentinel.DeltaFilter`)."""
    parts: list[bytes] = []
    held: list[bytes] = []  # from the first finish_reason on, when the report rides on it
    hold_finish = report_on_last_chunk(plan.body)
    usage_frame: bytes | None = None
    done = False
    async for blob in relay(ctx, stream):
        if frame_filter is not None:
            blob = frame_filter(blob)
        if blob.endswith(DONE_FRAME):
            blob, done = blob[: -len(DONE_FRAME)], True
        if b"[]" in blob or held or (hold_finish and has_finish(blob)):
            kept = []
            for frame in blob.split(b"\n\n"):
                if not frame:
                    continue
                frame += b"\n\n"
                if _is_usage_frame(frame):
                    usage_frame = frame
                elif held or (hold_finish and has_finish(frame)):
                    held.append(frame)
                else:
                    kept.append(frame)
            blob = b"".join(kept)
        if blob:
            parts.append(blob)
            yield blob
    if not done:
        report.status, report.reason = "error", "upstream stream failed"
        await _publish(ctx, report)
        for frame in held + ([usage_frame] if usage_frame else []):
            yield frame
        return
    parsed = parse_stream(b"".join(parts + held + ([usage_frame] if usage_frame else [])))
    completion = assemble(parsed.chunks, done=True, strict=False) if parsed.chunks else {}
    final = await _passthrough_report(plan, completion, started=started)
    await _finish(ctx, plan, completion, final)
    _update(report, final)
    await _publish(ctx, report)  # before the report frame and [DONE] go out
    if usage_frame is not None:
        for frame in held:
            yield frame
        chunk = json.loads(usage_frame[usage_frame.index(b"{"):])
        chunk["veracity"] = final.to_dict()
        yield b"data: " + json.dumps(chunk, separators=(",", ":"), default=str).encode() + b"\n\n"
    else:
        for frame in _with_report_frames(plan, held, completion, final.to_dict(), ctx.model):
            yield frame
    yield DONE_FRAME


async def _passthrough_report(plan: _Plan, completion: dict[str, Any], *, started: bool = False) -> Report:
    """The report of an answer relayed in passthrough mode: verified, never corrected (it was
    already sent), with the sentinel's entry. ``started``: keep the running request budget."""
    final = _skipped(plan, completion_text(completion)) if len(choices.choice_list(completion)) <= 1 else None
    if final is None:
        t0 = time.perf_counter()
        if not started:
            plan.start_verification()
        final = await _verify_only(plan, completion)
        final.cost.ms = (time.perf_counter() - t0) * 1000.0
        if final.status == "failed":
            final.reason = "passthrough: the answer was already sent; failed checks are reported, not corrected"
        elif final.status in blocked_statuses(plan.policy):  # on_unverified: block, too late on a live stream
            final.reason = "passthrough: the answer was already sent; on_unverified: block cannot withhold it"
    final.extra["policy"] = plan.policy.name
    _sentinel_entry(plan, final, completion_text(completion))
    return final


#: the stand-in completion :func:`_sentinel_stream` gives ``sentinel.settle`` for the final turn,
#: which goes to the client live instead
_LIVE = "_veracity_live_turn"


async def _sentinel_stream(ctx: RequestContext, plan: _Plan, request: dict[str, Any], stream: UpstreamStream,
                           report: Report) -> AsyncIterator[bytes]:
    """Passthrough mode with the sentinel offered (e.g. the shipped ``agent`` policy).

    A turn that is offered ``verify_result`` is held (keep-alive comments, never relayed: it may
    call the tool), and :func:`proxy.pipeline.sentinel.settle` runs its rounds as on the non-stream
    path: the first turn is the client's stream, collected; rounds that still offer the tool
    (not ready yet, the ``forced`` check) are non-stream calls. The turn that no longer offers
    it (ready, or the last round) is streamed to the client live, through
    :class:`proxy.pipeline.sentinel.DeltaFilter` (a model that calls the tool anyway is not relayed),
    and verified as in :func:`_passthrough_stream`; when the final answer is a held turn (the
    model answered without the tool, or called only the client's tools) it is streamed from
    the assembled completion (:func:`proxy.pipeline.streaming.completion_frames`). The client sees one
    stream: comments, then one turn's chunks (one id, one ``finish_reason``), the report, then
    ``[DONE]``; the report carries the ``sentinel`` entry."""
    live: dict[str, UpstreamStream] = {}
    complete = _counting(ctx, plan)

    async def turn(req: dict[str, Any]) -> dict[str, Any]:
        if sentinel.offers_tool(req):
            return await complete(req)  # held: it may call verify_result again
        body = dict(req, stream=True)
        if isinstance(plan.body.get("stream_options"), dict):
            body["stream_options"] = plan.body["stream_options"]
        opened = await ctx.upstream.open_stream(body)
        try:
            await opened.peek()
        except BaseException:
            await opened.aclose()
            raise
        live["stream"] = opened
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""},
                             "finish_reason": "stop"}], _LIVE: True}

    async def work() -> list[bytes]:
        draft, err = await _held_draft(plan, stream, report)
        if err is not None:
            await _publish(ctx, report)
            return [err]
        settled = await sentinel.settle(request, draft, turn, mode=plan.policy.sentinel.mode,
                                        max_rounds=plan.policy.sentinel.max_rounds, budget=plan.budget)
        _settled(plan, settled)
        if settled.completion.get(_LIVE) and "stream" in live:
            return []  # the final turn is relayed live below
        completion = settled.completion
        final = await _passthrough_report(plan, completion, started=True)
        await _finish(ctx, plan, completion, final)
        _update(report, final)
        await _publish(ctx, report)
        return _answer_frames(ctx, plan, completion, final)

    stats: dict[str, Any] = {}
    try:
        async for frame in hold(work(), plan.policy.streaming.keepalive_s, stats=stats):
            yield frame
        if "stream" in live:
            async for frame in _passthrough_stream(ctx, plan, live["stream"], report, started=True,
                                                   frame_filter=sentinel.DeltaFilter()):
                yield frame
    finally:
        ctx.log["keepalives"] = stats.get("keepalives", 0)
        await stream.aclose()
        if "stream" in live:
            await live["stream"].aclose()


async def _observe_stream(ctx: RequestContext, plan: _Plan, stream: UpstreamStream,
                          report: Report) -> AsyncIterator[bytes]:
    """Observe mode: relay exactly as pass-through; verify in the background afterwards. The
    stored report becomes the background job's, else (nothing to verify, the stream cut, the
    job shed) ``report`` (``skipped``)."""
    parts: list[bytes] = []
    later = False
    try:
        async for blob in relay(ctx, stream):
            parts.append(blob)
            yield blob
        if plan.skip_reason:
            return
        parsed = parse_stream(b"".join(parts))
        if parsed.done and parsed.chunks:
            completion = assemble(parsed.chunks, done=True, strict=False)
            if _has_text(completion):
                later = runtime.get(ctx.config).spawn(_observe_job(ctx, plan, completion)) is not None
    finally:
        if not later:
            reports.publish_soon(ctx.config, ctx.principal, ctx.request_id, ctx.model, _created(ctx),
                                 report.to_dict())


async def relay(ctx: RequestContext, stream: UpstreamStream) -> AsyncIterator[bytes]:
    """Yield the upstream's SSE events as they arrive. Ends with an error event (never a
    normal stop) when the upstream drops, times out, or ends without ``finish_reason`` and
    ``data: [DONE]``. Closing this generator (client gone) closes the upstream at once."""
    try:
        async for chunk in stream:
            yield without_upstream_report(chunk)  # the report field is the gateway's alone
        state = stream.relay
        if state.errored:
            ctx.log["error_code"] = "upstream_stream_error"
        elif not (state.done and state.finished):
            missing = "finish_reason and [DONE]" if not (state.done or state.finished) else (
                "[DONE]" if not state.done else "finish_reason")
            ctx.log["error_code"] = "upstream_stream_truncated"
            metrics.UPSTREAM_ERRORS.labels("truncated").inc()
            yield sse_error_event(f"upstream stream ended without {missing}; the answer is incomplete",
                                  code="upstream_stream_truncated")
    except UpstreamError as exc:
        ctx.log["error_code"] = exc.code
        metrics.UPSTREAM_ERRORS.labels(exc.reason).inc()
        yield exc.sse_event()
    finally:
        await stream.aclose()


# ----------------------------------------------------------------------------- offline CLI


def verify_offline(path: str, *, policy: str = "default", policies_dir: str | None = None,
                   question: str | None = None, out: Any = None) -> int:
    """``veracity verify FILE``: verify answers without an upstream and print one JSON report
    per answer (``{"answer_index", "veracity"}`` per line). Exit status: 0 when no check
    failed, 1 when any failed, 2 for unreadable input or an unknown policy."""
    import asyncio
    import sys
    from pathlib import Path

    from proxy.policy import PolicyStore, load_file

    out = out or sys.stdout
    try:
        if policy.endswith((".yaml", ".yml")) and Path(policy).is_file():
            pol = load_file(policy)
        else:
            pol = PolicyStore(policies_dir).get(policy)
        raw = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (PolicyError, OSError) as exc:
        print(f"veracity: {exc}", file=sys.stderr)
        return 2
    except UnicodeDecodeError as exc:  # a binary file, or another encoding than UTF-8
        print(f"veracity: {path}: not UTF-8 text ({exc.reason} at byte {exc.start})", file=sys.stderr)
        return 2
    items = _offline_items(raw, question)
    if not items:
        print("veracity: no answer found in the input", file=sys.stderr)
        return 2

    async def go() -> list[Report]:
        reports = []
        for q, answer in items:
            reports.append(await verify_text(pol, q, answer, RequestBudget.from_policy(pol.budgets.request)))
        return reports

    failed = False
    for i, rep in enumerate(asyncio.run(go())):
        rep.extra["policy"] = pol.name
        rep.extra["states"] = walked_states(rep)
        failed |= rep.status == "failed"
        print(json.dumps({"answer_index": i, "veracity": rep.to_dict()}, ensure_ascii=False, default=str), file=out)
    return 1 if failed else 0


def _offline_items(raw: str, question: str | None) -> list[tuple[str | None, str]]:
    """(question, answer) pairs from a JSON object/list, JSONL, or plain text."""
    def item(obj: Any) -> tuple[str | None, str] | None:
        if not isinstance(obj, dict) or not isinstance(obj.get("answer"), str):
            return None
        q = obj.get("question") if isinstance(obj.get("question"), str) else last_user_text(obj.get("messages"))
        return q, obj["answer"]

    text = raw.strip()
    try:
        data = json.loads(text)
    except RecursionError:  # JSON nested ~1,000 levels deep: verify it as plain text
        return [(question, raw)] if text else []
    except ValueError:
        data = None
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            parsed = [json.loads(ln) for ln in lines]
        except (ValueError, RecursionError):
            parsed = None
        if parsed and all(isinstance(p, dict) for p in parsed):
            return [x for x in (item(p) for p in parsed) if x]
        return [(question, raw)] if text else []
    if isinstance(data, list):
        return [x for x in (item(p) for p in data) if x]
    one = item(data)
    return [one] if one else []
