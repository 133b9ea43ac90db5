"""The mission's own path on real pods, in order: helm install (session fixture), `kubectl apply` of the
example RLJob, every pool running, Prometheus scraping the pods, sandbox hardening and egress policy in
force, autoscaling on the workload's live metrics, harvest eviction from a busy node, kill -9 of the
operator pod mid-scale."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from rlop.api.pools import POOL_NAMES as POOLS
from rlop.dev import REPO
from rlop.dev.kind import NAMESPACE, SHARED_HOST_PLACEMENT, KindCluster, busy_pod
from tests.conftest import Kubectl, wait_for

pytestmark = pytest.mark.kind
NS = "e2e"
JOB = "grpo-math"
EXAMPLE = REPO / "examples" / "rljob.yaml"


@pytest.fixture(scope="module")
def k(kind: KindCluster) -> Iterator[Kubectl]:
    kind.kubectl("delete", "namespace", NS, "--ignore-not-found", "--wait=true", "--timeout=180s")  # a kept cluster
    kind.kubectl("create", "namespace", NS)
    kube = Kubectl(kind, NS)  # type: ignore[arg-type]
    kube.apply(EXAMPLE.read_text())
    try:
        yield kube
    finally:
        kind.kubectl("delete", "namespace", NS, "--wait=true", "--timeout=120s", check=False)


def pods(k: Kubectl, pool: str, running: bool = True) -> list[dict[str, Any]]:
    out = k.items("pods", f"rlop.dev/job={JOB},rlop.dev/pool={pool}")
    live = [p for p in out if not p["metadata"].get("deletionTimestamp")]
    return [p for p in live if p["status"].get("phase") == "Running"] if running else live


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))


def status(k: Kubectl) -> dict[str, Any]:
    return dict((k.get("rljob", JOB) or {}).get("status") or {})


def exec_in(k: Kubectl, pod: str, *cmd: str) -> tuple[int, str]:
    out = k("exec", pod, "--", *cmd, check=False)
    return out.returncode, (out.stdout + out.stderr).strip()


def test_every_pool_runs_in_real_pods(k: Kubectl) -> None:
    want = {"trainer": 2, "rollout": 1, "reward": 1, "sandbox": 2, "controller": 1}
    seen: list[dict[str, int]] = [{}]

    def all_ready() -> bool:
        seen[0] = {pool: len([p for p in pods(k, pool) if ready(p)]) for pool in want}
        return all(seen[0][pool] >= n for pool, n in want.items())

    try:
        wait_for(all_ready, timeout=300, what=f"Running, Ready pods per pool {want}")
    except AssertionError as e:
        raise AssertionError(f"{e}; Ready pods per pool: {seen[0]}; status: {status(k)}") from None
    wait_for(lambda: status(k).get("phase") == "Running", timeout=60, what="phase Running")


def test_trainer_gang_released_together(k: Kubectl) -> None:
    trainers = pods(k, "trainer")
    assert len(trainers) == 2 and all(not p["spec"].get("schedulingGates") for p in trainers)
    started = sorted(p["status"]["startTime"] for p in trainers)
    reasons = [e["reason"] for e in k.events(JOB)]
    assert "GangReleased" in reasons, reasons
    # both ranks bound in the same release: their start times are within a few seconds of each other
    t0, t1 = (time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ")) for s in started)
    assert t1 - t0 < 20, started


def test_prometheus_scrapes_pods_and_kubelets(kind: KindCluster, k: Kubectl) -> None:
    def scraped() -> set[str]:
        """The pools whose pods' own series (labelled by the workload) reach Prometheus."""
        res = kind.promql(f'group by (pool) ({{job="pods",namespace="{NS}",rljob="{JOB}",pool!=""}})')
        return {r["metric"]["pool"] for r in res}

    wait_for(lambda: set(POOLS) <= scraped(), timeout=120, what="every pool scraped through its annotations")
    nodes = {n["metadata"]["name"] for n in json.loads(kind.kubectl("get", "nodes", "-o", "json").stdout)["items"]}

    def utilization() -> dict[str, float]:
        return {r["metric"]["node"]: float(r["value"][1]) for r in kind.promql("rlop:node_cpu_utilization:ratio")}

    util = wait_for(lambda: (u := utilization()) and set(u) == nodes and u, timeout=180,
                    what=f"per-node utilization from kubelet for {nodes}")  # fmt: skip
    assert all(0 <= u <= 1 for u in util.values()), util
    assert len(set(util.values())) > 1, f"every node reports the same utilization: {util}"


