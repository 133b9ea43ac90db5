"""Sandbox pods on idle CPU (pure): harvestable capacity, eviction and packing, for every job of a pass.

Model, per candidate node (Ready, matching the pool's nodeSelector; cordoned nodes keep their pods but get
no new ones). Harvest pods are assumed to use what they request. The utilization is a rate over a window
(`utilizationWindowSeconds`, last scraped up to `utilizationScrapeSeconds` ago): a pod's load enters it
gradually after the pod starts and leaves it gradually after the pod is gone. The harvest pods' share of it
is subtracted, and the rest belongs to the node's other workloads; as that share is known only within a
band (the scrape's age), placing assumes the most other load and evicting the least:

    seen     = sum over harvest pods on the node (every RLJob; terminating ones, and ones gone lately) of
               requested CPU * (the share of the metric's window the pod ran in)
    other    = max(0, utilization * allocatable - seen)          cores used by everything else
    harvest  = CPU requested by the live (not draining, not terminating) harvest pods on the node
    place    = min(allocatable - requests of non-harvest pods,
                   (maxNodeUtilization - hysteresis) * allocatable - other) - reservedCPU
    ceiling  = maxNodeUtilization * allocatable - other

New pods go where `harvest + new <= place` (and the scheduler's free resources hold them); when
`harvest > ceiling` the node is busy and just enough sandbox pods (youngest first, of the jobs whose ceiling
is crossed) are evicted to bring `harvest` back under `place`. Terminating pods are not harvest any more, so
they are never evicted twice. The gap between the two thresholds keeps a node from flapping.

Graceful: with `drainSeconds`, a pod to evict or scale down is first marked draining (it stops taking work
and finishes its checks; it is no longer harvest, and its replacement is placed at once) and evicted once
the drain is over. A drain, once begun, is not undone.

All jobs' pending pods are packed together: the most pods placed first, then the fewest nodes hosting
sandbox pods. One job's identical pods are packed exactly by a greedy rule; several jobs exactly by a
dynamic program over the nodes while its state space, and the search for what each distinct node can
take, are small (`EXACT_STATES`), greedily beyond that.

A node without utilization data is not harvestable and its pods are left alone (no data never evicts).
With no data on any node, a job places up to `floor` pods by requests alone, as kube-scheduler would.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from rlop.api.models import Placement
from rlop.plan.capacity import feasible, free_capacity
from rlop.plan.observed import NodeInfo, PodInfo
from rlop.plan.quantity import Resources, parse_quantity

EPS = 1e-9
EXACT_STATES = 20_000  # joint packing is exact while (pending pods + 1) multiplied over jobs stays below
JobKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class NodeRoom:
    """What one node offers one job's harvest pods (cores) and what it can still fit (all resources)."""

    name: str
    place: float  # cores all harvest pods together may request (target)
    ceiling: float  # above this many harvest cores, evict
    harvest: float  # cores requested by live harvest pods now
    free: Resources  # allocatable minus every pod's requests (scheduler view)
    load: float  # estimated utilization with live harvest pods counted at their requests
    measured: float  # the utilization Prometheus reports (with no data: by requests)

    @property
    def room(self) -> float:
        return self.place - self.harvest


MAX_LAG = 3600.0 + 600.0  # the longest utilization window plus scrape: older departures are forgotten


@dataclass(frozen=True)
class Departed:
    """A harvest pod that is gone but whose load may still show in the utilization (a rate window)."""

    node: str
    cpu: float
    started: datetime
    gone: datetime


def _time(stamp: str, now: datetime) -> datetime:
    """An RFC 3339 time; "" (or a value that is not one) is now."""
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else now
    except ValueError:
        return now


def _created(pod: PodInfo, now: datetime) -> datetime:
    """When the pod was created; a pod not yet seen by the API server is brand new."""
    return _time(pod.created, now)


