"""Multi-node replicas (pure): a serving pool whose replica is a group of `nodesPerReplica` pods, one per node,
as an engine spanning nodes (SGLang's --nnodes) needs. rlop creates each group's pods itself, behind the gang
gate, and releases a group only when all of its pods fit at once (never half a group holding GPUs); any of its
pods failing recreates the whole group (LeaderWorkerSet's RecreateGroupOnPodRestart); a changed template
recreates the groups one at a time. Only leaders (rank 0) are replicas to the serving plan: probed, loaded,
routed to and drained; a drained leader's whole group goes."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from rlop.api import reasons as R
from rlop.api.models import RLJob, ServingPool
from rlop.api.names import HASH_ANNOTATION
from rlop.plan.capacity import free_capacity, place_all, shortfall
from rlop.plan.observed import NodeInfo, PodInfo
from rlop.plan.quantity import Resources, add
from rlop.plan.render import Manifest, group_pod
from rlop.plan.serving import drains
from rlop.plan.status import DELETE_POD, RELEASE, Event
from rlop.plan.trainer import Failure, rank_failure


@dataclass(frozen=True)
class GroupPlan:
    create: list[Manifest] = field(default_factory=list)  # pods to create (gated)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (pod, why)
    release: list[str] = field(default_factory=list)  # gated pods to release now
    placement: dict[str, str] = field(default_factory=dict)  # where they are expected to land
    events: list[Event] = field(default_factory=list)
    ready: int = 0  # groups whose every pod is Ready
    waiting: list[str] = field(default_factory=list)  # why groups are not running yet (for the Ready condition)


def members(pool: str, pods: Sequence[PodInfo]) -> dict[int, list[PodInfo]]:
    """The pool's pods by group (terminal ones too: a pod that ended is a failure of its group)."""
    out: dict[int, list[PodInfo]] = defaultdict(list)
    for p in pods:
        if p.pool == pool and p.group is not None:
            out[p.group].append(p)
    return dict(out)


def failures(
    spec: ServingPool, groups: Mapping[int, Sequence[PodInfo]], nodes: Sequence[NodeInfo]
) -> dict[int, Failure]:
    """The running groups (released: a pod of theirs is ungated) that lost a rank: a pod deleted, failed or
    gone, its node lost, a container that exited (the kubelet restarts it: its collective is broken)."""
    out = {}
    for g, pods in groups.items():
        if all(p.gated for p in pods if not p.deleting) and not any(p.deleting for p in pods if not p.gated):
            continue  # never ran: a missing pod is created, not a failure
        ranks = [p for p in pods if p.rank is not None and p.rank < spec.nodes_per_replica]
        failure = rank_failure(ranks, spec.nodes_per_replica, nodes, None, lambda p: p.rank, servers=True)
        if failure is not None:
            out[g] = failure
    return out


def leaving(groups: Mapping[int, Sequence[PodInfo]], failed: Mapping[int, Failure]) -> set[str]:
    """The leaders of failed groups: out of the router at once, as if deleted."""
    return {p.name for g in failed for p in groups[g] if p.rank == 0}


def _ready(pods: Sequence[PodInfo], size: int) -> bool:
    live = [p for p in pods if not p.deleting and not p.terminal]
    return (len({p.rank for p in live}) == size == len(live) and all(p.ready for p in live)
            and not any(p.draining for p in live))  # fmt: skip


def _fmt(amounts: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(amounts.items()))


