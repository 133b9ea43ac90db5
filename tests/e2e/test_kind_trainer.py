"""Trainer gangs that survive failure, on real pods: a rank's container killed restarts the whole gang,
which resumes from its checkpoint; killed past maxRestarts the job is Failed; a gang whose ranks all exit 0
makes the job Succeeded. The reference trainer steps on its own clock (RLOP_STEP_SECONDS) and keeps its
checkpoint in the GPU workers' shared directory."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from rlop.dev.kind import NODE_SHARED_DIR, SHARED_DIR, KindCluster
from tests.conftest import Kubectl, wait_for

pytestmark = pytest.mark.kind
NS = "e2e-trainer"


@pytest.fixture(scope="module")
def k(kind: KindCluster) -> Iterator[Kubectl]:
    kind.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=180s")
    kind.kubectl("create", "namespace", NS)
    try:
        yield Kubectl(kind, NS)  # type: ignore[arg-type]
    finally:
        kind.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)


def rljob(name: str, max_restarts: int = 2, **env: str) -> dict[str, Any]:
    """Two CPU-only ranks on the GPU workers (they share the checkpoint directory), stepping every second."""
    ckpt = SHARED_DIR / f"ckpt-{name}"
    shutil.rmtree(ckpt, ignore_errors=True)
    ckpt.mkdir(parents=True)
    ckpt.chmod(0o1777)  # the workload runs as nobody
    volume = {"path": f"{NODE_SHARED_DIR}/ckpt-{name}", "type": "Directory"}
    res = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
    variables = [{"name": k, "value": v} for k, v in {"RLOP_STEP_SECONDS": "1", **env}.items()]
    trainer = {"name": "trainer", "image": "rlop-workload:dev", "imagePullPolicy": "Never", "args": ["trainer"],
               "env": variables, "resources": res}  # fmt: skip
    rollout = {"name": "rollout", "image": "rlop-workload:dev", "imagePullPolicy": "Never", "args": ["rollout"],
               "resources": res}  # fmt: skip
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": name}, "spec": {"pools": {
        "trainer": {"replicas": 2, "failurePolicy": {"maxRestarts": max_restarts, "backoffSeconds": 2},
                    "checkpoint": {"dir": "/checkpoints", "volume": {"hostPath": volume}},
                    "template": {"spec": {"nodeSelector": {"rlop.dev/gpu-pool": "true"}, "containers": [trainer]}}},
        "rollout": {"replicas": 1, "template": {"spec": {"containers": [rollout]}}}}}}  # fmt: skip


def job(k: Kubectl, name: str) -> dict[str, Any]:
    return dict(k.get("rljob", name) or {})


def running_gang(k: Kubectl, name: str, restart: int) -> dict[int, dict[str, Any]]:
    """The gang's pods by rank once both run the given restart's template, else {}."""

    def current(p: dict[str, Any]) -> bool:
        up = all(s.get("state", {}).get("running") for s in p["status"].get("containerStatuses") or [{}])
        mine = p["metadata"]["annotations"].get("rlop.dev/restarts") == str(restart)
        return mine and up and not p["metadata"].get("deletionTimestamp") and p["status"].get("phase") == "Running"

    pods = [p for p in k.items("pods", f"rlop.dev/job={name},rlop.dev/pool=trainer") if current(p)]
    return {int(p["metadata"]["labels"]["apps.kubernetes.io/pod-index"]): p for p in pods} if len(pods) == 2 else {}


def state(kind: KindCluster, pod: dict[str, Any]) -> dict[str, Any]:
    """The trainer rank's own account: step, resumed_from, restart."""
    raw = f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}:8000/proxy/state"
    out = kind.kubectl("get", "--raw", raw, check=False)
    return dict(json.loads(out.stdout)) if out.returncode == 0 else {}


def test_a_killed_rank_restarts_the_whole_gang_which_resumes_from_its_checkpoint(kind: KindCluster, k: Kubectl) -> None:
    k.apply(rljob("gang"))
    gang = wait_for(lambda: running_gang(k, "gang", 0), 180, "the gang running")
    wait_for(lambda: state(kind, gang[0]).get("step", 0) >= 3, 60, "3 steps")
    kind.signal(gang[1], "KILL")  # rank 1's process dies (exit 137): the collective is broken
    wait_for(lambda: (job(k, "gang")["status"].get("trainer") or {}).get("restarts") == 1, 60, "one gang restart")
    died = state(kind, gang[0]).get("step", 0)  # rank 0 is still up until the restart stops it
    failure = job(k, "gang")["status"]["trainer"]["lastFailure"]
    assert (failure["reason"], failure["rank"]) == ("ExitCode", 1) and "code 137" in failure["message"], failure
    again = wait_for(lambda: running_gang(k, "gang", 1), 180, "the whole gang restarted and running")
    assert {p["metadata"]["uid"] for p in again.values()}.isdisjoint(p["metadata"]["uid"] for p in gang.values())
    resumed = wait_for(lambda: state(kind, again[0]) or None, 60, "the restarted rank 0 answering")
    assert resumed["restart"] == 1 and resumed["resumed_from"] >= min(died, 3), (resumed, died)  # not from 0
    wait_for(lambda: state(kind, again[0]).get("step", 0) > resumed["resumed_from"], 60, "steps going on")
    said = {
        r: sum(e.get("count") or 1 for e in k.events("gang") if e["reason"] == r)
        for r in ("RankFailed", "GangReleased")
    }
    assert said == {"RankFailed": 1, "GangReleased": 2}, said


def test_a_gang_killed_past_max_restarts_fails_the_job(kind: KindCluster, k: Kubectl) -> None:
    for restart in (1, 2):  # restart 1 runs (the test above); kill it, then restart 2, and it is over
        gang = wait_for(lambda: running_gang(k, "gang", restart), 180, f"restart {restart} running")  # noqa: B023
        wait_for(lambda: (job(k, "gang")["status"]["trainer"]).get("started"), 30, "its release recorded")
        kind.signal(gang[0], "KILL")
    done = wait_for(lambda: (j := job(k, "gang"))["status"].get("phase") == "Failed" and j, 60, "the job Failed")
    assert done["status"]["trainer"]["restarts"] == 2
    failed = next(c for c in done["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "MaxRestartsExceeded"), failed
    wait_for(lambda: not k.items("pods", "rlop.dev/job=gang"), 120, "every pod of the job gone")
    assert k.get("statefulset", "gang-trainer")["spec"]["replicas"] == 0  # the objects are kept
    assert k.get("deployment", "gang-rollout")["spec"]["replicas"] == 0


def test_a_gang_whose_ranks_all_exit_0_succeeds_the_job(kind: KindCluster, k: Kubectl) -> None:
    k.apply(rljob("finite", RLOP_TRAIN_STEPS="5"))
    done = wait_for(lambda: (j := job(k, "finite")).get("status", {}).get("phase") == "Succeeded" and j, 240,
                    "the job Succeeded")  # fmt: skip
    complete = next(c for c in done["status"]["conditions"] if c["type"] == "Complete")
    assert complete["status"] == "True" and done["status"]["trainer"]["restarts"] == 0
    wait_for(lambda: not k.items("pods", "rlop.dev/job=finite"), 120, "every pod of the job gone")
    assert "Completed" in {e["reason"] for e in k.events("finite")}
    assert json.loads((SHARED_DIR / "ckpt-finite" / "trainer-state.json").read_text())["step"] == 5
