"""`kubectl rlop` against the real control plane, and the demo from the README (local mode)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rlop.dev.cluster import DevCluster
from tests.conftest import ROOT, Kubectl, Operator, wait_for
from tests.integration.test_lifecycle import rljob, status

pytestmark = pytest.mark.cluster


def plugin(cluster: DevCluster, *args: str) -> str:
    env = {**os.environ, **cluster.env()}
    out = subprocess.run([str(Path(sys.executable).parent / "kubectl-rlop"), *args], capture_output=True,
                         text=True, env=env, timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_kubectl_rlop_top_and_explain(k: Kubectl, cluster: DevCluster, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: status(k).get("phase") == "Running", 60, "phase Running")
    top = plugin(cluster, "top", "-n", k.ns)
    assert f"{k.ns}/grpo" in top and "rollout" in top and "trainer" in top
    explain = plugin(cluster, "explain", "grpo", "-n", k.ns)
    assert "Running" in explain and "GangScheduled" in explain and "GangReleased" in explain


def test_the_demo_runs_and_pools_scale(tmp_path: Path) -> None:
    env = {**os.environ, "RLOP_DEMO_LOCAL": "1"}
    out = subprocess.run([sys.executable, "-m", "rlop", "demo", "--duration", "100", "--dir", str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout
    assert "phase: burst of prompts" in text and "phase: idle" in text
    assert "ScaledUp         rollout" in text, text[-3000:]
    assert "SandboxPlaced" in text


def test_rlop_run_names_a_port_that_is_taken(operator: Operator) -> None:
    """A second operator on the same machine: a clear refusal naming the flag, not a traceback."""
    taken = operator.metrics_port  # the session's operator listens there
    out = subprocess.run([sys.executable, "-m", "rlop", "run", f"--metrics-port={taken}"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert out.returncode == 2 and f"port {taken} (--metrics-port) is taken" in out.stderr, out.stderr
