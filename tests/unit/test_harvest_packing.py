"""The joint packer against an exact integer program (HiGHS) on generated small instances: several jobs,
memory-bound nodes, per-job utilization limits. It must reach the optimum pod count, then the fewest nodes."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest

from rlop.api.models import Placement
from rlop.dev.exact_packing import solve
from rlop.plan.harvest import SandboxDemand, node_rooms, plan_harvest
from rlop.plan.observed import NodeInfo, PodInfo

NOW = datetime(2026, 12, 1, tzinfo=UTC)
GI = 2.0**30


def instance(seed: int) -> tuple[list[NodeInfo], list[PodInfo], list[SandboxDemand]]:
    rng = random.Random(seed)
    nodes, bound, util = [], [], {}
    for i in range(rng.randint(1, 5)):
        name = f"n{i}"
        cpu, mem = rng.choice([2, 4, 8, 16]), rng.choice([2, 4, 8, 64]) * GI  # some bound by memory
        nodes.append(NodeInfo(name, allocatable={"cpu": cpu, "memory": mem, "pods": 110.0}))
        util[name] = rng.uniform(0, 0.6)
        if rng.random() < 0.5:
            bound.append(PodInfo(f"tenant-{i}", "ns", node=name, requests={"cpu": rng.uniform(0, cpu / 2), "pods": 1}))
    demands = []
    for j in range(rng.randint(1, 3)):
        req = {"cpu": rng.choice([0.5, 1, 1.5, 2, 3]), "memory": rng.choice([0.5, 1, 2, 4]) * GI, "pods": 1.0}
        placement = Placement(max_node_utilization=rng.choice([0.6, 0.7, 0.9]), hysteresis=0.1,
                              reserved_cpu=rng.choice(["0", "250m"]))  # fmt: skip
        demands.append(SandboxDemand(("ns", f"j{j}"), rng.randint(0, 8), 0, PodInfo("t", requests=req),
                                     placement, util, []))  # fmt: skip
    return nodes, bound, demands


@pytest.mark.parametrize("seed", range(300))
def test_the_packer_reaches_the_optimum(seed: int) -> None:
    nodes, bound, demands = instance(seed)
    plans = plan_harvest(demands, nodes, bound, NOW)
    kinds = []
    for d in demands:
        rooms = node_rooms(nodes, d.utilization, bound, d.placement, NOW)
        kinds.append((d.wanted, d.template.requests, {n: r.place for n, r in rooms.items()}))
    free = {n.name: dict(n.allocatable) for n in nodes}
    for p in bound:
        for k, v in p.requests.items():
            free[p.node or ""][k] -= v
    best, fewest = solve(kinds, free, {})
    placed = [node for plan in plans.values() for _, node in plan.create]
    assert (len(placed), len(set(placed))) == (best, fewest)
