"""rlop at scale: 200 RLJobs on 500 simulated nodes, on the real local control plane and Prometheus.

Reports the reconcile latency per job (p50/p99), the full-pass time, the operator's memory, and per
interval its API writes and Prometheus queries, in steady state and while every job scales.

    .venv/bin/python bench/scale.py [--jobs 200] [--nodes 500] [--interval 5]
"""

from __future__ import annotations

import argparse
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rlop.dev.cluster import NodeSpec
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.stack import Stack

QUERY = 'sum(scale_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'
UTILIZATION = "max by (node) (scale_node_utilization)"


def rljob(i: int) -> dict[str, Any]:
    tpl = {
        "spec": {
            "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]
        }
    }
    metric = {"query": QUERY, "target": {"type": "AverageValue", "value": 10}}
    up = {"policies": [{"type": "Pods", "value": 4, "periodSeconds": 1}]}
    auto = {"minReplicas": 1, "maxReplicas": 4, "metrics": [metric], "behavior": {"scaleUp": up}}
    sandbox = {"replicas": 2, "template": tpl, "placement": {"nodeSelector": {"rlop.dev/cpu-pool": "true"},
                                                             "utilizationQuery": UTILIZATION}}  # fmt: skip
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": f"j{i}", "namespace": "scale"},
            "spec": {"pools": {"trainer": {"replicas": 1, "template": tpl},
                               "rollout": {"template": tpl, "autoscale": auto}, "sandbox": sandbox}}}  # fmt: skip


def scrape(op: OperatorProcess) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


def buckets(text: str, name: str) -> list[tuple[float, float]]:
    out = []
    for line in text.splitlines():
        if line.startswith(f"{name}_bucket{{"):
            le = line.split('le="')[1].split('"')[0]
            out.append((float("inf") if le == "+Inf" else float(le), float(line.rsplit(" ", 1)[1])))
    return out


def quantile(before: list[tuple[float, float]], after: list[tuple[float, float]], q: float) -> float:
    """A histogram quantile over the window between two scrapes (upper bucket bound, as Prometheus)."""
    delta = [(le, a - b) for (le, a), (_, b) in zip(after, before, strict=True)]
    total = delta[-1][1]
    for le, count in delta:
        if count >= q * total:
            return le
    return float("inf")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def window(op: OperatorProcess, seconds: float, interval: float) -> dict[str, float]:
    t0, m0 = time.monotonic(), scrape(op)
    time.sleep(seconds)
    dt, m1 = time.monotonic() - t0, scrape(op)

    def delta(name: str) -> float:
        def total(text: str) -> float:
            return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                       if line.startswith(name) and line[len(name)] in " {")  # fmt: skip

        return total(m1) - total(m0)

    intervals = dt / interval

    def q(name: str, quant: float) -> float:
        return quantile(buckets(m0, name), buckets(m1, name), quant)

    return {
        "job p50": q("rlop_reconcile_duration_seconds", 0.5),
        "job p99": q("rlop_reconcile_duration_seconds", 0.99),
        "pass p50": q("rlop_pass_duration_seconds", 0.5),
        "pass p99": q("rlop_pass_duration_seconds", 0.99),
        "writes/interval": delta("rlop_api_writes_total") / intervals,
        "queries/interval": delta("rlop_prometheus_query_duration_seconds_count") / intervals,
        "rss MiB": rss_mib(op.proc.pid) if op.proc else float("nan"),
    }  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--interval", type=float, default=5.0)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rlop-scale-"))
    cpu = [NodeSpec(f"cpu-{i}", cpu="32", labels={"rlop.dev/cpu-pool": "true"}) for i in range(args.nodes // 2)]
    other = [NodeSpec(f"node-{i}", cpu="64", memory="256Gi") for i in range(args.nodes - len(cpu))]
    with Stack(work, cpu + other, scrape_interval="5s") as stack:
        cluster, exporter = stack.cluster, stack.exporter
        for n in cpu:
            exporter.set("scale_node_utilization", 0.2, node=n.name)
        cluster.kubectl("create", "namespace", "scale")
        for i in range(args.jobs):
            exporter.set("scale_backlog", 10, namespace="scale", rljob=f"j{i}", pool="rollout")
        op = stack.operator(args.interval)
        started = time.monotonic()
        for i in range(0, args.jobs, 50):
            cluster.apply([rljob(j) for j in range(i, min(args.jobs, i + 50))])
        print(f"{args.jobs} RLJobs, {args.nodes} nodes, interval {args.interval:g}s", flush=True)
        while True:
            jsonpath = "jsonpath={.items[*].status.phase}"
            phases = cluster.kubectl("-n", "scale", "get", "rljobs", "-o", jsonpath).stdout.split()
            if phases.count("Running") == args.jobs or time.monotonic() - started > 900:
                break
            time.sleep(5)
        print(f"all Running after {time.monotonic() - started:.0f}s", flush=True)
        steady = window(op, 6 * args.interval, args.interval)
        for i in range(args.jobs):
            exporter.set("scale_backlog", 30, namespace="scale", rljob=f"j{i}", pool="rollout")
        scaling = window(op, 6 * args.interval, args.interval)
        print(f"\n{'':18} {'steady':>10} {'all scaling':>12}")
        for key in steady:
            print(f"{key:18} {steady[key]:10.3f} {scaling[key]:12.3f}")
        print(f"\n(baseline: one query per job and metric would be {args.jobs} + {args.jobs} utilization "
              f"queries per interval; rlop's batching asks per distinct template)")  # fmt: skip


if __name__ == "__main__":
    main()
