"""`rlop demo`: a cluster, the operator, Prometheus and the example RLJob, driven through load phases, with a
live table of every pool (desired/ready, metric, reason) and the sandbox pods per node.

Without Docker it runs on the local control plane with simulated nodes (kwok). Pods there do not run
code, so the reference workload's roles run as local processes (one per pool, RLOP_SIMULATED=1) that
export the same metrics and serve at the rate of the replicas rlop keeps ready. Node CPU utilization
comes from a simulated exporter, and the RLJob's utilizationQuery is pointed at it. Where a Docker engine
is installed it runs on a real kind cluster built offline (rlop.dev.kind): the chart with its Prometheus,
the real workload in real pods, a CPU-burning pod making a CPU node busy.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from rlop.api.names import DEMO_LABEL, EVENT_SOURCE, HARVEST_LABEL, POOL_LABEL
from rlop.api.pools import KINDS, POOL_NAMES
from rlop.dev import REPO
from rlop.dev.cluster import DevCluster, default_nodes, free_port
from rlop.dev.stack import Stack
from rlop.top import placements, replica_versions, table

WORKLOAD = REPO / "examples" / "workload" / "rlop_workload.py"
ROLES = POOL_NAMES  # the workload runs one role per pool
UTILIZATION_QUERY = "max by (node) (rlop_demo_node_utilization)"


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    prompts_per_s: float
    checks_per_prompt: int
    busy_nodes: tuple[str, ...] = ()  # CPU nodes whose owners get busy (sandbox pods must leave)


# A node's utilization is a 1-minute rate: a busy node shows as busy ~30-60 s after its tenant starts.
PHASES = (
    Phase("warm-up", 15, 2, 1),
    Phase("burst of prompts", 45, 12, 1),
    Phase("verifier-heavy", 75, 6, 4, busy_nodes=("cpu-0",)),
    Phase("idle", 90, 0, 1),
)


class Roles:
    """The workload's roles as local processes, one per pool, wired to each other over loopback."""

    def __init__(self, workdir: Path, job: str, namespace: str) -> None:
        self.ports = {r: free_port() for r in ROLES}
        self.metrics = {r: free_port() for r in ROLES}
        base = {**os.environ, "RLOP_SIMULATED": "1", "RLOP_JOB": job, "RLOP_NAMESPACE": namespace,
                "RLOP_TRAINER_URL": f"http://127.0.0.1:{self.ports['trainer']}",
                **{f"RLOP_{r.upper()}_URL": f"http://127.0.0.1:{self.ports[r]}" for r in ROLES}}  # fmt: skip
        self.procs = []
        for role in ROLES:
            env = {**base, "RLOP_POOL": role, "RLOP_PORT": str(self.ports[role]),
                   "RLOP_METRICS_PORT": str(self.metrics[role])}  # fmt: skip
            log = open(workdir / f"{role}.log", "wb")  # noqa: SIM115 - the child owns it
            self.procs.append(subprocess.Popen([sys.executable, str(WORKLOAD), role], env=env, stdout=log,
                                               stderr=subprocess.STDOUT))  # fmt: skip

    @property
    def targets(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.metrics.values()]

    def post(self, role: str, path: str, body: dict[str, Any]) -> None:
        req = urllib.request.Request(f"http://127.0.0.1:{self.ports[role]}{path}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})  # fmt: skip
        with contextlib.suppress(OSError):  # not up yet
            urllib.request.urlopen(req, timeout=2).close()

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            p.wait(10)


def demo_job(job_file: Path, placement: dict[str, Any]) -> dict[str, Any]:
    """The RLJob of `job_file`, its sandbox placement overridden by `placement`: on simulated nodes the
    utilizationQuery of the simulated exporter, on kind thresholds that nodes sharing one machine's CPUs
    can cross."""
    job: dict[str, Any] = yaml.safe_load(job_file.read_text())
    job["metadata"].setdefault("labels", {})[DEMO_LABEL] = "true"
    sandbox = job["spec"]["pools"].get("sandbox")
    if sandbox is not None:
        sandbox.setdefault("placement", {}).update(placement)
    return job


def run_kind(duration: float, job_file: Path) -> int:
    from rlop.dev.kind import SHARED_HOST_PLACEMENT, KindCluster, busy_pod

    scale = duration / sum(p.seconds for p in PHASES) if duration else 1.0
    print("Building (first run only) and starting the kind cluster: hack/kind/cluster.sh up ...", flush=True)
    kind = KindCluster.up()
    kind.install_rlop()
    job = demo_job(job_file, SHARED_HOST_PLACEMENT)
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    kind.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(job))
    cpu_nodes = kind.kubectl("get", "nodes", "-l", "rlop.dev/cpu-pool=true", "-o", "name").stdout.split()
    busy = cpu_nodes[0].split("/")[-1]
    try:
        for phase in PHASES:
            load = {"prompts_per_s": phase.prompts_per_s, "checks_per_prompt": phase.checks_per_prompt}
            with contextlib.suppress(RuntimeError):  # the controller pod is not up yet
                kind.post(ns, f"{name}-controller", 8000, "/load", load)
            if phase.busy_nodes:
                kind.kubectl("apply", "-f", "-", stdin=json.dumps(busy_pod(f"busy-{busy}", ns, busy)))
            show(kind, ns, phase, phase.seconds * scale, busy=busy)
            kind.kubectl("delete", "pod", "-n", ns, f"busy-{busy}", "--ignore-not-found", "--grace-period=0",
                         "--force", check=False)  # fmt: skip
    except KeyboardInterrupt:
        pass
    summary(kind, ns, name)
    print(f"\nThe cluster keeps running: export KUBECONFIG={kind.kubeconfig}; `hack/kind/cluster.sh down` ends it.")
    return 0