def seen_share(
    cpu: float, started: datetime, gone: datetime | None, now: datetime, window: float, scrape: float
) -> tuple[float, float]:
    """The least and the most of a harvest pod's CPU the utilization can show now (`gone`: None while it
    runs). The metric averages `window` seconds ending when it was last scraped, 0 to `scrape` seconds
    ago: a pod that started 30 s ago is 0.25 to 0.5 inside a 60 s window; one gone 30 s ago, 0.5 to 0.75."""
    end = now if gone is None else min(gone, now)
    if window <= 0:
        return (cpu, cpu) if gone is None else (0.0, 0.0)
    t0, t1 = (started - now).total_seconds(), (end - now).total_seconds()  # the pod ran in [t0, t1] <= 0

    def share(age: float) -> float:  # the window is [-age - window, -age]
        return max(0.0, min(t1, -age) - max(t0, -age - window)) / window

    ages = {0.0, scrape, -t1, -t0, -t1 - window, -t0 - window}  # the overlap is linear between these
    shares = [share(a) for a in ages if 0.0 <= a <= scrape]
    return cpu * min(shares), cpu * max(shares)


def departures(
    before: Iterable[PodInfo], after: Iterable[PodInfo], departed: Sequence[Departed], now: datetime
) -> list[Departed]:
    """Harvest pods seen `before` (the previous pass) but not `after` (this one) are gone as of now; the
    earlier departures are kept while a rate window may still show them."""
    present = {(p.namespace, p.name) for p in after}
    gone = [
        Departed(p.on, p.requests.get("cpu", 0.0), _created(p, now), now)
        for p in before
        if p.harvest and p.on and (p.namespace, p.name) not in present
    ]
    return [d for d in departed if (now - d.gone).total_seconds() < MAX_LAG] + gone


def node_rooms(
    nodes: Iterable[NodeInfo],
    utilization: Mapping[str, float] | None,
    pods: Iterable[PodInfo],
    placement: Placement,
    now: datetime,
    departed: Sequence[Departed] = (),
) -> dict[str, NodeRoom]:
    """Rooms of the candidate nodes (matching the nodeSelector and with utilization data; with no data at
    all, every matching node by requests alone and nothing is ever busy)."""
    reserve = parse_quantity(placement.reserved_cpu)
    window, scrape = float(placement.utilization_window_seconds), float(placement.utilization_scrape_seconds)
    by_node: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.on and not pod.terminal:
            by_node.setdefault(pod.on, []).append(pod)
    out = {}
    for node in nodes:
        if not _selected(node, placement) or (utilization and node.name not in utilization):
            continue
        alloc = node.allocatable.get("cpu", 0.0)
        here = by_node.get(node.name, [])
        harvest = sum(p.requests.get("cpu", 0.0) for p in here if p.harvest and not _leaving(p))
        others = sum(p.requests.get("cpu", 0.0) for p in here if not p.harvest)
        free = dict(node.allocatable)
        for p in here:
            for k, v in p.requests.items():
                free[k] = free.get(k, 0.0) - v
        if not utilization:  # by requests alone, as kube-scheduler would
            idle = free.get("cpu", 0.0)
            load = (alloc - idle) / alloc if alloc else 1.0
            out[node.name] = NodeRoom(node.name, harvest + idle - reserve, math.inf, harvest, free, load, load)
            continue
        shares = [seen_share(p.requests.get("cpu", 0.0), _created(p, now), None, now, window, scrape)
                  for p in here if p.harvest]  # fmt: skip
        shares += [seen_share(d.cpu, d.started, d.gone, now, window, scrape) for d in departed if d.node == node.name]
        measured = min(1.0, utilization[node.name]) * alloc
        other_most = max(0.0, measured - sum(lo for lo, _ in shares))  # placing: assume the most other load
        other_least = max(0.0, measured - sum(hi for _, hi in shares))  # evicting: the least
        limit = (placement.max_node_utilization - placement.hysteresis) * alloc - other_most
        out[node.name] = NodeRoom(
            name=node.name,
            place=min(alloc - others, limit) - reserve,
            ceiling=placement.max_node_utilization * alloc - other_least,
            harvest=harvest,
            free=free,
            load=(other_least + harvest) / alloc if alloc else 1.0,
            measured=utilization[node.name],
        )
    return out


@dataclass(frozen=True)
class SandboxDemand:
    """One job's sandbox pool in a pass: how many pods it wants and where they may go."""

    key: JobKey
    wanted: int
    floor: int  # placed by requests alone when there is no utilization data at all
    template: PodInfo  # the pod to place: its requests, nodeSelector and tolerations
    placement: Placement
    utilization: Mapping[str, float] | None  # node -> CPU utilization; None or empty: no data
    own: Sequence[PodInfo]  # this pool's harvest pods, in any state


