"""Hypothesis fuzzing: the spec parser and the planners never raise anything but ValidationError."""

from __future__ import annotations

import contextlib
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rlop.api.models import RLJob
from rlop.plan.autoscale import Reading
from rlop.plan.job import JobObservation, base_replicas, plan_job
from rlop.plan.scaling import plan_scaling
from tests.invalid_cases import base, merge_patch

from .builders import node, pod

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
FIELDS = ["spec", "pools", "trainer", "rollout", "reward", "sandbox", "controller", "replicas", "autoscale",
          "minReplicas", "maxReplicas", "metrics", "query", "target", "type", "value", "behavior", "scaleUp",
          "policies", "template", "containers", "resources", "requests", "placement", "budget", "gpus"]  # fmt: skip
patches = st.recursive(
    json_values,
    lambda children: st.dictionaries(st.sampled_from(FIELDS), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patches)
def test_the_spec_parser_only_ever_raises_validation_errors(patch: Any) -> None:
    doc = merge_patch(base(), {"spec": patch} if isinstance(patch, dict) else patch)
    with contextlib.suppress(ValidationError):
        RLJob.model_validate(doc)


NOW = datetime(2026, 12, 1, tzinfo=UTC)
readings = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e6, 1e6))


@settings(max_examples=200, deadline=None)
@given(st.lists(readings, min_size=1, max_size=6), st.integers(0, 12), st.integers(0, 40))
def test_scaling_and_job_plans_hold_their_bounds_on_any_metric(values: list[float | None], budget: int,
                                                               steps: int) -> None:  # fmt: skip
    doc = base()
    doc["metadata"].update(namespace="ns", uid="u", generation=1)
    doc["spec"]["budget"] = {"gpus": budget}
    job = RLJob.model_validate(doc)
    spec = job.spec.pools.rollout.autoscale
    assert spec is not None
    t = NOW
    for i in range(steps):
        value = values[i % len(values)]
        reading = Reading(None, "missing") if value is None or not math.isfinite(value) else Reading(value)
        before = base_replicas(job)
        scaling = plan_scaling(job, before, [], {("rollout", 0): reading}, {}, t)
        plan = plan_job(JobObservation(job, nodes=[node("n", cpu=8, gpus=8)], bound_pods=[pod("p", node="n")]),
                        t, scaling)  # fmt: skip
        after = plan.status.pools["rollout"].desired
        assert spec.min_replicas <= after <= spec.max_replicas
        if reading.value is None:
            assert after >= before["rollout"]  # never scale down on missing data
        job = job.model_copy(update={"status": plan.status})
        t += timedelta(seconds=5)
