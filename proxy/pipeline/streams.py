"""The stream modes (``stream: true``) and the SSE helpers they share.

:func:`mode_events` is the one switch from a policy's stream mode to the generator that sends
the stream (a new mode is one more branch there, plus :func:`stream_mode` when a policy field
selects it):

- ``buffer`` (:func:`buffer_stream`): hold the stream (keep-alive comments), run the same
  sequence as a non-stream request (sentinel, verification, correction, blocking), then stream
  the final answer as valid chunks.
- ``passthrough`` (:func:`passthrough_stream`): relay live and send the report before
  ``[DONE]``; with the sentinel offered (:func:`sentinel_stream`), turns that may call
  ``verify_result`` are held and only the final turn is relayed.
- ``observe`` (:func:`observe_stream`): relay live, verify in the background.
- ``verified`` (:mod:`proxy.pipeline.verified_stream`): relay unit by unit what passed, hold
  only the unit being checked, splice a correction into the same stream.

Both verifying modes end with the report: on the last chunk with a ``finish_reason`` (one
choice, no usage chunk asked), else in a ``choices: []`` chunk. :func:`relay` is the upstream's
events as they arrive, ending with an error event (never a normal stop) on a cut stream.

The SSE helpers:

- :func:`hold` yields SSE comment keep-alives (``: keep-alive``) while a piece of work runs,
  then the frames the work produced: clients and proxies see bytes every ``keepalive_s``
  seconds while the gateway holds the answer to verify it. Comment lines are ignored by SSE
  parsers (WHATWG HTML "Server-sent events", "Lines starting with ':'"), the ``openai`` SDK
  included.
- :func:`completion_frames` turns a verified ``chat.completion`` into valid chunk frames
  (:func:`proxy.wire.sse.to_chunks`), with the usage chunk only when the client asked for it.
- :func:`report_frame` is the last chunk before ``[DONE]``: ``choices: []`` plus the
  ``veracity`` report (the same shape as OpenAI's usage chunk, so the SDK parses it). It is
  used when the client asked for the usage chunk (such clients expect ``choices: []``) or for
  ``n > 1``; otherwise :func:`with_report` puts the report on the answer's last chunk (the one
  with ``finish_reason``): the common client loop ``chunk.choices[0].delta`` raises
  ``IndexError`` on a ``choices: []`` chunk it never asked for (BerriAI/litellm#30870).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from proxy.observability import metrics
from proxy.observability import verification_metrics as vmetrics
from proxy.pipeline import choices, sentinel
from proxy.pipeline.correction import walked_states
from proxy.pipeline.plan import Plan, RequestContext, counting
from proxy.pipeline.respond import block, blocked_body, blocked_statuses, created, finish, observe_job, publish
from proxy.pipeline.verify import record_settled, sentinel_entry, skip_report, verify_and_correct, verify_only
from proxy.policy import Policy
from proxy.stores import reports
from proxy.upstreams import UpstreamStream
from proxy.wire.errors import UpstreamError, sse_error_event
from proxy.wire import sse
from proxy.wire.messages import completion_text, has_text
from proxy.wire.sse import DONE_FRAME, IncompleteStream, assemble, encode_chunk, encode_chunk_lenient, parse_stream, to_chunks
from verifiers import Report

__all__ = ["stream_mode", "mode_events", "buffer_stream", "passthrough_stream", "sentinel_stream", "observe_stream",
           "relay", "hold", "completion_frames", "report_frame", "with_report", "has_finish", "report_on_last_chunk",
           "DONE_FRAME", "KEEPALIVE", "include_usage", "without_upstream_report"]


KEEPALIVE = b": keep-alive\n\n"


_FINISH_RE = re.compile(rb'"finish_reason"\s*:\s*"')


def include_usage(body: dict[str, Any]) -> bool:
    """Whether the client asked for the usage chunk (``stream_options.include_usage``)."""
    so = body.get("stream_options")
    return isinstance(so, dict) and so.get("include_usage") is True


def report_on_last_chunk(body: dict[str, Any]) -> bool:
    """Whether the report rides on the answer's last chunk (:func:`with_report`) rather than in
    a ``choices: []`` chunk: when the client did not ask for the usage chunk and wants one
    choice (``n`` absent or 1)."""
    n = body.get("n")
    return not include_usage(body) and (n is None or n == 1)


def has_finish(frame: bytes) -> bool:
    """Whether an SSE frame carries a (non-null) ``finish_reason``."""
    return _FINISH_RE.search(frame) is not None


def with_report(frame: bytes, report: dict[str, Any]) -> bytes | None:
    """``frame`` (one ``data:`` chunk event, as relayed) with ``"veracity": report`` added to
    its chunk object; ``None`` when the frame is not a JSON object chunk (the caller then sends
    :func:`report_frame`)."""
    lines = frame.strip(b"\n").split(b"\n")
    if not lines or any(not line.startswith(b"data: ") for line in lines):
        return None
    try:
        chunk = json.loads(b"\n".join(line[6:] for line in lines))
    except (ValueError, RecursionError):
        return None
    if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
        return None
    chunk["veracity"] = report
    return encode_chunk_lenient(chunk)


def without_upstream_report(blob: bytes) -> bytes:
    """``blob`` (whole SSE frames as the upstream sent them) with any top-level ``veracity``
    key removed from its chunk objects. The ``veracity`` field is the gateway's report: an
    upstream (or anything between it and the gateway) that writes one -- ``"status": "passed"``
    on every chunk of a wrong answer -- must not reach a client that reads the report from the
    chunks. Frames are decoded only when the bytes could hold the key (``eracity``, or a JSON
    ``\\u00`` escape that could spell it); other frames pass through byte for byte."""
    if b"eracity" not in blob and b"\\u00" not in blob:
        return blob
    out: list[bytes] = []
    for frame in blob.split(b"\n\n"):
        lines = frame.split(b"\n")
        data = [ln for ln in lines if ln.startswith(b"data:")]
        if data and len(data) == len(lines):
            try:
                chunk = json.loads(b"\n".join(ln[5:].lstrip(b" ") for ln in data))
            except (ValueError, RecursionError):
                chunk = None
            if isinstance(chunk, dict) and "veracity" in chunk:
                del chunk["veracity"]
                out.append(encode_chunk_lenient(chunk)[: -2])
                continue
        out.append(frame)
    return b"\n\n".join(out)


async def hold(work: Awaitable[list[bytes]], keepalive_s: float, *, first: bytes = KEEPALIVE,
               stats: dict[str, Any] | None = None) -> AsyncIterator[bytes]:
    """Yield ``first`` at once (time to first byte stays small), then a keep-alive comment
    every ``keepalive_s`` seconds until ``work`` finishes, then its frames. Closing the
    generator (client gone) cancels the work. ``stats["keepalives"]`` counts comments sent."""
    task = asyncio.ensure_future(work)
    sent = 0
    try:
        if first:
            yield first
        while True:
            done, _ = await asyncio.wait({task}, timeout=keepalive_s)
            if done:
                break
            sent += 1
            yield KEEPALIVE
        for frame in task.result():
            yield frame
    finally:
        if stats is not None:
            stats["keepalives"] = sent
        if not task.done():
            task.cancel()
            try:
                await task
            except BaseException:  # noqa: BLE001 - the client is gone; nothing to report to
                pass


def completion_frames(completion: dict[str, Any], *, usage: bool, chunk_size: int = 64) -> list[bytes]:
    """The SSE frames of ``completion`` as a stream (no ``[DONE]``)."""
    comp = {k: v for k, v in completion.items() if k != "veracity"}
    if not usage:
        comp.pop("usage", None)
    return [encode_chunk(c) for c in to_chunks(comp, chunk_size=chunk_size, include_usage=usage)]


def report_frame(completion: dict[str, Any] | None, report: dict[str, Any], model: str) -> bytes:
    """The ``choices: []`` chunk carrying the ``veracity`` report."""
    comp = completion or {}
    chunk = {
        "id": comp.get("id") or "chatcmpl-veracity",
        "object": "chat.completion.chunk",
        "created": comp.get("created") or int(time.time()),
        "model": comp.get("model") or model,
        "choices": [],
        "veracity": report,
    }
    return encode_chunk_lenient(chunk)


# ------------------------------------------------------------------------------ the stream modes


def stream_mode(policy: Policy) -> str:
    """The stream mode of ``policy``: ``observe`` under ``on_failure: observe`` (whatever
    ``streaming.mode`` says: it answers before verifying), else ``streaming.mode``."""
    return "observe" if policy.on_failure == "observe" else policy.streaming.mode


#: the stream modes that may offer the sentinel's ``verify_result`` tool (they hold a turn)
SENTINEL_MODES = ("buffer", "passthrough", "verified")


def mode_events(mode: str, ctx: RequestContext, plan: Plan, request: dict[str, Any], stream: UpstreamStream,
                report: Report) -> AsyncIterator[bytes]:
    """The SSE bytes of an opened ``stream`` (first event already arrived) in ``mode``.
    ``request``: the body sent upstream (the sentinel injected or not, ``plan.sentinel_on``);
    ``report``: the report the app sees at once (``pending``), updated in place when the
    mode's verification ends (observe mode: ``skipped`` at once, its job publishes the rest)."""
    if mode == "observe":
        report.status, report.reason = "skipped", "observe: verified in the background"
        report.policy = plan.policy.name
        report.states = walked_states(report)
        return observe_stream(ctx, plan, stream, report)
    if mode == "verified":  # proxy/pipeline/verified_stream.py (imported here: it imports this module)
        from proxy.pipeline import verified_stream
        return verified_stream.events(ctx, plan, request, stream, report)
    if mode == "passthrough" and plan.sentinel_on:
        return sentinel_stream(ctx, plan, request, stream, report)
    if mode == "passthrough":
        return passthrough_stream(ctx, plan, stream, report)
    return buffer_stream(ctx, plan, request, stream, report)


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
        return None, sse.frame(json.dumps(parsed.errors[0]).encode())
    try:
        return assemble(parsed.chunks, done=parsed.done, strict=True), None
    except IncompleteStream as exc:
        return None, sse_error_event(f"upstream stream ended incomplete ({'; '.join(exc.problems)})",
                                     code="upstream_stream_truncated")


