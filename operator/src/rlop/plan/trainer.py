"""The trainer gang's life (pure): when it has failed, restarts, gives up, or is done.

A distributed trainer cannot go on without one of its ranks: any rank's failure restarts the whole gang
(a new pod template, so every pod is recreated and released together through the gang gate), up to
``failurePolicy.maxRestarts``, with a doubling backoff. Only the running gang counts: the pods of the
StatefulSet revision it was released at. Every rank exiting 0 is the job's success.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter

from rlop.api import reasons as R
from rlop.api.models import FINISHED, Phase, RankFailure, RLJob, TrainerStatus
from rlop.plan.observed import ChildInfo, NodeInfo, PodInfo
from rlop.plan.status import MARK, ConditionUpdate, Event, rfc3339


@dataclass(frozen=True)
class Failure:
    reason: str  # R.POD_DELETED, R.POD_FAILED, R.NODE_LOST, R.OOM_KILLED or R.EXIT_CODE
    pod: str
    rank: int | None
    message: str


@dataclass(frozen=True)
class TrainerPlan:
    status: TrainerStatus
    restarts: int  # what the trainer's pod template carries
    phase: Phase | None = None  # Succeeded or Failed: the job is over
    hold: str | None = None  # why the gang is not released yet (the backoff after a restart)
    marks: Mapping[str, str] = field(default_factory=dict)  # pod -> its checkpoint-now mark
    events: list[Event] = field(default_factory=list)
    conditions: list[ConditionUpdate] = field(default_factory=list)


def rank_failure(
    gang: Sequence[PodInfo],
    replicas: int,
    nodes: Sequence[NodeInfo],
    started: datetime | None,
    rank_of: Callable[[PodInfo], int | None] = attrgetter("index"),
    servers: bool = False,
) -> Failure | None:
    """The failure of the running gang (released at `started`; None: its pods are never recreated by anyone
    but rlop): the first pod deleted, failed or on a lost node in rank order, else the container that exited
    first (the other ranks of a collective die of it later), ties in rank order; `servers`: its pods serve
    until stopped, so a container that exited at all (code 0 too: the kubelet restarted it) has failed."""
    by_rank = sorted(gang, key=lambda p: (rank_of(p) is None, rank_of(p) or 0, p.name))
    ready_nodes = {n.name: n.ready for n in nodes}
    since = rfc3339(started) if started is not None else None
    exited: list[tuple[str, int, Failure]] = []
    for i, pod in enumerate(by_rank):
        rank = rank_of(pod)
        if pod.deleting or (since is not None and pod.created > since):
            why = f" ({pod.disruption})" if pod.disruption else ""
            return Failure(R.POD_DELETED, pod.name, rank, f"pod {pod.name} was deleted{why}")
        if pod.phase == "Failed" or (servers and pod.terminal):
            return Failure(R.POD_FAILED, pod.name, rank, f"pod {pod.name} failed")
        if pod.node and nodes and not ready_nodes.get(pod.node, False):
            state = "NotReady" if pod.node in ready_nodes else "gone"
            return Failure(R.NODE_LOST, pod.name, rank, f"node {pod.node} of pod {pod.name} is {state}")
        for e in pod.exits:
            if e.code != 0 or servers:
                oom = e.reason == "OOMKilled"
                what = "was OOMKilled" if oom else f"exited with code {e.code}" + (f" ({e.reason})" if e.reason else "")
                detail = f"container {e.container} of pod {pod.name} {what}" + (f": {e.message}" if e.message else "")
                exited.append(
                    (e.finished or "~", i, Failure(R.OOM_KILLED if oom else R.EXIT_CODE, pod.name, rank, detail))
                )
    if exited:
        return min(exited, key=lambda x: x[:2])[2]
    ranks = {rank_of(p) for p in gang}
    missing = sorted(set(range(replicas)) - ranks)
    if missing:
        return Failure(R.POD_DELETED, "", missing[0], f"rank {missing[0]}'s pod is gone")
    return None


def completed(gang: Sequence[PodInfo], replicas: int) -> bool:
    """Has every rank's every container exited 0 (and none otherwise)?"""
    ranks = [p for p in gang if not p.deleting]
    return len({p.index for p in ranks}) >= replicas > 0 and all(
        len({e.container for e in p.exits}) >= p.containers > 0 and all(e.code == 0 for e in p.exits) for p in ranks
    )


def _cordoned(gang: Sequence[PodInfo], nodes: Sequence[NodeInfo]) -> list[str]:
    """The nodes of the gang a drain has begun on (cordoned while Ready)."""
    mine = {p.node for p in gang if p.node}
    return sorted(n.name for n in nodes if n.name in mine and n.ready and not n.schedulable)


