"""The AMTFV planner: a verification plan of tool calls, executed by the gateway (docs/verifier-model.md,
"The planner": template plans, model plans, the executor and its guard against verification
hallucination; docs/design.md vocabulary "plan").

    from verifiers import planner
    tools = planner.Toolbox(sandbox=box, citation_sources=None, search_facts=None)
    outcome = await planner.acheck(answer, question, model=chat_model, rule_checks=checks,
                                   use_model=True, tools=tools, max_steps=6, deadline_s=10.0)
    outcome.checks, outcome.error, outcome.plan_source, outcome.plan

One entry point, :func:`acheck`:

1. **Template plans** first (``templates=True``; no model call): a named interest formula with
   its inputs in the question, or a question that states an expression whose value the draft
   states (:mod:`verifiers.planner._templates`). When one applies, no model is asked.
2. Otherwise, with ``use_model`` and a ``model``, the **verifier model writes a plan**
   (:class:`Plan`, via :func:`verifiers.model.ask_json` with ``purpose="plan"``: one repair,
   then ``error``). ``verification_needed: false`` gives no checks.
3. The **executor** (:mod:`verifiers.planner._execute`) runs the steps in order on the
   :class:`Toolbox`, short-circuits on the first ``fail``, rejects steps whose claim is not the
   draft's own text or whose comparison would only restate the plan, and merges steps that a
   rule check (``rule_checks``) already decided.

Failures degrade, never raise: an invalid plan is ``outcome.error`` (the gateway adds one
``error`` check; rule checks stand), a spent budget is one ``unknown`` check, the deadline
turns the steps not finished into ``unknown``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from verifiers._types import Check
from verifiers.model import ChatModel, ask_json
from verifiers.planner._execute import VERIFIER, Executor, Step
from verifiers.planner._prompt import Plan, PlanStep, messages
from verifiers.planner._templates import template_steps
from verifiers.planner._tools import Toolbox

__all__ = ["acheck", "PlanOutcome", "Toolbox", "Plan", "PlanStep", "template_plan"]


@dataclass(slots=True)
class PlanOutcome:
    """What :func:`acheck` returns.

    ``checks``: the planner's checks (``verifier="planner"``), in step order. ``error``: why
    the model's plan was rejected (``invalid: ...``, ``model_error: ...``), else None.
    ``plan_source``: ``"template"`` | ``"model"`` | None (no plan was made). ``plan``: the plan
    executed as JSON (``verification_needed``, ``verification_steps``, ``executed``: per step
    ``checked`` | ``rejected`` | ``merged`` | ``not_run`` | ``deadline``), or None.
    ``model_calls``: verifier-model calls this run made."""

    checks: list[Check] = field(default_factory=list)
    error: str | None = None
    plan_source: str | None = None
    plan: dict[str, Any] | None = None
    model_calls: int = 0


def template_plan(question: str | None, answer: str) -> list[dict[str, Any]]:
    """The template steps for ``(question, answer)`` as plan-step dicts ([] when no template
    applies). No model, no tool run: for benchmarks and inspection."""
    return [s.to_dict() for s in template_steps(question, answer)]


def _plan_dict(needed: bool, steps: list[Step], log: list[dict[str, Any]], extra: dict[str, Any] | None = None,
               ) -> dict[str, Any]:
    d: dict[str, Any] = {"verification_needed": needed, "verification_steps": [s.to_dict() for s in steps],
                         "executed": log}
    if extra:
        d.update(extra)
    return d


#: Characters of the answer and of the question the planner reads (the same cut as the facts
#: verifier's claim finder; the planner prompt sends at most 12,000 of the draft). A 1 MB draft
#: took 4.7 s in the template matcher, on the event loop (measured); cut, it takes milliseconds.
MAX_TEXT_CHARS = 20_000


async def acheck(answer: str, question: str | None = None, *, model: ChatModel | None = None,
                 rule_checks: list[Check] | tuple[Check, ...] = (), use_model: bool = False,
                 tools: Toolbox | None = None, max_steps: int = 6, deadline_s: float = 10.0,
                 templates: bool = True) -> PlanOutcome:
    """Plan and execute the verification of ``answer`` (see the module docstring).

    Args:
        answer: the draft (untrusted text).
        question: the user's question, or None (templates need it).
        model: the verifier model; asked only when ``use_model`` and no template applied.
        rule_checks: checks of the rule-based verifiers on the same answer (duplicates merged).
        use_model: let the model write a plan (policy ``planner.when``).
        tools: the :class:`Toolbox` (default: the three pure tools).
        max_steps: steps executed at most (later steps are dropped and logged).
        (The first :data:`MAX_TEXT_CHARS` characters of ``answer`` and ``question`` are read.)
        deadline_s: seconds for planning and executing together.
        templates: try template plans first (policy ``planner.templates``).

    Returns:
        A :class:`PlanOutcome`. Never raises for model or tool failures.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, float(deadline_s))
    tools = tools if tools is not None else Toolbox()
    rules = list(rule_checks or ())
    if not isinstance(answer, str) or not answer.strip():
        return PlanOutcome()
    # a prefix: spans found in it are spans of the whole answer
    answer = answer[:MAX_TEXT_CHARS]
    question = question[:MAX_TEXT_CHARS] if isinstance(question, str) else question
    if templates:
        # CPU-bound matching runs off the event loop (other requests go on meanwhile)
        steps = (await asyncio.to_thread(template_steps, question, answer))[:max_steps]
        if steps:
            ex = Executor(answer, question, tools, rules, "template", deadline)
            checks = await ex.run(steps)
            if any(e["status"] in ("checked", "merged", "deadline") for e in ex.log):
                extra = {"templates": sorted({s.extra.get("template") for s in steps})}
                return PlanOutcome(checks=checks, plan_source="template", plan=_plan_dict(True, steps, ex.log, extra))
    if not use_model or model is None:
        return PlanOutcome()
    calls_before = len(getattr(model, "calls", []) or [])
    msgs = messages(question, answer, tools.describe())
    remaining = deadline - loop.time()
    try:
        if remaining <= 0:
            raise asyncio.TimeoutError
        reply = await asyncio.wait_for(ask_json(model, msgs, Plan, purpose="plan"), remaining)
    except asyncio.TimeoutError:
        return PlanOutcome(checks=[Check(verifier=VERIFIER, claim="", outcome="unknown", confidence=0.0,
                                         evidence={"plan_source": "model", "reason": "deadline"},
                                         note="verification deadline: the planner did not answer in time")],
                           plan_source=None, model_calls=_calls(model) - calls_before)
    used = _calls(model) - calls_before
    if reply.value is None:
        if reply.unavailable:
            return PlanOutcome(checks=[Check(verifier=VERIFIER, claim="", outcome="unknown", confidence=0.0,
                                             evidence={"plan_source": "model", "reason": reply.error},
                                             note=f"planner not asked: {reply.error}"[:300])],
                               model_calls=used)
        return PlanOutcome(error=reply.error or "invalid plan", plan_source="model", model_calls=used)
    plan: Plan = reply.value
    if not plan.verification_needed:
        return PlanOutcome(plan_source="model", plan=_plan_dict(False, [], []), model_calls=used)
    steps = [_step(s) for s in plan.verification_steps]
    dropped = steps[max_steps:]
    steps = steps[:max_steps]
    ex = Executor(answer, question, tools, rules, "model", deadline)
    checks = await ex.run(steps)
    log = ex.log + [{"step_id": s.step_id, "status": "not_run", "reason": "max_steps"} for s in dropped]
    return PlanOutcome(checks=checks, plan_source="model", model_calls=used,
                       plan=_plan_dict(True, steps + dropped, log, {"repaired": reply.repaired} if reply.repaired else None))


def _step(s: PlanStep) -> Step:
    return Step(step_id=s.step_id, tool=s.tool, input=dict(s.input), claim=s.claim, description=s.description,
                expected_check=s.expected_check, confidence=0.85)


def _calls(model: Any) -> int:
    return len(getattr(model, "calls", None) or [])