def test_sandbox_runs_code_under_forced_hardening(kind: KindCluster, k: Kubectl) -> None:
    pod = pods(k, "sandbox")[0]
    name = pod["metadata"]["name"]
    assert exec_in(k, name, "id", "-u")[1] != "0"
    rc, out = exec_in(k, name, "python", "-c", "open('/probe', 'w')")
    assert rc != 0 and "Read-only file system" in out, out
    rc, out = exec_in(k, name, "ls", "/var/run/secrets/kubernetes.io/serviceaccount")
    assert rc != 0, f"a service-account token is mounted: {out}"
    rc, out = exec_in(k, name, "grep", "NoNewPrivs", "/proc/self/status")
    assert out.split()[-1] == "1", out
    # the RL controller's own call: through the sandbox Service, from the controller pod
    controller = pods(k, "controller")[0]["metadata"]["name"]
    right = {"code": "print(sum(range(10)))", "expected": "45"}
    assert verify(k, controller, right) == {"passed": True, "stdout": "45"}
    assert verify(k, controller, {"code": "print(1)", "expected": "2"})["passed"] is False


VERIFY = (
    "import json, sys, urllib.request as u; req = u.Request(sys.argv[1], sys.argv[2].encode());"
    " print(u.urlopen(req, timeout=30).read().decode())"
)


def verify(k: Kubectl, from_pod: str, body: dict[str, str]) -> dict[str, Any]:
    rc, out = exec_in(k, from_pod, "python", "-c", VERIFY, f"http://{JOB}-sandbox:8000/verify", json.dumps(body))
    assert rc == 0, out
    return dict(json.loads(out))


CONNECT = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print('connected')"


def test_sandbox_egress_is_blocked_by_the_network_policy(kind: KindCluster, k: Kubectl) -> None:
    svc = json.loads(kind.kubectl("-n", NAMESPACE, "get", "svc", "rlop-prometheus", "-o", "json").stdout)
    ip = svc["spec"]["clusterIP"]
    assert k.get("networkpolicy", f"{JOB}-sandbox-egress"), "the egress policy exists"
    controller = pods(k, "controller")[0]["metadata"]["name"]
    assert exec_in(k, controller, "python", "-c", CONNECT, ip, "9090") == (0, "connected"), "control pod reaches it"
    sandbox = pods(k, "sandbox")[0]["metadata"]["name"]
    _, out = wait_for(lambda: (r := exec_in(k, sandbox, "python", "-c", CONNECT, ip, "9090"))[0] != 0 and r,
                       timeout=30, what="sandbox egress refused")  # fmt: skip
    assert "connected" not in out, out


GET = "import sys, urllib.request as u; print(u.urlopen(sys.argv[1], timeout=5).read().decode())"


def http_get(k: Kubectl, url: str) -> Any:
    """GET `url` from inside the cluster (the controller pod), JSON."""
    rc, out = exec_in(k, pods(k, "controller")[0]["metadata"]["name"], "python", "-c", GET, url)
    assert rc == 0, out
    return json.loads(out)


def gate(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod's rlop.dev/weights-current condition ({} before rlop set it)."""
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == "rlop.dev/weights-current"), {})