def run(workdir: Path, duration: float, job_file: Path) -> int:
    from rlop.dev.kind import docker_installed

    if docker_installed() and os.environ.get("RLOP_DEMO_LOCAL") != "1":
        return run_kind(duration, job_file)
    scale = duration / sum(p.seconds for p in PHASES) if duration else 1.0
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"No Docker/kind here: a local control plane with simulated nodes in {workdir} ...", flush=True)
    job = demo_job(job_file, {"utilizationQuery": UTILIZATION_QUERY})
    for pool in (k.name for k in KINDS if k.serving):  # simulated nodes run no servers to ask for weights
        for field in ("weights", "router"):
            (job["spec"]["pools"].get(pool) or {}).pop(field, None)
    name, ns = job["metadata"]["name"], job["metadata"].get("namespace", "default")
    roles = Roles(workdir, name, ns)
    try:
        with Stack(workdir, default_nodes(), targets=roles.targets) as stack:
            cpu_nodes = [n.name for n in default_nodes() if n.name.startswith("cpu")]
            for node in cpu_nodes:
                stack.exporter.set("rlop_demo_node_utilization", 0.15, node=node)
            stack.operator(1.0)
            stack.cluster.apply([job])
            print(f"export KUBECONFIG={stack.cluster.kubeconfig}   # look around while it runs\n", flush=True)
            stop = threading.Event()
            threading.Thread(target=sync_replicas, args=(stack.cluster, roles, name, ns, stop), daemon=True).start()
            for phase in PHASES:
                roles.post("controller", "/load", {"prompts_per_s": phase.prompts_per_s,
                                                   "checks_per_prompt": phase.checks_per_prompt})  # fmt: skip
                for node in cpu_nodes:
                    busy = 0.9 if node in phase.busy_nodes else 0.15
                    stack.exporter.set("rlop_demo_node_utilization", busy, node=node)
                show(stack.cluster, ns, phase, phase.seconds * scale)
            stop.set()
            summary(stack.cluster, ns, name)
    except KeyboardInterrupt:
        pass
    finally:
        roles.stop()
    print(f"\nDone. Logs in {workdir}")
    return 0


def sync_replicas(cluster: DevCluster, roles: Roles, job: str, ns: str, stop: threading.Event) -> None:
    """Each local role serves at the rate of the pods rlop keeps ready for its pool."""
    while not stop.wait(1.0):
        try:
            status = cluster.get(f"/apis/rlop.dev/v1alpha1/namespaces/{ns}/rljobs/{job}").get("status") or {}
        except OSError:
            continue
        for pool, st in (status.get("pools") or {}).items():
            roles.post(pool, "/sim/replicas", {"n": int(st.get("ready", 0))})


class Cluster(Protocol):
    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]: ...


def rlop_events(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    events = json.loads(cluster.kubectl("-n", ns, "get", "events", "-o", "json").stdout)["items"]
    return sorted((e for e in events if e.get("source", {}).get("component") == EVENT_SOURCE),
                  key=lambda e: e.get("lastTimestamp") or "")  # fmt: skip


def summary(cluster: Cluster, ns: str, name: str) -> None:
    """What happened, left on the terminal after the live table."""
    counts: dict[str, int] = {}
    for e in rlop_events(cluster, ns):
        counts[e.get("reason", "")] = counts.get(e.get("reason", ""), 0) + int(e.get("count") or 1)
    jobs = json.loads(cluster.kubectl("get", "rljobs", "-A", "-o", "json").stdout)["items"]
    print(f"\nSummary of {ns}/{name}:\n" + table(jobs))
    print("decisions: " + ", ".join(f"{r} x{n}" for r, n in sorted(counts.items())))


def show(cluster: Cluster, ns: str, phase: Phase, seconds: float, busy: str = "") -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        jobs = json.loads(cluster.kubectl("get", "rljobs", "-A", "-o", "json").stdout)["items"]
        pods = json.loads(cluster.kubectl("-n", ns, "get", "pods", "-l", f"{HARVEST_LABEL}=true", "-o", "json").stdout)
        recent = rlop_events(cluster, ns)[-6:]
        left = int(end - time.monotonic())
        busy_nodes = (busy,) if busy and phase.busy_nodes else phase.busy_nodes
        # redraw in place: home, then clear the screen below (a terminal UI, not a scrolling log)
        print("\033[H\033[J" + f"{time.strftime('%H:%M:%S')}  phase: {phase.name} ({left}s left; "
              f"{phase.prompts_per_s:g} prompts/s, {phase.checks_per_prompt} checks each"
              + (f"; busy: {', '.join(busy_nodes)}" if busy_nodes else "") + ")\n")  # fmt: skip
        print(table(jobs))
        print("\nsandbox pods per node: " + placements(pods["items"]))
        rollout = cluster.kubectl("-n", ns, "get", "pods", "-l", f"{POOL_LABEL}=rollout", "-o", "json").stdout
        print("weights: " + replica_versions(jobs, json.loads(rollout)["items"]))
        print("\nrecent decisions:")
        for e in recent:
            print(f"  {e.get('reason', ''):16} {e.get('message', '')[:130]}")
        time.sleep(2)
