"""The correction loop: re-ask the model with the evidence of its failed checks.

A state machine of the AMTFV states (docs/design.md vocabulary "plan"; docs/verifier-model.md)::

    INITIAL_GENERATION -> PLANNING_VERIFICATION -> EXECUTING_VERIFICATION
        -> VERIFICATION_PASSED                                   (done)
        -> VERIFICATION_FAILED -> CORRECTING -> EXECUTING_VERIFICATION -> ...
        -> MAX_RETRY_EXCEEDED                                    (gave up; best draft returned)

It needs no HTTP: :func:`correct` takes an async ``complete(body) -> chat.completion dict``
(the upstream) and an async ``verify(text) -> Report``, so tests drive it with plain
functions.

Stop rules (first that applies): every check passes; ``max_rounds`` correction rounds done;
divergence (docs/design.md vocabulary "divergence": the new draft refuses, drops or negates the
claims it was asked to fix, :mod:`proxy.pipeline.divergence`; never ``corrected``); oscillation (the
new draft fails exactly the checks the previous one failed, with the same stated values, or a
failed claim goes back to a value it stated before a different one: A, B, A); the request
budget is exhausted (extra calls, extra tokens); the verification deadline passed; the
upstream call failed or the model answered without text. The answer returned is the best
draft seen: the fewest failed checks, ties to the latest; every round is recorded in
``report.rounds``, the states actually walked in ``report.extra["states"]``
(:func:`walked_states`), the stop in ``report.extra["correction"]`` (read by the review queue,
:func:`proxy.stores.review.review_reason`: ``divergence`` and ``MAX_RETRY_EXCEEDED`` go to people).
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from verifiers import Check, Report, decided_pass

from proxy.pipeline import divergence
from proxy.stores.budget import RequestBudget, usage_tokens
from proxy.wire.messages import completion_text

__all__ = ["State", "CorrectionResult", "correct", "evidence_prompt", "failure_signature",
           "reask_sources", "walked_states"]

Complete = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Verify = Callable[[str], Awaitable[Report]]

_EVIDENCE_MAX = 600  # characters of one tool input/output quoted back to the model


class State(str, enum.Enum):
    """States of the correction loop (AMTFV)."""

    INITIAL_GENERATION = "INITIAL_GENERATION"
    PLANNING_VERIFICATION = "PLANNING_VERIFICATION"
    EXECUTING_VERIFICATION = "EXECUTING_VERIFICATION"
    VERIFICATION_PASSED = "VERIFICATION_PASSED"
    VERIFICATION_FAILED = "VERIFICATION_FAILED"
    CORRECTING = "CORRECTING"
    MAX_RETRY_EXCEEDED = "MAX_RETRY_EXCEEDED"


@dataclass(slots=True)
class CorrectionResult:
    """What the loop ends with.

    ``completion``: the chat.completion dict to return (the best draft). ``report``: that
    draft's checks, with ``status`` (``passed`` | ``corrected`` | ``failed`` | ``skipped``),
    ``rounds`` and ``cost``. ``state``: the final state. ``stop_reason``: ``passed``,
    ``max_rounds``, ``oscillation``, ``divergence``, ``budget:<what>``, ``deadline``, ``upstream_error``,
    ``no_text``, ``not_failed``, or ``not_attempted`` (checks failed but ``max_rounds`` was 0:
    no correction was tried; state ``VERIFICATION_FAILED``). ``history``: every state visited
    (also in ``report.extra["states"]``).
    """

    completion: dict[str, Any]
    report: Report
    state: State
    stop_reason: str
    history: list[State] = field(default_factory=list)


def failure_signature(report: Report) -> frozenset[tuple[str, str, str]]:
    """The failed checks as a comparable set of ``(verifier, claim, found)``; two reports with
    the same signature failed the same way (the oscillation rule)."""
    return frozenset((c.verifier, " ".join(str(c.claim).split()), json.dumps(c.found, default=str, sort_keys=True))
                     for c in report.failed_checks)


#: Failed checks described in one correction prompt; the rest are only counted (an answer
#: with 3,000 wrong references made a prompt of ~1 MB, paid as prompt tokens).
EVIDENCE_MAX_CHECKS = 20


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = text.strip()
    return text if len(text) <= _EVIDENCE_MAX else text[: _EVIDENCE_MAX - 1] + "…"


def _evidence_lines(i: int, c: Check) -> list[str]:
    ev = c.evidence if isinstance(c.evidence, dict) else {}
    tool = ev.get("tool") or c.verifier
    lines = [f"{i}. [{c.verifier}] claim: {_short(c.claim)}", f"   tool: {_short(tool)}"]
    for key in ("input", "code", "expression", "query"):
        if key in ev:
            lines.append(f"   tool input: {_short(ev[key])}")
            break
    for key in ("output", "stdout", "stderr", "result", "record", "error"):
        if key in ev and ev[key] not in (None, ""):
            lines.append(f"   tool output ({key}): {_short(ev[key])}")
    if c.expected is not None:
        lines.append(f"   expected: {_short(c.expected)}")
    if c.found is not None:
        lines.append(f"   your answer stated: {_short(c.found)}")
    if c.note:
        lines.append(f"   analysis: {_short(c.note)}")
    if ev.get("origin") in ("question", "docstring"):
        # The expected value comes from the user's own example (often copied into the answer's
        # docstring), which can itself be wrong
        # (HumanEval/47 and /116 state examples their reference solutions contradict): the model
        # must not bend correct code to match a wrong example.
        lines.append("   note: this expected value is an example given in the question or a docstring; "
                     "if that example is itself wrong, keep the code and say why instead of changing it")
    return lines


def evidence_prompt(report: Report) -> str:
    """The user turn of a correction round: for each failed check the claim, the tool, its
    input, its actual output, the expected value and a short analysis, then the instruction
    to answer the original question again, completely. Failed fact claims come with the
    passages that contradict them as numbered sources, and the model is asked to cite them as
    ``[n]`` (``verifiers.facts.sources_prompt``; the numbers are those of the report's
    ``sources``; docs/facts.md: the corrected answer cites the numbered sources per fact)."""
    failed = report.failed_checks
    lines = [f"Automatic verification found {len(failed)} error(s) in your previous answer. "
             "Evidence from the verification tools:", ""]
    others = [c for c in failed if c.verifier != "facts"]
    for i, c in enumerate(others[:EVIDENCE_MAX_CHECKS], 1):
        lines.extend(_evidence_lines(i, c))
    if len(others) > EVIDENCE_MAX_CHECKS:  # an answer with thousands of wrong claims: a bounded prompt
        lines.append(f"... and {len(others) - EVIDENCE_MAX_CHECKS} more error(s) like these, not listed.")
    if len(others) < len(failed):
        facts = [c for c in failed if c.verifier == "facts"][:EVIDENCE_MAX_CHECKS]
        try:
            from verifiers.facts import sources_prompt
            block = sources_prompt(facts, report.sources or [])
        except Exception:  # noqa: BLE001 - the facts package missing or a malformed source: plain evidence
            block = ""
        if block:
            lines += ["", block]
        else:
            for i, c in enumerate(facts, len(others) + 1):
                lines.extend(_evidence_lines(i, c))
    lines += ["", "Fix these errors and give your complete corrected answer to the original request. "
              "Keep everything that was correct. Answer directly, without mentioning this verification."]
    return "\n".join(lines)


def correction_body(body: dict[str, Any], draft: dict[str, Any], report: Report,
                    model: str | None = None) -> dict[str, Any]:
    """The upstream request of one correction round: the client's request (same model and
    parameters unless ``model`` is given), followed by the draft as an assistant turn and the
    evidence prompt as a user turn. Always non-streaming, one choice."""
    new = {k: v for k, v in body.items() if k not in ("stream", "stream_options", "n", "veracity")}
    client_msgs = body.get("messages")
    # a malformed `messages` (a string, a number) was the upstream's to reject; never split a
    # string into characters or raise here: the round then carries the draft and the evidence
    msgs = list(copy.deepcopy(client_msgs)) if isinstance(client_msgs, list) else []
    msg = {}
    try:
        msg = draft["choices"][0]["message"]
    except (KeyError, IndexError, TypeError):
        pass
    if not isinstance(msg, dict):
        msg = {}
    msgs.append({"role": "assistant", "content": completion_text(draft) or msg.get("content") or ""})
    msgs.append({"role": "user", "content": evidence_prompt(report)})
    new["messages"] = msgs
    if model:
        new["model"] = model
    return new


def _round_record(n: int, report: Report, tokens: int, ms: float, state: State) -> dict[str, Any]:
    return {
        "round": n,
        "state": state.value,
        "status": report.status,
        "failed": len(report.failed_checks),
        "failed_claims": [f"{c.verifier}: {c.claim}"[:200] for c in report.failed_checks],
        "tokens": tokens,
        "ms": round(ms, 1),
    }


def _pass_states(rep: Report) -> list[State]:
    """The states one verification pass walked, from its report: ``PLANNING_VERIFICATION`` when
    a plan was made (``extra["plan_source"]``, set by :mod:`verifiers.run` for template and model
    plans), ``EXECUTING_VERIFICATION`` when any verifier ran, then ``VERIFICATION_FAILED`` (a
    check failed) or ``VERIFICATION_PASSED`` (status ``passed``/``corrected``); an ``unverified``
    or ``error`` pass reached no verdict and ends at ``EXECUTING_VERIFICATION``. A ``skipped``
    report without checks walked nothing (low risk, no text, budget)."""
    if rep.status == "skipped" and not rep.checks and not rep.extra.get("plan_source"):
        return []
    out = [State.PLANNING_VERIFICATION] if rep.extra.get("plan_source") else []
    out.append(State.EXECUTING_VERIFICATION)
    if rep.failed_checks:
        out.append(State.VERIFICATION_FAILED)
    elif rep.status in ("passed", "corrected"):
        out.append(State.VERIFICATION_PASSED)
    return out


def walked_states(report: Report) -> list[str]:
    """The state sequence (AMTFV, :class:`State` values) ``report``'s answer actually walked.

    A report that went through :func:`correct` carries it in ``report.extra["states"]`` (every
    verification pass, ``CORRECTING`` per round, ``MAX_RETRY_EXCEEDED`` when the loop gave up);
    any other report is one pass at most: ``INITIAL_GENERATION`` followed by
    :func:`_pass_states` (only ``INITIAL_GENERATION`` for an answer that was not verified).
    The caller stores the result in ``report.extra["states"]`` (the report's ``states``)."""
    states = report.states
    if isinstance(states, list) and states:
        return [str(s) for s in states]
    return [State.INITIAL_GENERATION.value] + [s.value for s in _pass_states(report)]


def _add_verification_costs(rep: Report, others: list[Report]) -> None:
    """Add the verifier-model calls, their tokens and the searches of the other drafts'
    verifications (``others``) to ``rep``, the report returned: ``cost`` is what the whole
    request spent, not only the last verification."""
    calls = list((rep.verifier_model or {}).get("calls", []))
    model = (rep.verifier_model or {}).get("model")
    for r in others:
        rep.cost.tokens += r.cost.tokens
        rep.cost.verifier_calls += r.cost.verifier_calls
        rep.cost.searches += r.cost.searches
        vm = r.verifier_model or {}
        calls = list(vm.get("calls", [])) + calls
        model = model or vm.get("model")
    if calls:
        rep.verifier_model = {"model": model, "calls": calls}


async def correct(body: dict[str, Any], draft: dict[str, Any], *, complete: Complete, verify: Verify,
                  max_rounds: int = 3, budget: RequestBudget | None = None,
                  correction_model: str | None = None, initial_report: Report | None = None) -> CorrectionResult:
    """Verify ``draft`` and, while checks fail and limits allow, re-ask with the evidence.

    Args:
        body: the client's chat request (messages, model, parameters) the draft answered.
        draft: the upstream's chat.completion dict.
        complete: async upstream call ``(request body) -> chat.completion dict``; may raise.
        verify: async ``(answer text) -> Report`` (risk + verifiers).
        max_rounds: correction rounds allowed (0 = verify only).
        budget: the request budget (extra calls/tokens, deadline); None = unlimited. Each
            correction call is charged before it is made, so several loops may share one
            budget (the choices of an ``n > 1`` response) without overspending its calls.
        correction_model: model for the correction calls (policy ``correction.model``).
        initial_report: the draft's report when already computed (skips the first verify).

    Each round's new draft is first checked for divergence (:func:`proxy.pipeline.divergence.diverged`
    against the failed checks it was asked to fix: a refusal, a draft that drops or negates
    them); a divergent draft is not verified, never returned, and ends the loop (stop reason
    ``divergence``, ``report.extra["correction"]["divergence"]`` says why). A draft that states
    a value a failed claim already had two or more drafts before (A, B, A) or fails exactly as
    the previous one did ends the loop as ``oscillation``. The states walked are in
    ``report.extra["states"]`` (:func:`walked_states`).

    Returns a :class:`CorrectionResult`; never raises for upstream or verifier failures.
    """
    history = [State.INITIAL_GENERATION]
    text = completion_text(draft)
    report = initial_report if initial_report is not None else await verify(text or "")
    verified = [report]  # every draft's report: their verifier-model calls and searches are costs too
    history += _pass_states(report)
    rounds: list[dict[str, Any]] = []
    extra_tokens = 0
    extra_calls = 0
    stop_info: dict[str, Any] = {}

    def finish(completion: dict[str, Any], rep: Report, state: State, reason: str, status: str) -> CorrectionResult:
        if history[-1] is not state and state in (State.MAX_RETRY_EXCEEDED, State.VERIFICATION_FAILED,
                                                  State.VERIFICATION_PASSED):
            history.append(state)
        rep.status = status  # type: ignore[assignment]
        rep.rounds = rounds
        rep.cost.tokens += extra_tokens
        rep.cost.upstream_calls += extra_calls
        _add_verification_costs(rep, [r for r in verified if r is not rep])
        rep.correction = {"state": state.value, "stop_reason": reason, **stop_info}
        rep.states = [s.value for s in history]
        return CorrectionResult(completion, rep, state, reason, history)

    if not report.failed_checks:
        return finish(draft, report, history[-1], "not_failed", report.status)
    first_failed = [c.to_dict() for c in report.failed_checks]
    failed_kinds = {c.verifier for c in report.failed_checks}

    if max_rounds <= 0:  # the policy (annotate) allows no correction
        return finish(draft, report, State.VERIFICATION_FAILED, "not_attempted", "failed")
    best = (draft, report)
    prev_sig = failure_signature(report)
    values: dict[str, list[str]] = {}  # each failed claim's stated values, draft by draft (A/B/A)
    for c in report.failed_checks:
        values.setdefault(divergence.subject_key(c), []).append(divergence.value_key(c))
    current, current_report = draft, report
    for n in range(1, max_rounds + 1):
        if budget is not None and not budget.allow_call():
            reason = "deadline" if budget.exhausted == "deadline" else f"budget:{budget.exhausted}"
            return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, reason, "failed")
        history.append(State.CORRECTING)
        t0 = time.perf_counter()
        extra_calls += 1
        if budget is not None:
            # the call is charged before it is made: loops correcting several choices of one
            # response at once share the budget, and must not all pass allow_call() first
            budget.charge(0)
        req = correction_body(body, current, current_report, correction_model)
        try:
            if budget is not None:
                new = await asyncio.wait_for(complete(req), budget.remaining_s())
            else:
                new = await complete(req)
        except asyncio.TimeoutError:
            rounds.append({"round": n, "state": State.CORRECTING.value, "error": "deadline"})
            return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, "deadline", "failed")
        except Exception as exc:  # upstream failure: keep the best draft, say why
            rounds.append({"round": n, "state": State.CORRECTING.value,
                           "error": f"upstream: {type(exc).__name__}"})
            return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, "upstream_error", "failed")
        tokens = usage_tokens(new)
        extra_tokens += tokens
        if budget is not None:
            budget.charge(tokens, calls=0)
        new_text = completion_text(new)
        if not new_text:
            rounds.append({"round": n, "state": State.CORRECTING.value, "error": "no text in correction",
                           "tokens": tokens})
            return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, "no_text", "failed")
        gone = divergence.diverged(current_report.failed_checks, new_text, completion_text(current))
        if gone is not None:  # refused, dropped or negated what it was asked to fix: not verified
            rounds.append({"round": n, "state": State.CORRECTING.value, "diverged": gone.kind,
                           "detail": gone.detail, "tokens": tokens,
                           "ms": round((time.perf_counter() - t0) * 1000.0, 1)})
            stop_info["divergence"] = {"round": n, **gone.to_dict()}
            best[1].reason = f"correction stopped: divergence in round {n} ({gone.kind}: {gone.detail})"
            return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, "divergence", "failed")
        rep = await verify(new_text)
        verified.append(rep)
        ms = (time.perf_counter() - t0) * 1000.0
        walked = _pass_states(rep)
        history.extend(walked)
        undecided = undecided_after_correction(rep, failed_kinds)
        # the planner's note that the verifier model planned nothing checks nothing: a draft with
        # only that note is read as one without checks (a fix stated in another form still counts)
        checks = [c for c in rep.checks if (c.evidence or {}).get("reason") != "no_check_planned"]
        unread = not checks and not divergence.fixed_without_checks(current_report.failed_checks, new_text)
        unread = unread or bool(divergence.unconfirmed_fixes(
            current_report.failed_checks,
            [c for c in rep.checks if decided_pass(c, trust_model_passes=rep.trust_model_passes)], new_text))
        if not rep.failed_checks and (undecided or unread or (checks and not any(
                decided_pass(c, trust_model_passes=rep.trust_model_passes) for c in checks))):
            # nothing failed any more, but the new draft (verified in full, not only the claims
            # that failed) has no decided pass, or leaves undecided a claim of a kind that failed:
            # it is returned, yet `corrected` would claim it was verified right (docs/design.md
            # "report": `passed` and `corrected` mean everything found was decided). So is a new
            # draft with no check at all (the claim rewritten in a form no verifier reads, kept by
            # the divergence rule) unless it states the value the tool computed for each failed
            # claim and drops the wrong one, or no longer holds the reference or fact that failed
            # (`divergence.fixed_without_checks`): "17 * 23 -> 401", "The
            # answer is 401", a table or words may still carry the wrong value.
            rounds.append(_round_record(n, rep, tokens, ms, State.EXECUTING_VERIFICATION))
            rep.extra["corrected_checks"] = first_failed
            _carry_reask_sources(rep, current_report)
            if not rep.reason:
                rep.reason = ("corrected draft: no check failed, but "
                              + (f"{len(undecided)} claim(s) stay undecided (of the kind that failed, or passed on "
                                 f"the verifier model's word alone)" if undecided
                                 else "the claim that failed was not verified again" if unread
                                 else "none passed"))
            return finish(new, rep, State.EXECUTING_VERIFICATION, "unverified",
                          "error" if rep.status == "error" else "unverified")
        if not rep.failed_checks:
            if not walked or walked[-1] is not State.VERIFICATION_PASSED:
                history.append(State.VERIFICATION_PASSED)  # nothing failed any more: the loop's exit
            rounds.append(_round_record(n, rep, tokens, ms, State.VERIFICATION_PASSED))
            rep.extra["corrected_checks"] = first_failed  # what was wrong in the first draft
            _carry_reask_sources(rep, current_report)
            return finish(new, rep, State.VERIFICATION_PASSED, "passed", "corrected")
        rounds.append(_round_record(n, rep, tokens, ms, State.VERIFICATION_FAILED))
        if len(rep.failed_checks) <= len(best[1].failed_checks):
            best = (new, rep)
        sig = failure_signature(rep)
        repeat = _repeated_value(values, rep.failed_checks)
        if sig == prev_sig or repeat is not None:
            if repeat is not None:
                stop_info["oscillation"] = repeat
            best[1].reason = "correction stopped: oscillation (" + (
                f"{repeat['claim']}: {' -> '.join(repeat['values'])}" if repeat is not None
                else "the same failure twice") + ")"
            return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, "oscillation", "failed")
        prev_sig = sig
        current, current_report = new, rep
    return finish(best[0], best[1], State.MAX_RETRY_EXCEEDED, "max_rounds", "failed")


