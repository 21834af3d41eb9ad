"""What happens to one verified request between auth and response: plan, verify, correct,
sentinel, divergence, choices, respond; the stream modes together (:mod:`proxy.pipeline.sequence`)."""
