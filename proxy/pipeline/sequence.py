"""The chat-completion sequence: what happens to one request between auth and response.

``proxy/routes/chat.py`` turns HTTP into a :class:`~proxy.pipeline.plan.RequestContext` + the request
body (a dict the gateway does not own: every field is forwarded unchanged unless a step changes
it on purpose), calls :func:`chat_completion` or :func:`chat_completion_stream`, and turns the
result back into HTTP (status, headers ``x-veracity-status`` / ``x-veracity-overhead-ms`` /
``x-request-id``, metrics, the request log line). This module is the sequence only, a list of
calls; each step lives in its own module (see :mod:`proxy.pipeline`).

The sequence (docs/design.md "The path of one request"), in :func:`chat_completion`:

1. ``plan`` (:func:`proxy.pipeline.plan.make_plan`): resolve the policy (the key's;
   ``x-veracity-policy`` when the key allows it; the request's ``veracity`` object within the
   policy's ``overridable``), check the daily budgets, start the request budget; the
   ``veracity`` field is never sent upstream.
2. ``sentinel.inject`` (policy ``sentinel.mode``; never when the client's ``tool_choice`` is
   ``none``/``required``/forces its own tool; streams too, ``buffer`` and ``passthrough``).
3. ``upstream.complete``; 4. ``sentinel.settle`` (``verify_result`` calls intercepted).
5-7. :func:`proxy.pipeline.verify.verify_and_correct`: risk score -> verifiers (only those the
   risk triggers and the policy enables) -> evidence-based correction rounds within budget and
   deadline. With several choices (``n > 1``) each choice is verified and corrected on its
   own, concurrently, within the one request budget (:mod:`proxy.pipeline.choices`).
8. ``on_failure`` (:mod:`proxy.pipeline.respond`): ``annotate`` / ``correct`` return the answer
   with the report, ``block`` returns an OpenAI-shaped 422 error carrying the report (with
   several choices: withholds only the failing ones, 422 when all fail), ``observe`` answers at
   once and verifies in the background. ``on_unverified: block`` does the same for an
   ``unverified`` report (no check failed, none passed;
   :func:`proxy.pipeline.respond.blocked_statuses`).
Side effects: metrics (:mod:`proxy.observability.verification_metrics`), daily budget charge,
audit record, review queue, the stored report (:func:`proxy.pipeline.respond.finish`).

Streaming (:func:`chat_completion_stream`): the same plan and sentinel, then the stream mode's
generator (:func:`proxy.pipeline.streams.mode_events`: ``buffer``, ``passthrough``,
``observe``, ``verified``).

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
  turned into a final ``data: {"error": ...}`` event by :func:`proxy.pipeline.streams.relay`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from proxy.auth import Principal
from proxy.gateway import Gateway
from proxy.observability import verification_metrics as vmetrics
from proxy.pipeline.correction import walked_states
from proxy.pipeline.plan import (PipelineResult, RequestContext, StreamResult, checks_off_report,
                                 forwards_only, inject_sentinel, make_plan, resolve_policy)
from proxy.pipeline.respond import (PENDING_OBSERVE, PENDING_STREAM, block, finish, observe_in_background,
                                    publish, published, respond, risk_header)
from proxy.pipeline.streams import SENTINEL_MODES, mode_events, stream_mode
from proxy.pipeline.verify import verify_and_correct, verify_text
from proxy.stores.audit import make_record
from proxy.stores.budget import RequestBudget
from proxy.wire.errors import GatewayError
from proxy.wire.messages import last_user_text
from verifiers import Report

__all__ = ["chat_completion", "chat_completion_stream", "verify_request",
           # the types and helpers the app uses with them (their homes: proxy.pipeline.plan / .verify)
           "RequestContext", "PipelineResult", "StreamResult", "forwards_only", "checks_off_report", "verify_text"]




async def chat_completion(ctx: RequestContext, body: dict[str, Any]) -> PipelineResult:
    """Non-stream chat completion (see the module doc for the steps). Raises UpstreamError
    for a failed first upstream call and GatewayError for a policy the key may not use."""
    plan = await make_plan(ctx, body)
    if plan.checks_off:
        # checks off: nothing can be verified, corrected, charged or audited -> forward only
        draft = await ctx.upstream.complete(plan.body)
        report = checks_off_report(plan.policy)
        ctx.log["veracity_checks"] = 0
        return await published(ctx, respond(ctx, plan, draft, report))
    if plan.policy.on_failure == "observe":
        draft = await ctx.upstream.complete(plan.body)
        report = await observe_in_background(ctx, plan, draft)
        return respond(ctx, plan, draft, report)
    request, plan.sentinel_on = inject_sentinel(plan, plan.body)
    draft = await ctx.upstream.complete(request)
    plan.start_verification()
    completion, report = await verify_and_correct(ctx, plan, request, draft)
    completion, blocked = block(plan, completion, report)  # before the audit record, which says what was withheld
    await finish(ctx, plan, completion, report, checks_seen=True, blocked=blocked)
    return await published(ctx, respond(ctx, plan, completion, report))


async def chat_completion_stream(ctx: RequestContext, body: dict[str, Any]) -> StreamResult:
    """Streaming chat completion. The upstream stream is opened and its first event awaited
    here, so an upstream that fails before sending anything yields a JSON error (raised)."""
    plan = await make_plan(ctx, body)
    mode = stream_mode(plan.policy)
    request = plan.body
    if mode in SENTINEL_MODES:
        request, plan.sentinel_on = inject_sentinel(plan, plan.body)
    stream = await ctx.upstream.open_stream(request)
    try:
        await stream.peek()
    except BaseException:
        await stream.aclose()
        raise
    report = Report(status="pending", reason=f"streaming {mode}: the report is sent in the last chunk")  # type: ignore[arg-type]
    events = mode_events(mode, ctx, plan, request, stream, report)
    ctx.log["veracity_mode"] = mode
    await publish(ctx, PENDING_STREAM if mode != "observe" else PENDING_OBSERVE, pending=True)
    return StreamResult(events=events, report=report, headers={**stream.headers, **risk_header(None)})


async def verify_request(gateway: Gateway, principal: Principal, headers: Mapping[str, str],
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
    policy = resolve_policy(gateway, principal, headers, body.get("veracity"))
    question = body.get("question") if isinstance(body.get("question"), str) else last_user_text(messages)
    budget = RequestBudget.from_policy(policy.budgets.request)
    t0 = time.perf_counter()
    report = await verify_text(policy, question, answer, budget, messages=messages, resources=gateway.verification)
    report.cost.ms = (time.perf_counter() - t0) * 1000.0
    report.policy = policy.name
    report.states = walked_states(report)
    model = "_offline"  # a fixed label: client-given names would make metric cardinality unbounded
    vmetrics.observe_report(report, model=model, team=principal.team)
    rt = gateway.runtime
    if rt.audit is not None and policy.audit.enabled:
        rt.audit.write(make_record(request_id=request_id, team=principal.team, key=principal.key_name, model=model,
                                   policy=policy.name, report=report.to_dict(), prompt=messages, answer=answer,
                                   include_text=policy.audit.include_text))
    return {"object": "veracity.report", "veracity": report.to_dict()}
