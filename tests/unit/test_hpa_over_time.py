"""The autoscaler stepped through time, pass after pass, against kube-controller-manager's HPA: each case
names the Go function (pkg/controller/podautoscaler/horizontal.go, v1.36.3) it is about, gives the replicas
HPA reaches after each sync (worked out from that code), and checks rlop's planner and a transliteration of
the Go code (tests/unit/hpa_reference.py) both reach them. Random traces then compare the two at length."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlop.api.models import Autoscale, Recommendation, ScaleEvent
from rlop.plan.autoscale import Reading, decide, record_scale

from .hpa_reference import HPA

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def autoscale(target: str = "AverageValue", value: float = 10, min_r: int = 1, max_r: int = 100,
              behavior: dict[str, Any] | None = None, metrics: int = 1) -> Autoscale:  # fmt: skip
    return Autoscale.model_validate({
        "minReplicas": min_r, "maxReplicas": max_r, "behavior": behavior,
        "metrics": [{"query": f"q{i}", "target": {"type": target, "value": value}} for i in range(metrics)],
    })  # fmt: skip


def down(window: int | None = None, *policies: tuple[str, int, int], select: str | None = None) -> dict[str, Any]:
    rules: dict[str, Any] = {"stabilizationWindowSeconds": window, "selectPolicy": select}
    if policies:
        rules["policies"] = [{"type": t, "value": v, "periodSeconds": p} for t, v, p in policies]
    return {k: v for k, v in rules.items() if v is not None}


@dataclass
class Rlop:
    """rlop's planner driven as the operator drives it: the status it keeps, the previous pass's time."""

    spec: Autoscale
    recommendations: list[Recommendation] = field(default_factory=list)
    events: list[ScaleEvent] = field(default_factory=list)
    previous: datetime | None = None

    def reconcile(self, current: int, ready: int, pods: int, values: list[float | None], now: datetime) -> int:
        readings = [Reading(v) if v is not None else Reading(None, "Prometheus down", True) for v in values]
        d = decide(self.spec, current, ready, readings, self.recommendations, self.events, now, self.previous, pods)
        self.recommendations = d.recommendations
        self.events = record_scale(self.events, self.spec, current, d.replicas, now)
        self.previous = now
        return d.replicas


Step = tuple[float, list[float | None]] | tuple[float, list[float | None], Autoscale]  # (t, values[, new spec])


def run(controller: Any, start: int, steps: list[Step]) -> list[int]:
    """Replicas after each sync; every pod exists and is ready."""
    current, out = start, []
    for step in steps:
        if len(step) == 3:
            controller.spec = step[2]
        current = controller.reconcile(current, current, current, step[1], T0 + timedelta(seconds=step[0]))
        out.append(current)
    return out


def every(seconds: float, start: float, stop: float, values: list[float | None]) -> list[Step]:
    out: list[Step] = []
    t = start
    while t < stop:
        out.append((t, values))
        t += seconds
    return out


MAX_6 = autoscale(max_r=6, behavior={"scaleDown": down(0, ("Pods", 1, 60))})

# name, the Go function it is about, spec, start replicas, steps, HPA's replicas after each sync
CASES: list[tuple[str, str, Autoscale, int, list[Step], list[int]]] = [
    (
        "an outage ends on time: recommendations age out from the last sync that made one",
        "reconcileAutoscaler (returns before storing on FailedComputeMetricsReplicas), "
        "stabilizeRecommendationWithBehaviors",
        autoscale(max_r=20, behavior={"scaleDown": down(60)}),
        12,
        [(0, [120]), (15, [120]), *every(15, 30, 100, [None]), (105, [20])],
        [12, 12, 12, 12, 12, 12, 12, 2],
    ),
    (
        "an edit of maxReplicas moves to the bound only, and that move is a scale event",
        "reconcileAutoscaler (currentReplicas > MaxReplicas), storeScaleEvent",
        autoscale(max_r=20, behavior={"scaleDown": down(0, ("Pods", 1, 60))}),
        10,
        [(0, [100]), (15, [30], MAX_6), *every(15, 30, 150, [30])],
        [10, 6, 6, 6, 6, 5, 5, 5, 5, 4],
    ),
    (
        "an edit of minReplicas above the count moves to the bound only; that move is a scale event",
        "reconcileAutoscaler (currentReplicas < MinReplicas), storeScaleEvent",
        autoscale(min_r=5, max_r=20, behavior={"scaleUp": down(0, ("Pods", 4, 30))}),
        2,
        [(0, [10]), (15, [100]), (31, [100])],
        [5, 6, 9],
    ),
    (
        "the first sync seeds the history with the current count: a scale-up window applies at once",
        "recordInitialRecommendation, stabilizeRecommendationWithBehaviors",
        autoscale(min_r=1, max_r=20, behavior={"scaleUp": {"stabilizationWindowSeconds": 60}}),
        2,
        every(15, 0, 100, [80]),
        [2, 2, 2, 2, 6, 8, 8],
    ),
    (
        "the first sync seeds the history: with the default scale-down window nothing drops for 300 s",
        "recordInitialRecommendation, stabilizeRecommendation",
        autoscale(),
        10,
        [(0, [10]), (150, [10]), (299, [10]), (301, [10])],
        [10, 10, 10, 1],
    ),
    (
        "a plain ceiling: 3000000001 against a Value target of 1e9 wants 4",
        "getUsageRatioReplicaCount (math.Ceil)",
        autoscale(target="Value", value=1e9, max_r=10),
        1,
        [(0, [3000000001])],
        [4],
    ),
    (
        "no behavior: the legacy path doubles per sync (max(2 x current, 4)), no period limits",
        "normalizeDesiredReplicas, convertDesiredReplicasWithRules, calculateScaleUpLimit",
        autoscale(max_r=100),
        1,
        every(1, 0, 6, [1000]),
        [4, 8, 16, 32, 64, 100],
    ),
    (
        "the same with a behavior block: 4 pods or 100 % per 15 s",
        "calculateScaleUpLimitWithScalingRules",
        autoscale(max_r=100, behavior={}),
        1,
        [*every(1, 0, 6, [1000]), (16, [1000])],
        [5, 5, 5, 5, 5, 5, 10],
    ),
    (
        "legacy window boundary is inclusive, the behavior window's exclusive",
        "stabilizeRecommendation (Before(cutoff)) vs stabilizeRecommendationWithBehaviors (After(cutoff))",
        autoscale(),
        10,
        [(0, [100]), (300, [10]), (301, [10])],
        [10, 10, 1],
    ),
    (
        "the behavior window's boundary is exclusive",
        "stabilizeRecommendationWithBehaviors",
        autoscale(behavior={"scaleDown": down(300)}),
        10,
        [(0, [100]), (300, [10])],
        [10, 1],
    ),
    (
        "one metric missing: scale up on the others, never down, and store nothing while holding",
        "computeReplicasForMetrics (invalidMetricsCount > 0 && replicas < specReplicas)",
        autoscale(metrics=2, behavior={"scaleDown": down(30)}),
        4,
        [(0, [80, None]), (15, [10, None]), (30, [10, None]), (45, [10, 10]), (60, [10, 10]), (75, [10, 10])],
        [8, 8, 8, 1, 1, 1],
    ),
    (
        "rate limits count the other direction's events from the period's start",
        "calculateScaleDownLimitWithBehaviors, getReplicasChangePerPeriod",
        autoscale(behavior={"scaleUp": down(0, ("Pods", 2, 60)), "scaleDown": down(0, ("Percent", 50, 60))}),
        4,
        [(0, [80]), (10, [10]), (20, [10]), (61, [10]), (71, [10])],
        [6, 2, 2, 2, 1],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("name", "go", "spec", "start", "steps", "hpa"), CASES, ids=[c[0] for c in CASES])
def test_rlop_decides_as_hpa_over_time(
    name: str, go: str, spec: Autoscale, start: int, steps: list[Step], hpa: list[int]
) -> None:
    assert run(HPA(spec), start, steps) == hpa, f"the transliteration of {go} disagrees with the worked case"
    assert run(Rlop(spec), start, steps) == hpa


def test_a_slowly_falling_load_keeps_the_peak_of_the_whole_window_in_a_bounded_history() -> None:
    """stabilizeRecommendationWithBehaviors keeps every recommendation inside the window; rlop keeps only
    those that can still be its max or min, and decides the same."""
    spec = autoscale(max_r=200, behavior={})
    steps: list[Step] = [(t, [max(0.0, 2000 - 3 * t)]) for t in range(0, 700)]
    rlop = Rlop(spec)
    assert run(HPA(spec), 200, steps) == run(rlop, 200, steps)
    assert len(rlop.recommendations) <= 301  # at most one per pass inside the 300 s window


def test_a_steady_recommendation_changes_no_history() -> None:
    rlop = Rlop(autoscale(behavior={}))
    run(rlop, 5, [(0, [50])])
    before = list(rlop.recommendations)
    run(rlop, 5, every(15, 15, 200, [50]))
    assert rlop.recommendations == before == [Recommendation(replicas=5)]


def test_scale_events_cross_directions_rlop_keeps_what_hpa_reuses() -> None:
    """A deliberate difference (README): storeScaleEvent reuses the slot of a scale-down event older than
    the longest scale-down period, though a scale-up policy with a longer period still counts it; rlop keeps
    every event inside the longest period of either direction, so it allows a little more here."""
    spec = autoscale(behavior={"scaleUp": down(0, ("Percent", 100, 120)), "scaleDown": down(0, ("Pods", 1, 15))})
    steps: list[Step] = [(0, [85]), (30, [80]), (45, [1000])]
    assert run(HPA(spec), 10, steps) == [9, 8, 18]
    assert run(Rlop(spec), 10, steps) == [9, 8, 20]


Trace = tuple[Autoscale, int, list[tuple[float, list[float | None], int, int]]]


@st.composite
def traces(draw: st.DrawFn) -> Trace:
    """A spec (no behavior, or behavior with one policy period for both directions: see the test above),
    a start and syncs with random gaps, metric values (some missing) and pod counts."""
    min_r = draw(st.integers(1, 5))
    max_r = draw(st.integers(min_r, 40))
    behavior = None
    if draw(st.booleans()):
        period = draw(st.sampled_from([15, 30, 60]))

        def rules() -> dict[str, Any]:
            policies = draw(st.lists(st.tuples(st.sampled_from(["Pods", "Percent"]), st.integers(1, 200)),
                                     min_size=1, max_size=2))  # fmt: skip
            return {
                "stabilizationWindowSeconds": draw(st.sampled_from([0, 15, 45, 120, 300])),
                "selectPolicy": draw(st.sampled_from(["Max", "Min", "Disabled"])),
                "policies": [{"type": t, "value": v, "periodSeconds": period} for t, v in policies],
            }

        behavior = {"scaleUp": rules(), "scaleDown": rules()}
    metrics = draw(st.integers(1, 2))
    spec = autoscale(draw(st.sampled_from(["Value", "AverageValue"])), draw(st.sampled_from([1, 7, 10, 100])),
                     min_r, max_r, behavior, metrics)  # fmt: skip
    value = st.one_of(st.none(), st.integers(0, 2000).map(float))
    t, steps = 0.0, []
    for _ in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([1, 5, 15, 30, 60, 200]))
        steps.append((t, [draw(value) for _ in range(metrics)], draw(st.integers(1, 3)), draw(st.integers(0, 2))))
    return spec, draw(st.integers(min_r, max_r)), steps


@settings(max_examples=300, deadline=None)
@given(traces())
def test_random_traces_decide_as_hpa(trace: Trace) -> None:
    spec, start, steps = trace
    hpa, rlop = HPA(spec), Rlop(spec)
    current = start
    for t, values, ready_less, pods_less in steps:
        ready, pods = max(1, current - ready_less), max(1, current - pods_less)  # HPA's ready pods; never 0 here
        now = T0 + timedelta(seconds=t)
        expected = hpa.reconcile(current, ready, pods, values, now)
        assert rlop.reconcile(current, ready, pods, values, now) == expected, (t, current, values)
        current = expected


def test_a_tie_between_metrics_is_explained_by_the_first() -> None:
    """computeReplicasForMetrics keeps the first metric whose proposal is the largest."""
    d = decide(autoscale(metrics=2, behavior={}), 2, 2, [Reading(40), Reading(40)], [], [], T0)
    assert d.replicas == 4 and d.metric == 40 and "metric 40" in d.reason
    d = decide(autoscale(metrics=2, behavior={}), 2, 2, [Reading(31), Reading(40)], [], [], T0)
    assert d.metric == 31  # both want 4: the first explains it
