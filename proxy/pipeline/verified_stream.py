"""The ``verified`` stream mode: relay what passed, hold only the unit being checked, never relay
a failed claim, splice the correction into the same stream (docs/design.md "Streams are verified
as they flow").

For each choice (``n > 1``: each ``index`` on its own) the content deltas go through a
:class:`proxy.pipeline.units.UnitSplitter`; each complete unit (a sentence, a list line or
reference entry, a closed code block) is verified with the same call as every other path
(:func:`proxy.pipeline.verify.verify_text`, through the request's verifier and metrics) and
relayed when no check failed. Prose that nothing would check (below the risk threshold as a
unit and as the answer so far, no arithmetic trigger, the facts verifier off) is relayed as it
arrives, before its unit ends: a low-risk answer starts as fast as ``passthrough``; once the
unit being written would be checked, the rest of it is held until its checks pass.

A unit with a failed check is not relayed. The gateway stops reading that upstream stream and
closes it (with ``n > 1``, once no other choice still reads it), and asks the model for the rest
of the answer from the relayed prefix with the evidence (``strategy``, policy
``streaming.continuation``):

* ``continue`` (shipped): the client's messages, the answer so far (prefix + the failed unit) as
  the assistant turn, then the evidence (:func:`proxy.pipeline.correction.evidence_prompt`, the
  same text as every correction round) and the instruction to write only what follows the
  relayed text. The reply streams straight into the client's stream. A model that rewrites the
  whole answer anyway is tolerated: a reply that starts by repeating the relayed prefix has the
  repeat skipped (:class:`_Splice`).
* ``whole``: the ordinary correction round (:func:`proxy.pipeline.correction.correction_body`:
  "give your complete corrected answer") whose part after the relayed prefix is used; a
  corrected answer that rewrote the relayed part cannot be spliced and counts as a divergence.

``bench/verified_stream_bench.py`` measured both (bench/results/verified-stream.md); the
continuation prompt answers sooner and costs fewer tokens, since the prefix is not generated
twice (on real solutions the relayed prefix at the first failing unit is a median 552
characters, ~2.8 s at 200 characters a second: bench/results/verified-units-cases.md). Which
verifiers a unit gets: :func:`unit_policy`.

What comes back is verified unit by unit the same way and continues the client's stream (one
``id``, one ``finish_reason`` per choice). Rounds are bounded by ``correction.max_rounds`` and
the request budget (each continuation is an extra call, its tokens are charged when its usage
arrives); the same failure twice in a row ends the rounds (oscillation). When no correction
passes, ``on_failure`` applies: ``annotate`` and ``correct`` relay the unit and the report says
``failed`` (``annotate`` makes no round at all); ``block`` ends the stream with the blocked
error event (``n > 1``: that choice is withheld -- a ``refusal`` and ``finish_reason:
"content_filter"`` -- and the others go on; the error event when every choice is).

The report (``corrected``, ``rounds``, ``extra["replaced"]``: the units that were never relayed
and what failed in them) is sent before ``[DONE]`` as in the other modes. The usage chunk, when
the client asked for it, sums the usage of every upstream call whose usage arrived;
``extra["stream"]["calls"]`` lists each call (``usage`` null for a stream closed early).
Deadline: the request budget's clock does not run while the gateway waits for the upstream to
write, so a long answer keeps its whole verification deadline. Closing the event generator
(client gone) cancels the readers and verifications and closes every upstream stream at once.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from verifiers import risk as risk_mod
from verifiers import Check, Report, decided_pass
from verifiers.run import status_of

from proxy.observability import verification_metrics as vmetrics
from proxy.pipeline import choices, divergence
from proxy.pipeline import correction as corr
from proxy.pipeline.streams import KEEPALIVE, include_usage, report_on_last_chunk
from proxy.pipeline.units import Unit, UnitSplitter
from proxy.stores.budget import usage_tokens
from proxy.upstreams import UpstreamStream
from proxy.wire.errors import UpstreamError, sse_error_event
from proxy.wire.sse import DONE_FRAME, encode_chunk, parse_stream

__all__ = ["events", "verified_events", "continuation_body", "unit_policy", "CONTINUE_INSTRUCTION", "STRATEGIES"]

STRATEGIES = ("continue", "whole")

#: the last line of a continuation round's evidence prompt (in place of "give your complete answer")
CONTINUE_INSTRUCTION = (
    "The reader has already received your answer up to just before the part with the error{anchor}. "
    "Write ONLY what comes next: the corrected version of the part with the error, then the rest of "
    "your answer. Continue exactly where the received text stops; do not repeat it and do not "
    "mention this verification.")

#: characters of the relayed prefix a continuation may repeat before the repeat is skipped (a
#: reply that opens with fewer matching characters is taken as a continuation from its first byte)
_REPEAT_MIN = 40


def continuation_body(body: dict[str, Any], prefix: str, unit: str, report: Report, *,
                      strategy: str = "continue", model: str | None = None) -> dict[str, Any]:
    """The streamed upstream request of one correction round of a verified stream.

    ``body``: the client's request; ``prefix``: the text already relayed for this choice;
    ``unit``: the unit that failed (never relayed); ``report``: its checks. ``strategy``
    ``continue``: the evidence and :data:`CONTINUE_INSTRUCTION` (the anchor quotes the end of
    the prefix); ``whole``: :func:`proxy.pipeline.correction.correction_body` unchanged. Both ask
    for one choice, streamed, with the usage chunk (its tokens are charged to the budget)."""
    draft = {"choices": [{"index": 0, "message": {"role": "assistant", "content": prefix + unit}}]}
    new = corr.correction_body(body, draft, report, model)
    if strategy == "continue":
        evidence = new["messages"][-1]["content"]
        head, _, last = evidence.rpartition("\n")
        if not last.startswith("Fix these errors"):  # evidence_prompt changed shape: keep it whole
            head = evidence
        tail = " ".join(prefix.split())[-120:]
        anchor = f', which ended with: "{tail}"' if tail else " (nothing of it yet)"
        new["messages"][-1] = {"role": "user", "content": head + "\n" + CONTINUE_INSTRUCTION.format(anchor=anchor)}
    new["stream"] = True
    new["stream_options"] = {"include_usage": True}
    return new


def unit_policy(policy: Any, question: str | None, answer_so_far: str, cache: dict[str, Any] | None = None) -> Any:
    """The policy one unit is verified with (``answer_so_far``: the relayed text and the unit).

    Tiered verification decides on the answer's risk, but a stream has only the answer so far: a
    sentence such as ``7995 - 2595 = 4500.`` scores low on its own and may come before the answer
    becomes risky. So a unit is verified with the threshold at 0 -- the verifiers its own text
    triggers run -- and, while the answer so far scores below ``policy.risk.threshold``, only the
    rule-based ``arithmetic`` verifier (milliseconds, no model, no network, no sandbox): code,
    citations, the planner and facts run as they would on the whole answer, once it is risky.
    Measured on ProcessBench (bench/results/verified-units-cases.md). ``cache``: a dict kept by
    the caller for the two policy copies."""
    cache = {} if cache is None else cache
    if risk_mod.score(question, answer_so_far).score >= policy.risk.threshold:
        if "risky" not in cache:
            cache["risky"] = policy.model_copy(update={"risk": policy.risk.model_copy(update={"threshold": 0.0})})
        return cache["risky"]
    return arithmetic_only(policy, cache)


def arithmetic_only(policy: Any, cache: dict[str, Any] | None = None) -> Any:
    """``policy`` with the threshold at 0 and only its ``arithmetic`` verifier enabled (``policy``
    itself when that verifier is off); ``cache``: as in :func:`unit_policy`."""
    cache = {} if cache is None else cache
    if not policy.verifiers.arithmetic.enabled:
        return policy
    if "low" not in cache:
        v = policy.verifiers
        off = {name: getattr(v, name).model_copy(update={"enabled": False})
               for name in type(v).model_fields if name != "arithmetic" and hasattr(getattr(v, name), "enabled")}
        cache["low"] = policy.model_copy(update={"risk": policy.risk.model_copy(update={"threshold": 0.0}),
                                                 "verifiers": v.model_copy(update=off)})
    return cache["low"]


@functools.lru_cache(maxsize=1)
def _steps() -> Any:
    """The pipeline's shared steps this mode calls (imported late: :mod:`proxy.pipeline.streams`
    imports this module from its mode switch), by one name each."""
    from types import SimpleNamespace

    from proxy.pipeline import respond, streams, verify

    return SimpleNamespace(verify_text=verify.verify_text, relay=streams.relay, publish=respond.publish,
                           finish=respond.finish, update=streams._update, blocked_body=respond.blocked_body,
                           with_report_frames=streams._with_report_frames, sentinel_entry=verify.sentinel_entry,
                           sentinel_stream=streams.sentinel_stream, correction_metrics=verify._correction_metrics,
                           passthrough_stream=streams.passthrough_stream)


class _Splice:
    """Skip what a correction repeats of the relayed ``prefix``; pass the rest.

    ``whole``: the reply must start with the prefix (white space aside); ``feed`` returns ""
    until it is past it, then the text after it; a reply that departs from the prefix sets
    ``failed``. ``continue``: the reply is a continuation unless its first :data:`_REPEAT_MIN`
    non-space characters repeat the prefix's start, in which case it is treated as ``whole``."""

    def __init__(self, prefix: str, strategy: str) -> None:
        self._want = "".join(prefix.split())
        self._strict = strategy == "whole" or not self._want
        self._pos = 0            # non-space characters of the prefix matched so far
        self._held = ""          # text read while undecided (``continue``)
        self.done = not self._want
        self.failed = False

    def feed(self, text: str) -> str:
        if self.done or self.failed:
            return "" if self.failed else text
        for i, ch in enumerate(text):
            if ch.isspace():
                continue
            if ch != self._want[self._pos]:
                if not self._strict and self._pos < _REPEAT_MIN:
                    self.done = True  # a true continuation: everything read so far is answer text
                    out, self._held = self._held + text, ""
                    return out
                self.failed = True
                return ""
            self._pos += 1
            if self._pos >= min(_REPEAT_MIN, len(self._want)):
                self._strict = True
            if self._pos == len(self._want):
                self.done = True
                self._held = ""
                return text[i + 1:]
        self._held += text
        return ""

    def finish(self) -> str:
        """The end of the reply: what was held when it was shorter than the repeat test."""
        if self.done or self.failed:
            return ""
        if not self._strict:
            self.done = True
            out, self._held = self._held, ""
            return out
        self.failed = True
        return ""


