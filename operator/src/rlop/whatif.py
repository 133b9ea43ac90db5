"""`rlop plan`: what the operator would decide for an RLJob file in its next pass, without a cluster.

The inputs become what the operator observes (metric answers, pods, Node objects) and go through the very
functions a pass uses (`plan.readings.read`, `plan.job.plan_pass`). Inputs (JSON):

- metrics: ``{"<pool>": [v0, v1, ...]}`` one value per metric of the pool's autoscale block, in order (a
  bare number for one metric; null, NaN or a missing value: no data, e.g. Prometheus down).
- state (optional): the RLJob's ``status`` (``kubectl get rlj J -o jsonpath='{.status}'``), or a whole
  earlier output of `rlop plan`, whose ``now`` is then the previous pass: chain calls through time.
- replicas (optional): ``{"<pool>": n}`` the current replicas (default: the state's, else minReplicas).
- pods (optional): ``{"<pool>": {"existing": n, "ready": m}}`` (default: every replica exists and is ready).
- nodes (optional): ``[{"name", "cpu", "memory", ...}]``, see README; the output then has ``placement``,
  ``evictions``, ``draining`` (pods to mark, evicted once their drain is over) and each candidate node's
  ``room`` for sandbox pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from rlop.api import reasons as R
from rlop.api.models import PoolStatus, RLJob, RLJobStatus
from rlop.api.names import DRAIN_REASON_ANNOTATION
from rlop.api.pools import HARVESTED, autoscaled, harvested
from rlop.plan.harvest import node_rooms
from rlop.plan.job import JobObservation, JobPlan, base_replicas, plan_pass
from rlop.plan.observed import NodeInfo, PodInfo, node_info, pod_info
from rlop.plan.quantity import parse_quantity
from rlop.plan.readings import Answer, QueryKey, Unavailable, read
from rlop.plan.render import sandbox_pod

NODE_KEYS = {"name", "cpu", "memory", "labels", "taints", "ready", "unschedulable", "utilization", "requests",
             "sandboxPods"}  # fmt: skip


class PlanInputError(ValueError):
    """Input `rlop plan` cannot use; the message names the input and the field."""


def parse_now(text: str) -> datetime:
    """RFC 3339 (no zone: UTC) or Unix seconds."""
    try:
        if text.replace(".", "", 1).isdigit():
            return datetime.fromtimestamp(float(text), UTC)
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError) as exc:
        hint = " (Unix seconds, not milliseconds)" if text.isdigit() and len(text) > 11 else ""
        raise PlanInputError(f"--now {text!r}: {exc}{hint}") from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _problem(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])


def _job(doc: Mapping[str, Any], state: Mapping[str, Any] | None) -> RLJob:
    doc = dict(doc)
    doc["metadata"] = {"namespace": "default", **(doc.get("metadata") or {})}
    try:
        job = RLJob.model_validate(doc)
    except ValidationError as exc:
        raise PlanInputError(f"-f: not a valid RLJob: {_problem(exc)}") from None
    if state is None:
        return job
    try:
        status = RLJobStatus.model_validate(state)
    except ValidationError as exc:
        raise PlanInputError(f"--state: {_problem(exc)}") from None
    return job.model_copy(update={"status": status})


def _answers(job: RLJob, metrics: Mapping[str, Any]) -> dict[QueryKey, Answer]:
    """The given values as the answers Prometheus would give the pools' queries."""
    counts = {pool: len(auto.metrics) for pool, _, auto in autoscaled(job)}
    out: dict[QueryKey, Answer] = {}
    for pool, values in metrics.items():
        if pool not in counts:
            raise PlanInputError(f"--metrics: {pool!r} is not an autoscaled pool of this RLJob ({', '.join(counts)})")
        values = values if isinstance(values, list) else [values]
        if len(values) > counts[pool]:
            raise PlanInputError(f"--metrics.{pool}: {len(values)} values for {counts[pool]} metrics")
        for i, v in enumerate(values):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float)):
                raise PlanInputError(f"--metrics.{pool}[{i}]: {v!r} is not a number or null")
            out[(pool, i)] = Unavailable("no value given") if v is None else [({}, float(v))]
    for pool, n in counts.items():
        for i in range(n):
            out.setdefault((pool, i), Unavailable("no value given"))
    return out


