"""plan_job: writes only what differs, explains every change once."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from rlop.api.models import PoolStatus, RLJobStatus
from rlop.plan.job import JobObservation, base_replicas, owned, plan_job, plan_pass, with_apply_errors
from rlop.plan.observed import ChildInfo, Owner, child_info
from rlop.plan.readings import JobReadings
from rlop.plan.scaling import Scaling
from rlop.plan.status import Event

from .builders import container, job, node, pod

NOW = datetime(2026, 12, 1, tzinfo=UTC)
NODES = [node("g0", cpu=64, gpus=8)]


def _settled(j, pods):  # type: ignore[no-untyped-def]
    """Observe a job whose children were all applied as planned."""
    first = plan_job(JobObservation(j, nodes=NODES, pods=pods, bound_pods=pods), NOW)
    children = {(m["kind"], m["metadata"]["name"]): child_info(m) for m in first.apply}
    return first, children


def test_first_plan_creates_everything_and_the_next_releases_the_gang() -> None:
    j = job()
    pods = [pod(f"j-trainer-{i}", gpus=4, gated=True, pool="trainer") for i in range(2)]
    plan, children = _settled(j, pods)
    assert {m["kind"] for m in plan.apply} == {"StatefulSet", "Service", "Deployment"}
    assert plan.release == []  # the StatefulSet is only being created
    assert [e.reason for e in plan.events].count("Created") == 4
    assert plan.status.phase == "Pending"
    j = j.model_copy(update={"status": plan.status})
    again = plan_job(JobObservation(j, children=children, nodes=NODES, pods=pods, bound_pods=pods), NOW)
    assert again.release == ["j-trainer-0", "j-trainer-1"]
    assert "GangReleased" in [e.reason for e in again.events]


def test_no_gated_trainer_is_released_while_its_statefulset_is_rewritten() -> None:
    """A smaller gang rewrites the StatefulSet (world size in the template): releasing the old ranks
    would start a gang that the new revision restarts at once."""
    j = job()
    pods = [pod(f"j-trainer-{i}", gpus=4, gated=True, pool="trainer") for i in range(2)]
    _, children = _settled(j, pods)
    smaller = j.model_copy(deep=True)
    smaller.spec.pools.trainer.replicas = 1  # type: ignore[union-attr]
    plan = plan_job(JobObservation(smaller, children=children, nodes=NODES, pods=pods, bound_pods=pods), NOW)
    assert ("StatefulSet", "j-trainer") in {(m["kind"], m["metadata"]["name"]) for m in plan.apply}
    assert plan.release == []
    gang = next(c for c in plan.status.conditions if c.type == "GangScheduled")
    assert gang.reason == "Updating"


def test_steady_state_plans_no_writes_and_no_events() -> None:
    j = job()
    pods = [pod(f"j-trainer-{i}", node="g0", gpus=4, pool="trainer", ready=True) for i in range(2)]
    pods.append(pod("j-rollout-x", node="g0", pool="rollout", ready=True))
    first, children = _settled(j, pods)
    j = j.model_copy(update={"status": first.status})
    obs = JobObservation(j, children=children, nodes=NODES, pods=pods, bound_pods=pods)
    again = plan_job(obs, NOW + timedelta(seconds=30))
    assert (again.apply, again.delete, again.release, again.delete_pods, again.evict, again.events) == ([],) * 6
    assert again.status == first.status
    assert again.status.phase == "Running"
    assert again.status.pools["trainer"].replicas == "2/2"


def test_removed_pool_children_are_deleted() -> None:
    with_reward = job(reward={"replicas": 1, "template": {"spec": {"containers": [{"name": "r", "image": "i"}]}}})
    _, children = _settled(with_reward, [])
    plan = plan_job(JobObservation(job(), children=children, nodes=NODES), NOW)
    assert plan.delete == [("Deployment", "j-reward"), ("Service", "j-reward")]


def test_suspend_scales_every_pool_to_zero() -> None:
    j = job(suspend=True)
    assert set(base_replicas(j).values()) == {0}
    plan = plan_job(JobObservation(j, nodes=NODES), NOW)
    assert plan.status.phase == "Suspended"


def test_transition_time_moves_only_on_flips_and_events_fire_once() -> None:
    j = job(trainer={"replicas": 3, "template": {"spec": {"containers": [
        {"name": "t", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 4}}}]}}})  # fmt: skip
    pods = [pod(f"j-trainer-{i}", gpus=4, gated=True, pool="trainer") for i in range(3)]
    _, children = _settled(j, pods)
    first = plan_job(JobObservation(j, children=children, nodes=NODES, pods=pods), NOW)
    assert [e.reason for e in first.events if e.type == "Warning"] == ["InsufficientCapacity"]
    j2 = j.model_copy(update={"status": first.status})
    second = plan_job(JobObservation(j2, children=children, nodes=NODES, pods=pods), NOW + timedelta(minutes=5))
    assert not [e for e in second.events if e.type == "Warning"]
    gang = next(c for c in second.status.conditions if c.type == "GangScheduled")
    assert gang.last_transition_time == NOW


def test_apply_errors_mark_the_job() -> None:
    plan = plan_job(JobObservation(job(), nodes=NODES), NOW)
    status = with_apply_errors(
        plan.status, ["Deployment j-rollout: spec.template.spec.containers[0].image: Required"], NOW
    )
    synced = next(c for c in status.conditions if c.type == "Synced")
    assert (status.phase, synced.status, synced.reason) == ("Error", "False", "ApplyFailed")
    assert "containers[0].image" in synced.message
    assert with_apply_errors(plan.status, [], NOW) is plan.status


def test_child_info_reads_the_hash_and_readiness() -> None:
    meta = {"name": "d", "generation": 2, "annotations": {"rlop.dev/spec-hash": "abc"}}
    status = {"readyReplicas": 2, "observedGeneration": 1}
    info = child_info({"kind": "Deployment", "metadata": meta, "spec": {"replicas": 3}, "status": status})
    assert replace(info) == info
    assert (info.spec_hash, info.replicas, info.ready, info.up_to_date) == ("abc", 3, 2, False)


def test_a_child_changed_outside_rlop_is_reapplied_and_unknown_versions_are_checked_once() -> None:
    j = job()
    first, children = _settled(j, [])
    j = j.model_copy(update={"status": first.status})
    children = {key: replace(c, version="g1") for key, c in children.items()}
    written = dict.fromkeys(children, "g1")
    assert plan_job(JobObservation(j, children=children, nodes=NODES, written=written), NOW).apply == []
    edited = {**children, ("Deployment", "j-rollout"): replace(children[("Deployment", "j-rollout")], version="g2")}
    plan = plan_job(JobObservation(j, children=edited, nodes=NODES, written=written), NOW)
    assert [m["metadata"]["name"] for m in plan.apply] == ["j-rollout"]
    assert plan.drift == [("Deployment", "j-rollout")]
    assert not {"Created", "Updated"} & {e.reason for e in plan.events}  # DriftCorrected only if the apply moved it
    restarted = plan_job(JobObservation(j, children=children, nodes=NODES), NOW)  # nothing remembered
    assert sorted(restarted.drift) == sorted(children)


ROLLOUT = ("Deployment", "j-rollout")
SCALED_UP = Scaling({"trainer": 2, "rollout": 3}, events=[Event("Normal", "ScaledUp", "1 -> 3", pool="rollout")])


@pytest.mark.parametrize(
    ("case", "rollout", "image", "seen", "written", "scaling", "apply", "scale", "updated"),
    [
        ("a fixed pool's replicas alone: scaled, and said", 3, "img", "g1", "g1", None, [], [ROLLOUT],
         ["Updated Deployment j-rollout: replicas 1 -> 3"]),
        ("an autoscaled pool's: scaled, its ScaledUp says why", 1, "img", "g1", "g1", SCALED_UP, [], [ROLLOUT], []),
        ("replicas and template: one apply of the whole", 3, "other", "g1", "g1", None, [ROLLOUT], [],
         ["Updated Deployment j-rollout"]),
        ("replicas after a hand edit: applied whole, reverting it", 3, "img", "g2", "g1", None, [ROLLOUT], [], []),
        ("replicas, nothing remembered (a restart): applied whole", 3, "img", "g1", None, None, [ROLLOUT], [], []),
        ("nothing changed: nothing written", 1, "img", "g1", "g1", None, [], [], []),
    ],
)  # fmt: skip
def test_a_change_of_replicas_alone_is_a_scale_and_anything_else_an_apply(
    case: str, rollout: int, image: str, seen: str, written: str | None, scaling: Scaling | None,
    apply: list[tuple[str, str]], scale: list[tuple[str, str]], updated: list[str],
) -> None:  # fmt: skip
    first, children = _settled(job(), [])
    pool = {"replicas": rollout, "template": {"spec": {"containers": [{**container(), "image": image}]}}}
    j = job(rollout=pool).model_copy(update={"status": first.status})
    children = {key: replace(c, version="g1") for key, c in children.items()}
    children[ROLLOUT] = replace(children[ROLLOUT], version=seen)
    remembered = {key: "g1" for key in children if written}
    plan = plan_job(JobObservation(j, children=children, nodes=NODES, written=remembered), NOW, scaling)
    keys = [(m["kind"], m["metadata"]["name"]) for m in plan.apply]
    assert [k for k in keys if k == ROLLOUT] == apply, case
    assert [(m["kind"], m["metadata"]["name"]) for m in plan.scale] == scale, case
    assert [m["spec"]["replicas"] for m in plan.scale] == [3] * len(scale), case
    assert [e.message for e in plan.events if e.reason == "Updated"] == updated, case


def test_suspending_scales_the_children_to_zero_without_rewriting_them() -> None:
    first, children = _settled(job(), [])
    children = {key: replace(c, version="g1") for key, c in children.items()}
    j = job(suspend=True).model_copy(update={"status": first.status})
    plan = plan_job(JobObservation(j, children=children, nodes=NODES, written=dict.fromkeys(children, "g1")), NOW)
    assert plan.apply == []
    assert {(m["kind"], m["metadata"]["name"], m["spec"]["replicas"]) for m in plan.scale} == {
        ("StatefulSet", "j-trainer", 0), ("Deployment", "j-rollout", 0)}  # fmt: skip


def test_only_what_the_job_owns_is_its_own() -> None:
    j = job()
    _, children = _settled(j, [])
    sts = replace(children[("StatefulSet", "j-trainer")], uid="sts-uid")
    children[("StatefulSet", "j-trainer")] = sts
    children[("Deployment", "j-tensorboard")] = ChildInfo("Deployment", "j-tensorboard")  # labelled, no owner
    children[("Service", "j-x")] = ChildInfo("Service", "j-x", owner=Owner("RLJob", "j", "another-uid"))
    pods = [
        pod("j-trainer-0", pool="trainer", owner=Owner("StatefulSet", "j-trainer", "sts-uid")),
        pod("j-rollout-5d4f-abc", pool="rollout", owner=Owner("ReplicaSet", "j-rollout-5d4f", "rs")),
        pod("j-sandbox-h1", pool="sandbox", harvest=True, owner=Owner("RLJob", "j", "uid-1")),
        pod("impostor", pool="trainer"),
        pod("lookalike", pool="rollout", owner=Owner("ReplicaSet", "other-rollout-1", "rs2")),
    ]
    ours, own_pods = owned(j, children, pods)
    assert ("Deployment", "j-tensorboard") not in ours and ("Service", "j-x") not in ours
    assert ("StatefulSet", "j-trainer") in ours
    assert [p.name for p in own_pods] == ["j-trainer-0", "j-rollout-5d4f-abc", "j-sandbox-h1"]
    plan = plan_job(JobObservation(j, children=ours, nodes=NODES), NOW)
    assert plan.delete == []  # the user's look-alikes are never deleted


def test_without_utilization_data_a_pass_places_min_replicas_by_requests_and_says_so() -> None:
    sandbox = {
        "autoscale": {"minReplicas": 2, "maxReplicas": 6,
                      "metrics": [{"query": "q", "target": {"type": "Value", "value": 1}}]},
        "template": {"spec": {"containers": [container(requests={"cpu": "1", "memory": "1Gi"})]}},
    }  # fmt: skip
    j = job(sandbox=sandbox)
    j = j.model_copy(update={"status": RLJobStatus(pools={"sandbox": PoolStatus(desired=5)})})
    for utilization in (None, {}):  # the query failed, or answered with no node
        obs = JobObservation(j, nodes=NODES, utilization=utilization)
        plans, failed = plan_pass([(obs, JobReadings(utilization=utilization))], NOW, None)
        plan, _ = plans[("ns", "j")]
        assert not failed and plan.evict == []
        assert len([m for m in plan.apply if m["kind"] == "Pod"]) == 2
        capacity = next(c for c in plan.status.conditions if c.type == "CapacityLimited")
        assert (capacity.status, capacity.reason) == ("True", "UtilizationUnknown")
        assert "placed by requests alone" in capacity.message
