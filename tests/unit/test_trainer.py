"""The trainer gang's life: failures restart the whole gang, maxRestarts ends the job, exit 0 completes it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rlop.api import reasons as R
from rlop.api.models import RankFailure, RLJob, RLJobStatus, TrainerStatus
from rlop.plan.job import JobObservation, base_replicas, plan_job, with_apply_errors
from rlop.plan.observed import ChildInfo, Exit, NodeInfo, PodInfo, child_info, pod_info
from rlop.plan.render import trainer_statefulset
from rlop.plan.trainer import completed, plan_trainer, rank_failure

from .builders import job, node, pod

NOW = datetime(2026, 12, 4, 12, 0, 0, tzinfo=UTC)
STARTED = NOW - timedelta(minutes=10)
NODES = [node("g0", gpus=8), node("g1", gpus=8)]
STS = ChildInfo(kind="StatefulSet", name="j-trainer", update_revision="r1", restarts=0)


def rank(i: int, **extra: Any) -> PodInfo:
    base = {"gated": False, "node": f"g{i}", "phase": "Running", "ready": True, "pool": "trainer", "revision": "r1",
            "index": i, "created": "2026-12-04T11:45:00Z", "containers": 1}  # fmt: skip
    return pod(f"j-trainer-{i}", **{**base, **extra})


def running(j: RLJob | None = None, restarts: int = 0, **status: Any) -> RLJob:
    j = j or job()
    trainer = TrainerStatus(restarts=restarts, started=STARTED, revision="r1")
    return j.model_copy(update={"status": RLJobStatus(phase="Running", trainer=trainer, **status)})


EXIT_1 = (Exit("c", 1, "Error", "CUDA error"),)
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "i"}]}}


REPLACED = rank(1, gated=True, node=None, created="2026-12-04T11:55:00Z")
NOT_READY = replace(NODES[1], ready=False, schedulable=False)


@pytest.mark.parametrize(
    ("case", "pods", "nodes", "reason"),
    [
        ("healthy", [rank(0), rank(1)], NODES, None),
        ("a container exited 1", [rank(0), rank(1, exits=EXIT_1)], NODES, R.EXIT_CODE),
        ("OOMKilled", [rank(0, exits=(Exit("c", 137, "OOMKilled"),)), rank(1)], NODES, R.OOM_KILLED),
        ("killed by a signal", [rank(0), rank(1, exits=(Exit("c", 137, "Error"),))], NODES, R.EXIT_CODE),
        ("exit 0 is no failure", [rank(0, exits=(Exit("c", 0, "Completed"),)), rank(1)], NODES, None),
        ("being deleted", [rank(0), rank(1, deleting=True, disruption="PreemptionByScheduler")], NODES, R.POD_DELETED),
        ("recreated after release", [rank(0), REPLACED], NODES, R.POD_DELETED),
        ("gone", [rank(0)], NODES, R.POD_DELETED),
        ("pod Failed", [rank(0, phase="Failed"), rank(1)], NODES, R.POD_FAILED),
        ("node gone", [rank(0), rank(1)], NODES[:1], R.NODE_LOST),
        ("node NotReady", [rank(0), rank(1)], [NODES[0], NOT_READY], R.NODE_LOST),
        ("node cordoned is no failure", [rank(0), rank(1)], [NODES[0], replace(NODES[1], schedulable=False)], None),
    ],
)
def test_which_failures_count(case: str, pods: list[PodInfo], nodes: list[NodeInfo], reason: str | None) -> None:
    failure = rank_failure(pods, 2, nodes, STARTED)
    assert (failure.reason if failure else None) == reason, failure


def test_the_failure_names_the_rank_the_pod_and_why() -> None:
    failure = rank_failure([rank(0), rank(1, exits=EXIT_1)], 2, NODES, STARTED)
    assert failure is not None and (failure.rank, failure.pod) == (1, "j-trainer-1")
    assert failure.message == "container c of pod j-trainer-1 exited with code 1 (Error): CUDA error"


@pytest.mark.parametrize(
    ("case", "pods", "done"),
    [
        ("all exited 0", [rank(i, exits=(Exit("c", 0, "Completed"),)) for i in range(2)], True),
        ("one still running", [rank(0, exits=(Exit("c", 0),)), rank(1)], False),
        ("one exited 1", [rank(0, exits=(Exit("c", 0),)), rank(1, exits=EXIT_1)], False),
        ("a sidecar still running", [rank(i, containers=2, exits=(Exit("c", 0),)) for i in range(2)], False),
        ("a rank missing", [rank(0, exits=(Exit("c", 0),))], False),
    ],
)
def test_completion_is_every_container_of_every_rank_exiting_0(case: str, pods: list[PodInfo], done: bool) -> None:
    assert completed(pods, 2) is done


def test_a_failure_restarts_the_whole_gang_with_a_backoff() -> None:
    j = running()
    plan = plan_trainer(j, [rank(0), rank(1, exits=EXIT_1)], STS, NODES, NOW)
    assert plan.phase is None and plan.restarts == 1 and plan.hold
    assert plan.status.restarts == 1 and plan.status.started is None
    assert plan.status.last_failure == RankFailure(time=NOW, reason=R.EXIT_CODE, pod="j-trainer-1", rank=1,
                                                   message=plan.status.last_failure.message)  # type: ignore[union-attr]  # fmt: skip
    (event,) = plan.events
    assert event.reason == R.RANK_FAILED and "restart 1 of 3" in event.message and "released in 10s" in event.message
    # the new template: the restart count is in the pods' annotations and environment
    sts = trainer_statefulset(j, 2, plan.restarts)["spec"]["template"]
    assert sts["metadata"]["annotations"]["rlop.dev/restarts"] == "1"
    assert {"name": "RLOP_RESTART_COUNT", "value": "1"} in sts["spec"]["containers"][0]["env"]


def test_the_job_plan_rolls_the_template_and_releases_nobody_while_it_restarts() -> None:
    j = running()
    pods = [rank(0), rank(1, exits=EXIT_1)]
    sts = child_info(trainer_statefulset(j, 2, 0) | {"status": {"updateRevision": "r1"}})
    plan = plan_job(JobObservation(j, children={("StatefulSet", "j-trainer"): sts}, pods=pods, nodes=NODES), NOW)
    (new,) = [m for m in plan.apply if m["kind"] == "StatefulSet"]
    assert new["spec"]["template"]["metadata"]["annotations"]["rlop.dev/restarts"] == "1"
    assert plan.release == [] and plan.status.trainer is not None and plan.status.trainer.restarts == 1
    assert R.RANK_FAILED in {e.reason for e in plan.events}


def backing_off(restarts: int, failed_ago: float) -> RLJob:
    failure = RankFailure(time=NOW - timedelta(seconds=failed_ago), reason=R.EXIT_CODE, pod="j-trainer-1", rank=1)
    return job().model_copy(update={"status": RLJobStatus(trainer=TrainerStatus(restarts=restarts,
                                                                               last_failure=failure))})  # fmt: skip


@pytest.mark.parametrize(
    ("restarts", "failed_ago", "held"),
    [(1, 5, True), (1, 11, False), (2, 15, True), (2, 21, False), (8, 599, True), (8, 601, False)],
)
def test_the_backoff_doubles_up_to_600s(restarts: int, failed_ago: float, held: bool) -> None:
    gated = [rank(i, gated=True, node=None, revision="r2") for i in range(2)]
    sts = replace(STS, update_revision="r2", restarts=restarts)
    plan = plan_trainer(backing_off(restarts, failed_ago), gated, sts, NODES, NOW)
    assert bool(plan.hold) is held


def test_the_gang_is_released_after_the_backoff_and_the_release_is_recorded() -> None:
    gated = [rank(i, gated=True, node=None, revision="r2") for i in range(2)]
    rendered = trainer_statefulset(job(), 2, 1) | {"status": {"updateRevision": "r2"}}
    sts = {("StatefulSet", "j-trainer"): child_info(rendered)}
    held = plan_job(JobObservation(backing_off(1, 5), children=sts, pods=gated, nodes=NODES), NOW)
    assert held.release == [] and "backing off" in next(c.message for c in held.status.conditions
                                                        if c.type == R.GANG)  # fmt: skip
    plan = plan_job(JobObservation(backing_off(1, 11), children=sts, pods=gated, nodes=NODES), NOW)
    assert sorted(plan.release) == ["j-trainer-0", "j-trainer-1"]
    assert plan.status.trainer == TrainerStatus(restarts=1, started=NOW, revision="r2",
                                                last_failure=plan.status.trainer.last_failure)  # type: ignore[union-attr]  # fmt: skip


def test_past_max_restarts_the_job_fails_and_every_pool_goes_to_zero() -> None:
    trainer = {"replicas": 2, "failurePolicy": {"maxRestarts": 2}, "template": TEMPLATE}
    j = running(job(trainer=trainer), restarts=2)
    sts = replace(STS, restarts=2)
    pods = [rank(0, exits=(Exit("c", 137, "OOMKilled"),)), rank(1)]
    plan = plan_job(JobObservation(j, children={("StatefulSet", "j-trainer"): sts}, pods=pods, nodes=NODES), NOW)
    assert plan.status.phase == "Failed"
    assert {m["metadata"]["name"]: m["spec"]["replicas"] for m in plan.apply if m["kind"] == "StatefulSet"} == {
        "j-trainer": 0
    }
    assert all(p.desired == 0 for p in plan.status.pools.values())
    failed = next(c for c in plan.status.conditions if c.type == R.FAILED)
    assert (failed.status, failed.reason) == ("True", R.MAX_RESTARTS) and "OOMKilled" in failed.message
    assert [e.reason for e in plan.events if e.type == "Warning"] == [R.MAX_RESTARTS]
    # and it stays failed: nothing restarts, nothing scales, a refused write does not make it an Error
    after = j.model_copy(update={"status": plan.status})
    assert set(base_replicas(after).values()) == {0}
    again = plan_job(JobObservation(after, children={("StatefulSet", "j-trainer"): sts}, nodes=NODES), NOW)
    assert again.status.phase == "Failed" and again.status.trainer == plan.status.trainer
    assert with_apply_errors(again.status, ["refused"], NOW).phase == "Failed"


def test_every_rank_exiting_0_succeeds_the_job() -> None:
    done = [rank(i, exits=(Exit("c", 0, "Completed"),)) for i in range(2)]
    plan = plan_job(JobObservation(running(), children={("StatefulSet", "j-trainer"): STS}, pods=done, nodes=NODES),
                    NOW)  # fmt: skip
    assert plan.status.phase == "Succeeded"
    assert next(c for c in plan.status.conditions if c.type == R.COMPLETE).status == "True"
    assert next(c for c in plan.status.conditions if c.type == R.READY).reason == R.FINISHED
    assert all(p.desired == 0 for p in plan.status.pools.values())


def test_only_the_running_gang_counts() -> None:
    # pods of an older revision (being replaced after a spec change) fail as they are stopped: no restart
    old = [rank(0, exits=(Exit("c", 143, "Error"),)), rank(1)]
    assert plan_trainer(running(), old, replace(STS, update_revision="r2"), NODES, NOW).restarts == 0
    # a gang not released yet: its pods come and go freely
    gated = [rank(0, gated=True, node=None)]
    assert plan_trainer(job(), gated, STS, NODES, NOW).status == TrainerStatus()


def test_a_restart_the_status_missed_is_read_back_from_the_template() -> None:
    """The StatefulSet was rolled but the operator died before writing the status: not counted twice."""
    stale = running()  # restarts 0 in the status, the template says 1
    rolled = replace(STS, update_revision="r2", restarts=1)
    old_pods = [rank(0), rank(1, exits=EXIT_1)]  # still revision r1: being replaced, not a new failure
    plan = plan_trainer(stale, old_pods, rolled, NODES, NOW)
    assert plan.restarts == 1 and plan.status.restarts == 1 and plan.status.started is None and not plan.events


def test_a_release_the_status_missed_is_recorded_once_the_gang_runs() -> None:
    plan = plan_trainer(job(), [rank(0), rank(1)], STS, NODES, NOW)
    assert (plan.status.started, plan.status.revision) == (NOW, "r1")


def test_a_drain_on_a_trainer_node_asks_the_whole_gang_to_checkpoint_once() -> None:
    cordoned = [NODES[0], replace(NODES[1], schedulable=False)]
    plan = plan_trainer(running(), [rank(0), rank(1)], STS, cordoned, NOW)
    assert set(plan.marks) == {"j-trainer-0", "j-trainer-1"} and "node g1 cordoned" in plan.marks["j-trainer-0"]
    assert [e.reason for e in plan.events] == [R.CHECKPOINT_NOW] and plan.restarts == 0
    marked = [rank(i, checkpoint_now=plan.marks["j-trainer-0"]) for i in range(2)]
    assert plan_trainer(running(), marked, STS, cordoned, NOW).marks == {}  # asked once
    cleared = plan_trainer(running(), marked, STS, NODES, NOW)  # uncordoned: the mark is withdrawn
    assert cleared.marks == {"j-trainer-0": "", "j-trainer-1": ""} and cleared.events == []


def test_the_checkpoint_and_the_mark_reach_every_rank() -> None:
    checkpoint = {"dir": "/ckpt", "volume": {"persistentVolumeClaim": {"claimName": "c"}}}
    j = job(trainer={"replicas": 2, "checkpoint": checkpoint, "template": TEMPLATE})
    spec = trainer_statefulset(j, 2)["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["RLOP_CHECKPOINT_DIR"] == "/ckpt" and env["RLOP_RESTART_COUNT"] == "0"
    assert env["RLOP_CHECKPOINT_NOW_FILE"] == "/etc/rlop/checkpoint-now"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["rlop-checkpoint"]["persistentVolumeClaim"] == {"claimName": "c"}
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/ckpt", "/etc/rlop"}


def test_exits_are_read_from_the_pod_status() -> None:
    oom = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    statuses = [{"name": "c", "state": {"running": {}}, "lastState": oom},
                {"name": "s", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]  # fmt: skip
    body = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}, {"name": "s"}]},
            "status": {"containerStatuses": statuses}}  # fmt: skip
    info = pod_info(body)
    assert info.containers == 2 and info.exits == (Exit("c", 137, "OOMKilled"), Exit("s", 0, "Completed"))


def test_a_suspended_gang_is_stopped_not_failed_and_resumes_as_a_new_gang() -> None:
    suspended = running(job(suspend=True))
    plan = plan_trainer(suspended, [], STS, NODES, NOW)
    assert plan.status.started is None and plan.restarts == 0 and not plan.events
    resumed = job().model_copy(update={"status": RLJobStatus(trainer=plan.status)})
    recreated = [rank(i, gated=True, node=None, created="2026-12-04T11:59:00Z") for i in range(2)]
    assert plan_trainer(resumed, recreated, STS, NODES, NOW).restarts == 0  # same revision, new pods: no failure
