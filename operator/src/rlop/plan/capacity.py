"""Node capacity accounting and placement feasibility, as kube-scheduler's filters see them (pure).

Modelled: Ready and not cordoned, nodeSelector, NoSchedule/NoExecute taints against tolerations, and
resource fit (allocatable minus the requests of bound, non-terminal pods). Pods of lower priority than the
pod being placed do not count against it: the scheduler would preempt them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rlop.api.models import GPU
from rlop.plan.observed import NodeInfo, PodInfo, Taint
from rlop.plan.quantity import Resources, add, fits


def tolerates(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.effect:
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") == taint.key and (t.get("operator") == "Exists" or t.get("value", "") == taint.value):
            return True
    return False


def feasible(pod: PodInfo, node: NodeInfo) -> bool:
    """Would the scheduler's filters (other than resources) let `pod` onto `node`?"""
    if not node.schedulable:
        return False
    if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
        return False
    hard = (t for t in node.taints if t.effect in ("NoSchedule", "NoExecute"))
    return all(tolerates(pod.tolerations, t) for t in hard)


def free_capacity(
    nodes: Iterable[NodeInfo], pods: Iterable[PodInfo], min_priority: int | None = None
) -> dict[str, Resources]:
    """Allocatable minus the requests of bound, live pods (only those at or above `min_priority`)."""
    free = {n.name: dict(n.allocatable) for n in nodes}
    for pod in pods:
        node = pod.on
        if node in free and not pod.terminal and (min_priority is None or pod.priority >= min_priority):
            free[node] = add(free[node], pod.requests, -1.0)
    return free


def place_all(
    pods: Iterable[PodInfo], nodes: Iterable[NodeInfo], free: Mapping[str, Resources], apart: bool = False
) -> tuple[dict[str, str], list[PodInfo]]:
    """Best-fit decreasing: pod name -> node for those that fit, and the pods that do not; `apart`: at
    most one of them per node (a required anti-affinity among them, as a multi-node replica's)."""
    remaining = {name: dict(res) for name, res in free.items()}
    by_name = {n.name: n for n in nodes}
    placed: dict[str, str] = {}
    unplaced: list[PodInfo] = []
    order = sorted(pods, key=lambda p: _size(p.requests), reverse=True)
    for pod in order:
        candidates = [
            name
            for name, res in remaining.items()
            if name in by_name
            and feasible(pod, by_name[name])
            and fits(pod.requests, res)
            and not (apart and name in placed.values())
        ]
        if not candidates:
            unplaced.append(pod)
            continue
        best = min(candidates, key=lambda n: (_size(add(remaining[n], pod.requests, -1.0)), n))
        remaining[best] = add(remaining[best], pod.requests, -1.0)
        placed[pod.name] = best
    return placed, unplaced


def _size(res: Mapping[str, float]) -> tuple[float, float, float]:
    """Order by the scarcest resources first: GPUs, then cores, then memory."""
    return res.get(GPU, 0.0), res.get("cpu", 0.0), res.get("memory", 0.0)


def shortfall(pods: Iterable[PodInfo], free: Mapping[str, Resources]) -> dict[str, float]:
    """Per resource, how much more than the whole cluster's free capacity the pods need (0 = enough)."""
    need: Resources = {}
    for pod in pods:
        need = add(need, pod.requests)
    total: Resources = {}
    for res in free.values():
        total = add(total, {k: max(v, 0.0) for k, v in res.items()})
    return {k: v - total.get(k, 0.0) for k, v in need.items() if v - total.get(k, 0.0) > 1e-9}
