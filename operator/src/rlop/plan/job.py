"""The plan for one RLJob (pure): which children to write or delete, which trainer pods to release or
restart, the new status and the events that explain it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from rlop.api import reasons as R
from rlop.api.models import FINISHED, Phase, PoolStatus, RLJob, RLJobStatus, SandboxPool
from rlop.api.names import (
    CHECKPOINT_NOW_ANNOTATION,
    DRAIN_ANNOTATION,
    DRAIN_REASON_ANNOTATION,
    HASH_ANNOTATION,
    POOL_LABEL,
)
from rlop.api.pools import HARVESTED, autoscaled, fixed_replicas, harvested, pools, serving
from rlop.plan.gang import GangDecision, plan_gang
from rlop.plan.groups import GroupPlan, failures, leaving, members, plan_groups
from rlop.plan.harvest import Departed, HarvestPlan, JobKey, SandboxDemand, plan_harvest
from rlop.plan.observed import ChildInfo, NodeInfo, PodInfo, owned_by, pod_requests
from rlop.plan.quantity import Resources, add
from rlop.plan.readings import JobReadings
from rlop.plan.render import Manifest, child_name, podgroup_name, render, sandbox_pod, sandbox_template
from rlop.plan.scaling import Scaling, plan_scaling
from rlop.plan.serving import ServingObservation, ServingPlan, combine, plan_serving
from rlop.plan.status import (
    DELETE_POD,
    DEREGISTER,
    EVICT,
    LOAD,
    MARK,
    REGISTER,
    RELEASE,
    ConditionUpdate,
    Event,
    find,
    rfc3339,
    set_condition,
)
from rlop.plan.trainer import plan_trainer, released

ChildKey = tuple[str, str]  # (kind, name)


@dataclass(frozen=True)
class JobObservation:
    job: RLJob
    children: Mapping[ChildKey, ChildInfo] = field(default_factory=dict)
    pods: Sequence[PodInfo] = ()  # this job's pods
    nodes: Sequence[NodeInfo] = ()
    bound_pods: Sequence[PodInfo] = ()  # every pod bound (or pinned) to a node, for capacity accounting
    utilization: Mapping[str, float] | None = None  # node -> CPU utilization, read this interval
    utilization_error: str | None = None  # why there is none this interval
    written: Mapping[ChildKey, str] = field(default_factory=dict)  # child -> version rlop's last apply left
    departed: Sequence[Departed] = ()  # harvest pods gone lately, whose load the utilization may still show
    serving: Mapping[str, ServingObservation] | None = None  # serving pool -> what it said (full passes only)
    native_gangs: bool = False  # the cluster serves kube-scheduler's PodGroups: it places the trainer gang


@dataclass(frozen=True)
class JobPlan:
    apply: list[Manifest]
    drift: list[ChildKey]  # children re-applied because their spec may have been changed outside rlop
    delete: list[ChildKey]
    release: list[str]  # trainer pods whose gang gate to lift
    delete_pods: list[tuple[str, str]]  # (pod, why): gang restarts, sandbox scale-down, lost nodes
    evict: list[tuple[str, str]]  # (pod, why): sandbox pods on busy nodes or drained, through the Eviction API
    status: RLJobStatus
    events: list[Event]
    pod_costs: Mapping[str, int] = field(default_factory=dict)  # deletion costs to set before scaling down
    marks: Mapping[str, Mapping[str, str]] = field(default_factory=dict)  # pod -> annotations: drain, checkpoint
    serving: Mapping[str, ServingPlan] = field(default_factory=dict)  # serving pool -> gates, updates, router
    scale: list[Manifest] = field(default_factory=list)  # children whose replicas alone changed: /scale writes


def base_replicas(job: RLJob) -> dict[str, int]:
    """Replicas per pool before autoscaling: fixed pools as specified (1 if unset), autoscaled pools at
    their last decision (minReplicas at first; a full pass moves a count outside [min, max] to the bound,
    as HPA does); all 0 when suspended or finished."""
    old = job.status.pools if job.status else {}
    auto = {name: a for name, _, a in autoscaled(job)}
    out = {}
    for kind, spec in pools(job):
        fixed = fixed_replicas(kind, spec)
        if fixed is None:
            fixed = old[kind.name].desired if kind.name in old else auto[kind.name].min_replicas
        out[kind.name] = fixed
    return {k: 0 for k in out} if job.stopped else out


def _diff(
    desired: list[Manifest], children: Mapping[ChildKey, ChildInfo], written: Mapping[ChildKey, str]
) -> tuple[list[Manifest], list[Manifest], list[ChildKey], list[Event]]:
    """What to write: new children and changed renderings, applied whole; children whose spec version is
    not the one rlop's own last write left (a hand edit, or unknown after a restart: re-applying unchanged
    fields writes nothing), applied whole too; children whose replicas alone differ, scaled (their /scale
    subresource: a far smaller write than the whole spec)."""
    writes, scale, drift, events = [], [], [], []
    for manifest in desired:
        key = (manifest["kind"], manifest["metadata"]["name"])
        seen = children.get(key)
        if seen is not None and seen.spec_hash == manifest["metadata"]["annotations"][HASH_ANNOTATION]:
            replicas = (manifest.get("spec") or {}).get("replicas")
            if written.get(key) != seen.version:
                writes.append(manifest)
                drift.append(key)
            elif replicas is not None and replicas != seen.replicas:
                scale.append(manifest)
            continue
        writes.append(manifest)
        verb = R.CREATED if seen is None else R.UPDATED
        events.append(Event("Normal", verb, f"{verb} {key[0]} {key[1]}", needs=(key,)))
    return writes, scale, drift, events


def _scale_events(scale: list[Manifest], children: Mapping[ChildKey, ChildInfo], said: set[str]) -> list[Event]:
    """One event per scale write that no scaling decision explains (a fixed pool's new replicas, a suspend)."""
    out = []
    for m in scale:
        key, pool = (m["kind"], m["metadata"]["name"]), m["metadata"]["labels"].get(POOL_LABEL)
        if pool not in said:
            message = f"{R.UPDATED} {key[0]} {key[1]}: replicas {children[key].replicas} -> {m['spec']['replicas']}"
            out.append(Event("Normal", R.UPDATED, message, needs=(key,)))
    return out


def owned(
    job: RLJob, children: Mapping[ChildKey, ChildInfo], pods: Sequence[PodInfo]
) -> tuple[dict[ChildKey, ChildInfo], list[PodInfo]]:
    """The children and pods that are this job's own: labels say which job an object is for, only the
    controller ownerReference says rlop made it (a user's object with the same labels is never touched)."""
    ours = {k: c for k, c in children.items() if owned_by(c.owner, job.metadata.uid)}
    parents = {c.uid for c in ours.values() if c.kind == "StatefulSet"} | {job.metadata.uid}
    sets = tuple(f"{name}-" for kind, name in ours if kind == "Deployment")

    def mine(pod: PodInfo) -> bool:
        o = pod.owner
        return o is not None and (o.uid in parents or (o.kind == "ReplicaSet" and o.name.startswith(sets)))

    return ours, [p for p in pods if mine(p)]


def _pool_status(job: RLJob, scaling: Scaling, pods: Sequence[PodInfo]) -> dict[str, PoolStatus]:
    old = job.status.pools if job.status else {}
    out = {}
    for pool, desired in scaling.replicas.items():
        ready = sum(1 for p in pods if p.pool == pool and p.ready and not p.deleting and not p.draining)
        status = old.get(pool, PoolStatus())
        if pool in scaling.pools:
            status = scaling.pools[pool].onto(status)
        out[pool] = status.model_copy(update={"desired": desired, "ready": ready, "replicas": f"{ready}/{desired}",
                                              "nodes_per_replica": None})  # fmt: skip
    return out


def _readiness(pools: Mapping[str, PoolStatus], gang: GangDecision, waiting: Sequence[str] = ()) -> tuple[bool, str]:
    lagging = [f"{name} {p.ready}/{p.desired}" for name, p in pools.items() if p.ready < p.desired]
    if not gang.scheduled and pools.get("trainer", PoolStatus()).desired > 0:
        lagging.insert(0, f"trainer gang: {gang.message}")
    lagging += waiting
    return not lagging, "; ".join(lagging) or "all pools ready"


def plan_job(
    obs: JobObservation, now: datetime, scaling: Scaling | None = None, harvest: HarvestPlan | None = None
) -> JobPlan:
    """Plan one reconcile of `obs.job`. Without a fresh scaling decision (between full passes), every
    pool keeps its replicas; `harvest` is the pass's sandbox placement for this job (full passes only)."""
    job = obs.job
    name, generation = job.metadata.name, job.metadata.generation
    trainer = [p for p in obs.pods if p.pool == "trainer"]
    sts_key = ("StatefulSet", child_name(name, "trainer"))
    life = plan_trainer(job, trainer, obs.children.get(sts_key), obs.nodes, now)
    scaling = scaling or Scaling(base_replicas(job), fresh=False)
    if life.phase is not None:  # the job is over: every pool goes to 0, the objects stay
        scaling = Scaling(dict.fromkeys(scaling.replicas, 0), fresh=False)
    replicas = scaling.replicas
    grouped = {pool: spec for pool, spec in serving(job) if spec.grouped}
    groups = {pool: members(pool, obs.pods) for pool in grouped}
    failed = {pool: failures(spec, groups[pool], obs.nodes) for pool, spec in grouped.items()}
    served = _plan_serving(obs, scaling, now, {pool: leaving(groups[pool], failed[pool]) for pool in grouped})
    desired = render(job, {**replicas, **{pool: sp.replicas for pool, sp in served.items()}}, life.restarts,
                     obs.native_gangs)  # fmt: skip
    writes, scale, drift, events = _diff(desired, obs.children, obs.written)
    events += _scale_events(scale, obs.children, {e.pool for e in scaling.events if e.pool})
    wanted = {(m["kind"], m["metadata"]["name"]) for m in desired}
    delete = sorted(set(obs.children) - wanted)
    events += [Event("Normal", R.DELETED, f"Deleted {k} {n}: no longer implied by the spec", needs=((k, n),))
               for k, n in delete]  # fmt: skip
    events += scaling.events + life.events

    updating = any((m["kind"], m["metadata"]["name"]) == sts_key for m in writes) and sts_key not in drift
    group = podgroup_name(name, life.restarts, replicas["trainer"]) if obs.native_gangs else None
    gang = plan_gang(replicas["trainer"], trainer, obs.children.get(sts_key), obs.nodes, obs.bound_pods, updating,
                     life.hold, group, obs.children.get(("PodGroup", group or "")))  # fmt: skip
    if life.phase is not None:
        gang = GangDecision(False, R.FINISHED, f"the job has {'succeeded' if life.phase == 'Succeeded' else 'failed'}"
                            ": no trainer runs")  # fmt: skip
    if gang.release:
        spots = Counter(gang.placement.values())
        fit = ", ".join(f"{node} x{count}" for node, count in sorted(spots.items()))
        needs = tuple((RELEASE, pod) for pod in gang.release)
        checked = f" (capacity checked on {fit})" if fit else ""
        events.append(Event("Normal", R.GANG_RELEASED, gang.message + checked, needs=needs))
    if gang.restart:
        events.append(Event("Normal", R.GANG_RESTART, gang.message))
    delete_pods = [(pod, "gang restart") for pod in gang.restart]

    evict: list[tuple[str, str]] = []
    since = rfc3339(now)
    marks: dict[str, dict[str, str]] = {pod: {CHECKPOINT_NOW_ANNOTATION: mark} for pod, mark in life.marks.items()}
    sandbox = harvested(job)
    if harvest is not None and sandbox is not None:
        events += [Event("Warning", R.SANDBOX_EVICTED, f"evicted {pod}: {why}", needs=((EVICT, pod),))
                   for pod, why in harvest.evict]  # fmt: skip
        writes += [sandbox_pod(job, sandbox, pod, node) for pod, node in harvest.create]
        if harvest.create:
            spots = Counter(node for _, node in harvest.create)
            where = ", ".join(f"{node} x{count}" for node, count in sorted(spots.items()))
            message = f"placed {len(harvest.create)} sandbox pods on idle CPU: {where}"
            needs = tuple(("Pod", pod) for pod, _ in harvest.create)
            events.append(Event("Normal", R.SANDBOX_PLACED, message, needs=needs))
        events += [Event("Normal", R.SANDBOX_DELETED, f"deleted {pod}: {why}", needs=((DELETE_POD, pod),))
                   for pod, why in harvest.delete]  # fmt: skip
        grace = sandbox.placement.drain_seconds
        events += [Event("Normal", R.SANDBOX_DRAINING, f"draining {pod} for {grace}s, then evicting it: {why}",
                         needs=((MARK, pod),)) for pod, why in harvest.drain]  # fmt: skip
        marks |= {pod: {DRAIN_ANNOTATION: since, DRAIN_REASON_ANNOTATION: why} for pod, why in harvest.drain}
        delete_pods += harvest.delete
        evict = harvest.evict
    elif sandbox is None:  # sandbox pods rlop placed, but the spec no longer asks for harvesting
        delete_pods += [(p.name, "harvesting turned off") for p in obs.pods if p.harvest and not p.deleting]

    for pool, sp in served.items():
        events += _serving_events(job, pool, sp)
        marks |= {pod: {DRAIN_ANNOTATION: since, DRAIN_REASON_ANNOTATION: f"{pool} scale-down"} for pod in sp.drain}
        if pool not in grouped:  # a drained leader's whole group goes, below
            delete_pods += sp.drained

    release = list(gang.release)
    reserved = _requests_by_node(gang.placement, trainer)
    planned: dict[str, GroupPlan] = {}
    for pool, spec in grouped.items():
        plan = served.get(pool)
        want = plan.replicas if plan is not None else replicas[pool]
        gp = plan_groups(job, pool, spec, want, obs.pods, obs.nodes, obs.bound_pods,
                         [name for name, _ in plan.drained] if plan else [], reserved)  # fmt: skip
        planned[pool] = gp
        writes += gp.create
        delete_pods += gp.delete
        release += gp.release
        events += gp.events
        pool_pods = [p for p in obs.pods if p.pool == pool]
        reserved = _merge(reserved, _requests_by_node(gp.placement, pool_pods))

    old = job.status or RLJobStatus()
    pools = _pool_status(job, scaling, obs.pods)
    for pool, sp in served.items():
        if sp.versions is not None:
            pools[pool] = pools[pool].model_copy(update={"versions": sp.versions})
    for pool, gp in planned.items():
        ready_groups = {"ready": gp.ready, "replicas": f"{gp.ready}/{pools[pool].desired}",
                        "nodes_per_replica": grouped[pool].nodes_per_replica}  # fmt: skip
        pools[pool] = pools[pool].model_copy(update=ready_groups)
    ready, why = _readiness(pools, gang, [w for gp in planned.values() for w in gp.waiting])
    conditions = list(old.conditions)
    updates = _with_problem(scaling.conditions, obs.utilization_error) + life.conditions
    if (sync := combine([sp.sync for sp in served.values() if sp.sync is not None])) is not None:
        updates.append(sync)
    policy = next((s.policy.value for s in (obs.serving or {}).values() if s.policy and s.policy.value is not None),
                  None)  # fmt: skip
    if scaling.fresh and (job.spec.budget is not None or harvest is not None):
        updates.append(_capacity(scaling.limited, harvest))
    updates += [
        ConditionUpdate(R.GANG, "True" if gang.scheduled else "False", gang.reason, gang.message),
        ConditionUpdate(R.READY, "False", R.FINISHED, gang.message)
        if life.phase is not None
        else ConditionUpdate(R.READY, "True", R.ALL_POOLS_READY, why)
        if ready
        else ConditionUpdate(R.READY, "False", R.NOT_READY, why),
        _synced(old, served, full=obs.serving is not None),
    ]
    for update in updates:
        conditions = set_condition(conditions, update, now, generation)
    phase: Phase = life.phase or ("Suspended" if job.spec.suspend else "Running" if ready else "Pending")
    trainer_status = released(life, obs.children.get(sts_key), now) if gang.release else life.status
    status = old.model_copy(
        update={"phase": phase, "observed_generation": generation, "pools": pools, "conditions": conditions,
                "trainer": trainer_status}
    )  # fmt: skip
    if policy is not None:
        status.policy_version = int(policy)
    events += _transitions(old, status)
    costs = {**scaling.pod_costs, **{pod: c for pool, sp in served.items() if pool not in grouped
                                     for pod, c in sp.costs.items()}}  # fmt: skip
    return JobPlan(writes, drift, delete, release, delete_pods, evict, status, events, costs, marks, served, scale)


def _requests_by_node(placement: Mapping[str, str], pods: Sequence[PodInfo]) -> dict[str, Resources]:
    """What the pods placed this pass will take from each node."""
    by_name = {p.name: p for p in pods}
    out: dict[str, Resources] = {}
    for pod, node in placement.items():
        if pod in by_name:
            out[node] = add(out.get(node, {}), by_name[pod].requests)
    return out


def _merge(a: Mapping[str, Resources], b: Mapping[str, Resources]) -> dict[str, Resources]:
    return {node: add(a.get(node, {}), b.get(node, {})) for node in {*a, *b}}


def _synced(old: RLJobStatus, served: Mapping[str, ServingPlan], full: bool) -> ConditionUpdate:
    """Synced, before the writes are tried: False while a pool's router cannot be reconciled (it speaks no
    worker API rlop knows, or answers with an error), held between full passes, which do not ask it."""
    before = find(old.conditions, R.SYNCED)
    if not full and before is not None and before.reason in ROUTER_PROBLEMS:
        return ConditionUpdate(R.SYNCED, before.status, before.reason, before.message)
    problems = [(sp.router_problem, pool) for pool, sp in served.items() if sp.router_problem]
    if problems:
        reason = min(problem[0] for problem, _ in problems)  # RouterFailed before RouterUnsupported
        return ConditionUpdate(R.SYNCED, "False", reason, "; ".join(f"{pool}: {p[1]}" for p, pool in problems))
    return ConditionUpdate(R.SYNCED, "True", R.APPLIED, "children match the spec")


ROUTER_PROBLEMS = (R.ROUTER_FAILED, R.ROUTER_UNSUPPORTED)


def _plan_serving(
    obs: JobObservation, scaling: Scaling, now: datetime, leaving: Mapping[str, set[str]]
) -> dict[str, ServingPlan]:
    """Every serving pool rlop tracks per replica: versions, gates, router, drains. A multi-node pool's
    replicas are its leaders; those of `leaving` groups (failed) are out, as if deleted."""
    out = {}
    claim = find(obs.job.status.conditions, R.WEIGHTS) if obs.job.status else None
    claimed = claim is not None and claim.status == "True"  # between full passes, withdrawn if unsure
    for pool, spec in serving(obs.job):
        if not spec.per_replica:
            continue
        gone = leaving.get(pool, set())
        pods = [replace(p, deleting=True) if p.name in gone else p for p in obs.pods if p.pool != pool or p.leads]
        seen = None if obs.serving is None else obs.serving.get(pool, ServingObservation())
        busy = {p.name: float(scaling.pod_costs.get(p.name, p.deletion_cost or 0)) for p in pods if p.pool == pool}
        out[pool] = plan_serving(pool, spec, scaling.replicas[pool], pods, seen, busy, now, claimed)
    return out


def _serving_events(job: RLJob, pool: str, sp: ServingPlan) -> list[Event]:
    spec = dict(serving(job))[pool]
    why = f"out of the router and not Ready; deleted once no request runs on it, at most {spec.drain_seconds}s"
    out = [Event("Normal", R.REPLICA_DRAINING, f"draining {pod} ({pool} scale-down): {why}", needs=((MARK, pod),))
           for pod in sp.drain]  # fmt: skip
    out += [Event("Normal", R.REPLICA_DRAINED, f"deleted {pod}: {why}", needs=((DELETE_POD, pod),))
            for pod, why in sp.drained]  # fmt: skip
    out += [Event("Normal", R.ROUTER_ADDED, f"registered {pod} ({url}) with the {pool} router",
                  needs=((REGISTER, pod),)) for pod, url in sp.register]  # fmt: skip
    out += [Event("Normal", R.ROUTER_REMOVED, f"removed {pod or url} from the {pool} router",
                  needs=((DEREGISTER, url),)) for pod, url, _ in sp.deregister]  # fmt: skip
    out += [Event("Normal", R.WEIGHTS_UPDATE, f"{u.pod} serves {u.served}: told it to load v{u.version} "
                  f"({u.model_path})", needs=((LOAD, u.pod),)) for u in sp.updates if u.catch_up]  # fmt: skip
    return out


def plan_pass(
    jobs: Sequence[tuple[JobObservation, JobReadings | None]], now: datetime, previous: datetime | None
) -> tuple[dict[JobKey, tuple[JobPlan, Scaling]], dict[JobKey, Exception]]:
    """The plans of one pass, and the jobs whose planning failed (the others are planned). With readings
    (a full pass; `previous` the one before it, None if unknown) the autoscaler decides first, then every
    harvesting job's sandbox pods are placed together. Every observation of a pass shares its nodes and
    bound pods. The operator and `rlop plan` both plan through here."""
    failed: dict[JobKey, Exception] = {}
    decided: list[tuple[JobKey, JobObservation, Scaling]] = []
    for obs, readings in jobs:
        key = (obs.job.metadata.namespace, obs.job.metadata.name)
        try:
            if readings is None:
                scaling = Scaling(base_replicas(obs.job), fresh=False)
            else:
                scaling = plan_scaling(obs.job, base_replicas(obs.job), obs.pods, readings.metrics, readings.busy,
                                       now, previous)  # fmt: skip
        except Exception as exc:  # one job's failure must not stop the others
            failed[key] = exc
            continue
        decided.append((key, obs, scaling))
    demands = [d for key, obs, scaling in decided if scaling.fresh and (d := sandbox_demand(key, obs, scaling))]
    harvest: dict[JobKey, HarvestPlan] = {}
    if demands:
        first = next(obs for key, obs, _ in decided if key == demands[0].key)
        harvest = plan_harvest(demands, first.nodes, first.bound_pods, now, first.departed)
    plans = {}
    for key, obs, scaling in decided:
        try:
            plans[key] = (plan_job(obs, now, scaling, harvest.get(key)), scaling)
        except Exception as exc:
            failed[key] = exc
    return plans, failed


def sandbox_pod_info(job: RLJob, sandbox: SandboxPool) -> PodInfo:
    """A sandbox pod as the planners see it: its requests and scheduling constraints."""
    spec = sandbox_template(job, sandbox)["spec"]
    return PodInfo(
        name="template",
        pool=HARVESTED,
        requests=pod_requests(spec),
        node_selector=spec.get("nodeSelector") or {},
        tolerations=tuple(spec.get("tolerations") or ()),
    )


def sandbox_demand(key: JobKey, obs: JobObservation, scaling: Scaling) -> SandboxDemand | None:
    """A harvesting sandbox pool's demand in this pass (None: the job harvests nothing)."""
    job = obs.job
    sandbox = harvested(job)
    if sandbox is None:
        return None
    wanted = scaling.replicas[HARVESTED]
    floor = sandbox.autoscale.min_replicas if sandbox.autoscale is not None else wanted
    own = [p for p in obs.pods if p.pool == HARVESTED and p.harvest]
    return SandboxDemand(key, wanted, min(floor, wanted), sandbox_pod_info(job, sandbox), sandbox.placement,
                         obs.utilization, own)  # fmt: skip


def _with_problem(conditions: Sequence[ConditionUpdate], problem: str | None) -> list[ConditionUpdate]:
    """Add a failed utilization query to the MetricsAvailable condition."""
    if problem is None:
        return list(conditions)
    others = [c for c in conditions if c.type != R.METRICS]
    metrics = next((c for c in conditions if c.type == R.METRICS and c.status == "False"), None)
    if metrics is None:
        return [*others, ConditionUpdate(R.METRICS, "False", R.METRICS_MISSING, problem)]
    return [*others, ConditionUpdate(R.METRICS, "False", metrics.reason, f"{metrics.message}; {problem}")]


def _capacity(limited: Mapping[str, str], harvest: HarvestPlan | None) -> ConditionUpdate:
    reasons, messages = [], [f"{pool}: {why}" for pool, why in sorted(limited.items())]
    if limited:
        reasons.append(R.GPU_BUDGET)
    if harvest is not None and (harvest.no_data or harvest.placed < harvest.wanted):
        reasons.append(R.UTILIZATION_UNKNOWN if harvest.no_data else R.NO_IDLE_CPU)
        messages.append(f"sandbox: {harvest.message}")
    if not reasons:
        return ConditionUpdate(R.CAPACITY, "False", R.WITHIN_CAPACITY, "every pool has the capacity it wants")
    return ConditionUpdate(R.CAPACITY, "True", "And".join(reasons), "; ".join(messages))


def _transitions(old: RLJobStatus, new: RLJobStatus) -> list[Event]:
    """One event per condition whose status or reason changed, so nothing repeats while steady.

    A condition that starts out False is news only when it names a problem (e.g. InsufficientCapacity).
    """
    out = []
    for cond in new.conditions:
        before = find(old.conditions, cond.type)
        if before is not None and (before.status, before.reason) == (cond.status, cond.reason):
            continue
        if cond.reason in R.EXPLAINED:
            continue  # explained by GangReleased / GangRestart / Created events
        bad = (cond.status == "True") == (cond.type in R.PROBLEM_WHEN_TRUE)
        if not bad:
            if before is not None or cond.status == "True":
                out.append(Event("Normal", cond.type if cond.status == "True" else cond.reason, cond.message))
        elif before is not None or cond.reason in R.PROBLEMS:
            out.append(Event("Warning", cond.reason, cond.message))
    return out


def with_apply_errors(status: RLJobStatus, errors: Sequence[str], now: datetime) -> RLJobStatus:
    """Mark the status of a plan whose writes the API server refused (a finished job stays finished)."""
    if not errors:
        return status
    update = ConditionUpdate(R.SYNCED, "False", R.APPLY_FAILED, "; ".join(errors))
    planned = find(status.conditions, R.SYNCED)
    if planned is not None and planned.reason in ROUTER_PROBLEMS:  # kept: between full passes it is held
        said = list(dict.fromkeys([*planned.message.split("; "), *errors]))  # each once, pass after pass
        update = ConditionUpdate(R.SYNCED, "False", planned.reason, "; ".join(said))
    conditions = set_condition(status.conditions, update, now, status.observed_generation)
    phase = status.phase if status.phase in FINISHED else "Error"
    return status.model_copy(update={"phase": phase, "conditions": conditions})
