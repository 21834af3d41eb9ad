"""Step 8 of the sequence and its side effects: publishing, audit, review, blocking, headers.

:func:`block` applies ``on_failure: block`` / ``on_unverified: block`` (:func:`blocked_statuses`;
with several choices only the failing ones are withheld), :func:`respond` builds the
:class:`~proxy.pipeline.plan.PipelineResult` (the 422 :func:`blocked_body`, or the answer with
its ``veracity`` report and the ``x-veracity-risk`` / ``x-veracity-coverage`` headers),
:func:`finish` records one verified answer (metrics, daily budget charge, audit record, review
queue), :func:`publish` stores the report for ``GET /v1/veracity/reports/{id}``, and
:func:`observe_in_background` / :func:`observe_job` are ``on_failure: observe``: answer at once,
verify afterwards.
"""

from __future__ import annotations

import time
from typing import Any

from proxy.observability import verification_metrics as vmetrics
from proxy.pipeline import choices
from proxy.pipeline.correction import walked_states
from proxy.pipeline.plan import PipelineResult, Plan, RequestContext, key_id
from proxy.pipeline.verify import verify_only
from proxy.wire.messages import answer_text, has_text
from proxy.policy import Policy
from proxy.stores import reports, review
from proxy.stores.audit import make_record
from proxy.wire.errors import error_body
from verifiers import Report

__all__ = ["PENDING_STREAM", "PENDING_OBSERVE", "created", "publish", "published", "finish", "risk_header",
           "blocked_body", "blocked_statuses", "block", "respond", "observe_in_background", "observe_job"]


#: the stored record of a stream whose verification has not ended (GET /v1/veracity/reports/{id}: 202)
PENDING_STREAM = {"status": "pending", "reason": "the stream's verification has not finished"}


PENDING_OBSERVE = {"status": "pending", "reason": "observe: the answer is being verified in the background"}


def created(ctx: RequestContext) -> int:
    """Unix time (s) the request arrived: the stored report's ``created``."""
    return int(time.time() - ctx.timing.elapsed())


async def publish(ctx: RequestContext, report: Report | dict[str, Any], *, pending: bool = False) -> None:
    """Store the request's report for ``GET /v1/veracity/reports/{request_id}`` (:mod:`proxy.stores.reports`);
    ``pending``: not final yet (a stream verifying, observe mode's background check)."""
    await reports.publish(ctx.gateway.reports, ctx.principal, ctx.request_id, ctx.model, created(ctx),
                          report.to_dict() if isinstance(report, Report) else report, pending=pending)


async def published(ctx: RequestContext, result: PipelineResult) -> PipelineResult:
    """``result`` after storing its report (the dict already in the response; a blocked
    answer's is in its error body)."""
    body = result.response
    stored = body.get("veracity") if result.status_code < 400 else (body.get("error") or {}).get("veracity")
    await publish(ctx, stored or result.report)
    return result


async def finish(ctx: RequestContext, plan: Plan, completion: dict[str, Any], report: Report,
                  checks_seen: bool = False, blocked: bool = False) -> None:
    """Metrics, daily budget charge, the audit record and the review queue (:mod:`proxy.stores.review`)
    of one verified answer (``checks_seen``: the checks were already counted run by run;
    ``blocked``: the client gets an error instead of the answer, which the review says). Sets
    the report's ``states`` (:func:`proxy.pipeline.correction.walked_states`) first, so every verifying
    path (non-stream, buffer, passthrough, observe) reports the states actually walked."""
    rt = ctx.gateway.runtime
    if report.choices is None:  # n > 1: each choice's entry carries its own states
        report.states = walked_states(report)
    cost = rt.prices.cost(ctx.model, plan.usage["prompt"], plan.usage["completion"]) if report.cost.tokens else 0.0
    vmetrics.observe_report(report, model=ctx.model, team=ctx.team, checks=not checks_seen,
                            policy=plan.policy.name, cost_usd=cost)
    ctx.log["veracity_checks"] = len(report.checks)
    if report.cost.tokens:
        try:
            await rt.daily.charge(key_id(ctx.principal), ctx.team, report.cost.tokens, cost)
        except Exception as exc:  # noqa: BLE001 - the store is down: the answer still goes out
            ctx.log["budget_store_error"] = type(exc).__name__
    verified = report.checks or report.status != "skipped" or (plan.sentinel_info or {}).get("injected")
    if rt.audit is not None and plan.policy.audit.enabled and verified:
        rt.audit.write(make_record(request_id=ctx.request_id, team=ctx.team, key=ctx.principal.key_name,
                                   model=ctx.model, policy=plan.policy.name, report=report.to_dict(),
                                   prompt=plan.body.get("messages"), answer=answer_text(completion),
                                   include_text=plan.policy.audit.include_text))
    reason = review.review_reason(report, plan.policy)
    if reason is not None:  # unsettled answers go to people (proxy/stores/review.py)
        rid = await review.submit(ctx.gateway.open_review, review.make_review(
            request_id=ctx.request_id, model=ctx.model, team=ctx.team, key=ctx.principal.key_name,
            policy=plan.policy.name, reason=reason, report=report.to_dict(), question=plan.question,
            drafts=plan.drafts, answer=answer_text(completion), include_text=plan.policy.review.include_text,
            blocked=blocked))
        ctx.log["review_id"] = rid


