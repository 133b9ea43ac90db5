"""Operator settings, set from `rlop run` flags (the chart passes flags too); the defaults are these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    interval: float = 5.0  # seconds between full reconcile passes (metrics are read once per pass)
    prometheus_url: str = "http://localhost:9090"
    prometheus_timeout: float = 3.0
    metrics_port: int = 9090  # the operator's own /metrics; 0 turns it off
    kubeconfig: str | None = None
    liveness: str = "http://0.0.0.0:8080/healthz"  # the /healthz probe's address; "" turns it off
    concurrency: int = 16  # jobs whose writes run at the same time within a pass
    leader_election: bool = False  # several replicas: only the Lease holder acts
    lease_namespace: str = "default"
    identity: str = "rlop"
    gang_scheduler: str = "auto"  # auto: kube-scheduler's PodGroups place trainer gangs where served; rlop: never
    namespaced: bool = False  # watches see only some namespaces: capacity checks list every pod themselves
