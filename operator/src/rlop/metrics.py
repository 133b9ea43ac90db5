"""The operator's own Prometheus metrics (served on --metrics-port at /metrics)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

RECONCILE_SECONDS = Histogram(
    "rlop_reconcile_duration_seconds",
    "Time to reconcile one RLJob (observe, plan, apply, report).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
PASS_SECONDS = Histogram(
    "rlop_pass_duration_seconds",
    "Time of one full pass over every RLJob (metrics read once, then each job reconciled).",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
PHASE_SECONDS = Histogram(
    "rlop_pass_phase_seconds",
    "Time of each phase of a full pass: read (metrics, cluster, servers), plan, write (every job's writes).",
    ["phase"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RECONCILE_ERRORS = Counter("rlop_reconcile_errors_total", "Reconciles that raised an unexpected error.")
API_WRITES = Counter("rlop_api_writes_total", "Writes to the Kubernetes API, by kind of write.", ["kind"])
GANG_SCHEDULER = Gauge(
    "rlop_gang_scheduler",
    "1 for what places trainer gangs: kube-scheduler (PodGroups) or rlop (its fit check).",
    ["scheduler"],
)
EVENTS_DROPPED = Counter("rlop_events_dropped_total", "Events dropped because the posting queue was full.")
PROM_SECONDS = Histogram(
    "rlop_prometheus_query_duration_seconds",
    "Latency of one Prometheus HTTP query (a batch of instances of one template).",
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
PROM_ERRORS = Counter("rlop_prometheus_query_errors_total", "Failed Prometheus queries, by reason.", ["reason"])
SCALE_DECISIONS = Counter(
    "rlop_scale_decisions_total",
    "Replica changes decided by the autoscaler.",
    ["namespace", "rljob", "pool", "direction"],
)
POOL_REPLICAS = Gauge(
    "rlop_pool_replicas", "Desired and ready replicas per pool.", ["namespace", "rljob", "pool", "kind"]
)
POOL_METRIC = Gauge(
    "rlop_pool_metric_value", "Latest value of each autoscaling metric.", ["namespace", "rljob", "pool", "metric"]
)
GANG_RESTARTS = Gauge(
    "rlop_trainer_gang_restarts", "Restarts of the trainer gang after a rank failed.", ["namespace", "rljob"]
)
HARVESTED_CPU = Gauge("rlop_harvested_cpu_cores", "CPU cores requested by rlop's sandbox pods, by node.", ["node"])

_harvest_nodes: set[str] = set()
_seen: dict[tuple[str, str], set[tuple[Gauge, tuple[str, ...]]]] = {}


def _set(gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
    gauge.labels(*labels).set(value)
    _seen.setdefault((labels[0], labels[1]), set()).add((gauge, labels))


def set_pools(namespace: str, job: str, status: Any) -> None:
    for pool, st in status.pools.items():
        _set(POOL_REPLICAS, (namespace, job, pool, "desired"), st.desired)
        _set(POOL_REPLICAS, (namespace, job, pool, "ready"), st.ready)
    _set(GANG_RESTARTS, (namespace, job), status.trainer.restarts if status.trainer else 0)


def set_metric(namespace: str, job: str, pool: str, index: int, value: float | None) -> None:
    _set(POOL_METRIC, (namespace, job, pool, str(index)), float("nan") if value is None else value)


def forget(namespace: str, job: str) -> None:
    """Drop the series of a deleted job."""
    for gauge, labels in _seen.pop((namespace, job), set()):
        gauge.remove(*labels)


def set_harvest(pods: Iterable[Any]) -> None:
    """Cores requested by harvest pods per node (nodes that lost all of them drop to 0)."""
    cores: dict[str, float] = {}
    for pod in pods:
        if pod.harvest and pod.on:
            cores[pod.on] = cores.get(pod.on, 0.0) + pod.requests.get("cpu", 0.0)
    for node in _harvest_nodes - cores.keys():
        HARVESTED_CPU.labels(node).set(0)
    for node, value in cores.items():
        HARVESTED_CPU.labels(node).set(value)
    _harvest_nodes.update(cores)
