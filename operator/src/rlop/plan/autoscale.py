"""An HPA-faithful replica calculator (pure; time and history are passed in).

The steps, their order over time and their reason codes follow kube-controller-manager's podautoscaler
(replica_calculator.go and horizontal.go, v1.36): per-metric proposals with a tolerance band, the max over
metrics, refusal to scale down when any metric is missing, the first pass seeding the history with the
current count, a pass out of [min, max] only moving to the bound, stabilization windows, Pods/Percent rate
limits with Max/Min/Disabled, the min/max clamp, and without `behavior` HPA's legacy path. The deliberate
differences are listed in the README ("Autoscaling: where rlop differs from HPA").
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
LEGACY_DOWN_WINDOW = 300  # kube-controller-manager --horizontal-pod-autoscaler-downscale-stabilization
LEGACY_UP_FACTOR, LEGACY_UP_MINIMUM = 2, 4  # calculateScaleUpLimit: max(2 x current, 4) per pass
MOST = 2**31 - 1  # HPA's replica counts are int32


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


def _ceil(replicas: float) -> int:
    """math.Ceil of a replica count as HPA takes it: capped at int32's largest; below 0 (or NaN) is 0."""
    return math.ceil(min(replicas, MOST)) if replicas > 0 else 0


def propose(spec: Autoscale, index: int, value: float, current: int, ready: int, pods: int) -> tuple[int, float]:
    """One metric's proposal (replica_calculator.go) and the unrounded demand behind it; `pods` is the
    target's status.replicas (the pods that exist), `ready` those of them that are ready."""
    target = spec.metrics[index].target
    if target.type == "AverageValue":  # GetExternalPerPodMetricReplicas
        demand = value / target.value
        if pods and _within(value / (target.value * pods), spec):
            return pods, demand
        return _ceil(demand), demand
    ratio = value / target.value  # GetExternalMetricReplicas -> getUsageRatioReplicaCount
    if current == 0:
        return _ceil(ratio), ratio
    base = ready or current  # HPA multiplies by the ready pods only, 0 while none is ready (README)
    if _within(ratio, spec):
        return current, ratio * base
    return _ceil(ratio * base), ratio * base


Entry = tuple[int, datetime]  # (replicas recommended, when last recommended)


def _entries(history: Sequence[Recommendation], previous: datetime | None, now: datetime) -> list[Entry]:
    """The history with times: the open entry was last recommended at the pool's previous pass."""
    return [(r.replicas, r.until or previous or now) for r in history]


def _queue(entries: Sequence[Entry], cutoff: datetime, high: bool) -> set[int]:
    """The entries a window's max (`high`) or min can still take at a later pass: newest first, an entry is
    kept while it is inside the window and outweighs every entry of its time or later (a monotonic queue;
    of one time, only the newest best one)."""
    keep: set[int] = set()
    best: int | None = None
    i = len(entries) - 1
    while i >= 0:
        j = i
        while j > 0 and entries[j - 1][1] == entries[i][1]:
            j -= 1
        same = range(i, j - 1, -1)
        top = (max if high else min)(same, key=lambda k: entries[k][0])  # the newest of the best: first found
        value = entries[top][0]
        if best is None or (value > best if high else value < best):
            if entries[top][1] > cutoff:
                keep.add(top)
            best = value
        i = j - 1
    return keep


def _prune(entries: Sequence[Entry], spec: Autoscale, now: datetime) -> list[Recommendation]:
    """Keep only what a later pass can still use (a window's max or min; nothing at or before its cutoff
    now can count later), so the history is exact and bounded: per window, one entry per second at most;
    the newest entry is always kept (open)."""
    up, down = _windows(spec)
    keep = _queue(entries, now - timedelta(seconds=down), high=True)
    if up is not None:
        keep |= _queue(entries, now - timedelta(seconds=up), high=False)
    kept = [Recommendation(replicas=r, until=at) for i, (r, at) in enumerate(entries[:-1]) if i in keep]
    return [*kept, Recommendation(replicas=entries[-1][0])]


def _windows(spec: Autoscale) -> tuple[int | None, int]:
    """The scale-up and scale-down stabilization windows; without `behavior` (HPA's legacy path) there is no
    scale-up window and the scale-down window is kube-controller-manager's default."""
    if spec.behavior is None:
        return None, LEGACY_DOWN_WINDOW
    return rules(spec, True).stabilization_window_seconds or 0, rules(spec, False).stabilization_window_seconds or 0


def stabilize(spec: Autoscale, current: int, desired: int, entries: Sequence[Entry], now: datetime) -> tuple[int, str]:
    """stabilizeRecommendationWithBehaviors: `current` brought between the min of the recommendations inside
    the scale-up window and the max of those inside the scale-down window (both including `desired`);
    without `behavior`, stabilizeRecommendation: the max inside the scale-down window (its boundary is
    inclusive there, exclusive with behaviors, as in HPA)."""
    up, down = _windows(spec)
    if up is None:
        cutoff = now - timedelta(seconds=down)
        stabilized = max([desired] + [r for r, at in entries if at >= cutoff])
        return stabilized, R.SCALE_DOWN_STABILIZED
    up_cut, down_cut = now - timedelta(seconds=up), now - timedelta(seconds=down)
    low = min([desired] + [r for r, at in entries if at > up_cut])
    high = max([desired] + [r for r, at in entries if at > down_cut])
    code = R.SCALE_UP_STABILIZED if desired >= current else R.SCALE_DOWN_STABILIZED
    return min(max(current, low), high), code


