"""An HPA-faithful replica calculator (pure; time and history are passed in).

The steps and their reason codes follow kube-controller-manager's podautoscaler (replica_calculator.go
and horizontal.go): per-metric proposals with a tolerance band, the max over metrics, refusal to scale
down when any metric is missing, stabilization windows, Pods/Percent rate limits with Max/Min/Disabled,
and the min/max clamp. Two deliberate differences, both in the safe direction:

- History is a list of *runs* (a recommended value and until when), not a sample per sync, so it fits in
  status, is written only when it changes, and survives operator restarts.
- A `Value` metric with no ready pod yet proposes from the current replica count instead of zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rlop.api import reasons as R
from rlop.api.models import Autoscale, Behavior, Recommendation, ScaleEvent, ScalingPolicy, ScalingRules

DEFAULT_TOLERANCE = 0.1
# HPA defaults (autoscaling/v2 HPAScalingRules): up: 0 s window, max(4 pods, 100%) per 15 s;
# down: 300 s window, 100% per 15 s.
DEFAULT_UP = ScalingRules(
    stabilization_window_seconds=0,
    select_policy="Max",
    policies=[
        ScalingPolicy(type="Pods", value=4, period_seconds=15),
        ScalingPolicy(type="Percent", value=100, period_seconds=15),
    ],
)
DEFAULT_DOWN = ScalingRules(
    stabilization_window_seconds=300,
    select_policy="Max",
    policies=[ScalingPolicy(type="Percent", value=100, period_seconds=15)],
)
MAX_RECOMMENDATIONS = 64
MAX_EVENTS = 128


@dataclass(frozen=True)
class Reading:
    """One metric's value for one pool; `value` is None when unavailable, with `error` saying why and
    `unreachable` telling a Prometheus outage from a bad or empty query."""

    value: float | None
    error: str | None = None
    unreachable: bool = False


@dataclass(frozen=True)
class Decision:
    replicas: int
    code: str  # HPA's reason code: DesiredWithinRange, ScaleUpLimit, ScaleDownStabilized, ...
    reason: str  # for people
    demand: float  # replicas the metrics imply (unrounded), for budget arbitration
    metric: float | None  # the value of the metric that drove the proposal
    metrics_ok: bool
    recommendations: list[Recommendation] = field(default_factory=list)


def rules(spec: Autoscale, up: bool) -> ScalingRules:
    """The effective rules of one direction: the user's, with HPA defaults filled in field by field."""
    default = DEFAULT_UP if up else DEFAULT_DOWN
    behavior = spec.behavior or Behavior()
    given = behavior.scale_up if up else behavior.scale_down
    if given is None:
        return default
    return ScalingRules(
        stabilization_window_seconds=(
            default.stabilization_window_seconds
            if given.stabilization_window_seconds is None
            else given.stabilization_window_seconds
        ),
        select_policy=given.select_policy or "Max",
        policies=given.policies or default.policies,
        tolerance=given.tolerance,
    )


def _within(ratio: float, spec: Autoscale) -> bool:
    down = rules(spec, False).tolerance
    up = rules(spec, True).tolerance
    lo = 1.0 - (DEFAULT_TOLERANCE if down is None else down)
    hi = 1.0 + (DEFAULT_TOLERANCE if up is None else up)
    return lo <= ratio <= hi


_MOST = 1e9  # a demand above any maxReplicas (the proposal is clamped to maxReplicas later)


def _ceil(demand: float) -> int:
    """Replicas for `demand`, which may overflow to +-inf (1e308 / 0.5): clamped to [0, a huge number]."""
    return math.ceil(min(max(demand, 0.0), _MOST) - 1e-9)


def propose(spec: Autoscale, index: int, value: float, current: int, ready: int) -> tuple[int, float]:
    """One metric's proposal (replica_calculator.go) and the unrounded demand behind it."""
    target = spec.metrics[index].target
    if target.type == "AverageValue":  # GetExternalPerPodMetricReplicas
        demand = value / target.value
        if current and _within(value / (target.value * current), spec):
            return current, demand
        return _ceil(demand), demand
    ratio = value / target.value  # GetExternalMetricReplicas / getUsageRatioReplicaCount
    if current == 0:
        return _ceil(ratio), ratio
    base = ready or current
    if _within(ratio, spec):
        return current, ratio * base
    return _ceil(ratio * base), ratio * base


def _in_window(rec: Recommendation, cutoff: datetime, now: datetime) -> bool:
    """Was `rec` recommended after `cutoff`? An open run was last recommended just before `now`."""
    return (rec.until or now) > cutoff


def stabilize(
    spec: Autoscale, current: int, desired: int, history: Sequence[Recommendation], now: datetime
) -> tuple[int, list[Recommendation]]:
    """stabilizeRecommendationWithBehaviors: clamp `current` between the min of recommendations in the
    scale-up window and the max of those in the scale-down window; record `desired`."""
    up_cut = now - timedelta(seconds=rules(spec, True).stabilization_window_seconds or 0)
    down_cut = now - timedelta(seconds=rules(spec, False).stabilization_window_seconds or 0)
    up = min([desired] + [r.replicas for r in history if _in_window(r, up_cut, now)])
    down = max([desired] + [r.replicas for r in history if _in_window(r, down_cut, now)])
    stabilized = min(max(current, up), down)
    oldest = min(up_cut, down_cut)
    kept = [
        r if r.until is not None else r.model_copy(update={"until": now})
        for r in history
        if r.replicas != desired and _in_window(r, oldest, now)
    ]
    kept = sorted(kept, key=lambda r: r.until or now)[-(MAX_RECOMMENDATIONS - 1) :]
    return stabilized, [*kept, Recommendation(replicas=desired)]