@dataclass(slots=True)
class _Source:
    """One upstream stream feeding one or more choices (``lanes``: upstream index -> choice)."""

    stream: UpstreamStream
    kind: str                      # "client" (the request's own stream) | "continuation"
    lanes: dict[int, int]
    call: dict[str, Any]
    splice: _Splice | None = None
    task: asyncio.Task[None] | None = None
    closed: bool = False


@dataclass(slots=True)
class _Lane:
    """One choice of the client's stream."""

    index: int
    splitter: UnitSplitter = field(default_factory=UnitSplitter)
    relayed: str = ""
    source: _Source | None = None
    units: list[tuple[int, Report]] = field(default_factory=list)   # (offset, report) of relayed units
    reasons: list[str] = field(default_factory=list)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    replaced: list[dict[str, Any]] = field(default_factory=list)
    first_failed: list[dict[str, Any]] | None = None
    failed_kinds: set[str] = field(default_factory=set)
    last_sig: frozenset[Any] | None = None
    last_failed: list[Check] = field(default_factory=list)
    since_round: str = ""          # text relayed since the last correction started (divergence)
    early: str = ""                # text of the unit being written relayed before it ended (low risk so far)
    unit_risky: bool = False       # the unit being written reached the risk threshold: held to its end
    logprobs: list[tuple[int, Any]] = field(default_factory=list)  # (end offset in the choice's text, entry)
    spanning: list[Check] = field(default_factory=list)  # failed claims no unit held whole (found at the end)
    relayed_failed: int = 0        # units relayed with a failed check (annotate / exhausted)
    stop_reason: str | None = None
    finish_reason: str | None = None
    finish_extra: dict[str, Any] = field(default_factory=dict)
    blocked: bool = False
    done: bool = False
    verify_s: float = 0.0
    tokens: int = 0
    calls: int = 0
    states: list[str] = field(default_factory=lambda: ["INITIAL_GENERATION"])


