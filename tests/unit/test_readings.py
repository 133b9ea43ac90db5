"""The metric-reading contract: which queries a job asks, and the readings its answers give."""

from __future__ import annotations

import math

from rlop.plan.readings import Unavailable, queries, read

from .builders import container, job

AUTO = {"maxReplicas": 4, "metrics": [{"query": "a", "target": {"type": "Value", "value": 1}},
                                      {"query": "b", "target": {"type": "Value", "value": 1}}],
        "deletionCostQuery": "busy"}  # fmt: skip
SANDBOX = {"replicas": 1, "template": {"spec": {"containers": [container(requests={"cpu": 1, "memory": "1Gi"})]}}}


def test_queries_cover_every_metric_cost_and_utilization() -> None:
    j = job(rollout={"autoscale": AUTO, "template": {"spec": {"containers": [container()]}}}, sandbox=SANDBOX)
    assert [(q.key, q.template) for q in queries(j)] == [
        (("rollout", 0), "a"), (("rollout", 1), "b"), (("rollout", "cost"), "busy"),
        (("sandbox", "utilization"), '1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[1m]))'),
    ]  # fmt: skip


def test_answers_become_readings() -> None:
    j = job(rollout={"autoscale": AUTO, "template": {"spec": {"containers": [container()]}}}, sandbox=SANDBOX)
    got = read(j, {
        ("rollout", 0): [({}, 3.0)],
        ("rollout", 1): Unavailable("Prometheus unreachable", unreachable=True),
        ("rollout", "cost"): [({"pod": "p1"}, 0.5), ({"pod": "p2"}, math.nan)],
        ("sandbox", "utilization"): [({"node": "n1"}, 0.25), ({"node": "n2"}, math.inf), ({}, 0.1)],
    })  # fmt: skip
    assert got.metrics[("rollout", 0)].value == 3.0
    assert got.metrics[("rollout", 1)].unreachable and got.metrics[("rollout", 1)].value is None
    assert got.busy == {"rollout": {"p1": 0.5}} and got.utilization == {"n1": 0.25}
    nothing = read(j, {("rollout", 0): [], ("rollout", 1): [({"a": "1"}, 1.0), ({"a": "2"}, 2.0)]})
    assert nothing.metrics[("rollout", 0)].error == "query returned no data"
    assert "2 series" in (nothing.metrics[("rollout", 1)].error or "")
    assert nothing.utilization is None and nothing.utilization_error is None  # not asked: no placement
    failed = read(j, {("sandbox", "utilization"): Unavailable("bad_data: parse error")})
    assert failed.utilization is None and "parse error" in (failed.utilization_error or "")