def risk_header(report: Report | None) -> dict[str, str]:
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


def blocked_body(report: Report) -> dict[str, Any]:
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


def block(plan: Plan, completion: dict[str, Any], report: Report) -> tuple[dict[str, Any], bool]:
    """``on_failure: block`` / ``on_unverified: block``: ``(completion to send, block the whole
    response?)``. A one-choice answer whose status the policy blocks (:func:`blocked_statuses`)
    blocks the response (HTTP 422); with several choices only those choices are withheld
    (:func:`choices.withhold`), and the response is blocked when every choice is."""
    blocked = blocked_statuses(plan.policy)
    entries = report.choices
    if not entries:
        return completion, report.status in blocked
    # per choice: the request's status may be `error` (STATUS_ORDER) while a choice is unverified
    statuses = [e.get("status") for e in entries]
    if not any(st in blocked for st in statuses):
        return completion, False
    if all(st in blocked for st in statuses):
        return completion, True
    return choices.withhold(completion, report, blocked)[0], False


def respond(ctx: RequestContext, plan: Plan, completion: dict[str, Any], report: Report) -> PipelineResult:
    headers = {**ctx.upstream.headers, **risk_header(report)}
    completion, blocked = block(plan, completion, report)
    if blocked:
        vmetrics.observe_blocked(ctx.model, ctx.team, plan.policy.name)
        return PipelineResult(response=blocked_body(report), report=report, headers=headers, status_code=422)
    completion["veracity"] = report.to_dict()
    return PipelineResult(response=completion, report=report, headers=headers)


async def observe_in_background(ctx: RequestContext, plan: Plan, draft: dict[str, Any]) -> Report:
    """Observe mode: start verification in the background; return the report for the reply.
    The report store gets a pending record first, then the job's final report
    (:func:`observe_job`); without a job (nothing to verify, shed) the reply's report."""
    report = Report(status="skipped", reason="observe: verified in the background for metrics and audit")
    report.policy = plan.policy.name
    report.states = walked_states(report)
    if has_text(draft) and not plan.skip_reason:
        await publish(ctx, PENDING_OBSERVE, pending=True)  # written before the job can write its own
        if ctx.gateway.runtime.spawn(observe_job(ctx, plan, draft)) is not None:
            return report
    await publish(ctx, report)
    return report


async def observe_job(ctx: RequestContext, plan: Plan, completion: dict[str, Any]) -> None:
    """Observe mode's background verification: metrics, audit, review queue, and the final
    report in the report store (an ``error`` report when verification itself broke)."""
    try:
        report = await verify_only(plan, completion)
        report.policy = plan.policy.name
        report.observe = True
        await finish(ctx, plan, completion, report)
    except Exception as exc:  # noqa: BLE001 - background work must never surface
        report = Report(status="error", reason=f"observe: background verification failed ({type(exc).__name__})")
        report.policy = plan.policy.name
        report.observe = True
    try:
        await publish(ctx, report)
    except Exception:  # noqa: BLE001
        pass
