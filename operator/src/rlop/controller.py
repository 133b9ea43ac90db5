"""The reconcile loop: one level-triggered path for every RLJob (observe -> plan -> apply -> report).

kopf's watches keep the indexes current; events only mark jobs dirty. A pass runs at once for dirty jobs
and every `interval` for all of them. Writes happen only where the plan differs from what is observed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from pydantic import ValidationError

from rlop import metrics
from rlop.api import reasons as R
from rlop.api.models import RLJob, RLJobStatus
from rlop.api.names import (
    COST_ANNOTATION,
    GANG_GATE,
    GROUP_LABEL,
    HASH_ANNOTATION,
    JOB_LABEL,
    PODGROUP_API,
    ROUTER_SUFFIX,
    WEIGHTS_GATE,
)
from rlop.api.pools import serving
from rlop.config import Config
from rlop.engine import EngineClient, EngineError, gather_probes
from rlop.expectations import Expectations, Refusal
from rlop.kube.client import KubeError
from rlop.kube.lease import Lease
from rlop.kube.recorder import Recorder
from rlop.plan.autoscale import Reading
from rlop.plan.groups import failures, members
from rlop.plan.harvest import Departed, JobKey, departures
from rlop.plan.job import JobObservation, JobPlan, owned, plan_pass, with_apply_errors
from rlop.plan.observed import (
    ChildInfo,
    NodeInfo,
    PodInfo,
    child_info,
    controller_owner,
    next_generation,
    owned_by,
    pod_info,
    version,
)
from rlop.plan.readings import Answer, JobReadings, QueryKey, queries, read
from rlop.plan.render import Manifest
from rlop.plan.serving import ServingObservation, Update, suspect, url_of
from rlop.plan.status import (
    COST,
    DELETE_POD,
    DEREGISTER,
    EVICT,
    GATE,
    LOAD,
    MARK,
    REGISTER,
    RELEASE,
    ConditionUpdate,
    Event,
    find,
    set_condition,
)
from rlop.prom.client import Request, Result
from rlop.protocol import Unreadable

log = logging.getLogger("rlop")

# kopf index names (the handler functions in rlop.handlers); values are kopf Stores of snapshots
INDEXES = ("rljob_index", "job_pods", "node_pods", "node_index")
CHILD_INDEXES = ("job_deployments", "job_statefulsets", "job_services", "job_networkpolicies")


class Kube(Protocol):
    """The writes and reads the loop makes besides the watches (rlop.kube.client.KubeClient)."""

    async def apply(self, manifest: Manifest) -> Any: ...
    async def scale(self, kind: str, namespace: str, name: str, replicas: int) -> Any: ...
    async def get(self, kind: str, namespace: str, name: str) -> Any: ...
    async def bound_pods(self) -> list[Any]: ...
    async def list_objects(self, kind: str, namespace: str, selector: str) -> list[Any]: ...
    async def serves(self, kind: str) -> bool: ...
    async def delete(self, kind: str, namespace: str, name: str) -> None: ...
    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> Any: ...
    async def evict(self, namespace: str, pod: str) -> None: ...
    async def annotate_pod(self, namespace: str, pod: str, annotations: Mapping[str, str]) -> None: ...
    async def remove_scheduling_gate(self, namespace: str, pod: str, gate: str) -> None: ...
    async def set_pod_condition(
        self, namespace: str, pod: str, type_: str, status: str, reason: str, message: str, flipped: bool
    ) -> None: ...
    async def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None: ...
    async def close(self) -> None: ...


class Prometheus(Protocol):
    """One interval's queries, answered (rlop.prom.client.PrometheusClient)."""

    async def read(self, requests: Sequence[Request]) -> Mapping[Hashable, Result]: ...
    async def close(self) -> None: ...


# one write, by (kind, name) and the metric label it counts under: True if done (a 404 is done too)
Attempt = Callable[[tuple[str, str], str, Awaitable[Any]], Awaitable[bool]]


@dataclass(frozen=True)
class Observed:
    """One job as this pass sees it: its object, the model, the observation and the readings (None between
    full passes)."""

    body: Mapping[str, Any]
    job: RLJob
    obs: JobObservation
    got: JobReadings | None