def undecided_after_correction(report: Report, kinds: set[str]) -> list[Check]:
    """The checks of a corrected draft's ``report`` that keep it from being ``corrected``: neither a
    failure nor a decided pass (:func:`verifiers._types.decided_pass`) and either by a verifier
    in ``kinds`` (those whose claims failed before) or a pass of any kind on the verifier
    model's word alone (a plan's step whose inputs or assertions it wrote: docs/design.md
    "Asymmetric trust", the model can fail an answer, never pass it -- nor pass its correction).
    In check order; used by the correction loop and the verified stream alike."""
    return [c for c in report.checks if (c.verifier in kinds or c.outcome == "pass") and c.outcome != "fail"
            and not decided_pass(c, trust_model_passes=report.trust_model_passes)]


def reask_sources(report: Report) -> list[dict[str, Any]]:
    """The numbered sources a correction re-ask for ``report`` shows the model (the
    ``sources`` entries whose ``n`` a failed ``facts`` check's evidence passages cite; see
    :func:`evidence_prompt`), in ``n`` order; ``[]`` when no facts check failed."""
    cited: set[int] = set()
    for c in report.failed_checks:
        if c.verifier != "facts":
            continue
        for p in (c.evidence or {}).get("passages") or []:
            if isinstance(p, dict) and isinstance(p.get("n"), int):
                cited.add(p["n"])
    srcs = [s for s in report.sources or [] if isinstance(s, dict) and s.get("n") in cited]
    return sorted(srcs, key=lambda s: s["n"])