@dataclass(frozen=True)
class HarvestPlan:
    create: list[tuple[str, str]] = field(default_factory=list)  # (pod name, node)
    delete: list[tuple[str, str]] = field(default_factory=list)  # (pod, why): scale-down, lost nodes
    evict: list[tuple[str, str]] = field(default_factory=list)  # (pod, why): busy nodes, drains over
    drain: list[tuple[str, str]] = field(default_factory=list)  # (pod, why): to mark draining now
    wanted: int = 0
    placed: int = 0  # live pods after this plan
    no_data: bool = False  # no utilization data at all: placed by requests alone, up to the floor
    message: str = ""


def pod_name(job: str, slot: int) -> str:
    return f"{job}-sandbox-{slot}"


def _leaving(pod: PodInfo) -> bool:
    """Terminating or draining: no longer harvest, never chosen again."""
    return pod.deleting or bool(pod.draining)


def _drained(demand: SandboxDemand, gone: set[tuple[str, str]], now: datetime) -> list[tuple[str, str]]:
    """This pool's draining pods whose drain is over (and not `gone` otherwise): to evict now."""
    out = []
    for pod in demand.own:
        if pod.draining and not pod.deleting and not pod.terminal and (pod.namespace, pod.name) not in gone:
            since = _time(pod.draining, now)
            if (now - since).total_seconds() >= demand.placement.drain_seconds:
                out.append((pod.name, f"drained since {pod.draining}: {pod.drain_reason or 'no reason given'}"))
    return out


def _selected(node: NodeInfo, placement: Placement) -> bool:
    """Does the node match the pool's nodeSelector?"""
    return all(node.labels.get(k) == v for k, v in (placement.node_selector or {}).items())


def _lost(demand: SandboxDemand, by_name: Mapping[str, NodeInfo]) -> list[tuple[str, str]]:
    """Pods to delete whatever the load: failed, on a lost or mismatched node, or unschedulable."""
    out = [(p.name, "pod failed") for p in demand.own if p.terminal and not p.deleting]
    for pod in demand.own:
        if pod.deleting or pod.terminal:
            continue
        node = by_name.get(pod.on or "")
        if node is None or not node.ready:
            out.append((pod.name, f"node {pod.on} is gone or not Ready"))
        elif not _selected(node, demand.placement):
            out.append((pod.name, f"node {pod.on} no longer matches the nodeSelector"))
        elif pod.unschedulable and not pod.node:
            out.append((pod.name, f"the scheduler cannot fit it on {pod.on}: {pod.unschedulable}"))
    return out


def _evictions(
    demands: Sequence[SandboxDemand], rooms: Mapping[JobKey, Mapping[str, NodeRoom]], alive: Sequence[PodInfo]
) -> dict[JobKey, list[tuple[str, str]]]:
    """Per busy node, just enough of the youngest pods of the jobs whose ceiling it crosses (`alive`: every
    live harvest pod; only the demands' own are evicted)."""
    jobs = {d.key: d for d in demands}
    owner = {(p.namespace, p.name): d.key for d in demands for p in d.own}
    out: dict[JobKey, list[tuple[str, str]]] = {d.key: [] for d in demands}
    for name in sorted({p.on for p in alive if p.on}):
        here = _youngest_first(p for p in alive if p.on == name)
        harvest = sum(p.requests.get("cpu", 0.0) for p in here)
        busy = {k for k in jobs if name in rooms[k] and harvest > rooms[k][name].ceiling + EPS}
        for pod in here:
            key = owner.get((pod.namespace, pod.name))
            if key is None or key not in busy:
                continue
            room = rooms[key][name]
            if harvest <= max(room.place, 0.0) + EPS:
                continue
            limit = jobs[key].placement.max_node_utilization
            why = f"CPU utilization {room.measured:.2f} ({room.load:.2f} with its sandbox pods at their requests)"
            out[key].append((pod.name, f"node {name} is busy: {why} > {limit:g}"))
            harvest -= pod.requests.get("cpu", 0.0)
    return out


def _youngest_first(pods: Iterable[PodInfo]) -> list[PodInfo]:
    return sorted(pods, key=lambda p: p.created or "~", reverse=True)  # "": not created yet, the youngest


def _scale_down(live: Sequence[PodInfo], wanted: int) -> list[PodInfo]:
    """The pods to remove to keep `wanted`: the least used nodes emptied first, youngest pods first."""
    if len(live) <= wanted:
        return []
    count = {n: sum(1 for p in live if p.on == n) for n in {p.on for p in live}}
    return sorted(_youngest_first(live), key=lambda p: count[p.on])[: len(live) - wanted]