def served(k: Kubectl) -> dict[str, int]:
    """The version each Running rollout replica says it serves, asked directly (not through rlop), from
    /model_info as upstream SGLang serves it ("default" before rlop's first load: -1)."""
    out = {}
    for pod in pods(k, "rollout"):
        if ip := pod["status"].get("podIP"):
            with contextlib.suppress(AssertionError):
                name = http_get(k, f"http://{ip}:8000/model_info")["weight_version"]
                out[pod["metadata"]["name"]] = int(name) if name.isdigit() else -1
    return out


def router_workers(k: Kubectl) -> set[str]:
    return {w["url"] for w in http_get(k, f"http://{JOB}-rollout-router:30000/workers")["workers"]}


def generations(kind: KindCluster) -> dict[str, float]:
    """The RL controller's generations so far, by outcome (served, retried, lost, stale)."""
    res = kind.promql(f'sum by (outcome) (rlop_controller_generations_total{{namespace="{NS}"}})')
    return {r["metric"]["outcome"]: float(r["value"][1]) for r in res}


def snapshot(k: Kubectl) -> dict[str, Any]:
    """The replicas (the Ready ones), what each serves (asked directly, not through rlop) before and after
    the status is read, the trainer's version, the WeightsInSync condition and the router's workers."""
    live = pods(k, "rollout")
    before = served(k)
    st = status(k)
    return {
        "policy": st.get("policyVersion"),
        "pods": len(live),
        "before": before,
        "served": served(k),
        "ready": {p["metadata"]["name"]: f"http://{p['status']['podIP']}:8000" for p in live if ready(p)},
        "router": router_workers(k),
        "condition": next((c for c in st.get("conditions", []) if c["type"] == "WeightsInSync"), {}),
    }


def in_sync(k: Kubectl, replicas: int) -> dict[str, Any] | None:
    """Every replica Ready, serving the trainer's version, the only ones in the router, and WeightsInSync
    saying so: the snapshot when it holds, else None."""
    now = snapshot(k)
    policy, cond = now["policy"], now["condition"]
    if policy is None or now["pods"] != replicas or len(now["ready"]) != replicas:
        return None
    if set(now["served"].values()) != {policy} or now["router"] != set(now["ready"].values()):
        return None
    return now if cond.get("status") == "True" and f"{replicas} at v{policy}" in cond.get("message", "") else None


def untruths(now: dict[str, Any]) -> list[str]:
    """What a snapshot's WeightsInSync or readiness claims that the replicas contradict. Allowed: maxStaleness
    1, plus one version for a checkpoint published between rlop's look and this one. A replica contradicts
    WeightsInSync only if it was behind both before and after the condition was read (it existed, and had not
    just caught up)."""
    policy, out = now["policy"] or 0, []
    for pod in now["ready"]:
        if pod in now["served"] and now["served"][pod] < policy - 2:
            out.append(f"{pod} Ready serving v{now['served'][pod]}, trainer v{policy}")
    behind = [pod for pod, v in now["served"].items() if v < policy - 2 and now["before"].get(pod, policy) < policy - 2]
    if now["condition"].get("status") == "True" and behind:
        out.append(f"WeightsInSync True ({now['condition'].get('message')}) with {now['served']}, trainer v{policy}")
    return out


def rollout_size(k: Kubectl, n: int | None) -> None:
    """Pin the rollout pool at `n` replicas (None: the example's autoscale again)."""
    example = yaml.safe_load(EXAMPLE.read_text())["spec"]["pools"]["rollout"]["autoscale"]
    auto = {"minReplicas": n, "maxReplicas": n} if n is not None else example
    k("patch", "rljob", JOB, "--type=merge", "-p", json.dumps({"spec": {"pools": {"rollout": {"autoscale": auto}}}}))