def _update(target: Report, source: Report) -> None:
    for name in ("status", "checks", "risk", "rounds", "cost", "reason", "extra"):
        setattr(target, name, getattr(source, name))


def _answer_frames(ctx: RequestContext, plan: Plan, completion: dict[str, Any], report: Report) -> list[bytes]:
    """A held answer as SSE frames: its chunks, the report, ``[DONE]``."""
    frames = completion_frames(completion, usage=include_usage(plan.body))
    return _with_report_frames(plan, frames, completion, report.to_dict(), ctx.model) + [DONE_FRAME]


async def _held_draft(plan: Plan, stream: UpstreamStream, report: Report) -> tuple[dict[str, Any] | None, bytes | None]:
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


async def buffer_stream(ctx: RequestContext, plan: Plan, request: dict[str, Any], stream: UpstreamStream,
                         report: Report) -> AsyncIterator[bytes]:
    """Buffer mode: hold the answer (keep-alives), verify and correct, then stream it."""
    async def work() -> list[bytes]:
        draft, err = await _held_draft(plan, stream, report)
        if err is not None:
            await publish(ctx, report)
            return [err]
        completion, final = await verify_and_correct(ctx, plan, request, draft)
        completion, blocked = block(plan, completion, final)
        await finish(ctx, plan, completion, final, checks_seen=True, blocked=blocked)
        _update(report, final)
        await publish(ctx, report)  # before the client can see the end of the stream
        if blocked:
            vmetrics.observe_blocked(ctx.model, ctx.team, plan.policy.name)
            return [sse.frame(json.dumps(blocked_body(final), default=str).encode())]
        return _answer_frames(ctx, plan, completion, final)

    stats: dict[str, Any] = {}
    try:
        async for frame in hold(work(), plan.policy.streaming.keepalive_s, stats=stats):
            yield frame
    finally:
        ctx.log["keepalives"] = stats.get("keepalives", 0)
        await stream.aclose()


