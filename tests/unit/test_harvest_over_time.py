"""Harvesting pass after pass (rlop.dev.harvest_sim): a delayed utilization metric, terminating pods,
several jobs per pass. Evictions are what an omniscient planner would need, and no node flaps."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from rlop.api.models import Placement
from rlop.dev.harvest_sim import SimJob, SimNode, simulate
from rlop.plan.harvest import SandboxDemand, plan_harvest
from rlop.plan.observed import NodeInfo, PodInfo

P = Placement(reserved_cpu="0")  # maxNodeUtilization 0.7, hysteresis 0.1, a 60 s window scraped every 15 s
AT_ONCE = P.model_copy(update={"drain_seconds": 0})
REQ = {"cpu": 1.0, "pods": 1.0}
NOW = datetime(2026, 12, 1, tzinfo=UTC)
JOBS = [SimJob(f"j{i}", wanted=10) for i in range(3)]


def test_new_pods_do_not_overfill_a_node_while_the_metric_catches_up() -> None:
    """8 cores: place 0.6 x 8 = 4.8 -> 4 one-core pods, from four jobs at once, and nothing evicted."""
    r = simulate([SimNode("a", 8, lambda t: 0.0)], [SimJob(f"j{i}", 5) for i in range(4)], P, 1200)
    assert r.most_pods == {"a": 4} and r.evictions == 0 and r.flaps == 0


@pytest.mark.parametrize("placement", [P, AT_ONCE], ids=["drained", "at-once"])
def test_a_load_step_evicts_exactly_what_is_needed_and_nothing_comes_back(placement: Placement) -> None:
    """16 cores, others 2 -> 8 at t=600: place 7.6 -> 1.6, so 7 pods become 1: six evictions."""
    nodes = [SimNode("a", 16, lambda t: 2.0 if t < 600 else 8.0)]
    real, oracle = simulate(nodes, JOBS, placement, 1800), simulate(nodes, JOBS, placement, 1800, oracle=True)
    assert real.evictions == oracle.evictions == 6
    assert real.placements == 7 and real.flaps == 0


def test_steps_on_several_nodes_cost_no_more_evictions_than_needed() -> None:
    def load(base: float, high: float, at: float):  # type: ignore[no-untyped-def]
        return lambda t: high if at <= t < at + 900 else base

    nodes = [SimNode("a", 16, load(1, 9, 300)), SimNode("b", 8, load(0, 4, 900)), SimNode("c", 32, load(4, 4, 0))]
    real, oracle = simulate(nodes, JOBS, P, 3600), simulate(nodes, JOBS, P, 3600, oracle=True)
    assert real.evictions <= oracle.evictions
    assert real.flaps <= oracle.flaps


def _busy(placement: Placement) -> tuple[NodeInfo, list[PodInfo], SandboxDemand]:
    """16 cores at 0.75, 4 of them our one-core pods."""
    node = NodeInfo("a", allocatable={"cpu": 16.0, "memory": 64 * 2.0**30, "pods": 110.0})
    own = [PodInfo(f"j-sandbox-{i}", node="a", requests=REQ, harvest=True, pool="sandbox", job="j",
                   created=f"2026-01-01T00:00:{i:02d}Z") for i in range(4)]  # fmt: skip
    return node, own, SandboxDemand(("default", "j"), 4, 0, PodInfo("t", requests=REQ), placement, {"a": 0.75}, own)


def test_terminating_pods_are_not_evicted_again() -> None:
    node, own, demand = _busy(AT_ONCE)
    first = plan_harvest([demand], [node], own, NOW)[("default", "j")]
    assert len(first.evict) == 3 and first.drain == []  # others use 12 - 4 = 8: place 1.6, so one pod stays
    gone = {name for name, _ in first.evict}
    after = [replace(p, deleting=p.name in gone) for p in own]
    again = plan_harvest([replace(demand, own=after)], [node], after, NOW)[("default", "j")]
    assert again.evict == []


def test_draining_pods_are_marked_once_and_evicted_when_the_drain_is_over() -> None:
    node, own, demand = _busy(P)
    first = plan_harvest([demand], [node], own, NOW)[("default", "j")]
    assert first.evict == [] and len(first.drain) == 3 and "node a is busy" in first.drain[0][1]
    marked = {name for name, _ in first.drain}
    since = NOW.isoformat().replace("+00:00", "Z")
    after = [replace(p, draining=since, drain_reason="node a is busy") if p.name in marked else p for p in own]
    for seconds, evicted in ((0, set()), (29, set()), (30, marked)):
        later = NOW + timedelta(seconds=seconds)
        out = plan_harvest([replace(demand, own=after)], [node], after, later)[("default", "j")]
        assert out.drain == [] and {name for name, _ in out.evict} == evicted, seconds
    assert f"drained since {since}: node a is busy" in out.evict[0][1]
