"""Harvesting over time, simulated second by second (for tests and bench/packing.py; pure, seeded).

Nodes carry other workloads whose CPU follows a trace; several jobs want sandbox pods. Every `interval`
seconds the harvest planner runs on what rlop would observe: pods with their creation times, terminating
pods, departures, and a *delayed* utilization metric — the mean CPU over the last `window` seconds, as
scraped every `scrape` seconds (a `rate(...[1m])`). Created pods start at once and use their requests;
draining pods (the placement's `drainSeconds`) keep running until rlop evicts them; evicted pods terminate
for `grace` seconds, still running, then are gone. An eviction is counted once, when it is decided (the
drain begins or, without one, the pod is evicted).

With `oracle=True` the metric is the true instantaneous CPU and the planner is told there is no lag: the
evictions it makes are the ones needed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from rlop.api.models import Placement
from rlop.plan.harvest import Departed, SandboxDemand, departures, plan_harvest
from rlop.plan.observed import NodeInfo, PodInfo

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
FLAP_WINDOW = 600.0  # a place and an evict on one node closer than this is a flap


@dataclass(frozen=True)
class SimNode:
    name: str
    cpu: float
    load: Callable[[float], float]  # cores the node's other workloads use at time t
    requested: float = 0.0  # cores those workloads request
    memory: float = 64 * 2**30


@dataclass(frozen=True)
class SimJob:
    name: str
    wanted: int
    cpu: float = 1.0
    memory: float = 2**30


@dataclass
class _Pod:
    name: str
    job: str
    node: str
    cpu: float
    memory: float
    created: float
    draining: float | None = None
    evicted: float | None = None


@dataclass
class SimResult:
    evictions: int = 0
    placements: int = 0
    flaps: int = 0
    core_hours: float = 0.0  # harvested: sandbox cores running (not draining or terminating), integrated
    over_core_seconds: float = 0.0  # sandbox CPU above maxNodeUtilization * allocatable, integrated
    node_hours: float = 0.0
    most_pods: dict[str, int] = field(default_factory=dict)  # node -> the most live sandbox pods it held
    actions: list[tuple[float, str, str, str]] = field(default_factory=list)  # (t, node, place|evict, pod)

    @property
    def flaps_per_node_hour(self) -> float:
        return self.flaps / self.node_hours if self.node_hours else 0.0


def _iso(t: float) -> str:
    return (EPOCH + timedelta(seconds=t)).isoformat().replace("+00:00", "Z")


def simulate(
    nodes: Sequence[SimNode],
    jobs: Sequence[SimJob],
    placement: Placement,
    duration: float,
    interval: float = 15.0,
    scrape: float = 15.0,
    window: float = 60.0,
    grace: float = 30.0,
    oracle: bool = False,
) -> SimResult:
    if oracle:
        placement = placement.model_copy(update={"utilization_window_seconds": 0, "utilization_scrape_seconds": 0})
    infos = [NodeInfo(n.name, allocatable={"cpu": n.cpu, "memory": n.memory, "pods": 110.0}) for n in nodes]
    tenants = [
        PodInfo(f"tenant-{n.name}", "sim", node=n.name, requests={"cpu": n.requested, "pods": 1.0}) for n in nodes
    ]
    pods: dict[str, _Pod] = {}
    history = {n.name: [n.load(0.0)] * int(window) for n in nodes}  # true CPU per second, from a steady past
    metric: dict[str, float] = {}
    seen: list[PodInfo] = []
    departed: list[Departed] = []
    out = SimResult(node_hours=len(nodes) * duration / 3600)
    last: dict[str, tuple[str, float]] = {}  # node -> (its last action, when)
    for second in range(int(duration)):
        t = float(second)
        pods = {k: p for k, p in pods.items() if p.evicted is None or t < p.evicted + grace}
        for n in nodes:
            here = [p for p in pods.values() if p.node == n.name]
            ours = sum(p.cpu for p in here)
            used = n.load(t) + ours
            history[n.name].append(used)
            out.over_core_seconds += max(0.0, min(ours, used - placement.max_node_utilization * n.cpu))
            live = sum(1 for p in here if p.evicted is None and p.draining is None)
            out.core_hours += sum(p.cpu for p in here if p.evicted is None and p.draining is None) / 3600
            out.most_pods[n.name] = max(out.most_pods.get(n.name, 0), live)
        if second % int(scrape) == 0 or oracle:
            for n in nodes:
                past = history[n.name][-int(window) :] if not oracle else history[n.name][-1:]
                metric[n.name] = sum(past) / len(past) / n.cpu
        if second % int(interval):
            continue
        now = EPOCH + timedelta(seconds=t)
        sandbox = [
            PodInfo(
                p.name,
                "sim",
                node=p.node,
                requests={"cpu": p.cpu, "memory": p.memory, "pods": 1.0},
                phase="Running",
                deleting=p.evicted is not None,
                draining=_iso(p.draining) if p.draining is not None else "",
                job=p.job,
                pool="sandbox",
                harvest=True,
                created=_iso(p.created),
            )
            for p in pods.values()
        ]
        departed = departures(seen, sandbox, departed, now)
        seen = sandbox
        template = {j.name: PodInfo("t", requests={"cpu": j.cpu, "memory": j.memory, "pods": 1.0}) for j in jobs}
        demands = [
            SandboxDemand(
                ("sim", j.name),
                j.wanted,
                0,
                template[j.name],
                placement,
                dict(metric),
                [p for p in sandbox if p.job == j.name],
            )
            for j in jobs
        ]
        plans = plan_harvest(demands, infos, tenants + sandbox, now, departed)
        for j in jobs:
            plan = plans[("sim", j.name)]
            for name, _ in plan.drain:
                pods[name].draining = t
                out.evictions += 1
                _act(out, last, t, pods[name].node, "evict", name)
            for name, _ in plan.evict + plan.delete:
                if pods[name].draining is None:
                    out.evictions += 1
                    _act(out, last, t, pods[name].node, "evict", name)
                pods[name].evicted = t
            for name, node in plan.create:
                pods[name] = _Pod(name, j.name, node, j.cpu, j.memory, t)
                out.placements += 1
                _act(out, last, t, node, "place", name)
    return out


def _act(out: SimResult, last: dict[str, tuple[str, float]], t: float, node: str, kind: str, pod: str) -> None:
    before = last.get(node)
    if before is not None and before[0] != kind and t - before[1] < FLAP_WINDOW:
        out.flaps += 1
    last[node] = (kind, t)
    out.actions.append((t, node, kind, pod))
