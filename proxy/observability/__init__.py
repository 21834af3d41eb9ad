"""Structured logs and Prometheus metrics (gateway-wide and verification)."""

__all__ = ["log", "metrics", "verification_metrics"]