def plan_groups(
    job: RLJob,
    pool: str,
    spec: ServingPool,
    want: int,
    pods: Sequence[PodInfo],
    nodes: Sequence[NodeInfo],
    bound_pods: Sequence[PodInfo],
    drained: Sequence[str] = (),
    reserved: Mapping[str, Resources] | None = None,
) -> GroupPlan:
    """Keep `want` groups of `pool`: restart the failed, recreate the outdated one at a time, remove the
    groups whose leader is `drained` (or, without drains, the extra ones), create the missing and release
    each complete group whose pods all fit the free capacity left after `reserved` (node -> requests the
    pass already placed)."""
    size = spec.nodes_per_replica
    groups = members(pool, pods)
    failed = failures(spec, groups, nodes)
    rendered: dict[tuple[int, int], Manifest] = {}

    def render(g: int, r: int) -> Manifest:
        if (g, r) not in rendered:
            rendered[g, r] = group_pod(job, pool, spec, g, r)
        return rendered[g, r]

    def current(p: PodInfo) -> bool:
        ok = p.group is not None and p.rank is not None and p.rank < size
        return ok and p.spec_hash == render(p.group or 0, p.rank or 0)["metadata"]["annotations"][HASH_ANNOTATION]

    delete: list[tuple[str, str]] = []
    events: list[Event] = []
    gone: set[int] = set()  # groups whose pods are deleted this pass

    def remove(g: int, why: str) -> list[str]:
        names = [p.name for p in groups[g] if not p.deleting]
        delete.extend((name, why) for name in names)
        gone.add(g)
        return names

    for g, failure in sorted(failed.items()):
        if names := remove(g, "group restart"):
            message = (f"{pool} group {g} lost rank {failure.rank} ({failure.reason}): {failure.message}; "
                       f"recreating all {size} of its pods (out of the router until its leader serves current "
                       "weights)")  # fmt: skip
            events.append(Event("Warning", R.GROUP_RESTART, message, needs=tuple((DELETE_POD, n) for n in names)))
    leaders = {p.name: g for g, ps in groups.items() for p in ps if p.rank == 0}
    for name in drained:
        if name in leaders and leaders[name] not in gone:
            remove(leaders[name], f"{pool} group {leaders[name]} drained")
    active = {g: ps for g, ps in groups.items() if g not in gone and any(not p.deleting for p in ps)}
    if len(active) > want and not drains(spec):  # nothing routes by readiness: the extra groups go at once
        extra = sorted(active, key=lambda g: (_ready(active[g], size), -g))[: len(active) - want]
        for g in extra:
            remove(g, f"{pool} scale-down")
            del active[g]
    stale = [g for g, ps in sorted(active.items()) if any(not p.deleting and not current(p) for p in ps)]
    settled = (not delete and len(active) >= want and not any(p.deleting for ps in groups.values() for p in ps)
               and all(_ready(ps, size) for g, ps in active.items() if g not in stale))  # fmt: skip
    for g in stale:
        never_ran = all(p.gated for p in active[g] if not p.deleting)
        if never_ran or (settled and g == stale[0]):  # outdated: recreated one running group at a time
            if names := remove(g, "its template changed"):
                message = f"{pool} group {g}: the pod template changed: recreating all {size} of its pods"
                events.append(Event("Normal", R.GROUP_UPDATE, message, needs=tuple((DELETE_POD, n) for n in names)))
            del active[g]

    kept = sorted(active)
    free_index = (g for g in range(len(groups) + want + 1) if g not in active)
    while len(kept) < want:
        kept.append(next(free_index))
    create: list[Manifest] = []
    waiting: list[str] = []
    for g in sorted(kept):
        ps = [p for p in groups.get(g, []) if g not in gone]
        if any(p.deleting for p in groups.get(g, [])) or g in gone:
            waiting.append(f"{pool} group {g}: waiting for its old pods to terminate")
            continue
        have = {p.rank for p in ps}
        create += [render(g, r) for r in range(size) if r not in have]
    # release: each complete, gated group whose pods all fit at once, none while pods released earlier wait
    priority = min((p.priority for ps in active.values() for p in ps if p.gated), default=0)
    free = free_capacity(nodes, bound_pods, min_priority=priority)
    for node, used in (reserved or {}).items():
        if node in free:
            free[node] = add(free[node], used, -1.0)
    release: list[str] = []
    placement: dict[str, str] = {}
    pending = [p.name for ps in active.values() for p in ps if not p.gated and not p.node and not p.deleting]
    for g in sorted(active):
        ps = [p for p in active[g] if not p.deleting]
        gated = [p for p in ps if p.gated]
        if not gated:
            continue
        if len({p.rank for p in ps}) < size:
            waiting.append(f"{pool} group {g}: {len(ps)} of {size} pods created")
            continue
        if pending and not set(pending) <= {p.name for p in ps}:
            waiting.append(f"{pool} group {g}: waiting for the scheduler to bind {pending[0]} first")
            continue
        fit, unplaced = place_all(gated, nodes, free, apart=True)
        if unplaced:
            short = shortfall(gated, free)
            detail = f"; short of {_fmt(short)}" if short else " (not on distinct nodes at once)"
            waiting.append(f"{pool} group {g}: {len(gated) - len(unplaced)} of {len(gated)} gated pods fit{detail}; "
                           "none started")  # fmt: skip
            continue
        for p in gated:
            free[fit[p.name]] = add(free[fit[p.name]], p.requests, -1.0)
        names = sorted(p.name for p in gated)
        release += names
        placement |= fit  # counted in `free` already: the next group may be released in this pass too
        where = ", ".join(f"{n} x{c}" for n, c in sorted(Counter(fit.values()).items()))
        message = f"released {pool} group {g}: {len(names)} pods together (capacity checked on {where})"
        events.append(Event("Normal", R.GROUP_RELEASED, message, needs=tuple((RELEASE, n) for n in names)))
    ready = sum(1 for g, ps in active.items() if _ready(ps, size))
    return GroupPlan(create, delete, release, placement, events, ready, waiting)
