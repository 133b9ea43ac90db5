"""A trainer gang that loses a rank on the simulated cluster (kwok): its node is lost or its pod deleted,
and the whole gang restarts together; past maxRestarts the job is Failed and every pool scaled to 0."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from rlop.dev.cluster import DevCluster, NodeSpec
from tests.conftest import Kubectl, Operator, wait_for

pytestmark = pytest.mark.cluster
LABEL = "trainer-failure-test"
TAINT = {"key": LABEL, "value": "true", "effect": "NoSchedule"}
NODES = ("rank-node-0", "rank-node-1", "rank-node-2")  # one rank fills a node: a spare for the restart


@pytest.fixture
def nodes(cluster: DevCluster) -> Iterator[None]:
    specs = [NodeSpec(n, cpu="8", gpus=8, labels={LABEL: "true"}, taints=(TAINT,)) for n in NODES]
    cluster.add_nodes(specs)
    try:
        yield
    finally:
        cluster.add_nodes(specs)  # the node a test deleted comes back for the next


def rljob(name: str, max_restarts: int = 3) -> dict[str, Any]:
    trainer_spec = {"nodeSelector": {LABEL: "true"}, "tolerations": [{**TAINT, "operator": "Equal"}],
                    "containers": [{"name": "trainer", "image": "rlop-workload:dev",
                                    "resources": {"limits": {"nvidia.com/gpu": 8}}}]}  # fmt: skip
    rollout = {
        "containers": [{"name": "rollout", "image": "rlop-workload:dev", "resources": {"requests": {"cpu": "100m"}}}]
    }
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": name},
            "spec": {"pools": {
                "trainer": {"replicas": 2, "failurePolicy": {"maxRestarts": max_restarts, "backoffSeconds": 1},
                            "template": {"spec": trainer_spec}},
                "rollout": {"replicas": 1, "template": {"spec": rollout}}}}}  # fmt: skip


def trainer(k: Kubectl, name: str) -> dict[str, Any]:
    return dict(((k.get("rljob", name) or {}).get("status") or {}).get("trainer") or {})


def ranks(k: Kubectl, name: str) -> dict[int, dict[str, Any]]:
    """The gang's live pods by rank, once all are placed and ungated."""
    pods = [p for p in k.items("pods", f"rlop.dev/job={name},rlop.dev/pool=trainer")
            if not p["metadata"].get("deletionTimestamp")]  # fmt: skip
    if len(pods) != 2 or any(p["spec"].get("schedulingGates") or not p["spec"].get("nodeName") for p in pods):
        return {}
    return {int(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"]): p for p in pods}


def test_a_lost_node_restarts_the_whole_gang_on_the_others(
    k: Kubectl, operator: Operator, cluster: DevCluster, nodes: None
) -> None:
    k.apply(rljob("lost"))
    before = wait_for(lambda: ranks(k, "lost"), 90, "the gang placed and released")
    wait_for(lambda: trainer(k, "lost").get("started"), 30, "the release recorded")
    lost = before[1]["spec"]["nodeName"]
    cluster.kubectl("delete", "node", lost, "--wait=false")
    wait_for(lambda: trainer(k, "lost").get("restarts") == 1, 60, "one gang restart")
    failure = trainer(k, "lost")["lastFailure"]
    assert (failure["reason"], failure["rank"]) == ("NodeLost", 1) and lost in failure["message"]
    after = wait_for(lambda: (r := ranks(k, "lost")) and all(p["metadata"]["uid"] != before[i]["metadata"]["uid"]
                                                               for i, p in r.items()) and r, 180,
                     "both ranks recreated, placed and released again")  # fmt: skip
    assert lost not in {p["spec"]["nodeName"] for p in after.values()}
    env = {e["name"]: e.get("value") for e in after[0]["spec"]["containers"][0]["env"]}
    assert env["RLOP_RESTART_COUNT"] == "1"
    wait_for(lambda: trainer(k, "lost").get("started"), 30, "the new gang's release recorded")
    said = {
        r: sum(e.get("count") or 1 for e in k.events("lost") if e["reason"] == r)
        for r in ("RankFailed", "GangReleased")
    }
    assert said == {"RankFailed": 1, "GangReleased": 2}, said


def test_past_max_restarts_the_job_fails_and_its_pools_scale_to_zero(
    k: Kubectl, operator: Operator, nodes: None
) -> None:
    k.apply(rljob("doomed", max_restarts=1))
    for restarts in (1, 2):
        pods = wait_for(lambda: ranks(k, "doomed"), 120, "the gang placed and released")
        wait_for(lambda: trainer(k, "doomed").get("started"), 30, "the release recorded")
        k("delete", "pod", pods[0]["metadata"]["name"], "--wait=false")  # a rank's pod deleted: a failure
        if restarts == 1:
            wait_for(lambda: trainer(k, "doomed").get("restarts") == 1, 60, "one gang restart")
    job = wait_for(lambda: (j := k.get("rljob", "doomed")) and j["status"]["phase"] == "Failed" and j, 60, "Failed")
    assert job["status"]["trainer"]["restarts"] == 1
    assert job["status"]["trainer"]["lastFailure"]["reason"] == "PodDeleted"
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "MaxRestartsExceeded")
    wait_for(lambda: k.get("statefulset", "doomed-trainer")["spec"]["replicas"] == 0, 30, "the trainer at 0")
    wait_for(lambda: k.get("deployment", "doomed-rollout")["spec"]["replicas"] == 0, 30, "the rollout at 0")
    assert "MaxRestartsExceeded" in {e["reason"] for e in k.events("doomed") if e["type"] == "Warning"}
    assert "Failed" in k("get", "rljob", "doomed").stdout