def record(
    spec: Autoscale, history: Sequence[Recommendation], desired: int, previous: datetime | None, now: datetime
) -> list[Recommendation]:
    """The history after this pass recommended `desired` (an unchanged recommendation changes nothing)."""
    entries = _entries(history, previous, now)
    if history and history[-1].until is None and history[-1].replicas == desired:
        entries[-1] = (desired, now)
    else:
        entries.append((desired, now))
    return _prune(entries, spec, now)


def close(history: Sequence[Recommendation], previous: datetime | None, now: datetime) -> list[Recommendation]:
    """A pass that recommends nothing (no metrics, replicas out of bounds): the open entry was last
    recommended at the previous pass, and ages out from then."""
    if not history or history[-1].until is not None:
        return list(history)
    return [*history[:-1], Recommendation(replicas=history[-1].replicas, until=previous or now)]


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
    """convertDesiredReplicasWithBehaviorRate: the rate-limited, clamped count and HPA's reason code;
    without `behavior`, convertDesiredReplicasWithRules: up to max(2 x current, 4) per pass."""

    def capped_up(limit: int) -> tuple[int, str]:
        allowed, code = (
            (limit, R.SCALE_UP_LIMIT) if spec.max_replicas > limit else (spec.max_replicas, R.TOO_MANY_REPLICAS)
        )
        return (allowed, code) if desired > allowed else (desired, R.DESIRED_WITHIN_RANGE)

    if spec.behavior is None:
        if desired < spec.min_replicas:
            return spec.min_replicas, R.TOO_FEW_REPLICAS
        return capped_up(max(LEGACY_UP_FACTOR * current, LEGACY_UP_MINIMUM))
    if desired > current:
        return capped_up(max(rate_bound(current, events, rules(spec, True), now, up=True), current))
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
    """storeScaleEvent: append a scale event and keep every one inside the longest policy period of
    either direction (HPA keeps none without `behavior`: its legacy path has no rate policies)."""
    if spec.behavior is None:
        return []
    periods = [p.period_seconds for up in (True, False) for p in rules(spec, up).policies or ()]
    cutoff = now - timedelta(seconds=max(periods, default=0))
    kept = [e for e in events if e.time > cutoff]
    change = after - before
    if change and kept and kept[-1].time == now and (kept[-1].change > 0) == (change > 0):  # one a second
        kept[-1] = ScaleEvent(time=now, change=kept[-1].change + change)
    elif change:
        kept.append(ScaleEvent(time=now, change=change))
    return kept


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
    previous: datetime | None = None,
    pods: int | None = None,
) -> Decision:
    """Desired replicas for one pool in one pass (reconcileAutoscaler, then normalizeDesiredReplicas or
    normalizeDesiredReplicasWithBehaviors). `previous`: the pool's previous pass (None: unknown, e.g. after a
    restart: taken as now); `pods`: the pods that exist (default `current`)."""
    history = list(recommendations) or [Recommendation(replicas=current, until=now)]  # recordInitialRecommendation
    if current > spec.max_replicas or current < spec.min_replicas:  # moves to the bound, and only that
        bound, code, why = (
            (spec.max_replicas, R.TOO_MANY_REPLICAS, "above maxReplicas")
            if current > spec.max_replicas
            else (spec.min_replicas, R.TOO_FEW_REPLICAS, "below minReplicas")
        )
        return Decision(bound, code, f"{current} replicas {why}", 0.0, None, True, close(history, previous, now))
    pods = current if pods is None else pods
    proposals = [
        (*propose(spec, i, r.value, current, ready, pods), i) for i, r in enumerate(readings) if r.value is not None
    ]
    missing = [f"metric {i}: {r.error or 'no data'}" for i, r in enumerate(readings) if r.value is None]
    best = max(proposals, key=lambda p: p[0], default=None)  # computeReplicasForMetrics: the first of a tie
    if best is None or (missing and best[0] < current):  # never scale down on partial data
        hold = max(current, spec.fallback_replicas or 0) if best is None else current
        why = "; ".join(missing)
        verb = f"fallback to {hold}" if hold != current else f"holding {current}"
        return Decision(hold, R.METRICS_UNAVAILABLE, f"{verb}: {why}", 0.0, None, False, close(history, previous, now))
    prenormalized, demand, index = best
    value = readings[index].value
    stabilized, stabilized_code = stabilize(spec, current, prenormalized, _entries(history, previous, now), now)
    history = record(spec, history, prenormalized, previous, now)
    code = R.DESIRED_WITHIN_RANGE if stabilized == prenormalized else stabilized_code
    final, limit_code = rate_limit(spec, current, stabilized, events, now)
    if limit_code != R.DESIRED_WITHIN_RANGE or code == R.DESIRED_WITHIN_RANGE:
        code = limit_code
    target = spec.metrics[index].target
    per = " per replica" if target.type == "AverageValue" else ""
    limited = _MESSAGES[code] if spec.behavior or code != R.SCALE_UP_LIMIT else "limited to max(2 x current, 4)"
    reason = f"metric {value:g} vs target {target.value:g}{per}: wants {prenormalized}, {limited}"
    return Decision(final, code, reason, demand, value, True, history)
