"""Orchestration: run the triggered verifiers concurrently under deadlines, merge a Report.

``await run(answer, names, question=..., options=..., deadline_s=...)`` starts every named
verifier at once. Each has its own timeout (``options[name]["timeout_s"]``) inside one
per-request verification deadline (``deadline_s``). A verifier that raises yields one
``error`` check; one that runs out of time yields one ``unknown`` check. Neither fails the
request: the caller always gets a :class:`~verifiers._types.Report`.

``verify(text, context)`` is the library convenience (docs/design.md "Folders": "``verifiers``
is usable as a library on its own"): risk-score the text, run what the risk triggers, return the report.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from verifiers._limits import unread_check
from verifiers._options import (ArithmeticOptions, CitationsOptions, CodeOptions, FactsOptions, PlannerOptions,
                                VerifierOptions, options_of)
from verifiers._types import DEFAULT_BASIS, Check, Report, ReportStatus, decided_pass
from verifiers import risk as _risk

__all__ = ["run", "verify", "averify", "add_unread", "status_of", "REGISTRY", "Adapter", "Sandboxes", "VerifierOptions",
           "ArithmeticOptions", "CodeOptions", "CitationsOptions", "FactsOptions", "PlannerOptions", "options_of",
           "content_text", "last_user_text"]

#: An adapter runs one verifier: ``(answer, question, options) -> list[Check]`` or
#: ``(checks, extra)`` (awaitable). ``options`` is what the caller gave for that verifier: a
#: :class:`~verifiers._options.VerifierOptions` subclass or a mapping (the built-in adapters
#: read either through ``XOptions.of``).
Adapter = Callable[[str, "str | None", Any], Awaitable[Any]]

_AUTO = object()  # an argument left to its computed default
_NOTE_MAX = 300


#: Answers (plus question) up to this many characters are checked by the arithmetic verifier
#: on the calling (event loop) thread: such a check takes ~0.6-1.5 ms (p95 ~8 ms on GSM8K
#: solutions, bench/results/pipeline.md) and the verifier bounds its own time (``budget_ms``,
#: checked between claims), while handing it to a worker thread cost ~300 us CPU of thread and
#: loop wake-ups per check on the benchmark machine (0.6 -> 0.9 ms for a 115-character answer).
#: Longer answers still go to a worker thread, where the verifier timeout can fire.
ARITHMETIC_INLINE_MAX_CHARS = 1000


async def _arithmetic(answer: str, question: str | None, options: Mapping[str, Any] | VerifierOptions) -> list[Check]:
    mod = importlib.import_module("verifiers.arithmetic")
    o = ArithmeticOptions.of(options)
    kw = {} if o.budget_ms is None else {"budget_ms": o.budget_ms}
    if len(answer) + (len(question) if isinstance(question, str) else 0) <= ARITHMETIC_INLINE_MAX_CHARS:
        return mod.check(answer, question, **kw)
    # long answers: a worker thread keeps the event loop free and lets the deadline fire (the
    # thread finishes on its own; its result is dropped)
    return await asyncio.to_thread(mod.check, answer, question, **kw)


class Sandboxes:
    """The code sandboxes :func:`run` makes from ``sandbox`` option specs (``{"backend": "auto",
    "limits": {...}}``, :class:`verifiers.sandbox.Limits` fields): one
    :class:`verifiers.sandbox.Sandbox` per (backend, limits), made on first use and kept until
    :meth:`close`. The caller owns it: the gateway keeps one for as long as it runs (probing
    docker/bwrap and warm containers are paid once); :func:`run` without one makes one for the
    call and closes it. Thread-safe."""

    def __init__(self) -> None:
        self._made: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def get(self, spec: Mapping[str, Any] | None) -> Any:
        """The sandbox for ``spec`` (None: ``{"backend": "auto"}``). Raises ValueError for an
        unknown backend or limit name (as :func:`verifiers.sandbox.get` and ``Limits`` do)."""
        spec = spec or {}
        backend, limits = spec.get("backend", "auto"), spec.get("limits")
        key = (backend, repr(sorted((limits or {}).items())))
        with self._lock:
            sb = self._made.get(key)
            if sb is None:
                sandbox_mod = importlib.import_module("verifiers.sandbox")
                lim = sandbox_mod.Limits(**dict(limits)) if limits else None
                sb = self._made[key] = sandbox_mod.get(backend, lim)
        return sb

    def __len__(self) -> int:
        """How many sandboxes are open (made and not closed yet)."""
        return len(self._made)

    def close(self) -> None:
        """Close every sandbox made (docker clients, warm containers). Blocking; idempotent."""
        with self._lock:
            made, self._made = list(self._made.values()), {}
        for sb in made:
            try:
                sb.close()
            except Exception:  # noqa: BLE001 - closing one must not keep the others open
                pass


def _with_sandboxes(adapter: Adapter, name: str, sandboxes: Sandboxes) -> Adapter:
    """``adapter`` called with its ``sandbox`` spec (a mapping, or None for ``code``) replaced by
    the sandbox from ``sandboxes`` (inside the call: a bad spec is that verifier's ``error`` check).
    Options come as the verifier's options class or as a mapping (:func:`run`)."""
    async def call(answer: str, question: str | None, opts: Any) -> Any:
        if isinstance(opts, VerifierOptions):
            spec = getattr(opts, "sandbox", None)
            if isinstance(spec, Mapping) or (spec is None and name == "code"):
                opts = dataclasses.replace(opts, sandbox=sandboxes.get(spec))  # type: ignore[call-arg]
        else:
            spec = opts.get("sandbox")
            if isinstance(spec, Mapping) or (spec is None and name == "code"):
                opts = {**opts, "sandbox": sandboxes.get(spec)}
        return await adapter(answer, question, opts)
    return call


async def _code(answer: str, question: str | None, options: Mapping[str, Any] | VerifierOptions) -> list[Check]:
    mod = importlib.import_module("verifiers.code")
    spec = CodeOptions.of(options).sandbox
    if spec is None or isinstance(spec, Mapping):  # called outside run(): a sandbox for this call
        own = Sandboxes()
        try:
            result: list[Check] = await mod.acheck(answer, question, sandbox=own.get(spec))
        finally:
            await asyncio.to_thread(own.close)
        return result
    result = await mod.acheck(answer, question, sandbox=spec)
    return result


async def _citations(answer: str, question: str | None, options: Mapping[str, Any] | VerifierOptions) -> list[Check]:
    mod = importlib.import_module("verifiers.citations")
    o = CitationsOptions.of(options)
    # finish inside our own timeout with the citations checked so far, instead of being
    # cancelled with nothing
    deadline = o.deadline if o.deadline is not None else max(0.05, o.timeout_s * 0.8)
    result: list[Check] = await mod.acheck(answer, question, sources=o.sources, deadline=deadline,
                                           relevance=o.relevance, model=o.model)
    return result


async def _planner(answer: str, question: str | None,
                   options: Mapping[str, Any] | VerifierOptions) -> tuple[list[Check], dict[str, Any]]:
    """The AMTFV planner (``verifiers.planner.acheck``), run after the rule-based verifiers
    (:func:`run` passes their checks as ``rule_checks``). Model-written plans only when
    ``when`` allows (``never`` | ``unexplained``: no rule check failed or passed on
    evidence the verifier model did not write |
    ``high_risk``: unexplained, or risk >= ``high_risk`` | ``always``) and a
    ``model`` is given; template plans always. When ``when`` asks for a model plan, no template
    applied and no ``model`` is given, one ``unknown`` planner check says so; so does one when the
    model planned no check (``verification_needed: false``) of an answer no rule check decided.
    Returns ``(checks, extra)``."""
    o = PlannerOptions.of(options)
    if isinstance(o.sandbox, Mapping):  # called outside run(): a sandbox for this call
        own = Sandboxes()
        try:
            return await _planner(answer, question, dataclasses.replace(o, sandbox=own.get(o.sandbox)))
        finally:
            await asyncio.to_thread(own.close)
    mod = importlib.import_module("verifiers.planner")
    rule_checks = list(o.rule_checks or ())
    model = o.model
    when = o.when
    # a pass on the verifier model's word (basis "model") explains nothing (docs/design.md "Asymmetric trust")
    explained = any(c.outcome == "fail" or decided_pass(c) for c in rule_checks)
    risk_score = float(o.risk_score or 0.0)
    wanted = (when == "always" or (when in ("unexplained", "high_risk") and not explained)
              or (when == "high_risk" and risk_score >= float(o.high_risk)))
    use_model = model is not None and wanted
    tools = mod.Toolbox(sandbox=o.sandbox,
                        citation_sources=o.citation_sources, search_facts=o.search_facts)
    outcome = await mod.acheck(answer, question, model=model if use_model else None, rule_checks=rule_checks,
                               use_model=use_model, tools=tools, max_steps=int(o.max_steps),
                               deadline_s=max(0.05, o.timeout_s * 0.9),
                               templates=bool(o.templates))
    checks = list(outcome.checks)
    if len(answer) > mod.MAX_TEXT_CHARS:  # plans read a prefix: say the rest went unplanned (verifiers._limits)
        checks.append(unread_check("planner", limit="MAX_TEXT_CHARS", limit_value=mod.MAX_TEXT_CHARS,
                                   checked=mod.MAX_TEXT_CHARS, total=len(answer)))
    if outcome.error:
        checks.append(Check(verifier="planner", claim="", outcome="error", confidence=0.0,
                            evidence={"plan_source": outcome.plan_source}, note=f"plan: {outcome.error}"[:_NOTE_MAX]))
    elif wanted and model is None and outcome.plan_source is None:
        # the policy asks for a model plan but no verifier model was given (offline: `veracity
        # verify`, POST /v1/veracity/verify): say so, as the gateway does when its model is
        # unavailable, rather than report the risky answer `skipped` as if nothing were checkable
        checks.append(Check(verifier="planner", claim="", outcome="unknown", confidence=0.0,
                            evidence={"plan_source": "model", "reason": "unavailable:no_model"},
                            note="planner not asked: unavailable:no_model (no verifier model offline)"))
    elif use_model and not explained and outcome.plan_source == "model" and not outcome.checks:
        # the model planned no check of an answer the rules left unexplained (verification_needed
        # false, or no step to run): its word may not clear it -- `skipped` would say nothing was
        # worth checking, which lifts `on_unverified` (docs/design.md "Asymmetric trust": the model
        # chooses what to check, it never removes what is to be checked)
        checks.append(Check(verifier="planner", claim="", outcome="unknown", confidence=0.0, basis="model",
                            evidence={"plan_source": "model", "reason": "no_check_planned"},
                            note="the verifier model planned no check of this answer, which no rule check "
                                 "decided: it stays unchecked"))
    extra: dict[str, Any] = {}
    if outcome.plan_source:
        extra["plan_source"] = outcome.plan_source
        if outcome.plan is not None:
            extra["plan"] = outcome.plan
    return checks, extra


async def _facts(answer: str, question: str | None,
                 options: Mapping[str, Any] | VerifierOptions) -> tuple[list[Check], dict[str, Any]]:
    """Fact checking (``verifiers.facts.acheck``): claims searched over the configured
    backends (``backends``: backend objects, or a config dict for
    ``verifiers.facts.backends.make_backends`` with ``context_messages``) and judged.
    Returns ``(checks, extra)`` with the numbered ``sources`` and the unconfirmed claims."""
    mod = importlib.import_module("verifiers.facts")
    o = FactsOptions.of(options)
    backends = o.backends
    bmod = None
    if backends is None or isinstance(backends, Mapping):
        bmod = importlib.import_module("verifiers.facts.backends")
        backends = bmod.make_backends(backends or {"use": ["context"]}, context_messages=o.context_messages)
    try:
        outcome = await mod.acheck(answer, question, model=o.model, backends=backends,
                                   max_claims=int(o.max_claims), max_rounds=int(o.max_rounds), k=int(o.k),
                                   weights=o.weights, cache=o.cache,
                                   deadline_s=max(0.05, o.timeout_s * 0.9),
                                   grounding=bool(o.grounding))
    finally:
        if bmod is not None:  # the clients made here are closed here (a timeout cancels into this too)
            await bmod.aclose_backends(backends)
    extra = {"sources": list(outcome.sources), "unconfirmed": list(outcome.unconfirmed),
             "searches": outcome.searches}
    return list(outcome.checks), extra


#: Verifier name -> adapter. Tests and embedders may pass their own ``registry`` to
#: :func:`run`; the modules are imported on first use, so a missing verifier module turns
#: into an ``error`` check, not an import error at start-up.
REGISTRY: dict[str, Adapter] = {
    "arithmetic": _arithmetic,
    "code": _code,
    "citations": _citations,
    "facts": _facts,
    "planner": _planner,
}

#: Verifiers that run after the others and receive their checks (``rule_checks``).
SECOND_PHASE = ("planner",)


def status_of(checks: list[Check], *, trust_model_passes: bool = False) -> ReportStatus:
    """Report status from checks alone (docs/design.md "report", "Asymmetric trust"): ``failed`` if
    any check failed, ``skipped`` when there are none, ``error`` when every check is an
    ``error``, ``passed`` when every check passed on evidence the verifier model did not write
    (:func:`verifiers._types.decided_pass`), else ``unverified``: checks were attempted and none
    failed, but something found was not decided -- an ``unknown``/``error`` check beside passes,
    or a pass on the verifier model's word alone (``trust_model_passes`` is a policy's opt-in
    that counts those). ``passed`` must mean everything the checks found was verified."""
    if not checks:
        return "skipped"
    if any(c.outcome == "fail" for c in checks):
        return "failed"
    if all(c.outcome == "error" for c in checks):
        return "error"
    if all(decided_pass(c, trust_model_passes=trust_model_passes) for c in checks):
        return "passed"
    return "unverified"


def _safe_note(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= _NOTE_MAX else text[: _NOTE_MAX - 1] + "…"


def _timeout_of(opts: Mapping[str, Any] | VerifierOptions) -> float:
    if isinstance(opts, VerifierOptions):
        return opts.timeout_s
    return VerifierOptions.of(opts).timeout_s


async def _one(name: str, adapter: Adapter, answer: str, question: str | None,
               opts: Mapping[str, Any], timeout: float, durations: dict[str, float],
               extras: dict[str, Any] | None = None) -> list[Check]:
    t0 = time.perf_counter()
    try:
        if timeout <= 0:
            raise asyncio.TimeoutError
        checks = await asyncio.wait_for(adapter(answer, question, opts), timeout)
        if isinstance(checks, tuple):  # (checks, extra): planner/facts side information
            checks, more = checks
            if extras is not None and isinstance(more, Mapping):
                extras.update(more)
        out: list[Check] = []
        for c in checks or []:
            if isinstance(c, Check):
                if c.basis is None:  # what the verdict rests on, if the verifier did not say
                    c.basis = DEFAULT_BASIS.get(c.verifier)
                out.append(c)
        return out
    except asyncio.TimeoutError:
        return [Check(verifier=name, claim="", outcome="unknown", confidence=0.0,
                      note=f"verification deadline: {name} did not finish within {timeout * 1000:.0f} ms")]
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a verifier bug must never fail the request
        return [Check(verifier=name, claim="", outcome="error", confidence=0.0,
                      evidence={"exception": type(exc).__name__}, note=_safe_note(exc))]
    finally:
        durations[name] = (time.perf_counter() - t0) * 1000.0


async def run(answer: str, names: Iterable[str], *, question: str | None = None,
              options: Mapping[str, VerifierOptions | Mapping[str, Any]] | None = None,
              deadline_s: float | None = None,
              registry: Mapping[str, Adapter] | None = None,
              trust_model_passes: bool = False, unchecked_facts: str | None = None,
              sandboxes: Sandboxes | None = None) -> Report:
    """Run the verifiers ``names`` on ``answer`` concurrently and merge their checks.

    Two phases: every verifier but those in :data:`SECOND_PHASE` runs at once; then the
    planner runs with their checks (``rule_checks``), so it can merge duplicates and plan
    only for what the rules left unexplained. Adapters may return ``(checks, extra)``; the
    extras (``plan_source``, ``plan``, ``sources``, ``unconfirmed``) go to ``report.extra``
    and ``searches`` to ``report.cost.searches``.

    Args:
        answer: the draft answer text (untrusted).
        names: verifier names; unknown names (``sentinel``, typos) are skipped.
        question: the user's question text, passed to every verifier.
        options: per-verifier options: the verifier's options class
            (:mod:`verifiers._options`: :class:`ArithmeticOptions`, :class:`CodeOptions`,
            :class:`CitationsOptions`, :class:`FactsOptions`, :class:`PlannerOptions`) or a
            mapping of the same names (``timeout_ms`` allowed for ``timeout_s``; default 10 s;
            other keys ignored). A custom ``registry`` adapter gets them as given.
        deadline_s: the per-request verification deadline; no verifier runs past it.
        registry: name -> adapter, default :data:`REGISTRY`.
        trust_model_passes: count passes that rest on the verifier model as decided (a
            policy's named opt-in, ``verification.trust_model_passes``; off by default).
        unchecked_facts: when set (the reason no facts verifier ran, e.g. "the policy does not
            enable the facts verifier"), an answer that would be ``passed`` is read for world
            claims no check decided (:func:`verifiers.facts._unchecked.unchecked_claims`); each
            is an ``unknown`` check, so such an answer is ``unverified``, not ``passed``.

        sandboxes: where the ``sandbox`` specs of ``code``/``planner`` options come from
            (:class:`Sandboxes`, kept by the caller across calls); default: one made for this
            call and closed when it returns.

    Returns:
        A Report with ``status`` from :func:`status_of`, the checks in ``names`` order, and
        ``extra["durations_ms"]`` (verifier -> wall ms). Never raises for verifier failures.
    """
    if sandboxes is None:
        own = Sandboxes()
        try:
            return await run(answer, names, question=question, options=options, deadline_s=deadline_s,
                             registry=registry, trust_model_passes=trust_model_passes,
                             unchecked_facts=unchecked_facts, sandboxes=own)
        finally:
            if len(own):
                await asyncio.to_thread(own.close)
    registry = REGISTRY if registry is None else registry
    options = options or {}
    t0 = time.perf_counter()
    durations: dict[str, float] = {}
    extras: dict[str, Any] = {}
    wanted = list(dict.fromkeys(names))

    def jobs_for(selected: list[str], rule_checks: tuple[Check, ...] | None = None) -> list[Any]:
        jobs = []
        for name in selected:
            adapter = registry.get(name)
            if adapter is None:
                continue
            if adapter is _code or adapter is _planner:  # the built-in ones take sandbox specs
                adapter = _with_sandboxes(adapter, name, sandboxes)
            opts: VerifierOptions | Mapping[str, Any] = options.get(name, {})
            if rule_checks is not None:  # the second phase sees the first one's checks
                opts = (dataclasses.replace(opts, rule_checks=rule_checks) if isinstance(opts, PlannerOptions)
                        else {**opts, "rule_checks": rule_checks} if not isinstance(opts, VerifierOptions)
                        else PlannerOptions(timeout_s=opts.timeout_s, rule_checks=rule_checks))
            timeout = _timeout_of(opts)
            if deadline_s is not None:
                timeout = min(timeout, max(0.0, deadline_s - (time.perf_counter() - t0)))
            jobs.append(_one(name, adapter, answer, question, opts, timeout, durations, extras))
        return jobs

    first = jobs_for([n for n in wanted if n not in SECOND_PHASE])
    if len(first) == 1:  # the common case: no gather (one Task and its callbacks less)
        results = [await first[0]]
    else:
        results = await asyncio.gather(*first) if first else []
    checks = [c for part in results for c in part]
    second = jobs_for([n for n in wanted if n in SECOND_PHASE], tuple(checks))
    for job in second:  # the planner sees the rule-based checks (merge, "unexplained")
        checks.extend(await job)
    jobs = first + second
    if unchecked_facts and status_of(checks, trust_model_passes=trust_model_passes) == "passed":
        from verifiers.facts._unchecked import unchecked_claims
        args = (answer, question, [c.span for c in checks if c.span is not None and c.outcome in ("pass", "fail")])
        # ~2.5 ms per 1,000 characters (sentence splitting): inline for short answers as the
        # arithmetic verifier is, a worker thread for long ones (~40 ms at 20,000), off the loop
        checks.extend(unchecked_claims(*args, reason=unchecked_facts) if len(answer) <= ARITHMETIC_INLINE_MAX_CHARS
                      else await asyncio.to_thread(unchecked_claims, *args, reason=unchecked_facts))
    report = Report(status=status_of(checks, trust_model_passes=trust_model_passes),
                    checks=checks, answer_chars=len(answer), trust_model_passes=trust_model_passes)
    if not checks:
        report.reason = "no checkable claims" if jobs else "no verifier triggered"
    if extras:
        report.cost.searches += int(extras.pop("searches", 0) or 0)
        report.extra.update(extras)
    report.cost.ms = (time.perf_counter() - t0) * 1000.0
    report.durations_ms = {k: round(v, 3) for k, v in durations.items()}
    return report


async def averify(text: str, context: Mapping[str, Any] | None = None, *, risk: _risk.RiskScore | None = None,
                  trust_model_passes: bool = False, unchecked_facts: str | None | object = _AUTO,
                  unread: bool = True, sandboxes: Sandboxes | None = None) -> Report:
    """Async form of :func:`verify`: risk-score ``text``, run what the risk triggers (or, with
    ``force``, what ``context["verifiers"]`` names), attach the risk and the scan's unread checks.

    The keyword arguments serve a caller that chose the verifiers itself (the gateway's policy
    tiers, :func:`proxy.pipeline.verify.verify_text`): ``risk``, the score of ``(question,
    text)`` already computed (not computed again); ``trust_model_passes``, as :func:`run`;
    ``unchecked_facts``, as :func:`run` (default: "the facts verifier did not run" unless it
    ran or a custom ``registry`` is given); ``unread=False`` leaves the risk scan's unread
    checks (:meth:`verifiers.risk.RiskScore.unread_checks`) to the caller; ``sandboxes``, as
    :func:`run`."""
    ctx = dict(context or {})
    question = ctx.get("question")
    if question is None and ctx.get("messages"):
        question = last_user_text(ctx["messages"])
    r = _risk.score(question, text) if risk is None else risk
    threshold = float(ctx.get("threshold", 0.0))
    wanted = ctx.get("verifiers")
    names = [v for v in r.verifiers if v in REGISTRY and (wanted is None or v in wanted)]
    if ctx.get("force"):
        names = list(wanted or REGISTRY)
    elif r.score < threshold:
        names = []
    if unchecked_facts is _AUTO:
        unchecked_facts = (None if "facts" in names or ctx.get("registry") is not None
                           else "the facts verifier did not run")
    report = await run(text, names, question=question, options=ctx.get("options"),
                       deadline_s=ctx.get("deadline_s"), registry=ctx.get("registry"),
                       trust_model_passes=trust_model_passes,
                       unchecked_facts=unchecked_facts if isinstance(unchecked_facts, str) else None,
                       sandboxes=sandboxes)
    report.risk = r.to_dict()
    if not names:
        report.status = "skipped"
        report.reason = "risk below threshold" if r.score < threshold else "no verifier triggered"
    if unread:
        add_unread(report, r.unread_checks(wanted), note=False)
    return report


def add_unread(report: Report, unread: list[Check], *, note: bool = True) -> None:
    """Add the risk scan's ``unknown`` checks for an answer longer than it scans
    (:meth:`verifiers.risk.RiskScore.unread_checks`): a long answer is never ``skipped`` as if
    nothing in it were checkable; its status is recomputed from the checks (``unverified`` when
    nothing else was checked). ``note``: a ``skipped`` report's ``reason`` also says so."""
    if not unread:
        return
    was = report.status
    report.checks.extend(unread)
    report.status = status_of(report.checks, trust_model_passes=report.trust_model_passes)
    if note and was == "skipped" and report.reason:
        report.reason += "; the answer is longer than the risk scan reads (see the risk check)"


def verify(text: str, context: Mapping[str, Any] | None = None) -> Report:
    """Verify ``text`` as a library call: risk-score it, run the verifiers the risk triggers,
    return the Report.

    ``context`` keys (all optional): ``question`` (str) or ``messages`` (OpenAI chat
    messages; the last user message is the question), ``verifiers`` (names allowed to run),
    ``force`` (run ``verifiers`` whatever the risk), ``threshold`` (risk below it ->
    ``skipped``; default 0: any triggered verifier runs), ``options`` (per verifier, see
    :func:`run`), ``deadline_s``.

    Raises RuntimeError when called from a running event loop (use :func:`averify`).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(averify(text, context))
    raise RuntimeError("verifiers.verify() called inside an event loop; await verifiers.averify()")


def last_user_text(messages: Any) -> str | None:
    """Text of the last ``user`` message of an OpenAI ``messages`` list (string content or
    the ``text`` parts of an array), or None."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if isinstance(m, Mapping) and m.get("role") == "user":
            return content_text(m.get("content"))
    return None


def content_text(content: Any) -> str:
    """Plain text of an OpenAI message ``content`` (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for p in content:
            if isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str):
                parts.append(p["text"])
        return "\n".join(parts)
    return ""