def _with_replicas(job: RLJob, replicas: Mapping[str, Any]) -> RLJob:
    """The job as if its pools had these replicas now (the status is where the operator keeps them)."""
    status = job.status or RLJobStatus()
    pools = dict(status.pools)
    scaled = {pool for pool, _, _ in autoscaled(job)}
    for pool, n in replicas.items():
        if pool not in scaled:
            raise PlanInputError(f"--replicas: {pool!r} is not an autoscaled pool of this RLJob ({', '.join(scaled)})")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise PlanInputError(f"--replicas.{pool}: {n!r} is not a replica count")
        pools[pool] = pools.get(pool, PoolStatus()).model_copy(update={"desired": n})
    return job.model_copy(update={"status": status.model_copy(update={"pools": pools})})


def _node(raw: Mapping[str, Any]) -> NodeInfo:
    """A Node object as the API server would show it, read the way the operator reads one."""
    name = raw.get("name")
    unknown = set(raw) - NODE_KEYS
    if unknown:
        raise PlanInputError(f"--nodes[{name}]: unknown keys {sorted(unknown)} (known: {sorted(NODE_KEYS)})")
    for key in ("name", "cpu", "memory"):
        if key not in raw:
            raise PlanInputError(f"--nodes[{name}]: {key!r} is required")
    try:
        for key in ("cpu", "memory"):
            parse_quantity(raw[key])
    except ValueError as exc:
        raise PlanInputError(f"--nodes[{name}]: {exc}") from None
    u = raw.get("utilization")
    if u is not None and not (isinstance(u, int | float) and 0 <= u <= 1):
        raise PlanInputError(f"--nodes[{name}].utilization: {u!r} is not within [0, 1] (omit it for no data)")
    return node_info({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(raw.get("labels") or {})}},
        "spec": {"unschedulable": bool(raw.get("unschedulable")), "taints": list(raw.get("taints") or [])},
        "status": {"allocatable": {"cpu": str(raw["cpu"]), "memory": str(raw["memory"]), "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if raw.get("ready", True) else "False"}]},
    })  # fmt: skip