def test_rollout_replicas_serve_the_trainers_weights_behind_the_router(kind: KindCluster, k: Kubectl) -> None:
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 4, "checks_per_prompt": 1})
    wait_for(lambda: (status(k).get("policyVersion") or 0) >= 2, timeout=240,
             what="the trainer published checkpoints, status.policyVersion >= 2")  # fmt: skip
    wait_for(lambda: in_sync(k, 1), timeout=120, what="the replica serves the trainer's version")
    pod = pods(k, "rollout")[0]
    assert gate(pod)["status"] == "True" and "serves v" in gate(pod)["message"], gate(pod)
    assert any(g["conditionType"] == "rlop.dev/weights-current" for g in pod["spec"]["readinessGates"])
    # the members Service lists the Ready replicas, each also under its own DNS name (its IP, dashed)
    ip = pod["status"]["podIP"]
    lookup = "import socket as s, sys; print(s.gethostbyname_ex(sys.argv[1])[2], s.gethostbyname(sys.argv[2]))"
    rc, out = exec_in(k, pods(k, "controller")[0]["metadata"]["name"], "python", "-c", lookup,
                      f"{JOB}-rollout-members", f"{ip.replace('.', '-')}.{JOB}-rollout-members")  # fmt: skip
    assert (rc, out) == (0, f"['{ip}'] {ip}"), out
    wait_for(lambda: generations(kind).get("served", 0) > 0, timeout=120, what="generations through the router")


def test_rollout_scaled_1_to_3_mid_run_every_replica_converges_and_none_serves_stale(
    kind: KindCluster, k: Kubectl
) -> None:
    before = generations(kind)
    rollout_size(k, 3)
    try:
        check_scale_up(kind, k, before)
    except BaseException:
        rollout_size(k, None)  # the later tests autoscale it
        raise


def check_scale_up(kind: KindCluster, k: Kubectl, before: dict[str, float]) -> None:
    lies: list[str] = []

    def converged() -> dict[str, Any] | None:
        lies.extend(untruths(snapshot(k)))  # at each step, not only at the end
        return in_sync(k, 3)

    state = wait_for(converged, timeout=300, what="3 replicas, all at the trainer's version, all in the router")
    assert state is not None
    assert not lies, lies
    events = [e["message"] for e in k.events(JOB) if e["reason"] == "RouterAdded"]
    assert len(events) >= 3, events
    time.sleep(10)  # generations spread over the new replicas, scraped
    spread = kind.promql(f'sum by (worker) (smg_worker_cb_outcomes_total{{namespace="{NS}",outcome="success"}})')
    served_by = {r["metric"]["worker"] for r in spread if float(r["value"][1]) > 0}
    assert len(served_by & set(state["ready"].values())) == 3, (served_by, state)  # work for every replica
    after = generations(kind)
    delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("served", "retried", "lost", "stale")}
    assert delta["served"] > 0 and delta["stale"] == 0 and delta["lost"] == 0, delta


def test_rollout_scaled_3_to_1_drains_and_loses_no_request(kind: KindCluster, k: Kubectl) -> None:
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 8, "checks_per_prompt": 1})
    time.sleep(5)  # requests in flight on every replica
    before = generations(kind)
    earlier = {e["message"] for e in k.events(JOB) if e["reason"] == "ReplicaDrained"}
    rollout_size(k, 1)
    try:
        wait_for(lambda: in_sync(k, 1), timeout=240, what="one replica left, current, alone in the router")
    finally:
        rollout_size(k, None)  # min 1: it stays at one replica under this load
    drained = [e["message"] for e in k.events(JOB) if e["reason"] == "ReplicaDrained" and e["message"] not in earlier]
    assert len(drained) >= 2, drained
    assert not [m for m in drained if "drained for" in m], drained  # each left idle (or never served), none cut off
    assert any(e["reason"] == "ReplicaDraining" for e in k.events(JOB))
    time.sleep(10)  # the last generations scraped
    after = generations(kind)
    delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("served", "retried", "lost", "stale")}
    # nothing failed on a replica going away: no generation even had to be retried
    assert delta["served"] > 0 and delta["retried"] == 0 and delta["lost"] == 0 and delta["stale"] == 0, delta