def plan_harvest(
    demands: Sequence[SandboxDemand],
    nodes: Sequence[NodeInfo],
    bound_pods: Sequence[PodInfo],
    now: datetime,
    departed: Sequence[Departed] = (),
) -> dict[JobKey, HarvestPlan]:
    """Where every job's sandbox pods should run this pass: which to create, delete and evict.

    `bound_pods` is every pod placed or pinned on a node (other jobs' sandbox pods among them);
    `departed` the harvest pods gone lately (`departures`), whose load may still show.
    """
    by_name = {n.name: n for n in nodes}
    delete = {d.key: _lost(d, by_name) for d in demands}
    gone = {(d.key[0], name) for d in demands for name, _ in delete[d.key]}
    bound = [p for p in bound_pods if (p.namespace, p.name) not in gone or not p.harvest]
    # jobs with the same placement and the same utilization readings see the same rooms: computed once
    # (node_rooms walks every node and pod; per job, it was most of a pass at 200 jobs)
    seen: dict[tuple[str, tuple[tuple[str, float], ...] | None], dict[str, NodeRoom]] = {}
    rooms = {}
    for d in demands:
        same = (d.placement.model_dump_json(), None if d.utilization is None else tuple(sorted(d.utilization.items())))
        if same not in seen:
            seen[same] = node_rooms(nodes, d.utilization, bound, d.placement, now, departed)
        rooms[d.key] = seen[same]
    alive = [p for p in bound if p.harvest and p.on and not _leaving(p) and not p.terminal]
    evict = _evictions(demands, rooms, alive)
    out_now = {(key[0], name) for key, pods in evict.items() for name, _ in pods}

    mine: dict[JobKey, list[PodInfo]] = {}
    drain: dict[JobKey, list[tuple[str, str]]] = {d.key: [] for d in demands}
    order = {(p.namespace, p.name): i for i, p in enumerate(alive)}  # a job's pods by lookup, in alive's order
    for d in demands:
        names = {(p.namespace, p.name) for p in d.own} - out_now
        mine[d.key] = [alive[i] for i in sorted(order[n] for n in names if n in order)]
        down = _scale_down(mine[d.key], d.wanted)
        extra = [(p.name, "scaled down") for p in down]
        over = _drained(d, gone, now)
        if d.placement.drain_seconds:
            drain[d.key], evict[d.key] = evict[d.key] + extra, over
        else:  # at once (and drains begun under a longer drainSeconds are over)
            evict[d.key] += over
            delete[d.key] += extra
        mine[d.key] = [p for p in mine[d.key] if p not in down]
    leaving = out_now | {(key[0], name) for key, pods in [*delete.items(), *drain.items()] for name, _ in pods}
    harvest = {n: 0.0 for n in by_name}
    for p in alive:
        if (p.namespace, p.name) not in leaving and p.on in harvest:
            harvest[p.on] += p.requests.get("cpu", 0.0)

    pending = []
    opened: dict[tuple[int, str], list[str]] = {}  # the nodes a pod shape may go to, once per rooms and shape
    for d in demands:
        target = min(d.wanted, d.floor) if not d.utilization else d.wanted
        shape = (id(rooms[d.key]), repr((sorted(d.template.node_selector.items()), d.template.tolerations)))
        if shape not in opened:
            opened[shape] = [n for n in rooms[d.key] if feasible(d.template, by_name[n])]
        caps = {n: rooms[d.key][n].place for n in opened[shape]}
        pending.append(_Kind(d.key, max(0, target - len(mine[d.key])), d.template.requests, caps))
    free = free_capacity(nodes, bound)  # pods leaving this pass still hold their requests until gone
    chosen = pack(pending, free, harvest)

    plans = {}
    for d, kind in zip(demands, pending, strict=True):
        taken = {int(p.name.rsplit("-", 1)[1]) for p in d.own if p.name.rsplit("-", 1)[-1].isdigit()}
        slots = (i for i in range(len(d.own) + d.wanted + 1) if i not in taken)
        create = [(pod_name(d.key[1], next(slots)), node) for node in chosen[d.key]]
        placed = len(mine[d.key]) + len(create)
        plans[d.key] = HarvestPlan(create, delete[d.key], evict[d.key], drain[d.key], d.wanted, placed,
                                   not d.utilization, _message(d, kind, placed, harvest))  # fmt: skip
    return plans


