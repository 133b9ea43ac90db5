"""Gang start of trainers: table-driven."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rlop.plan.capacity import feasible, free_capacity, place_all, tolerates
from rlop.plan.gang import plan_gang
from rlop.plan.observed import ChildInfo, Taint

from .builders import node, pod

STS = ChildInfo(kind="StatefulSet", name="j-trainer", update_revision="r1")
GPU_NODES = [node("g0", cpu=64, gpus=8), node("g1", cpu=64, gpus=8)]


def trainers(n: int, gpus: float = 4, gated: bool = True, **extra) -> list:  # type: ignore[no-untyped-def]
    return [pod(f"t-{i}", gpus=gpus, gated=gated, pool="trainer", revision="r1", **extra) for i in range(n)]


@pytest.mark.parametrize(
    ("case", "replicas", "pods", "bound", "reason", "released"),
    [
        ("all fit", 4, trainers(4), [], "Released", 4),
        ("one short", 5, trainers(5), [], "InsufficientCapacity", 0),
        ("not all created yet", 4, trainers(3), [], "Creating", 0),
        ("busy node", 4, trainers(4), [pod("other", node="g0", gpus=8)], "InsufficientCapacity", 0),
        ("preemptible pods do not count", 4, trainers(4),
         [pod("sandbox", node="g0", gpus=8, priority=-10)], "Released", 4),
        ("whole gpus only: fragmentation", 3, trainers(3, gpus=6), [], "InsufficientCapacity", 0),
        ("already scheduled", 2,
         [replace(p, gated=False, node="g0") for p in trainers(2)], [], "Scheduled", 0),
        ("ungated but unplaced", 2, [replace(p, gated=False) for p in trainers(2)], [], "Unschedulable", 0),
        ("suspended", 0, [], [], "Suspended", 0),
    ],
)  # fmt: skip
def test_gang_decisions(case: str, replicas: int, pods: list, bound: list, reason: str, released: int) -> None:  # type: ignore[type-arg]
    d = plan_gang(replicas, pods, STS, GPU_NODES, bound)
    assert (d.reason, len(d.release)) == (reason, released), d.message
    assert d.scheduled == (reason == "Scheduled")


def test_shortfall_is_named() -> None:
    d = plan_gang(5, trainers(5), STS, GPU_NODES, [])
    assert "short of nvidia.com/gpu 4" in d.message


def test_a_recreated_trainer_rejoins_a_running_gang_when_it_fits() -> None:
    running = [replace(p, gated=False, node="g0") for p in trainers(1)]
    recreated = [replace(trainers(2)[1])]
    d = plan_gang(2, running + recreated, STS, GPU_NODES, running)
    assert d.release == ["t-1"]


def test_template_change_restarts_the_whole_gang() -> None:
    pods = [replace(p, gated=False, node="g0") for p in trainers(2)]
    pods[1] = replace(pods[1], revision="r0")
    d = plan_gang(2, pods, STS, GPU_NODES, pods)
    assert d.reason == "Restarting" and d.restart == ["t-0", "t-1"]


def test_no_restart_while_the_statefulset_status_lags() -> None:
    pods = [replace(p, gated=False, node="g0", revision="r0") for p in trainers(2)]
    d = plan_gang(2, pods, replace(STS, up_to_date=False), GPU_NODES, pods)
    assert not d.restart


def test_terminating_pods_are_waited_for() -> None:
    d = plan_gang(2, [*trainers(2), pod("t-old", deleting=True, pool="trainer")], STS, GPU_NODES, [])
    assert d.reason == "Terminating"


@pytest.mark.parametrize(
    ("tolerations", "taint", "ok"),
    [
        ([], Taint("k", "v"), False),
        ([{"key": "k", "operator": "Equal", "value": "v"}], Taint("k", "v"), True),
        ([{"key": "k", "operator": "Equal", "value": "w"}], Taint("k", "v"), False),
        ([{"key": "k", "operator": "Exists"}], Taint("k", "v"), True),
        ([{"operator": "Exists"}], Taint("k", "v"), True),
        ([{"key": "k", "operator": "Exists", "effect": "NoExecute"}], Taint("k", "v", "NoSchedule"), False),
    ],
)
def test_tolerations(tolerations: list, taint: Taint, ok: bool) -> None:  # type: ignore[type-arg]
    assert tolerates(tolerations, taint) is ok


def test_feasibility_filters() -> None:
    p = pod("p", node_selector={"pool": "gpu"})
    assert not feasible(p, node("n"))
    assert feasible(p, node("n", labels={"pool": "gpu"}))
    assert not feasible(p, node("n", labels={"pool": "gpu"}, schedulable=False))
    assert not feasible(pod("q"), node("n", taints=(Taint("dedicated", "x"),)))
    assert feasible(pod("q"), node("n", taints=(Taint("soft", "x", "PreferNoSchedule"),)))


def test_best_fit_packs_before_spreading() -> None:
    nodes = [node("a", cpu=8), node("b", cpu=4)]
    free = free_capacity(nodes, [])
    placed, unplaced = place_all([pod("x", cpu=3), pod("y", cpu=1)], nodes, free)
    assert placed == {"x": "b", "y": "b"} and not unplaced


def test_ranks_beyond_the_world_size_are_never_released() -> None:
    """Someone scaled the StatefulSet to 5 by hand: the gang is still the 2 ranks the spec asks for."""
    pods = [replace(p, name=f"j-trainer-{i}", index=i) for i, p in enumerate(trainers(5))]
    d = plan_gang(2, pods, STS, GPU_NODES, [])
    assert (d.reason, list(d.release)) == ("Released", ["j-trainer-0", "j-trainer-1"])


# ---------------------------------------------------------------- kube-scheduler's native gangs (PodGroups)

GROUP = ChildInfo(kind="PodGroup", name="j-trainer-0-5")


def test_with_a_podgroup_rlop_releases_a_complete_gang_and_leaves_the_fit_to_kube_scheduler() -> None:
    """Five 4-GPU ranks on 16 GPUs: rlop's own check would hold them; kube-scheduler's gang decides instead
    (it binds all of them or none), so rlop only waits for every rank to exist."""
    d = plan_gang(5, trainers(5), STS, GPU_NODES, [], podgroup="j-trainer-0-5", group=GROUP)
    assert (d.reason, len(d.release)) == ("Released", 5) and "PodGroup j-trainer-0-5" in d.message
    assert plan_gang(5, trainers(4), STS, GPU_NODES, [], podgroup="j-trainer-0-5", group=GROUP).reason == "Creating"
    waiting = plan_gang(5, trainers(5), STS, GPU_NODES, [], podgroup="j-trainer-0-5", group=None)
    assert (waiting.reason, waiting.release) == ("Creating", ())
    held = plan_gang(5, trainers(5), STS, GPU_NODES, [], hold="backing off 8s", podgroup="j-trainer-0-5", group=GROUP)
    assert held.reason == "BackingOff" and not held.release  # the restart backoff is still rlop's


def test_an_unplaced_native_gang_reports_what_kube_scheduler_says() -> None:
    said = replace(
        GROUP, scheduled=("False", "Unschedulable", "0/6 nodes are available: 2 Insufficient nvidia.com/gpu")
    )
    pending = [replace(p, gated=False) for p in trainers(5)]
    d = plan_gang(5, pending, STS, GPU_NODES, [], podgroup="j-trainer-0-5", group=said)
    assert d.reason == "Unschedulable" and "Insufficient nvidia.com/gpu" in d.message and "PodGroup" in d.message


def test_the_native_trainer_renders_a_podgroup_per_gang_and_points_its_pods_at_it() -> None:
    from rlop.plan.render import render

    from .builders import job

    out = {(m["kind"], m["metadata"]["name"]): m for m in render(job(), {"trainer": 2, "rollout": 1}, 3, native=True)}
    group = out["PodGroup", "j-trainer-3-2"]
    assert group["apiVersion"] == "scheduling.k8s.io/v1alpha2" and group["spec"] == {
        "schedulingPolicy": {"gang": {"minCount": 2}}}  # fmt: skip
    assert group["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    spec = out["StatefulSet", "j-trainer"]["spec"]["template"]["spec"]
    assert spec["schedulingGroup"] == {"podGroupName": "j-trainer-3-2"}
    plain = {(m["kind"], m["metadata"]["name"]): m for m in render(job(), {"trainer": 2, "rollout": 1}, 3)}
    assert not any(kind == "PodGroup" for kind, _ in plain)
    assert "schedulingGroup" not in plain["StatefulSet", "j-trainer"]["spec"]["template"]["spec"]
