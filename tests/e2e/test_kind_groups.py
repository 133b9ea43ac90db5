"""Multi-node rollout replicas on real pods (issue 32): a rollout pool of 2 nodes per replica across the two
GPU workers, each replica the reference server's real multi-node mode (rank 0 serves only once rank 1 has
connected to RLOP_GROUP_LEADER_ADDRESS; a lost rank ends the other), behind the real sglang-router, loaded
with the trainer's weights. 1 -> 2 groups on load; kill -9 of a worker rank recreates its whole group, which
rejoins the router only at the current version; 2 -> 1 drains a whole group; the reference controller loses
no generation and is served none stale."""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rlop.dev.kind import NODE_SHARED_DIR, SHARED_DIR, KindCluster
from tests.conftest import Kubectl, wait_for

pytestmark = pytest.mark.kind
NS = "e2e-groups"
JOB = "mn"
WAITING = 'sum(vllm:num_requests_waiting{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'


def rljob() -> dict[str, Any]:
    weights = SHARED_DIR / "weights-groups"
    shutil.rmtree(weights, ignore_errors=True)
    weights.mkdir(parents=True)
    weights.chmod(0o1777)  # the workload runs as nobody
    volume = {"hostPath": {"path": f"{NODE_SHARED_DIR}/weights-groups", "type": "Directory"}}
    res = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "256Mi"}}
    scrape = {"annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9400"}}
    gpu = {"nodeSelector": {"rlop.dev/gpu-pool": "true"}}

    def pod(role: str, env: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
        c = {"name": role, "image": "rlop-workload:dev", "imagePullPolicy": "Never", "args": [role],
             "env": [{"name": k, "value": v} for k, v in (env or {}).items()], "resources": res, **extra}  # fmt: skip
        return {"metadata": scrape, "spec": {**gpu, "containers": [c]}}

    engine = pod("rollout", readinessProbe={"httpGet": {"path": "/health", "port": 8000}, "periodSeconds": 1})
    engine["spec"]["containers"][0]["resources"] = {**res, "limits": {**res["limits"], "nvidia.com/gpu": 1}}
    rollout = {
        "nodesPerReplica": 2,
        "autoscale": {"minReplicas": 1, "maxReplicas": 2,
                      "metrics": [{"query": WAITING, "target": {"type": "AverageValue", "value": 4}}],
                      "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0},
                                   "scaleDown": {"stabilizationWindowSeconds": 0}}},
        "weights": {"volume": volume, "maxStaleness": 1},
        "router": {"type": "sglang-router"},
        "drainSeconds": 30,
        "template": engine,
    }  # fmt: skip
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": JOB}, "spec": {"pools": {
        "trainer": {"replicas": 1, "template": pod("trainer", {"RLOP_PUBLISH_SECONDS": "5"})},
        "rollout": rollout,
        "controller": {"template": pod("controller")},
    }}}  # fmt: skip


@pytest.fixture(scope="module")
def k(kind: KindCluster) -> Iterator[Kubectl]:
    kind.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=180s")
    kind.kubectl("create", "namespace", NS)
    kube = Kubectl(kind, NS)  # type: ignore[arg-type]
    kube.apply(rljob())
    try:
        yield kube
    finally:
        kind.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)


def load(kind: KindCluster, prompts_per_s: float) -> None:
    """Set the reference controller's prompt rate (once its pod answers: the first test waits for it)."""

    def told() -> bool:
        body = {"prompts_per_s": prompts_per_s, "checks_per_prompt": 1}
        with contextlib.suppress(RuntimeError):
            kind.post(NS, f"{JOB}-controller", 8000, "/load", body)
            return True
        return False

    wait_for(told, 180, "the RL controller to take its load")


