"""Crash safety: kill -9 the operator at random points while RLJobs are created, scaled and deleted;
after a restart everything must converge with no duplicate or orphaned objects.

    .venv/bin/python -m tests.chaos [--runs 20] [--jobs 20] [--seed 1]     (make chaos)

tests/integration/test_chaos.py runs a short seeded variant of the same loop in CI.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlop.dev.cluster import DevCluster
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.prometheus import Exporter
from rlop.dev.stack import Stack, percentile

QUERY = 'sum(chaos_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'


def rljob(name: str, ns: str, trainers: int, rollouts: int) -> dict[str, Any]:
    tpl = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "10m"}}}]}}
    auto = {
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [{"query": QUERY, "target": {"type": "AverageValue", "value": 10}}],
    }
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": name, "namespace": ns},
            "spec": {"pools": {"trainer": {"replicas": trainers, "template": tpl},
                               "rollout": {"replicas": rollouts, "template": tpl},
                               "reward": {"template": tpl, "autoscale": auto}}}}  # fmt: skip


@dataclass
class Run:
    kills: int = 0
    converged_s: float | None = None
    anomalies: list[str] = field(default_factory=list)


def anomalies(cluster: DevCluster, ns: str, expected: dict[str, tuple[int, int]]) -> list[str]:
    """Everything that differs from the converged state: missing, extra, duplicate or orphaned objects."""

    def items(kind: str) -> list[dict[str, Any]]:
        return json.loads(cluster.kubectl("-n", ns, "get", kind, "-o", "json").stdout)["items"]

    out = []
    jobs = {j["metadata"]["name"]: j for j in items("rljobs")}
    if set(jobs) != set(expected):
        out.append(f"RLJobs {sorted(jobs)} != {sorted(expected)}")
    pods = [p for p in items("pods") if not p["metadata"].get("deletionTimestamp")]
    children = items("statefulsets") + items("deployments") + items("services")
    for obj in children + pods:
        owner = obj["metadata"].get("labels", {}).get("rlop.dev/job")
        if owner and owner not in expected:
            out.append(f"orphan {obj['kind']} {obj['metadata']['name']}")
    for name, (trainers, rollouts) in expected.items():
        job = jobs.get(name)
        if job is None:
            continue
        st = job.get("status") or {}
        if st.get("observedGeneration") != job["metadata"]["generation"] or st.get("phase") != "Running":
            out.append(f"{name}: status {st.get('phase')} gen {st.get('observedGeneration')}")
        pools = st.get("pools") or {}
        reward = pools.get("reward", {})
        if reward.get("desired") != 2 or (not reward.get("scaleEvents") and not reward.get("recommendations")):
            out.append(f"{name}: reward {reward.get('desired')} without history")
        for pool, want in (("trainer", trainers), ("rollout", rollouts), ("reward", 2)):
            live = [p for p in pods if p["metadata"]["labels"].get("rlop.dev/job") == name
                    and p["metadata"]["labels"].get("rlop.dev/pool") == pool]  # fmt: skip
            if len(live) != want:
                out.append(f"{name}/{pool}: {len(live)} pods, want {want}")
        for kind in ("Service",):
            count = sum(
                1 for c in children if c["kind"] == kind and c["metadata"]["labels"].get("rlop.dev/job") == name
            )
            if count != 3:
                out.append(f"{name}: {count} services")
    return out


def one_run(cluster: DevCluster, prom_url: str, exporter: Exporter, work: Path, seed: int, jobs: int) -> Run:
    rng, ns, run = random.Random(seed), f"chaos-{seed}", Run()
    cluster.kubectl("create", "namespace", ns)
    expected: dict[str, tuple[int, int]] = {}
    for i in range(jobs):
        exporter.set("chaos_backlog", 20, namespace=ns, rljob=f"j{i}", pool="reward")
    op = OperatorProcess(cluster, prom_url, work, 1.0).start()
    kill_at = rng.uniform(0.5, 6.0)
    killer = threading.Timer(kill_at, lambda: op.stop(kill=True))
    killer.start()
    started = time.monotonic()
    for _ in range(jobs * 2):
        name = f"j{rng.randrange(jobs)}"
        action = rng.random()
        if name not in expected or action < 0.6:
            expected[name] = (rng.randint(1, 2), rng.randint(0, 3))
            cluster.apply([rljob(name, ns, *expected[name])])
        else:
            cluster.kubectl("-n", ns, "delete", "rljob", name, "--wait=false")
            del expected[name]
    killer.join()
    run.kills = 1
    time.sleep(max(0.0, kill_at + 0.5 - (time.monotonic() - started)))
    op.start()
    restarted = time.monotonic()
    deadline = restarted + 180
    while time.monotonic() < deadline:
        found = anomalies(cluster, ns, expected)
        if not found:
            run.converged_s = time.monotonic() - restarted
            break
        run.anomalies = found
        time.sleep(1)
    if run.converged_s is not None:
        run.anomalies = []
    op.stop()
    cluster.kubectl("delete", "namespace", ns, "--wait=false")
    return run


def report(runs: list[Run]) -> str:
    times = [r.converged_s for r in runs if r.converged_s is not None]
    found = sum(len(r.anomalies) for r in runs)
    return (f"{'runs':>5} {'kills':>6} {'converged':>10} {'p50 s':>7} {'p95 s':>7} {'anomalies':>10}\n"
            f"{len(runs):5d} {sum(r.kills for r in runs):6d} {len(times):10d} {percentile(times, 0.5):7.1f} "
            f"{percentile(times, 0.95):7.1f} {found:10d}")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--jobs", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="rlop-chaos-"))
    with Stack(work) as stack:
        assert stack.prometheus is not None
        runs = []
        for i in range(args.runs):
            runs.append(one_run(stack.cluster, stack.prometheus.url, stack.exporter, work, args.seed + i, args.jobs))
            print(f"run {i + 1}: converged in {runs[-1].converged_s}s, anomalies {runs[-1].anomalies}", flush=True)
        print("\n" + report(runs))


if __name__ == "__main__":
    main()
