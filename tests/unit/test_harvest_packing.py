"""The joint packer against an exact integer program (HiGHS) on generated small instances: several jobs,
memory-bound nodes, per-job utilization limits. It must reach the optimum pod count, then the fewest nodes."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime

import pytest

from rlop.api.models import Placement
from rlop.dev.exact_packing import solve
from rlop.plan import harvest as harvest_module
from rlop.plan.harvest import (
    EXACT_STATES,
    SandboxDemand,
    _exact,
    _fits,
    _frontier,
    _Kind,
    node_rooms,
    pack,
    plan_harvest,
)
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


def frontier_by_definition(kinds: list[_Kind], node: str, free: dict[str, float]) -> list[tuple[int, ...]]:
    """Every count vector the node can take, then those no other one is above."""
    ranges = [range(k.count + 1) if node in k.caps else range(1) for k in kinds]
    ok = [x for x in itertools.product(*ranges) if _fits(kinds, x, node, free, 0.0)]
    return sorted(x for x in ok if not any(y != x and all(a >= b for a, b in zip(y, x, strict=True)) for y in ok))


@pytest.mark.parametrize("seed", range(200))
def test_a_nodes_frontier_is_its_maximal_feasible_pod_counts(seed: int) -> None:
    rng = random.Random(seed)
    kinds = [_Kind(("ns", f"j{i}"), rng.randint(1, 4), {"cpu": rng.choice([0.5, 1, 2]), "pods": 1.0},
                   {"n": rng.choice([2.0, 4.0, 8.0])} if rng.random() < 0.8 else {})
             for i in range(rng.randint(1, 4))]  # fmt: skip
    free = {"cpu": rng.choice([1.0, 3.0, 6.0, 10.0]), "pods": rng.choice([1.0, 2.0, 4.0, 20.0])}
    assert _frontier(kinds, "n", free, 0.0) == frontier_by_definition(kinds, "n", free)


def test_many_jobs_on_many_nearly_full_nodes_are_packed_greedily_not_searched(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """9 jobs with 2 pending pods each, 250 nodes each with room for a different few pods: the exact search
    would try 3^8 counts on every node (5 million fits, minutes of planning, seen in bench/scale.py)."""
    nodes = [f"cpu-{i}" for i in range(250)]
    kinds = [_Kind(("ns", f"j{i}"), 2, {"cpu": 0.01, "pods": 1.0}, dict.fromkeys(nodes, 25.0)) for i in range(9)]
    free = {n: {"cpu": 30.0, "pods": float(i % 7)} for i, n in enumerate(nodes)}
    harvest = {n: 0.01 * (i % 3) for i, n in enumerate(nodes)}
    fits = []
    monkeypatch.setattr(harvest_module, "_fits", lambda *a: fits.append(1) or _fits(*a))
    assert _exact(kinds, free, harvest) is None
    assert len(fits) < 5 * EXACT_STATES
    placed = [node for nodes_of_job in pack(kinds, free, harvest).values() for node in nodes_of_job]
    assert len(placed) == 18
