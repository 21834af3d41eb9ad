"""Structured logs and Prometheus metrics (gateway-wide and verification)."""
