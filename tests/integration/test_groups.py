"""Multi-node replicas (nodesPerReplica) on the real local control plane (kube-scheduler, kwok nodes, a real
Prometheus): each group a gang, one rank per node, never half a group bound under capacity pressure, a lost rank
recreating its whole group, the GPU budget counting every pod of a group."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import Exporter, Kubectl, Operator, wait_for

pytestmark = pytest.mark.cluster

QUERY = 'sum(test_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'


def tpl(name: str, gpus: int = 0) -> dict[str, Any]:
    res = {"limits": {"nvidia.com/gpu": gpus}} if gpus else {"requests": {"cpu": "100m"}}
    return {"spec": {"containers": [{"name": name, "image": "img", "resources": res}]}}


def rljob(rollout: dict[str, Any], budget: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"pools": {"trainer": {"replicas": 1, "template": tpl("trainer")}, "rollout": rollout}}
    if budget is not None:
        spec["budget"] = {"gpus": budget}
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": "mn"}, "spec": spec}


def groups(k: Kubectl) -> dict[int, list[dict[str, Any]]]:
    out: dict[int, list[dict[str, Any]]] = {}
    for p in k.items("pods", "rlop.dev/job=mn,rlop.dev/pool=rollout"):
        if not p["metadata"].get("deletionTimestamp"):
            out.setdefault(int(p["metadata"]["labels"]["rlop.dev/group"]), []).append(p)
    return out


def running(pods: list[dict[str, Any]]) -> bool:
    return all(p["status"].get("phase") == "Running" and p["spec"].get("nodeName") for p in pods)


def pool_status(k: Kubectl) -> dict[str, Any]:
    return dict((((k.get("rljob", "mn") or {}).get("status") or {}).get("pools") or {}).get("rollout") or {})


def ready_condition(k: Kubectl) -> dict[str, Any]:
    conds = ((k.get("rljob", "mn") or {}).get("status") or {}).get("conditions", [])
    return next((c for c in conds if c["type"] == "Ready"), {})


def blocker(gpus: int, node: str) -> dict[str, Any]:
    """Someone else's pod holding GPUs of one node."""
    container = {"name": "c", "image": "img", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "blocker"},
            "spec": {"nodeName": node, "containers": [container]}}  # fmt: skip


def test_groups_are_gangs_one_rank_per_node_never_half_bound_and_released_once_they_fit(
    k: Kubectl, operator: Operator
) -> None:
    """Two GPU nodes of 8; another tenant holds 6 GPUs of gpu-0. Group 0 (2 ranks x 2 GPUs) fits, one rank
    per node; group 1 would fit one rank (on gpu-1) but not both apart: neither is bound, both stay gated,
    and the Ready condition says why. Once the other tenant leaves, group 1 starts whole."""
    k.apply(blocker(6, "gpu-0"))
    k.apply(rljob({"replicas": 2, "nodesPerReplica": 2, "template": tpl("engine", gpus=2)}))
    wait_for(lambda: 0 in groups(k) and len(groups(k)[0]) == 2 and running(groups(k)[0]), 60, "group 0 running")
    g0 = groups(k)[0]
    assert {p["spec"]["nodeName"] for p in g0} == {"gpu-0", "gpu-1"}  # one rank per node
    cond = wait_for(lambda: "group 1" in ready_condition(k).get("message", "") and ready_condition(k), 30,
                    "the Ready condition to name group 1")  # fmt: skip
    assert "1 of 2 gated pods fit" in cond["message"] and cond["status"] == "False"
    for _ in range(6):  # it holds: several passes, never half a group bound
        g1 = groups(k)[1]
        assert len(g1) == 2 and all(p["spec"].get("schedulingGates") and not p["spec"].get("nodeName") for p in g1)
        time.sleep(0.5)
    assert pool_status(k) | {"reason": None} == {**pool_status(k), "desired": 2, "ready": 1, "replicas": "1/2",
                                                 "nodesPerReplica": 2, "reason": None}  # fmt: skip
    k("delete", "pod", "blocker", "--grace-period=0", "--force")
    wait_for(lambda: len(groups(k).get(1, [])) == 2 and running(groups(k)[1]), 60, "group 1 released whole")
    assert {p["spec"]["nodeName"] for p in groups(k)[1]} == {"gpu-0", "gpu-1"}
    wait_for(lambda: pool_status(k).get("replicas") == "2/2", 30, "2/2 groups ready")
    leader = next(p for p in groups(k)[1] if p["metadata"]["labels"]["rlop.dev/rank"] == "0")
    env = {e["name"]: e.get("value") for e in leader["spec"]["containers"][0]["env"]}
    assert env["RLOP_GROUP_LEADER_ADDRESS"] == f"mn-rollout-1-0.mn-rollout-ranks.{k.ns}.svc:20000"
    released = [e for e in k.events("mn") if e["reason"] == "GroupReleased"]
    assert len(released) == 2 and all("2 pods together" in e["message"] for e in released)
    assert k.get("deployment", "mn-rollout") is None
    assert "2/2" in k("get", "rljob", "mn").stdout  # the ROLLOUT column counts groups


def test_a_deleted_rank_recreates_its_whole_group_and_only_its_group(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob({"replicas": 2, "nodesPerReplica": 2, "template": tpl("engine", gpus=1)}))
    wait_for(lambda: pool_status(k).get("replicas") == "2/2", 60, "2/2 groups")
    before = {g: {p["metadata"]["uid"] for p in ps} for g, ps in groups(k).items()}
    k("delete", "pod", "mn-rollout-1-1", "--wait=false")
    wait_for(lambda: any(e["reason"] == "GroupRestart" for e in k.events("mn")), 30, "a GroupRestart event")

    def recreated() -> bool:
        now = groups(k)
        return len(now.get(1, [])) == 2 and running(now[1]) and not {p["metadata"]["uid"] for p in now[1]} & before[1]

    wait_for(recreated, 60, "group 1 recreated whole (both pods new)")
    assert {p["metadata"]["uid"] for p in groups(k)[0]} == before[0]  # group 0 untouched
    event = next(e for e in k.events("mn") if e["reason"] == "GroupRestart")
    assert "rollout group 1 lost rank 1" in event["message"] and event["type"] == "Warning"
    wait_for(lambda: pool_status(k).get("replicas") == "2/2", 30, "2/2 groups again")


def test_the_gpu_budget_counts_every_pod_of_a_group(k: Kubectl, operator: Operator, exporter: Exporter) -> None:
    """A budget of 10 GPUs, groups of 2 ranks x 2 GPUs: 2 groups (8 GPUs), not the 5 the metric wants (pods
    counted as replicas would allow 5)."""
    exporter.set("test_backlog", 500, namespace=k.ns, rljob="mn", pool="rollout")
    autoscale = {"minReplicas": 1, "maxReplicas": 8,
                 "metrics": [{"query": QUERY, "target": {"type": "AverageValue", "value": 10}}]}  # fmt: skip
    k.apply(rljob({"autoscale": autoscale, "nodesPerReplica": 2, "template": tpl("engine", gpus=2)}, budget=10))
    wait_for(lambda: pool_status(k).get("desired") == 2, 60, "2 groups desired")
    time.sleep(3)
    assert pool_status(k)["desired"] == 2 and pool_status(k)["decision"] == "GPUBudget"
    wait_for(lambda: len(groups(k)) == 2 and all(len(ps) == 2 for ps in groups(k).values()), 30, "2 groups of 2")