def groups(k: Kubectl) -> dict[int, dict[int, dict[str, Any]]]:
    """The rollout's live pods: group -> rank -> pod."""
    out: dict[int, dict[int, dict[str, Any]]] = {}
    for p in k.items("pods", f"rlop.dev/job={JOB},rlop.dev/pool=rollout"):
        labels = p["metadata"]["labels"]
        if not p["metadata"].get("deletionTimestamp"):
            out.setdefault(int(labels["rlop.dev/group"]), {})[int(labels["rlop.dev/rank"])] = p
    return out


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def served(kind: KindCluster, pod: dict[str, Any]) -> int | None:
    """What a leader says it serves (GET /model_info through the API server's pod proxy; "default": -1)."""
    raw = f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}:8000/proxy/model_info"
    out = kind.kubectl("get", "--raw", raw, check=False)
    if out.returncode != 0:
        return None
    name = str(json.loads(out.stdout).get("weight_version", ""))
    return int(name) if name.isdigit() else -1


def router(kind: KindCluster) -> set[str]:
    with contextlib.suppress(Exception):
        return {
            w["url"] for w in kind.get(kind.service_path(NS, f"{JOB}-rollout-router", 30000, "/workers"))["workers"]
        }
    return set()


def snapshot(kind: KindCluster, k: Kubectl) -> dict[str, Any]:
    """The groups, what each Ready leader serves (asked directly), the trainer's version and the router."""
    now = groups(k)
    st = (k.get("rljob", JOB) or {}).get("status") or {}
    leaders = {g: ranks[0] for g, ranks in now.items() if 0 in ranks and ready(ranks[0])}
    return {
        "groups": now,
        "policy": st.get("policyVersion"),
        "served": {g: served(kind, pod) for g, pod in leaders.items()},
        "leaders": {g: f"http://{pod['status']['podIP']}:8000" for g, pod in leaders.items()},
        "router": router(kind),
        "pool": (st.get("pools") or {}).get("rollout") or {},
    }


def in_sync(kind: KindCluster, k: Kubectl, n: int) -> dict[str, Any] | None:
    """`n` whole groups, every pod Ready, every leader serving the trainer's version and the only workers of
    the router, the status saying n/n groups of 2: the snapshot when it holds, else None."""
    now = snapshot(kind, k)
    whole = len(now["groups"]) == n and all(len(r) == 2 and all(map(ready, r.values())) for r in now["groups"].values())
    if not whole or now["policy"] is None or len(now["leaders"]) != n:
        return None
    if set(now["served"].values()) != {now["policy"]} or now["router"] != set(now["leaders"].values()):
        return None
    return now if now["pool"].get("replicas") == f"{n}/{n}" and now["pool"].get("nodesPerReplica") == 2 else None


def untruths(now: dict[str, Any]) -> list[str]:
    """A Ready leader (or one the router sends to) serving more than maxStaleness (+1 for a checkpoint
    published between rlop's look and this one) behind the trainer, or a worker rank in the router."""
    policy, out = now["policy"] or 0, []
    for g, version in now["served"].items():
        if version is not None and version < policy - 2:
            out.append(f"group {g}'s leader Ready serving v{version}, trainer v{policy}")
    ranks = {f"http://{p['status'].get('podIP')}:8000" for r in now["groups"].values() for i, p in r.items() if i > 0}
    if ranks & now["router"]:
        out.append(f"a worker rank in the router: {ranks & now['router']}")
    return out


def generations(kind: KindCluster) -> dict[str, float]:
    res = kind.promql(f'sum by (outcome) (rlop_controller_generations_total{{namespace="{NS}"}})')
    return {r["metric"]["outcome"]: float(r["value"][1]) for r in res}


def watch(kind: KindCluster, k: Kubectl, lies: list[str], n: int) -> Any:
    def check() -> dict[str, Any] | None:
        now = snapshot(kind, k)
        lies.extend(untruths(now))
        return in_sync(kind, k, n)

    return check


def test_one_group_spans_both_gpu_workers_and_serves_the_trainers_weights(kind: KindCluster, k: Kubectl) -> None:
    load(kind, 1)
    state = wait_for(lambda: in_sync(kind, k, 1), 300, "one group of 2 ranks, its leader current, in the router")
    ranks = state["groups"][0]
    assert len({p["spec"]["nodeName"] for p in ranks.values()}) == 2  # one rank per GPU worker
    env = {e["name"]: e.get("value") for e in ranks[1]["spec"]["containers"][0]["env"]}
    assert env["RLOP_GROUP_LEADER_ADDRESS"] == f"mn-rollout-0-0.mn-rollout-ranks.{NS}.svc:20000"
    assert env["RLOP_GROUP_RANK"] == "1" and env["RLOP_GROUP_SIZE"] == "2"
    gates = [g["conditionType"] for g in ranks[0]["spec"].get("readinessGates", [])]
    assert gates == ["rlop.dev/weights-current"] and not ranks[1]["spec"].get("readinessGates")
    wait_for(lambda: generations(kind).get("served", 0) > 0, 120, "generations through the router")


