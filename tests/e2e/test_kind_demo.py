"""`make demo` on kind, as a newcomer runs it: the live table redrawn in place, the pools scaling on the
workload's live metrics, sandbox pods leaving the node that gets busy, and the summary at the end."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from rlop.dev import REPO
from rlop.dev.kind import KindCluster

pytestmark = pytest.mark.kind


@pytest.fixture
def demo_output(kind: KindCluster) -> Iterator[str]:
    env = {k: v for k, v in os.environ.items() if k != "RLOP_DEMO_LOCAL"}
    out = subprocess.run([sys.executable, "-m", "rlop", "demo"], capture_output=True, text=True, env=env,
                         timeout=1200, cwd=REPO)  # fmt: skip
    try:
        assert out.returncode == 0, out.stderr[-3000:]
        yield out.stdout
    finally:
        kind.kubectl("delete", "rljob", "grpo-math", "-n", "default", "--ignore-not-found", "--wait=true")


def test_the_demo_runs_on_kind(demo_output: str) -> None:
    text = demo_output
    assert "Building (first run only) and starting the kind cluster" in text
    frames = text.count("\033[H\033[J")
    assert frames > 20, f"the table is redrawn in place: {frames} frames"
    for phase in ("warm-up", "burst of prompts", "verifier-heavy", "idle"):
        assert f"phase: {phase}" in text, phase
    summary = text.rsplit("Summary of default/grpo-math:", 1)
    assert len(summary) == 2, text[-3000:]
    decisions = dict(re.findall(r"(\w+) x(\d+)", summary[1].split("decisions: ", 1)[1].splitlines()[0]))
    assert {"ScaledUp", "ScaledDown", "SandboxPlaced", "SandboxEvicted", "GangReleased"} <= set(decisions), decisions
    assert "ScaledUp         rollout" in text, "the rollout pool scaled up on its queue"
    # the policy version per replica: the trainer's, and what each rollout replica serves
    # (read from upstream SGLang's endpoint: the reference server answers as v0.5.23 does)
    pattern = r"weights: trainer v\d+; grpo-math-rollout-\S+: serves v\d+ \(trainer v\d+; GET /model_info\)"
    assert re.search(pattern, text), text[-3000:]
