"""What the gateway keeps: budgets, reports, the review queue, the audit log."""
