"""Sandbox pods on idle CPU (pure): harvestable capacity, packing, eviction.

Model, per candidate node (Ready, matching the pool's nodeSelector; cordoned nodes keep their pods but get
no new ones). Harvest pods are assumed to use what they request; the rest of the measured utilization
belongs to the node's other workloads:

    harvest  = CPU requested by all harvest pods on the node (every RLJob)
    other    = max(0, utilization * allocatable - harvest)                 cores used by everything else
    place    = min(allocatable - requests of non-harvest pods,
                   (maxNodeUtilization - hysteresis) * allocatable - other) - reserve
    ceiling  = maxNodeUtilization * allocatable - other

New pods go where `harvest + new <= place`; when `harvest > ceiling` the node is busy and just enough
sandbox pods are evicted to bring `harvest` back under `place`. The gap between the two thresholds is the
hysteresis that keeps a node from flapping. A node without utilization data is not harvestable, and its
pods are left alone (no data never evicts).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from rlop.api.models import Placement
from rlop.plan.capacity import feasible
from rlop.plan.observed import NodeInfo, PodInfo
from rlop.plan.quantity import Resources, parse_quantity

EPS = 1e-9


@dataclass(frozen=True)
class NodeRoom:
    """What one node offers harvest pods (cores) and what it can still fit (all resources)."""

    name: str
    place: float  # cores all harvest pods together may request (target)
    ceiling: float  # above this many harvest cores, evict
    harvest: float  # cores requested by harvest pods now
    free: Resources  # allocatable minus every pod's requests (scheduler view)
    hosts_harvest: bool
    load: float  # utilization with harvest pods counted at their requests

    @property
    def room(self) -> float:
        return self.place - self.harvest


def node_rooms(
    nodes: Iterable[NodeInfo],
    utilization: Mapping[str, float],
    pods: Iterable[PodInfo],
    placement: Placement,
) -> dict[str, NodeRoom]:
    """Rooms of the candidate nodes (those with utilization data and matching the nodeSelector)."""
    selector = placement.node_selector or {}
    reserve = parse_quantity(placement.reserved_cpu)
    by_node: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.on and not pod.terminal:
            by_node.setdefault(pod.on, []).append(pod)
    out = {}
    for node in nodes:
        if node.name not in utilization or any(node.labels.get(k) != v for k, v in selector.items()):
            continue
        alloc = node.allocatable.get("cpu", 0.0)
        here = by_node.get(node.name, [])
        harvest = sum(p.requests.get("cpu", 0.0) for p in here if p.harvest)
        others = sum(p.requests.get("cpu", 0.0) for p in here if not p.harvest)
        busy = max(0.0, min(1.0, utilization[node.name]) * alloc - harvest)
        place = min(alloc - others, (placement.max_node_utilization - placement.hysteresis) * alloc - busy) - reserve
        free = dict(node.allocatable)
        for p in here:
            for k, v in p.requests.items():
                free[k] = free.get(k, 0.0) - v
        out[node.name] = NodeRoom(
            name=node.name,
            place=place,
            ceiling=placement.max_node_utilization * alloc - busy,
            harvest=harvest,
            free=free,
            hosts_harvest=harvest > 0,
            load=(busy + harvest) / alloc if alloc else 1.0,
        )
    return out


def fits_count(room: NodeRoom, request: Resources) -> int:
    """How many more pods of `request` the node takes: its idle room and its scheduler-visible free space."""
    limits = [(room.room + EPS) / request["cpu"]] if request.get("cpu", 0.0) > 0 else []
    limits += [(room.free.get(k, 0.0) + EPS) / v for k, v in request.items() if v > 0]
    return max(0, math.floor(min(limits))) if limits else 0


def pack(count: int, request: Resources, rooms: Mapping[str, NodeRoom], open_nodes: set[str]) -> list[str]:
    """Nodes for `count` identical pods: nodes already hosting harvest pods first, then the roomiest ones,
    each filled before the next. For identical pods this touches the fewest nodes (fewer than best fit,
    which fills the tightest rooms first), so whole nodes stay free for their owners."""
    order = sorted(open_nodes, key=lambda n: (not rooms[n].hosts_harvest, -rooms[n].room, n))
    out: list[str] = []
    for name in order:
        if len(out) >= count:
            break
        out += [name] * min(count - len(out), fits_count(rooms[name], request))
    return out


@dataclass(frozen=True)
class HarvestPlan:
    create: list[tuple[str, str]] = field(default_factory=list)  # (pod name, node)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (pod, why): scale-down, lost nodes
    evict: list[tuple[str, str]] = field(default_factory=list)  # (pod, why): busy nodes
    wanted: int = 0
    placed: int = 0  # live pods after this plan
    message: str = ""


def pod_name(job: str, slot: int) -> str:
    return f"{job}-sandbox-{slot}"


def plan_harvest(
    job: str,
    wanted: int,
    template: PodInfo,
    placement: Placement,
    nodes: Sequence[NodeInfo],
    utilization: Mapping[str, float],
    bound_pods: Sequence[PodInfo],
    own: Sequence[PodInfo],
) -> HarvestPlan:
    """Where this job's sandbox pods should run: which to create, delete and evict.

    `own` are this pool's pods (any state); `bound_pods` every pod placed or pinned on a node; `template`
    is the pod to place: its requests, and its nodeSelector and tolerations for the feasibility filter.
    """
    request = template.requests
    by_name = {n.name: n for n in nodes}
    live = [p for p in own if not p.deleting and not p.terminal]
    delete: list[tuple[str, str]] = [(p.name, "pod failed") for p in own if p.terminal and not p.deleting]
    for pod in live:
        node = by_name.get(pod.on or "")
        if node is None or not node.ready:
            delete.append((pod.name, f"node {pod.on} is gone or not Ready"))
        elif any(node.labels.get(k) != v for k, v in (placement.node_selector or {}).items()):
            delete.append((pod.name, f"node {pod.on} no longer matches the nodeSelector"))
        elif pod.unschedulable and not pod.node:
            delete.append((pod.name, f"the scheduler cannot fit it on {pod.on}: {pod.unschedulable}"))
    gone = {name for name, _ in delete}
    live = [p for p in live if p.name not in gone]

    rooms = node_rooms(nodes, utilization, [p for p in bound_pods if p.name not in gone], placement)
    evict: list[tuple[str, str]] = []
    for name, room in sorted(rooms.items()):
        if room.harvest <= room.ceiling + EPS:
            continue
        excess = room.harvest - max(room.place, 0.0)
        mine = sorted((p for p in live if p.on == name), key=lambda p: p.created, reverse=True)  # youngest first
        why = f"node {name} is busy: CPU utilization {room.load:.2f} > {placement.max_node_utilization:g}"
        for pod in mine:
            if excess <= EPS:
                break
            evict.append((pod.name, why))
            excess -= pod.requests.get("cpu", 0.0)
    out = {n for n, _ in evict}
    live = [p for p in live if p.name not in out]

    if len(live) > wanted:  # scale down: empty the least used nodes first, youngest pods first
        count = {n: sum(1 for p in live if p.on == n) for n in {p.on for p in live}}
        youngest_first = sorted(live, key=lambda p: p.created, reverse=True)
        extra = sorted(youngest_first, key=lambda p: count[p.on])[: len(live) - wanted]
        delete += [(p.name, "scaled down") for p in extra]
        live = [p for p in live if p not in extra]

    open_nodes = {n for n in rooms if by_name[n].schedulable and feasible(template, by_name[n])}
    chosen = pack(max(0, wanted - len(live)), request, rooms, open_nodes)
    taken = {int(p.name.rsplit("-", 1)[1]) for p in own if p.name.rsplit("-", 1)[-1].isdigit()}
    slots = (i for i in range(len(own) + wanted + 1) if i not in taken)
    create = [(pod_name(job, next(slots)), node) for node in chosen]
    placed = len(live) + len(create)
    missing = wanted - placed
    cpu = request.get("cpu", 0.0)
    idle = sum(max(0.0, r.room) for n, r in rooms.items() if n in open_nodes)
    message = (
        f"{placed} of {wanted} sandbox pods placed on idle CPU"
        + (f"; {missing} do not fit ({idle:.1f} harvestable cores on {len(open_nodes)} nodes, "
           f"{cpu:g} per pod)" if missing > 0 else "")
    )  # fmt: skip
    return HarvestPlan(create, delete, evict, wanted, placed, message)