def test_load_scales_to_2_groups_both_current_behind_the_router(kind: KindCluster, k: Kubectl) -> None:
    before, lies = generations(kind), []  # type: ignore[var-annotated]
    load(kind, 24)
    state = wait_for(watch(kind, k, lies, 2), 300, "2 groups, both leaders current and in the router")
    assert not lies, lies
    released = [e["message"] for e in k.events(JOB) if e["reason"] == "GroupReleased"]
    assert len(released) >= 2, released
    assert all(len({p["spec"]["nodeName"] for p in r.values()}) == 2 for r in state["groups"].values())
    after = generations(kind)
    assert after.get("stale", 0) == before.get("stale", 0) and after.get("lost", 0) == before.get("lost", 0), after


def test_a_killed_worker_rank_recreates_its_whole_group_which_rejoins_only_current(
    kind: KindCluster, k: Kubectl
) -> None:
    state = wait_for(lambda: in_sync(kind, k, 2), 180, "2 groups in sync")
    victim = state["groups"][1]
    old = {p["metadata"]["uid"] for p in victim.values()}
    untouched = {p["metadata"]["uid"] for p in state["groups"][0].values()}
    before, lies = generations(kind), []  # type: ignore[var-annotated]
    kind.signal(victim[1], "KILL")  # rank 1's engine dies: its collective with rank 0 is broken
    wait_for(lambda: any(e["reason"] == "GroupRestart" for e in k.events(JOB)), 60, "a GroupRestart event")
    assert f"http://{victim[0]['status']['podIP']}:8000" not in router(kind)  # out at once

    def rejoined() -> dict[str, Any] | None:
        now = watch(kind, k, lies, 2)()
        fresh = now is not None and not {p["metadata"]["uid"] for p in now["groups"][1].values()} & old
        return now if fresh else None

    wait_for(rejoined, 300, "group 1 recreated whole, its leader current and back in the router")
    assert not lies, lies
    assert {p["metadata"]["uid"] for p in groups(k)[0].values()} == untouched  # the other group was not touched
    event = next(e for e in k.events(JOB) if e["reason"] == "GroupRestart")
    # the cause is the rank whose container exited first: rank 1 killed, or (within the same second, or seen
    # before rank 1's kubelet reported it) rank 0, which exits when its collective breaks
    message = event["message"]
    assert "rollout group 1 lost rank" in message and ("code 137" in message or "rank 0" in message), message
    time.sleep(10)  # the last generations scraped
    after = generations(kind)
    delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("served", "lost", "stale")}
    assert delta["served"] > 0 and delta["lost"] == 0 and delta["stale"] == 0, delta


def test_2_to_1_drains_a_whole_group_and_loses_no_generation(kind: KindCluster, k: Kubectl) -> None:
    wait_for(lambda: in_sync(kind, k, 2), 180, "2 groups in sync")
    before = generations(kind)
    load(kind, 0.5)  # below one group's worth: the autoscaler goes back to 1
    wait_for(lambda: in_sync(kind, k, 1), 300, "one group left, current, alone in the router")
    drained = [e["message"] for e in k.events(JOB) if e["reason"] == "ReplicaDrained"]
    assert drained and not [m for m in drained if "drained for" in m], drained  # left idle, not cut off
    assert any(e["reason"] == "ReplicaDraining" for e in k.events(JOB))
    assert all(len(r) == 2 for r in groups(k).values())  # a whole group went, not one rank of each
    time.sleep(10)
    after = generations(kind)
    delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("served", "retried", "lost", "stale")}
    assert delta["served"] > 0 and delta["lost"] == 0 and delta["stale"] == 0, delta