def _with_report_frames(plan: Plan, frames: list[bytes], completion: dict[str, Any] | None,
                        report: dict[str, Any], model: str) -> list[bytes]:
    """``frames`` with the report: on the usage chunk when the client asked for it, on the
    last chunk that has a ``finish_reason`` when :func:`proxy.pipeline.streams.report_on_last_chunk`
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


async def passthrough_stream(ctx: RequestContext, plan: Plan, stream: UpstreamStream, report: Report, *,
                              started: bool = False,
                              frame_filter: Callable[[bytes], bytes] | None = None) -> AsyncIterator[bytes]:
    """Passthrough mode: relay live; hold back the usage chunk and ``[DONE]`` (and, when the
    report rides on the last chunk, everything from the first ``finish_reason`` on); verify;
    then send the report in the usage chunk (when the upstream sent one), on the last chunk
    with a ``finish_reason``, or in one added ``choices: []`` chunk (see
    :func:`_with_report_frames`), then ``[DONE]``. ``started``: the request budget already
    runs (the sentinel's rounds came first, :func:`sentinel_stream`); ``frame_filter``: applied
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
        await publish(ctx, report)
        for frame in held + ([usage_frame] if usage_frame else []):
            yield frame
        return
    parsed = parse_stream(b"".join(parts + held + ([usage_frame] if usage_frame else [])))
    completion = assemble(parsed.chunks, done=True, strict=False) if parsed.chunks else {}
    final = await _passthrough_report(plan, completion, started=started)
    await finish(ctx, plan, completion, final)
    _update(report, final)
    await publish(ctx, report)  # before the report frame and [DONE] go out
    if usage_frame is not None:
        for frame in held:
            yield frame
        chunk = json.loads(usage_frame[usage_frame.index(b"{"):])
        chunk["veracity"] = final.to_dict()
        yield sse.frame(json.dumps(chunk, separators=(",", ":"), default=str).encode())
    else:
        for frame in _with_report_frames(plan, held, completion, final.to_dict(), ctx.model):
            yield frame
    yield DONE_FRAME


async def _passthrough_report(plan: Plan, completion: dict[str, Any], *, started: bool = False) -> Report:
    """The report of an answer relayed in passthrough mode: verified, never corrected (it was
    already sent), with the sentinel's entry. ``started``: keep the running request budget."""
    final = skip_report(plan, completion_text(completion)) if len(choices.choice_list(completion)) <= 1 else None
    if final is None:
        t0 = time.perf_counter()
        if not started:
            plan.start_verification()
        final = await verify_only(plan, completion)
        final.cost.ms = (time.perf_counter() - t0) * 1000.0
        if final.status == "failed":
            final.reason = "passthrough: the answer was already sent; failed checks are reported, not corrected"
        elif final.status in blocked_statuses(plan.policy):  # on_unverified: block, too late on a live stream
            final.reason = "passthrough: the answer was already sent; on_unverified: block cannot withhold it"
    final.policy = plan.policy.name
    sentinel_entry(plan, final, completion_text(completion))
    return final


#: the stand-in completion :func:`sentinel_stream` gives ``sentinel.settle`` for the final turn,
#: which goes to the client live instead
_LIVE = "_veracity_live_turn"


async def sentinel_stream(ctx: RequestContext, plan: Plan, request: dict[str, Any], stream: UpstreamStream,
                           report: Report, live_mode: Callable[..., AsyncIterator[bytes]] | None = None
                           ) -> AsyncIterator[bytes]:
    """Passthrough mode with the sentinel offered (e.g. the shipped ``agent`` policy).

    A turn that is offered ``verify_result`` is held (keep-alive comments, never relayed: it may
    call the tool), and :func:`proxy.pipeline.sentinel.settle` runs its rounds as on the non-stream
    path: the first turn is the client's stream, collected; rounds that still offer the tool
    (not ready yet, the ``forced`` check) are non-stream calls. The turn that no longer offers
    it (ready, or the last round) is streamed to the client live, through
    :class:`proxy.pipeline.sentinel.DeltaFilter` (a model that calls the tool anyway is not relayed),
    and verified as in :func:`passthrough_stream`; when the final answer is a held turn (the
    model answered without the tool, or called only the client's tools) it is streamed from
    the assembled completion (:func:`proxy.pipeline.streams.completion_frames`). The client sees one
    stream: comments, then one turn's chunks (one id, one ``finish_reason``), the report, then
    ``[DONE]``; the report carries the ``sentinel`` entry."""
    live: dict[str, UpstreamStream] = {}
    complete = counting(ctx, plan)

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
            await publish(ctx, report)
            return [err]
        settled = await sentinel.settle(request, draft, turn, mode=plan.policy.sentinel.mode,
                                        max_rounds=plan.policy.sentinel.max_rounds, budget=plan.budget)
        record_settled(plan, settled)
        if settled.completion.get(_LIVE) and "stream" in live:
            return []  # the final turn is relayed live below
        completion = settled.completion
        final = await _passthrough_report(plan, completion, started=True)
        await finish(ctx, plan, completion, final)
        _update(report, final)
        await publish(ctx, report)
        return _answer_frames(ctx, plan, completion, final)

    stats: dict[str, Any] = {}
    try:
        async for frame in hold(work(), plan.policy.streaming.keepalive_s, stats=stats):
            yield frame
        if "stream" in live:
            async for frame in (live_mode or passthrough_stream)(ctx, plan, live["stream"], report, started=True,
                                                                 frame_filter=sentinel.DeltaFilter()):
                yield frame
    finally:
        ctx.log["keepalives"] = stats.get("keepalives", 0)
        await stream.aclose()
        if "stream" in live:
            await live["stream"].aclose()


async def observe_stream(ctx: RequestContext, plan: Plan, stream: UpstreamStream,
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
            if has_text(completion):
                later = ctx.gateway.runtime.spawn(observe_job(ctx, plan, completion)) is not None
    finally:
        if not later:
            reports.publish_soon(ctx.gateway.reports, ctx.principal, ctx.request_id, ctx.model, created(ctx),
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
            metrics.upstream_error("truncated", ctx.model, ctx.team, 200)  # counted as the 200 it began as
            yield sse_error_event(f"upstream stream ended without {missing}; the answer is incomplete",
                                  code="upstream_stream_truncated")
    except UpstreamError as exc:
        ctx.log["error_code"] = exc.code
        metrics.upstream_error(exc.reason, ctx.model, ctx.team, 200)
        yield exc.sse_event()
    finally:
        await stream.aclose()
