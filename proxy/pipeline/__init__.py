"""What happens to one verified request between auth and response: plan, verify, correct,
sentinel, divergence, choices, respond; the stream modes together (:mod:`proxy.pipeline.sequence`)."""

__all__ = ["sequence", "choices", "correction", "divergence", "sentinel", "streaming", "verifier_model"]