def _running(manifest: Mapping[str, Any]) -> PodInfo:
    body = dict(manifest)
    body["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod_info(body)


def _cluster(job: RLJob, nodes: Sequence[Mapping[str, Any]]) -> tuple[list[NodeInfo], list[PodInfo], dict[str, float]]:
    infos, pods, utilization = [], [], {}
    for raw in nodes:
        info = _node(raw)
        infos.append(info)
        if raw.get("utilization") is not None:
            utilization[info.name] = float(raw["utilization"])
        if raw.get("requests"):
            try:
                requests = {k: parse_quantity(v) for k, v in raw["requests"].items()}
            except ValueError as exc:
                raise PlanInputError(f"--nodes[{info.name}].requests: {exc}") from None
            pods.append(PodInfo(name=f"others-on-{info.name}", node=info.name, requests=requests, phase="Running"))
        given = raw.get("sandboxPods") or 0
        if not given:
            continue
        if (sandbox := harvested(job)) is None:
            raise PlanInputError(f"--nodes[{info.name}].sandboxPods: this RLJob's sandbox pool does not harvest")
        names = (
            given if isinstance(given, list) else [f"{job.metadata.name}-sandbox-{info.name}-{i}" for i in range(given)]
        )
        pods += [_running(sandbox_pod(job, sandbox, name, info.name)) for name in names]
    return infos, pods, utilization


def what_if(
    job_doc: Mapping[str, Any],
    metrics: Mapping[str, Any],
    state: Mapping[str, Any] | None,
    now: datetime,
    nodes: Sequence[Mapping[str, Any]] | None = None,
    replicas: Mapping[str, Any] | None = None,
    pods: Mapping[str, Mapping[str, int]] | None = None,
) -> dict[str, Any]:
    """The operator's next pass for this job, from the given observations (see the module docstring)."""
    previous = None
    if state is not None and "state" in state:  # a whole earlier output
        previous = parse_now(str(state["now"])) if state.get("now") else None
        state = state["state"]
    now = now.replace(microsecond=0)
    job = _job(job_doc, state)
    if replicas:
        job = _with_replicas(job, replicas)
    base = base_replicas(job)
    observed = _pods(job, base, pods or {}, nodes is not None)
    node_infos, bound, utilization = _cluster(job, nodes or [])
    sandbox = [p for p in bound if p.harvest]
    answers = _answers(job, metrics)
    if nodes is not None and harvested(job):
        answers[(HARVESTED, "utilization")] = [({"node": n}, u) for n, u in utilization.items()]
    readings = read(job, answers)
    obs = JobObservation(job=job, pods=observed + sandbox, nodes=node_infos, bound_pods=bound,
                         utilization=readings.utilization)  # fmt: skip
    plans, failed = plan_pass([(obs, readings)], now, previous)
    for exc in failed.values():
        raise exc
    plan, scaling = next(iter(plans.values()))
    out: dict[str, Any] = {"now": now.isoformat().replace("+00:00", "Z"), "pools": {}}
    for name, status in plan.status.pools.items():
        pool: dict[str, Any] = {"current": base[name], "desired": status.desired}
        if name in scaling.explained:
            pool["decision"], pool["reason"], pool["metric"] = scaling.explained[name]
        out["pools"][name] = pool
    out["conditions"] = [
        {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
        for c in plan.status.conditions
        if c.type in (R.METRICS, R.CAPACITY)
    ]
    if nodes is not None:
        _placement(out, job, plan, sandbox, node_infos, readings.utilization, bound, now)
    out["state"] = plan.status.model_dump(mode="json", exclude_none=True)
    return out


def _pods(job: RLJob, base: Mapping[str, int], given: Mapping[str, Mapping[str, int]], nodes: bool) -> list[PodInfo]:
    """Each pool's pods: `existing` of them (default: its replicas), the first `ready` ready."""
    for pool, counts in given.items():
        if pool not in base:
            raise PlanInputError(f"--pods: {pool!r} is not a pool of this RLJob ({', '.join(base)})")
        bad = set(counts) - {"existing", "ready"}
        if bad or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()):
            raise PlanInputError(f"--pods.{pool}: want {{'existing': n, 'ready': m}}, got {dict(counts)}")
    out = []
    for pool, n in base.items():
        if pool == HARVESTED and nodes and harvested(job):
            continue  # the nodes' sandboxPods are the pool's pods
        existing = given.get(pool, {}).get("existing", n)
        ready = min(existing, given.get(pool, {}).get("ready", existing))
        out += [PodInfo(name=f"{pool}-{i}", pool=pool, ready=i < ready, phase="Running") for i in range(existing)]
    return out


def _placement(
    out: dict[str, Any], job: RLJob, plan: JobPlan, sandbox: Sequence[PodInfo], nodes: Sequence[NodeInfo],
    utilization: Mapping[str, float] | None, bound: Sequence[PodInfo], now: datetime,
) -> None:  # fmt: skip
    drains = {p: mark for p, mark in plan.marks.items() if DRAIN_REASON_ANNOTATION in mark}
    gone = {p for p, _ in plan.delete_pods} | {p for p, _ in plan.evict} | set(drains)
    placement: dict[str, list[str]] = {n.name: [] for n in nodes}
    for p in sandbox:
        if p.name not in gone and p.on:
            placement[p.on].append(p.name)
    created = [m for m in plan.apply if m["kind"] == "Pod"]
    for m in created:
        placement[pod_info(m).on or ""].append(m["metadata"]["name"])
    out["placement"] = {node: names for node, names in placement.items() if names}
    out["created"] = [m["metadata"]["name"] for m in created]
    out["evictions"] = [{"pod": p, "reason": why} for p, why in plan.evict]
    out["draining"] = [{"pod": p, "reason": mark[DRAIN_REASON_ANNOTATION]} for p, mark in drains.items()]
    out["deletions"] = [{"pod": p, "reason": why} for p, why in plan.delete_pods]
    if (sandbox_spec := harvested(job)) is not None:
        rooms = node_rooms(nodes, utilization, bound, sandbox_spec.placement, now)
        out["rooms"] = {
            name: {"harvestCores": round(r.harvest, 3), "placeCores": round(r.place, 3),
                   "ceilingCores": round(r.ceiling, 3) if math.isfinite(r.ceiling) else None}
            for name, r in rooms.items()
        }  # fmt: skip
