"""What happens to one verified request between auth and response, one module per step.

The sequence reads top to bottom in :mod:`proxy.pipeline.sequence` (docs/design.md "The path of one
request"); the steps:

- :mod:`~proxy.pipeline.plan`: the request context, policy, budgets, the verifier model, the
  sentinel's injection (steps 1-2);
- :mod:`~proxy.pipeline.sentinel`: the ``verify_result`` tool and its rounds (steps 2, 4);
- :mod:`~proxy.pipeline.verify`: risk score, tiered verification, facts, ``n > 1`` (steps 5-6);
- :mod:`~proxy.pipeline.correction` and :mod:`~proxy.pipeline.divergence`: the correction
  loop and where it stops (step 7); :mod:`~proxy.pipeline.choices`: several choices;
- :mod:`~proxy.pipeline.respond`: ``on_failure`` / ``on_unverified``, headers, the stored
  report, audit record and review queue (step 8);
- :mod:`~proxy.pipeline.streams`: the stream modes and their SSE helpers;
  :mod:`~proxy.pipeline.verified_stream` (the ``verified`` mode) with
  :mod:`~proxy.pipeline.units` (the checkable units of an answer being written);
- :mod:`~proxy.pipeline.verifier_model`: the verifier model bound to an upstream.

Entry points (what a new wire format or stream mode hooks into):

- :func:`proxy.pipeline.sequence.chat_completion` ``(ctx, body) -> PipelineResult`` and
  :func:`proxy.pipeline.sequence.chat_completion_stream` ``(ctx, body) -> StreamResult``: one
  chat-completions request (``body`` in the Chat Completions shape; a wire format that is not,
  such as the Responses API, converts to and from it around these calls);
- :func:`proxy.pipeline.sequence.verify_request`: ``POST /v1/veracity/verify``;
- :func:`proxy.pipeline.verify.verify_text`: one answer's text under a policy (no upstream);
- :func:`proxy.pipeline.streams.stream_mode` (policy -> mode name) and
  :func:`proxy.pipeline.streams.mode_events` (mode -> the SSE generator): a new stream mode is
  a branch in each and a generator beside the others in :mod:`proxy.pipeline.streams`.
"""

__all__ = ["choices", "correction", "divergence", "plan", "respond", "sentinel", "sequence", "streams", "units",
           "verified_stream", "verifier_model", "verify"]
