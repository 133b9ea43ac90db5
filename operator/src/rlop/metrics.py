"""The operator's own Prometheus metrics (served on --metrics-port at /metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

RECONCILE_SECONDS = Histogram(
    "rlop_reconcile_duration_seconds",
    "Time to reconcile one RLJob (observe, plan, apply, report).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
RECONCILE_ERRORS = Counter("rlop_reconcile_errors_total", "Reconciles that raised an unexpected error.")
API_WRITES = Counter("rlop_api_writes_total", "Writes to the Kubernetes API, by kind of write.", ["kind"])
