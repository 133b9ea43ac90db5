"""`rlop plan`: the autoscaler's decision for an RLJob file, given metric values, without a cluster.

Inputs (JSON):
- metrics: ``{"<pool>": [v0, v1, ...]}`` one value per metric of the pool's autoscale block, in order
  (a bare number for a single metric; null = unavailable, e.g. Prometheus down).
- state (optional): the RLJob's ``status`` as the cluster shows it (``kubectl get rlj J -o
  jsonpath='{.status}'``): current replicas (``pools.<p>.desired``) and the autoscaler's history
  (``recommendations``, ``scaleEvents``). The output's ``state`` is the next state, to chain calls.
- nodes (optional): ``[{"name", "cpu", "memory", "labels", "utilization", "requests", "sandboxPods"}]``
  with ``utilization`` in [0, 1] (omit it for "no data"), ``requests`` what other pods request there, and
  ``sandboxPods`` how many of this job's sandbox pods run there now. The output then has ``placement``
  (node -> sandbox pods after the plan) and ``evictions``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from rlop.api import reasons as R
from rlop.api.models import RLJob, RLJobStatus
from rlop.plan.job import JobObservation, base_replicas, plan_job, sandbox_pod_info
from rlop.plan.observed import NodeInfo, PodInfo, pod_info
from rlop.plan.quantity import parse_quantity
from rlop.plan.readings import Answer, QueryKey, Unavailable, read
from rlop.plan.scaling import plan_scaling


def _answers(metrics: Mapping[str, Any]) -> dict[QueryKey, Answer]:
    """The given values as answers to the pools' queries (None: unavailable, as Prometheus down)."""
    out: dict[QueryKey, Answer] = {}
    for pool, values in metrics.items():
        for i, v in enumerate(values if isinstance(values, list) else [values]):
            out[(pool, i)] = Unavailable("no value given") if v is None else [({}, float(v))]
    return out


def _cluster(nodes: Sequence[Mapping[str, Any]], job: str) -> tuple[list[NodeInfo], list[PodInfo], dict[str, float]]:
    infos, pods, utilization = [], [], {}
    for n in nodes:
        name = n["name"]
        alloc = {"cpu": parse_quantity(n.get("cpu", 16)), "memory": parse_quantity(n.get("memory", "64Gi")),
                 "pods": 110.0}  # fmt: skip
        infos.append(NodeInfo(name=name, allocatable=alloc, labels=n.get("labels", {})))
        if "utilization" in n:
            utilization[name] = float(n["utilization"])
        if n.get("requests"):
            req = {k: parse_quantity(v) for k, v in n["requests"].items()}
            pods.append(PodInfo(name=f"others-on-{name}", node=name, requests=req))
        for i in range(int(n.get("sandboxPods", 0))):
            pods.append(PodInfo(name=f"{job}-sandbox-{name}-{i}", node=name, harvest=True, pool="sandbox", ready=True))
    return infos, pods, utilization


def what_if(
    job_doc: Mapping[str, Any],
    metrics: Mapping[str, Any],
    state: Mapping[str, Any] | None,
    now: datetime,
    nodes: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    doc = dict(job_doc)
    doc["metadata"] = {"namespace": "default", **doc.get("metadata", {})}
    if state is not None:
        doc["status"] = RLJobStatus.model_validate(state).model_dump(mode="json", exclude_none=True)
    job = RLJob.model_validate(doc)
    base = base_replicas(job)
    node_infos, bound, utilization = _cluster(nodes or [], job.metadata.name)
    sandbox = [p for p in bound if p.harvest]
    if sandbox and nodes is not None:  # size the sandbox pods from the template
        requests = sandbox_pod_info(job).requests
        sandbox = [replace(p, requests=requests) for p in sandbox]
        bound = [p for p in bound if not p.harvest] + sandbox
    pods = [PodInfo(name=f"{pool}-{i}", pool=pool, ready=True) for pool, n in base.items() for i in range(n)
            if pool != "sandbox" or nodes is None] + sandbox  # fmt: skip
    scaling = plan_scaling(job, base, pods, read(job, _answers(metrics)).metrics, {}, now)
    obs = JobObservation(job=job, pods=pods, nodes=node_infos, bound_pods=bound,
                         utilization=utilization if nodes is not None else None)  # fmt: skip
    plan = plan_job(obs, now, scaling)
    pools = {
        name: {"desired": st.desired, "current": base[name], "reason": st.reason}
        for name, st in plan.status.pools.items()
    }
    conditions = [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
        for c in plan.status.conditions
        if c.type in (R.METRICS, R.CAPACITY)
    ]
    out: dict[str, Any] = {"pools": pools, "conditions": conditions}
    if nodes is not None:
        gone = {p for p, _ in plan.delete_pods} | {p for p, _ in plan.evict}
        placement: dict[str, list[str]] = {n.name: [] for n in node_infos}
        for p in sandbox:
            if p.name not in gone and p.node:
                placement[p.node].append(p.name)
        for m in plan.apply:
            if m["kind"] == "Pod":
                placement[pod_info(m).on or ""].append(m["metadata"]["name"])
        out["placement"] = {node: names for node, names in placement.items() if names}
        out["evictions"] = [{"pod": p, "reason": why} for p, why in plan.evict]
        out["deletions"] = [{"pod": p, "reason": why} for p, why in plan.delete_pods]
    out["state"] = plan.status.model_dump(mode="json", exclude_none=True)
    return out
