"""Reaction time of rlop's autoscaler, and its Prometheus/API load per interval, on real components.

Part 1 — a metric changes on a real exporter; how long until the Deployment's replicas change in the
API? rlop runs for real at a 1 s scrape and a 1 s interval. HPA (15 s sync) and KEDA (30 s polling) are
modelled on the same run: their loop wait is added to this run's measured scrape and write latencies.

Part 2 — Prometheus queries and API writes per interval at 1, 10 and 100 RLJobs, beside the baseline of
one query per job and metric (what one ScaledObject or HPA per pool does).

    .venv/bin/python bench/reaction.py [--steps 20] [--jobs 1,10,100]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from rlop.dev.cluster import DevCluster, NodeSpec, default_nodes
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.prometheus import DevPrometheus, Exporter
from rlop.dev.stack import Stack, percentile
from rlop.prom.promql import instantiate

QUERIES, WRITES = "rlop_prometheus_query_duration_seconds_count", "rlop_api_writes_total"
QUERY = 'sum(bench_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'


def rljob(name: str) -> dict[str, Any]:
    tpl = {"spec": {"containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": "10m"}}}]}}
    fast = {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 100, "periodSeconds": 1}]}
    return {
        "apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": name, "namespace": "bench"},
        "spec": {"pools": {
            "trainer": {"replicas": 1, "template": tpl},
            "rollout": {"template": tpl, "autoscale": {
                "minReplicas": 1, "maxReplicas": 10, "behavior": {"scaleUp": fast, "scaleDown": fast},
                "metrics": [{"query": QUERY, "target": {"type": "AverageValue", "value": 10}}]}},
        }},
    }  # fmt: skip


def replicas(cluster: DevCluster, name: str) -> int:
    try:
        return int(cluster.get(f"/apis/apps/v1/namespaces/bench/deployments/{name}-rollout")["spec"]["replicas"])
    except OSError:
        return -1


def reaction(cluster: DevCluster, prom: DevPrometheus, exporter: Exporter, steps: int) -> None:
    cluster.apply([rljob("r0")])
    exporter.set("bench_backlog", 10, namespace="bench", rljob="r0", pool="rollout")
    deadline = time.monotonic() + 60
    while replicas(cluster, "r0") != 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    total, visible, after_visible = [], [], []
    for i in range(steps):
        value, want = (50, 5) if i % 2 == 0 else (10, 1)
        time.sleep(random.uniform(0, 1))  # de-phase the step from the scrape and the loop
        t0 = time.monotonic()
        exporter.set("bench_backlog", value, namespace="bench", rljob="r0", pool="rollout")
        t_vis = None
        while time.monotonic() - t0 < 30:
            now = time.monotonic()
            if t_vis is None:
                samples = prom.query(instantiate(QUERY, "bench", "r0", "rollout"))
                if samples and samples[0][1] == value:
                    t_vis = now
            if replicas(cluster, "r0") == want:
                t1 = time.monotonic()
                t_vis = t_vis or t1
                total.append(t1 - t0)
                visible.append(t_vis - t0)
                after_visible.append(max(0.0, t1 - t_vis))
                break
            time.sleep(0.05)
    # Model a loop of period P on this run: scrape latency + uniform phase wait in [0, P) + write latency.
    # The write latency is what remains after the metric was visible, minus rlop's own mean loop wait (P/2 s).
    rng = random.Random(7)
    write = [max(0.0, a - 0.5) for a in after_visible]

    def model(period: float) -> list[float]:
        return [v + rng.uniform(0, period) + w for v, w in zip(visible, write, strict=True) for _ in range(50)]

    rows = [("rlop (measured, 1 s interval)", total)]
    rows += [(f"{n} (modelled, {p:g} s loop)", model(p)) for n, p in (("rlop", 1), ("HPA", 15), ("KEDA", 30))]
    base = percentile(total, 0.5)
    print(f"\nReaction: metric change -> replicas changed in the API ({len(total)} steps, 1 s scrape)")
    print(f"{'':36} {'p50 s':>7} {'p95 s':>7} {'p50 / rlop':>11}")
    for name, values in rows:
        p50, p95 = percentile(values, 0.5), percentile(values, 0.95)
        print(f"{name:36} {p50:7.2f} {p95:7.2f} {p50 / base:10.1f}x")
    seen50, seen95 = percentile(visible, 0.5), percentile(visible, 0.95)
    print(f"(of which metric visible in Prometheus: p50 {seen50:.2f} s, p95 {seen95:.2f} s)")


def load(cluster: DevCluster, op: OperatorProcess, exporter: Exporter, counts: list[int], intervals: int) -> None:
    print(f"\nLoad per 1 s interval (mean over {intervals} intervals)")
    print(f"{'RLJobs':>7} {'queries':>8} {'baseline queries':>17} {'writes steady':>14} {'writes scaling':>15}")
    made = 1  # r0 from part 1
    for n in counts:
        cluster.apply([rljob(f"r{i}") for i in range(made, n)])
        for i in range(n):
            exporter.set("bench_backlog", 10, namespace="bench", rljob=f"r{i}", pool="rollout")
        made = max(made, n)
        settle(cluster, op, n)
        q0, w0, t0 = op.metric(QUERIES), op.metric(WRITES), time.monotonic()
        time.sleep(intervals)
        dt = time.monotonic() - t0
        queries = (op.metric(QUERIES) - q0) / dt
        steady = (op.metric(WRITES) - w0) / dt
        w1, t1 = op.metric(WRITES), time.monotonic()
        for i in range(n):
            exporter.set("bench_backlog", 30, namespace="bench", rljob=f"r{i}", pool="rollout")
        deadline = time.monotonic() + 120
        sample = range(0, n, max(1, n // 10))
        while any(replicas(cluster, f"r{i}") != 3 for i in sample) and time.monotonic() < deadline:
            time.sleep(0.5)
        scaling = (op.metric(WRITES) - w1) / max(1.0, time.monotonic() - t1)
        print(f"{n:7d} {queries:8.2f} {n * 1.0:17.0f} {steady:14.2f} {scaling:15.2f}")
        for i in range(n):
            exporter.set("bench_backlog", 10, namespace="bench", rljob=f"r{i}", pool="rollout")


def settle(cluster: DevCluster, op: OperatorProcess, n: int, timeout: float = 180) -> None:
    """Wait until every job is Running and the operator stopped writing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = json.loads(cluster.kubectl("-n", "bench", "get", "rljobs", "-o", "json").stdout)["items"]
        if len(jobs) >= n and all((j.get("status") or {}).get("phase") == "Running" for j in jobs):
            w = op.metric(WRITES)
            time.sleep(3)
            if op.metric(WRITES) == w:
                return
        time.sleep(1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--jobs", default="1,10,100")
    p.add_argument("--intervals", type=int, default=10)
    args = p.parse_args()
    random.seed(1)
    work = Path(tempfile.mkdtemp(prefix="rlop-bench-"))
    nodes = [*default_nodes(), *(NodeSpec(f"bulk-{i}", cpu="64", memory="256Gi") for i in range(4))]
    with Stack(work, nodes) as stack:
        assert stack.prometheus is not None
        stack.cluster.kubectl("create", "namespace", "bench")
        op = stack.operator(1.0)
        reaction(stack.cluster, stack.prometheus, stack.exporter, args.steps)
        load(stack.cluster, op, stack.exporter, [int(x) for x in args.jobs.split(",")], args.intervals)
    print(f"\n(workdir {work})")


if __name__ == "__main__":
    main()
