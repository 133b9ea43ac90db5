"""`rlop plan`: the autoscaler's decision for an RLJob file, given metric values, without a cluster.

Inputs (JSON):
- metrics: ``{"<pool>": [v0, v1, ...]}`` one value per metric of the pool's autoscale block, in order
  (a bare number for a single metric; null = unavailable, e.g. Prometheus down).
- state (optional): the RLJob's ``status`` as the cluster shows it (``kubectl get rlj J -o
  jsonpath='{.status}'``): current replicas (``pools.<p>.desired``) and the autoscaler's history
  (``recommendations``, ``scaleEvents``). The output's ``state`` is the next state, to chain calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from rlop.api.models import RLJob, RLJobStatus
from rlop.plan.autoscale import Reading
from rlop.plan.job import JobObservation, base_replicas, plan_job
from rlop.plan.observed import PodInfo
from rlop.plan.scaling import plan_scaling


def _readings(metrics: Mapping[str, Any]) -> dict[tuple[str, int], Reading]:
    out = {}
    for pool, values in metrics.items():
        for i, v in enumerate(values if isinstance(values, list) else [values]):
            out[(pool, i)] = Reading(None, "no value given") if v is None else Reading(float(v))
    return out


def what_if(job_doc: Mapping[str, Any], metrics: Mapping[str, Any], state: Mapping[str, Any] | None,
            now: datetime) -> dict[str, Any]:  # fmt: skip
    doc = dict(job_doc)
    doc["metadata"] = {"namespace": "default", **doc.get("metadata", {})}
    if state is not None:
        doc["status"] = RLJobStatus.model_validate(state).model_dump(mode="json", exclude_none=True)
    job = RLJob.model_validate(doc)
    base = base_replicas(job)
    pods = [PodInfo(name=f"{pool}-{i}", pool=pool, ready=True) for pool, n in base.items() for i in range(n)]
    scaling = plan_scaling(job, base, pods, _readings(metrics), {}, now)
    plan = plan_job(JobObservation(job=job, pods=pods), now, scaling)
    pools = {
        name: {"desired": st.desired, "current": base[name], "reason": st.reason}
        for name, st in plan.status.pools.items()
    }
    conditions = [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
        for c in plan.status.conditions
        if c.type in ("MetricsAvailable", "CapacityLimited")
    ]
    return {"pools": pools, "conditions": conditions, "state": plan.status.model_dump(mode="json", exclude_none=True)}
