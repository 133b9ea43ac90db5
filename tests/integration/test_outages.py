"""Outages of the parts rlop depends on: the operator reconnects by itself and converges."""

from __future__ import annotations

import threading
import time

import pytest

from rlop.dev.cluster import DevCluster
from tests.conftest import Kubectl, Operator, wait_for
from tests.integration.test_lifecycle import rljob, status

pytestmark = pytest.mark.cluster


def running(k: Kubectl, name: str) -> bool:
    return status(k, name).get("phase") == "Running"


def test_api_server_restart_during_reconcile(k: Kubectl, cluster: DevCluster, operator: Operator) -> None:
    k.apply(rljob("before"))
    cluster.restart("kube-apiserver")  # kill -9 while the job is being reconciled
    wait_for(lambda: running(k, "before"), 120, "the job from before the restart")
    k.apply(rljob("after", trainers=1))
    wait_for(lambda: running(k, "after"), 120, "a job created after the restart")
    k("patch", "rljob", "before", "--type=merge", "-p", '{"spec":{"pools":{"rollout":{"replicas":3}}}}')
    wait_for(lambda: status(k, "before")["pools"]["rollout"]["ready"] == 3, 60, "edits after the restart")
    assert operator.proc is not None and operator.proc.poll() is None


def test_a_frozen_etcd_is_survived(k: Kubectl, cluster: DevCluster, operator: Operator) -> None:
    k.apply(rljob("slow"))
    wait_for(lambda: running(k, "slow"), 60, "Running")
    freeze = threading.Thread(target=cluster.pause, args=("etcd", 8))
    freeze.start()
    time.sleep(1)
    k("patch", "rljob", "slow", "--type=merge", "-p", '{"spec":{"pools":{"rollout":{"replicas":4}}}}', check=False)
    freeze.join()
    k("patch", "rljob", "slow", "--type=merge", "-p", '{"spec":{"pools":{"rollout":{"replicas":4}}}}')
    wait_for(lambda: status(k, "slow")["pools"]["rollout"]["ready"] == 4, 90, "converged after etcd resumed")
    assert operator.proc is not None and operator.proc.poll() is None
