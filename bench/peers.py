"""rlop beside the real KEDA and the real HPA, on one local control plane, one Prometheus, one exporter.

KEDA v2.21 (operator + metrics adapter, built from Go modules: `bash hack/build-binaries.sh keda`) drives
kube-controller-manager's HPA through external.metrics.k8s.io; rlop scales the same Deployment shape from
the same metric. Each controller runs alone while it is measured. Configurations: rlop at a 1 s interval;
KEDA at its defaults (30 s polling, HPA 15 s sync); KEDA tuned (1 s polling, HPA 1 s sync). Every one uses
the same fast behaviour (no stabilization, 100 pods per second) and AverageValue 10 on the same query.

Part 1, reaction: a metric step on the exporter (1 s scrape) -> the Deployment's replicas changed in the API
(p50/p95), and the part each controller adds after the new value is visible in Prometheus.
Part 2, load at 1, 10, 100, ... jobs (RLJobs or ScaledObjects): Prometheus queries per second as Prometheus
counts them (prometheus_http_requests_total of /api/v1/query), the controller's API writes per second steady
and while every job scales (rlop: its own rlop_api_writes_total; KEDA + HPA: the API server's count of writes
to HPAs, ScaledObjects and deployments/scale), and the controller's CPU seconds per second and RSS (rlop's
process; KEDA's operator + adapter; the HPA runs inside kube-controller-manager, shown apart).

    .venv/bin/python bench/peers.py [--steps 12] [--jobs 1,10,100] [--window 20] [--peers rlop,keda-30,keda-1]
                                    [--client-qps N]

--client-qps raises the client-go rate limit of KEDA's operator and adapter and of kube-controller-manager
(default 20 each, burst 30): at 1,000 ScaledObjects their defaults cannot keep up, and a user would raise it.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlop.dev.cluster import DevCluster, NodeSpec, default_nodes
from rlop.dev.keda import Keda, scaled_object
from rlop.dev.prometheus import DevPrometheus, Exporter
from rlop.dev.stack import Stack, cpu_rss, percentile
from rlop.prom.promql import instantiate

QUERY = 'sum(bench_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'
FAST = {"stabilizationWindowSeconds": 0, "policies": [{"type": "Pods", "value": 100, "periodSeconds": 1}]}
BEHAVIOR = {"scaleUp": FAST, "scaleDown": FAST}
TEMPLATE = {"spec": {"containers": [{"name": "c", "image": "img", "resources": {"requests": {"cpu": "10m"}}}]}}


def rljob(name: str, ns: str) -> dict[str, Any]:
    metric = {"query": QUERY, "target": {"type": "AverageValue", "value": 10}}
    auto = {"minReplicas": 1, "maxReplicas": 10, "behavior": BEHAVIOR, "metrics": [metric]}
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": name, "namespace": ns},
            "spec": {"pools": {"trainer": {"replicas": 1, "template": TEMPLATE},
                               "rollout": {"template": TEMPLATE, "autoscale": auto}}}}  # fmt: skip


def deployment(name: str, ns: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": TEMPLATE["spec"]}}}  # fmt: skip


@dataclass
class Peer:
    """One controller under test: how to make its jobs, name their Deployments and their metric labels."""

    name: str
    ns: str
    make: Callable[[int], list[dict[str, Any]]]  # the objects of job i
    target: Callable[[int], str]  # its Deployment
    labels: Callable[[int], dict[str, str]]  # its metric's labels
    pids: Callable[[], dict[str, int]]
    writes: Callable[[], float]  # the controller's API writes so far
    acting: Callable[[], int]  # how many jobs the controller has read the metric of
    passes: Callable[[], float] = lambda: 0.0  # rlop's full passes so far (KEDA has no pass)
    quiet: bool = False  # settled means no writes at all (rlop; the HPA writes its status every sync)


def rlop_peer(cluster: DevCluster, ops: list[Any]) -> Peer:
    ns = "bench-rlop"

    def acting() -> int:
        jobs = cluster.get(f"/apis/rlop.dev/v1alpha1/namespaces/{ns}/rljobs")["items"]
        status = [j.get("status") or {} for j in jobs]
        return sum(1 for s in status if s.get("phase") == "Running" and "lastMetric" in s["pools"]["rollout"])

    return Peer("rlop (1 s interval)", ns, lambda i: [rljob(f"j{i}", ns)], lambda i: f"j{i}-rollout",
                lambda i: {"namespace": ns, "rljob": f"j{i}", "pool": "rollout"},
                lambda: {"rlop": ops[0].proc.pid}, lambda: ops[0].metric("rlop_api_writes_total"), acting,
                lambda: ops[0].metric("rlop_pass_duration_seconds_count"), quiet=True)  # fmt: skip


def keda_peer(name: str, cluster: DevCluster, keda: Keda, prom: str, polling: int) -> Peer:
    ns = f"bench-keda-{polling}"
    labels = {"namespace": ns, "rljob": "", "pool": "rollout"}

    def make(i: int) -> list[dict[str, Any]]:
        query = instantiate(QUERY, ns, f"d{i}", "rollout")
        return [deployment(f"d{i}", ns), scaled_object(f"d{i}", ns, f"d{i}", prom, query, 10, polling, BEHAVIOR)]

    def acting() -> int:  # KEDA's HPAs that have read their metric through the adapter
        hpas = cluster.get(f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers")["items"]
        return sum(1 for h in hpas if (h.get("status") or {}).get("currentMetrics"))

    return Peer(name, ns, make, lambda i: f"d{i}", lambda i: {**labels, "rljob": f"d{i}"}, keda.pids,
                lambda: autoscaler_writes(cluster), acting)  # fmt: skip


WRITE = re.compile(r"^apiserver_request_total\{(.*)\} (\S+)$")


def autoscaler_writes(cluster: DevCluster) -> float:
    """Writes the API server served to HPAs, ScaledObjects and deployments/scale: KEDA's and the HPA's."""
    text = cluster.kubectl("get", "--raw", "/metrics").stdout
    total = 0.0
    for line in text.splitlines():
        m = WRITE.match(line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("verb") not in ("POST", "PUT", "PATCH", "DELETE", "APPLY"):
            continue
        scale = labels.get("resource") == "deployments" and labels.get("subresource") == "scale"
        if scale or labels.get("resource") in ("horizontalpodautoscalers", "scaledobjects"):
            total += float(m.group(2))
    return total


def replicas(cluster: DevCluster, ns: str, name: str) -> int:
    try:
        return int(cluster.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")["spec"]["replicas"])
    except (OSError, KeyError, TypeError):
        return -1


def wait(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.2)


def reaction(peer: Peer, cluster: DevCluster, prom: DevPrometheus, exporter: Exporter, steps: int) -> dict[str, Any]:
    cluster.apply(peer.make(0))
    exporter.set("bench_backlog", 10, **peer.labels(0))
    wait(lambda: replicas(cluster, peer.ns, peer.target(0)) == 1 and peer.acting() >= 1, 120,
         f"{peer.name}: 1 replica at first, its metric read")  # fmt: skip
    query = instantiate(QUERY, peer.ns, peer.labels(0)["rljob"], "rollout")
    total, added = [], []
    for i in range(steps):
        value, want = (50, 5) if i % 2 == 0 else (10, 1)
        time.sleep(random.uniform(1, 2))  # de-phase the step from the scrape and the loops
        t0 = time.monotonic()
        exporter.set("bench_backlog", value, **peer.labels(0))
        t_vis = None
        while time.monotonic() - t0 < 90:
            now = time.monotonic()
            if t_vis is None and (got := prom.query(query)) and got[0][1] == value:
                t_vis = now
            if replicas(cluster, peer.ns, peer.target(0)) == want:
                t1 = time.monotonic()
                total.append(t1 - t0)
                added.append(t1 - (t_vis or t1))
                break
            time.sleep(0.05)
    row = (f"{peer.name:42} {percentile(total, .5):7.2f} {percentile(total, .95):7.2f} "
           f"{percentile(added, .5):9.2f} {percentile(added, .95):9.2f} {len(total):3d}/{steps}")  # fmt: skip
    print(row, flush=True)
    return {"row": row, "p50": percentile(total, 0.5), "added p95": percentile(added, 0.95)}


def settle(peer: Peer, timeout: float = 300) -> None:
    """Let the last jobs' start-up writes end: no write for 3 s (rlop), or 5 s of grace (KEDA's HPA writes on)."""
    if not peer.quiet:
        time.sleep(5)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = peer.writes()
        time.sleep(3)
        if peer.writes() == before:
            return
    raise TimeoutError(f"{peer.name}: still writing after {timeout:.0f} s")


def prometheus_queries(prom: DevPrometheus) -> float:
    with urllib.request.urlopen(f"{prom.url}/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line)  # fmt: skip


def load(peer: Peer, cluster: DevCluster, prom: DevPrometheus, exporter: Exporter, counts: list[int],
         window: float) -> list[dict[str, Any]]:  # fmt: skip
    rows: list[dict[str, Any]] = []
    made = 1
    kcm = {"kcm": cluster.pids["kube-controller-manager"]}
    for n in counts:
        objects = [o for i in range(made, n) for o in peer.make(i)]
        for start in range(0, len(objects), 200):
            cluster.apply(objects[start : start + 200])
        made = max(made, n)
        for i in range(n):
            exporter.set("bench_backlog", 10, **peer.labels(i))
        try:
            wait(lambda: peer.acting() >= n, 900, f"the metric of all {n} jobs not read in 900 s")  # noqa: B023
            settle(peer)
        except TimeoutError as e:  # reported, and the larger counts are not tried
            print(f"{peer.name:42} {n:6d} {e}", flush=True)
            rows.append({"row": f"{peer.name:42} {n:6d}  not measured: {e}", "jobs": n, "per pass": None})
            break
        q0, w0, (c0, _), (k0, _), p0, t0 = (prometheus_queries(prom), peer.writes(), cpu_rss(peer.pids()),
                                            cpu_rss(kcm), peer.passes(), time.monotonic())  # fmt: skip
        time.sleep(window)
        dt = time.monotonic() - t0
        q1, loops = prometheus_queries(prom), peer.passes() - p0
        queries, steady = (q1 - q0) / dt, (peer.writes() - w0) / dt
        per_pass = f"{(q1 - q0) / loops:7.2f}" if loops else f"{'-':>7}"
        (c1, rss), (k1, _) = cpu_rss(peer.pids()), cpu_rss(kcm)
        w1, t1 = peer.writes(), time.monotonic()
        for i in range(n):
            exporter.set("bench_backlog", 30, **peer.labels(i))
        try:
            sample = range(0, n, max(1, n // 10))
            wait(lambda: all(replicas(cluster, peer.ns, peer.target(i)) == 3 for i in sample), 300,  # noqa: B023
                 "scaled")  # fmt: skip
            scaling = f"{(peer.writes() - w1) / max(1.0, time.monotonic() - t1):15.2f}"
        except TimeoutError:
            scaling = f"{'not in 300 s':>15}"
        row = (f"{peer.name:42} {n:6d} {queries:9.2f} {per_pass} {steady:8.2f} {scaling} {(c1 - c0) / dt:9.3f} "
               f"{rss:8.0f} {(k1 - k0) / dt:9.3f}")  # fmt: skip
        print(row, flush=True)
        rows.append({"row": row, "jobs": n, "per pass": (q1 - q0) / loops if loops else None})
        for i in range(n):
            exporter.set("bench_backlog", 10, **peer.labels(i))
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--jobs", default="1,10,100")
    p.add_argument("--window", type=float, default=20, help="seconds of each steady-state measurement")
    p.add_argument("--peers", default="rlop,keda-30,keda-1", help="which to run: rlop, keda-30, keda-1")
    p.add_argument("--client-qps", type=int, default=0, help="KEDA's and kube-controller-manager's client rate")
    args = p.parse_args()
    random.seed(1)
    counts = [int(x) for x in args.jobs.split(",")]
    work = Path(tempfile.mkdtemp(prefix="rlop-peers-"))
    nodes = [*default_nodes(), *(NodeSpec(f"bulk-{i}", cpu="256", memory="1Ti") for i in range(8))]
    reactions: list[dict[str, Any]] = []
    loads: list[dict[str, Any]] = []
    with Stack(work, nodes) as stack:
        prom, cluster, exporter = stack.prometheus, stack.cluster, stack.exporter
        assert prom is not None
        for ns in ("bench-rlop", "bench-keda-30", "bench-keda-1"):
            cluster.kubectl("create", "namespace", ns)
        chosen = args.peers.split(",")
        if "rlop" in chosen:
            ops = [stack.operator(1.0)]
            peer = rlop_peer(cluster, ops)
            reactions.append(reaction(peer, cluster, prom, exporter, args.steps * 2))
            loads += load(peer, cluster, prom, exporter, counts, args.window)
            ops[0].stop()
        rate = (f"--kube-api-qps={args.client_qps}", f"--kube-api-burst={args.client_qps * 3 // 2}")
        keda = Keda(cluster, work / "keda", client=rate if args.client_qps else ())
        if any(name.startswith("keda") for name in chosen):
            keda.start()
        try:
            for polling, sync in ((30, 15), (1, 1)):
                if f"keda-{polling}" not in chosen:
                    continue
                cluster.kcm_flags = (f"--horizontal-pod-autoscaler-sync-period={sync}s",
                                     *(rate if args.client_qps else ()))  # fmt: skip
                cluster.restart("kube-controller-manager")
                name = f"KEDA ({polling} s polling, HPA {sync} s sync)"
                peer = keda_peer(name, cluster, keda, prom.url, polling)
                reactions.append(reaction(peer, cluster, prom, exporter, args.steps))
                loads += load(peer, cluster, prom, exporter, counts, args.window)
                try:  # the next configuration starts from no ScaledObjects (1,000 deletes can outlast kubectl's 120 s)
                    cluster.kubectl("delete", "scaledobjects", "--all", "-n", peer.ns, "--wait=false", check=False)
                except subprocess.TimeoutExpired:
                    print(f"{peer.name:42} its ScaledObjects were not all deleted in 120 s", flush=True)
        finally:
            keda.stop()
    print("\nReaction: metric step -> replicas changed in the API (1 s scrape); `added`: after the metric was "
          "visible in Prometheus")  # fmt: skip
    print(f"{'':42} {'p50 s':>7} {'p95 s':>7} {'added p50':>9} {'added p95':>9} steps")
    print("\n".join(r["row"] for r in reactions))
    print("\nLoad: per second, over a steady window; writes also while every job scales 1 -> 3")
    print(f"{'':42} {'jobs':>6} {'queries':>9} {'q/pass':>7} {'writes':>8} {'writes scaling':>15} {'cpu s/s':>9}"
          f" {'RSS MiB':>8} {'kcm cpu':>9}")  # fmt: skip
    print("\n".join(r["row"] for r in loads))
    if chosen != ["rlop", "keda-30", "keda-1"]:
        print(f"\n(workdir {work}; goals are judged with every peer run)")
        return
    rlop, keda_default = reactions[0], reactions[1]
    biggest = max((r for r in loads if r["per pass"] is not None), key=lambda r: r["jobs"])  # rlop's rows
    print("\nGoals")
    print(f"  rlop's added latency p95 <= one interval (1 s): {rlop['added p95']:.2f} s "
          f"{'met' if rlop['added p95'] <= 1 else 'NOT met'}")  # fmt: skip
    speedup = keda_default["p50"] / rlop["p50"]
    print(f"  >= 10x faster than KEDA at its defaults (p50): {speedup:.1f}x {'met' if speedup >= 10 else 'NOT met'}")
    print(f"  one query per template per interval at {biggest['jobs']} jobs: {biggest['per pass']:.2f} per pass "
          f"{'met' if round(biggest['per pass'], 1) <= 1 else 'NOT met'}")  # fmt: skip
    print("  pass p99 < 2 s while 200 jobs scale: bench/scale.py")
    print(f"\n(workdir {work}; {json.dumps({'jobs': counts, 'window_s': args.window})})")


if __name__ == "__main__":
    main()
