"""Shared fixtures. Integration tests run against the real local control plane (never skipped: missing
binaries are an error, run `make binaries`) and a real operator process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from rlop.devcluster import DevCluster, default_nodes, free_port
from rlop.devprometheus import DevPrometheus

ROOT = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def wait_for(check: Callable[[], T], timeout: float = 30, what: str = "condition") -> T:
    """Poll `check` until it returns something truthy; fail with the last value otherwise."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


class Kubectl:
    def __init__(self, cluster: DevCluster, namespace: str) -> None:
        self.cluster, self.ns = cluster, namespace

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.cluster.kubectl("-n", self.ns, *args, stdin=stdin, check=check)

    def apply(self, obj: dict[str, Any] | str, check: bool = True) -> subprocess.CompletedProcess[str]:
        text = obj if isinstance(obj, str) else yaml.safe_dump(obj)
        return self("apply", "-f", "-", stdin=text, check=check)

    def get(self, *what: str) -> Any:
        out = self("get", *what, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def items(self, kind: str, selector: str = "") -> list[dict[str, Any]]:
        args = [kind, "-l", selector] if selector else [kind]
        return list((self.get(*args) or {}).get("items", []))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.items("events") if e["involvedObject"].get("name") == name]


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(tmp_path_factory.mktemp("cluster")).start(default_nodes(gpu_nodes=2, cpu_nodes=4))
    try:
        c.kubectl("apply", "--server-side", "-f", str(ROOT / "crds"))
        c.kubectl("wait", "--for=condition=Established", "crd/rljobs.rlop.dev", "--timeout=30s")
        yield c
    finally:
        c.stop()


class Exporter:
    """A real /metrics endpoint whose values the tests set (scraped by the real Prometheus)."""

    LABELS = ("namespace", "rljob", "pool")

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry()
        self.gauges: dict[str, Any] = {}
        self.port = free_port()
        self.server, self.thread = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, metric: str, value: float, **labels: str) -> None:
        from prometheus_client import Gauge

        if metric not in self.gauges:
            self.gauges[metric] = Gauge(metric, metric, list(labels), registry=self.registry)
        self.gauges[metric].labels(**labels).set(value)

    def stop(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="session")
def exporter() -> Iterator[Exporter]:
    e = Exporter()
    try:
        yield e
    finally:
        e.stop()


@pytest.fixture(scope="session")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevPrometheus]:
    p = DevPrometheus(tmp_path_factory.mktemp("prometheus")).start([exporter.target])
    try:
        yield p
    finally:
        p.stop()


class Operator:
    """The operator as a real process (`python -m rlop run`), with its /metrics and log."""

    def __init__(self, cluster: DevCluster, prometheus: DevPrometheus, workdir: Path, interval: float = 1.0) -> None:
        self.cluster, self.prometheus = cluster, prometheus
        self.log_path, self.interval = workdir / "operator.log", interval
        self.metrics_port, self.health_port = free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Operator:
        cmd = [sys.executable, "-m", "rlop", "run", f"--kubeconfig={self.cluster.kubeconfig}",
               f"--interval={self.interval}", f"--metrics-port={self.metrics_port}",
               f"--liveness=http://127.0.0.1:{self.health_port}/healthz",
               f"--prometheus-url={self.prometheus.url}", "--prometheus-timeout=2"]  # fmt: skip
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ})
        wait_for(self._healthy, 60, "operator liveness")
        return self

    def _healthy(self) -> bool:
        assert self.proc is not None and self.proc.poll() is None, self.log_path.read_text()[-3000:]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self, kill: bool = False) -> None:
        if self.proc and self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
            self.proc.wait(30)

    def metric(self, name: str, labels: str = "") -> float:
        """Sum of a metric's samples whose label text contains `labels`."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and (line[len(name)] in " {") and labels in line:
                total += float(line.rsplit(" ", 1)[1])
        return total


@pytest.fixture(scope="session")
def operator(
    cluster: DevCluster, prometheus: DevPrometheus, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    op = Operator(cluster, prometheus, tmp_path_factory.mktemp("operator")).start()
    try:
        yield op
    finally:
        op.stop()


@pytest.fixture
def k(cluster: DevCluster) -> Iterator[Kubectl]:
    """kubectl bound to a fresh namespace, deleted afterwards."""
    ns = f"t-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", ns)
    try:
        yield Kubectl(cluster, ns)
    finally:
        # force-delete the pods so the next test finds the capacity free, then let the namespace go
        kinds = "rljobs,deployments,statefulsets,pods"
        cluster.kubectl("delete", "-n", ns, kinds, "--all", "--grace-period=0", "--force", check=False)
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