def _message(d: SandboxDemand, kind: _Kind, placed: int, harvest: Mapping[str, float]) -> str:
    cpu = d.template.requests.get("cpu", 0.0)
    if not d.utilization:
        return (f"CPU utilization unknown: {placed} of {d.wanted} sandbox pods placed by requests alone "
                f"(up to {d.floor}); the rest wait for utilization data")  # fmt: skip
    missing = d.wanted - placed
    idle = sum(max(0.0, cap - harvest.get(n, 0.0)) for n, cap in kind.caps.items())
    more = f"; {missing} do not fit ({idle:.1f} harvestable cores on {len(kind.caps)} nodes, {cpu:g} per pod)"
    return f"{placed} of {d.wanted} sandbox pods placed on idle CPU" + (more if missing > 0 else "")


# ---------------------------------------------------------------------------------------------- packing


@dataclass(frozen=True)
class _Kind:
    """One job's pending pods: identical, `count` of them, allowed where `caps` (total harvest cores)."""

    key: JobKey
    count: int
    request: Resources
    caps: Mapping[str, float]


def _fits(kinds: Sequence[_Kind], x: Sequence[int], node: str, free: Resources, harvest: float) -> bool:
    """Can `node` take x[i] more pods of each kind: free resources and every present kind's cap?"""
    total: dict[str, float] = {}
    for kind, n in zip(kinds, x, strict=True):
        if n:
            if node not in kind.caps:
                return False
            for k, v in kind.request.items():
                total[k] = total.get(k, 0.0) + n * v
    if any(v > free.get(k, 0.0) + EPS for k, v in total.items()):
        return False
    cpu = harvest + total.get("cpu", 0.0)
    return all(cpu <= kind.caps[node] + EPS for kind, n in zip(kinds, x, strict=True) if n)


def _most(kinds: Sequence[_Kind], x: list[int], i: int, node: str, free: Resources, harvest: float) -> int:
    """The most pods of kind `i` that fit beside x (x[i] ignored), at most its count."""
    lo, hi = 0, kinds[i].count
    while lo < hi:  # fitting is monotone in the count
        mid = (lo + hi + 1) // 2
        if _fits(kinds, [*x[:i], mid, *x[i + 1 :]], node, free, harvest):
            lo = mid
        else:
            hi = mid - 1
    return lo


def pack(
    kinds: Sequence[_Kind], free: Mapping[str, Resources], harvest: Mapping[str, float]
) -> dict[JobKey, list[str]]:
    """Nodes for every kind's pending pods: the most pods first, then the fewest nodes hosting sandbox
    pods (a node that hosts some already costs nothing)."""
    active = [k for k in kinds if k.count > 0 and k.caps]
    out: dict[JobKey, list[str]] = {k.key: [] for k in kinds}
    if not active:
        return out
    states = math.prod(k.count + 1 for k in active)
    counts = _exact(active, free, harvest) if len(active) > 1 and states <= EXACT_STATES else None
    if counts is None:
        counts = _greedy(active, free, harvest)
    for node, x in sorted(counts.items()):
        for kind, n in zip(active, x, strict=True):
            out[kind.key] += [node] * n
    return out


def _greedy(
    kinds: Sequence[_Kind], free: Mapping[str, Resources], harvest: Mapping[str, float]
) -> dict[str, list[int]]:
    """Largest pods first; each kind fills the nodes hosting sandbox pods (tightest first, leaving the big
    rooms), then new nodes taking the most of it first. Exact for one kind: it places min(count, sum of
    fits) and opens the fewest nodes."""
    order = sorted(range(len(kinds)), key=lambda i: tuple(-kinds[i].request.get(r, 0.0) for r in ("cpu", "memory")))
    nodes = sorted({n for k in kinds for n in k.caps})
    x = {n: [0] * len(kinds) for n in nodes}
    for i in order:
        left = kinds[i].count

        def most(n: str, i: int = i) -> int:
            return _most(kinds, x[n], i, n, free.get(n, {}), harvest.get(n, 0.0)) - x[n][i]

        hosting = [n for n in nodes if harvest.get(n, 0.0) > EPS or any(x[n])]
        fresh = [n for n in nodes if n not in hosting]
        fill = sorted(hosting, key=lambda n: (most(n), n)) + sorted(fresh, key=lambda n: (-most(n), n))
        for n in fill:
            if left <= 0:
                break
            add = min(left, most(n))
            x[n][i] += add
            left -= add
    return {n: v for n, v in x.items() if any(v)}