def plan_trainer(
    job: RLJob, pods: Sequence[PodInfo], statefulset: ChildInfo | None, nodes: Sequence[NodeInfo], now: datetime
) -> TrainerPlan:
    """Follow the trainer gang: record its release, restart it on a rank's failure, end the job when it
    fails past maxRestarts or completes; ask it to checkpoint when a drain begins on one of its nodes."""
    replicas = 0 if job.spec.suspend else job.spec.pools.trainer.replicas
    old = (job.status.trainer if job.status else None) or TrainerStatus()
    if job.status is not None and job.status.phase in FINISHED:
        return TrainerPlan(old, old.restarts, job.status.phase)
    status = old
    observed = statefulset.restarts if statefulset is not None else None
    if observed is not None and observed > old.restarts:  # restarted, but the status was not written (a crash)
        status = TrainerStatus(restarts=observed, last_failure=old.last_failure)
    if replicas == 0 and status.started is not None:  # suspended: the gang is stopped, not failed
        status = status.model_copy(update={"started": None, "revision": None})
    revision = statefulset.update_revision if statefulset is not None and statefulset.up_to_date else None
    gang = [p for p in pods if revision and p.revision == revision and (p.index is None or p.index < replicas)]
    if revision and replicas and status.started is not None and status.revision == revision:
        if completed(gang, replicas):
            message = f"all {replicas} trainer ranks exited 0: the job is done, every pool is scaled to 0"
            done = ConditionUpdate(R.COMPLETE, "True", R.COMPLETED, message)
            return TrainerPlan(status, status.restarts, "Succeeded", events=[Event("Normal", R.COMPLETED, message)],
                               conditions=[done])  # fmt: skip
        if (failure := rank_failure(gang, replicas, nodes, status.started)) is not None:
            return _failed(job, status, failure, now)
    elif revision and replicas and len(gang) >= replicas and not any(p.gated for p in gang):
        status = status.model_copy(update={"started": now, "revision": revision})  # released (the record was lost)
    marks, events = _checkpoint_now(status, gang, nodes, now)
    return TrainerPlan(status, status.restarts, hold=_backoff(job, status, now), marks=marks, events=events)


def _failed(job: RLJob, status: TrainerStatus, failure: Failure, now: datetime) -> TrainerPlan:
    """A rank of the running gang failed: restart the gang, or give up."""
    policy = job.spec.pools.trainer.failure_policy
    record = RankFailure(time=now, reason=failure.reason, pod=failure.pod, rank=failure.rank,
                         message=failure.message[:1024])  # fmt: skip
    rank = f"rank {failure.rank}" if failure.rank is not None else "a rank"
    if status.restarts >= policy.max_restarts:
        message = (f"{rank} failed: {failure.message}; the gang has restarted {status.restarts} times "
                   f"(maxRestarts {policy.max_restarts}): the job has failed, every pool is scaled to 0")  # fmt: skip
        gave_up = ConditionUpdate(R.FAILED, "True", R.MAX_RESTARTS, message)
        return TrainerPlan(status.model_copy(update={"last_failure": record}), status.restarts, "Failed",
                           events=[Event("Warning", R.MAX_RESTARTS, message)], conditions=[gave_up])  # fmt: skip
    restarts = status.restarts + 1
    wait = policy.backoff(restarts)
    message = (f"{rank} failed ({failure.reason}): {failure.message}; restarting the whole gang (restart "
               f"{restarts} of {policy.max_restarts}), released in {wait}s at the earliest")  # fmt: skip
    event = Event("Warning", R.RANK_FAILED, message)
    return TrainerPlan(TrainerStatus(restarts=restarts, last_failure=record), restarts,
                       hold=f"backing off {wait}s after a rank failed", events=[event])  # fmt: skip


def _backoff(job: RLJob, status: TrainerStatus, now: datetime) -> str | None:
    """Why a restarted gang is not released yet: its backoff has not run out."""
    if status.started is not None or status.last_failure is None or status.restarts == 0:
        return None
    until = status.last_failure.time + timedelta(seconds=job.spec.pools.trainer.failure_policy.backoff(status.restarts))
    return f"backing off {int((until - now).total_seconds())}s more after a rank failed" if now < until else None


def _checkpoint_now(
    status: TrainerStatus, gang: Sequence[PodInfo], nodes: Sequence[NodeInfo], now: datetime
) -> tuple[dict[str, str], list[Event]]:
    """Mark every rank of the running gang to checkpoint now while a drain is under way on one of its nodes
    (its pods will be evicted: the ranks checkpoint together first); unmark them once it is over."""
    if status.started is None:
        return {}, []
    cordoned = _cordoned(gang, nodes)
    where = ", ".join(cordoned)
    mark = f"{rfc3339(now)} node {where} cordoned" if cordoned else ""
    marks = {p.name: mark for p in gang if not p.deleting and bool(p.checkpoint_now) != bool(mark)}
    if not (mark and marks):
        return marks, []
    message = f"node {where} is cordoned (a drain is starting): told the trainer gang to checkpoint now"
    return marks, [Event("Normal", R.CHECKPOINT_NOW, message, needs=tuple((MARK, p) for p in sorted(marks)))]


def released(plan: TrainerPlan, statefulset: ChildInfo | None, now: datetime) -> TrainerStatus:
    """The status once the gang of the StatefulSet's current revision is released this pass."""
    revision = statefulset.update_revision if statefulset is not None else None
    return plan.status.model_copy(update={"started": now, "revision": revision})
