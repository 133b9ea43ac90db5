"""A local control plane serving kube-scheduler's native gangs (the alpha GenericWorkload and GangScheduling gates,
scheduling.k8s.io/v1alpha2): its own session (`make test` runs it after the main suite: never two clusters at
once), the operator detecting the API at start (--gang-scheduler=auto, the default)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from rlop.dev.cluster import DevCluster, default_nodes
from rlop.dev.operator_process import OperatorProcess
from tests.conftest import Kubectl


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    c = DevCluster(tmp_path_factory.mktemp("cluster"), native_gangs=True).start(default_nodes(gpu_nodes=2, cpu_nodes=1))
    try:
        c.install_rlop()
        yield c
    finally:
        c.stop()


def operator(cluster: DevCluster, workdir: Path, *flags: str) -> OperatorProcess:
    """No Prometheus here: nothing is autoscaled (its metrics are unavailable, so nothing scales)."""
    return OperatorProcess(cluster, "http://127.0.0.1:9", workdir, 1.0, *flags).start()


@pytest.fixture
def k(cluster: DevCluster) -> Iterator[Kubectl]:
    ns = f"n-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", ns)
    try:
        yield Kubectl(cluster, ns)
    finally:
        cluster.kubectl("delete", "-n", ns, "rljobs,statefulsets,pods", "--all", "--grace-period=0", "--force",
                        check=False)  # fmt: skip
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