def _within(kinds: Sequence[_Kind], node: str) -> tuple[int, ...]:
    """The most pods of each kind `node` could take: all of a kind allowed there, none of the others."""
    return tuple(k.count if node in k.caps else 0 for k in kinds)


def _frontier(kinds: Sequence[_Kind], node: str, free: Resources, harvest: float) -> list[tuple[int, ...]]:
    """The maximal vectors of pod counts `node` can take (no other feasible vector is above one), sorted.

    Each feasible count of the other kinds is taken with the most of the last kind beside it; such a
    vector is maximal unless one more pod of some other kind still leaves room for as many of the last
    (fitting is monotone, so any vector above it is above one of those neighbours)."""
    within = _within(kinds, node)
    if _fits(kinds, within, node, free, harvest):
        return [within]  # room for every pod: the one maximal vector
    last = len(kinds) - 1
    most: dict[tuple[int, ...], int] = {}
    for head in itertools.product(*(range(c + 1) for c in within[:-1])):
        x = [*head, 0]
        if _fits(kinds, x, node, free, harvest):
            most[head] = _most(kinds, x, last, node, free, harvest) if within[-1] else 0

    def above(head: tuple[int, ...], i: int) -> int:
        return most.get((*head[:i], head[i] + 1, *head[i + 1 :]), -1)

    return sorted((*head, n) for head, n in most.items() if all(above(head, i) < n for i in range(last)))


def _fronts(
    kinds: Sequence[_Kind], nodes: Sequence[str], free: Mapping[str, Resources], harvest: Mapping[str, float]
) -> dict[str, list[tuple[int, ...]]] | None:
    """Each node's frontier, computed once per distinct node (what it has free, hosts and allows); None
    once more than EXACT_STATES counts of the other kinds were tried (a node with room for every pod tries
    none)."""
    out: dict[str, list[tuple[int, ...]]] = {}
    seen: dict[tuple[object, ...], list[tuple[int, ...]]] = {}
    work = 0
    for n in nodes:
        room, hosting = free.get(n, {}), harvest.get(n, 0.0)
        sign = (tuple(sorted(room.items())), hosting, tuple(k.caps.get(n) for k in kinds))
        if sign not in seen:
            seen[sign], within = _frontier(kinds, n, room, hosting), _within(kinds, n)
            if seen[sign] != [within]:
                work += math.prod(c + 1 for c in within[:-1])
                if work > EXACT_STATES:
                    return None
        out[n] = seen[sign]
    return out


def _exact(
    kinds: Sequence[_Kind], free: Mapping[str, Resources], harvest: Mapping[str, float]
) -> dict[str, list[int]] | None:
    """A dynamic program over the nodes: the state is how many pods of each kind are placed (capped at the
    count); each node takes one of its maximal vectors. Lexicographically best: pods, then fewest nodes
    hosting sandbox pods. None when the work would be too large."""
    cap = tuple(k.count for k in kinds)
    nodes = sorted({n for k in kinds for n in k.caps})
    fronts = _fronts(kinds, nodes, free, harvest)
    if fronts is None or sum(len(f) for f in fronts.values()) * math.prod(c + 1 for c in cap) > 50 * EXACT_STATES:
        return None
    zero = (0,) * len(kinds)
    best: dict[tuple[int, ...], tuple[int, list[tuple[str, tuple[int, ...]]]]] = {zero: (0, [])}
    for n in nodes:
        hosting = harvest.get(n, 0.0) > EPS
        step = dict(best)
        for state, (touched, how) in best.items():
            for option in fronts[n]:
                new = tuple(min(c, s + o) for c, s, o in zip(cap, state, option, strict=True))
                if new == state:
                    continue
                took = tuple(a - b for a, b in zip(new, state, strict=True))
                cost = touched + (0 if hosting else 1)
                if new not in step or cost < step[new][0]:
                    step[new] = (cost, [*how, (n, took)])
        best = step
    final = max(best.items(), key=lambda kv: (sum(kv[0]), -kv[1][0]))[1][1]
    return {n: list(took) for n, took in final}
