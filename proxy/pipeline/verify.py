"""Steps 5-7 of the sequence: risk score, tiered verification, facts, ``n > 1``, correction.

:func:`verify_text` is one answer's verification under a policy (the verifiers the risk
triggers and the policy enables, within the request deadline; the rule tiers first, then the
planner; the facts verifier grounded in the request's documents); :func:`verify_and_correct` is
the non-stream and ``buffer`` path's step: the sentinel's rounds (:mod:`proxy.pipeline.sentinel`),
then verification and the evidence-based correction loop (:mod:`proxy.pipeline.correction`),
per choice when ``n > 1`` (:mod:`proxy.pipeline.choices`). :func:`verify_only` verifies without
correcting (answers already sent: ``passthrough``, ``observe``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from proxy.observability import verification_metrics as vmetrics
from proxy.pipeline import choices, sentinel
from proxy.gateway import VerificationResources
from proxy.pipeline.correction import Complete, Verify, correct, walked_states
from proxy.wire.messages import choice_text, completion_text, content_text, has_text
from proxy.pipeline.plan import Plan, RequestContext, counting
from proxy.pipeline.verifier_model import GatewayChatModel
from proxy.policy import Policy
from proxy.stores import review
from proxy.stores.budget import RequestBudget
from verifiers import risk as risk_mod
from verifiers import Check, Report
from verifiers.run import (CitationsOptions, FactsOptions, PlannerOptions, add_unread, averify,
                           options_of)

__all__ = ["verify_text", "verify_and_correct", "verify_only", "skip_report", "has_text", "record_settled",
           "sentinel_entry", "GROUNDING_MIN_CHARS"]


async def verify_text(policy: Policy, question: str | None, text: str, budget: RequestBudget, *,
                      model: GatewayChatModel | None = None, messages: Any = None,
                      resources: VerificationResources | None = None) -> Report:
    """Risk-score ``text`` and run the verifiers the risk triggers and the policy enables,
    within the request budget's deadline. Low risk -> ``skipped``. With every verifier
    disabled nothing could run, so the answer is not even risk-scored (``skipped``, reason
    "no verifier enabled", no ``risk``): checks off costs no more than plain pass-through.

    ``model``: the request's verifier model (planner, facts, citation relevance); its calls
    made during this run are added to ``report.cost`` and ``report.extra["verifier_model"]``.
    ``messages``: the client's messages, the grounding context of the ``facts`` verifier.
    ``resources``: the facts verdict caches and code sandboxes kept between answers (the
    gateway's); without them, ones made for this call and closed when it returns."""
    if resources is None:
        resources = VerificationResources()
        try:
            return await verify_text(policy, question, text, budget, model=model, messages=messages,
                                     resources=resources)
        finally:
            await resources.aclose()
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
        raw = v.run_options()
        options = options_of({n: raw[n] for n in names})  # only the verifiers that run
        calls_before = len(model.calls) if model is not None else 0
        tokens_before = model.tokens if model is not None else 0
        if "planner" in names:
            planner = PlannerOptions.of(options["planner"])
            planner.model, planner.risk_score = model, r.score
            planner.sandbox = raw["code"]["sandbox"] if v.code.enabled else None
            planner.citation_sources = raw["citations"]["sources"] if v.citations.enabled else None
            planner.search_facts = (_search_facts_tool(policy, question, model, messages, budget, resources)
                                    if v.facts.enabled else None)
        if "facts" in names:
            facts = FactsOptions.of(options["facts"])
            facts.model = model if v.facts.use_model else None
            facts.context_messages = messages if isinstance(messages, list) else None
            facts.cache = resources.facts_cache(v.facts.cache)
        if v.citations.relevance.enabled and "citations" in names:
            CitationsOptions.of(options["citations"]).model = model
        report = await averify(text, {"question": question, "verifiers": names, "force": True, "options": options,
                                      "deadline_s": budget.remaining_s()}, risk=r,
                               trust_model_passes=policy.verification.trust_model_passes,
                               unchecked_facts=None if v.facts.enabled
                               else "the policy does not enable the facts verifier", unread=False,
                               sandboxes=resources.sandboxes)
        if model is not None and len(model.calls) > calls_before:
            new_calls = model.calls[calls_before:]
            report.cost.verifier_calls += len(new_calls)
            report.cost.tokens += model.tokens - tokens_before
            report.verifier_model = {"model": model.model, "calls": [c.to_dict() for c in new_calls]}
    report.risk = r.to_dict()
    add_unread(report, r.unread_checks(enabled))
    return report


def _search_facts_tool(policy: Policy, question: str | None, model: GatewayChatModel | None, messages: Any,
                       budget: RequestBudget,
                       resources: VerificationResources) -> Callable[[str], Awaitable[dict[str, Any]]]:
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
                               cache=resources.facts_cache(f.cache),
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


async def verify_and_correct(ctx: RequestContext, plan: Plan, request: dict[str, Any],
                              draft: dict[str, Any]) -> tuple[dict[str, Any], Report]:
    policy, complete = plan.policy, counting(ctx, plan)
    if plan.sentinel_on:
        settled = await sentinel.settle(request, draft, complete, mode=policy.sentinel.mode,
                                        max_rounds=policy.sentinel.max_rounds, budget=plan.budget)
        draft = settled.completion
        record_settled(plan, settled)
    t_verify = time.perf_counter()
    text = completion_text(draft)
    rounds = policy.correction.max_rounds if policy.on_failure in ("correct", "block") else 0
    if len(choices.choice_list(draft)) > 1:  # n > 1: every choice on its own (proxy/pipeline/choices.py)
        text = None
        draft, report = await _verify_choices(ctx, plan, draft, complete, rounds)
    else:
        report = skip_report(plan, text)
        if report is None:
            draft, report = await _verify_one(ctx, plan, plan.body, draft, text, complete, rounds)
            _correction_metrics([report])
    report.policy = policy.name
    if policy.verifiers.facts.unconfirmed_note and text is not None:
        draft = _with_unconfirmed_note(draft, report, request)
    if (added := sentinel_entry(plan, report, completion_text(draft))) is not None:
        vmetrics.observe_checks(Report(checks=[added]), model=ctx.model, team=ctx.team)  # the runs' checks were counted run by run
    report.cost.ms = (time.perf_counter() - t_verify) * 1000.0
    if report.risk is None and text and policy.verifiers.enabled():
        report.risk = risk_mod.score(plan.question, text).to_dict()
    return draft, report


def record_settled(plan: Plan, settled: sentinel.SettleResult) -> None:
    """Keep the sentinel's record (``plan.sentinel_info``) and count its extra tokens."""
    schema = sentinel.overhead_tokens_cached()
    plan.sentinel_info = {"injected": True, "schema_tokens": schema, **settled.info}
    vmetrics.EXTRA_TOKENS.labels("sentinel").inc(settled.info["extra_tokens"])
    if schema:
        vmetrics.EXTRA_TOKENS.labels("sentinel_schema").inc(schema)


def sentinel_entry(plan: Plan, report: Report, answer: str | None = None) -> Check | None:
    """The report's ``sentinel`` entry (injected or why not) and the sentinel's extra calls and
    tokens in ``report.cost``; when its rounds ran out unready, its verdict (a ``sentinel`` check
    on the model's word, the status, the exhaustion ``reason`` in the language of ``answer``:
    :func:`proxy.pipeline.sentinel.exhaustion_verdict`). Returns that check, else None."""
    if plan.sentinel_info is not None:
        report.sentinel = plan.sentinel_info
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
    appended to choice 0's text when claims stayed unconfirmed (``report.extra["unconfirmed"]``) and
    no check failed (a failed answer is corrected, annotated or blocked instead). The note is a
    template, never generated text (docs/facts.md: unknowns stated honestly, in a fixed form). When
    appending would break what the client parses (:func:`_note_blocked`: JSON mode, tool calls, a
    JSON answer) the answer is left as it is and the note goes to the report only
    (``report.extra["unconfirmed_note"]`` and ``["unconfirmed_note_not_appended"]``: why)."""
    claims = report.unconfirmed
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
    report.unconfirmed_note = note
    blocked = _note_blocked(request or {}, msg)
    if blocked is not None:
        report.unconfirmed_note_not_appended = blocked
        return draft
    out = copy.deepcopy(draft)
    out["choices"][0]["message"]["content"] = msg["content"].rstrip() + "\n\n" + note
    return out


def _verifier(ctx: RequestContext, plan: Plan, draft: str = "first") -> Verify:
    """``verify(text) -> Report`` for the first draft (``draft="first"``) or the correction
    loop (``"correction"``): :func:`verify_text` within the request budget; every draft's
    checks are counted in the metrics (each choice's, each round's) with that ``draft`` label."""
    async def verify(t: str) -> Report:
        rep = await verify_text(plan.policy, plan.question, t, plan.budget, model=plan.model,
                                messages=plan.messages, resources=plan.resources)
        vmetrics.observe_checks(rep, model=ctx.model, team=ctx.team, policy=plan.policy.name, draft=draft)
        return rep
    return verify


async def _verify_one(ctx: RequestContext, plan: Plan, body: dict[str, Any], draft: dict[str, Any],
                      text: str, complete: Complete, rounds: int,
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
        report.budget_stop = True  # read by the caller's metrics (_correction_metrics)
    return draft, report


def _correction_metrics(reports: list[Report]) -> None:
    """Request-level metrics of the correction loops of one response (one report per choice):
    one ``veracity_budget_exhausted_total{scope="request"}`` when any loop was cut by the
    budget or deadline, and the loops' tokens in ``veracity_extra_tokens_total{kind="correction"}``."""
    if any([r.budget_stop for r in reports]):
        vmetrics.BUDGET_EXHAUSTED.labels("request").inc()
    corrected = [r for r in reports if r.correction is not None]
    if corrected:
        vmetrics.EXTRA_TOKENS.labels("correction").inc(sum(r.cost.tokens for r in corrected))


async def _verify_choices(ctx: RequestContext, plan: Plan, draft: dict[str, Any], complete: Complete,
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
            return skip_report(plan, text or "") or await verify(text or "")
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
        # as for one choice (verify_and_correct): the choice's `cost.ms` is the wall time its
        # verification added, its own correction rounds included (not only the last draft's checks)
        rep.cost.ms = spent[i] * 1000.0
        rep.states = walked_states(rep)
        final.append((index, rep))
    _correction_metrics([rep for _, rep in final])
    return draft, choices.combine(final)


def skip_report(plan: Plan, text: str) -> Report | None:
    """The ``skipped`` report when this answer is not verified (a plan-level reason such as low
    risk or budget, or no answer text: tool calls only / empty), else ``None``."""
    if plan.skip_reason:
        return Report(status="skipped", reason=plan.skip_reason)
    if not text:
        return Report(status="skipped", reason="no answer text to verify (tool calls or empty)")
    return None


async def verify_only(plan: Plan, completion: dict[str, Any]) -> Report:
    """Verify every choice of ``completion`` without correcting it (passthrough streams,
    observe): :func:`verify_text` on choice 0, or with several choices on each choice
    concurrently, combined by :func:`choices.combine`. A choice without text is ``skipped``."""
    async def one(single: dict[str, Any]) -> Report:
        text = completion_text(single)
        return skip_report(plan, text) or await verify_text(plan.policy, plan.question, text or "", plan.budget,
                                                         model=plan.model, messages=plan.messages,
                                                         resources=plan.resources)

    parts = choices.split(completion)
    if len(parts) <= 1:
        return await one(completion)
    if plan.skip_reason:
        return Report(status="skipped", reason=plan.skip_reason)
    reports = await asyncio.gather(*(one(single) for _, single in parts))
    for rep in reports:
        rep.states = walked_states(rep)
    return choices.combine([(index, rep) for (index, _), rep in zip(parts, reports)])
