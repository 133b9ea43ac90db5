"""Trainer gangs placed by kube-scheduler's own gang scheduling (v1.36, alpha: a PodGroup with
`schedulingPolicy.gang.minCount`, pods naming it in `spec.schedulingGroup.podGroupName`;
k8s.io/api scheduling/v1alpha2/types.go, pkg/scheduler/framework/plugins/gangscheduling) on a real
kube-scheduler with the gates on: rlop detects the API, creates a PodGroup per gang and stops checking the fit
itself; kube-scheduler never binds part of a gang. With --gang-scheduler=rlop, today's path on the same cluster."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rlop.dev.cluster import DevCluster
from rlop.dev.operator_process import OperatorProcess
from tests.conftest import Kubectl, wait_for

from .conftest import operator

pytestmark = pytest.mark.cluster


def rljob(trainers: int, gpus: int) -> dict[str, Any]:
    def tpl(name: str, **res: Any) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": name, "image": "img", "resources": res}]}}

    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": "ng"}, "spec": {"pools": {
        "trainer": {"replicas": trainers, "template": tpl("trainer", limits={"nvidia.com/gpu": gpus})},
        "rollout": {"replicas": 1, "template": tpl("rollout", requests={"cpu": "100m"})}}}}  # fmt: skip


def gang(k: Kubectl) -> dict[str, Any]:
    conds = ((k.get("rljob", "ng") or {}).get("status") or {}).get("conditions", [])
    return next((c for c in conds if c["type"] == "GangScheduled"), {})


def trainers(k: Kubectl) -> list[dict[str, Any]]:
    return [p for p in k.items("pods", "rlop.dev/pool=trainer") if not p["metadata"].get("deletionTimestamp")]


@pytest.fixture
def auto(cluster: DevCluster, tmp_path: Path) -> Iterator[OperatorProcess]:
    op = operator(cluster, tmp_path)
    try:
        yield op
    finally:
        op.stop()


def test_the_operator_detects_the_podgroup_api_and_says_so(auto: OperatorProcess) -> None:
    assert auto.metric("rlop_gang_scheduler", 'scheduler="kube-scheduler"') == 1
    assert (
        "Trainer gangs are placed by kube-scheduler (scheduling.k8s.io/v1alpha2 PodGroups)" in auto.log_path.read_text()
    )


def test_kube_scheduler_binds_a_gang_whole_or_not_at_all(k: Kubectl, auto: OperatorProcess) -> None:
    """3 ranks of 6 GPUs on two 8-GPU nodes: two would fit, the gang does not. rlop releases all three (it
    no longer simulates the fit); kube-scheduler binds none and says why. Two ranks then fit: both bound."""
    k.apply(rljob(trainers=3, gpus=6))
    group = wait_for(lambda: k.get("podgroup.scheduling.k8s.io", "ng-trainer-0-3"), 60, "the gang's PodGroup")
    assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 3}}
    wait_for(lambda: len(trainers(k)) == 3 and not any(p["spec"].get("schedulingGates") for p in trainers(k)), 60,
             "all 3 ranks released to kube-scheduler")  # fmt: skip
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "ng-trainer-0-3"} for p in trainers(k))
    cond = wait_for(lambda: gang(k).get("reason") == "Unschedulable" and gang(k), 60, "GangScheduled Unschedulable")
    assert "kube-scheduler's gang (PodGroup ng-trainer-0-3)" in cond["message"], cond
    for _ in range(8):  # several scheduling attempts: never part of the gang bound
        assert not any(p["spec"].get("nodeName") for p in trainers(k)), [p["spec"].get("nodeName") for p in trainers(k)]
        time.sleep(0.5)
    k("patch", "rljob", "ng", "--type=merge", "-p", '{"spec":{"pools":{"trainer":{"replicas":2}}}}')
    wait_for(lambda: len(trainers(k)) == 2 and all(p["spec"].get("nodeName") for p in trainers(k)), 90,
             "the 2-rank gang bound")  # fmt: skip
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "ng-trainer-0-2"} for p in trainers(k))
    wait_for(lambda: gang(k).get("status") == "True", 30, "GangScheduled True")
    assert "by kube-scheduler's gang" in gang(k)["message"]
    wait_for(lambda: k.get("podgroup.scheduling.k8s.io", "ng-trainer-0-3") is None, 60, "the old gang's PodGroup gone")


def test_with_gang_scheduler_rlop_the_gate_path_stays(k: Kubectl, cluster: DevCluster, tmp_path: Path) -> None:
    op = operator(cluster, tmp_path, "--gang-scheduler=rlop")
    try:
        assert op.metric("rlop_gang_scheduler", 'scheduler="rlop"') == 1
        k.apply(rljob(trainers=3, gpus=6))
        cond = wait_for(lambda: gang(k).get("reason") == "InsufficientCapacity" and gang(k), 60, "rlop's fit check")
        assert "2 of 3 gated trainer pods fit" in cond["message"], cond
        assert all(p["spec"].get("schedulingGates") and "schedulingGroup" not in p["spec"] for p in trainers(k))
        assert not k.items("podgroups.scheduling.k8s.io")
    finally:
        op.stop()
