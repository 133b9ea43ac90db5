"""An RLJob on the real local control plane: pools run, status tells the truth, edits roll, delete cleans."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Kubectl, Operator, wait_for

pytestmark = pytest.mark.cluster


def rljob(name: str = "grpo", trainer_gpus: int = 2, trainers: int = 2, **extra: Any) -> dict[str, Any]:
    def tpl(name: str, **res: Any) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": name, "image": "rlop-workload:dev", "resources": res}]}}

    pools = {
        "trainer": {
            "replicas": trainers,
            "template": tpl("trainer", limits={"nvidia.com/gpu": trainer_gpus}),
        },
        "rollout": {"replicas": 2, "template": tpl("rollout", requests={"cpu": "1"})},
        "reward": {"replicas": 1, "template": tpl("reward", requests={"cpu": "1"})},
        "sandbox": {
            "replicas": 3,
            "placement": {"strategy": "default"},
            "template": tpl("sandbox", requests={"cpu": "500m", "memory": "256Mi"}),
        },
    }
    pools.update(extra)
    return {
        "apiVersion": "rlop.dev/v1alpha1",
        "kind": "RLJob",
        "metadata": {"name": name},
        "spec": {"pools": pools},
    }


def status(k: Kubectl, name: str = "grpo") -> dict[str, Any]:
    return (k.get("rljob", name) or {}).get("status", {})


def condition(k: Kubectl, type_: str, name: str = "grpo") -> dict[str, Any]:
    return next((c for c in status(k, name).get("conditions", []) if c["type"] == type_), {})


def running(k: Kubectl, pool: str) -> list[dict[str, Any]]:
    pods = k.items("pods", f"rlop.dev/pool={pool}")
    return [p for p in pods if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")]


def test_crd_is_served(k: Kubectl) -> None:
    out = wait_for(lambda: k("explain", "rljob.spec.pools.rollout.autoscale", check=False).stdout, 60,
                   "the CRD's OpenAPI to be published")  # fmt: skip
    assert "maxReplicas" in out
    assert "rljobs" in k("api-resources", "--api-group=rlop.dev").stdout


def test_every_pool_runs_and_status_is_correct(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: status(k).get("phase") == "Running", 60, "phase Running")
    st = status(k)
    assert st["observedGeneration"] == 1
    for pool, n in {"trainer": 2, "rollout": 2, "reward": 1, "sandbox": 3}.items():
        assert st["pools"][pool] == {**st["pools"][pool], "desired": n, "ready": n, "replicas": f"{n}/{n}"}
        assert len(running(k, pool)) == n
    assert condition(k, "Ready")["status"] == "True"
    assert condition(k, "GangScheduled")["status"] == "True"
    trainer = running(k, "trainer")[0]
    env = {e["name"]: e.get("value") for e in trainer["spec"]["containers"][0]["env"]}
    assert env["RLOP_TRAINER_ADDR"] == f"grpo-trainer-0.grpo-trainer.{k.ns}.svc:29500"
    assert env["RLOP_REWARD_URL"] == f"http://grpo-reward.{k.ns}.svc:8000"
    assert k.get("service", "grpo-trainer")["spec"]["clusterIP"] == "None"
    reasons = {e["reason"] for e in k.events("grpo")}
    assert {"Created", "GangReleased", "Ready"} <= reasons
    printed = k("get", "rljob", "grpo").stdout
    assert "Running" in printed and "2/2" in printed and "3/3" in printed


def test_a_no_op_reconcile_writes_nothing(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: status(k).get("phase") == "Running", 60, "phase Running")

    def versions() -> dict[str, str]:
        objs = [k.get("rljob", "grpo"), *k.items("statefulsets,deployments,services")]
        return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in objs}

    wait_for(lambda: (v := versions()) == wait_for(versions) and v, 30, "children to settle")
    before, writes = versions(), operator.metric("rlop_api_writes_total")
    events = len(k.events("grpo"))
    wait_for(lambda: operator.metric("rlop_reconcile_duration_seconds_count") > 0, 10)
    passes = operator.metric("rlop_reconcile_duration_seconds_count")
    wait_for(lambda: operator.metric("rlop_reconcile_duration_seconds_count") >= passes + 3, 30, "3 passes")
    assert versions() == before
    assert operator.metric("rlop_api_writes_total") == writes
    assert len(k.events("grpo")) == events


def test_a_trainer_that_cannot_fit_stays_gated_and_says_why(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob(trainers=5, trainer_gpus=4))  # 20 GPUs wanted, the cluster has 16
    cond = wait_for(lambda: condition(k, "GangScheduled").get("reason") == "InsufficientCapacity"
                    and condition(k, "GangScheduled"), 60, "InsufficientCapacity")  # fmt: skip
    assert cond["status"] == "False"
    assert "short of nvidia.com/gpu 4" in cond["message"]
    pods = k.items("pods", "rlop.dev/pool=trainer")
    assert len(pods) == 5
    assert all(p["spec"].get("schedulingGates") and not p["spec"].get("nodeName") for p in pods)
    assert status(k)["phase"] == "Pending"
    assert any(e["reason"] == "InsufficientCapacity" and e["type"] == "Warning" for e in k.events("grpo"))
    # shrink the gang so it fits: all ranks start together
    k("patch", "rljob", "grpo", "--type=merge", "-p", '{"spec":{"pools":{"trainer":{"replicas":3}}}}')
    wait_for(lambda: len(running(k, "trainer")) == 3, 60, "3 trainers running")
    wait_for(lambda: condition(k, "GangScheduled")["status"] == "True", 10, "GangScheduled=True")  # next pass
    assert not any(p["spec"].get("schedulingGates") for p in k.items("pods", "rlop.dev/pool=trainer"))


def test_editing_replicas_scales_and_template_edits_restart_the_gang(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: status(k).get("phase") == "Running", 60, "phase Running")
    k("patch", "rljob", "grpo", "--type=merge", "-p", '{"spec":{"pools":{"rollout":{"replicas":4}}}}')
    wait_for(lambda: len(running(k, "rollout")) == 4, 60, "4 rollout pods")
    wait_for(lambda: status(k)["pools"]["rollout"]["replicas"] == "4/4", 30)
    assert status(k)["observedGeneration"] == 2

    old = {p["metadata"]["uid"] for p in running(k, "trainer")}
    patch = '{"spec":{"pools":{"trainer":{"template":{"metadata":{"labels":{"v":"2"}}}}}}}'
    k("patch", "rljob", "grpo", "--type=merge", "-p", patch)

    def restarted() -> bool:
        pods = running(k, "trainer")
        return len(pods) == 2 and all(p["metadata"]["labels"].get("v") == "2" for p in pods)

    wait_for(restarted, 60, "gang restarted on the new template")
    assert not old & {p["metadata"]["uid"] for p in running(k, "trainer")}
    assert any(e["reason"] == "GangRestart" for e in k.events("grpo"))


def test_suspend_scales_to_zero_and_resume_brings_it_back(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: status(k).get("phase") == "Running", 60, "phase Running")
    k("patch", "rljob", "grpo", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_for(lambda: status(k).get("phase") == "Suspended" and not k.items("pods"), 60, "suspended, no pods")
    k("patch", "rljob", "grpo", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    wait_for(lambda: status(k).get("phase") == "Running", 60, "running again")


def test_removing_a_pool_deletes_its_children(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: k.get("deployment", "grpo-reward"), 60, "reward deployment")
    job = rljob()
    del job["spec"]["pools"]["reward"]
    text = __import__("yaml").safe_dump(job)
    # the operator writes status concurrently: a Conflict is retried, as any client would
    wait_for(lambda: k("replace", "-f", "-", stdin=text, check=False).returncode == 0, 30, "replace accepted")
    wait_for(lambda: k.get("deployment", "grpo-reward") is None and k.get("service", "grpo-reward") is None,
             60, "reward children deleted")  # fmt: skip


def test_deleting_the_rljob_garbage_collects_everything(k: Kubectl, operator: Operator) -> None:
    k.apply(rljob())
    wait_for(lambda: status(k).get("phase") == "Running", 60, "phase Running")
    assert not k.get("rljob", "grpo")["metadata"].get("finalizers")
    k("delete", "rljob", "grpo", "--wait=true", "--timeout=30s")
    wait_for(lambda: not k.items("pods,statefulsets,deployments,services"), 60, "children gone")