def _carry_reask_sources(rep: Report, asked: Report) -> None:
    """Keep the ``[n]`` of a corrected answer resolvable: the re-ask asked the model to cite the
    numbered sources of ``asked``; when the corrected draft's own verification did not find them
    again (its facts check ``unknown``/``error``, a rewritten sentence the deterministic tier
    does not match), ``rep.extra["sources"]`` gains those entries. An ``n`` the new verification
    already uses for another source is left as the verification numbered it (its checks'
    evidence refers to that numbering)."""
    given = reask_sources(asked)
    if not given:
        return
    own = [s for s in rep.sources or [] if isinstance(s, dict)]
    used = {s.get("n") for s in own}
    added = [s for s in given if s["n"] not in used]
    if added:
        rep.sources = sorted(own + added, key=lambda s: s.get("n", 0))


def _repeated_value(values: dict[str, list[str]], failed: list[Check]) -> dict[str, Any] | None:
    """Record each failed claim's value of this round in ``values`` (subject -> values so far);
    return ``{"claim", "values"}`` for the first claim that went back to a value it stated
    before a different one (A, B, A), else None."""
    hit = None
    for c in failed:
        seq = values.setdefault(divergence.subject_key(c), [])
        v = divergence.value_key(c)
        if hit is None and v in seq[:-1] and seq and seq[-1] != v:
            hit = {"claim": " ".join(str(c.claim).split())[:120], "values": seq + [v]}
        seq.append(v)
    return hit
