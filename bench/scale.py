"""rlop at scale: 200 RLJobs on 500 simulated nodes, on the real local control plane and Prometheus.

Reports the reconcile latency per job (p50/p99) and the full-pass time (p50/p99/max, and the p99 of each of
its phases: read, plan, write), from exact timings, the operator's memory, per interval its API writes and
Prometheus queries, and the CPU each process of the stack used (all on this one machine), in steady state
and while every job scales. Goal: pass p99 < 2 s while all 200 jobs scale.

    .venv/bin/python bench/scale.py [--jobs 200] [--nodes 500] [--interval 5] [--concurrency N]  # and --jobs 1000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rlop.config import Config
from rlop.dev.cluster import DevCluster, NodeSpec
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.stack import Stack, busy_seconds, cpu_rss, percentile
from rlop.kube.client import KubeClient

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


# only the series the bench reads (prometheus_client's name[] filter): the whole exposition, thousands of
# per-job series, rendered 20 times a second would take the operator's CPU from the passes it measures
READ = ("rlop_pass_duration_seconds", "rlop_pass_phase_seconds", "rlop_reconcile_duration_seconds",
        "rlop_api_writes_total", "rlop_prometheus_query_duration_seconds")  # fmt: skip
PHASES = ("read", "plan", "write")


def scrape(op: OperatorProcess) -> str:
    names = "&".join(f"name[]={n}{suffix}" for n in READ for suffix in ("", "_sum", "_count"))
    with urllib.request.urlopen(f"http://127.0.0.1:{op.metrics_port}/metrics?{names}", timeout=10) as r:
        return r.read().decode()


def totals(text: str) -> dict[str, float]:
    """Every sample of the exposition by its full name (label sets summed) and by its series."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            name = series.split("{", 1)[0]
            out[name] = out.get(name, 0.0) + float(value)
            out[series] = float(value)
    return out


def window(
    op: OperatorProcess, pids: dict[str, int], seconds: float, interval: float, passes_at_least: int = 0
) -> dict[str, float]:
    """The window's numbers from exact timings: /metrics read every 50 ms, so each full pass (and each batch
    of job reconciles) is seen alone and its duration is the growth of the histogram's _sum, not a bucket
    bound: passes exactly (and each pass's phases: read, plan, write), jobs as the exact mean of the
    reconciles between two reads. The window goes on past `seconds` until `passes_at_least` passes ended (a
    pass longer than the window is measured, not missed). Beside them, the CPU each process of the stack
    used (cores busy on average), and the machine's."""
    cpu0, busy0 = {name: cpu_rss({name: pid})[0] for name, pid in pids.items()}, busy_seconds()
    passes: list[float] = []
    phases: dict[str, list[float]] = {phase: [] for phase in PHASES}  # each pass's, as passes
    jobs: list[float] = []  # one exact mean per read that saw reconciles, once per reconcile it covers
    first = last = totals(scrape(op))
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds or (len(passes) < passes_at_least and time.monotonic() - t0 < 900):
        time.sleep(0.05)
        now = totals(scrape(op))
        n = now["rlop_pass_duration_seconds_count"] - last["rlop_pass_duration_seconds_count"]
        if n:
            passes += [(now["rlop_pass_duration_seconds_sum"] - last["rlop_pass_duration_seconds_sum"]) / n] * int(n)
            for phase, seen in phases.items():
                series = f'rlop_pass_phase_seconds_sum{{phase="{phase}"}}'
                seen += [(now.get(series, 0.0) - last.get(series, 0.0)) / n] * int(n)
        k = now["rlop_reconcile_duration_seconds_count"] - last["rlop_reconcile_duration_seconds_count"]
        if k:
            mean = (now["rlop_reconcile_duration_seconds_sum"] - last["rlop_reconcile_duration_seconds_sum"]) / k
            jobs += [mean] * int(k)
        last = now
    elapsed = time.monotonic() - t0
    intervals = elapsed / interval
    cpu = {f"cpu {name}": (cpu_rss({name: pid})[0] - cpu0[name]) / elapsed for name, pid in pids.items()}

    def per_interval(name: str) -> float:
        return (last.get(name, 0.0) - first.get(name, 0.0)) / intervals

    return {
        "job p50": percentile(jobs, 0.5),
        "job p99": percentile(jobs, 0.99),
        "pass p50": percentile(passes, 0.5),
        "pass p99": percentile(passes, 0.99),
        "pass max": max(passes, default=float("nan")),
        **{f"pass p99 {phase}": percentile(seen, 0.99) for phase, seen in phases.items()},
        "passes": float(len(passes)),
        "writes/interval": per_interval("rlop_api_writes_total"),
        "queries/interval": per_interval("rlop_prometheus_query_duration_seconds_count"),
        "rss MiB": cpu_rss({"rlop": op.proc.pid})[1] if op.proc else float("nan"),
        **cpu,
        f"cpu machine /{os.cpu_count()}": (busy_seconds() - busy0) / elapsed,
    }  # fmt: skip


async def replay(cluster: DevCluster, jobs: int, replicas: int, concurrency: int, status: bool) -> float:
    """The baseline: the writes of a pass that scales every job, made by a bare client with no planning —
    each job's rollout Deployment scaled to `replicas` through its /scale subresource (as rlop's field
    manager), then, if `status`, its RLJob status merge-patched whole (one message changed) — `concurrency`
    jobs at a time, as rlop writes. The statuses are read first; returns the seconds the writes took."""
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    names = [f"j{i}" for i in range(jobs)]
    statuses = await asyncio.gather(*(kube.get("RLJob", "scale", n) for n in names)) if status else []
    for job in statuses:
        conditions = job["status"].get("conditions") or [{}]
        conditions[0]["message"] = f"{conditions[0].get('message', '')} (baseline)"
    limit = asyncio.Semaphore(concurrency)

    async def write(i: int) -> None:
        async with limit:
            await kube.scale("Deployment", "scale", f"{names[i]}-rollout", replicas)
            if statuses:
                await kube.patch_status("scale", names[i], statuses[i]["status"])

    started = time.perf_counter()
    await asyncio.gather(*(write(i) for i in range(jobs)))
    spent = time.perf_counter() - started
    await kube.close()
    return spent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--nodes", type=int, default=500)
    p.add_argument("--interval", type=float, default=5.0)
    p.add_argument("--concurrency", type=int, default=Config().concurrency, help="rlop run --concurrency")
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
        op = stack.operator(args.interval, f"--concurrency={args.concurrency}")
        assert op.proc is not None and stack.prometheus is not None and stack.prometheus.proc is not None
        pids = {"rlop": op.proc.pid, **cluster.pids, "prometheus": stack.prometheus.proc.pid}
        started = time.monotonic()
        for i in range(0, args.jobs, 50):
            cluster.apply([rljob(j) for j in range(i, min(args.jobs, i + 50))])
        print(f"{args.jobs} RLJobs, {args.nodes} nodes, interval {args.interval:g}s, concurrency "
              f"{args.concurrency}", flush=True)  # fmt: skip
        while True:
            jsonpath = "jsonpath={.items[*].status.phase}"
            phases = cluster.kubectl("-n", "scale", "get", "rljobs", "-o", jsonpath).stdout.split()
            if phases.count("Running") == args.jobs or time.monotonic() - started > 900:
                break
            time.sleep(5)
        print(f"all Running after {time.monotonic() - started:.0f}s", flush=True)
        writes = totals(scrape(op)).get("rlop_api_writes_total", 0.0)
        while time.monotonic() - started < 1500:  # settled: two intervals without a write (pods placed, ready)
            time.sleep(2 * args.interval)
            writes, before = totals(scrape(op)).get("rlop_api_writes_total", 0.0), writes
            if writes == before:
                break
        print(f"settled after {time.monotonic() - started:.0f}s", flush=True)
        steady = window(op, pids, 6 * args.interval, args.interval)
        for i in range(args.jobs):
            exporter.set("scale_backlog", 30, namespace="scale", rljob=f"j{i}", pool="rollout")
        scaling = window(op, pids, 6 * args.interval, args.interval, passes_at_least=6)
        print(f"\n{'':28} {'steady':>10} {'all scaling':>12}")
        for key in steady:
            print(f"{key:28} {steady[key]:10.3f} {scaling[key]:12.3f}")
        op.stop()  # the baseline: the same writes with no operator (it would revert them)
        asyncio.run(replay(cluster, args.jobs, 1, args.concurrency, status=False))
        time.sleep(6 * args.interval)  # the pods scaled away are gone
        floor = asyncio.run(replay(cluster, args.jobs, 3, args.concurrency, status=True))
        met = "met" if scaling["pass p99"] < 2 else "NOT met"
        print(f"\ngoal: full-pass p99 < 2 s while every job scales: {met} ({scaling['pass p99']:.3f} s)")
        print(
            f"baseline: the scaling pass's writes ({args.jobs} Deployments scaled 1 -> 3, {args.jobs} "
            f"statuses), {args.concurrency} jobs at a time by a bare client with no planning: {floor:.3f} s"
        )
        print(f"(baseline: one query per job and metric would be {args.jobs} + {args.jobs} utilization "
              f"queries per interval; rlop's batching asks per distinct template)")  # fmt: skip


if __name__ == "__main__":
    main()