def test_a_replica_down_while_the_trainer_moves_on_catches_up_before_taking_traffic(
    kind: KindCluster, k: Kubectl
) -> None:
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 4, "checks_per_prompt": 1})
    rollout_size(k, 2)  # one replica is stopped, the other keeps the trainer stepping
    try:
        check_catch_up(kind, k)
    finally:
        rollout_size(k, None)


def check_catch_up(kind: KindCluster, k: Kubectl) -> None:
    wait_for(lambda: in_sync(k, 2), timeout=180, what="two replicas, current")
    pod = pods(k, "rollout")[0]
    name, url = pod["metadata"]["name"], f"http://{pod['status']['podIP']}:8000"
    start = status(k)["policyVersion"]
    before = generations(kind)
    kind.signal(pod, "STOP")
    stopped = time.monotonic()
    try:
        wait_for(lambda: gate(k.get("pod", name))["status"] == "False", timeout=60, what=f"{name} gated out")
        wait_for(lambda: url not in router_workers(k), timeout=60, what=f"{name} out of the router")
        wait_for(lambda: status(k)["policyVersion"] >= start + 2, timeout=120, what="the trainer 2 versions on")
        # past the RL controller's 30 s request timeout: what was routed to it before it stopped is retried
        # elsewhere, so a stale reply after this can only be one routed to it while it was behind
        time.sleep(max(0.0, 35 - (time.monotonic() - stopped)))
    finally:
        kind.signal(pod, "CONT")
    wait_for(lambda: in_sync(k, 2), timeout=120, what=f"{name} caught up, Ready and routed again")
    assert name in {p["metadata"]["name"] for p in pods(k, "rollout")}, "the same replica came back"
    caught = [e["message"] for e in k.events(JOB) if e["reason"] == "WeightsUpdate" and name in e["message"]]
    assert caught, "no catch-up load was ordered"
    time.sleep(10)
    after = generations(kind)
    delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("served", "lost", "stale")}
    assert delta["stale"] == 0, delta  # nothing routed to it while it was behind


def test_a_restarted_replica_takes_no_traffic_until_it_serves_the_trainers_weights(
    kind: KindCluster, k: Kubectl
) -> None:
    """A crashed server comes back in the same pod at its base weights (v0), with the weights-current
    condition still True from before: rlop judges the new process at once, before it is Ready or routed."""
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 4, "checks_per_prompt": 1})
    rollout_size(k, 2)
    try:
        check_restart(kind, k)
    finally:
        rollout_size(k, None)


def check_restart(kind: KindCluster, k: Kubectl) -> None:
    wait_for(lambda: in_sync(k, 2), timeout=180, what="two replicas, current")
    pod = pods(k, "rollout")[0]
    name, url = pod["metadata"]["name"], f"http://{pod['status']['podIP']}:8000"
    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
    before = generations(kind)
    kind.signal(pod, "KILL")
    lies: list[str] = []

    def back() -> bool:
        now = k.get("pod", name)
        policy = status(k).get("policyVersion") or 0
        version = served(k).get(name)
        routed = url in router_workers(k)
        behind = version is not None and version < policy - 1
        if behind and (ready(now) or routed):  # behind: it must be neither Ready nor routed
            lies.append(f"{name} serving v{version} (trainer v{policy}): Ready={ready(now)}, routed={routed}")
        restarted = now["status"]["containerStatuses"][0]["restartCount"] > restarts
        return restarted and version is not None and version >= policy - 1 and ready(now) and routed

    wait_for(back, timeout=180, what=f"{name} restarted, caught up, Ready and routed again")
    assert not lies, lies
    # rlop saw the new process behind (at its base weights) and had it catch up
    assert any(e["reason"] == "WeightsUpdate" and name in e["message"] for e in k.events(JOB))
    time.sleep(10)  # the generations of the whole episode scraped
    after = generations(kind)
    delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("served", "lost", "stale")}
    # every reply names the weights it came from: none from the restarted process's base weights reached
    # the RL loop (what went to the dead server was retried elsewhere, not lost)
    assert delta["served"] > 0 and delta["stale"] == 0 and delta["lost"] == 0, delta


