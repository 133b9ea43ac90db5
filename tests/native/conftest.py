"""A local control plane serving kube-scheduler's native gangs (the alpha GenericWorkload and GangScheduling gates,
scheduling.k8s.io/v1alpha2): its own session (`make test` runs it after the main suite: never two clusters at
once), the operator detecting the API at start (--gang-scheduler=auto, the default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rlop.dev.cluster import DevCluster, default_nodes
from rlop.dev.operator_process import OperatorProcess


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
