"""Per-pool autoscaling against the real control plane and a real Prometheus scraping a real exporter."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rlop.dev.prometheus import DevPrometheus
from tests.conftest import Exporter, Kubectl, Operator, wait_for

pytestmark = pytest.mark.cluster

QUERY = 'sum(test_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'


def tpl(name: str, gpus: int = 0) -> dict[str, Any]:
    res = {"limits": {"nvidia.com/gpu": gpus}} if gpus else {"requests": {"cpu": "100m"}}
    return {"spec": {"containers": [{"name": name, "image": "img", "resources": res}]}}


def autoscale(
    max_r: int = 8, min_r: int = 1, target: float = 10, query: str = QUERY, **behavior: Any
) -> dict[str, Any]:
    return {
        "minReplicas": min_r, "maxReplicas": max_r,
        "metrics": [{"query": query, "target": {"type": "AverageValue", "value": target}}],
        "behavior": behavior or None,
    }  # fmt: skip


def rljob(name: str = "rl", budget: int | None = None, **pools: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"pools": {"trainer": {"replicas": 1, "template": tpl("trainer")}, **pools}}
    if budget is not None:
        spec["budget"] = {"gpus": budget}
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": name}, "spec": spec}


def replicas(k: Kubectl, pool: str, job: str = "rl") -> int:
    dep = k.get("deployment", f"{job}-{pool}")
    return int(dep["spec"]["replicas"]) if dep else -1


def condition(k: Kubectl, type_: str, job: str = "rl") -> dict[str, Any]:
    conds = ((k.get("rljob", job) or {}).get("status") or {}).get("conditions", [])
    return next((c for c in conds if c["type"] == type_), {})


def timeline(k: Kubectl, pool: str, seconds: float) -> list[tuple[float, float, int]]:
    """(before, after, replicas) samples: the count was read between `before` and `after`."""
    out, end = [], time.monotonic() + seconds
    while (before := time.monotonic()) < end:
        count = replicas(k, pool)
        out.append((before, time.monotonic(), count))
        time.sleep(0.25)
    return out


def test_backlog_scales_up_at_the_policy_rate_and_down_only_after_the_window(
    k: Kubectl, operator: Operator, exporter: Exporter
) -> None:
    up = {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 2, "periodSeconds": 4}]}
    down = {"stabilizationWindowSeconds": 12, "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}]}
    exporter.set("test_backlog", 0, namespace=k.ns, rljob="rl", pool="rollout")
    k.apply(rljob(rollout={"template": tpl("rollout"), "autoscale": autoscale(scaleUp=up, scaleDown=down)}))
    wait_for(lambda: condition(k, "MetricsAvailable").get("status") == "True", 30, "metrics available")
    assert replicas(k, "rollout") == 1

    exporter.set("test_backlog", 100, namespace=k.ns, rljob="rl", pool="rollout")  # wants 10, max 8
    seen = timeline(k, "rollout", 20)
    assert seen[-1][2] == 8, seen
    for since, _, r1 in seen:  # never more than 2 pods added within one 4 s period (1 s for write latency)
        later = [r for _, until, r in seen if since < until < since + 3]
        assert all(r - r1 <= 2 for r in later), (r1, later, seen)
    reasons = [e["reason"] for e in k.events("rl")]
    assert reasons.count("ScaledUp") >= 3
    status = k.get("rljob", "rl")["status"]["pools"]["rollout"]
    assert status["desired"] == 8 and status["lastMetric"] >= 80 and "wants" in status["reason"]

    exporter.set("test_backlog", 0, namespace=k.ns, rljob="rl", pool="rollout")
    dropped = time.monotonic()
    wait_for(lambda: replicas(k, "rollout") < 8, 40, "scale-down")
    held = time.monotonic() - dropped
    assert held >= 10, f"scaled down {held:.1f}s after the drop, inside the 12 s window"
    wait_for(lambda: replicas(k, "rollout") == 1, 20, "down to minReplicas")


def test_prometheus_down_holds_replicas_and_says_so(
    k: Kubectl, operator: Operator, exporter: Exporter, prometheus: DevPrometheus
) -> None:
    exporter.set("test_backlog", 40, namespace=k.ns, rljob="rl", pool="rollout")
    down = {"stabilizationWindowSeconds": 0}
    k.apply(rljob(rollout={"template": tpl("rollout"), "autoscale": autoscale(scaleDown=down)}))
    wait_for(lambda: replicas(k, "rollout") == 4, 40, "4 replicas")
    prometheus.stop()
    try:
        exporter.set("test_backlog", 0, namespace=k.ns, rljob="rl", pool="rollout")
        cond = wait_for(lambda: condition(k, "MetricsAvailable").get("status") == "False"
                        and condition(k, "MetricsAvailable"), 30, "MetricsAvailable=False")  # fmt: skip
        assert cond["reason"] == "PrometheusUnreachable", cond
        for _ in range(12):  # a minute blind: hold, never scale down
            time.sleep(5)
            assert replicas(k, "rollout") == 4
        assert any(e["reason"] == "PrometheusUnreachable" for e in k.events("rl"))
    finally:
        prometheus.start()
    wait_for(lambda: condition(k, "MetricsAvailable").get("status") == "True", 60, "metrics back")
    wait_for(lambda: replicas(k, "rollout") == 1, 60, "scale-down once the data says so")


def test_gpu_budget_is_split_by_load(k: Kubectl, operator: Operator, exporter: Exporter) -> None:
    exporter.set("test_backlog", 300, namespace=k.ns, rljob="rl", pool="rollout")  # wants 30 -> 4 (max)
    exporter.set("test_backlog", 20, namespace=k.ns, rljob="rl", pool="reward")  # wants 2
    k.apply(rljob(
        budget=4,
        rollout={"template": tpl("rollout", gpus=1), "autoscale": autoscale(max_r=4)},
        reward={"template": tpl("reward", gpus=1), "autoscale": autoscale(max_r=4)},
    ))  # fmt: skip
    cond = wait_for(lambda: condition(k, "CapacityLimited").get("status") == "True"
                    and condition(k, "CapacityLimited"), 60, "CapacityLimited")  # fmt: skip
    wait_for(lambda: (replicas(k, "rollout"), replicas(k, "reward")) == (3, 1), 30, "3 + 1 GPUs")
    assert "rollout" in cond["message"] and "GPU budget 4" in cond["message"]
    time.sleep(3)
    assert (replicas(k, "rollout"), replicas(k, "reward")) == (3, 1)  # stable, within budget


def test_an_operator_restart_mid_window_honours_the_window(k: Kubectl, operator: Operator, exporter: Exporter) -> None:
    down = {"stabilizationWindowSeconds": 20, "policies": [{"type": "Percent", "value": 100, "periodSeconds": 1}]}
    exporter.set("test_backlog", 40, namespace=k.ns, rljob="rl", pool="rollout")
    k.apply(rljob(rollout={"template": tpl("rollout"), "autoscale": autoscale(scaleDown=down)}))
    wait_for(lambda: replicas(k, "rollout") == 4, 40, "4 replicas")
    time.sleep(2)
    exporter.set("test_backlog", 0, namespace=k.ns, rljob="rl", pool="rollout")
    dropped = time.monotonic()
    time.sleep(6)
    operator.stop(kill=True)  # kill -9: only what is in status survives
    operator.start()
    wait_for(lambda: replicas(k, "rollout") < 4, 60, "scale-down after the window")
    held = time.monotonic() - dropped
    assert held >= 18, f"scaled down {held:.1f}s after the drop: the 20 s window was forgotten"
    assert held <= 40, f"scaled down {held:.1f}s after the drop: far later than the window"


def test_a_broken_query_marks_its_pool_and_leaves_the_others_alone(
    k: Kubectl, operator: Operator, exporter: Exporter
) -> None:
    exporter.set("test_backlog", 30, namespace=k.ns, rljob="rl", pool="rollout")
    k.apply(rljob(
        rollout={"template": tpl("rollout"), "autoscale": autoscale()},
        reward={"template": tpl("reward"), "autoscale": autoscale(min_r=2, query="sum(rate(test_backlog[1m]")},
    ))  # fmt: skip
    wait_for(lambda: replicas(k, "rollout") == 3, 40, "rollout scales on its own metric")
    cond = wait_for(lambda: condition(k, "MetricsAvailable").get("status") == "False"
                    and condition(k, "MetricsAvailable"), 30, "MetricsAvailable=False")  # fmt: skip
    assert cond["reason"] == "MetricsMissing"
    assert cond["message"].startswith("reward:") and "rollout" not in cond["message"]
    assert "bad_data" in cond["message"]
    assert replicas(k, "reward") == 2