@dataclass(frozen=True)
class Planned:
    plan: JobPlan
    obs: JobObservation
    readings: JobReadings  # what the plan was made from (empty between full passes)
    seconds: float  # spent planning


@dataclass
class ClusterView:
    """Nodes and every placed pod, once per pass (with the pods rlop created that the watch has not shown)."""

    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[PodInfo] = field(default_factory=list)


class Controller:
    def __init__(
        self, kube: Kube, prom: Prometheus, cfg: Config, lease: Lease | None = None, engine: EngineClient | None = None
    ) -> None:
        self.kube = kube
        self.prom = prom
        self.engine = engine or EngineClient()  # the serving pools' servers and routers
        self.tasks: set[asyncio.Task[None]] = set()
        self.recorder = Recorder(kube.event)  # events are posted off the pass, as client-go does
        self.cfg = cfg
        self.lease = lease
        self.leading = lease is None
        self.expect = Expectations()
        self.last_full: datetime | None = None  # when this replica's previous full pass decided
        self.harvested: list[PodInfo] = []  # the harvest pods the previous full pass saw
        self.departed: list[Departed] = []  # harvest pods gone lately (their load fades from the utilization)
        self.indexes: Mapping[str, Any] | None = None
        self.dirty: set[JobKey] = set()
        self.wake = asyncio.Event()
        self.native = False  # kube-scheduler places trainer gangs (it serves PodGroups): decided at start
        # each job's object parsed once per resourceVersion: validating the model is a fifth of a quiet pass
        self.parsed: dict[JobKey, tuple[tuple[str, str], RLJob | ValidationError]] = {}

    def poke(self, key: JobKey, kwargs: Mapping[str, Any]) -> None:
        """Mark a job dirty. kopf hands the (live) indexes to every handler; keep a reference once."""
        if self.indexes is None:
            self.indexes = {name: kwargs[name] for name in INDEXES + CHILD_INDEXES}
        self.dirty.add(key)
        self.wake.set()

    async def detect(self) -> None:
        """Who places trainer gangs: kube-scheduler where the API server serves PodGroups (and --gang-scheduler
        is auto), else rlop's own fit check. Said once, in the log and rlop_gang_scheduler."""
        if self.cfg.gang_scheduler == "auto":
            try:
                self.native = await self.kube.serves("PodGroup")
            except KubeError as exc:
                log.warning("Could not tell whether %s PodGroups are served (%s): rlop places gangs", PODGROUP_API, exc)
        chosen = "kube-scheduler" if self.native else "rlop"
        metrics.GANG_SCHEDULER.labels(chosen).set(1)
        how = f"{PODGROUP_API} PodGroups" if self.native else "its own fit check: no PodGroup API served, or not asked"
        log.info("Trainer gangs are placed by %s (%s)", chosen, how)

    async def run(self) -> None:
        await self.detect()
        self.spawn(self.recorder.run())
        next_full = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), max(0.0, next_full - time.monotonic()))
            self.wake.clear()
            if self.indexes is None:
                next_full = time.monotonic() + self.cfg.interval
                continue
            full = time.monotonic() >= next_full
            if full:
                next_full = time.monotonic() + self.cfg.interval
            if not self.may_act():
                continue  # a standby: keep watching, act once the Lease is ours
            keys, self.dirty = (set(self.jobs()) | self.dirty) if full else self.dirty, set()
            started = time.perf_counter()
            try:
                await self.reconcile_all(sorted(keys), full)
            except Exception:  # the loop must outlive any bug in one pass
                log.exception("Reconcile pass failed")
                metrics.RECONCILE_ERRORS.inc()
            if full:
                metrics.PASS_SECONDS.observe(time.perf_counter() - started)

    def may_act(self) -> bool:
        """Without leader election, always; with it, while the Lease is ours. Memory of our own recent
        writes is dropped on every change of leadership: another replica may have written since."""
        leading = self.lease is None or self.lease.is_leader()
        if leading != self.leading:
            self.leading = leading
            self.expect.clear()
            self.last_full, self.harvested, self.departed = None, [], []
            if leading:
                self.dirty |= set(self.jobs())
        return leading

    def jobs(self) -> Iterable[JobKey]:
        return list(self.indexes["rljob_index"].keys()) if self.indexes else []

    async def reconcile_all(self, keys: Sequence[JobKey], full: bool = False) -> None:
        """Reconcile `keys`; a full pass also reads the metrics and lets the autoscaler decide.

        Plans are made one job after the other (each sees the pods the previous ones will create), then
        their writes run concurrently, `cfg.concurrency` jobs at a time.
        """
        began = time.perf_counter()
        jobs = {key: self.load(key) for key in keys}
        answers = await self.read_metrics(jobs) if full else None
        now = datetime.now(UTC).replace(microsecond=0)
        limit = asyncio.Semaphore(self.cfg.concurrency)
        view = await self.cluster_view(jobs)
        podgroups = await self.podgroups(jobs) if self.native else {}
        if full:
            current = [p for p in view.pods if p.harvest]
            self.departed, self.harvested = departures(self.harvested, current, self.departed, now), current
        work = []
        inputs: dict[JobKey, Observed] = {}
        for key, loaded in jobs.items():
            if loaded is None:
                continue
            body, job = loaded
            if isinstance(job, ValidationError):
                work.append(self.report_invalid(body, job, now))
                continue
            try:
                got = read(job, answers.get(key, {})) if answers is not None else None
            except Exception as exc:  # one job's failure must not stop the others
                work.append(self.planning_failed(key, body, exc, now))
                continue
            shown = got or JobReadings()
            obs = self.observe(key, job, view, shown.utilization, shown.utilization_error, podgroups.get(key, ()))
            inputs[key] = Observed(body, job, obs, got)
        # what the serving pools' servers and routers say: every full pass, and at once for a job whose
        # replica's server went down or restarted (it would be routed to, and Ready again, with whatever
        # weights the new process has, until it is judged)
        looking = [key for key, o in inputs.items() if full or any(suspect(p) for p in o.obs.pods)
                   or broken(o.job, o.obs)]  # fmt: skip
        looks = await asyncio.gather(*(self.look(inputs[k].job, inputs[k].obs, inputs[k].got) for k in looking))
        for key, seen in zip(looking, looks, strict=True):
            inputs[key] = replace(inputs[key], obs=replace(inputs[key].obs, serving=seen))
        started = time.perf_counter()
        plans, failed = plan_pass([(o.obs, o.got) for o in inputs.values()], now, self.last_full)
        seconds = (time.perf_counter() - started) / max(1, len(inputs))
        for key, o in inputs.items():
            if key in failed:
                work.append(self.planning_failed(key, o.body, failed[key], now))
                continue
            plan, _ = plans[key]
            for manifest in plan.apply:  # counted from now on, until the watch shows them
                if manifest["kind"] == "Pod":
                    self.expect.creating(key[0], pod_info(manifest))
            planned = Planned(plan, o.obs, o.got or JobReadings(), seconds)
            work.append(self.commit(limit, key, o.body, o.job, planned, now, full))
        if full:
            self.last_full = now
        writing = time.perf_counter()
        with self.recorder.held() if full else contextlib.nullcontext():  # a full pass's events follow its writes
            await asyncio.gather(*work)
        if full:
            metrics.set_harvest(view.pods)
            for phase, spent in (("read", started - began), ("plan", writing - started),
                                 ("write", time.perf_counter() - writing)):  # fmt: skip
                metrics.PHASE_SECONDS.labels(phase).observe(spent)

    # ------------------------------------------------------------------ one job

    def load(self, key: JobKey) -> tuple[Mapping[str, Any], RLJob | ValidationError] | None:
        """The job as last seen, with the status rlop last wrote (the watch may not have caught up)."""
        store = (self.indexes or {}).get("rljob_index", {}).get(key)
        if not store:
            self.expect.forget_job(key)
            self.parsed.pop(key, None)
            metrics.forget(*key)
            return None  # deleted: owner references let the garbage collector remove the children
        body = next(iter(store))
        job = self.parse(key, body)
        if isinstance(job, ValidationError):
            return body, job
        if (status := self.expect.status(key, job.metadata.uid)) is not None:
            job = job.model_copy(update={"status": status})
        return body, job

    def parse(self, key: JobKey, body: Mapping[str, Any]) -> RLJob | ValidationError:
        """The model of `body`, parsed again only when its uid or resourceVersion changed (never mutated)."""
        meta = body.get("metadata", {})
        version = (str(meta.get("uid", "")), str(meta.get("resourceVersion", "")))
        cached = self.parsed.get(key)
        if cached is not None and cached[0] == version and version[1]:
            return cached[1]
        try:
            job: RLJob | ValidationError = RLJob.model_validate(body)
        except ValidationError as exc:
            job = exc
        self.parsed[key] = (version, job)
        return job

    async def read_metrics(self, jobs: Mapping[JobKey, Any]) -> dict[JobKey, dict[QueryKey, Answer]]:
        """One interval's answers to every job's queries (one HTTP request per distinct template)."""
        requests = []
        for (ns, name), loaded in jobs.items():
            if loaded is not None and isinstance(loaded[1], RLJob):
                requests += [Request((ns, name, q.key), q.template, ns, name, q.pool) for q in queries(loaded[1])]
        results = await self.prom.read(requests) if requests else {}
        out: dict[JobKey, dict[QueryKey, Answer]] = {}
        for request_key, result in results.items():
            ns, name, qkey = cast(tuple[str, str, QueryKey], request_key)
            out.setdefault((ns, name), {})[qkey] = result
        return out

    async def cluster_view(self, jobs: Mapping[JobKey, Any]) -> ClusterView:
        """Nodes and every placed pod, once per pass.

        Watching only some namespaces, the pod watch misses the rest of the cluster: before a gang may be
        released, every bound pod is listed once, so the capacity check counts them all.
        """
        idx = self.indexes or {}
        nodes: list[NodeInfo] = [n for store in idx["node_index"].values() for n in store]
        pods = [p for store in idx["node_pods"].values() for p in store]
        gated = any(p.gated for key in jobs for p in idx["job_pods"].get(key, []))
        if self.cfg.namespaced and gated:
            seen = {(p.namespace, p.name) for p in pods}
            listed = [pod_info(body) for body in await self.kube.bound_pods()]
            pods += [p for p in listed if not p.terminal and (p.namespace, p.name) not in seen]
        return ClusterView(nodes, self.expect.pods(pods))

    async def podgroups(self, jobs: Mapping[JobKey, Any]) -> dict[JobKey, list[ChildInfo]]:
        """The jobs' PodGroups (not watched: the API is alpha and may not be served), listed once per pass."""
        namespaces = sorted({ns for ns, _ in jobs})
        listed = await asyncio.gather(*(self.kube.list_objects("PodGroup", ns, JOB_LABEL) for ns in namespaces),
                                      return_exceptions=True)  # fmt: skip
        out: dict[JobKey, list[ChildInfo]] = {}
        for ns, found in zip(namespaces, listed, strict=True):
            if isinstance(found, BaseException):
                log.warning("Listing PodGroups in %s failed: %s", ns, found)
                continue
            for body in found:
                job = ((body.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL, "")
                out.setdefault((ns, job), []).append(child_info(body))
        return out

    def observe(
        self, key: JobKey, job: RLJob, view: ClusterView, utilization: Mapping[str, float] | None, problem: str | None,
        podgroups: Sequence[ChildInfo] = (),
    ) -> JobObservation:  # fmt: skip
        idx = self.indexes or {}
        labelled: dict[tuple[str, str], ChildInfo] = {
            (c.kind, c.name): c for name in CHILD_INDEXES for c in idx[name].get(key, [])
        }
        labelled |= {(c.kind, c.name): c for c in podgroups}
        owned_children, pods = owned(job, labelled, list(idx["job_pods"].get(key, [])))
        children = self.expect.children(key, owned_children)
        written = self.expect.versions(key, children)
        pods = self.expect.pods(pods, job=key)
        return JobObservation(job, children, pods, view.nodes, view.pods, utilization, problem, written, self.departed,
                              native_gangs=self.native)  # fmt: skip

    async def look(self, job: RLJob, obs: JobObservation, got: JobReadings | None) -> dict[str, ServingObservation]:
        """Each tracked serving pool's replicas (the version they serve, the requests they run), its router's
        workers and the trainer's version (between full passes: the last one read, from the status)."""
        out = {}
        ns = job.metadata.namespace
        for pool, spec in serving(job):
            if not spec.per_replica:
                continue
            live = [p for p in obs.pods if p.pool == pool and p.leads and p.ip and not p.deleting and not p.terminal]
            targets = {p.name: url_of(p, spec.port) for p in live}
            probes = await gather_probes(self.engine, targets, spec.engine, spec.weights is not None)
            # the router by its pod's IP: a name lookup would wait on kopf's busy thread pool
            routers = [p for p in obs.pods if p.pool == f"{pool}-{ROUTER_SUFFIX}" and p.ip and p.ready
                       and not p.deleting]  # fmt: skip
            router = url_of(routers[0], spec.router.port) if spec.router and routers else ""
            workers, problem = None, None
            if router:
                try:
                    workers = await self.engine.workers(router)
                except EngineError as exc:  # no answer (0): held, as a router that is not Ready; else said
                    if exc.status:
                        problem = (R.ROUTER_FAILED, f"the router at {router} answered its listing with {exc}")
                except Unreadable as exc:
                    problem = (R.ROUTER_UNSUPPORTED, str(exc))
            last = job.status.policy_version if job.status else None
            policy = got.versions.get(pool) if got is not None else Reading(float(last)) if last is not None else None
            updating = self.expect.loading(ns)
            out[pool] = ServingObservation(probes, workers, router, policy, updating, problem)
        return out

    async def load_weights(self, job: RLJob, update: Update) -> None:
        """Tell one replica to load a version, in the background (a checkpoint takes a while to load); a
        failure is reported and retried after a pause."""
        key = (job.metadata.namespace, update.pod)
        try:
            await self.engine.load_weights(update.url, update.model_path, update.version)
            metrics.API_WRITES.labels("weights-update").inc()
            log.info("%s/%s loaded v%d", *key, update.version)
        except EngineError as exc:
            ref = {"apiVersion": job.api_version, "kind": job.kind, "metadata": job.metadata.model_dump()}
            message = f"{update.pod} could not load v{update.version} from {update.model_path}: {exc.message}"
            self.recorder.record(ref, Event("Warning", R.WEIGHTS_UPDATE_FAILED, message))
            await asyncio.sleep(self.cfg.interval * 5)
        finally:
            self.expect.loaded(*key, update.version)

    async def planning_failed(self, key: JobKey, body: Mapping[str, Any], exc: Exception, now: datetime) -> None:
        log.error("Planning RLJob %s/%s failed", *key, exc_info=exc)
        metrics.RECONCILE_ERRORS.inc()
        await self.report_problem(body, R.PLANNING_FAILED, f"{type(exc).__name__}: {exc}", now)

    async def commit(
        self, limit: asyncio.Semaphore, key: JobKey, body: Mapping[str, Any], job: RLJob, planned: Planned,
        now: datetime, full: bool,
    ) -> None:  # fmt: skip
        """Carry out one job's plan and report it: writes, status, events, rlop's own metrics."""
        plan = planned.plan
        async with limit:
            started = time.perf_counter() - planned.seconds  # the job's own time: planning + writes, not queueing
            if not self.may_act():
                return  # lost the Lease mid-pass: another replica acts now
            try:
                refusals, done, corrected = await self.execute(job, plan, planned.obs)
                if full:  # sandbox pods are placed and evicted in full passes only: refusals hold until the next
                    self.expect.hold(key, [r for r in refusals if r.kind in ("Pod", EVICT, MARK)])
                else:
                    refusals += self.expect.held(key)
                errors = [r.why for r in refusals]
                status = with_apply_errors(plan.status, errors, now)
                await self.write_status(job, status)
                metrics.set_pools(*key, status)
                for (pool, i), r in planned.readings.metrics.items():
                    metrics.set_metric(*key, pool, i, r.value)
                for event in [*plan.events, *corrected]:
                    if not done.issuperset(event.needs):
                        continue  # refused, or written moments ago by an earlier pass that said so
                    if event.pool is not None and event.reason in (R.SCALED_UP, R.SCALED_DOWN):
                        direction = "up" if event.reason == R.SCALED_UP else "down"
                        metrics.SCALE_DECISIONS.labels(*key, event.pool, direction).inc()
                    self.recorder.record(body, event)
                before = find(job.status.conditions if job.status else [], R.SYNCED)
                joined = "; ".join(errors)
                if errors and (before is None or before.reason != R.APPLY_FAILED or before.message != joined):
                    for error in errors:  # once per new refusal, not every pass
                        self.recorder.record(body, Event("Warning", R.APPLY_FAILED, error))
            except Exception:  # one job's failure must not stop the others
                log.exception("Reconcile of RLJob %s/%s failed", *key)
                metrics.RECONCILE_ERRORS.inc()
            metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)

    async def execute(
        self, job: RLJob, plan: JobPlan, obs: JobObservation
    ) -> tuple[list[Refusal], set[tuple[str, str]], list[Event]]:
        """Carry out the plan's writes; return what was refused (reported, not raised), what was applied
        and the drift that was corrected."""
        ns, done, corrected = job.metadata.namespace, set(), []
        errors: list[Refusal] = []
        key = (ns, job.metadata.name)

        async def attempt(key: tuple[str, str], metric: str, call: Awaitable[Any]) -> bool:
            """One write: a refusal is recorded, never raised; a 404 means the object is gone: done."""
            try:
                await call
            except (KubeError, EngineError) as exc:
                if exc.status != 404:
                    errors.append(Refusal(*key, f"{key[0]} {key[1]}: {exc.message}"))
                    return False
            done.add(key)
            metrics.API_WRITES.labels(metric).inc()
            return True

        for pod, cost in plan.pod_costs.items():  # before the scale-down, so the right pods go
            await attempt((COST, pod), "deletion-cost",
                          self.kube.annotate_pod(ns, pod, {COST_ANNOTATION: str(cost)}))  # fmt: skip
        for manifest in plan.apply:
            child = (manifest["kind"], manifest["metadata"]["name"])
            digest = manifest["metadata"]["annotations"][HASH_ANNOTATION]
            try:  # not attempt(): an apply returns the version it left, and a 404 (no namespace) is a refusal
                named = child[0] != "Pod" or GROUP_LABEL in manifest["metadata"]["labels"]  # not a random name
                if child not in obs.children and named and (taken := await self.taken(job, *child)):
                    errors.append(Refusal(*child, taken))
                    continue
                result = await self.kube.apply(manifest)
            except KubeError as exc:
                errors.append(Refusal(*child, f"{child[0]} {child[1]}: {exc.message}"))
                if child[0] == "Pod":
                    self.expect.created(ns, child[1], ok=False)
                continue
            after = version(result or {})
            self.expect.applied(key, child, digest, after, (manifest.get("spec") or {}).get("replicas"))
            done.add(child)
            if child[0] == "Pod":
                self.expect.created(ns, child[1], ok=True)
            elif child in plan.drift and after != obs.children[child].version:
                message = f"reverted {child[0]} {child[1]}: its spec was changed outside rlop"
                corrected.append(Event("Normal", R.DRIFT_CORRECTED, message))
            metrics.API_WRITES.labels("apply").inc()
        for manifest in plan.scale:
            child, replicas = (manifest["kind"], manifest["metadata"]["name"]), manifest["spec"]["replicas"]
            if await attempt(child, "scale", self.kube.scale(child[0], ns, child[1], replicas)):
                after = next_generation(obs.children[child].version)
                self.expect.applied(key, child, manifest["metadata"]["annotations"][HASH_ANNOTATION], after, replicas)
        for kind, name in plan.delete:
            await attempt((kind, name), "delete", self.kube.delete(kind, ns, name))

        await self.serve(job, plan, obs, attempt, done)
        uids = {p.name: p.uid for p in obs.pods}
        for pod, _ in plan.delete_pods:
            if await attempt((DELETE_POD, pod), "delete-pod", self.kube.delete("Pod", ns, pod)):
                self.expect.removed(ns, pod, uids.get(pod, ""))
        for pod, mark in plan.marks.items():
            if await attempt((MARK, pod), "mark", self.kube.annotate_pod(ns, pod, mark)):
                self.expect.marked(ns, pod, uids.get(pod, ""), mark)
        for pod, _ in plan.evict:  # refused with 429 (a PodDisruptionBudget says not now): tried next interval
            if await attempt((EVICT, pod), "evict", self.kube.evict(ns, pod)):
                self.expect.removed(ns, pod, uids.get(pod, ""))
        for pod in plan.release:
            await attempt((RELEASE, pod), "release", self.kube.remove_scheduling_gate(ns, pod, GANG_GATE))
        return errors, done, corrected

    async def serve(
        self, job: RLJob, plan: JobPlan, obs: JobObservation, attempt: Attempt, done: set[tuple[str, str]]
    ) -> None:
        """The serving pools' part of a plan: readiness gates, then the router, then weight loads."""
        ns, status = job.metadata.namespace, {p.name: p.weights_current for p in obs.pods}
        for pool, sp in plan.serving.items():
            for pod, g in sp.gates.items():
                call = self.kube.set_pod_condition(ns, pod, WEIGHTS_GATE, g.status, g.reason, g.message,
                                                   g.restamp or status.get(pod) != g.status)  # fmt: skip
                await attempt((GATE, pod), "weights-gate", call)
            base = (obs.serving or {}).get(pool, ServingObservation()).router
            for _, url, worker in sp.deregister:
                await attempt((DEREGISTER, url), "router", self.engine.deregister(base, worker))
            for pod, url in sp.register:
                await attempt((REGISTER, pod), "router", self.engine.register(base, url))
            for update in sp.updates:
                self.expect.load(ns, update.pod, update.version)
                self.spawn(self.load_weights(job, update))
                done.add((LOAD, update.pod))

    async def taken(self, job: RLJob, kind: str, name: str) -> str | None:
        """Why a child's name is not free: an object rlop did not create for this job has it."""
        found = await self.kube.get(kind, job.metadata.namespace, name)
        if found is None or owned_by(controller_owner(found.get("metadata") or {}), job.metadata.uid):
            return None
        return f"{kind} {name} already exists and was not created by rlop for this RLJob: rlop does not take it over"

    async def write_status(self, job: RLJob, status: RLJobStatus) -> None:
        new = status.model_dump(mode="json", exclude_none=True)
        old = job.status.model_dump(mode="json", exclude_none=True) if job.status else None
        if new != old:
            await self.kube.patch_status(job.metadata.namespace, job.metadata.name, _with_nulls(new, old))
            self.expect.wrote_status((job.metadata.namespace, job.metadata.name), job.metadata.uid, status)
            metrics.API_WRITES.labels("status").inc()

    async def report_invalid(self, body: Mapping[str, Any], exc: ValidationError, now: datetime) -> None:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        await self.report_problem(body, R.INVALID_SPEC, problems, now)

    async def report_problem(self, body: Mapping[str, Any], reason: str, message: str, now: datetime) -> None:
        """A job rlop cannot plan: Synced=False with the reason, and one event when it changes."""
        meta = body["metadata"]
        key = (meta["namespace"], meta["name"])
        try:
            old = self.expect.status(key, meta.get("uid")) or RLJobStatus.model_validate(body.get("status") or {})
            update = ConditionUpdate(R.SYNCED, "False", reason, message)
            conditions = set_condition(old.conditions, update, now, meta.get("generation"))
            status = old.model_copy(update={"phase": "Error", "conditions": conditions})
            if status != old:
                await self.kube.patch_status(meta["namespace"], meta["name"], status.model_dump(mode="json"))
                self.expect.wrote_status(key, meta.get("uid"), status)
                self.recorder.record(body, Event("Warning", reason, message))
        except (KubeError, ValidationError) as exc:
            log.warning("Could not report %s on %s/%s: %s", reason, meta["namespace"], meta["name"], exc)

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` beside the passes, holding a reference until it ends."""
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)


def broken(job: RLJob, obs: JobObservation) -> bool:
    """Has a multi-node replica of `job` lost a rank? Its leader leaves the router in this very pass."""
    return any(failures(spec, members(pool, obs.pods), obs.nodes) for pool, spec in serving(job) if spec.grouped)


def _with_nulls(new: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
    """A merge patch from `old` to `new`: keys that disappeared are set to null (removed)."""
    if old is None:
        return new
    out: dict[str, Any] = dict(new)
    for key, value in old.items():
        if key not in new:
            out[key] = None
        elif isinstance(value, dict) and isinstance(new[key], dict):
            out[key] = _with_nulls(new[key], value)
    return out
