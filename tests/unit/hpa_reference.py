"""kube-controller-manager's HorizontalController for one HPA with External metrics, transliterated from
pkg/controller/podautoscaler (horizontal.go, replica_calculator.go, v1.36.3) function by function, with its
in-memory lists, slot reuse and boundary comparisons. A test oracle only: rlop's planner never imports it.

Not modelled: milli-unit quantities (the values here are exact in both), scale to zero (HPAScaleToZero),
conditions and events."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from rlop.api.models import Autoscale, ScalingPolicy, ScalingRules

MAX_INT32 = 2**31 - 1
DOWNSCALE_STABILISATION_WINDOW = 300  # --horizontal-pod-autoscaler-downscale-stabilization
TOLERANCE = 0.1  # --horizontal-pod-autoscaler-tolerance


@dataclass
class _Event:  # timestampedScaleEvent
    replica_change: int
    timestamp: datetime
    outdated: bool = False


@dataclass
class HPA:
    spec: Autoscale
    recommendations: list[tuple[int, datetime]] | None = None  # timestampedRecommendation
    scale_up_events: list[_Event] = field(default_factory=list)
    scale_down_events: list[_Event] = field(default_factory=list)

    # ------------------------------------------------------------ behavior defaults (autoscaling/v2 defaults.go)

    def _up_rules(self) -> ScalingRules:
        given = self.spec.behavior.scale_up if self.spec.behavior else None
        policies = [ScalingPolicy(type="Pods", value=4, period_seconds=15),
                    ScalingPolicy(type="Percent", value=100, period_seconds=15)]  # fmt: skip
        if given is None:  # GenerateHPAScaleUpRules(nil)
            return ScalingRules(stabilization_window_seconds=0, select_policy="Max", policies=policies)
        return ScalingRules(
            stabilization_window_seconds=0
            if given.stabilization_window_seconds is None
            else given.stabilization_window_seconds,
            select_policy=given.select_policy or "Max",
            policies=given.policies or policies,
            tolerance=given.tolerance,
        )

    def _down_rules(self) -> ScalingRules:
        given = self.spec.behavior.scale_down if self.spec.behavior else None
        policies = [ScalingPolicy(type="Percent", value=100, period_seconds=15)]
        if given is None:  # GenerateHPAScaleDownRules(nil): window nil, then maybeInitScaleDownStabilizationWindow
            return ScalingRules(
                stabilization_window_seconds=DOWNSCALE_STABILISATION_WINDOW, select_policy="Max", policies=policies
            )
        return ScalingRules(
            stabilization_window_seconds=DOWNSCALE_STABILISATION_WINDOW
            if given.stabilization_window_seconds is None
            else given.stabilization_window_seconds,
            select_policy=given.select_policy or "Max",
            policies=given.policies or policies,
            tolerance=given.tolerance,
        )

    def _is_within(self, ratio: float) -> bool:  # tolerancesForHpa + Tolerances.isWithin
        down = up = TOLERANCE
        if self.spec.behavior is not None:
            if (d := self._down_rules().tolerance) is not None:
                down = d
            if (u := self._up_rules().tolerance) is not None:
                up = u
        return (1.0 - down) <= ratio <= (1.0 + up)

    # ------------------------------------------------------------ replica_calculator.go

    def _external(self, current: int, ready: int, usage: float, target: float) -> int:
        """GetExternalMetricReplicas -> getUsageRatioReplicaCount."""
        ratio = usage / target
        if current != 0:
            if self._is_within(ratio):
                return current
            count = ratio * ready
            return MAX_INT32 if count > MAX_INT32 else math.ceil(count)
        return math.ceil(ratio)

    def _external_per_pod(self, status_replicas: int, usage: float, target: float) -> int:
        """GetExternalPerPodMetricReplicas."""
        replicas = status_replicas
        ratio = usage / (target * status_replicas) if status_replicas else math.inf if usage else math.nan
        if not self._is_within(ratio):
            result = math.ceil(usage / target)
            replicas = MAX_INT32 if result > MAX_INT32 else result
        return replicas

    # ------------------------------------------------------------ horizontal.go

    def reconcile(self, current: int, ready: int, pods: int, values: list[float | None], now: datetime) -> int:
        """reconcileAutoscaler: the replicas after one sync at `now` (every time.Now() of a sync is taken as
        this one); `current` if it does not rescale."""
        if self.recommendations is None:  # recordInitialRecommendation
            self.recommendations = [(current, now)]
        min_replicas = self.spec.min_replicas
        if current > self.spec.max_replicas:
            desired = self.spec.max_replicas
        elif current < min_replicas:
            desired = min_replicas
        else:
            replicas, invalid = 0, 0  # computeReplicasForMetrics
            for i, value in enumerate(values):
                if value is None:
                    invalid += 1
                    continue
                target = self.spec.metrics[i].target
                if target.type == "AverageValue":
                    proposal = self._external_per_pod(pods, value, target.value)
                else:
                    proposal = self._external(current, ready, value, target.value)
                if replicas == 0 or proposal > replicas:
                    replicas = proposal
            if invalid >= len(values) or (invalid > 0 and replicas < current):
                return current  # FailedComputeMetricsReplicas: returns before any recommendation
            desired = max(0, replicas)
            if self.spec.behavior is None:
                desired = self._normalize(current, desired, now)
            else:
                desired = self._normalize_with_behaviors(current, desired, now)
        if desired != current:
            self._store_scale_event(current, desired, now)
        return desired

    def _normalize(self, current: int, prenormalized: int, now: datetime) -> int:
        """normalizeDesiredReplicas: stabilizeRecommendation + convertDesiredReplicasWithRules."""
        stabilized = self._stabilize_legacy(prenormalized, now)
        scale_up_limit = int(max(2.0 * current, 4.0))  # calculateScaleUpLimit
        maximum = scale_up_limit if self.spec.max_replicas > scale_up_limit else self.spec.max_replicas
        if stabilized < self.spec.min_replicas:
            return self.spec.min_replicas
        if stabilized > maximum:
            return maximum
        return stabilized

    def _stabilize_legacy(self, prenormalized: int, now: datetime) -> int:
        """stabilizeRecommendation."""
        assert self.recommendations is not None
        max_recommendation, found_old, old_index = prenormalized, False, 0
        cutoff = now - timedelta(seconds=DOWNSCALE_STABILISATION_WINDOW)
        for i, (rec, at) in enumerate(self.recommendations):
            if at < cutoff:
                found_old, old_index = True, i
            elif rec > max_recommendation:
                max_recommendation = rec
        if found_old:
            self.recommendations[old_index] = (prenormalized, now)
        else:
            self.recommendations.append((prenormalized, now))
        return max_recommendation

    def _normalize_with_behaviors(self, current: int, prenormalized: int, now: datetime) -> int:
        """normalizeDesiredReplicasWithBehaviors."""
        stabilized = self._stabilize_with_behaviors(current, prenormalized, now)
        return self._convert_with_behavior_rate(current, stabilized, now)

    def _stabilize_with_behaviors(self, current: int, desired: int, now: datetime) -> int:
        """stabilizeRecommendationWithBehaviors."""
        assert self.recommendations is not None
        up_cutoff = now - timedelta(seconds=self._up_rules().stabilization_window_seconds or 0)
        down_cutoff = now - timedelta(seconds=self._down_rules().stabilization_window_seconds or 0)
        up_rec = down_rec = desired
        found_old, old_index = False, 0
        for i, (rec, at) in enumerate(self.recommendations):
            if at > up_cutoff:
                up_rec = min(rec, up_rec)
            if at > down_cutoff:
                down_rec = max(rec, down_rec)
            if at < up_cutoff and at < down_cutoff:
                found_old, old_index = True, i
        recommendation = current
        if recommendation < up_rec:
            recommendation = up_rec
        if recommendation > down_rec:
            recommendation = down_rec
        if found_old:
            self.recommendations[old_index] = (desired, now)
        else:
            self.recommendations.append((desired, now))
        return recommendation

    def _convert_with_behavior_rate(self, current: int, desired: int, now: datetime) -> int:
        """convertDesiredReplicasWithBehaviorRate."""
        if desired > current:
            limit = self._scale_up_limit(current, now)
            limit = max(limit, current)
            maximum = limit if self.spec.max_replicas > limit else self.spec.max_replicas
            if desired > maximum:
                return maximum
        elif desired < current:
            limit = self._scale_down_limit(current, now)
            limit = min(limit, current)
            minimum = limit if self.spec.min_replicas < limit else self.spec.min_replicas
            if desired < minimum:
                return minimum
        return desired

    @staticmethod
    def _change_per_period(period: int, events: list[_Event], now: datetime) -> int:
        """getReplicasChangePerPeriod."""
        cutoff = now - timedelta(seconds=period)
        return sum(e.replica_change for e in events if e.timestamp > cutoff)

    def _scale_up_limit(self, current: int, now: datetime) -> int:
        """calculateScaleUpLimitWithScalingRules."""
        rules = self._up_rules()
        if rules.select_policy == "Disabled":
            return current
        pick, result = (min, MAX_INT32) if rules.select_policy == "Min" else (max, -MAX_INT32 - 1)
        for p in rules.policies or ():
            added = self._change_per_period(p.period_seconds, self.scale_up_events, now)
            deleted = self._change_per_period(p.period_seconds, self.scale_down_events, now)
            start = current - added + deleted
            proposed = start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100))
            result = pick(result, proposed)
        return result

    def _scale_down_limit(self, current: int, now: datetime) -> int:
        """calculateScaleDownLimitWithBehaviors."""
        rules = self._down_rules()
        if rules.select_policy == "Disabled":
            return current
        pick, result = (max, -MAX_INT32 - 1) if rules.select_policy == "Min" else (min, MAX_INT32)
        for p in rules.policies or ():
            added = self._change_per_period(p.period_seconds, self.scale_up_events, now)
            deleted = self._change_per_period(p.period_seconds, self.scale_down_events, now)
            start = current - added + deleted
            proposed = start - p.value if p.type == "Pods" else int(start * (1 - p.value / 100))
            result = pick(result, proposed)
        return result

    def _store_scale_event(self, prev: int, new: int, now: datetime) -> None:
        """storeScaleEvent, with markScaleEventsOutdated and the reuse of an outdated slot."""
        if self.spec.behavior is None:
            return
        up = new > prev
        events = self.scale_up_events if up else self.scale_down_events
        rules = self._up_rules() if up else self._down_rules()
        longest = max((p.period_seconds for p in rules.policies or ()), default=0)
        cutoff = now - timedelta(seconds=longest)
        for e in events:
            if e.timestamp < cutoff:
                e.outdated = True
        old = [i for i, e in enumerate(events) if e.outdated]
        event = _Event(abs(new - prev), now)
        if old:
            events[old[-1]] = event
        else:
            events.append(event)
