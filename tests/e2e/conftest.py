"""The kind tier: rlop installed by its Helm chart on a real kind cluster built offline (hack/kind/),
the example RLJob running the reference workload in real pods. Never skipped: no Docker is an error.
The cluster is deleted at the end of the session unless RLOP_KIND_KEEP=1 (then the next run reuses it)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rlop.dev.kind import KindCluster


@pytest.fixture(scope="session")
def kind() -> Iterator[KindCluster]:
    cluster = KindCluster.up()
    try:
        cluster.install_rlop()
        cluster.remove_demo_jobs()  # `make demo` keeps its cluster and job running
        yield cluster
    finally:
        if os.environ.get("RLOP_KIND_KEEP") != "1":
            KindCluster.down()
