"""The chat-completion pipeline: what happens to one request between auth and response.

``proxy/app.py`` turns HTTP into a :class:`RequestContext` + the request body (a dict the
gateway does not own: every field is forwarded unchanged unless a step here changes it on
purpose), calls :func:`chat_completion` or :func:`chat_completion_stream`, and turns the result
back into HTTP (status, headers ``x-veracity-status`` / ``x-veracity-overhead-ms`` /
``x-request-id``, metrics, the request log line).

Contract for the steps (DESIGN.md "The path of one request"):

* ``ctx.upstream.complete(body) -> dict`` and ``ctx.upstream.open_stream(body)`` raise
  :class:`proxy.errors.UpstreamError` (status/body/headers/reason); letting it propagate makes
  the app answer with the upstream's error (or 502/504). Every call's waiting time is added to
  ``ctx.timing.upstream_s`` automatically, so ``x-veracity-overhead-ms`` stays "gateway time
  excluding upstream" even with extra correction rounds.
* Raise :class:`proxy.errors.GatewayError` for a client-facing error of the gateway's own.
* The response dict keeps every upstream field; the pipeline adds the top-level ``veracity``
  report (:meth:`verifiers._types.Report.to_dict`).
* Streaming: :func:`chat_completion_stream` must raise *before* returning for failures that
  happen before the first byte (they become normal JSON errors); afterwards, failures are
  turned into a final ``data: {"error": ...}`` event by :func:`relay`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from proxy import metrics
from proxy.auth import Principal
from proxy.config import GatewayConfig
from proxy.errors import UpstreamError, sse_error_event
from proxy.upstream import BoundUpstream, Timing, UpstreamStream
from verifiers._types import Report


@dataclass(slots=True)
class RequestContext:
    """Everything one request carries through the pipeline.

    ``request_id``: the ``x-request-id`` echoed to the client and logged.
    ``model``: the requested model name; ``upstream``: the upstream serving it, bound to this
    request (see :class:`proxy.upstream.BoundUpstream`). ``principal``: who called (team,
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
    verification status known when the headers go out; ``headers`` are relayed upstream
    headers."""

    events: AsyncIterator[bytes]
    report: Report
    headers: dict[str, str] = field(default_factory=dict)


async def chat_completion(ctx: RequestContext, body: dict[str, Any]) -> PipelineResult:
    """Non-stream chat completion: forward, then attach the report. Raises UpstreamError."""
    draft = await ctx.upstream.complete(body)
    report = Report(status="skipped", reason="no verification configured")
    draft["veracity"] = report.to_dict()
    return PipelineResult(response=draft, report=report, headers=ctx.upstream.headers)


async def chat_completion_stream(ctx: RequestContext, body: dict[str, Any]) -> StreamResult:
    """Streaming chat completion: open the upstream stream and wait for its first event, so
    an upstream that fails before sending anything yields a JSON error (raised here), then
    relay event by event."""
    stream = await ctx.upstream.open_stream(body)
    try:
        await stream.peek()
    except BaseException:
        await stream.aclose()
        raise
    report = Report(status="skipped", reason="streaming pass-through: answers are not verified")
    return StreamResult(events=relay(ctx, stream), report=report, headers=stream.headers)


async def relay(ctx: RequestContext, stream: UpstreamStream) -> AsyncIterator[bytes]:
    """Yield the upstream's SSE events as they arrive. Ends with an error event (never a
    normal stop) when the upstream drops, times out, or ends without ``finish_reason`` and
    ``data: [DONE]``. Closing this generator (client gone) closes the upstream at once."""
    try:
        async for chunk in stream:
            yield chunk
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
