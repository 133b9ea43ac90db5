"""Idle-CPU harvesting: capacity, packing and eviction (table-driven and property-based)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlop.api.models import Placement
from rlop.plan.harvest import HarvestPlan, SandboxDemand, node_rooms, plan_harvest
from rlop.plan.observed import NodeInfo, PodInfo

from .builders import node, pod

PLACEMENT = Placement(max_node_utilization=0.7, hysteresis=0.1, reserved_cpu="0", drain_seconds=0)
DRAINED = PLACEMENT.model_copy(update={"drain_seconds": 30})
REQ = {"cpu": 1.0, "memory": 2**30, "pods": 1.0}
TEMPLATE = PodInfo(name="t", requests=REQ)


def sandbox(name: str, on: str, created: str = "2026-01-01T00:00:00Z", job: str = "j") -> PodInfo:
    return PodInfo(name=name, node=on, requests=REQ, harvest=True, pool="sandbox", job=job, created=created)


NOW = datetime(2026, 12, 1, tzinfo=UTC)


def plan(wanted: int, nodes: list[NodeInfo], util: dict[str, float] | None, bound: list[PodInfo],
         own: list[PodInfo], placement: Placement = PLACEMENT, floor: int = 0) -> HarvestPlan:  # fmt: skip
    demand = SandboxDemand(("default", "j"), wanted, floor, TEMPLATE, placement, util, own)
    return plan_harvest([demand], nodes, bound, NOW)[("default", "j")]


@pytest.mark.parametrize(
    ("util", "others_cpu", "own", "place", "ceiling"),
    [
        (0.0, 0, 0, 9.6, 11.2),  # 16 cores: (0.7 - 0.1) * 16
        (0.5, 0, 0, 1.6, 3.2),  # the node's own load leaves little
        (0.1, 14, 0, 2.0, 9.6),  # requests of other pods bound it first
        (0.25, 0, 4, 9.6, 11.2),  # 4 cores of the utilization are our own pods
        (0.9, 0, 0, -4.8, -3.2),  # busy: nothing to harvest
    ],
)
def test_node_room(util: float, others_cpu: float, own: int, place: float, ceiling: float) -> None:
    pods = [pod("other", node="n", cpu=others_cpu)] if others_cpu else []
    pods += [sandbox(f"s{i}", "n") for i in range(own)]
    room = node_rooms([node("n", cpu=16)], {"n": util}, pods, PLACEMENT, NOW)["n"]
    assert room.place == pytest.approx(place)
    assert room.ceiling == pytest.approx(ceiling)
    assert room.harvest == own


def test_reserve_and_selector() -> None:
    nodes = [node("a", cpu=16, labels={"pool": "cpu"}), node("b", cpu=16)]
    p = Placement(node_selector={"pool": "cpu"}, reserved_cpu="500m", hysteresis=0.1, max_node_utilization=0.7)
    rooms = node_rooms(nodes, {"a": 0.0, "b": 0.0}, [], p, NOW)
    assert set(rooms) == {"a"} and rooms["a"].place == pytest.approx(9.1)


def test_lands_only_on_idle_nodes_and_packs_before_spreading() -> None:
    nodes = [node("idle-a", cpu=8), node("idle-b", cpu=8), node("busy", cpu=8)]
    out = plan(6, nodes, {"idle-a": 0.0, "idle-b": 0.1, "busy": 0.8}, [], [])
    where = [n for _, n in out.create]
    assert "busy" not in where
    assert len(where) == 6 and out.placed == 6
    assert where.count(where[0]) == 4  # 0.6 x 8 = 4.8 -> 4 pods on the first node before the next


def test_a_node_without_utilization_data_is_not_harvestable() -> None:
    out = plan(3, [node("a", cpu=16), node("b", cpu=16)], {"b": 0.9}, [], [])
    assert out.create == [] and out.placed == 0 and "0 of 3" in out.message


@pytest.mark.parametrize("util", [None, {}])
def test_no_utilization_data_at_all_places_the_floor_by_requests_alone(util: dict[str, float] | None) -> None:
    """As kube-scheduler would: by free requests (minus the reserve), never more than the floor."""
    busy = pod("tenant", node="a", cpu=7)
    out = plan(5, [node("a", cpu=8), node("b", cpu=2)], util, [busy], [], floor=3)
    assert sorted(n for _, n in out.create) == ["a", "b", "b"]  # a has 1 core free, b 2
    assert out.no_data and out.placed == 3 and "CPU utilization unknown" in out.message
    assert out.evict == []


def test_short_capacity_places_what_fits_and_says_how_many_are_missing() -> None:
    out = plan(10, [node("a", cpu=8)], {"a": 0.0}, [], [])
    assert out.placed == 4 and "6 do not fit" in out.message


def test_a_busy_node_loses_just_enough_pods_youngest_first() -> None:
    own = [sandbox(f"j-sandbox-{i}", "a", created=f"2026-01-01T00:00:0{i}Z") for i in range(4)]
    # 16 cores, utilization 0.75 of which 4 cores are ours: others use 8 -> place = 9.6 - 8 = 1.6, ceiling 3.2
    out = plan(4, [node("a", cpu=16), node("b", cpu=16)], {"a": 0.75, "b": 0.0}, own, own)
    assert [p for p, _ in out.evict] == ["j-sandbox-3", "j-sandbox-2", "j-sandbox-1"]
    why = "CPU utilization 0.75 (0.75 with its sandbox pods at their requests) > 0.7"
    assert f"node a is busy: {why}" in out.evict[0][1]
    assert [n for _, n in out.create] == ["b", "b", "b"]  # replaced on the idle node
    assert {p for p, _ in out.create}.isdisjoint({p.name for p in own})


def test_hysteresis_keeps_a_node_between_thresholds_stable() -> None:
    own = [sandbox(f"j-sandbox-{i}", "a") for i in range(2)]
    out = plan(2, [node("a", cpu=10)], {"a": 0.65}, own, own)  # 6.5 cores: above place (6), below ceiling (7)
    assert out.evict == [] and out.create == []


def test_missing_data_never_evicts() -> None:
    own = [sandbox(f"j-sandbox-{i}", "a") for i in range(2)]
    out = plan(2, [node("a", cpu=10)], {}, own, own)
    assert out.evict == [] and out.delete == [] and out.placed == 2


def test_scale_down_empties_the_least_used_node_first() -> None:
    own = [sandbox("j-sandbox-0", "a"), sandbox("j-sandbox-1", "a"), sandbox("j-sandbox-2", "b")]
    out = plan(2, [node("a"), node("b")], {"a": 0.0, "b": 0.0}, own, own)
    assert out.delete == [("j-sandbox-2", "scaled down")]


def test_with_a_drain_pods_are_marked_first_and_replaced_at_once() -> None:
    """Busy node and scale-down alike: marked draining (not evicted, not deleted), no longer counted as
    placed, their replacements created in the same pass."""
    own = [sandbox(f"j-sandbox-{i}", "a", created=f"2026-01-01T00:00:0{i}Z") for i in range(4)]
    out = plan(4, [node("a", cpu=16), node("b", cpu=16)], {"a": 0.75, "b": 0.0}, own, own, DRAINED)
    assert [p for p, _ in out.drain] == ["j-sandbox-3", "j-sandbox-2", "j-sandbox-1"]
    assert out.evict == [] and out.delete == [] and out.placed == 4
    assert [n for _, n in out.create] == ["b", "b", "b"]
    down = plan(1, [node("a"), node("b")], {"a": 0.0, "b": 0.0}, own[:2], own[:2], DRAINED)
    assert down.drain == [("j-sandbox-1", "scaled down")] and down.delete == [] and down.placed == 1


def test_draining_pods_are_not_harvest_and_not_chosen_again() -> None:
    since = "2026-11-30T23:59:50Z"  # 10 s before NOW: still draining
    own = [replace(sandbox(f"j-sandbox-{i}", "a"), draining=since if i < 2 else "") for i in range(4)]
    out = plan(2, [node("a", cpu=16)], {"a": 0.0}, own, own, DRAINED)
    assert out.drain == out.evict == out.delete == out.create == [] and out.placed == 2
    room = node_rooms([node("a", cpu=16)], {"a": 0.0}, own, DRAINED, NOW)["a"]
    assert room.harvest == 2


def test_a_drain_begun_under_a_longer_drain_seconds_ends_when_it_is_lowered_to_zero() -> None:
    own = [replace(sandbox("j-sandbox-0", "a"), draining="2026-11-30T23:59:59Z", drain_reason="scaled down")]
    out = plan(0, [node("a")], {"a": 0.0}, own, own, PLACEMENT)
    assert out.evict == [("j-sandbox-0", "drained since 2026-11-30T23:59:59Z: scaled down")]


def test_pods_on_lost_nodes_are_replaced() -> None:
    own = [sandbox("j-sandbox-0", "gone"), sandbox("j-sandbox-1", "a")]
    out = plan(2, [node("a"), replace(node("b"), ready=False, schedulable=False)], {"a": 0.0, "b": 0.0}, own, own)
    assert out.delete == [("j-sandbox-0", "node gone is gone or not Ready")]
    assert out.create == [("j-sandbox-2", "a")]


def test_other_jobs_harvest_pods_count_against_the_node() -> None:
    theirs = [sandbox(f"k-sandbox-{i}", "a", job="k") for i in range(4)]
    out = plan(3, [node("a", cpu=8)], {"a": 0.5}, theirs, [])  # 4 of their cores explain the 0.5
    assert len(out.create) == 0  # their 4 cores explain the load; place 0.6 x 8 = 4.8, 4 taken: 0.8 < 1 core


# ------------------------------------------------------------------ properties

nodes_st = st.lists(st.tuples(st.integers(1, 64), st.floats(0, 1), st.integers(0, 32)), min_size=1, max_size=30)


@settings(max_examples=150, deadline=None)
@given(nodes_st, st.integers(0, 200), st.sampled_from([0.5, 1.0, 2.0]))
def test_packing_never_overfills_never_duplicates_and_beats_first_fit(spec, wanted, cpu) -> None:  # type: ignore[no-untyped-def]
    nodes = [node(f"n{i}", cpu=c) for i, (c, _, _) in enumerate(spec)]
    util = {f"n{i}": u for i, (_, u, _) in enumerate(spec)}
    bound = [pod(f"o{i}", node=f"n{i}", cpu=min(r, c)) for i, (c, _, r) in enumerate(spec)]
    req = {"cpu": cpu, "memory": 2**28, "pods": 1.0}
    demand = SandboxDemand(("default", "j"), wanted, 0, PodInfo(name="t", requests=req), PLACEMENT, util, [])
    out = plan_harvest([demand], nodes, bound, NOW)[("default", "j")]
    names = [p for p, _ in out.create]
    assert len(names) == len(set(names))  # no pod placed twice
    rooms = node_rooms(nodes, util, bound, PLACEMENT, NOW)
    for n, room in rooms.items():
        added = sum(cpu for _, where in out.create if where == n)
        assert added <= max(room.room, 0) + 1e-6  # never past maxNodeUtilization - hysteresis or requests
        assert added <= room.free["cpu"] + 1e-6
    assert len(out.create) >= len(first_fit(wanted, req, rooms))


def first_fit(count: int, req: dict[str, float], rooms: dict) -> list[str]:  # type: ignore[type-arg]
    """Plain first fit over nodes in name order: the baseline the packer must never lose to."""
    room = {n: r.room for n, r in rooms.items()}
    free = {n: dict(r.free) for n, r in rooms.items()}
    out = []
    for _ in range(count):
        for n in sorted(rooms):
            if room[n] + 1e-9 >= req["cpu"] and all(free[n].get(k, 0) + 1e-9 >= v for k, v in req.items()):
                out.append(n)
                room[n] -= req["cpu"]
                for k, v in req.items():
                    free[n][k] = free[n].get(k, 0) - v
                break
    return out


def test_a_same_named_job_in_another_namespace_is_not_ours() -> None:
    """Its pods have our pods' names: they are neither counted as ours, scaled down, nor evicted."""
    nodes = [node("a", cpu=16), node("b", cpu=16)]
    ours = [sandbox(f"j-sandbox-{i}", "a") for i in range(3)]
    theirs = [replace(p, namespace="other", node="b") for p in ours]
    out = plan(3, nodes, {"a": 0.0, "b": 0.0}, ours + theirs, ours)
    assert out.create == [] and out.delete == [] and out.evict == [] and out.placed == 3
    busy = plan(3, nodes, {"a": 0.95, "b": 0.0}, ours + theirs, ours)
    assert sorted(pod for pod, _ in busy.evict) == [p.name for p in ours]
    assert [n for _, n in busy.create] == ["b"] * 3
