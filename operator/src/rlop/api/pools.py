"""The pool kinds of an RLJob in one table, which every consumer iterates: a new kind is one row here, a
field in `Pools` and, if its workload is new, a renderer (tests/unit/test_pools.py checks they agree)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from rlop.api.models import Autoscale, ControllerPool, Pool, RLJob, SandboxPool, ServingPool, TrainerPool

AnyPool = TrainerPool | Pool | ControllerPool


@dataclass(frozen=True)
class PoolKind:
    name: str
    workload: Literal["StatefulSet", "Deployment"]  # sandbox pods rlop harvests are Pods instead
    headless: bool = False  # its Service has no cluster IP: ranks find each other by stable DNS names
    may_autoscale: bool = False
    may_harvest: bool = False  # placement.strategy harvest-idle-cpu: rlop places its pods on idle CPU
    column: bool = True  # a column of `kubectl get rljobs`
    single: bool = False  # exactly one replica
    serving: bool = False  # inference replicas: per-replica identity, weight versions, a router, drains


KINDS = (
    PoolKind("trainer", "StatefulSet", headless=True),
    PoolKind("rollout", "Deployment", may_autoscale=True, serving=True),
    PoolKind("reward", "Deployment", may_autoscale=True, serving=True),
    PoolKind("sandbox", "Deployment", may_autoscale=True, may_harvest=True),
    PoolKind("controller", "Deployment", column=False, single=True),
)
POOL_NAMES = tuple(k.name for k in KINDS)
HARVESTED = next(k.name for k in KINDS if k.may_harvest)  # the one kind whose spec is a SandboxPool


def pools(job: RLJob) -> Iterator[tuple[PoolKind, AnyPool]]:
    """The pools `job` has, in registry order."""
    for kind in KINDS:
        spec: AnyPool | None = getattr(job.spec.pools, kind.name)
        if spec is not None:
            yield kind, spec


def autoscaled(job: RLJob) -> Iterator[tuple[str, Pool, Autoscale]]:
    """The pools of `job` with an `autoscale` block."""
    for kind, spec in pools(job):
        if kind.may_autoscale and isinstance(spec, Pool) and spec.autoscale is not None:
            yield kind.name, spec, spec.autoscale


def serving(job: RLJob) -> Iterator[tuple[str, ServingPool]]:
    """The serving pools of `job` (rollout, reward)."""
    for kind, spec in pools(job):
        if kind.serving and isinstance(spec, ServingPool):
            yield kind.name, spec


def harvested(job: RLJob) -> SandboxPool | None:
    """The sandbox pool, if rlop places its pods itself (on idle CPU)."""
    sandbox = job.spec.pools.sandbox
    return sandbox if sandbox is not None and sandbox.placement.strategy == "harvest-idle-cpu" else None


def fixed_replicas(kind: PoolKind, spec: AnyPool) -> int | None:
    """A pool's replicas when they are not autoscaled (None: autoscaled)."""
    if isinstance(spec, TrainerPool):
        return spec.replicas
    if kind.single or not isinstance(spec, Pool):
        return 1
    if spec.autoscale is not None:
        return None
    return 1 if spec.replicas is None else spec.replicas
