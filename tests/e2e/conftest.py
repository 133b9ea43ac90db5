"""The kind tier: rlop installed by its Helm chart on a real kind cluster built offline (hack/kind/),
the example RLJob running the reference workload in real pods. Never skipped: no Docker is an error.
The cluster is deleted at the end of the session unless RLOP_KIND_KEEP=1 (then the next run reuses it)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from rlop.dev.kind import NAMESPACE, KindCluster


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


DIAGNOSTICS = (  # what a failed kind test leaves in its report: enough to tell why from a CI log alone
    ("rljobs", ("get", "rljobs", "-A", "-o", "yaml")),
    ("pods", ("get", "pods", "-A", "-o", "wide")),
    ("events", ("get", "events", "-A", "--sort-by=.lastTimestamp")),
    ("operator log", ("-n", NAMESPACE, "logs", "deploy/rlop", "--tail=200")),
    ("RL controller log", ("-n", "e2e", "logs", "deploy/grpo-math-controller", "--tail=100")),  # lost generations
    ("router log", ("-n", "e2e", "logs", "deploy/grpo-math-rollout-router", "--tail=100")),
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    cluster = item.funcargs.get("kind") if hasattr(item, "funcargs") else None
    if report.when == "call" and report.failed and isinstance(cluster, KindCluster):
        for title, args in DIAGNOSTICS:
            out = cluster.kubectl(*args, check=False)
            report.sections.append((f"kind: {title}", (out.stdout + out.stderr)[-20000:]))
