"""The reconcile loop: one level-triggered path for every RLJob (observe -> plan -> apply -> report).

kopf's watches keep the indexes current; events only mark jobs dirty. A pass runs at once for dirty jobs
and every `interval` for all of them. Writes happen only where the plan differs from what is observed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from rlop import metrics
from rlop.api.models import RLJob, RLJobStatus
from rlop.config import Config
from rlop.kube.client import Kube, KubeError
from rlop.plan.job import JobObservation, JobPlan, plan_job, with_apply_errors
from rlop.plan.observed import ChildInfo, NodeInfo, PodInfo
from rlop.plan.render import GANG_GATE
from rlop.plan.status import SYNCED, Event, set_condition

log = logging.getLogger("rlop")
JobKey = tuple[str, str]  # (namespace, name)

# kopf index names (the handler functions in rlop.handlers); values are kopf Stores of snapshots
INDEXES = ("rljob_index", "job_pods", "node_pods", "node_index")
CHILD_INDEXES = ("job_deployments", "job_statefulsets", "job_services")


class Controller:
    def __init__(self, kube: Kube, cfg: Config) -> None:
        self.kube = kube
        self.cfg = cfg
        self.indexes: Mapping[str, Any] | None = None
        self.dirty: set[JobKey] = set()
        self.wake = asyncio.Event()

    def poke(self, key: JobKey, kwargs: Mapping[str, Any]) -> None:
        """Mark a job dirty. kopf hands the (live) indexes to every handler; keep a reference once."""
        if self.indexes is None:
            self.indexes = {name: kwargs[name] for name in INDEXES + CHILD_INDEXES}
        self.dirty.add(key)
        self.wake.set()

    async def run(self) -> None:
        next_full = time.monotonic()
        while True:
            timeout = max(0.0, next_full - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout)
            self.wake.clear()
            if self.indexes is None:
                next_full = time.monotonic() + self.cfg.interval
                continue
            if time.monotonic() >= next_full:
                keys = set(self.jobs())
                next_full = time.monotonic() + self.cfg.interval
            else:
                keys = set()
            keys |= self.dirty
            self.dirty = set()
            await self.reconcile_all(sorted(keys))

    def jobs(self) -> Iterable[JobKey]:
        return list(self.indexes["rljob_index"].keys()) if self.indexes else []

    async def reconcile_all(self, keys: Iterable[JobKey]) -> None:
        for key in keys:
            started = time.perf_counter()
            try:
                await self.reconcile(key)
            except Exception:  # one job's failure must not stop the others
                log.exception("Reconcile of RLJob %s/%s failed", *key)
                metrics.RECONCILE_ERRORS.inc()
            metrics.RECONCILE_SECONDS.observe(time.perf_counter() - started)

    # ------------------------------------------------------------------ one job

    def observe(self, key: JobKey, job: RLJob) -> JobObservation:
        idx = self.indexes or {}
        children: dict[tuple[str, str], ChildInfo] = {
            (c.kind, c.name): c for name in CHILD_INDEXES for c in idx[name].get(key, [])
        }
        nodes: list[NodeInfo] = [n for store in idx["node_index"].values() for n in store]
        bound: list[PodInfo] = [p for store in idx["node_pods"].values() for p in store]
        return JobObservation(
            job=job,
            children=children,
            pods=list(idx["job_pods"].get(key, [])),
            nodes=nodes,
            bound_pods=bound,
        )

    async def reconcile(self, key: JobKey) -> None:
        store = (self.indexes or {}).get("rljob_index", {}).get(key)
        if not store:
            return  # deleted: owner references let the garbage collector remove the children
        body = next(iter(store))
        now = datetime.now(UTC).replace(microsecond=0)
        try:
            job = RLJob.model_validate(body)
        except ValidationError as exc:
            await self.report_invalid(body, exc, now)
            return
        plan = plan_job(self.observe(key, job), now)
        errors = await self.execute(job, plan)
        status = with_apply_errors(plan.status, errors, now)
        await self.write_status(job, status)
        for event in plan.events:
            await self.post(body, event)
        for error in errors:
            await self.post(body, Event("Warning", "ApplyFailed", error))

    async def execute(self, job: RLJob, plan: JobPlan) -> list[str]:
        """Carry out the plan's writes; return what the API server refused (reported, not raised)."""
        ns, errors = job.metadata.namespace, []
        for manifest in plan.apply:
            try:
                await self.kube.apply(manifest)
                metrics.API_WRITES.labels("apply").inc()
            except KubeError as exc:
                errors.append(f"{manifest['kind']} {manifest['metadata']['name']}: {exc.message}")
        for kind, name in plan.delete:
            await self.kube.delete(kind, ns, name)
            metrics.API_WRITES.labels("delete").inc()
        for pod in plan.restart:
            await self.kube.delete("Pod", ns, pod)
            metrics.API_WRITES.labels("restart").inc()
        for pod in plan.release:
            await self.kube.remove_scheduling_gate(ns, pod, GANG_GATE)
            metrics.API_WRITES.labels("release").inc()
        return errors

    async def write_status(self, job: RLJob, status: RLJobStatus) -> None:
        new = status.model_dump(mode="json", exclude_none=True)
        old = job.status.model_dump(mode="json", exclude_none=True) if job.status else None
        if new != old:
            await self.kube.patch_status(job.metadata.namespace, job.metadata.name, new)
            metrics.API_WRITES.labels("status").inc()

    async def report_invalid(self, body: Mapping[str, Any], exc: ValidationError, now: datetime) -> None:
        meta = body["metadata"]
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        old = RLJobStatus.model_validate(body.get("status") or {})
        conditions = set_condition(
            old.conditions, SYNCED, "False", "InvalidSpec", problems, now, meta.get("generation")
        )
        status = old.model_copy(update={"phase": "Error", "conditions": conditions})
        if status != old:
            await self.kube.patch_status(meta["namespace"], meta["name"], status.model_dump(mode="json"))
            await self.post(body, Event("Warning", "InvalidSpec", problems))

    async def post(self, body: Mapping[str, Any], event: Event) -> None:
        try:
            await self.kube.event(body, event.type, event.reason, event.message)
        except KubeError as exc:  # events are best effort
            log.warning("Could not post event %s: %s", event.reason, exc)
        log.info(
            "%s/%s %s: %s",
            body["metadata"]["namespace"],
            body["metadata"]["name"],
            event.reason,
            event.message,
        )
