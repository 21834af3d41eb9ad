"""``veracity eval``: run the checks on labelled answers and measure them (docs/eval.md).

Pipeline: :func:`proxy.cli.cases.read` -> :func:`run_items` (in-process through
:func:`proxy.pipeline.sequence.verify_text` under a policy, or through a running gateway's
``POST /v1/veracity/verify`` with the ``openai`` SDK) -> :func:`compute` -> :func:`write`.

What is measured (positive class = a *wrong* answer or claim: a flag is a ``fail``):

* **answers**: the report's ``status`` against the label; ``failed`` on a right answer is a false
  alarm, ``passed`` on a wrong one a miss. Confusion table label x status. Per case family and per
  set, and overall, also over the **checkable** answers only (status ``passed`` / ``failed``: the
  checks reached a verdict here), with the **unknown** ones (``unverified`` / ``skipped`` /
  ``error``: no verifier model, no source, nothing checkable) counted apart with their reasons --
  the plain recall counts an unknown wrong answer as a miss.
* **per verifier**: answer level (the verifier flagged the answer: one of its checks failed) and
  check level (each check against its own label, see :func:`check_label`); precision, recall, F1.
* **per citation status** (``evidence["status"]``, any outcome; the claim's label, or the
  answer's for a ``single_claim`` answer with one citation check): how often the status' class is right
  (VALID for VERIFIED / PARTIALLY_VERIFIED, HALLUCINATED for the others): precision, recall, F1,
  the Laplace estimate ``(k + 1) / (n + 2)`` and the Wilson 95 % interval.
* **calibration** per verifier: a decisive check (``pass``/``fail``) says its outcome is right with
  probability ``confidence``. Expected calibration error over ``bins`` equal-width bins of
  ``(0, 1]`` (right-closed, ``((m-1)/M, m/M]``; confidence 0 falls in the first bin):
  ``ECE = sum_m |B_m|/n * |acc(B_m) - conf(B_m)|`` -- Naeini, Cooper & Hauskrecht 2015 (AAAI),
  Guo, Pleiss, Sun & Weinberger 2017 (ICML, eq. 3), with M = 10 by default as there. The
  reliability diagram draws acc(B_m) against the bin (Guo et al. fig. 1).
* **cost and latency**: per answer verification ms (``answer``: the report's ``cost.ms``, measured
  by the gateway or the in-process pipeline; ``wall``: the whole call as eval saw it, HTTP included
  with ``--gateway``), per verifier ms (``extra.durations_ms``), extra tokens / verifier-model
  calls / searches: p50, p90, p95, p99 (numpy's default linear interpolation), mean, max.

Computed here rather than with scikit-learn: each number is a few lines of counting (its
``precision_recall_fscore_support`` / ``calibration_curve`` would add a 40 MB dependency and
``calibration_curve`` returns no bin counts, which ECE needs).

Where it lives, a private module per concern beside this one: ``_eval_policy`` (the policy and
the preflight), ``_eval_run`` (verifying the items, progress), ``_eval_score`` (labels and
:func:`compute`), ``_eval_stats`` (the statistics), ``_eval_report`` (summary lines and the
files :func:`write` makes); the case readers are :mod:`proxy.cli.cases`.
"""

from __future__ import annotations

from proxy.cli._eval_policy import load_policy, preflight, reachable
from proxy.cli._eval_report import STATUSES_ORDER, summary_lines, write
from proxy.cli._eval_run import Progress, messages_of, run_items
from proxy.cli._eval_score import CITATION_CLASS, DECIDED, FAMILIES_ORDER, check_label, compute, family_of
from proxy.cli._eval_stats import ece, laplace, percentiles, prf, reliability_bins, wilson


__all__ = ["run_items", "compute", "write", "ece", "reliability_bins", "prf", "laplace", "wilson",
           "check_label", "percentiles", "load_policy", "preflight", "reachable", "Progress", "messages_of",
           "CITATION_CLASS", "STATUSES_ORDER", "DECIDED", "FAMILIES_ORDER", "family_of", "summary_lines"]