def _change(events: Sequence[ScaleEvent], period: int, now: datetime, up: bool) -> int:
    cutoff = now - timedelta(seconds=period)
    return sum(abs(e.change) for e in events if e.time > cutoff and (e.change > 0) == up)


def rate_bound(current: int, events: Sequence[ScaleEvent], r: ScalingRules, now: datetime, up: bool) -> int:
    """calculateScaleUpLimitWithScalingRules (up) and calculateScaleDownLimitWithBehaviors (down): each
    policy allows `value` pods or percent from the replica count at the start of its period."""
    if r.select_policy == "Disabled":
        return current
    most_change = (r.select_policy != "Min") == up  # Max picks the largest change: highest up, lowest down
    proposals = []
    for p in r.policies or ():
        start = current - _change(events, p.period_seconds, now, True) + _change(events, p.period_seconds, now, False)
        if p.type == "Pods":
            proposals.append(start + p.value if up else start - p.value)
        else:
            proposals.append(math.ceil(start * (1 + p.value / 100)) if up else int(start * (1 - p.value / 100)))
    return (max if most_change else min)(proposals) if proposals else current


def rate_limit(
    spec: Autoscale, current: int, desired: int, events: Sequence[ScaleEvent], now: datetime
) -> tuple[int, str]:
    """convertDesiredReplicasWithBehaviorRate: the rate-limited, clamped count and HPA's reason code."""
    if desired > current:
        limit = max(rate_bound(current, events, rules(spec, True), now, up=True), current)
        allowed, code = (
            (limit, R.SCALE_UP_LIMIT) if spec.max_replicas > limit else (spec.max_replicas, R.TOO_MANY_REPLICAS)
        )
        return (allowed, code) if desired > allowed else (desired, R.DESIRED_WITHIN_RANGE)
    if desired < current:
        limit = min(rate_bound(current, events, rules(spec, False), now, up=False), current)
        allowed, code = (
            (limit, R.SCALE_DOWN_LIMIT) if spec.min_replicas < limit else (spec.min_replicas, R.TOO_FEW_REPLICAS)
        )
        return (allowed, code) if desired < allowed else (desired, R.DESIRED_WITHIN_RANGE)
    return desired, R.DESIRED_WITHIN_RANGE


def record_scale(
    events: Sequence[ScaleEvent], spec: Autoscale, before: int, after: int, now: datetime
) -> list[ScaleEvent]:
    """Append a scale event and drop those older than the longest policy period that could use them."""
    periods = [p.period_seconds for up in (True, False) for p in rules(spec, up).policies or ()]
    cutoff = now - timedelta(seconds=max(periods, default=0))
    kept = [e for e in events if e.time > cutoff]
    if after != before:
        kept.append(ScaleEvent(time=now, change=after - before))
    return kept[-MAX_EVENTS:]


_MESSAGES = {
    R.DESIRED_WITHIN_RANGE: "within range",
    R.SCALE_UP_LIMIT: "limited by the scaleUp policies",
    R.SCALE_DOWN_LIMIT: "limited by the scaleDown policies",
    R.TOO_MANY_REPLICAS: "capped at maxReplicas",
    R.TOO_FEW_REPLICAS: "floored at minReplicas",
    R.SCALE_UP_STABILIZED: "limited by the scaleUp stabilization window",
    R.SCALE_DOWN_STABILIZED: "limited by the scaleDown stabilization window",
}


def decide(
    spec: Autoscale,
    current: int,
    ready: int,
    readings: Sequence[Reading],
    recommendations: Sequence[Recommendation],
    events: Sequence[ScaleEvent],
    now: datetime,
) -> Decision:
    """Desired replicas for one pool (reconcileAutoscaler + normalizeDesiredReplicasWithBehaviors)."""
    if current > spec.max_replicas:
        return Decision(
            spec.max_replicas, R.TOO_MANY_REPLICAS, "above maxReplicas", 0.0, None, True, list(recommendations)
        )
    if current < spec.min_replicas:
        return Decision(
            spec.min_replicas, R.TOO_FEW_REPLICAS, "below minReplicas", 0.0, None, True, list(recommendations)
        )
    proposals = [(*propose(spec, i, r.value, current, ready), i) for i, r in enumerate(readings) if r.value is not None]
    missing = [f"metric {i}: {r.error or 'no data'}" for i, r in enumerate(readings) if r.value is None]
    best = max(proposals, default=None)
    if best is None or (missing and best[0] < current):  # never scale down on partial data
        hold = max(current, spec.fallback_replicas or 0) if best is None else current
        why = "; ".join(missing)
        verb = f"fallback to {hold}" if hold != current else f"holding {current}"
        return Decision(hold, R.METRICS_UNAVAILABLE, f"{verb}: {why}", 0.0, None, False, list(recommendations))
    prenormalized, demand, index = best
    value = readings[index].value
    stabilized, history = stabilize(spec, current, prenormalized, recommendations, now)
    code = R.DESIRED_WITHIN_RANGE
    if stabilized != prenormalized:
        code = R.SCALE_UP_STABILIZED if prenormalized >= current else R.SCALE_DOWN_STABILIZED
    final, limit_code = rate_limit(spec, current, stabilized, events, now)
    if limit_code != R.DESIRED_WITHIN_RANGE or code == R.DESIRED_WITHIN_RANGE:
        code = limit_code
    target = spec.metrics[index].target
    per = " per replica" if target.type == "AverageValue" else ""
    reason = f"metric {value:g} vs target {target.value:g}{per}: wants {prenormalized}, {_MESSAGES[code]}"
    return Decision(final, code, reason, demand, value, True, history)
