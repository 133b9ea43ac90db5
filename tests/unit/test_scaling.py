"""Budget arbitration and the per-job scaling plan."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rlop.plan.autoscale import Reading
from rlop.plan.budget import Claim, arbitrate
from rlop.plan.job import JobObservation, base_replicas, plan_job
from rlop.plan.scaling import deletion_costs, plan_scaling

from .builders import job, pod

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("budget", "fixed", "claims", "expected", "limited"),
    [
        (None, 0, {"a": Claim(1, 1, 8, 8)}, {"a": 8}, set()),
        (16, 8, {"a": Claim(1, 1, 4, 4), "b": Claim(1, 1, 4, 4)}, {"a": 4, "b": 4}, set()),
        (4, 0, {"a": Claim(1, 1, 4, 30), "b": Claim(1, 1, 2, 2)}, {"a": 3, "b": 1}, {"a", "b"}),
        (4, 0, {"a": Claim(1, 1, 4, 4), "b": Claim(1, 1, 4, 12)}, {"a": 1, "b": 3}, {"a", "b"}),
        (6, 0, {"a": Claim(2, 1, 3, 3), "b": Claim(1, 2, 4, 4)}, {"a": 2, "b": 2}, {"a", "b"}),
        (1, 0, {"a": Claim(1, 2, 5, 5), "b": Claim(1, 1, 5, 5)}, {"a": 2, "b": 1}, {"a", "b"}),  # minimums win
        (4, 0, {"a": Claim(1, 1, 8, 8), "cpu": Claim(0, 1, 50, 50)}, {"a": 4, "cpu": 50}, {"a"}),
    ],
)
def test_arbitrate(
    budget: Any, fixed: float, claims: dict[str, Claim], expected: dict[str, int], limited: set[str]
) -> None:
    out = arbitrate(budget, fixed, claims)
    assert out.replicas == expected
    assert set(out.limited) == limited
    gpu = sum(out.replicas[n] * c.gpus_per_replica for n, c in claims.items())
    if budget is not None and limited:
        assert gpu <= max(budget - fixed, sum(c.min_replicas * c.gpus_per_replica for c in claims.values()))


def _auto(max_r: int = 8, **extra: Any) -> dict[str, Any]:
    container = {"name": "r", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    metric = {"query": "q", "target": {"type": "AverageValue", "value": 10}}
    return {"template": {"spec": {"containers": [container]}},
            "autoscale": {"minReplicas": 1, "maxReplicas": max_r, "metrics": [metric], **extra}}  # fmt: skip


def test_steady_metrics_change_nothing_in_status() -> None:
    j = job(rollout=_auto())
    first = plan_job(
        JobObservation(j), NOW, plan_scaling(j, base_replicas(j), [], {("rollout", 0): Reading(40)}, {}, NOW)
    )
    assert first.status.pools["rollout"].desired == 4
    j2 = j.model_copy(update={"status": first.status})
    pods = [pod(f"j-rollout-{i}", pool="rollout", ready=True) for i in range(4)]
    for dt, value in ((1, 40.0), (2, 41.0), (3, 39.0)):  # within tolerance: same decision
        t = NOW + timedelta(seconds=dt)
        s = plan_scaling(j2, base_replicas(j2), pods, {("rollout", 0): Reading(value)}, {}, t, t - timedelta(seconds=1))
        p = plan_job(JobObservation(j2), t, s)
        assert p.status == first.status
        assert not [e for e in p.events if e.reason.startswith("Scaled")]


def test_scale_event_and_history_are_recorded_in_status() -> None:
    j = job(rollout=_auto(behavior={}))
    s = plan_scaling(j, base_replicas(j), [], {("rollout", 0): Reading(40)}, {}, NOW)
    assert s.replicas["rollout"] == 4
    upd = s.pools["rollout"]
    assert upd.last_scale_time == NOW and upd.last_metric == 40
    assert [e.change for e in upd.scale_events or []] == [3]
    assert [(e.reason, e.pool) for e in s.events] == [("ScaledUp", "rollout")]
    assert s.events[0].message.startswith("rollout 1 -> 4: metric 40 vs target 10 per replica")


def test_missing_metrics_set_the_condition_and_hold() -> None:
    j = job(rollout=_auto())
    s = plan_scaling(j, {"trainer": 2, "rollout": 3}, [], {("rollout", 0): Reading(None, "boom", True)}, {}, NOW)
    assert s.replicas["rollout"] == 3
    c = s.conditions[0]
    assert (c.type, c.status, c.reason) == ("MetricsAvailable", "False", "PrometheusUnreachable")


def test_budget_counts_the_trainer_first() -> None:
    j = job(rollout=_auto()).model_copy(deep=True)
    j.spec.budget = type(j.spec).model_fields["budget"].annotation.__args__[0](gpus=10)  # type: ignore[union-attr]
    s = plan_scaling(j, base_replicas(j), [], {("rollout", 0): Reading(80)}, {}, NOW)
    assert s.replicas["rollout"] == 2  # trainer: 2 x 4 GPUs, leaves 2
    assert "GPU budget 10" in s.limited["rollout"]
    plan = plan_job(JobObservation(j), NOW, s)
    capacity = next(c for c in plan.status.conditions if c.type == "CapacityLimited")
    assert (capacity.status, capacity.reason) == ("True", "GPUBudget")


def test_deletion_costs_follow_busyness_and_skip_unchanged() -> None:
    pods = [pod("a", pool="rollout"), pod("b", pool="rollout", deletion_cost=2000), pod("c", pool="rollout")]
    assert deletion_costs(pods, {"a": 0.5, "b": 2.0}) == {"a": 500}


def test_a_suspended_job_closes_its_open_recommendation_at_the_pass_that_made_it() -> None:
    """reconcileAutoscaler returns before storing anything while the target is at 0: the last recommendation
    ages out from the sync that made it, not from whenever the job resumes."""
    j = job(rollout=_auto(max_r=20))
    made = plan_scaling(j, base_replicas(j), [], {("rollout", 0): Reading(100)}, {}, NOW)
    status = plan_job(JobObservation(j), NOW, made).status
    assert status.pools["rollout"].recommendations[-1].until is None  # open: still being recommended
    stopped = job(suspend=True, rollout=_auto(max_r=20)).model_copy(update={"status": status})
    later = NOW + timedelta(seconds=5)
    s = plan_scaling(stopped, base_replicas(stopped), [], {}, {}, later, NOW)
    closed = s.pools["rollout"].recommendations
    assert closed is not None and closed[-1].until == NOW and closed[-1].replicas == 10
    again = stopped.model_copy(update={"status": plan_job(JobObservation(stopped), later, s).status})
    t = later + timedelta(seconds=5)
    assert plan_scaling(again, base_replicas(again), [], {}, {}, t, later).pools == {}  # nothing more to close