class _Blocked(Exception):
    """Every choice is blocked: the stream ends with the blocked error event."""


class _Failed(Exception):
    """An upstream failed: the stream ends with ``frame`` (an error event)."""

    def __init__(self, frame: bytes, reason: str) -> None:
        super().__init__(reason)
        self.frame = frame
        self.reason = reason


def events(ctx: Any, plan: Any, request: dict[str, Any], stream: UpstreamStream, report: Report) -> AsyncIterator[bytes]:
    """The stream-mode hook (:func:`proxy.pipeline.streams.mode_events`): a
    ``verified`` stream of ``request``; with the sentinel offered, its held turns come first
    (:func:`proxy.pipeline.streams.sentinel_stream`) and the final turn is verified as it flows;
    under a policy that checks nothing (``plan.checks_off``) the ``passthrough`` relay."""
    if plan.checks_off:  # nothing can be checked: relayed byte for byte, as passthrough does
        return _steps().passthrough_stream(ctx, plan, stream, report)
    if not plan.sentinel_on:
        return verified_events(ctx, plan, request, stream, report)
    def live(ctx_: Any, plan_: Any, live_stream: UpstreamStream, report_: Report, *, started: bool,
             frame_filter: Callable[[bytes], bytes]) -> AsyncIterator[bytes]:
        return verified_events(ctx_, plan_, request, live_stream, report_, frame_filter=frame_filter, started=started)

    return _steps().sentinel_stream(ctx, plan, request, stream, report, live_mode=live)


def verified_events(ctx: Any, plan: Any, request: dict[str, Any], stream: UpstreamStream, report: Report, *,
                    frame_filter: Callable[[bytes], bytes] | None = None, started: bool = False) -> AsyncIterator[bytes]:
    """The client's SSE events of a ``verified`` stream (see the module doc): ``stream`` is the
    opened upstream stream of ``request``; ``report`` (pending) is updated in place and stored
    before the report frame and ``[DONE]`` go out. ``frame_filter``: applied to every upstream
    read of the client's stream (the sentinel's :class:`proxy.pipeline.sentinel.DeltaFilter`);
    ``started``: the request budget already runs (the sentinel's rounds came first)."""
    return _VerifiedStream(ctx, plan, request, stream, report, frame_filter, started).run()


