"""A real local control plane on loopback, for tests and for the no-Docker demo.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as local processes built from Go
modules (``make binaries``); kwok turns Node objects into simulated nodes and drives pod lifecycles.
One implementation serves the pytest fixture and ``rlop dev cluster up|down``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlop.api.names import PODGROUP_API

TOKEN = "rlop-dev-admin-token"


def bin_dir() -> Path:
    return Path(os.environ.get("RLOP_BIN_DIR", Path.home() / ".cache" / "rlop" / "bin"))


def binary(name: str) -> str:
    path = bin_dir() / name
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: run `make binaries` (hack/build-binaries.sh) first")
    return str(path)


def kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run kubectl against `kubeconfig`; a failure raises with kubectl's own message unless `check` is off."""
    cmd = [binary("kubectl"), f"--kubeconfig={kubeconfig}", *args]
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=120)
    if check and out.returncode:
        raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass(frozen=True)
class NodeSpec:
    """A simulated node. GPU nodes carry nvidia.com/gpu; CPU nodes carry the sandbox pool label."""

    name: str
    cpu: str = "16"
    memory: str = "64Gi"
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()

    def manifest(self) -> dict[str, Any]:
        capacity = {"cpu": self.cpu, "memory": self.memory, "pods": "110"}
        if self.gpus:
            capacity["nvidia.com/gpu"] = str(self.gpus)
        labels = {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            **self.labels,
        }
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": labels,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            },
            "spec": {"taints": list(self.taints)} if self.taints else {},
            "status": {"allocatable": capacity, "capacity": capacity},
        }


def default_nodes(gpu_nodes: int = 2, cpu_nodes: int = 4) -> list[NodeSpec]:
    gpu = [
        NodeSpec(f"gpu-{i}", cpu="64", memory="512Gi", gpus=8, labels={"rlop.dev/gpu-pool": "true"})
        for i in range(gpu_nodes)
    ]
    cpu = [NodeSpec(f"cpu-{i}", cpu="16", labels={"rlop.dev/cpu-pool": "true"}) for i in range(cpu_nodes)]
    return gpu + cpu


