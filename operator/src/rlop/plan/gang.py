"""Gang start of the trainer pool (pure): lift every scheduling gate at once, or none.

Trainer pods are created behind the ``rlop.dev/gang`` scheduling gate. They are released together only
when all gated pods fit the cluster's free capacity at once; a template change restarts the whole gang.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rlop.api import reasons as R
from rlop.plan.capacity import free_capacity, place_all, shortfall
from rlop.plan.observed import ChildInfo, NodeInfo, PodInfo


@dataclass(frozen=True)
class GangDecision:
    scheduled: bool  # every trainer pod exists, is ungated and bound to a node
    reason: str  # for the GangScheduled condition (rlop.api.reasons)
    message: str
    release: Sequence[str] = ()  # gated pods to release now
    placement: Mapping[str, str] = field(default_factory=dict)  # where they are expected to land
    restart: Sequence[str] = ()  # pods to delete so the gang restarts on a new template


def _fmt(amounts: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in sorted(amounts.items()))


def plan_gang(
    replicas: int,
    pods: Sequence[PodInfo],
    statefulset: ChildInfo | None,
    nodes: Sequence[NodeInfo],
    bound_pods: Iterable[PodInfo],
    updating: bool = False,
    hold: str | None = None,
    podgroup: str | None = None,
    group: ChildInfo | None = None,
) -> GangDecision:
    """Decide what to do with the trainer pods of one job; `updating`: rlop is changing the trainer
    StatefulSet this pass, so its pods may be about to restart and none is released yet; `hold`: why
    the gang may not be released yet (a restart's backoff); `podgroup`: kube-scheduler places the gang, as
    that PodGroup (`group`, as observed): rlop releases its pods once all exist, and reports what
    kube-scheduler says instead of checking the fit itself."""
    # a rank beyond the world size (someone scaled the StatefulSet by hand) is never part of the gang
    live = [p for p in pods if not p.deleting and not p.terminal and (p.index is None or p.index < replicas)]
    if replicas == 0:
        return GangDecision(False, R.GANG_SUSPENDED, "trainer pool has 0 replicas")
    settled = statefulset is not None and statefulset.up_to_date and not updating
    revision = statefulset.update_revision if settled and statefulset else None
    stale = [p for p in live if revision and p.revision and p.revision != revision]
    if stale:
        names = sorted(p.name for p in live)
        return GangDecision(
            False,
            R.RESTARTING,
            f"the trainer pod template changed (a spec change or a gang restart): restarting all {len(names)} "
            "trainer pods together",
            restart=names,
        )
    if any(p.deleting for p in pods):
        return GangDecision(False, R.TERMINATING, "waiting for old trainer pods to terminate")
    if len(live) < replicas:
        return GangDecision(False, R.CREATING, f"{len(live)} of {replicas} trainer pods created")
    gated = [p for p in live if p.gated]
    by = f" by kube-scheduler's gang (PodGroup {podgroup})" if podgroup else ""
    if not gated:
        unbound = [p for p in live if not p.node]
        if unbound:
            said = group.scheduled if group is not None else None
            why = next((p.unschedulable for p in unbound if p.unschedulable), "waiting for the scheduler")
            if said and said[0] == "False" and said[2]:  # the gang's own account, from kube-scheduler
                why = said[2]
            return GangDecision(False, R.UNSCHEDULABLE, f"{len(unbound)} trainer pods not placed{by}: {why}")
        return GangDecision(True, R.SCHEDULED, f"all {len(live)} trainer pods placed{by}")
    if not settled:
        return GangDecision(False, R.UPDATING, "waiting for the trainer StatefulSet to take its new spec")
    if hold:
        return GangDecision(False, R.BACKING_OFF, f"{len(gated)} trainer pods gated: {hold}")
    if podgroup:
        if group is None:
            return GangDecision(False, R.CREATING, f"waiting for PodGroup {podgroup} to exist")
        message = f"released {len(gated)} trainer pods together to kube-scheduler's gang (PodGroup {podgroup})"
        return GangDecision(False, R.RELEASED, message, release=sorted(p.name for p in gated))
    priority = min(p.priority for p in gated)
    free = free_capacity(nodes, bound_pods, min_priority=priority)
    placement, unplaced = place_all(gated, nodes, free)
    if unplaced:
        short = shortfall(gated, free)
        detail = f"; short of {_fmt(short)}" if short else " (capacity is fragmented across nodes)"
        return GangDecision(
            False,
            R.INSUFFICIENT_CAPACITY,
            f"{len(gated) - len(unplaced)} of {len(gated)} gated trainer pods fit{detail}; none started",
        )
    return GangDecision(
        False,
        R.RELEASED,
        f"released {len(gated)} trainer pods together",
        release=sorted(p.name for p in gated),
        placement=placement,
    )
