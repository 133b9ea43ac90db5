"""Sandbox pods on idle CPU, on the real control plane with simulated CPU nodes of mixed sizes and a real
Prometheus serving per-node utilization from an exporter the test drives."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from rlop.api.names import HARVEST_PRIORITY_CLASS_NAME
from rlop.dev.cluster import DevCluster, NodeSpec
from rlop.dev.prometheus import DevPrometheus
from tests.conftest import Exporter, Kubectl, Operator, wait_for

pytestmark = pytest.mark.cluster

TAINT = {"key": "rlop.dev/harvest-test", "value": "true", "effect": "NoSchedule"}
TOLERATION = {"key": "rlop.dev/harvest-test", "operator": "Exists", "effect": "NoSchedule"}
SIZES = {"h-small": "8", "h-mid": "16", "h-big": "32"}


@pytest.fixture(scope="module")
def harvest_nodes(cluster: DevCluster, exporter: Exporter) -> Iterator[list[str]]:
    cluster.add_nodes([NodeSpec(n, cpu=c, labels={"harvest-test": "true"}, taints=(TAINT,)) for n, c in SIZES.items()])
    wait_for(lambda: all(cluster.get(f"/api/v1/nodes/{n}")["status"].get("conditions") for n in SIZES), 30)
    yield list(SIZES)
    for n in SIZES:
        exporter.set("test_node_utilization", 0.0, node=n)


def set_util(exporter: Exporter, prometheus: DevPrometheus, **util: float) -> None:
    """Set node utilizations and wait until Prometheus serves them."""
    want = {node.replace("_", "-"): value for node, value in util.items()}
    for node, value in want.items():
        exporter.set("test_node_utilization", value, node=node)

    def served() -> bool:
        got = {labels["node"]: v for labels, v in prometheus.query("test_node_utilization")}
        return all(got.get(n) == v for n, v in want.items())

    wait_for(served, 30, f"Prometheus to serve {want}")


def rljob(replicas: int, drain: int = 0) -> dict[str, Any]:
    tpl = {"spec": {"containers": [{"name": "t", "image": "img", "resources": {"requests": {"cpu": "100m"}}}]}}
    sandbox = {
        "spec": {
            "tolerations": [TOLERATION],
            "containers": [{"name": "s", "image": "img", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
        }
    }
    placement = {
        "strategy": "harvest-idle-cpu",
        "nodeSelector": {"harvest-test": "true"},
        "maxNodeUtilization": 0.7,
        "utilizationQuery": "max by (node) (test_node_utilization)",
        "drainSeconds": drain,
    }
    return {
        "apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": "hv"},
        "spec": {"pools": {
            "trainer": {"replicas": 1, "template": tpl},
            "rollout": {"replicas": 1, "template": tpl},
            "sandbox": {"replicas": replicas, "placement": placement, "template": sandbox},
        }},
    }  # fmt: skip


def sandbox_nodes(k: Kubectl) -> Counter[str]:
    pods = k.items("pods", "rlop.dev/pool=sandbox")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName")]
    return Counter(p["spec"]["nodeName"] for p in live)


def test_sandbox_pods_land_only_on_idle_nodes_hardened(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus, harvest_nodes: list[str]
) -> None:
    set_util(exporter, prometheus, h_small=0.1, h_mid=0.9, h_big=0.2)
    k.apply(rljob(6))
    placed = wait_for(lambda: sum((c := sandbox_nodes(k)).values()) == 6 and c, 60, "6 sandbox pods")
    assert "h-mid" not in placed, placed
    assert len(placed) <= 2  # packed, not spread
    pod = k.items("pods", "rlop.dev/pool=sandbox")[0]
    spec = pod["spec"]
    assert spec["priorityClassName"] == HARVEST_PRIORITY_CLASS_NAME and spec["priority"] == -10
    assert spec["automountServiceAccountToken"] is False
    assert not any(v.get("projected") for v in spec.get("volumes", []))  # no service-account token
    assert spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] is False
    policy = k.get("networkpolicy", "hv-sandbox-egress")
    assert policy["spec"]["policyTypes"] == ["Egress"] and not policy["spec"].get("egress")  # deny all egress
    status = k.get("rljob", "hv")["status"]
    assert status["pools"]["sandbox"]["replicas"] == "6/6"
    assert any(e["reason"] == "SandboxPlaced" for e in k.events("hv"))


def test_a_busy_node_loses_its_sandbox_pods_which_reappear_elsewhere(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus, harvest_nodes: list[str]
) -> None:
    set_util(exporter, prometheus, h_small=0.0, h_mid=0.9, h_big=0.9)
    k.apply(rljob(3))
    wait_for(lambda: sandbox_nodes(k) == Counter({"h-small": 3}), 60, "3 pods on h-small")
    set_util(exporter, prometheus, h_small=0.95, h_big=0.0)
    turned = time.monotonic()
    wait_for(lambda: "h-small" not in sandbox_nodes(k), 30, "h-small emptied")
    emptied = time.monotonic() - turned
    assert emptied < 2 * operator.interval + 6, f"took {emptied:.1f}s"  # two intervals + scrape and slack
    wait_for(lambda: sandbox_nodes(k) == Counter({"h-big": 3}), 30, "replaced on h-big")
    evictions = [e for e in k.events("hv") if e["reason"] == "SandboxEvicted" and "h-small" in e["message"]]
    assert len(evictions) == 3 and "node h-small is busy" in evictions[0]["message"]


def test_a_busy_node_drains_its_sandbox_pods_first_and_evicts_them_when_the_drain_is_over(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus, harvest_nodes: list[str]
) -> None:
    set_util(exporter, prometheus, h_small=0.0, h_mid=0.9, h_big=0.9)
    k.apply(rljob(3, drain=6))
    wait_for(lambda: sandbox_nodes(k) == Counter({"h-small": 3}), 60, "3 pods on h-small")
    set_util(exporter, prometheus, h_small=0.95, h_big=0.0)

    def marks() -> dict[str, str]:
        pods = k.items("pods", "rlop.dev/pool=sandbox")
        return {p["metadata"]["name"]: a["rlop.dev/drain"] for p in pods
                if "rlop.dev/drain" in (a := p["metadata"].get("annotations") or {})}  # fmt: skip

    marked = wait_for(lambda: len(m := marks()) == 3 and m, 30, "3 pods marked draining")
    marked_at = time.monotonic()
    # replaced at once, while the drained pods still run
    wait_for(lambda: sandbox_nodes(k) == Counter({"h-small": 3, "h-big": 3}), 30, "replacements on h-big")
    assert marks() == marked  # marked once: the drain does not restart
    assert k.get("rljob", "hv")["status"]["pools"]["sandbox"]["ready"] <= 3  # draining pods are not ready
    wait_for(lambda: "h-small" not in sandbox_nodes(k), 40, "the drained pods evicted")
    assert time.monotonic() - marked_at >= 5, "evicted before the drain was over"
    events = k.events("hv")
    draining = [e["message"] for e in events if e["reason"] == "SandboxDraining"]
    evicted = [e["message"] for e in events if e["reason"] == "SandboxEvicted"]
    assert len(draining) == 3 and all("node h-small is busy" in m and "for 6s" in m for m in draining), draining
    assert len(evicted) == 3 and all("drained since" in m and "h-small is busy" in m for m in evicted), evicted


def test_a_regular_pod_preempts_a_sandbox_pod(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus, harvest_nodes: list[str]
) -> None:
    set_util(exporter, prometheus, h_small=0.0, h_mid=0.9, h_big=0.9)
    k.apply(rljob(3))
    wait_for(lambda: sandbox_nodes(k) == Counter({"h-small": 3}), 60, "3 pods on h-small")
    regular = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "tenant"},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": "h-small"}, "tolerations": [TOLERATION],
                 "containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": "7"}}}]},
    }  # fmt: skip
    k.apply(regular)
    wait_for(lambda: (k.get("pod", "tenant") or {}).get("status", {}).get("phase") == "Running", 60, "tenant runs")
    assert sandbox_nodes(k).get("h-small", 0) <= 1  # 8 cores - 7 = 1 core left

    def capacity() -> dict[str, Any]:
        conds = k.get("rljob", "hv")["status"]["conditions"]
        return next((c for c in conds if c["type"] == "CapacityLimited" and c["status"] == "True"), {})

    cond = wait_for(capacity, 30, "CapacityLimited")
    assert "sandbox" in cond["message"] and "do not fit" in cond["message"]


def test_refused_sandbox_pods_are_synced_false_and_never_reported_placed(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus, harvest_nodes: list[str]
) -> None:
    """An unknown runtimeClassName: the API server refuses every pod; the job says so, between passes too."""
    set_util(exporter, prometheus, h_small=0.0, h_mid=0.0, h_big=0.0)
    job = rljob(2)
    job["spec"]["pools"]["sandbox"]["template"]["spec"]["runtimeClassName"] = "no-such-runtime"
    k.apply(job)

    def synced() -> dict[str, Any]:
        conds = (k.get("rljob", "hv") or {}).get("status", {}).get("conditions", [])
        return next((c for c in conds if c["type"] == "Synced"), {})

    cond = wait_for(lambda: synced().get("status") == "False" and synced(), 60, "Synced=False")
    assert "no-such-runtime" in cond["message"], cond
    for _ in range(10):  # it stays False: passes that write no sandbox pod do not flip it back
        time.sleep(0.5)
        assert synced()["status"] == "False"
    events = k.events("hv")
    assert not any(e["reason"] == "SandboxPlaced" for e in events), events
    refused = sorted(e["message"].split(":")[0] for e in events if e["reason"] == "ApplyFailed")
    assert refused == ["Pod hv-sandbox-0", "Pod hv-sandbox-1"]  # one event per refused pod, not one per pass


def test_an_eviction_a_disruption_budget_refuses_is_reported_and_retried(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus, harvest_nodes: list[str]
) -> None:
    """A PodDisruptionBudget says not now: no SandboxEvicted event (nothing was evicted), Synced=False names
    the pod; once the budget goes, the pods leave the busy node on a later pass. (No other node is idle:
    replacements placed first would satisfy the budget, and then the eviction is rightly allowed.)"""
    set_util(exporter, prometheus, h_small=0.0, h_mid=0.9, h_big=0.9)
    k.apply(rljob(2))
    wait_for(lambda: sandbox_nodes(k) == Counter({"h-small": 2}), 60, "2 pods on h-small")
    k.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep"},
             "spec": {"minAvailable": 2, "selector": {"matchLabels": {"rlop.dev/pool": "sandbox"}}}})  # fmt: skip
    wait_for(lambda: (k.get("pdb", "keep") or {}).get("status", {}).get("expectedPods") == 2, 30, "PDB observed")
    set_util(exporter, prometheus, h_small=0.95)  # and no idle node to replace them on first

    def synced() -> dict[str, Any]:
        conds = (k.get("rljob", "hv") or {}).get("status", {}).get("conditions", [])
        return next((c for c in conds if c["type"] == "Synced"), {})

    cond = wait_for(lambda: synced().get("status") == "False" and synced(), 30, "Synced=False")
    assert "eviction of pod hv-sandbox-" in cond["message"], cond
    assert sandbox_nodes(k) == Counter({"h-small": 2})
    assert not any(e["reason"] == "SandboxEvicted" for e in k.events("hv"))
    k("delete", "pdb", "keep")
    wait_for(lambda: "h-small" not in sandbox_nodes(k), 30, "evicted once the budget is gone")
    assert any(e["reason"] == "SandboxEvicted" for e in k.events("hv"))
