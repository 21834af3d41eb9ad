"""What the gateway keeps: budgets, reports, the review queue, the audit log."""

__all__ = ["audit", "budget", "reports", "review"]
