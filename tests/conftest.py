"""Shared fixtures. Integration tests run against the real local control plane (never skipped: missing
binaries are an error, run `make binaries`) and a real operator process."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from rlop.dev.cluster import DevCluster, default_nodes
from rlop.dev.operator_process import OperatorProcess as Operator
from rlop.dev.prometheus import DevPrometheus, Exporter

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
        c.install_rlop()
        yield c
    finally:
        c.stop()


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


@pytest.fixture(scope="session")
def operator(
    cluster: DevCluster, prometheus: DevPrometheus, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    op = Operator(cluster, prometheus.url, tmp_path_factory.mktemp("operator")).start()
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


@pytest.fixture
def solo_paused(operator: Operator) -> Iterator[None]:
    """The session's operator (no leader election) steps aside while replicas elect a leader."""
    operator.stop()
    try:
        yield
    finally:
        operator.start()
