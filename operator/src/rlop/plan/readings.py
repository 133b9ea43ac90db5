"""The metric-reading contract for one RLJob (pure): which queries rlop asks Prometheus (`queries`) and
what it makes of the answers (`read`). The controller only sends the queries; `rlop plan` hands its given
values to `read` as answers too, so both decide from the same readings."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from rlop.api.models import RLJob
from rlop.api.pools import HARVESTED, autoscaled, harvested, serving
from rlop.plan.autoscale import Reading

Sample = tuple[Mapping[str, str], float]  # (labels, value): one series (prom/ has its own: neither imports the other)
QueryKey = tuple[str, int | Literal["cost", "utilization", "version"]]  # (pool, metric index | what else)
MetricKey = tuple[str, int]  # (pool, metric index)


class Failure(Protocol):
    """Why a query has no answer (e.g. the Prometheus client's error)."""

    @property
    def message(self) -> str: ...

    @property
    def unreachable(self) -> bool: ...


@dataclass(frozen=True)
class Unavailable:
    message: str
    unreachable: bool = False


Answer = Sequence[Sample] | Failure


@dataclass(frozen=True)
class Query:
    key: QueryKey
    template: str  # PromQL with {{namespace}}, {{job}}, {{pool}}
    pool: str


@dataclass(frozen=True)
class JobReadings:
    metrics: dict[MetricKey, Reading] = field(default_factory=dict)
    busy: dict[str, dict[str, float]] = field(default_factory=dict)  # pool -> pod -> how busy (deletion cost)
    utilization: dict[str, float] | None = None  # node -> CPU utilization; None: no placement this pass
    utilization_error: str | None = None
    versions: dict[str, Reading] = field(default_factory=dict)  # serving pool -> the trainer's policy version


def queries(job: RLJob) -> list[Query]:
    """Every query one interval asks for `job`."""
    out = []
    for pool, _, auto in autoscaled(job):
        out += [Query((pool, i), metric.query, pool) for i, metric in enumerate(auto.metrics)]
        if auto.deletion_cost_query:
            out.append(Query((pool, "cost"), auto.deletion_cost_query, pool))
    for pool, spec in serving(job):
        if spec.weights is not None:
            out.append(Query((pool, "version"), spec.weights.version_query, pool))
    if (sandbox := harvested(job)) is not None:
        out.append(Query((HARVESTED, "utilization"), sandbox.placement.utilization_query, HARVESTED))
    return out


def read(job: RLJob, answers: Mapping[QueryKey, Answer]) -> JobReadings:
    """Readings from the answers to `queries(job)`; a query without an answer is "not queried"."""
    metrics: dict[MetricKey, Reading] = {}
    busy: dict[str, dict[str, float]] = {}
    for pool, _, auto in autoscaled(job):
        for i in range(len(auto.metrics)):
            answer = answers.get((pool, i))
            metrics[(pool, i)] = Reading(None, "not queried") if answer is None else reading(answer)
        cost = answers.get((pool, "cost"))
        if isinstance(cost, Sequence):
            busy[pool] = per_pod(cost)
    versions = {pool: reading(answer) for pool, _ in serving(job) if (answer := answers.get((pool, "version")))
                is not None}  # fmt: skip
    util = answers.get((HARVESTED, "utilization"))
    if util is None:
        return JobReadings(metrics, busy, versions=versions)
    if not isinstance(util, Sequence):
        problem = f"sandbox placement holds: utilization query: {util.message}"
        return JobReadings(metrics, busy, None, problem, versions)
    nodes = {labels["node"]: v for labels, v in util if "node" in labels and math.isfinite(v)}
    return JobReadings(metrics, busy, nodes, versions=versions)


def reading(answer: Answer) -> Reading:
    """One metric value from a query's answer: exactly one finite sample, or why not."""
    if not isinstance(answer, Sequence):
        return Reading(None, answer.message, answer.unreachable)
    if not answer:
        return Reading(None, "query returned no data")
    if len(answer) > 1:
        return Reading(None, f"query returned {len(answer)} series; aggregate it, e.g. sum(...)")
    value = answer[0][1]
    if not math.isfinite(value):
        return Reading(None, f"query returned {value}")
    return Reading(value)


def per_pod(samples: Sequence[Sample]) -> dict[str, float]:
    """Values of a per-pod query by its `pod` label (non-finite values are dropped)."""
    return {labels["pod"]: v for labels, v in samples if "pod" in labels and math.isfinite(v)}
