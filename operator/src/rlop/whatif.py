"""`rlop plan`: what the operator would decide for an RLJob file in its next pass, without a cluster.

The inputs become what the operator observes (metric answers, pods, Node objects) and go through the very
functions a pass uses (`plan.readings.read`, `plan.job.plan_pass`). Inputs (JSON):

- metrics: ``{"<pool>": [v0, v1, ...]}`` one value per metric of the pool's autoscale block, in order (a
  bare number for one metric; null, NaN or a missing value: no data, e.g. Prometheus down).
- state (optional): the RLJob's ``status`` (``kubectl get rlj J -o jsonpath='{.status}'``), or a whole
  earlier output of `rlop plan`, whose ``now`` is then the previous pass: chain calls through time.
- replicas (optional): ``{"<pool>": n}`` the current replicas (default: the state's, else minReplicas).
- pods (optional): ``{"<pool>": {"existing": n, "ready": m}}`` (default: every replica exists and is ready).
- nodes (optional): ``[{"name", "cpu", "memory", ...}]`` (`NodeInput`, see README); the output then has ``placement``,
  ``evictions``, ``draining`` (pods to mark, evicted once their drain is over) and each candidate node's
  ``room`` for sandbox pods.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

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
from rlop.plan.status import rfc3339

NODE_KEYS = {"name", "cpu", "memory", "labels", "taints", "ready", "unschedulable", "utilization", "requests",
             "sandboxPods", "otherSandboxPods"}  # fmt: skip


def _utc(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _quantity(value: str | int | float) -> str | int | float:
    """A Kubernetes quantity, not negative."""
    if parse_quantity(value) < 0:
        raise ValueError(f"{value!r} is negative")
    return value


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


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, alias_generator=to_camel)


Quantity = Annotated[str | int | float, AfterValidator(_quantity)]


class Taint(_Input):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class RunningPod(_Input):
    """A sandbox pod running on the node: this job's (by name), or another job's (`job`, `cpu`, `memory`)."""

    name: str
    since: Annotated[datetime | None, AfterValidator(_utc)] = Field(default=None, strict=False)  # created at
    # (default: long enough ago that its load is all in the measured utilization)
    job: str | None = None
    cpu: Quantity = 0
    memory: Quantity = 0


class NodeInput(_Input):
    """A candidate node, as the operator reads a Node object (plus what runs on it)."""

    name: str = Field(min_length=1)
    cpu: Quantity
    memory: Quantity
    labels: dict[str, str] = {}
    taints: list[Taint] = []
    ready: bool = True
    unschedulable: bool = False
    utilization: float | None = Field(default=None, ge=0, le=1)  # None: no data
    requests: dict[str, Quantity] = {}  # what the node's other pods request
    sandbox_pods: Annotated[int, Field(ge=0)] | list[str | RunningPod] = 0  # this job's: a count, or the pods
    other_sandbox_pods: list[RunningPod] = []  # other jobs' harvested pods (each with `job`)


def _is_field(part: str | int) -> bool:
    """Is this part of an error's location a field or an index (not the tag of a union's branch)?"""
    return isinstance(part, int) or (part[:1].islower() and part.isalnum() and part not in ("str", "int", "float"))


def _node(raw: Any, i: int) -> NodeInput:
    where = f"--nodes[{raw.get('name', i) if isinstance(raw, Mapping) else i}]"
    try:
        node = NodeInput.model_validate(raw)
    except ValidationError as exc:
        e = max(exc.errors(), key=lambda e: len(e["loc"]))  # of a union's branches, the one that got furthest
        field = "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in e["loc"] if _is_field(x))
        hint = f" (known: {', '.join(sorted(NODE_KEYS))})" if e["type"] == "extra_forbidden" else ""
        raise PlanInputError(f"{where}{field}: {e['msg']}{hint}") from None
    for pod in node.other_sandbox_pods:
        if pod.job is None:
            raise PlanInputError(f"{where}.otherSandboxPods[{pod.name}]: 'job' is required")
    return node


def _node_info(node: NodeInput) -> NodeInfo:
    return node_info({
        "metadata": {"name": node.name, "labels": {"kubernetes.io/hostname": node.name, **node.labels}},
        "spec": {"unschedulable": node.unschedulable, "taints": [t.model_dump() for t in node.taints]},
        "status": {"allocatable": {"cpu": str(node.cpu), "memory": str(node.memory), "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}]},
    })  # fmt: skip


def _running(manifest: Mapping[str, Any], since: datetime) -> PodInfo:
    body = dict(manifest)
    body["metadata"] = {**body["metadata"], "creationTimestamp": rfc3339(since)}
    body["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    return pod_info(body)


def _cluster(job: RLJob, nodes: Any, now: datetime) -> tuple[list[NodeInfo], list[PodInfo], dict[str, float]]:
    if not isinstance(nodes, list):
        raise PlanInputError(f"--nodes: want a list of nodes, got {type(nodes).__name__}")
    infos, pods, utilization = [], [], {}
    settled = now - timedelta(days=1)  # a pod given without `since` has run long enough to be measured
    for i, raw in enumerate(nodes):
        node = _node(raw, i)
        infos.append(_node_info(node))
        if node.utilization is not None:
            utilization[node.name] = float(node.utilization)
        if node.requests:
            requests = {k: parse_quantity(v) for k, v in node.requests.items()}
            pods.append(PodInfo(name=f"others-on-{node.name}", node=node.name, requests=requests, phase="Running"))
        for other in node.other_sandbox_pods:
            requests = {"cpu": parse_quantity(other.cpu), "memory": parse_quantity(other.memory), "pods": 1.0}
            pods.append(PodInfo(name=other.name, namespace="", node=node.name, requests=requests, phase="Running",
                                ready=True, job=other.job, pool=HARVESTED, harvest=True,
                                created=rfc3339(other.since or settled)))  # fmt: skip
        given = node.sandbox_pods
        if not given:
            continue
        if (sandbox := harvested(job)) is None:
            raise PlanInputError(f"--nodes[{node.name}].sandboxPods: this RLJob's sandbox pool does not harvest")
        if isinstance(given, int):
            mine = [RunningPod(name=f"{job.metadata.name}-sandbox-{node.name}-{n}") for n in range(given)]
        else:
            mine = [RunningPod(name=g) if isinstance(g, str) else g for g in given]
        pods += [_running(sandbox_pod(job, sandbox, p.name, node.name), p.since or settled) for p in mine]
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
    for flag, value in (("-f", job_doc), ("--metrics", metrics), ("--state", state), ("--replicas", replicas),
                        ("--pods", pods)):  # fmt: skip
        if value is not None and not isinstance(value, Mapping):
            raise PlanInputError(f"{flag}: want a JSON object, got {type(value).__name__}")
    for name, counts in (pods or {}).items():
        if not isinstance(counts, Mapping):
            raise PlanInputError(f"--pods.{name}: want {{'existing': n, 'ready': m}}, got {counts!r}")
    previous = None
    if state is not None and "state" in state:  # a whole earlier output
        previous = parse_now(str(state["now"])) if state.get("now") else None
        state = state["state"]
    now = now.replace(microsecond=0)
    if previous is not None and now < previous:
        raise PlanInputError(f"--now {rfc3339(now)} is before the state's own now ({rfc3339(previous)})")
    job = _job(job_doc, state)
    if replicas:
        job = _with_replicas(job, replicas)
    base = base_replicas(job)
    observed = _pods(job, base, pods or {}, nodes is not None)
    node_infos, bound, utilization = _cluster(job, nodes if nodes is not None else [], now)
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
        if status.nodes_per_replica:  # a multi-node pool: replicas are groups
            pool |= {"nodesPerReplica": status.nodes_per_replica, "pods": status.desired * status.nodes_per_replica}
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