def desired(k: Kubectl, pool: str) -> int:
    return int(((status(k).get("pools") or {}).get(pool) or {}).get("desired", 0))


def test_rollout_and_sandbox_scale_up_and_down_on_live_metrics(kind: KindCluster, k: Kubectl) -> None:
    # from the bottom: an earlier test's replicas may still be up, and the GPU budget (12: trainer 8, reward
    # up to 2) would leave the rollout pool no room above them
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 0, "checks_per_prompt": 1})
    wait_for(lambda: desired(k, "rollout") == 1, timeout=300, what="rollout at minReplicas before the load step")
    base_rollout, base_sandbox = desired(k, "rollout"), desired(k, "sandbox")
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 24, "checks_per_prompt": 3})
    wait_for(lambda: desired(k, "rollout") > base_rollout, timeout=180, what="rollout scaled up")
    wait_for(lambda: desired(k, "sandbox") > base_sandbox, timeout=180, what="sandbox scaled up")
    wait_for(lambda: len([p for p in pods(k, "rollout") if ready(p)]) > base_rollout, timeout=180,
             what="the new rollout pods Ready")  # fmt: skip
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 0, "checks_per_prompt": 1})
    wait_for(lambda: desired(k, "rollout") == 1, timeout=300, what="rollout back to minReplicas")
    # the status is written first, the events that explain it right after: wait for them too
    wait_for(lambda: {"ScaledUp", "ScaledDown"} <= {e["reason"] for e in k.events(JOB)}, timeout=30,
             what="ScaledUp and ScaledDown events")  # fmt: skip


def sandbox_spec(k: Kubectl, autoscale: dict[str, Any], placement: dict[str, Any]) -> None:
    patch = {"spec": {"pools": {"sandbox": {"autoscale": autoscale, "placement": placement}}}}
    k("patch", "rljob", JOB, "--type=merge", "-p", json.dumps(patch))


def checks(kind: KindCluster) -> dict[str, float]:
    """The RL controller's sandbox checks so far, by outcome (scored, retried, lost, misscored)."""
    res = kind.promql(f'sum by (outcome) (rlop_controller_checks_total{{namespace="{NS}"}})')
    return {r["metric"]["outcome"]: float(r["value"][1]) for r in res}


