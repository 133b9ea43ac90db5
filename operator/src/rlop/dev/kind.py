"""rlop on a real kind cluster built offline (hack/kind/): the e2e tier and the demo on real pods.

``hack/kind/cluster.sh up`` builds every image from the package registries, creates the cluster from
kind-config.yaml and loads rlop's images; this class installs the chart and talks to the cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.parse
from pathlib import Path
from typing import Any

from rlop.api.names import DEMO_LABEL, JOB_LABEL
from rlop.dev import REPO
from rlop.dev.cluster import binary, kubectl

NAMESPACE = "rlop-system"
RELEASE = "rlop"
VALUES = REPO / "hack" / "kind" / "values.yaml"
# Every kind node shares this machine's few CPUs: a CPU-burning pod took a node only to 0.65-0.77 (measured)
# while the rest of the cluster ran, so the demo and the eviction test harvest below these thresholds (two
# 250m sandbox pods fit an idle node; a CPU-burning pod makes it busy).
SHARED_HOST_PLACEMENT = {"maxNodeUtilization": 0.45, "hysteresis": 0.15, "reservedCpu": "0"}
# the GPU workers' shared directory (kind-config.yaml): on this machine, and inside those nodes
SHARED_DIR, NODE_SHARED_DIR = Path("/tmp/rlop-kind-weights"), "/var/lib/rlop-weights"


def docker_installed() -> bool:
    """A Docker engine is running here, or Debian's dockerd is installed (cluster.sh starts it)."""
    if shutil.which("dockerd"):
        return True
    return bool(shutil.which("docker")) and subprocess.run(["docker", "info"], capture_output=True).returncode == 0


BURN = (
    "import multiprocessing as m, time\ndef spin():\n    while True: pass\n"
    "for _ in range(2): m.Process(target=spin, daemon=True).start()\ntime.sleep(86400)"
)


def busy_pod(name: str, namespace: str, node: str) -> dict[str, Any]:
    """Another tenant's pod that keeps `node`'s CPUs busy (harvested sandbox pods must then leave)."""
    burn = {"name": "burn", "image": "rlop-workload:dev", "imagePullPolicy": "Never", "command": ["python", "-c", BURN],
            "resources": {"requests": {"cpu": "10m"}, "limits": {"cpu": "2"}}}  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "containers": [burn]}}  # fmt: skip


class KindCluster:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    @classmethod
    def up(cls) -> KindCluster:
        """Build what is missing and bring the cluster up (reused when it already runs the same node image)."""
        out = subprocess.run(["bash", str(REPO / "hack" / "kind" / "cluster.sh"), "up"], stdout=subprocess.PIPE,
                             text=True, check=True)  # fmt: skip
        return cls(Path(out.stdout.strip().splitlines()[-1]))

    @staticmethod
    def down() -> None:
        subprocess.run(["bash", str(REPO / "hack" / "kind" / "cluster.sh"), "down"], check=True)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return kubectl(self.kubeconfig, *args, stdin=stdin, check=check)

    def get(self, path: str) -> Any:
        return json.loads(self.kubectl("get", "--raw", path).stdout or "null")

    def helm(self, *args: str) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        out = subprocess.run([binary("helm"), *args], env=env, capture_output=True, text=True, timeout=600)
        if out.returncode:
            raise RuntimeError(f"helm {' '.join(args)} failed: {out.stderr.strip()}")
        return out.stdout

    def install_rlop(self, *sets: str) -> None:
        """The chart with its bundled Prometheus, as a user installs it (values: hack/kind/values.yaml)."""
        args = [f"--set={s}" for s in sets]
        self.helm("upgrade", "--install", RELEASE, str(REPO / "charts" / "rlop"), "-n", NAMESPACE,
                  "--create-namespace", "-f", str(VALUES), *args, "--wait", "--timeout=5m")  # fmt: skip
        # a new operator image under the same tag: roll the Deployment so the pods run it
        self.kubectl("-n", NAMESPACE, "rollout", "restart", f"deploy/{RELEASE}")
        self.kubectl("-n", NAMESPACE, "rollout", "status", f"deploy/{RELEASE}", "--timeout=180s")

    def remove_demo_jobs(self) -> None:
        """Delete the RLJobs `rlop demo` left running (it keeps the cluster up) and wait for their pods: on a
        reused cluster they would hold the GPUs the e2e tier's job needs."""
        out = self.kubectl("get", "rljobs", "-A", "-l", f"{DEMO_LABEL}=true", "-o", "json", check=False)
        for job in json.loads(out.stdout or '{"items": []}')["items"]:
            name, ns = job["metadata"]["name"], job["metadata"]["namespace"]
            self.kubectl("delete", "rljob", "-n", ns, name, "--wait=true", "--timeout=120s")
            self.kubectl("wait", "--for=delete", "pod", "-n", ns, "-l", f"{JOB_LABEL}={name}", "--timeout=180s",
                         check=False)  # fmt: skip

    def service_path(self, namespace: str, service: str, port: int, path: str) -> str:
        """The API server's proxy path to a Service (no port-forward needed)."""
        return f"/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy{path}"

    def post(self, namespace: str, service: str, port: int, path: str, body: dict[str, Any]) -> Any:
        raw = self.service_path(namespace, service, port, path)
        out = self.kubectl("create", "--raw", raw, "-f", "-", stdin=json.dumps(body))
        return json.loads(out.stdout or "null")

    def promql(self, query: str) -> list[dict[str, Any]]:
        """An instant query to the chart's Prometheus."""
        path = "/api/v1/query?" + urllib.parse.urlencode({"query": query})
        res = self.get(self.service_path(NAMESPACE, f"{RELEASE}-prometheus", 9090, path))
        return list(res["data"]["result"])

    def node_exec(self, node: str, *cmd: str) -> subprocess.CompletedProcess[str]:
        """A command in a kind node's own namespaces (e.g. to kill -9 a container's process)."""
        return subprocess.run(["docker", "exec", node, *cmd], capture_output=True, text=True, timeout=60)

    def signal(self, pod: dict[str, Any], sig: str) -> None:
        """Send `sig` to the reference workload's process in this one pod (found by the pod's UID in the
        process's cgroup path), as a crash or a hang would; fails unless exactly one process got it."""
        uid = pod["metadata"]["uid"]
        script = (f'for p in $(pgrep -f "rlop_workload.py"); do grep -qE "pod({uid}|{uid.replace("-", "_")})"'
                  f' /proc/$p/cgroup && kill -{sig} $p && echo $p; done; true')  # fmt: skip
        done = self.node_exec(pod["spec"]["nodeName"], "sh", "-c", script)
        if done.returncode != 0 or len(done.stdout.split()) != 1:
            raise RuntimeError(f"signal {sig} to pod {pod['metadata']['name']}: {done.stdout} {done.stderr}")
