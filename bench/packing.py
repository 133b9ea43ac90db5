"""Sandbox packing on generated clusters: rlop's idle-CPU planner beside kube-scheduler's scoring.

For each seeded cluster (50 to 2,000 nodes of 8-64 cores, mixed utilization and requests) the same
sandbox pods are placed three ways:
- rlop:           plan_harvest (utilization-aware; nodes already hosting sandbox pods, then the roomiest);
- LeastAllocated: kube-scheduler's default score, spreading by requests (it cannot see utilization);
- MostAllocated:  kube-scheduler's bin-packing score, by requests.
Reported: harvested cores as a fraction of the fractional upper bound (the sum of every node's idle
room), cores placed where they push a node past maxNodeUtilization (interference), nodes touched,
planning time.

    .venv/bin/python bench/packing.py [--sizes 50,200,1000,2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import heapq
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

from rlop.api.models import Placement
from rlop.plan.harvest import SandboxDemand, node_rooms, plan_harvest
from rlop.plan.observed import NodeInfo, PodInfo

PLACEMENT = Placement()  # maxNodeUtilization 0.7, hysteresis 0.1, reserve 250m
POD = {"cpu": 1.0, "memory": 2.0 * 2**30, "pods": 1.0}
NOW = datetime(2026, 12, 1, tzinfo=UTC)


def cluster(n: int, rng: random.Random) -> tuple[list[NodeInfo], list[PodInfo], dict[str, float]]:
    nodes, pods, util = [], [], {}
    for i in range(n):
        cores = rng.choice([8, 16, 32, 64])
        name = f"n{i:05d}"
        nodes.append(NodeInfo(name=name, allocatable={"cpu": cores, "memory": cores * 4 * 2**30, "pods": 110.0}))
        busy = rng.random() < 0.3
        util[name] = rng.uniform(0.72, 0.98) if busy else rng.uniform(0.02, 0.6)
        requested = rng.uniform(0.1, 0.9) * cores
        pods.append(PodInfo(name=f"tenant-{i}", node=name, requests={"cpu": requested, "memory": 2**30, "pods": 1.0}))
    return nodes, pods, util


def scheduler(score: Callable[[float, float], float]) -> Callable[..., dict[str, int]]:
    """kube-scheduler's NodeResourcesFit: filter by requests, pick the best score (CPU fraction)."""

    def place(count: int, nodes: list[NodeInfo], pods: list[PodInfo], _util: dict[str, float]) -> dict[str, int]:
        requested = {n.name: 0.0 for n in nodes}
        for p in pods:
            requested[p.node or ""] += p.requests["cpu"]
        alloc = {n.name: n.allocatable["cpu"] for n in nodes}
        heap = [(-score(requested[n] + POD["cpu"], alloc[n]), n) for n in alloc]
        heapq.heapify(heap)
        out: dict[str, int] = {}
        while heap and sum(out.values()) < count:
            _, best = heapq.heappop(heap)
            if alloc[best] - requested[best] < POD["cpu"]:
                continue  # full: filtered out
            requested[best] += POD["cpu"]
            out[best] = out.get(best, 0) + 1
            heapq.heappush(heap, (-score(requested[best] + POD["cpu"], alloc[best]), best))
        return out

    return place


least_allocated = scheduler(lambda req, alloc: (alloc - req) / alloc)
most_allocated = scheduler(lambda req, alloc: req / alloc)


def rlop(count: int, nodes: list[NodeInfo], pods: list[PodInfo], util: dict[str, float]) -> dict[str, int]:
    template = PodInfo(name="t", requests=POD)
    demand = SandboxDemand(("bench", "bench"), count, 0, template, PLACEMENT, util, [])
    plan = plan_harvest([demand], nodes, pods, NOW)[("bench", "bench")]
    out: dict[str, int] = {}
    for _, node in plan.create:
        out[node] = out.get(node, 0) + 1
    return out


def evaluate(placed: dict[str, int], rooms: dict[str, float]) -> tuple[float, float, int]:
    """(useful cores, cores beyond a node's idle room, nodes touched)."""
    useful = sum(min(k * POD["cpu"], max(rooms.get(n, 0.0), 0.0)) for n, k in placed.items())
    over = sum(max(0.0, k * POD["cpu"] - max(rooms.get(n, 0.0), 0.0)) for n, k in placed.items())
    return useful, over, len(placed)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="50,200,1000,2000")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--demand", default="0.3,1.2", help="pods wanted, as fractions of the upper bound")
    args = p.parse_args()
    print(f"{'nodes':>6} {'demand':>6} {'strategy':>15} {'harvest/UB':>10} {'over-limit cores':>16} "
          f"{'nodes touched':>13} {'plan ms':>8} {'harvest vs rlop':>15} {'touched vs rlop':>15}")  # fmt: skip
    for n in (int(x) for x in args.sizes.split(",")):
        rng = random.Random(args.seed + n)
        nodes, pods, util = cluster(n, rng)
        rooms = {name: r.room for name, r in node_rooms(nodes, util, pods, PLACEMENT, NOW).items()}
        bound = sum(max(r, 0.0) for r in rooms.values())  # fractional upper bound
        for demand in (float(x) for x in args.demand.split(",")):
            report(n, demand, int(bound * demand), min(bound, bound * demand), nodes, pods, util, rooms)


def report(n: int, demand: float, count: int, bound: float, nodes: list[NodeInfo], pods: list[PodInfo],
           util: dict[str, float], rooms: dict[str, float]) -> None:  # fmt: skip
    results = {}
    for name, fn in (("rlop", rlop), ("LeastAllocated", least_allocated), ("MostAllocated", most_allocated)):
        started = time.perf_counter()
        placed = fn(count, nodes, pods, util)
        ms = (time.perf_counter() - started) * 1000
        results[name] = (*evaluate(placed, rooms), ms)
    base = results["rlop"]
    for name, (useful, over, touched, ms) in results.items():
        print(f"{n:6d} {demand:6.1f} {name:>15} {useful / bound:10.3f} {over:16.1f} {touched:13d} {ms:8.1f} "
              f"{useful / base[0]:14.2f}x {touched / base[2]:14.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