class _VerifiedStream:
    """One verified stream: reader tasks put every upstream stream's SSE reads on one queue;
    :meth:`run` takes them in order, feeds each choice's content to its unit splitter, verifies
    and relays units, opens continuations, and ends with the report and ``[DONE]``."""

    def __init__(self, ctx: Any, plan: Any, request: dict[str, Any], stream: UpstreamStream, report: Report,
                 frame_filter: Callable[[bytes], bytes] | None, started: bool) -> None:
        self.seq, self.ctx, self.plan, self.request, self.report = _steps(), ctx, plan, request, report
        self.policy = plan.policy
        self.keepalive_s = plan.policy.streaming.keepalive_s
        self.strategy = getattr(plan.policy.streaming, "continuation", "continue")
        self.correcting = plan.policy.on_failure in ("correct", "block")
        self.max_rounds = plan.policy.correction.max_rounds if self.correcting else 0
        self.queue: asyncio.Queue[tuple[_Source, bytes | None]] = asyncio.Queue()
        self.sources: list[_Source] = []
        self.lanes: dict[int, _Lane] = {}
        self.base: dict[str, Any] | None = None
        self.held: list[bytes] = []          # finish frames carrying the report (one choice, no usage chunk)
        self.tasks: set[asyncio.Task[Any]] = set()
        self.frame_filter = frame_filter
        self.started = started
        self.upstream_wait = 0.0
        # low-risk prose flows before its unit ends (a fact claim has no mark before it ends:
        # with the facts verifier on, units are held whole)
        self.early = "facts" not in plan.policy.verifiers.enabled() and not plan.skip_reason
        self.threshold = plan.policy.risk.threshold
        self.want_logprobs = plan.body.get("logprobs") is True
        self._policies: dict[str, Any] = {}
        self._arith = plan.policy.verifiers.arithmetic.enabled
        self._add_source(stream, "client", {}, None)

    # ------------------------------------------------------------------------------ plumbing

    def _add_source(self, stream: UpstreamStream, kind: str, lanes: dict[int, int], splice: _Splice | None) -> _Source:
        call = {"kind": kind, "usage": None, "closed_early": False}
        src = _Source(stream, kind, lanes, call, splice)
        self.sources.append(src)
        src.task = asyncio.ensure_future(self._read(src))
        return src

    async def _read(self, src: _Source) -> None:
        try:
            async for blob in self.seq.relay(self.ctx, src.stream):
                if self.frame_filter is not None and src.kind == "client":
                    blob = self.frame_filter(blob)
                self.queue.put_nowait((src, blob))
        finally:
            self.queue.put_nowait((src, None))

    async def _close(self, src: _Source) -> None:
        """Stop reading ``src`` and close its upstream connection."""
        if src.closed:
            return
        src.closed = True
        src.call["closed_early"] = src.call["usage"] is None
        if src.task is not None and not src.task.done():
            src.task.cancel()
        await src.stream.aclose()

    async def _alive(self, task: asyncio.Future[Any]) -> AsyncIterator[bytes]:
        """Keep-alive comments every ``keepalive_s`` until ``task`` is done."""
        self.tasks.add(task)  # cancelled by run()'s finally if the client leaves meanwhile
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=self.keepalive_s)
            if not done:
                yield KEEPALIVE
        self.tasks.discard(task)

    def _frame(self, index: int, delta: dict[str, Any], finish: str | None = None,
               extra: dict[str, Any] | None = None, logprobs: Any = None) -> bytes:
        choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish, **(extra or {})}
        return encode_chunk({**(self.base or {}), "choices": [choice]})

    # ------------------------------------------------------------------------------ the loop

    async def run(self) -> AsyncIterator[bytes]:
        try:
            try:
                while any(not s.closed for s in self.sources):
                    got = asyncio.ensure_future(self.queue.get())
                    t0 = time.perf_counter()
                    async for ka in self._alive(got):
                        yield ka
                    self.upstream_wait += time.perf_counter() - t0
                    src, blob = got.result()
                    if src.closed:
                        continue
                    if blob is None:
                        src.closed = True
                        await self._source_ended(src)
                        continue
                    async for out in self._blob(src, blob):
                        yield out
            except _Failed as exc:
                self.report.status, self.report.reason = "error", exc.reason  # type: ignore[assignment]
                await self.seq.publish(self.ctx, self.report)
                yield exc.frame
                return
            except _Blocked:
                final, completion = self._final()
                await self.seq.finish(self.ctx, self.plan, completion, final, checks_seen=True, blocked=True)
                self.seq.update(self.report, final)
                await self.seq.publish(self.ctx, self.report)
                vmetrics.observe_blocked(self.ctx.model, self.ctx.team, self.policy.name)
                yield b"data: " + json.dumps(self.seq.blocked_body(final), default=str).encode() + b"\n\n"
                return
            async for out in self._end():
                yield out
        finally:
            for task in list(self.tasks):
                task.cancel()
            for src in self.sources:
                if src.task is not None and not src.task.done():
                    src.task.cancel()
                await src.stream.aclose()

    async def _source_ended(self, src: _Source) -> None:
        """A stream ended (after its ``[DONE]``, or cut: relay sent an error event first)."""
        for lane_i in src.lanes.values():
            lane = self.lanes[lane_i]
            if lane.source is src and not lane.done:  # no finish_reason: relay's error event came first
                raise _Failed(sse_error_event("upstream stream ended before the answer was complete",
                                              code="upstream_stream_truncated"), "upstream stream failed")

    async def _blob(self, src: _Source, blob: bytes) -> AsyncIterator[bytes]:
        parsed = parse_stream(blob)
        if parsed.errors:
            what = "upstream stream failed" if src.kind == "client" else \
                "upstream stream failed during a correction (the answer is incomplete)"
            raise _Failed(b"data: " + json.dumps(parsed.errors[0]).encode() + b"\n\n", what)
        for chunk in parsed.chunks:
            async for out in self._chunk(src, chunk):
                yield out

    async def _chunk(self, src: _Source, chunk: dict[str, Any]) -> AsyncIterator[bytes]:
        if self.base is None:
            self.base = {k: v for k, v in chunk.items() if k not in ("choices", "usage", "veracity", "obfuscation")}
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            src.call["usage"] = usage
            if src.kind == "continuation":
                tokens = usage_tokens({"usage": usage})
                for lane_i in src.lanes.values():
                    self.lanes[lane_i].tokens += tokens
                self.plan.budget.charge(tokens, calls=0)
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        if not choices:
            if usage is None and src.kind == "client":  # Azure's prompt_filter_results chunk: relayed
                yield encode_chunk(chunk)
            return
        for ch in choices:
            if not isinstance(ch, dict):
                continue
            up = ch.get("index", 0)
            if src.kind == "client" and up not in src.lanes and up not in self.lanes:
                src.lanes[up] = up
                self.lanes[up] = _Lane(index=up, source=src)
            lane_i = src.lanes.get(up)
            if lane_i is None:
                continue  # a choice that left this stream for a correction
            lane = self.lanes[lane_i]
            if lane.source is not src or lane.done:
                continue
            delta = ch.get("delta") if isinstance(ch.get("delta"), dict) else {}
            others = {k: v for k, v in delta.items() if k != "content"}
            if src.kind == "continuation":
                others.pop("role", None)
            if others:  # role, the client's tool calls, refusal: relayed as they come
                if "role" in others and isinstance(delta.get("content"), str):
                    others["content"] = ""
                yield self._frame(lane.index, others)
            content = delta.get("content")
            if isinstance(content, str) and content:
                text = src.splice.feed(content) if src.splice is not None else content
                lp = ch.get("logprobs")
                if text and self.want_logprobs and isinstance(lp, dict) and isinstance(lp.get("content"), list):
                    end = len(lane.relayed) + len(lane.splitter.pending) + len(text)
                    lane.logprobs += [(end, e) for e in lp["content"]]
                if src.splice is not None and src.splice.failed:
                    async for out in self._splice_failed(lane, src):
                        yield out
                    continue
                async for out in self._units(lane, src, lane.splitter.feed(text) if text else []):
                    yield out
                if self.early and lane.source is src and not lane.done and not lane.unit_risky:
                    n = lane.splitter.flowable()
                    if n:
                        ahead = lane.splitter.pending[:n]
                        # below the threshold both as a unit and as the answer so far: nothing in
                        # it would be checked, so it cannot hold a claim that fails
                        if self._may_flow(lane, ahead):
                            piece = lane.splitter.release(n)
                            lane.early += piece
                            yield self._relay(lane, piece, None, early=True)
                        else:
                            lane.unit_risky = True
            finish = ch.get("finish_reason")
            if finish is not None and lane.source is src and not lane.done:
                tail = src.splice.finish() if src.splice is not None else ""
                if src.splice is not None and src.splice.failed:
                    async for out in self._splice_failed(lane, src):
                        yield out
                    continue
                units = (lane.splitter.feed(tail) if tail else []) + lane.splitter.finish()
                if lane.early and not units:  # relayed early to its very end: still verified
                    units = [Unit("", "sentence")]
                async for out in self._units(lane, src, units):
                    yield out
                if lane.source is src and not lane.done:
                    extra = {k: v for k, v in ch.items() if k not in ("index", "delta", "finish_reason", "logprobs")}
                    async for out in self._finish_lane(lane, finish, extra):
                        yield out

    async def _units(self, lane: _Lane, src: _Source, units: list[Unit]) -> AsyncIterator[bytes]:
        for unit in units:
            if lane.source is not src or lane.done:
                return  # a correction took over (or the choice was withheld): the rest is stale
            whole = lane.early + unit.text  # the unit as verified: its early part included
            if not whole.strip() or self.plan.skip_reason:
                if unit.text:
                    yield self._relay(lane, unit.text, None)
                lane.early, lane.unit_risky = "", False
                continue
            if not self.started:
                self.plan.start_verification()
                self.started, self.upstream_wait = True, 0.0
            self.plan.budget.deadline += self.upstream_wait  # the deadline covers the gateway's time only
            self.upstream_wait = 0.0
            t0 = time.perf_counter()
            task = asyncio.ensure_future(self._verify(lane, unit.text, whole))
            async for ka in self._alive(task):
                yield ka
            rep = task.result()
            lane.verify_s += time.perf_counter() - t0
            if rep.checks and "EXECUTING_VERIFICATION" not in lane.states[-1:]:
                lane.states.append("EXECUTING_VERIFICATION")
            if not rep.failed_checks:
                frame = self._relay(lane, unit.text, rep)
                lane.early, lane.unit_risky = "", False
                if unit.text:
                    yield frame
                continue
            async for out in self._failed_unit(lane, src, unit, rep):
                yield out

    def _may_flow(self, lane: _Lane, ahead: str) -> bool:
        """Whether ``ahead`` (the next text of the unit being written) may be relayed before the
        unit ends: nothing in the unit so far would be checked (:func:`unit_policy`) -- it
        scores below the threshold as a unit and as the answer so far, and triggers no
        arithmetic check -- so it cannot hold a claim that fails."""
        q = self.plan.question
        own = risk_mod.score(q, lane.early + ahead)
        if own.score >= self.threshold or (self._arith and "arithmetic" in own.verifiers):
            return False
        return risk_mod.score(q, lane.relayed + ahead).score < self.threshold

    async def _verify(self, lane: _Lane, tail: str, whole: str) -> Report:
        """Verify one unit (``whole``: its early part and ``tail``, the rest) with the call every
        path makes (:func:`proxy.pipeline.verify.verify_text`) under :func:`unit_policy`, its
        checks counted in the metrics as the first draft's or a correction's."""
        policy = unit_policy(self.policy, self.plan.question, lane.relayed + tail, self._policies)
        plan = self.plan
        rep = await self.seq.verify_text(policy, plan.question, whole, plan.budget, model=plan.model,
                                         messages=plan.messages, resources=getattr(plan, "resources", None))
        vmetrics.observe_checks(rep, model=self.ctx.model, team=self.ctx.team, policy=self.policy.name,
                                draft="correction" if lane.rounds else "first")
        return rep

    def _relay(self, lane: _Lane, text: str, rep: Report | None, *, early: bool = False) -> bytes:
        """Relay ``text`` of ``lane`` (``rep``: the report of the unit it ends, whose early part
        was relayed before; ``early``: a piece of the unit being written)."""
        if rep is not None:
            lane.units.append((len(lane.relayed) - len(lane.early), rep))
            if rep.reason and not rep.checks:
                lane.reasons.append(rep.reason)
        lane.relayed += text
        if lane.rounds:
            lane.since_round += text
        lp = None
        if self.want_logprobs:  # the token entries of the text relayed so far ride along with it
            done = len(lane.relayed)
            lp = {"content": [e for end, e in lane.logprobs if end <= done], "refusal": None}
            lane.logprobs = [(end, e) for end, e in lane.logprobs if end > done]
        return self._frame(lane.index, {"content": text}, logprobs=lp)

    # ------------------------------------------------------------------------------ correcting

    async def _failed_unit(self, lane: _Lane, src: _Source, unit: Unit, rep: Report) -> AsyncIterator[bytes]:
        lane.states.append("VERIFICATION_FAILED")
        if lane.first_failed is None:
            lane.first_failed = [c.to_dict() for c in rep.failed_checks]
        lane.failed_kinds |= {c.verifier for c in rep.failed_checks}
        sig = corr.failure_signature(rep)
        reason = None
        if len(lane.rounds) >= self.max_rounds:
            reason = "max_rounds" if self.max_rounds else "not_attempted"
        elif sig == lane.last_sig:
            reason = "oscillation"
        elif not self.plan.budget.allow_call():
            ex = self.plan.budget.exhausted
            reason = "deadline" if ex == "deadline" else f"budget:{ex}"
        if reason is not None:
            async for out in self._give_up(lane, src, unit, rep, reason):
                yield out
            return
        lane.last_sig, lane.last_failed = sig, list(rep.failed_checks)
        n = len(lane.rounds) + 1
        lane.replaced.append({"choice": lane.index, "round": n, "offset": len(lane.relayed), "text": unit.text,
                              "failed_claims": [f"{c.verifier}: {c.claim}"[:200] for c in rep.failed_checks]})
        lane.states.append("CORRECTING")
        # stop reading the stream that wrote the failed unit; close it when no choice reads it
        src.lanes = {k: v for k, v in src.lanes.items() if v != lane.index}
        lane.source = None
        if not src.lanes:
            await self._close(src)
        self.plan.budget.charge(0)
        lane.calls += 1
        body = continuation_body(self.plan.body, lane.relayed, unit.text, rep, strategy=self.strategy,
                                 model=self.policy.correction.model)
        t0 = time.perf_counter()
        task = asyncio.ensure_future(self._open(body))
        async for ka in self._alive(task):
            yield ka
        try:
            stream = task.result()
        except UpstreamError as exc:
            lane.rounds.append({"round": n, "state": "CORRECTING", "strategy": self.strategy,
                                "error": f"upstream: {exc.reason}"})
            raise _Failed(exc.sse_event(), "upstream failed during a correction (the answer is incomplete)") from None
        except asyncio.TimeoutError:
            lane.rounds.append({"round": n, "state": "CORRECTING", "strategy": self.strategy, "error": "deadline"})
            raise _Failed(sse_error_event("the correction did not start before the verification deadline",
                                          code="veracity_deadline"), "correction deadline") from None
        lane.rounds.append({"round": n, "state": "CORRECTING", "strategy": self.strategy,
                            "failed": len(rep.failed_checks),
                            "failed_claims": [f"{c.verifier}: {c.claim}"[:200] for c in rep.failed_checks],
                            "open_ms": round((time.perf_counter() - t0) * 1000.0, 1)})
        lane.since_round, lane.early, lane.unit_risky, lane.logprobs = "", "", False, []
        lane.splitter = UnitSplitter(at_line_start=not lane.relayed or lane.relayed.endswith("\n"))
        new = self._add_source(stream, "continuation", {0: lane.index}, _Splice(lane.relayed, self.strategy))
        lane.source = new

    async def _open(self, body: dict[str, Any]) -> UpstreamStream:
        stream = await asyncio.wait_for(self.ctx.upstream.open_stream(body), max(0.05, self.plan.budget.remaining_s()))
        try:
            await stream.peek()
        except BaseException:
            await stream.aclose()
            raise
        return stream

    async def _give_up(self, lane: _Lane, src: _Source | None, unit: Unit, rep: Report,
                       reason: str) -> AsyncIterator[bytes]:
        """No correction passed within the policy: ``block`` withholds, else the unit is relayed."""
        lane.stop_reason = reason
        if lane.rounds:
            lane.states.append("MAX_RETRY_EXCEEDED")
        if self.policy.on_failure == "block":
            lane.units.append((len(lane.relayed) - len(lane.early), rep))  # the report shows the failed checks
            lane.blocked = True
            lane.done = True
            if src is not None:
                src.lanes = {k: v for k, v in src.lanes.items() if v != lane.index}
                if not src.lanes:
                    await self._close(src)
            if len(self.lanes) <= 1 or all(ln.blocked for ln in self.lanes.values()):
                raise _Blocked()
            bad = rep.failed_checks
            what = "; ".join(f"{c.verifier}: {c.claim}"[:120] for c in bad[:3])
            yield self._frame(lane.index, {"refusal": f"Veracity withheld the rest of this choice: "
                                                      f"{len(bad)} check(s) failed ({what})."}, "content_filter")
            return
        lane.relayed_failed += 1
        frame = self._relay(lane, unit.text, rep)
        lane.early, lane.unit_risky = "", False
        if unit.text:
            yield frame
        if src is None or lane.source is None:  # nothing left to read for this choice
            async for out in self._finish_lane(lane, "stop", {}):
                yield out

    async def _splice_failed(self, lane: _Lane, src: _Source) -> AsyncIterator[bytes]:
        """A ``whole`` correction rewrote what the reader already has: it cannot be spliced."""
        if lane.rounds:
            lane.rounds[-1]["diverged"] = "rewrote the relayed text"
        await self._close(src)
        lane.source = None
        failed = self.lanes[lane.index].last_failed
        rep = Report(status="failed", checks=list(failed))
        text = lane.replaced[-1]["text"] if lane.replaced else ""
        async for out in self._give_up(lane, None, Unit(text, "sentence"), rep, "divergence"):
            yield out

    async def _finish_lane(self, lane: _Lane, finish: str, extra: dict[str, Any]) -> AsyncIterator[bytes]:
        lane.done = True
        lane.finish_reason, lane.finish_extra = finish, extra
        src = lane.source
        if src is not None:
            src.lanes = {k: v for k, v in src.lanes.items() if v != lane.index}
        frame = self._frame(lane.index, {}, finish, extra)
        if report_on_last_chunk(self.plan.body):
            self.held.append(frame)
        else:
            yield frame

    # ------------------------------------------------------------------------------ the end

    async def _end(self) -> AsyncIterator[bytes]:
        if self._arith and not self.plan.skip_reason:
            for lane in self.lanes.values():
                if lane.relayed.strip() and not lane.blocked:
                    task = asyncio.ensure_future(self._spanning(lane))
                    async for ka in self._alive(task):
                        yield ka
                    lane.spanning = task.result()
        final, completion = self._final()
        await self.seq.finish(self.ctx, self.plan, completion, final, checks_seen=True)
        self.seq.update(self.report, final)
        await self.seq.publish(self.ctx, self.report)  # before the report frame and [DONE] go out
        frames = list(self.held)
        if include_usage(self.plan.body):
            frames.append(encode_chunk({**(self.base or {}), "choices": [], "usage": self._usage()}))
        for frame in self.seq.with_report_frames(self.plan, frames, completion, final.to_dict(), self.ctx.model):
            yield frame
        yield DONE_FRAME

    async def _spanning(self, lane: _Lane) -> list[Check]:
        """Failed arithmetic claims of the whole relayed answer that no unit held whole (an
        expression in one sentence, its stated total in the next: ``Total = 3 + 3 + 1.5 + 1.5.
        Total = 8.``), found once the choice ended -- too late to withhold, reported. Only the
        rule-based arithmetic check runs again (milliseconds; bench/results/verified-units-cases.md
        lists the claims only the whole answer shows)."""
        policy = arithmetic_only(self.policy, self._policies)
        rep = await self.seq.verify_text(policy, self.plan.question, lane.relayed, self.plan.budget,
                                         resources=getattr(self.plan, "resources", None))
        seen = {" ".join(str(c.claim).split()) for _, r in lane.units for c in r.checks}
        out = []
        for c in rep.failed_checks:
            if " ".join(str(c.claim).split()) not in seen:
                c.note = (c.note + "; " if c.note else "") + "spans units: found on the whole answer once relayed"
                out.append(c)
        return out

    def _usage(self) -> dict[str, Any] | None:
        """The usage of every upstream call whose usage chunk arrived, summed field by field
        (nested ``*_tokens_details`` too); one call's usage is sent as the upstream wrote it."""
        known = [s.call["usage"] for s in self.sources if isinstance(s.call.get("usage"), dict)]
        if not known:
            return None
        out: dict[str, Any] = json.loads(json.dumps(known[0]))
        for u in known[1:]:
            _add_usage(out, u)
        return out

    def _final(self) -> tuple[Report, dict[str, Any]]:
        """The request's report and the completion as the client received it."""
        seq = self.seq
        lanes = [self.lanes[i] for i in sorted(self.lanes)]
        reports = [(lane.index, self._lane_report(lane)) for lane in lanes]
        for lane, (_, rep) in zip(lanes, reports):
            if lane.stop_reason and (lane.stop_reason.startswith("budget") or lane.stop_reason == "deadline"):
                rep.budget_stop = True  # read by the metrics below
        seq.correction_metrics([rep for _, rep in reports])
        completion = {**(self.base or {}), "object": "chat.completion",
                      "choices": [{"index": ln.index, "message": {"role": "assistant", "content": ln.relayed},
                                   "finish_reason": ln.finish_reason} for ln in lanes]}
        if len(reports) == 1:
            final = reports[0][1]
        elif not reports:
            final = Report(status="skipped", reason="no answer text to verify (tool calls or empty)")
        else:
            for _, rep in reports:
                rep.extra["states"] = corr.walked_states(rep)
            final = choices.combine(reports)
        final.extra["policy"] = self.policy.name
        final.extra["stream"] = {"mode": "verified", "strategy": self.strategy,
                                 "units": sum(len(ln.units) for ln in lanes),
                                 "calls": [dict(s.call) for s in self.sources]}
        seq.sentinel_entry(self.plan, final, lanes[0].relayed if lanes else None)
        return final, completion

    def _lane_report(self, lane: _Lane) -> Report:
        trust = self.policy.verification.trust_model_passes
        rep = Report(trust_model_passes=trust)
        vm_calls: list[Any] = []
        vm_model = None
        for offset, unit_rep in lane.units:
            for c in unit_rep.checks:
                if c.span is not None:
                    c.span = (c.span[0] + offset, c.span[1] + offset)
                rep.checks.append(c)
            rep.cost.tokens += unit_rep.cost.tokens
            rep.cost.verifier_calls += unit_rep.cost.verifier_calls
            rep.cost.searches += unit_rep.cost.searches
            vm = unit_rep.extra.get("verifier_model") or {}
            vm_calls += list(vm.get("calls") or [])
            vm_model = vm_model or vm.get("model")
            for key in ("sources", "unconfirmed"):
                if unit_rep.extra.get(key):
                    rep.extra.setdefault(key, []).extend(unit_rep.extra[key])
        if vm_calls:
            rep.extra["verifier_model"] = {"model": vm_model, "calls": vm_calls}
        rep.checks += lane.spanning
        rep.cost.tokens += lane.tokens
        rep.cost.upstream_calls += lane.calls
        rep.cost.ms = lane.verify_s * 1000.0
        if self.plan.skip_reason:
            rep.status, rep.reason = "skipped", self.plan.skip_reason  # type: ignore[assignment]
        elif not rep.checks:
            rep.status = "skipped"  # type: ignore[assignment]
            rep.reason = lane.reasons[0] if lane.reasons else ("no answer text to verify (tool calls or empty)"
                                                               if not lane.relayed.strip() else "risk below threshold")
        else:
            rep.status = status_of(rep.checks, trust_model_passes=trust)  # type: ignore[assignment]
        if lane.relayed.strip() and self.policy.verifiers.enabled():
            rep.risk = risk_mod.score(self.plan.question, lane.relayed).to_dict()
        if lane.first_failed is not None:
            self._correction_outcome(lane, rep)
        elif lane.spanning and not lane.relayed_failed:
            rep.reason = "verified stream: a claim spanning units failed, found once it was relayed"
        elif rep.status == "failed":
            rep.reason = "verified stream: the failed unit was relayed (on_failure annotate: no correction)"
        rep.rounds = lane.rounds
        states = list(lane.states)
        if rep.status in ("passed", "corrected") and states[-1] != "VERIFICATION_PASSED":
            states.append("VERIFICATION_PASSED")
        rep.extra["states"] = states
        return rep

    def _correction_outcome(self, lane: _Lane, rep: Report) -> None:
        """Status and record of a choice that had a failed unit (``correct``'s rules)."""
        rep.extra["corrected_checks"] = lane.first_failed
        if lane.replaced:
            rep.extra["replaced"] = lane.replaced
        stop = lane.stop_reason
        gone = None
        if stop is None and lane.last_failed:
            gone = divergence.diverged(lane.last_failed, lane.since_round, lane.replaced[-1]["text"]
                                            if lane.replaced else None)
            if gone is not None:
                stop = "divergence"
                rep.extra.setdefault("correction", {})["divergence"] = gone.to_dict()
        if lane.relayed_failed or lane.blocked or rep.failed_checks or gone is not None:
            rep.status = "failed"  # type: ignore[assignment]
            if lane.spanning and not (lane.relayed_failed or lane.blocked or gone is not None):
                rep.reason = "verified stream: a claim spanning units failed, found once it was relayed"
            elif stop == "not_attempted":
                rep.reason = "verified stream: the failed unit was relayed (on_failure annotate: no correction)"
            elif lane.blocked:
                rep.reason = f"verified stream: no correction passed ({stop}); the rest of the answer was withheld"
            elif gone is not None:
                rep.reason = f"correction stopped: divergence ({gone.kind}: {gone.detail}); already relayed"
            else:
                rep.reason = f"verified stream: no correction passed ({stop}); the failed unit was relayed"
            state = "MAX_RETRY_EXCEEDED" if lane.rounds else "VERIFICATION_FAILED"
        else:
            undecided = corr.undecided_after_correction(rep, lane.failed_kinds)
            fixed = [c for c in rep.checks if c.verifier in lane.failed_kinds
                     and decided_pass(c, trust_model_passes=rep.trust_model_passes)]
            # a pass about another claim is no fix of the one that failed ("34. Then 17 * 23 -> 401")
            unshown = divergence.unconfirmed_fixes(
                lane.last_failed, [c for c in rep.checks if decided_pass(c, trust_model_passes=rep.trust_model_passes)],
                lane.since_round or lane.relayed)
            if undecided or not fixed or unshown:
                rep.status = "unverified"  # type: ignore[assignment]
                rep.reason = "corrected stream: no check failed, but the corrected claim was not decided"
            else:
                rep.status = "corrected"  # type: ignore[assignment]
            stop, state = "passed", "VERIFICATION_PASSED"
        rep.extra["correction"] = {**rep.extra.get("correction", {}), "state": state, "stop_reason": stop,
                                   "strategy": self.strategy}


def _add_usage(into: dict[str, Any], more: dict[str, Any]) -> None:
    """Add the token counts of ``more`` to ``into`` (integers summed, nested objects recursed)."""
    for k, v in more.items():
        cur = into.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and (cur is None or
                                                              (isinstance(cur, int) and not isinstance(cur, bool))):
            into[k] = (cur or 0) + v
        elif isinstance(v, dict):
            if not isinstance(cur, dict):
                cur = into[k] = {}
            _add_usage(cur, v)
