"""Small builders of RLJobs and observations for unit tests."""

from __future__ import annotations

from typing import Any

from rlop.api.models import RLJob
from rlop.plan.observed import NodeInfo, PodInfo


def container(name: str = "c", **resources: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": "img"}
    if resources:
        out["resources"] = resources
    return out


def job(name: str = "j", namespace: str = "ns", suspend: bool = False, **pools: Any) -> RLJob:
    spec_pools: dict[str, Any] = {
        "trainer": {
            "replicas": 2,
            "template": {"spec": {"containers": [container(limits={"nvidia.com/gpu": 4})]}},
        },
        "rollout": {"replicas": 1, "template": {"spec": {"containers": [container()]}}},
    }
    spec_pools.update(pools)
    return RLJob.model_validate(
        {
            "apiVersion": "rlop.dev/v1alpha1",
            "kind": "RLJob",
            "metadata": {"name": name, "namespace": namespace, "uid": "uid-1", "generation": 1},
            "spec": {"suspend": suspend, "pools": {k: v for k, v in spec_pools.items() if v is not None}},
        }
    )


def node(name: str, cpu: float = 16, gpus: float = 0, **extra: Any) -> NodeInfo:
    alloc = {"cpu": cpu, "memory": 64 * 2**30, "pods": 110.0}
    if gpus:
        alloc["nvidia.com/gpu"] = gpus
    return NodeInfo(name=name, allocatable=alloc, **extra)


def pod(name: str, node: str | None = None, cpu: float = 0, gpus: float = 0, **extra: Any) -> PodInfo:
    req = {"pods": 1.0}
    if cpu:
        req["cpu"] = cpu
    if gpus:
        req["nvidia.com/gpu"] = gpus
    return PodInfo(name=name, node=node, requests=req, **extra)
