"""The HPA-faithful calculator. Rate-limit cases are ported from kube-controller-manager's
pkg/controller/podautoscaler/horizontal_test.go (TestScalingWithRules), v1.36.3."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rlop.api.models import Autoscale, Behavior, Recommendation, ScaleEvent
from rlop.plan.autoscale import MOST, Reading, decide, propose, rate_limit, record, record_scale, stabilize

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)


def rules(pods: int = 0, pods_period: int = 0, percent: int = 0, percent_period: int = 0,
          window: int = 0) -> dict[str, Any]:  # fmt: skip
    """generateScalingRules(pods, podsPeriod, percent, percentPeriod, stabilizationWindow)."""
    policies = []
    if pods:
        policies.append({"type": "Pods", "value": pods, "periodSeconds": pods_period})
    if percent:
        policies.append({"type": "Percent", "value": percent, "periodSeconds": percent_period})
    return {"stabilizationWindowSeconds": window, "selectPolicy": "Max", "policies": policies or None}


def spec(min_r: int = 1, max_r: int = 1000, up: dict | None = None, down: dict | None = None,  # type: ignore[type-arg]
         target: str = "AverageValue", value: float = 10, **extra: Any) -> Autoscale:  # fmt: skip
    behavior = {k: v for k, v in (("scaleUp", up), ("scaleDown", down)) if v is not None}
    return Autoscale.model_validate({
        "minReplicas": min_r, "maxReplicas": max_r, "behavior": behavior or None,
        "metrics": [{"query": "q", "target": {"type": target, "value": value}}], **extra,
    })  # fmt: skip


def uniform(changes: list[int], period: int, sign: int = 1) -> list[ScaleEvent]:
    """generateEventsUniformDistribution: events in the middle of equal segments of the last `period`."""
    seg = period / len(changes)
    return [
        ScaleEvent(time=NOW - timedelta(seconds=period - seg * (i + 1) + seg / 2), change=sign * c)
        for i, c in enumerate(changes)
    ]


# name, min, max, up rules, down rules, up events, down events, current, prenormalized, expected, code
HPA_RULE_CASES = [
    ("within range", 3, 8, None, None, [], [], 5, 7, 7, "DesiredWithinRange"),
    ("below min", 2, 8, None, None, [], [], 3, 1, 2, "TooFewReplicas"),
    ("min 0", 0, 10, None, None, [], [], 1, 0, 0, "DesiredWithinRange"),
    ("max below scale-up limit", 1, 10, None, None, [], [], 20, 1000, 10, "TooManyReplicas"),
    ("desired above max", 100, 150, None, None, [], [], 100, 1000, 150, "TooManyReplicas"),
    ("user scale-up limit", 1, 2000, rules(0, 0, 1, 60), None, [], [], 3, 1000, 4, "ScaleUpLimit"),
    ("user scale-down limit", 3, 2000, None, rules(20, 60), [], [], 1000, 3, 980, "ScaleDownLimit"),
    ("default scale-up", 1, 1000, None, None, [], [], 10, 50, 20, "ScaleUpLimit"),
    ("pods > percent", 1, 1000, rules(100, 60, 100, 60), None, [], [], 10, 500, 110, "ScaleUpLimit"),
    ("percent > pods", 1, 1000, rules(2, 60, 100, 60), None, [], [], 10, 500, 20, "ScaleUpLimit"),
    ("large pods policy", 1, 1000, rules(100, 60), None, [], [], 10, 50, 50, "DesiredWithinRange"),
    ("large percent policy", 1, 1000, rules(10000, 60), None, [], [], 10, 50, 50, "DesiredWithinRange"),
    ("pod policy limits up", 1, 1000, rules(30, 60), None, [], [], 10, 50, 40, "ScaleUpLimit"),
    ("percent policy limits up", 1, 1000, rules(0, 0, 200, 60), None, [], [], 10, 50, 30, "ScaleUpLimit"),
    ("down percent > pods", 1, 1000, None, rules(20, 60, 1, 60, 300), [], [], 100, 2, 80, "ScaleDownLimit"),
    ("down pods > percent", 1, 1000, None, rules(2, 60, 1, 60, 300), [], [], 100, 2, 98, "ScaleDownLimit"),
    ("down to min", 1, 1000, None, rules(100, 60, 0, 0, 300), [], [], 10, 0, 1, "TooFewReplicas"),
    ("down to min, percent", 5, 1000, None, rules(0, 0, 100, 60, 300), [], [], 10, 2, 5, "TooFewReplicas"),
    ("down pod policy", 1, 1000, None, rules(5, 60, 0, 0, 300), [], [], 10, 2, 5, "ScaleDownLimit"),
    ("down percent policy", 1, 1000, None, rules(0, 0, 50, 60, 300), [], [], 10, 5, 5, "DesiredWithinRange"),
    ("up with events, max", 1, 200, rules(300, 60), None, uniform([1, 5, 9], 120), [], 100, 500, 200,
     "TooManyReplicas"),
    ("up events exhaust the rate", 1, 1000, rules(5, 120), None, uniform([1, 5, 9], 120), [], 100, 500, 100,
     "ScaleUpLimit"),
    ("up pods with events", 1, 1000, rules(150, 120), None, uniform([1, 5, 9], 120), [], 100, 500, 235,
     "ScaleUpLimit"),
    ("up percent with events", 1, 1000, rules(0, 0, 200, 120), None, uniform([1, 5, 9], 120), [], 100, 500,
     255, "ScaleUpLimit"),
    ("up percent with up and down events", 1, 1000, rules(0, 0, 300, 300), None, uniform([4], 120),
     uniform([2], 120, -1), 6, 24, 16, "ScaleUpLimit"),
    ("down default with events", 1, 1000, None, None, [], uniform([1, 5, 9], 120, -1), 10, 5, 5,
     "DesiredWithinRange"),
    ("down pods with events", 1, 1000, None, rules(5, 120, 0, 0, 300), [], uniform([1, 5, 9], 120, -1), 100, 2,
     100, "ScaleDownLimit"),
    ("down percent with events", 1, 1000, None, rules(0, 0, 50, 120, 300), [], uniform([2, 4, 6], 120, -1), 100,
     0, 56, "ScaleDownLimit"),
    ("down percent with up and down events", 1, 1000, None, rules(0, 0, 50, 180), uniform([2], 120),
     uniform([4], 120, -1), 10, 1, 6, "ScaleDownLimit"),
    ("down events prevent more", 1, 1000, None, rules(0, 0, 10, 120, 300), [], uniform([10, 10, 10], 120, -1),
     100, 0, 100, "ScaleDownLimit"),
    ("down events still allow more", 1, 1000, None, rules(0, 0, 1000, 120, 300), [],
     uniform([10, 10, 10], 120, -1), 10, 5, 5, "DesiredWithinRange"),
    ("outdated events, one policy", 1, 1000, rules(1000, 60), None, uniform([8, 12, 9, 11], 120), [], 100, 200,
     200, "DesiredWithinRange"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "min_r", "max_r", "up", "down", "up_events", "down_events", "current", "desired", "expected", "code"),
    HPA_RULE_CASES,
    ids=[c[0] for c in HPA_RULE_CASES],
)
def test_rate_limits_match_hpa(name: str, min_r: int, max_r: int, up: Any, down: Any, up_events: list[ScaleEvent],
                               down_events: list[ScaleEvent], current: int, desired: int, expected: int,
                               code: str) -> None:  # fmt: skip
    s = spec(min_r, max_r, up, down)
    s = s if s.behavior else s.model_copy(update={"behavior": Behavior()})  # the Go test's default rules
    stabilized, _ = stabilize(s, current, desired, [], NOW)
    assert stabilized == desired  # no history: stabilization is a no-op
    assert rate_limit(s, current, desired, up_events + down_events, NOW) == (expected, code)


@pytest.mark.parametrize(
    ("target", "value", "current", "ready", "expected"),
    [
        ("AverageValue", 130, 4, 4, 13),  # ceil(130 / 10)
        ("AverageValue", 42, 4, 4, 4),  # ratio 1.05: within tolerance
        ("AverageValue", 44, 4, 4, 4),  # ratio 1.1: at the edge -> within
        ("AverageValue", 45, 4, 4, 5),  # ratio 1.125: out
        ("AverageValue", 0, 4, 4, 0),
        ("AverageValue", 25, 0, 0, 3),  # from zero
        ("Value", 20, 3, 3, 6),  # ratio 2 x 3 ready
        ("Value", 20, 3, 2, 4),  # ready pods count, as in HPA
        ("Value", 20, 3, 0, 6),  # no ready pod yet: use current, not 0
        ("Value", 10.5, 3, 3, 3),  # within tolerance
        ("Value", 25, 0, 0, 3),  # from zero: ceil(ratio)
    ],
)
def test_per_metric_proposals(target: str, value: float, current: int, ready: int, expected: int) -> None:
    assert propose(spec(target=target), 0, value, current, ready, current)[0] == expected


def test_tolerance_edge_at_110_percent() -> None:
    # 44 / (10 x 4) = 1.1 is within the default tolerance of 0.1
    assert propose(spec(), 0, 44, 4, 4, 4)[0] == 4


def test_custom_tolerance() -> None:
    s = spec(up={"tolerance": 0.5})
    assert propose(s, 0, 55, 4, 4, 4)[0] == 4  # 1.375: within +50 %
    assert propose(s, 0, 30, 4, 4, 4)[0] == 3  # 0.75: outside the default -10 %


def test_average_value_divides_by_the_pods_that_exist() -> None:
    # GetExternalPerPodMetricReplicas takes the target's status.replicas: 4 pods of 6 wanted, 42 is within
    assert propose(spec(), 0, 42, 6, 4, 4)[0] == 4
    assert propose(spec(), 0, 42, 6, 4, 0)[0] == 5  # no pod yet: ceil(42 / 10)


def read(*values: float | None) -> list[Reading]:
    return [Reading(v, None if v is not None else "empty result") for v in values]


def test_max_over_metrics() -> None:
    s = Autoscale.model_validate({"minReplicas": 1, "maxReplicas": 20, "metrics": [
        {"query": "a", "target": {"type": "AverageValue", "value": 10}},
        {"query": "b", "target": {"type": "AverageValue", "value": 1}}]})  # fmt: skip
    d = decide(s, 2, 2, read(30, 7), [], [], NOW)
    assert (d.metric, d.demand) == (7, 7.0)  # max(ceil(30/10), ceil(7/1))
    assert (d.replicas, d.code) == (4, "ScaleUpLimit")  # no behavior: HPA's legacy max(2 x 2, 4) per pass


def test_missing_metrics_hold_and_never_scale_down() -> None:
    s = spec(min_r=1, max_r=10)
    held = decide(s, 5, 5, read(None), [], [], NOW)
    assert (held.replicas, held.metrics_ok, held.code) == (5, False, "MetricsUnavailable")
    assert "empty result" in held.reason
    # one metric missing, the other says scale down: refuse (HPA's invalidMetricsCount rule)
    two = Autoscale.model_validate({"minReplicas": 1, "maxReplicas": 10, "metrics": [
        {"query": "a", "target": {"type": "AverageValue", "value": 10}},
        {"query": "b", "target": {"type": "AverageValue", "value": 10}}]})  # fmt: skip
    assert decide(two, 5, 5, read(0, None), [], [], NOW).replicas == 5
    # ... but scaling up on the metrics that do work is allowed
    assert decide(two, 5, 5, read(90, None), [], [], NOW).replicas == 9


def test_fallback_replicas_never_scale_down() -> None:
    s = spec(min_r=1, max_r=10, fallbackReplicas=4)
    assert decide(s, 2, 2, read(None), [], [], NOW).replicas == 4
    assert decide(s, 6, 6, read(None), [], [], NOW).replicas == 6


def test_out_of_bounds_current_is_clamped_first() -> None:
    assert decide(spec(min_r=2, max_r=5), 9, 9, read(1000), [], [], NOW).replicas == 5
    assert decide(spec(min_r=2, max_r=5), 1, 1, read(0), [], [], NOW).replicas == 2


def test_scale_down_waits_for_the_stabilization_window() -> None:
    s = spec(min_r=1, max_r=10, down=rules(0, 0, 100, 15, 60))
    history: list[Recommendation] = []
    events: list[ScaleEvent] = []
    current, t, previous = 8, NOW, None
    # high load for a while, then none: the window holds 8 for 60 s after the last high recommendation
    for _ in range(3):
        d = decide(s, current, current, read(80), history, events, t, previous)
        history, previous, t = d.recommendations, t, t + timedelta(seconds=5)
    last_high = t - timedelta(seconds=5)
    seen = []
    while t < NOW + timedelta(seconds=200):
        d = decide(s, current, current, read(0), history, events, t, previous)
        history, previous = d.recommendations, t
        events = record_scale(events, s, current, d.replicas, t)
        seen.append((t, d.replicas, d.code))
        current, t = d.replicas, t + timedelta(seconds=5)
    first_down = next(at for at, replicas, _ in seen if replicas < 8)
    assert first_down - last_high == timedelta(seconds=60)
    assert any(code == "ScaleDownStabilized" for _, _, code in seen)
    assert seen[-1][1] == 1


def test_history_is_bounded_and_unchanged_while_steady() -> None:
    s = spec(min_r=1, max_r=100, down=rules(0, 0, 100, 15, 30))
    h1 = record(s, [], 5, None, NOW)
    h2 = record(s, h1, 5, NOW, NOW + timedelta(seconds=10))
    assert h1 == h2 == [Recommendation(replicas=5)]  # steady: nothing to write
    history: list[Recommendation] = []
    for i in range(200):
        previous = NOW + timedelta(seconds=i - 1) if i else None
        history = record(s, history, i % 90 + 1, previous, NOW + timedelta(seconds=i))
    assert len(history) <= 31  # what a 30 s window can still use: one entry per pass at the most
    assert all(r.until is None or r.until > NOW + timedelta(seconds=199 - 30) for r in history)
    values = [r.replicas for r in history]
    assert values == sorted(values, reverse=True)  # only a scale-down window: a decreasing queue


def test_scale_events_expire_after_the_longest_period() -> None:
    s = spec(up=rules(4, 15), down=rules(0, 0, 100, 60))
    events = record_scale([], s, 1, 5, NOW)
    events = record_scale(events, s, 5, 5, NOW + timedelta(seconds=30))
    assert events == [ScaleEvent(time=NOW, change=4)]
    assert record_scale(events, s, 5, 3, NOW + timedelta(seconds=61)) == [
        ScaleEvent(time=NOW + timedelta(seconds=61), change=-2)
    ]


@pytest.mark.parametrize(("value", "target"), [(1e308, 0.5), (-1e308, 0.5), (1e15, 1e-9)])
def test_an_overflowing_demand_is_the_most_or_none_not_a_crash(value: float, target: float) -> None:
    replicas, _ = propose(spec(target="Value", value=target), 0, value, 2, 2, 2)
    assert replicas == (0 if value < 0 else MOST)
