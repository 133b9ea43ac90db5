"""`rlop plan` on the README's example, and stepping through time with its state."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from rlop.whatif import what_if

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 12, 1, tzinfo=UTC)


def example() -> dict:  # type: ignore[type-arg]
    return yaml.safe_load((ROOT / "examples" / "rljob.yaml").read_text())  # type: ignore[no-any-return]


def test_cli_prints_the_decision(tmp_path: Path) -> None:
    metrics = tmp_path / "m.json"
    metrics.write_text(json.dumps({"rollout": [130], "reward": 10, "sandbox": [40]}))
    out = subprocess.run(
        [sys.executable, "-m", "rlop", "plan", "-f", str(ROOT / "examples/rljob.yaml"), "--metrics", str(metrics),
         "--now", "2026-12-01T00:00:00Z"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    pools = json.loads(out.stdout)["pools"]
    assert pools["rollout"]["desired"] == 3  # wants ceil(130/16)=9; scaleUp policy: +2 per 15 s
    assert "limited by the scaleUp policies" in pools["rollout"]["reason"]
    assert pools["trainer"]["desired"] == 2


def test_state_chains_and_the_scale_down_window_holds() -> None:
    out = what_if(example(), {"rollout": [130]}, None, T0)
    for i in range(1, 6):  # climb at +2 per 15 s
        out = what_if(example(), {"rollout": [130]}, out["state"], T0 + timedelta(seconds=15 * i))
    assert out["pools"]["rollout"]["desired"] == 4  # maxReplicas
    t = T0 + timedelta(seconds=90)
    out = what_if(example(), {"rollout": [0]}, out["state"], t)
    assert out["pools"]["rollout"]["desired"] == 4  # scaleDown window: 60 s
    out = what_if(example(), {"rollout": [0]}, out["state"], t + timedelta(seconds=61))
    assert out["pools"]["rollout"]["desired"] == 2  # then at most 50 % per 30 s


def test_missing_metrics_hold() -> None:
    first = what_if(example(), {"rollout": [130]}, None, T0)
    out = what_if(example(), {"rollout": [None]}, first["state"], T0 + timedelta(seconds=300))
    assert out["pools"]["rollout"]["desired"] == 3
    cond = next(c for c in out["conditions"] if c["type"] == "MetricsAvailable")
    assert cond["status"] == "False"


def test_placement_and_evictions_for_given_nodes() -> None:
    nodes = [
        {"name": "cpu-0", "cpu": 16, "labels": {"rlop.dev/cpu-pool": "true"}, "utilization": 0.2, "sandboxPods": 2},
        {"name": "cpu-1", "cpu": 16, "labels": {"rlop.dev/cpu-pool": "true"}, "utilization": 0.9, "sandboxPods": 2},
        {"name": "cpu-2", "cpu": 16, "labels": {"rlop.dev/cpu-pool": "true"}},  # no data: not harvestable
        {"name": "gpu-0", "cpu": 64, "utilization": 0.0},  # not in the nodeSelector
    ]
    state = {"pools": {"sandbox": {"desired": 4}}}
    out = what_if(example(), {"sandbox": [16]}, state, T0, nodes)
    assert out["pools"]["sandbox"]["desired"] == 4
    assert {e["pod"] for e in out["evictions"]} == {"grpo-math-sandbox-cpu-1-0", "grpo-math-sandbox-cpu-1-1"}
    assert "node cpu-1 is busy" in out["evictions"][0]["reason"]
    assert set(out["placement"]) == {"cpu-0"} and len(out["placement"]["cpu-0"]) == 4
