"""`rlop plan` on the README's example, and stepping through time with its state."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from rlop.whatif import PlanInputError, what_if

CPU_POOL = {"rlop.dev/cpu-pool": "true"}

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
        {"name": "cpu-0", "cpu": 16, "memory": "64Gi", "labels": CPU_POOL, "utilization": 0.2, "sandboxPods": 2},
        {"name": "cpu-1", "cpu": 16, "memory": "64Gi", "labels": CPU_POOL, "utilization": 0.9, "sandboxPods": 2},
        {"name": "cpu-2", "cpu": 16, "memory": "64Gi", "labels": CPU_POOL},  # no data: not harvestable
        {"name": "gpu-0", "cpu": 64, "memory": "64Gi", "utilization": 0.0},  # not in the nodeSelector
    ]
    state = {"pools": {"sandbox": {"desired": 4}}}
    out = what_if(example(), {"sandbox": [16]}, state, T0, nodes)
    assert out["pools"]["sandbox"]["desired"] == 4
    assert out["evictions"] == []  # drained first (drainSeconds 30), evicted in a later pass
    assert {e["pod"] for e in out["draining"]} == {"grpo-math-sandbox-cpu-1-0", "grpo-math-sandbox-cpu-1-1"}
    assert "node cpu-1 is busy" in out["draining"][0]["reason"]
    assert set(out["placement"]) == {"cpu-0"} and len(out["placement"]["cpu-0"]) == 4
    assert out["created"] == out["placement"]["cpu-0"][2:]
    assert out["rooms"]["cpu-1"]["harvestCores"] == 0.5 and out["rooms"]["cpu-1"]["ceilingCores"] < 0.5


def plan(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rlop", "plan", "-f", str(ROOT / "examples/rljob.yaml"), *args],
                          capture_output=True, text=True, input=stdin)  # fmt: skip


def test_its_whole_output_chains_as_state_and_dates_the_previous_pass(tmp_path: Path) -> None:
    metrics, state = tmp_path / "m.json", tmp_path / "s.json"
    metrics.write_text(json.dumps({"rollout": [130]}))
    first = plan("--metrics", str(metrics), "--now", "2026-12-01T00:00:00")  # no zone: UTC
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["now"] == "2026-12-01T00:00:00Z"
    state.write_text(first.stdout)
    metrics.write_text(json.dumps({"rollout": [None]}))  # an outage: the history ages from the previous pass
    second = plan("--metrics", str(metrics), "--state", str(state), "--now", "2026-12-01T00:00:15Z")
    assert second.returncode == 0, second.stderr
    rec = json.loads(second.stdout)["state"]["pools"]["rollout"]["recommendations"]
    assert rec == [{"replicas": 17, "until": "2026-12-01T00:00:00Z"}]


def test_bad_input_gets_one_line(tmp_path: Path) -> None:
    metrics = tmp_path / "m.json"
    for given, error in (
        ({"rollot": [1]}, "'rollot' is not an autoscaled pool"),
        ({"rollout": [1, 2]}, "--metrics.rollout: 2 values for 1 metrics"),
        ({"rollout": ["x"]}, "is not a number or null"),
    ):
        metrics.write_text(json.dumps(given))
        out = plan("--metrics", str(metrics), "--now", "0")
        assert out.returncode == 2 and out.stderr.count("\n") == 1 and error in out.stderr, out.stderr
    out = plan("--now", "1764547200000")
    assert out.returncode == 2 and "milliseconds" in out.stderr and out.stderr.count("\n") == 1
    bad_state = tmp_path / "s.json"
    bad_state.write_text(json.dumps({"pools": {"rollout": {"desired": "many"}}}))
    out = plan("--state", str(bad_state))
    assert out.returncode == 2 and "--state: pools.rollout.desired" in out.stderr and out.stderr.count("\n") == 1


def test_nan_and_infinity_are_no_data(tmp_path: Path) -> None:
    metrics = tmp_path / "m.json"
    for literal in ("NaN", "Infinity", "-Infinity"):
        metrics.write_text('{"rollout": [' + literal + "]}")
        out = plan("--metrics", str(metrics), "--now", "0")
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["pools"]["rollout"]["desired"] == 1
        cond = next(c for c in result["conditions"] if c["type"] == "MetricsAvailable")
        assert cond["status"] == "False" and "rollout" in cond["message"]


def test_the_reason_and_metric_are_this_pass_s_even_when_the_decision_stays() -> None:
    first = what_if(example(), {"rollout": [8]}, None, T0)
    again = what_if(example(), {"rollout": [8.4]}, first, T0 + timedelta(seconds=5))
    assert again["pools"]["rollout"]["metric"] == 8.4 and "metric 8.4" in again["pools"]["rollout"]["reason"]


def test_a_missing_metric_is_reported_while_another_scales_up() -> None:
    job = example()
    metrics = job["spec"]["pools"]["rollout"]["autoscale"]["metrics"]
    metrics.append({"query": "sum(other)", "target": {"type": "AverageValue", "value": 8}})
    out = what_if(job, {"rollout": [64]}, None, T0)  # the second value is not given
    assert out["pools"]["rollout"]["desired"] == 3
    cond = next(c for c in out["conditions"] if c["type"] == "MetricsAvailable")
    assert cond["status"] == "False" and "metric 1: no value given (decided on its other metrics)" in cond["message"]


def test_replicas_and_ready_pods_can_be_given() -> None:
    out = what_if(example(), {"reward": [40]}, None, T0, replicas={"reward": 2})
    assert out["pools"]["reward"]["current"] == 2
    # AverageValue divides by the pods that exist (HPA's status.replicas): 8.4 / (8 x 1) is within tolerance
    # of 1 pod, so it wants 1; counting the 2 replicas it would want ceil(8.4 / 8) = 2
    out = what_if(example(), {"reward": [8.4]}, None, T0, replicas={"reward": 2}, pods={"reward": {"existing": 1}})
    assert "wants 1" in out["pools"]["reward"]["reason"]
    assert out["pools"]["reward"]["desired"] == 2  # the first pass seeds the window with the current 2
    out = what_if(example(), {"reward": [8.4]}, None, T0, replicas={"reward": 2})
    assert "wants 2" in out["pools"]["reward"]["reason"]
    for bad in ({"rewrd": {"ready": 1}}, {"reward": {"ready": -1}}, {"reward": {"running": 1}}):
        with pytest.raises(PlanInputError):
            what_if(example(), {}, None, T0, pods=bad)


def test_nodes_are_read_as_the_operator_reads_node_objects() -> None:
    base = {"cpu": 16, "memory": "64Gi", "labels": CPU_POOL, "utilization": 0.1}
    nodes = [
        {"name": "not-ready", **base, "ready": False},
        {"name": "cordoned", **base, "unschedulable": True},
        {"name": "tainted", **base, "taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]},
        {"name": "ok", **base},
    ]
    out = what_if(example(), {"sandbox": [16]}, None, T0, nodes)
    assert set(out["placement"]) == {"ok"}
    n = {"name": "n", "cpu": 4, "memory": "1Gi"}
    for bad, error in (
        ({**n, "utilisation": 0.5}, "--nodes[n].utilisation: Extra inputs are not permitted (known: "),
        ({**n, "utilization": 1.5}, "--nodes[n].utilization: Input should be less than or equal to 1"),
        ({**n, "utilization": "0.5"}, "--nodes[n].utilization: Input should be a valid number"),
        ({"name": "n", "memory": "1Gi"}, "--nodes[n].cpu: Field required"),
        ({**n, "cpu": "-8"}, "--nodes[n].cpu: Value error, '-8' is negative"),
        ({**n, "requests": {"cpu": "lots"}}, "--nodes[n].requests.cpu: Value error, not a quantity"),
        ({**n, "ready": "false"}, "--nodes[n].ready: Input should be a valid boolean"),
        ({**n, "unschedulable": "false"}, "--nodes[n].unschedulable: Input should be a valid boolean"),
        ({**n, "taints": "x"}, "--nodes[n].taints: Input should be a valid list"),
        ({**n, "taints": [{"key": "a"}]}, "--nodes[n].taints[0].effect: Field required"),
        ({**n, "sandboxPods": -1}, "--nodes[n].sandboxPods: Input should be greater than or equal to 0"),
        ({**n, "sandboxPods": [{"nam": "x"}]}, "--nodes[n].sandboxPods[0].name: Field required"),
        ({**n, "otherSandboxPods": [{"name": "x"}]}, "--nodes[n].otherSandboxPods[x]: 'job' is required"),
        (3, "--nodes[0]: Input should be a valid dictionary"),
    ):
        with pytest.raises(PlanInputError) as got:
            what_if(example(), {}, None, T0, [bad])  # type: ignore[list-item]
        assert str(got.value).startswith(error)


@pytest.mark.parametrize(
    ("inputs", "error"),
    [
        ({"job_doc": [1]}, "-f: want a JSON object, got list"),
        ({"metrics": [1]}, "--metrics: want a JSON object, got list"),
        ({"state": [1]}, "--state: want a JSON object, got list"),
        ({"replicas": [1]}, "--replicas: want a JSON object, got list"),
        ({"pods": [1]}, "--pods: want a JSON object, got list"),
        ({"pods": {"reward": 3}}, "--pods.reward: want {'existing': n, 'ready': m}, got 3"),
        ({"nodes": {"cpu-0": {}}}, "--nodes: want a list of nodes, got dict"),
    ],
)
def test_inputs_of_the_wrong_shape_get_one_line(inputs: dict, error: str) -> None:  # type: ignore[type-arg]
    args = {"job_doc": example(), "metrics": {}, "state": None, "now": T0, **inputs}
    with pytest.raises(PlanInputError, match="^" + error.replace("[", r"\[").replace("{", r"\{") + "$"):
        what_if(**args)


def test_running_sandbox_pods_are_measured_and_other_jobs_pods_share_the_utilization() -> None:
    """As the operator sees them: a pod running for a while is in the measured utilization (its load is not
    other tenants' load), a pod just started is not yet; another job's harvested pods likewise."""
    node = {"name": "cpu-0", "cpu": 16, "memory": "64Gi", "labels": CPU_POOL, "utilization": 0.5}

    def place(**extra: object) -> float:
        out = what_if(example(), {"sandbox": [0]}, None, T0, [{**node, **extra}])
        return float(out["rooms"]["cpu-0"]["placeCores"])

    alone = place()
    settled = place(sandboxPods=2)
    fresh = place(sandboxPods=[{"name": "grpo-math-sandbox-a", "since": T0.isoformat()},
                               {"name": "grpo-math-sandbox-b", "since": T0.isoformat()}])  # fmt: skip
    assert settled > alone and fresh == alone  # a settled pod's load is its own, not other tenants'
    other = [{"name": "o-1", "job": "other", "cpu": "1", "memory": "1Gi"}]
    assert place(otherSandboxPods=other) > place(requests={"cpu": "1", "memory": "1Gi"})


def test_now_cannot_go_back_before_the_chained_state() -> None:
    out = what_if(example(), {"rollout": [130]}, None, T0)
    with pytest.raises(PlanInputError, match="is before the state's own now"):
        what_if(example(), {"rollout": [130]}, out, T0 - timedelta(seconds=1))
