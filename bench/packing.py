"""Sandbox packing: rlop's idle-CPU planner beside kube-scheduler's scoring and an exact optimum, in one
pass and over time.

One pass. For each seeded cluster (50 to 2,000 nodes of 8-64 cores, mixed utilization and requests) and
pod shape (CPU-bound 1 core / 2 GiB, memory-bound 1 core / 12 GiB) the same sandbox pods are placed by:
- rlop:            plan_harvest;
- LeastAllocated,  kube-scheduler's default score and its bin-packing score, by requests; they cannot see
  MostAllocated:   utilization, so they are shown as a user would get them today;
- ...+room:        the same two scores given rlop's room filter (a node takes a pod only while its
                   harvest stays under the rule below), as a scheduler extension could give them;
- optimum:         the integer program of rlop.dev.exact_packing (HiGHS), memory and every resource
                   included: the most pods within the rule, then the fewest nodes hosting them.
The rule every strategy is judged by: on each node, sandbox CPU <= (maxNodeUtilization - hysteresis) x
allocatable - the node's other load (`place`), and every resource fits. Reported: pods placed, pods within
the rule as a fraction of the optimum, cores past the eviction ceiling (maxNodeUtilization x allocatable -
other load: what would be evicted at once), nodes touched against the optimum's, planning time.

Over time (rlop.dev.harvest_sim): nodes whose other load steps between levels every 10-30 minutes, three
jobs, two hours, the utilization a 60 s rate scraped every 15 s. rlop (with and without a drain) beside an
omniscient planner that sees the true instantaneous CPU: evictions done vs needed, flaps per node-hour,
harvested core-hours, and the sandbox core-seconds past maxNodeUtilization (the interference rlop causes).

    .venv/bin/python bench/packing.py [--sizes 50,200,1000,2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import heapq
import random
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime

from rlop.api.models import Placement
from rlop.dev.exact_packing import solve
from rlop.dev.harvest_sim import SimJob, SimNode, simulate
from rlop.plan.capacity import free_capacity
from rlop.plan.harvest import NodeRoom, SandboxDemand, node_rooms, plan_harvest
from rlop.plan.observed import NodeInfo, PodInfo
from rlop.plan.quantity import Resources

PLACEMENT = Placement()  # maxNodeUtilization 0.7, hysteresis 0.1, reserve 250m
SHAPES = {"cpu-bound": {"cpu": 1.0, "memory": 2.0 * 2**30, "pods": 1.0},
          "memory-bound": {"cpu": 1.0, "memory": 12.0 * 2**30, "pods": 1.0}}  # fmt: skip
NOW = datetime(2026, 12, 1, tzinfo=UTC)
Rooms = dict[str, NodeRoom]
Strategy = Callable[[int, Resources, list[NodeInfo], list[PodInfo], dict[str, float], Rooms], dict[str, int]]


def cluster(n: int, rng: random.Random) -> tuple[list[NodeInfo], list[PodInfo], dict[str, float]]:
    nodes, pods, util = [], [], {}
    for i in range(n):
        cores = rng.choice([8, 16, 32, 64])
        name = f"n{i:05d}"
        nodes.append(NodeInfo(name=name, allocatable={"cpu": cores, "memory": cores * 4 * 2**30, "pods": 110.0}))
        busy = rng.random() < 0.3
        util[name] = rng.uniform(0.72, 0.98) if busy else rng.uniform(0.02, 0.6)
        cpu, memory = rng.uniform(0.1, 0.9) * cores, rng.uniform(0.1, 0.8) * cores * 4 * 2**30
        pods.append(PodInfo(name=f"tenant-{i}", node=name, requests={"cpu": cpu, "memory": memory, "pods": 1.0}))
    return nodes, pods, util


def scheduler(score: Callable[[float, float], float], room: bool) -> Strategy:
    """kube-scheduler's NodeResourcesFit: filter by every requested resource (and, with `room`, by rlop's
    room rule), pick the best CPU score, one pod at a time."""

    def place(count: int, pod: Resources, nodes: list[NodeInfo], pods: list[PodInfo], _util: dict[str, float],
              rooms: dict[str, NodeRoom]) -> dict[str, int]:  # fmt: skip
        free = {k: dict(v) for k, v in free_capacity(nodes, pods).items()}
        alloc = {n.name: n.allocatable["cpu"] for n in nodes}
        left = {n: r.room for n, r in rooms.items()}

        def fits(n: str) -> bool:
            return all(free[n].get(k, 0.0) >= v for k, v in pod.items()) and (not room or left.get(n, -1) >= pod["cpu"])

        def key(n: str) -> tuple[float, str]:
            return -score(alloc[n] - free[n]["cpu"] + pod["cpu"], alloc[n]), n

        heap = [key(n) for n in alloc]
        heapq.heapify(heap)
        out: dict[str, int] = {}
        while heap and sum(out.values()) < count:
            _, best = heapq.heappop(heap)
            if not fits(best):
                continue  # filtered out (and it only fills up)
            for k, v in pod.items():
                free[best][k] -= v
            left[best] = left.get(best, 0.0) - pod["cpu"]
            out[best] = out.get(best, 0) + 1
            heapq.heappush(heap, key(best))
        return out

    return place


def least(req: float, alloc: float) -> float:
    return (alloc - req) / alloc


def most(req: float, alloc: float) -> float:
    return req / alloc


def rlop(count: int, pod: Resources, nodes: list[NodeInfo], pods: list[PodInfo], util: dict[str, float],
         _rooms: dict[str, NodeRoom]) -> dict[str, int]:  # fmt: skip
    demand = SandboxDemand(("bench", "bench"), count, 0, PodInfo(name="t", requests=pod), PLACEMENT, util, [])
    out: dict[str, int] = {}
    for _, node in plan_harvest([demand], nodes, pods, NOW)[("bench", "bench")].create:
        out[node] = out.get(node, 0) + 1
    return out


def optimum(count: int, pod: Resources, nodes: list[NodeInfo], pods: list[PodInfo], _util: dict[str, float],
            rooms: dict[str, NodeRoom]) -> tuple[float, int]:  # fmt: skip
    free = free_capacity(nodes, pods)
    caps = {n: r.place for n, r in rooms.items() if r.place >= pod["cpu"]}
    return solve([(count, pod, caps)], {n: free[n] for n in caps}, {n: 0.0 for n in caps})


def evaluate(placed: Mapping[str, int], pod: Resources, rooms: Mapping[str, NodeRoom]) -> tuple[int, int, float]:
    """(pods placed, pods within the rule, cores past the eviction ceiling)."""
    within, over = 0, 0.0
    for n, k in placed.items():
        room = rooms.get(n)
        if room is None:  # no utilization data: outside the rule, all of it past the ceiling
            over += k * pod["cpu"]
            continue
        within += min(k, max(0, int((room.room + 1e-9) // pod["cpu"])))
        over += max(0.0, k * pod["cpu"] - max(room.ceiling - room.harvest, 0.0))
    return sum(placed.values()), within, over


STRATEGIES: dict[str, Strategy] = {
    "rlop": rlop,
    "LeastAllocated": scheduler(least, room=False),
    "MostAllocated": scheduler(most, room=False),
    "LeastAllocated+room": scheduler(least, room=True),
    "MostAllocated+room": scheduler(most, room=True),
}


def one_pass(sizes: list[int], seed: int, demands: list[float]) -> None:
    print(f"{'nodes':>6} {'shape':>12} {'demand':>6} {'strategy':>19} {'pods':>6} {'in rule/opt':>11} "
          f"{'over-ceiling cores':>18} {'touched':>8} {'vs opt':>7} {'plan ms':>8}")  # fmt: skip
    for n in sizes:
        nodes, pods, util = cluster(n, random.Random(seed + n))
        rooms = node_rooms(nodes, util, pods, PLACEMENT, NOW)
        for shape, pod in SHAPES.items():
            most_pods, _ = optimum(10**6, pod, nodes, pods, util, rooms)
            for demand in demands:
                count = max(1, int(most_pods * demand))
                started = time.perf_counter()
                best, touched_best = optimum(count, pod, nodes, pods, util, rooms)
                rows = [("optimum", best, best, 0.0, touched_best, (time.perf_counter() - started) * 1000)]
                for name, fn in STRATEGIES.items():
                    started = time.perf_counter()
                    placed = fn(count, pod, nodes, pods, util, rooms)
                    ms = (time.perf_counter() - started) * 1000
                    rows.append((name, *evaluate(placed, pod, rooms), len(placed), ms))
                for name, total, within, over, touched, ms in rows:
                    print(f"{n:6d} {shape:>12} {demand:6.1f} {name:>19} {int(total):6d} {within / best:11.3f} "
                          f"{over:18.1f} {touched:8d} {touched / max(touched_best, 1):6.2f}x {ms:8.1f}")  # fmt: skip


def steps(rng: random.Random, cores: float) -> Callable[[float], float]:
    """Other load stepping between levels (0.05-0.9 of the node) every 10-30 minutes."""
    changes, t = [], 0.0
    while t < 4 * 3600:
        changes.append((t, rng.uniform(0.05, 0.9) * cores))
        t += rng.uniform(600, 1800)

    def load(at: float) -> float:
        return next(level for start, level in reversed(changes) if start <= at)

    return load


def over_time(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [SimNode(f"n{i}", c, steps(rng, c)) for i, c in enumerate(rng.choice([8, 16, 32]) for _ in range(12))]
    jobs = [SimJob(f"j{i}", wanted=20) for i in range(3)]
    print("\nover time: 12 nodes, 3 jobs of 20 one-core pods, 2 h, a 60 s rate scraped every 15 s, 15 s passes")
    print(f"{'planner':>26} {'evictions':>9} {'needed':>6} {'flaps/node-h':>12} {'core-hours':>10} "
          f"{'sandbox core-s over limit':>25}")  # fmt: skip
    for drain in (30, 0):
        placement = PLACEMENT.model_copy(update={"drain_seconds": drain})
        real = simulate(nodes, jobs, placement, 7200)
        oracle = simulate(nodes, jobs, placement, 7200, oracle=True)
        for name, r in ((f"rlop, drainSeconds {drain}", real), (f"omniscient, drainSeconds {drain}", oracle)):
            print(f"{name:>26} {r.evictions:9d} {oracle.evictions:6d} {r.flaps_per_node_hour:12.3f} "
                  f"{r.core_hours:10.1f} {r.over_core_seconds:25.0f}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="50,200,1000,2000")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--demand", default="0.3,1.2", help="pods wanted, as fractions of the most that fit")
    args = p.parse_args()
    one_pass([int(x) for x in args.sizes.split(",")], args.seed, [float(x) for x in args.demand.split(",")])
    over_time(args.seed)


if __name__ == "__main__":
    main()
