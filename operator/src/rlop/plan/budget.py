"""Arbitrate a job's GPU budget across its autoscaled pools (pure).

Fixed pools (the trainer gang, the controller, pools with fixed replicas) are paid for first. When the
autoscaled pools together want more GPUs than what is left, each keeps at least its minReplicas and the
rest goes, one replica at a time, to the pool whose load per replica (metric / target) is highest.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    gpus_per_replica: float
    min_replicas: int
    wanted: int  # the autoscaler's decision
    demand: float  # replicas the metrics imply (unrounded); load per replica = demand / replicas


@dataclass(frozen=True)
class Allocation:
    replicas: dict[str, int]
    limited: dict[str, str]  # pool -> why it got less than it wanted


def arbitrate(budget: float | None, fixed_gpus: float, claims: Mapping[str, Claim]) -> Allocation:
    wanted = {name: c.wanted for name, c in claims.items()}
    gpu_claims = {name: c for name, c in claims.items() if c.gpus_per_replica > 0}
    if budget is None or not gpu_claims:
        return Allocation(wanted, {})
    left = budget - fixed_gpus
    if sum(c.wanted * c.gpus_per_replica for c in gpu_claims.values()) <= left + 1e-9:
        return Allocation(wanted, {})
    alloc = {name: min(c.min_replicas, c.wanted) for name, c in gpu_claims.items()}
    left -= sum(alloc[n] * c.gpus_per_replica for n, c in gpu_claims.items())
    while True:
        open_ = [n for n, c in gpu_claims.items() if alloc[n] < c.wanted and c.gpus_per_replica <= left + 1e-9]
        if not open_:
            break
        best = max(open_, key=lambda n: (_load(gpu_claims[n], alloc[n]), n))
        alloc[best] += 1
        left -= gpu_claims[best].gpus_per_replica
    limited = {
        n: f"GPU budget {budget:g} (fixed pools use {fixed_gpus:g}): gets {alloc[n]} of the {c.wanted} it wants"
        for n, c in gpu_claims.items()
        if alloc[n] < c.wanted
    }
    return Allocation({**wanted, **alloc}, limited)


def _load(claim: Claim, replicas: int) -> float:
    return float("inf") if replicas == 0 else claim.demand / replicas
