"""Two operator replicas with leader election: one acts; kill -9 it and the other takes over, once."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from rlop.dev.cluster import DevCluster
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.prometheus import DevPrometheus
from tests.conftest import Kubectl, wait_for
from tests.integration.test_lifecycle import rljob, status

pytestmark = pytest.mark.cluster


def holder(cluster: DevCluster) -> str | None:
    out = cluster.kubectl("-n", "default", "get", "lease", "rlop-leader", "-o", "json", check=False)
    return json.loads(out.stdout)["spec"].get("holderIdentity") if out.returncode == 0 else None


def replica(cluster: DevCluster, prometheus: DevPrometheus, tmp: Path, name: str) -> OperatorProcess:
    args = ("--leader-election", "--lease-namespace=default", f"--identity={name}")
    (tmp / name).mkdir()
    return OperatorProcess(cluster, prometheus.url, tmp / name, 1.0, *args).start()


def test_one_replica_acts_and_a_killed_leader_hands_over(
    k: Kubectl, cluster: DevCluster, prometheus: DevPrometheus, solo_paused: None, tmp_path: Path
) -> None:
    a = replica(cluster, prometheus, tmp_path, "replica-a")
    b = None
    try:
        wait_for(lambda: holder(cluster) == "replica-a", 30, "replica-a to lead")
        b = replica(cluster, prometheus, tmp_path, "replica-b")
        k.apply(rljob())
        wait_for(lambda: status(k).get("phase") == "Running", 60, "Running")
        time.sleep(3)
        assert b.metric("rlop_api_writes_total") == 0
        assert b.metric("rlop_reconcile_duration_seconds_count") == 0  # a standby only watches

        a.stop(kill=True)
        killed = time.monotonic()
        wait_for(lambda: holder(cluster) == "replica-b", 40, "replica-b to take over")
        handover = time.monotonic() - killed
        k("patch", "rljob", "grpo", "--type=merge", "-p", '{"spec":{"pools":{"rollout":{"replicas":3}}}}')
        wait_for(lambda: status(k).get("pools", {}).get("rollout", {}).get("ready") == 3, 60, "b acts")
        created = Counter(e["message"] for e in k.events("grpo") if e["reason"] == "Created")
        assert created and max(created.values()) == 1, created  # nothing was created twice
        assert handover < 30, f"handover took {handover:.1f}s"
    finally:
        a.stop(kill=True)
        if b is not None:
            b.stop()
    cluster.kubectl("-n", "default", "delete", "lease", "rlop-leader", check=False)
