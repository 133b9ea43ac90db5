"""Scaling decisions for one RLJob from metric readings (pure): every autoscaled pool on its own, then the
GPU budget across them. Status fields change only when a decision does, so steady state writes nothing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import NamedTuple

from rlop.api import reasons as R
from rlop.api.models import GPU, PodTemplate, PoolStatus, Recommendation, RLJob, ScaleEvent, ServingPool
from rlop.api.pools import AnyPool, autoscaled, fixed_replicas, pools
from rlop.plan.autoscale import Decision, Reading, close, decide, record_scale
from rlop.plan.budget import Claim, arbitrate
from rlop.plan.observed import PodInfo, pod_requests
from rlop.plan.status import ConditionUpdate, Event

MetricKey = tuple[str, int]  # (pool, metric index)


@dataclass(frozen=True)
class PoolDecision:
    """The autoscaler's fields of one pool's status, as decided this interval."""

    reason: str | None
    decision: str | None  # rlop.api.reasons: HPA's code, MetricsUnavailable or GPUBudget
    last_metric: float | None
    recommendations: list[Recommendation] | None
    scale_events: list[ScaleEvent] | None
    last_scale_time: datetime | None

    def onto(self, status: PoolStatus) -> PoolStatus:
        """The status with these fields (validated, as any status is)."""
        return PoolStatus.model_validate(
            status.model_dump(by_alias=False) | {f.name: getattr(self, f.name) for f in fields(self)}
        )


class Explained(NamedTuple):
    """A pool's decision this pass, also when unchanged (the status keeps those of the last change)."""

    decision: str
    reason: str
    metric: float | None


@dataclass(frozen=True)
class Scaling:
    """What the autoscaler decided for one job in one interval."""

    replicas: dict[str, int]
    pools: dict[str, PoolDecision] = field(default_factory=dict)  # pools whose decision changed
    conditions: list[ConditionUpdate] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    pod_costs: dict[str, int] = field(default_factory=dict)  # pod -> deletion cost, before a scale-down
    limited: dict[str, str] = field(default_factory=dict)  # pool -> why the GPU budget held it back
    explained: dict[str, Explained] = field(default_factory=dict)
    fresh: bool = True  # decided from this interval's metrics (False: pools just keep their replicas)


def _gpus(template: PodTemplate) -> float:
    return pod_requests(template.spec.model_dump(mode="json", exclude_none=True)).get(GPU, 0.0)


def gpus_per_replica(pool: AnyPool) -> float:
    """The GPUs one replica holds: every pod of a multi-node replica's group."""
    if isinstance(pool, ServingPool) and pool.grouped:
        return _gpus(pool.template) + _gpus(pool.worker_template or pool.template) * (pool.nodes_per_replica - 1)
    return _gpus(pool.template)


def _fixed_gpus(job: RLJob, replicas: Mapping[str, int]) -> float:
    """GPUs of the pools that are not autoscaled: paid before the autoscaled ones share the rest."""
    return sum(
        gpus_per_replica(spec) * replicas.get(kind.name, 0)
        for kind, spec in pools(job)
        if fixed_replicas(kind, spec) is not None
    )


def _metrics_condition(decisions: Mapping[str, Decision], readings: Mapping[str, Sequence[Reading]]) -> ConditionUpdate:
    """True only when every metric of every autoscaled pool has a value; a pool that scaled up on its other
    metrics is named too."""
    problems, missing = [], []
    for pool, d in sorted(decisions.items()):
        gaps = [(i, r) for i, r in enumerate(readings[pool]) if r.value is None]
        missing += [r for _, r in gaps]
        if not d.metrics_ok:
            problems.append(f"{pool}: {d.reason}")
        elif gaps:
            why = "; ".join(f"metric {i}: {r.error or 'no data'}" for i, r in gaps)
            problems.append(f"{pool}: {why} (decided on its other metrics)")
    if not problems:
        return ConditionUpdate(R.METRICS, "True", R.VALID_METRICS, "every autoscaled pool has its metrics")
    reason = R.PROMETHEUS_UNREACHABLE if all(r.unreachable for r in missing) else R.METRICS_MISSING
    return ConditionUpdate(R.METRICS, "False", reason, "; ".join(problems))


