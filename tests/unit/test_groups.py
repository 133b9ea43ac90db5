"""Multi-node replicas (issue 32), pure: rendering, the gang per group, group restarts, leaders as the only
replicas, GPU budget per group. A tiny cluster applies each plan (creates, releases, deletes) so decisions are
checked over several passes, as the operator would make them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from rlop.api import reasons as R
from rlop.api.models import RLJob, ServingPool
from rlop.plan.autoscale import Reading
from rlop.plan.groups import plan_groups
from rlop.plan.job import JobObservation, plan_job
from rlop.plan.observed import Exit, PodInfo, pod_info
from rlop.plan.render import render
from rlop.plan.scaling import gpus_per_replica
from rlop.plan.serving import Probe, ServingObservation

from .builders import container, job, node

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
WEIGHTS = {"volume": {"hostPath": {"path": "/w"}}}
NODES = [node(f"g{i}", cpu=64, gpus=8) for i in range(3)]


def grouped(size: int = 2, replicas: int = 1, gpus: int = 8, **extra: Any) -> RLJob:
    rollout = {
        "replicas": replicas,
        "nodesPerReplica": size,
        "template": {"spec": {"containers": [container("engine", limits={"nvidia.com/gpu": gpus})]}},
        **extra,
    }
    return job(rollout=rollout)  # fmt: skip


def spec(j: RLJob) -> ServingPool:
    return j.spec.pools.rollout


class Cluster:
    """Pods as the API server and scheduler would leave them after each plan: created gated, released onto
    the planned nodes (Running and Ready), deleted pods terminating until `settle()`."""

    def __init__(self, j: RLJob) -> None:
        self.job, self.pods = j, {}  # type: dict[str, PodInfo]

    def apply(self, create: list[dict[str, Any]], release: list[str], placement: dict[str, str],
              delete: list[tuple[str, str]]) -> None:  # fmt: skip
        for m in create:
            assert m["metadata"]["name"] not in self.pods, f"{m['metadata']['name']} created twice"
            self.pods[m["metadata"]["name"]] = pod_info(m)
        for name in release:
            ip = f"10.0.{len(self.pods)}.{sum(map(ord, name)) % 250}"
            self.pods[name] = replace(self.pods[name], gated=False, node=placement[name], phase="Running",
                                      ready=True, containers_ready=True, ip=ip)  # fmt: skip
        for name, _ in delete:
            self.pods[name] = replace(self.pods[name], deleting=True, ready=False)

    def settle(self) -> None:
        self.pods = {n: p for n, p in self.pods.items() if not p.deleting}

    def step(self, want: int, bound: list[PodInfo] | None = None) -> Any:
        live = list(self.pods.values())
        gp = plan_groups(self.job, "rollout", spec(self.job), want, live, NODES, [*live, *(bound or [])])
        self.apply(gp.create, gp.release, gp.placement, gp.delete)
        return gp

    def group(self, g: int) -> list[PodInfo]:
        return sorted((p for p in self.pods.values() if p.group == g), key=lambda p: p.rank or 0)


# ---------------------------------------------------------------- API and rendering


def test_nodes_per_replica_1_renders_exactly_what_a_pool_without_it_renders() -> None:
    plain = job(rollout={"replicas": 2, "template": {"spec": {"containers": [container()]}}})
    one = job(rollout={"replicas": 2, "nodesPerReplica": 1, "template": {"spec": {"containers": [container()]}}})
    assert render(plain, {"trainer": 2, "rollout": 2}) == render(one, {"trainer": 2, "rollout": 2})


def test_a_grouped_pool_has_no_deployment_a_leaders_only_service_and_a_ranks_service() -> None:
    j = grouped(weights=WEIGHTS, router={"type": "sglang-router"})
    out = {(m["kind"], m["metadata"]["name"]): m for m in render(j, {"trainer": 2, "rollout": 1})}
    assert ("Deployment", "j-rollout") not in out
    for name in ("j-rollout", "j-rollout-members"):  # sglang#9568: a worker rank answers 404
        assert out["Service", name]["spec"]["selector"]["rlop.dev/rank"] == "0"
    ranks = out["Service", "j-rollout-ranks"]["spec"]
    assert ranks["clusterIP"] == "None" and ranks["publishNotReadyAddresses"] is True
    assert "rlop.dev/rank" not in ranks["selector"] and ranks["ports"][0]["port"] == 20000


def test_group_pods_carry_their_rank_the_leaders_address_the_gate_and_one_per_node() -> None:
    worker = {"spec": {"containers": [container("engine", limits={"nvidia.com/gpu": 8})], "nodeSelector": {"w": "1"}}}
    j = grouped(size=3, weights=WEIGHTS, workerTemplate=worker)
    gp = plan_groups(j, "rollout", spec(j), 1, [], NODES, [])
    pods = {m["metadata"]["name"]: m for m in gp.create}
    assert sorted(pods) == ["j-rollout-0-0", "j-rollout-0-1", "j-rollout-0-2"]
    for name, m in pods.items():
        rank = int(name[-1])
        env = {e["name"]: e.get("value") for e in m["spec"]["containers"][0]["env"]}
        assert env["RLOP_GROUP_RANK"] == str(rank) and env["RLOP_GROUP_SIZE"] == "3" and env["RLOP_GROUP_INDEX"] == "0"
        assert env["RLOP_GROUP_LEADER_ADDRESS"] == "j-rollout-0-0.j-rollout-ranks.ns.svc:20000"
        assert m["spec"]["hostname"] == name and m["spec"]["subdomain"] == "j-rollout-ranks"
        assert m["spec"]["schedulingGates"] == [{"name": "rlop.dev/gang"}]
        apart = m["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert apart[-1]["topologyKey"] == "kubernetes.io/hostname"
        assert apart[-1]["labelSelector"]["matchLabels"]["rlop.dev/group"] == "0"
        gates = [g["conditionType"] for g in m["spec"].get("readinessGates", [])]
        assert gates == (["rlop.dev/weights-current"] if rank == 0 else [])  # only the leader is probed
        assert ("nodeSelector" in m["spec"]) == (rank > 0)  # ranks 1.. from workerTemplate
        assert m["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_the_gpu_budget_counts_every_pod_of_a_group() -> None:
    worker = {"spec": {"containers": [container("engine", limits={"nvidia.com/gpu": 4})]}}
    assert gpus_per_replica(spec(grouped(size=4, gpus=8, workerTemplate=worker))) == 8 + 3 * 4
    assert gpus_per_replica(spec(grouped(size=2, gpus=8))) == 16


# ---------------------------------------------------------------- the gang per group


def test_a_group_is_created_gated_then_released_whole() -> None:
    c = Cluster(grouped())
    first = c.step(1)
    assert len(first.create) == 2 and not first.release  # created this pass, seen gated the next
    second = c.step(1)
    assert sorted(second.release) == ["j-rollout-0-0", "j-rollout-0-1"]
    assert len(set(second.placement.values())) == 2  # one rank per node
    assert [e.reason for e in second.events] == [R.GROUP_RELEASED] and second.ready == 0
    assert c.step(1).ready == 1


def test_never_half_a_group_under_capacity_pressure() -> None:
    """Room for one rank only (one node has its 8 GPUs free): nothing of the group is released."""
    busy = [PodInfo(name=f"other-{n.name}", node=n.name, requests={"nvidia.com/gpu": 8}) for n in NODES[1:]]
    c = Cluster(grouped())
    c.step(1, busy)
    gp = c.step(1, busy)
    assert not gp.release and all(p.gated and p.node is None for p in c.pods.values())
    assert any("1 of 2 gated pods fit; short of" in w or "not on distinct nodes" in w for w in gp.waiting), gp.waiting


def test_two_groups_with_room_for_one_release_exactly_one() -> None:
    c = Cluster(grouped())  # 3 nodes x 8 GPUs, 2 ranks x 8 GPUs per group: one group fits, not two
    c.step(2)
    gp = c.step(2)
    assert len(gp.release) == 2 and {p.group for p in c.pods.values() if not p.gated} == {0}
    assert any("group 1" in w and "none started" in w for w in gp.waiting), gp.waiting


def test_a_group_waits_while_another_is_released_but_not_bound() -> None:
    c = Cluster(grouped(gpus=2))
    c.step(2)
    pods = list(c.pods.values())
    pods = [replace(p, gated=False) if p.group == 0 else p for p in pods]  # released, not bound yet
    gp = plan_groups(c.job, "rollout", spec(c.job), 2, pods, NODES, pods)
    assert not gp.release and any("waiting for the scheduler to bind j-rollout-0-" in w for w in gp.waiting)


def test_capacity_the_trainer_takes_in_the_same_pass_is_not_given_to_a_group() -> None:
    c = Cluster(grouped())
    c.step(1)
    live = list(c.pods.values())
    reserved = {"g0": {"nvidia.com/gpu": 8.0}, "g1": {"nvidia.com/gpu": 8.0}}
    gp = plan_groups(c.job, "rollout", spec(c.job), 1, live, NODES, live, reserved=reserved)
    assert not gp.release


# ---------------------------------------------------------------- group failure = group restart


def _running(c: Cluster, want: int = 1) -> None:
    for _ in range(3):
        c.step(want)
    assert all(not p.gated for p in c.pods.values())


@pytest.mark.parametrize(
    ("case", "hurt"),
    [
        ("worker killed -9", lambda p: replace(p, exits=(Exit("engine", 137, "Error"),))),
        ("worker exited 0", lambda p: replace(p, exits=(Exit("engine", 0, "Completed"),))),
        ("worker OOMKilled", lambda p: replace(p, exits=(Exit("engine", 137, "OOMKilled"),))),
        ("worker pod deleted", lambda p: replace(p, deleting=True)),
        ("worker pod failed", lambda p: replace(p, phase="Failed")),
        ("worker's node gone", lambda p: replace(p, node="gone")),
        ("worker pod gone", None),
    ],
)
def test_any_rank_failing_recreates_the_whole_group(case: str, hurt: Any) -> None:
    c = Cluster(grouped())
    _running(c)
    worker = "j-rollout-0-1"
    if hurt is None:
        del c.pods[worker]
    else:
        c.pods[worker] = hurt(c.pods[worker])
    gp = c.step(1)
    assert "j-rollout-0-0" in {name for name, _ in gp.delete}, case
    assert [e.reason for e in gp.events] == [R.GROUP_RESTART] and "lost rank 1" in gp.events[0].message
    assert not gp.create  # not while its old pods terminate
    assert c.step(1).events == []  # said once
    c.settle()
    again = c.step(1)
    assert sorted(m["metadata"]["name"] for m in again.create) == ["j-rollout-0-0", "j-rollout-0-1"]
    assert sorted(c.step(1).release) == ["j-rollout-0-0", "j-rollout-0-1"]


@pytest.mark.parametrize(
    ("leader_at", "worker_at", "cause"),
    [
        ("2026-01-01T00:00:05Z", "2026-01-01T00:00:04Z", "lost rank 1"),  # the worker died; the leader lost it
        ("2026-01-01T00:00:04Z", "2026-01-01T00:00:05Z", "lost rank 0"),
        ("2026-01-01T00:00:04Z", "2026-01-01T00:00:04Z", "lost rank 0"),  # same second: rank order
    ],
)
def test_the_rank_that_exited_first_is_named_as_the_cause(leader_at: str, worker_at: str, cause: str) -> None:
    c = Cluster(grouped())
    _running(c)
    leader, worker = "j-rollout-0-0", "j-rollout-0-1"
    c.pods[leader] = replace(c.pods[leader], exits=(Exit("engine", 1, "Error", "", leader_at),))
    c.pods[worker] = replace(c.pods[worker], exits=(Exit("engine", 137, "Error", "", worker_at),))
    gp = c.step(1)
    assert [e.reason for e in gp.events] == [R.GROUP_RESTART] and cause in gp.events[0].message


def test_a_gated_group_missing_a_pod_is_completed_not_restarted() -> None:
    c = Cluster(grouped())
    c.step(1)
    del c.pods["j-rollout-0-1"]
    gp = c.step(1)
    assert [m["metadata"]["name"] for m in gp.create] == ["j-rollout-0-1"] and not gp.delete


def test_a_changed_template_recreates_the_running_groups_one_at_a_time() -> None:
    c = Cluster(grouped(gpus=1))
    _running(c, 2)
    c.job = grouped(gpus=1, template={"spec": {"containers": [container("engine2", limits={"nvidia.com/gpu": 1})]}})
    gp = c.step(2)
    assert {c.pods[n].group for n, _ in gp.delete} == {0} and [e.reason for e in gp.events] == [R.GROUP_UPDATE]
    assert not c.step(2).delete  # group 1 waits for group 0 to be back
    c.settle()
    for _ in range(3):
        gp = c.step(2)
    assert {c.pods[n].group for n, _ in gp.delete} == {1}


def test_without_drains_scale_down_removes_whole_groups_not_ready_first() -> None:
    c = Cluster(grouped(gpus=1))
    _running(c, 3)
    c.pods["j-rollout-0-1"] = replace(c.pods["j-rollout-0-1"], ready=False)
    gp = c.step(2)
    assert sorted(n for n, _ in gp.delete) == ["j-rollout-0-0", "j-rollout-0-1"]


# ---------------------------------------------------------------- leaders are the replicas


def _job_obs(j: RLJob, pods: list[PodInfo], probes: dict[str, Probe], workers: dict[str, str]) -> JobObservation:
    seen = ServingObservation(probes, workers, "http://router", policy=Reading(5.0))
    return JobObservation(j, pods=pods, nodes=NODES, bound_pods=pods, serving={"rollout": seen})


def test_only_leaders_are_probed_loaded_and_routed_and_a_failed_group_leaves_the_router_at_once() -> None:
    j = grouped(gpus=1, replicas=2, weights=WEIGHTS, router={"type": "sglang-router"})
    c = Cluster(j)
    _running(c, 2)
    pods = [replace(p, weights_current="True") if p.rank == 0 else p for p in c.pods.values()]
    leaders = {p.name: p for p in pods if p.rank == 0}
    probes = {name: Probe("4") for name in leaders}
    plan = plan_job(_job_obs(j, pods, probes, {}), NOW)
    sp = plan.serving["rollout"]
    assert {u.pod for u in sp.updates} == set(leaders) and {pod for pod, _ in sp.register} == set(leaders)
    assert plan.status.pools["rollout"].ready == 2 and plan.status.pools["rollout"].nodes_per_replica == 2
    # a worker of group 1 dies: its leader is deregistered in the same pass, its whole group deleted
    pods = [replace(p, exits=(Exit("engine", 137),)) if p.name == "j-rollout-1-1" else p for p in pods]
    workers = {f"http://{p.ip}:8000": f"id-{p.name}" for p in leaders.values()}
    plan = plan_job(_job_obs(j, pods, probes, workers), NOW)
    assert [url for _, url, _ in plan.serving["rollout"].deregister] == [f"http://{leaders['j-rollout-1-0'].ip}:8000"]
    assert {n for n, _ in plan.delete_pods} == {"j-rollout-1-0", "j-rollout-1-1"}
    assert R.GROUP_RESTART in [e.reason for e in plan.events]


def test_scale_down_drains_a_leader_then_deletes_its_whole_group() -> None:
    j = grouped(gpus=1, replicas=1, weights=WEIGHTS, router={"type": "sglang-router"})
    c = Cluster(j)
    _running(c, 2)
    pods = [replace(p, weights_current="True") if p.rank == 0 else p for p in c.pods.values()]
    probes = {p.name: Probe("5", load=3 if p.group == 0 else 0) for p in pods if p.rank == 0}
    plan = plan_job(_job_obs(j, pods, probes, {}), NOW)
    assert plan.serving["rollout"].drain == ["j-rollout-1-0"]  # the least busy leader's group
    pods = [replace(p, draining="2026-12-07T11:59:00Z") if p.name == "j-rollout-1-0" else p for p in pods]
    plan = plan_job(_job_obs(j, pods, probes, {}), NOW)
    assert {n for n, _ in plan.delete_pods} == {"j-rollout-1-0", "j-rollout-1-1"}


# ---------------------------------------------------------------- what `rlop plan` and `kubectl rlop top` show


def test_rlop_plan_and_top_show_groups_and_their_pods() -> None:
    from rlop.top import rows
    from rlop.whatif import what_if

    doc = grouped(size=4, gpus=1).model_dump(mode="json", exclude_none=True)
    doc["spec"]["pools"]["rollout"] = {
        **{k: v for k, v in doc["spec"]["pools"]["rollout"].items() if k != "replicas"},
        "autoscale": {"minReplicas": 1, "maxReplicas": 4,
                      "metrics": [{"query": "q", "target": {"type": "AverageValue", "value": 10}}]},
    }  # fmt: skip
    out = what_if(doc, {"rollout": [30]}, None, NOW)
    assert out["pools"]["rollout"] == {
        "current": 1,
        "desired": 3,
        "nodesPerReplica": 4,
        "pods": 12,
        "decision": "DesiredWithinRange",
        "reason": "metric 30 vs target 10 per replica: wants 3, within range",
        "metric": 30.0,
    }  # fmt: skip  (AverageValue divides by groups, not pods)
    table = rows([{"metadata": {"name": "j", "namespace": "ns"},
                   "status": {"pools": {"rollout": {"ready": 1, "desired": 3, "nodesPerReplica": 4}}}}])  # fmt: skip
    assert table[0][:5] == ("ns/j", "rollout", "1", "3", "4")