def test_busy_cpu_node_drains_then_evicts_its_sandbox_pods_and_no_check_is_lost_or_misscored(
    kind: KindCluster, k: Kubectl
) -> None:
    # thresholds for nodes that share the host's CPUs (a user's edit, taken live); the pool's size fixed so
    # that only placement moves pods; at 4 checks per second of 0.5 s, some are in flight when a pod is marked
    sandbox_spec(k, {"minReplicas": 4, "maxReplicas": 4}, {**SHARED_HOST_PLACEMENT, "drainSeconds": 10})
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 4, "checks_per_prompt": 1})
    wait_for(lambda: checks(kind).get("scored", 0) > 0, timeout=120, what="checks scored, seen by Prometheus")

    def busiest() -> str | None:
        """The node with the most of the pool's pods, once all 4 run on more than one node."""
        on = [p["spec"].get("nodeName") for p in pods(k, "sandbox")]
        return max(on, key=on.count) if len(on) == 4 and len(set(on)) > 1 else None

    busy = wait_for(busiest, timeout=180, what="4 sandbox pods running, on more than one node")
    before = checks(kind)
    k.apply(busy_pod("burner", NS, busy))
    try:

        def said(reason: str) -> list[str]:  # (the scale-down of an earlier test drained pods too)
            return [e["message"] for e in k.events(JOB) if e["reason"] == reason and "is busy" in e["message"]]

        draining = wait_for(lambda: said("SandboxDraining"), timeout=240, what=f"SandboxDraining once {busy} is busy")
        assert all(busy in m for m in draining), draining
        reasons = {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get("rlop.dev/drain-reason", "")
                   for p in pods(k, "sandbox")}  # fmt: skip
        marked = [p for p in pods(k, "sandbox") if "is busy" in reasons.get(p["metadata"]["name"], "")]
        assert marked and all(p["spec"]["nodeName"] == busy for p in marked), marked
        evicted = wait_for(lambda: said("SandboxEvicted"), timeout=120, what="SandboxEvicted once the drain is over")
        assert all("drained since" in m and busy in m for m in evicted), evicted
        wait_for(lambda: not [p for p in pods(k, "sandbox", running=False) if p["spec"].get("nodeName") == busy],
                 timeout=120, what=f"no sandbox pod left on {busy}")  # fmt: skip
        assert pods(k, "sandbox"), "the pool kept running on the other nodes"
        # the pods saw the mark through the downward API and stopped taking checks
        saw = kind.promql(f'max_over_time(rlop_sandbox_draining{{namespace="{NS}"}}[10m]) == 1')
        assert saw, "no sandbox pod reported the drain mark"
        time.sleep(10)  # the last checks retried and scraped
        after = checks(kind)
        delta = {o: after.get(o, 0) - before.get(o, 0) for o in ("scored", "retried", "lost", "misscored")}
        assert delta["scored"] > 0 and delta["lost"] == 0 and delta["misscored"] == 0, delta
    finally:
        k("delete", "pod", "burner", "--grace-period=0", "--force", check=False)
        example = yaml.safe_load(EXAMPLE.read_text())["spec"]["pools"]["sandbox"]
        sandbox_spec(k, example["autoscale"], {**dict.fromkeys(SHARED_HOST_PLACEMENT), **example["placement"]})


def test_operator_killed_mid_scale_converges(kind: KindCluster, k: Kubectl) -> None:
    op = json.loads(kind.kubectl("-n", NAMESPACE, "get", "pods", "-l", "app.kubernetes.io/name=rlop",
                                 "-o", "json").stdout)["items"]  # fmt: skip
    op = [p for p in op if p["metadata"]["labels"].get("app.kubernetes.io/component") is None]
    assert len(op) == 1, [p["metadata"]["name"] for p in op]
    node, restarts = op[0]["spec"]["nodeName"], op[0]["status"]["containerStatuses"][0]["restartCount"]
    before = desired(k, "rollout")
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 24, "checks_per_prompt": 1})
    wait_for(lambda: desired(k, "rollout") > before, timeout=120, what="scaling under way")
    killed = kind.node_exec(node, "pkill", "-9", "-f", "bin/rlop run")
    assert killed.returncode == 0, killed.stderr

    def restarted() -> bool:
        pod = k.cluster.kubectl("-n", NAMESPACE, "get", "pod", op[0]["metadata"]["name"], "-o", "json").stdout
        cs = json.loads(pod)["status"]["containerStatuses"][0]
        return bool(cs["restartCount"] > restarts and cs.get("ready"))

    wait_for(restarted, timeout=180, what="the operator container restarted and Ready")

    def converged() -> bool:
        st = status(k)
        rollout = (st.get("pools") or {}).get("rollout") or {}
        live = pods(k, "rollout", running=False)
        return bool(rollout.get("desired") and len(live) == rollout["desired"] == rollout.get("ready"))

    wait_for(converged, timeout=240, what="rollout desired == pods == ready after the restart")
    kind.post(NS, f"{JOB}-controller", 8000, "/load", {"prompts_per_s": 2, "checks_per_prompt": 1})
    assert yaml.safe_dump(status(k))  # the status is still a whole document