def deletion_costs(pods: Sequence[PodInfo], busy: Mapping[str, float]) -> dict[str, int]:
    """Pod deletion costs from how busy each pod is: the ReplicaSet removes the lowest cost first.
    Only pods whose annotation would change are returned."""
    out = {}
    for pod in pods:
        if pod.deleting or pod.name not in busy:
            continue
        cost = max(-(2**31), min(2**31 - 1, round(busy[pod.name] * 1000)))
        if pod.deletion_cost != cost:
            out[pod.name] = cost
    return out


def _closed(old: Mapping[str, PoolStatus], previous: datetime | None, now: datetime) -> dict[str, PoolDecision]:
    """A stopped job recommends nothing, as an HPA whose sync returns early: each pool's open recommendation
    was last made at the previous pass and ages out from then (not from whenever the job resumes)."""
    out = {}
    for name, prev in old.items():
        history = prev.recommendations or []
        if history and history[-1].until is None:
            out[name] = PoolDecision(prev.reason, prev.decision, prev.last_metric, close(history, previous, now),
                                     prev.scale_events, prev.last_scale_time)  # fmt: skip
    return out


def plan_scaling(
    job: RLJob,
    base: Mapping[str, int],
    pods: Sequence[PodInfo],
    readings: Mapping[MetricKey, Reading],
    busy: Mapping[str, Mapping[str, float]],
    now: datetime,
    previous: datetime | None = None,
) -> Scaling:
    """Decide replicas for every autoscaled pool of `job` (base: the current replicas of every pool;
    previous: the time of the previous full pass, None if unknown)."""
    scaled = {name: (spec, auto) for name, spec, auto in autoscaled(job)}
    old = job.status.pools if job.status else {}
    if job.stopped or not scaled:
        return Scaling(dict(base), _closed(old, previous, now))
    decisions: dict[str, Decision] = {}
    pool_readings: dict[str, list[Reading]] = {}
    for name, (_, auto) in scaled.items():
        prev = old.get(name, PoolStatus())
        live = [p for p in pods if p.pool == name and p.leads and not p.deleting and not p.terminal]
        ready = sum(1 for p in live if p.ready)
        metric_readings = [readings.get((name, i), Reading(None, "not queried")) for i in range(len(auto.metrics))]
        pool_readings[name] = metric_readings
        decisions[name] = decide(
            auto, base[name], ready, metric_readings, prev.recommendations or [], prev.scale_events or [], now,
            previous, pods=len(live),
        )  # fmt: skip
    claims = {
        n: Claim(gpus_per_replica(scaled[n][0]), scaled[n][1].min_replicas, d.replicas, d.demand)
        for n, d in decisions.items()
        if d.metrics_ok
    }
    budget = job.spec.budget.gpus if job.spec.budget else None
    allocation = arbitrate(budget, _fixed_gpus(job, base), claims)
    replicas, updates, events = dict(base), {}, []
    costs: dict[str, int] = {}
    explained: dict[str, Explained] = {}
    for name, d in decisions.items():
        auto, prev, current = scaled[name][1], old.get(name, PoolStatus()), base[name]
        final = allocation.replicas.get(name, d.replicas)
        code = R.GPU_BUDGET if name in allocation.limited else d.code
        scale_events = record_scale(prev.scale_events or [], auto, current, final, now)
        replicas[name] = final
        history = d.recommendations or None
        reason = d.reason + (f"; {allocation.limited[name]}" if name in allocation.limited else "")
        explained[name] = Explained(code, reason, d.metric)
        if final != current or code != prev.decision or history != prev.recommendations:
            updates[name] = PoolDecision(
                reason,
                code,
                d.metric if d.metric is not None else prev.last_metric,
                history,
                scale_events or None,
                now if final != current else prev.last_scale_time,
            )
        if final != current:
            verb = R.SCALED_UP if final > current else R.SCALED_DOWN
            events.append(Event("Normal", verb, f"{name} {current} -> {final}: {reason}", pool=name))
        if final < current and name in busy:
            costs |= deletion_costs([p for p in pods if p.pool == name], busy[name])
    conditions = [_metrics_condition(decisions, pool_readings)]
    return Scaling(replicas, updates, conditions, events, costs, allocation.limited, explained)
