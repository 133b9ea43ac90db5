"""KEDA (operator and metrics adapter, built from Go modules: `hack/build-binaries.sh keda`) on the local
control plane, as the peer rlop is measured against (bench/peers.py).

Both run as processes on this machine with the admin kubeconfig (no webhooks, no cert rotation): the
operator answers the adapter over mutual TLS with certificates made here; the adapter serves
external.metrics.k8s.io through the aggregation layer (an APIService whose Endpoints are this machine's
address), and kube-controller-manager's real HPA controller polls it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlop.dev.cluster import DevCluster, bin_dir, binary, free_port

NAMESPACE = "keda"
SERVICE = "keda-metrics-apiserver"


def host_address() -> str:
    """This machine's address on its default route: an endpoint the aggregator may dial (not loopback)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.254", 9))  # no packet is sent: only the route is looked up
        return str(s.getsockname()[0])


def _openssl(cwd: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=cwd)


def make_certs(directory: Path) -> None:
    """A CA and one certificate for localhost, for both ends of KEDA's gRPC metrics service (mutual TLS)."""
    directory.mkdir(parents=True, exist_ok=True)
    _openssl(directory, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-subj", "/CN=keda-ca",
             "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    _openssl(directory, "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-keyout", "tls.key",
             "-out", "tls.csr")  # fmt: skip
    (directory / "ext.cnf").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl(directory, "x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
             "-days", "30", "-extfile", "ext.cnf", "-out", "tls.crt")  # fmt: skip


def apiservice(address: str, port: int) -> list[dict[str, Any]]:
    """external.metrics.k8s.io served by the adapter on this machine (a Service without a selector)."""
    meta = {"name": SERVICE, "namespace": NAMESPACE}
    return [
        {"apiVersion": "v1", "kind": "Service", "metadata": meta,
         "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": meta,
         "subsets": [{"addresses": [{"ip": address}], "ports": [{"name": "https", "port": port}]}]},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": "v1beta1.external.metrics.k8s.io"},
         "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": True,
                  "groupPriorityMinimum": 100, "versionPriority": 100,
                  "service": {"name": SERVICE, "namespace": NAMESPACE, "port": 443}}},
    ]  # fmt: skip


def scaled_object(
    name: str, namespace: str, deployment: str, prometheus: str, query: str, threshold: float,
    polling: int, behavior: dict[str, Any], max_replicas: int = 10,
) -> dict[str, Any]:  # fmt: skip
    """A ScaledObject on a Prometheus trigger (AverageValue `threshold`, as HPA's external metrics)."""
    return {
        "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": name, "namespace": namespace},
        "spec": {"scaleTargetRef": {"name": deployment}, "pollingInterval": polling, "minReplicaCount": 1,
                 "maxReplicaCount": max_replicas,
                 "advanced": {"horizontalPodAutoscalerConfig": {"behavior": behavior}},
                 "triggers": [{"type": "prometheus", "metadata": {
                     "serverAddress": prometheus, "query": query, "threshold": f"{threshold:g}"}}]},
    }  # fmt: skip


@dataclass
class Keda:
    cluster: DevCluster
    workdir: Path
    ports: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    client: tuple[str, ...] = ()  # client-go rate flags for both (--kube-api-qps/--kube-api-burst; KEDA's: 20/30)

    def start(self, timeout: float = 120) -> Keda:
        if not (bin_dir() / "keda").exists():
            raise FileNotFoundError("KEDA is not built: run `bash hack/build-binaries.sh keda` (or `make keda`)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        certs = self.workdir / "certs"
        make_certs(certs)
        crds = bin_dir() / "keda-crds"
        self.cluster.kubectl("apply", "--server-side", "-f", str(crds))
        self.cluster.kubectl("create", "namespace", NAMESPACE, check=False)
        self.ports = {k: free_port() for k in ("grpc", "metrics", "probe", "adapter", "adapter_metrics")}
        env = {**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig), "WATCH_NAMESPACE": "",
               "POD_NAMESPACE": NAMESPACE, "KEDA_CLUSTER_OBJECT_NAMESPACE": NAMESPACE}  # fmt: skip
        kubeconfig = str(self.cluster.kubeconfig)
        self._spawn("keda", env, f"--cert-dir={certs}", "--enable-cert-rotation=false",
                    "--enable-webhook-patching=false", "--enable-apiservice-patching=false", "--leader-elect=false",
                    f"--metrics-service-bind-address=127.0.0.1:{self.ports['grpc']}",
                    f"--metrics-bind-address=127.0.0.1:{self.ports['metrics']}",
                    f"--health-probe-bind-address=127.0.0.1:{self.ports['probe']}",
                    "--zap-log-level=error", *self.client)  # fmt: skip
        address = host_address()
        self._spawn("keda-adapter", env, f"--cert-dir={certs}", f"--secure-port={self.ports['adapter']}",
                    f"--bind-address={address}", f"--port={self.ports['adapter_metrics']}",
                    f"--metrics-service-address=localhost:{self.ports['grpc']}",
                    f"--lister-kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
                    f"--authorization-kubeconfig={kubeconfig}", "--zap-log-level=error", *self.client)  # fmt: skip
        self.cluster.apply(apiservice(address, self.ports["adapter"]))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited; see {self.workdir / (name + '.log')}")
            available = "jsonpath={.status.conditions[?(@.type=='Available')].status}"
            out = self.cluster.kubectl("get", "apiservice", "v1beta1.external.metrics.k8s.io", "-o", available,
                                       check=False)  # fmt: skip
            if out.stdout.strip() == "True":
                return self
            time.sleep(1)
        raise TimeoutError(f"KEDA's metrics APIService did not become Available; see {self.workdir}")

    def _spawn(self, name: str, env: dict[str, str], *args: str) -> None:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        self.procs[name] = subprocess.Popen([binary(name), *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)  # fmt: skip

    def pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items()}

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs = {}
