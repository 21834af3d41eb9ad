"""Prometheus metrics (prometheus-client), named per Prometheus conventions
(https://prometheus.io/docs/practices/naming/): base units (seconds), ``_total`` counters.

=====================================  =========  ==========================================
name                                   type       labels
=====================================  =========  ==========================================
veracity_requests_total                counter    route, model, team, status (HTTP status code)
veracity_request_duration_seconds      histogram  route
veracity_upstream_duration_seconds     histogram  upstream
veracity_overhead_seconds              histogram  route, model, team  (gateway time, upstream
                                                  excluded)
veracity_in_flight_requests            gauge      (summed over workers)
veracity_upstream_errors_total         counter    reason (http_<status>, connect, timeout,
                                                  disconnect, bad_response, truncated), model,
                                                  team
=====================================  =========  ==========================================

Multi-worker servers (``veracity serve --workers N``) use prometheus-client's multiprocess
mode: ``PROMETHEUS_MULTIPROC_DIR`` must be set before this module is imported (``serve`` does
it), and :func:`render` then aggregates every worker's files, so any worker answers
``/metrics`` with the totals. ``model`` label values are the model names routed to an
upstream (unroutable names are counted as ``_unknown`` to bound cardinality) or the gateway's
own values (``_passthrough``, ``_offline``: ``/v1/veracity/verify``, ``_none``: a route without
a model, ``_other``). ``route`` values are route templates (``proxy.app``: ``/v1/chat/completions``,
``/v1/models``, ``/v1/veracity/verify``, ``/v1/*`` for every pass-through path, ``_unmatched``),
never raw paths; ``/healthz``, ``/readyz`` and ``/metrics`` are not counted. ``team`` is the
caller's team (a configured key's ``team``, ``default`` without virtual keys), so it is bounded by
the config as in :mod:`proxy.observability.verification_metrics`; ``_none`` when the request was
refused before its caller was known (no or a bad key, an unmatched path).

Both ``model`` and ``team`` are what the verification metrics carry, normalised by the same
:func:`model_label` (one set of admitted names per process), so every dashboard panel over these
metrics filters by the dashboard's ``$model`` and ``$team`` like the verification panels do.
Label children are cached per label tuple in bounded dicts (:data:`MAX_CACHED_CHILDREN`):
``labels()`` takes a lock and builds a tuple on every call.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

MULTIPROCESS = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))

#: latency buckets (seconds) for whole requests and upstream calls
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: gateway overhead buckets (seconds): the target is well under a millisecond
OVERHEAD_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0)

REQUESTS = Counter("veracity_requests_total", "HTTP requests answered by the gateway.",
                   ["route", "model", "team", "status"])
REQUEST_DURATION = Histogram("veracity_request_duration_seconds",
                             "Wall time from request received to last byte sent.", ["route"],
                             buckets=LATENCY_BUCKETS)
UPSTREAM_DURATION = Histogram("veracity_upstream_duration_seconds",
                              "Time spent waiting on upstream calls within one request.", ["upstream"],
                              buckets=LATENCY_BUCKETS)
OVERHEAD = Histogram("veracity_overhead_seconds",
                     "Gateway time per request excluding time waiting on upstreams.", ["route", "model", "team"],
                     buckets=OVERHEAD_BUCKETS)
IN_FLIGHT = Gauge("veracity_in_flight_requests", "Requests being processed now.",
                  multiprocess_mode="livesum")
UPSTREAM_ERRORS = Counter("veracity_upstream_errors_total", "Failed upstream calls by reason, model and team.",
                          ["reason", "model", "team"])

#: the ``team`` label of a request refused before its caller was known (no or a bad key)
NO_TEAM = "_none"
#: Most cached label children per cache below (a bound, not a working-set size): past it a
#: new label tuple is looked up with ``labels()`` on each use instead of being cached.
MAX_CACHED_CHILDREN = 10_000

#: requests in flight in this process, as a plain int: one process serves them on one event-loop
#: thread, so no lock is needed. In single-process mode the gauge reads it at scrape time
#: (``Gauge.set_function``); multiprocess mode needs the gauge's own value (written to its
#: file), so there :func:`request_started` / :func:`request_finished` move the gauge itself.
_in_flight = [0]


def request_started() -> None:
    """One more request in flight (pair with :func:`request_finished`)."""
    if MULTIPROCESS:
        IN_FLIGHT.inc()
    else:
        _in_flight[0] += 1


def request_finished() -> None:
    """One request fewer in flight."""
    if MULTIPROCESS:
        IN_FLIGHT.dec()
    else:
        _in_flight[0] -= 1


if not MULTIPROCESS:
    IN_FLIGHT.set_function(lambda: float(_in_flight[0]))


#: (route, model label, status, team) -> (requests, duration, overhead) children
_children: dict[tuple[str, str, int, str], tuple[Any, Any, Any]] = {}
#: (reason, model label, team) -> the ``veracity_upstream_errors_total`` child
_error_children: dict[tuple[str, str, str], Any] = {}

#: Most distinct ``model`` label values per process; further names count as ``_other``.
#: An upstream routed by glob (``models: ["*"]``, the default) accepts any name the client
#: makes up, and every label value is a time series kept until restart (Prometheus
#: "Instrumentation" guide: do not use unbounded label values).
MAX_MODEL_LABELS = 500
#: Longest model name used as a label value (longer names count as ``_other``).
MAX_MODEL_LABEL_CHARS = 128
_model_labels: set[str] = {"_unknown", "_passthrough", "_offline", "_other", "_none"}  # the gateway's own values


def model_label(model: str, status: int = 200) -> str:
    """The ``model`` label value for a client-given model name: the name itself once a
    request for it succeeded (``status`` < 400: the upstream accepted the name), while fewer
    than :data:`MAX_MODEL_LABELS` names are in use; else ``_other``. Names already in use
    keep their label whatever the status."""
    if model in _model_labels:
        return model
    if status >= 400 or len(_model_labels) >= MAX_MODEL_LABELS or len(model) > MAX_MODEL_LABEL_CHARS:
        return "_other"
    _model_labels.add(model)
    return model
_upstream_children: dict[str, Any] = {}


def observe_request(route: str, model: str, status: int, duration_s: float, overhead_s: float,
                    upstream: str | None, upstream_s: float, team: str = NO_TEAM) -> None:
    """Record one finished request (all durations in seconds): ``veracity_requests_total``,
    the request duration, the gateway overhead (per route, model and team) and the upstream
    time. ``model`` is bounded with :func:`model_label` (with this request's ``status``);
    ``team``: the caller's configured team, :data:`NO_TEAM` when none is known. Label children
    are cached per ``(route, model, status, team)`` (at most :data:`MAX_CACHED_CHILDREN`)."""
    if model not in _model_labels:
        model = model_label(model, status)
    key = (route, model, status, team)
    c = _children.get(key)
    if c is None:
        c = (REQUESTS.labels(route, model, team, str(status)), REQUEST_DURATION.labels(route),
             OVERHEAD.labels(route, model, team))
        if len(_children) < MAX_CACHED_CHILDREN:
            _children[key] = c
    c[0].inc()
    c[1].observe(duration_s)
    c[2].observe(overhead_s)
    if upstream is not None and upstream_s > 0:
        u = _upstream_children.get(upstream)
        if u is None:
            u = _upstream_children[upstream] = UPSTREAM_DURATION.labels(upstream)
        u.observe(upstream_s)


def upstream_error(reason: str, model: str, team: str, status: int) -> None:
    """Count one failed upstream call in ``veracity_upstream_errors_total``. ``reason``: the
    :class:`proxy.wire.errors.UpstreamError`'s (``http_<status>``, ``connect``, ``timeout``,
    ``disconnect``, ``bad_response``, ``truncated``); ``model``: the routed model name or a
    gateway value (``_unknown``, ``_passthrough``, ``_none``), bounded by :func:`model_label`
    with ``status`` -- the HTTP status the request is counted with in
    ``veracity_requests_total``, so both metrics give a request the same ``model`` label (a
    name first seen in a failed call is ``_other``); ``team``: the caller's configured team
    (:data:`NO_TEAM` when none is known). Label children are cached per ``(reason, model,
    team)`` (at most :data:`MAX_CACHED_CHILDREN`)."""
    if model not in _model_labels:
        model = model_label(model, status)
    key = (reason, model, team)
    c = _error_children.get(key)
    if c is None:
        c = UPSTREAM_ERRORS.labels(reason, model, team)
        if len(_error_children) < MAX_CACHED_CHILDREN:
            _error_children[key] = c
    c.inc()


def render() -> tuple[bytes, str]:
    """The exposition text and its content type; aggregated over workers in multiprocess mode."""
    if MULTIPROCESS:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def mark_process_dead(pid: int | None = None) -> None:
    """Multiprocess mode: drop a finished worker's live gauges (call at worker shutdown)."""
    if MULTIPROCESS:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())