@dataclass
class DevCluster:
    """The processes of one local cluster, rooted at `workdir` (state survives in workdir/state.json)."""

    workdir: Path
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    kcm_flags: tuple[str, ...] = ()  # extra kube-controller-manager flags (e.g. a shorter HPA sync period)
    native_gangs: bool = False  # serve kube-scheduler's gangs: the alpha GenericWorkload + GangScheduling gates

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    # -------------------------------------------------------------- lifecycle

    def start(self, nodes: Sequence[NodeSpec] = (), timeout: float = 120) -> DevCluster:
        if self.workdir.exists():
            shutil.rmtree(self.workdir)
        (self.workdir / "logs").mkdir(parents=True)
        self.ports = {k: free_port() for k in ("etcd", "etcd_peer", "apiserver", "kcm", "scheduler")}
        self._write_credentials()
        deadline = time.monotonic() + timeout
        try:
            self._spawn("etcd", self._etcd_args())
            self._spawn("kube-apiserver", self._apiserver_args())
            self._wait_for_apiserver(deadline)
            self._write_kubeconfig()
            self._spawn("kube-controller-manager", self._kcm_args())
            self._spawn("kube-scheduler", self._scheduler_args())
            self._spawn("kwok", self._kwok_args())
            self._save()
            self._wait_for(deadline, "the default ServiceAccount", self._has_default_service_account)
            if nodes:
                self.add_nodes(nodes)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float = 10) -> None:
        """SIGTERM every process, then SIGKILL whatever is still alive after `grace` seconds."""
        alive = [pid for pid in self.pids.values() if pid and not _exited(pid)]
        for pid in alive:
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            alive = [pid for pid in alive if not _exited(pid)]
            time.sleep(0.1)
        for pid in alive:
            os.kill(pid, signal.SIGKILL)
        self.pids = {}
        self._save()

    @classmethod
    def load(cls, workdir: Path) -> DevCluster:
        state = json.loads((workdir / "state.json").read_text())
        return cls(workdir=workdir, ports=state["ports"], pids=state["pids"],
                   native_gangs=bool(state.get("nativeGangs")))  # fmt: skip

    def restart(self, component: str, timeout: float = 60) -> None:
        """Kill -9 one component and start it again with the same flags (outage tests)."""
        args = {
            "etcd": self._etcd_args,
            "kube-apiserver": self._apiserver_args,
            "kube-controller-manager": self._kcm_args,
            "kube-scheduler": self._scheduler_args,
            "kwok": self._kwok_args,
        }[component]()
        os.kill(self.pids[component], signal.SIGKILL)
        while not _exited(self.pids[component]):
            time.sleep(0.1)
        self._spawn(component, args)
        self._save()
        if component in ("etcd", "kube-apiserver"):
            self._wait_for_apiserver(time.monotonic() + timeout)

    def pause(self, component: str, seconds: float) -> None:
        """Freeze a component (SIGSTOP) for `seconds`: a slow or hung etcd, say."""
        os.kill(self.pids[component], signal.SIGSTOP)
        try:
            time.sleep(seconds)
        finally:
            os.kill(self.pids[component], signal.SIGCONT)

    # -------------------------------------------------------------- using it

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return kubectl(self.kubeconfig, *args, stdin=stdin, check=check)

    def apply(self, objects: Sequence[dict[str, Any]]) -> None:
        if objects:
            self.kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))

    def install_rlop(self) -> None:
        """What the Helm chart installs cluster-wide: the CRD (generated from the installed models, no
        checkout needed) and the rlop-harvest PriorityClass."""
        from rlop.api.crd import rljob_crd_yaml
        from rlop.api.models import HARVEST_PRIORITY_CLASS

        self.kubectl("apply", "--server-side", "-f", "-", stdin=rljob_crd_yaml())
        self.apply([HARVEST_PRIORITY_CLASS])
        self.kubectl("wait", "--for=condition=Established", "crd/rljobs.rlop.dev", "--timeout=60s")

    def add_nodes(self, nodes: Sequence[NodeSpec]) -> None:
        self.apply([n.manifest() for n in nodes])

    def env(self) -> dict[str, str]:
        return {"KUBECONFIG": str(self.kubeconfig), "PATH": f"{bin_dir()}:{os.environ.get('PATH', '')}"}

    # -------------------------------------------------------------- internals

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.workdir / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen([binary(name), *args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.pids[name] = proc.pid

    def _save(self) -> None:
        state = {"ports": self.ports, "pids": self.pids, "kubeconfig": str(self.kubeconfig),
                 "nativeGangs": self.native_gangs}  # fmt: skip
        (self.workdir / "state.json").write_text(json.dumps(state, indent=2))

    def _write_credentials(self) -> None:
        pki = self.workdir / "pki"
        pki.mkdir()

        def openssl(*args: str) -> None:
            subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=pki)

        openssl("genrsa", "-out", "sa.key", "2048")
        (pki / "tokens.csv").write_text(f'{TOKEN},admin,admin-uid,"system:masters"\n')
        # the aggregation layer's front proxy (an APIService such as KEDA's external metrics): a CA and the
        # client certificate the API server presents to extension API servers
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=front-proxy-ca",
                "-keyout", "front-proxy-ca.key", "-out", "front-proxy-ca.crt")  # fmt: skip
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=front-proxy-client", "-keyout",
                "front-proxy-client.key", "-out", "front-proxy-client.csr")  # fmt: skip
        openssl("x509", "-req", "-in", "front-proxy-client.csr", "-CA", "front-proxy-ca.crt", "-CAkey",
                "front-proxy-ca.key", "-CAcreateserial", "-days", "30", "-out", "front-proxy-client.crt")  # fmt: skip

    def _etcd_args(self) -> list[str]:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd_peer']}"
        return [
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
            "--quota-backend-bytes=4294967296",
        ]

    def _apiserver_args(self) -> list[str]:
        pki = self.workdir / "pki"
        return [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            f"--cert-dir={pki}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.key'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            f"--token-auth-file={pki / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0",
            "--max-mutating-requests-inflight=0",
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            "--enable-aggregator-routing=true",  # no kube-proxy here: the aggregator dials endpoints directly
            *self._gates("GenericWorkload"),
            *([f"--runtime-config={PODGROUP_API}=true"] if self.native_gangs else []),  # alpha APIs are off
        ]

    def _component_args(self, port: str) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports[port]}",
            "--leader-elect=false",
        ]

    def _kcm_args(self) -> list[str]:
        pki = self.workdir / "pki"
        return [
            *self._component_args("kcm"),
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'apiserver.crt'}",
            "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route",
            "--node-monitor-grace-period=60s",
            "--concurrent-gc-syncs=5",
            *self.kcm_flags,
            *self._gates("GenericWorkload"),  # its podgroup-protection controller lets a PodGroup be deleted
        ]

    def _scheduler_args(self) -> list[str]:
        return [*self._component_args("scheduler"), *self._gates("GenericWorkload", "GangScheduling")]

    def _gates(self, *gates: str) -> list[str]:
        """kube-scheduler's native gangs (alpha in 1.36, k8s.io/kubernetes pkg/features/kube_features.go)."""
        return [f"--feature-gates={','.join(f'{g}=true' for g in gates)}"] if self.native_gangs else []

    def _kwok_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.kubeconfig}",
            f"--config={bin_dir() / 'kwok-stages.yaml'}",
            "--manage-all-nodes=true",
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.0.0.1",
        ]

    def kubeconfig_for(self, token: str, path: Path) -> Path:
        """A kubeconfig for this cluster that authenticates with `token` (e.g. a ServiceAccount's)."""
        self._write_kubeconfig(token, path)
        return path

    def _write_kubeconfig(self, token: str = TOKEN, path: Path | None = None) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "rlop-dev",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self.workdir / "pki" / "apiserver.crt"),
                    },
                }
            ],
            "users": [{"name": "admin", "user": {"token": token}}],
            "contexts": [{"name": "rlop-dev", "context": {"cluster": "rlop-dev", "user": "admin"}}],
            "current-context": "rlop-dev",
        }
        (path or self.kubeconfig).write_text(yaml.safe_dump(config))

    def get(self, path: str) -> Any:
        ctx = ssl.create_default_context(cafile=str(self.workdir / "pki" / "apiserver.crt"))
        req = urllib.request.Request(self.server + path, headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, context=ctx, timeout=5) as resp:
            return json.loads(resp.read() or b"null") if path != "/readyz" else resp.status

    def _wait_for_apiserver(self, deadline: float) -> None:
        def ready() -> bool:
            return (self.workdir / "pki" / "apiserver.crt").exists() and self.get("/readyz") == 200

        self._wait_for(deadline, "kube-apiserver /readyz", ready)

    def _has_default_service_account(self) -> bool:
        return bool(self.get("/api/v1/namespaces/default/serviceaccounts/default"))

    def _wait_for(self, deadline: float, what: str, check: Any) -> None:
        last: Exception | None = None
        while time.monotonic() < deadline:
            for name, pid in self.pids.items():
                if pid and _exited(pid):
                    raise RuntimeError(f"{name} exited; see {self.workdir / 'logs' / name}.log")
            try:
                if check():
                    return
            except Exception as exc:  # not up yet
                last = exc
            time.sleep(0.3)
        raise TimeoutError(f"timed out waiting for {what}: {last}")


def _exited(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:  # not our child (a loaded cluster): is it alive?
        try:
            os.kill(pid, 0)
            return False
        except ProcessLookupError:
            return True


def describe(cluster: DevCluster) -> dict[str, Any]:
    return {**asdict(cluster), "workdir": str(cluster.workdir), "kubeconfig": str(cluster.kubeconfig)}
