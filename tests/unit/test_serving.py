"""Serving pools RL can trust (pure): weight-version gates, catch-up loads, router membership, drains."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from rlop.api import reasons as R
from rlop.api.models import ServingPool
from rlop.api.names import LOWEST_COST, WEIGHTS_GATE
from rlop.plan.autoscale import Reading
from rlop.plan.job import JobObservation, plan_job, with_apply_errors
from rlop.plan.observed import PodInfo
from rlop.plan.render import render
from rlop.plan.serving import Probe, ServingObservation, combine, plan_serving

from .builders import container, job

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)
STAMP = (NOW - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
OLD = (NOW - timedelta(seconds=500)).strftime("%Y-%m-%dT%H:%M:%SZ")
HOSTPATH = {"hostPath": {"path": "/var/lib/rlop-weights"}}


def spec(**extra: Any) -> ServingPool:
    body = {"template": {"spec": {"containers": [container()]}}, "replicas": 1, "port": 8000,
            "weights": {"volume": HOSTPATH, "maxStaleness": 1}, "router": {"type": "sglang-router"},
            **extra}  # fmt: skip
    return ServingPool.model_validate({k: v for k, v in body.items() if v is not None})


def replica(name: str, ip: str = "", ready: bool = True, gate: str | None = "True", **extra: Any) -> PodInfo:
    return PodInfo(name=name, pool="rollout", ip=ip or f"10.0.0.{name[-1]}", containers_ready=ready,
                   ready=ready and gate == "True", weights_current=gate, created=f"2026-12-04T11:0{name[-1]}:00Z",
                   **extra)  # fmt: skip


def seen(
    versions: dict[str, int | str | None], policy: float | None = 5, workers: dict[str, str] | None = None,
    loads: dict[str, int] | None = None, updating: dict[str, int] | None = None,
) -> ServingObservation:  # fmt: skip
    """What the replicas said: a version as an int is the name rlop gives it (5 -> "5")."""
    probes = {p: Probe(str(v) if isinstance(v, int) else v, (loads or {}).get(p)) for p, v in versions.items()}
    reading = Reading(policy) if policy is not None else Reading(None, "query returned no data")
    return ServingObservation(probes, workers, "http://router", reading, updating or {})


@pytest.mark.parametrize(
    ("served", "policy", "gate", "reason"),
    [
        (5, 5, "True", R.CURRENT),
        (4, 5, "True", R.CURRENT),  # within maxStaleness 1
        (3, 5, "False", R.BEHIND),
        (None, 5, "False", R.VERSION_UNKNOWN),  # its server does not answer
        ("default", 5, "False", R.NOT_LOADED),  # SGLang's version before any load names one: never loaded by rlop
        ("default", 0, "False", R.NOT_LOADED),  # not even the trainer's first version
        (7, 5, "False", R.NOT_LOADED),  # a version the trainer has not published
        ("v5", 5, "False", R.NOT_LOADED),  # not rlop's names of versions: never parsed as numbers
        ("05", 5, "False", R.NOT_LOADED),
        ("5.0", 5, "False", R.NOT_LOADED),
        (" 5", 5, "False", R.NOT_LOADED),
        ("\u0665", 5, "False", R.NOT_LOADED),  # an Arabic-Indic 5: a digit to str.isdigit, not rlop's name
        ("9" * 40, 5, "False", R.NOT_LOADED),
    ],
)
def test_the_gate_says_whether_a_replica_serves_a_version_within_max_staleness(
    served: int | str | None, policy: int, gate: str, reason: str
) -> None:
    plan = plan_serving("rollout", spec(), 1, [replica("p1", gate=None)], seen({"p1": served}, policy), {}, NOW)
    assert (plan.gates["p1"].status, plan.gates["p1"].reason) == (gate, reason)
    loads = [u.version for u in plan.updates]
    if reason == R.NOT_LOADED and served != 7:
        assert loads == [policy] and plan.updates[0].catch_up  # told to load the trainer's: it serves none of them
    elif served in (7, None):
        assert loads == []  # ahead: never taken back to an older version; not answering: not told anything


def test_the_gate_says_which_endpoint_reported_the_version_and_why_none_did() -> None:
    pods = [replica("p1", gate=None), replica("p2", gate=None)]
    probes = {"p1": Probe("5", 0, "GET /model_info"),
              "p2": Probe(None, None, "", "GET /model_info: 200 but not JSON: '<html>'")}  # fmt: skip
    observed = ServingObservation(probes, None, "", Reading(5))
    plan = plan_serving("rollout", spec(router=None), 2, pods, observed, {}, NOW)
    assert plan.gates["p1"].message == "serves v5 (trainer v5; GET /model_info)"
    assert (
        plan.gates["p2"].message
        == "does not report its weight version (trainer v5): GET /model_info: 200 but not JSON: '<html>'"
    )
    assert plan.sync is not None and plan.sync.message.startswith("rollout: 1 at unknown, 1 at v5")


def test_an_unknown_trainer_version_holds_every_gate_and_says_why() -> None:
    pods = [replica("p1", gate="True", weights_message="serves v5 (trainer v5)"), replica("p2", gate=None)]
    plan = plan_serving("rollout", spec(), 2, pods, seen({"p1": 5, "p2": 0}, policy=None), {}, NOW)
    assert plan.gates == {} and plan.updates == []
    assert plan.sync is not None and (plan.sync.status, plan.sync.reason) == ("Unknown", R.VERSION_UNKNOWN)
    assert "query returned no data" in plan.sync.message


def test_a_server_that_stops_answering_is_not_current_even_while_the_trainers_version_is_unknown() -> None:
    """Between full passes the trainer's version is not read; a killed server must still lose its gate at
    once: its container comes back as a new process at base weights and would turn Ready on its readiness
    probe alone, before a pass saw it start."""
    pods = [replica("p1", ready=False, weights_message="serves v5 (trainer v5)"),
            replica("p2", weights_message="serves v5 (trainer v5)")]  # fmt: skip
    plan = plan_serving("rollout", spec(), 2, pods, seen({"p1": None, "p2": 5}, policy=None), {}, NOW)
    assert {p: (g.status, g.reason) for p, g in plan.gates.items()} == {"p1": ("False", R.VERSION_UNKNOWN)}
    assert plan.gates["p1"].message == "does not report its weight version"


@pytest.mark.parametrize(
    ("served", "policy", "gate", "reason"),
    [
        (0, 5, "False", R.BEHIND),  # a new process at its base weights: out before it is Ready again
        (None, 5, "False", R.VERSION_UNKNOWN),  # not answering yet
        (5, 5, "True", R.CURRENT),  # came back current: judged again, the condition's time moves
        (5, None, "False", R.RESTARTED),  # the trainer's version unknown: the new process is not trusted
    ],
)
def test_a_replica_whose_server_restarted_is_judged_again(
    served: int | None, policy: int | None, gate: str, reason: str
) -> None:
    """The weights-current condition outlives a container restart: Kubernetes would make the pod Ready as
    soon as the new process answers its readiness probe, whatever weights it serves."""
    p = replica("p1", weights_message="serves v5 (trainer v5)", weights_since="2026-12-04T11:50:00Z",
                started="2026-12-04T11:59:00Z")  # fmt: skip
    workers = {"http://10.0.0.1:8000": "w1"}
    plan = plan_serving("rollout", spec(), 1, [p], seen({"p1": served}, policy, workers=workers), {}, NOW)
    g = plan.gates["p1"]
    assert (g.status, g.reason, g.restamp) == (gate, reason, True)
    assert plan.deregister == ([] if gate == "True" else [("p1", "http://10.0.0.1:8000", "w1")])
    same = replace(p, started="2026-12-04T11:40:00Z")  # started before its gate turned True: nothing new
    assert plan_serving("rollout", spec(), 1, [same], seen({"p1": 5}, 5, workers=workers), {}, NOW).gates == {}


def test_an_unchanged_gate_is_not_rewritten() -> None:
    pods = [replica("p1", gate="True", weights_message="serves v5 (trainer v5)")]
    assert plan_serving("rollout", spec(), 1, pods, seen({"p1": 5}), {}, NOW).gates == {}


def test_replicas_behind_are_told_to_load_the_newest_once() -> None:
    pods = [replica("p1"), replica("p2", gate="False"), replica("p3")]
    plan = plan_serving("rollout", spec(), 3, pods, seen({"p1": 4, "p2": 0, "p3": 5}), {}, NOW)
    assert [(u.pod, u.url, u.version, u.model_path, u.catch_up) for u in plan.updates] == [
        ("p1", "http://10.0.0.1:8000", 5, "/weights/5", False),
        ("p2", "http://10.0.0.2:8000", 5, "/weights/5", True),  # a late joiner catches up
    ]
    again = plan_serving("rollout", spec(), 3, pods, seen({"p1": 4, "p2": 0, "p3": 5}, updating={"p1": 5}), {}, NOW)
    assert [u.pod for u in again.updates] == ["p2"]  # p1's load is still running


def test_model_path_template() -> None:
    s = spec(weights={"volume": HOSTPATH, "mountPath": "/ckpt", "modelPath": "/ckpt/iter_{{version}}/hf"})
    assert s.weights is not None and s.weights.path_of(7) == "/ckpt/iter_7/hf"
    assert spec().weights.path_of(3) == "/weights/3"  # type: ignore[union-attr]


def test_the_router_gets_exactly_the_ready_current_replicas() -> None:
    pods = [replica("p1"), replica("p2", gate="False"), replica("p3", ready=False, gate=None), replica("p4")]
    workers = {"http://10.0.0.1:8000": "w1", "http://10.0.0.2:8000": "w2", "http://10.9.9.9:8000": "gone"}
    plan = plan_serving("rollout", spec(), 4, pods, seen({"p1": 5, "p2": 2, "p3": None, "p4": 5}, workers=workers),
                        {}, NOW)  # fmt: skip
    assert plan.register == [("p4", "http://10.0.0.4:8000")]
    assert plan.deregister == [("", "http://10.9.9.9:8000", "gone"), ("p2", "http://10.0.0.2:8000", "w2")]


def test_a_router_that_does_not_answer_is_left_alone() -> None:
    plan = plan_serving("rollout", spec(), 1, [replica("p1")], seen({"p1": 5}, workers=None), {}, NOW)
    assert plan.register == [] and plan.deregister == []


def test_router_without_weights_registers_ready_replicas() -> None:
    pods = [replica("p1", gate=None), replica("p2", ready=False, gate=None)]
    plan = plan_serving("rollout", spec(weights=None), 2, pods, seen({}, workers={}), {}, NOW)
    assert plan.register == [("p1", "http://10.0.0.1:8000")] and plan.gates == {} and plan.versions is None


def test_scale_down_drains_the_least_busy_replica_and_keeps_the_deployment_until_it_is_idle() -> None:
    pods = [replica("p1"), replica("p2"), replica("p3")]
    workers = {f"http://10.0.0.{i}:8000": f"w{i}" for i in (1, 2, 3)}
    plan = plan_serving("rollout", spec(), 1, pods, seen({"p1": 5, "p2": 5, "p3": 5}, workers=workers),
                        {"p1": 9.0, "p2": 1.0, "p3": 4.0}, NOW)  # fmt: skip
    assert plan.drain == ["p2", "p3"] and plan.replicas == 3 and plan.drained == []
    assert {p for p, _, _ in plan.deregister} == {"p2", "p3"}  # out of the router at once
    assert {p for p, g in plan.gates.items() if g.reason == R.DRAINING} == {"p2", "p3"}
    assert plan.costs == {"p2": LOWEST_COST, "p3": LOWEST_COST}


@pytest.mark.parametrize(
    ("load", "since", "registered", "done"),
    [
        (3, STAMP, False, None),  # requests still running
        (0, STAMP, False, "no request left running"),
        (0, STAMP, True, None),  # still in the router: deregistered first
        (None, STAMP, False, None),  # its load is unknown
        (3, OLD, True, "drained for 60s"),  # the grace period is over
    ],
)
def test_a_drained_replica_is_deleted_once_idle_or_after_the_grace_period(
    load: int | None, since: str, registered: bool, done: str | None
) -> None:
    pods = [replica("p1"), replica("p2", gate="False", draining=since, deletion_cost=LOWEST_COST)]
    workers = {"http://10.0.0.2:8000": "w2"} if registered else {}
    plan = plan_serving("rollout", spec(), 1, pods, seen({"p1": 5, "p2": 5}, workers=workers,
                        loads={"p2": load} if load is not None else {}), {}, NOW)  # fmt: skip
    assert plan.drained == ([("p2", done)] if done else [])
    assert plan.replicas == (1 if done else 2)
    assert plan.drain == []  # a drain already under way is not started again


def test_without_a_cost_query_the_replicas_running_the_fewest_requests_drain_first() -> None:
    pods = [replica("p1"), replica("p2"), replica("p3")]
    plan = plan_serving("rollout", spec(), 1, pods, seen({"p1": 5, "p2": 5, "p3": 5}, workers={},
                        loads={"p1": 0, "p2": 7, "p3": 2}), {}, NOW)  # fmt: skip
    assert plan.drain == ["p1", "p3"]


def test_a_drain_waits_out_a_router_that_does_not_answer() -> None:
    """It may still route to the replica: idle now is not idle for good until it is known to be out."""
    pods = [replica("p1"), replica("p2", gate="False", draining=STAMP, deletion_cost=LOWEST_COST)]
    plan = plan_serving("rollout", spec(), 1, pods, seen({"p1": 5, "p2": 5}, workers=None, loads={"p2": 0}), {}, NOW)
    assert plan.drained == [] and plan.replicas == 2
    pods[1] = replace(pods[1], draining=OLD)
    plan = plan_serving("rollout", spec(), 1, pods, seen({"p1": 5, "p2": 5}, workers=None, loads={"p2": 0}), {}, NOW)
    assert plan.drained == [("p2", "drained for 60s")]


def test_between_full_passes_a_drain_holds_the_deployment() -> None:
    pods = [replica("p1"), replica("p2", draining=STAMP, deletion_cost=LOWEST_COST)]
    plan = plan_serving("rollout", spec(), 1, pods, None, {}, NOW)
    assert plan.replicas == 2 and plan.drained == [] and plan.gates == {} and plan.updates == []


def test_a_scale_up_during_a_drain_does_not_cancel_it() -> None:
    pods = [replica("p1"), replica("p2", draining=STAMP, deletion_cost=LOWEST_COST)]
    plan = plan_serving("rollout", spec(), 3, pods, seen({"p1": 5, "p2": 5}, loads={"p2": 2}), {}, NOW)
    assert plan.replicas == 4 and plan.drain == [] and plan.drained == []


def test_a_replica_that_never_served_is_removed_without_a_drain() -> None:
    pods = [replica("p1"), replica("p2", ip="", ready=False, gate=None)]
    pods[1] = PodInfo(name="p2", pool="rollout", created="2026-12-04T11:09:00Z")
    plan = plan_serving("rollout", spec(), 1, pods, seen({"p1": 5}), {}, NOW)
    assert plan.drain == [] and plan.drained == [("p2", "it never served")] and plan.replicas == 1


def test_without_a_drain_a_scale_down_is_the_deployments() -> None:
    pods = [replica("p1"), replica("p2")]
    plan = plan_serving("rollout", spec(drainSeconds=0), 1, pods, seen({"p1": 5, "p2": 5}), {}, NOW)
    assert plan.replicas == 1 and plan.drain == [] and plan.drained == []


def test_weights_in_sync_counts_replicas_per_version() -> None:
    pods = [replica("p1"), replica("p2"), replica("p3")]
    plan = plan_serving("rollout", spec(), 3, pods, seen({"p1": 5, "p2": 5, "p3": 4}), {}, NOW)
    assert plan.versions == {"5": 2, "4": 1}
    assert plan.sync is not None and (plan.sync.status, plan.sync.reason) == ("True", R.IN_SYNC)
    assert plan.sync.message == "rollout: 1 at v4, 2 at v5 (trainer v5, maxStaleness 1)"
    behind = plan_serving("rollout", spec(), 3, pods, seen({"p1": 5, "p2": 2, "p3": None}), {}, NOW)
    assert behind.sync is not None and (behind.sync.status, behind.sync.reason) == ("False", R.BEHIND)
    assert behind.sync.message.startswith("rollout: 1 at unknown, 1 at v2, 1 at v5")
    both = combine([plan.sync, behind.sync])
    assert both is not None and both.status == "False" and "; " in both.message


def serving_job(**rollout: Any) -> Any:
    body = {"replicas": 2, "port": 8000, "template": {"spec": {"containers": [container()]}},
            "weights": {"volume": HOSTPATH}, "router": {"type": "sglang-router"}, **rollout}  # fmt: skip
    return job(rollout=body)


def test_render_mounts_the_weights_gates_the_pods_and_runs_a_hardened_router() -> None:
    objs = {(m["kind"], m["metadata"]["name"]): m for m in render(serving_job(), {"trainer": 2, "rollout": 2})}
    pod = objs[("Deployment", "j-rollout")]["spec"]["template"]["spec"]
    assert pod["readinessGates"] == [{"conditionType": WEIGHTS_GATE}]
    assert {"name": "rlop-weights-rollout", "mountPath": "/weights", "readOnly": True} in pod["containers"][0][
        "volumeMounts"]  # fmt: skip
    trainer = objs[("StatefulSet", "j-trainer")]["spec"]["template"]["spec"]
    assert {"name": "rlop-weights-rollout", "mountPath": "/weights", "readOnly": False} in trainer["containers"][0][
        "volumeMounts"]  # fmt: skip
    env = {e["name"]: e.get("value") for e in trainer["containers"][0]["env"]}
    assert env["RLOP_ROLLOUT_URL"] == "http://j-rollout-router.ns.svc:30000"
    assert env["RLOP_ROLLOUT_MEMBERS"] == "j-rollout-members.ns.svc" and env["RLOP_WEIGHTS_DIR"] == "/weights"
    assert "RLOP_ROLLOUT_MAX_STALENESS" not in env  # a change of it must not restart the gang
    members = objs[("Service", "j-rollout-members")]["spec"]
    assert members["clusterIP"] == "None" and members["publishNotReadyAddresses"] is False
    router = objs[("Deployment", "j-rollout-router")]["spec"]["template"]
    assert router["metadata"]["labels"]["rlop.dev/pool"] == "rollout-router"
    rs = router["spec"]
    assert rs["automountServiceAccountToken"] is False and rs["securityContext"]["runAsNonRoot"] is True
    c = rs["containers"][0]
    assert c["securityContext"]["allowPrivilegeEscalation"] is False and c["resources"]["limits"]["cpu"] == "1"
    assert c["command"][:3] == ["python3", "-m", "sglang_router.launch_router"]
    assert objs[("Service", "j-rollout-router")]["spec"]["ports"][0]["port"] == 30000


def test_a_plain_rollout_pool_renders_as_before() -> None:
    objs = {(m["kind"], m["metadata"]["name"]) for m in render(job(), {"trainer": 2, "rollout": 1})}
    assert ("Service", "j-rollout-members") not in objs and ("Deployment", "j-rollout-router") not in objs


def test_the_job_plan_drains_marks_and_reports() -> None:
    j = serving_job(replicas=1)
    pods = [replica("p1"), replica("p2")]
    workers = {"http://10.0.0.1:8000": "w1", "http://10.0.0.2:8000": "w2"}
    obs = JobObservation(j, pods=pods, serving={"rollout": seen({"p1": 5, "p2": 5}, workers=workers)})
    plan = plan_job(obs, NOW)
    deployment = next(m for m in plan.apply if m["metadata"]["name"] == "j-rollout")
    assert deployment["spec"]["replicas"] == 2  # kept until p2 is drained
    assert plan.status.pools["rollout"].desired == 1 and plan.status.policy_version == 5
    assert plan.status.pools["rollout"].versions == {"5": 2}
    victim = next(iter(plan.marks))
    assert plan.marks[victim]["rlop.dev/drain-reason"] == "rollout scale-down"
    assert plan.pod_costs[victim] == LOWEST_COST
    assert any(e.reason == R.REPLICA_DRAINING and victim in e.message for e in plan.events)
    sync = next(c for c in plan.status.conditions if c.type == R.WEIGHTS)
    assert sync.status == "True" and sync.reason == R.IN_SYNC


def test_a_replica_new_since_the_last_probe_withdraws_an_in_sync_claim_between_full_passes() -> None:
    j = serving_job(replicas=2)
    checked = [replica("p1"), replica("p2")]
    claimed = plan_job(JobObservation(j, pods=checked, serving={"rollout": seen({"p1": 5, "p2": 5})}), NOW).status
    assert next(c for c in claimed.conditions if c.type == R.WEIGHTS).status == "True"
    j = j.model_copy(update={"status": claimed})
    assert next(c for c in plan_job(JobObservation(j, pods=checked), NOW).status.conditions
                if c.type == R.WEIGHTS).status == "True"  # fmt: skip  # nothing new: the claim holds
    pods = [*checked, replica("p3", gate=None)]  # scaled up between full passes, not probed yet
    sync = next(c for c in plan_job(JobObservation(j, pods=pods), NOW).status.conditions if c.type == R.WEIGHTS)
    assert (sync.status, sync.reason) == ("False", R.BEHIND)
    assert sync.message == "rollout: 1 of 3 replicas not checked yet (new since the last probe)"
    # a claim already False or Unknown is left for the next full pass to judge (no flapping between them)
    unknown = plan_job(JobObservation(j, pods=checked, serving={"rollout": seen({"p1": 5}, policy=None)}), NOW)
    j = j.model_copy(update={"status": unknown.status})
    held = plan_job(JobObservation(j, pods=pods), NOW).status
    assert next(c for c in held.conditions if c.type == R.WEIGHTS).status == "Unknown"


def test_a_router_in_no_worker_api_rlop_speaks_marks_synced_false_held_between_full_passes() -> None:
    j = serving_job(replicas=1)
    why = "the router at http://10.0.0.9:30000 speaks no worker API rlop knows (...)"
    observed = replace(seen({"p1": 5}), router_problem=(R.ROUTER_UNSUPPORTED, why), workers=None)
    refused = plan_job(JobObservation(j, pods=[replica("p1")], serving={"rollout": observed}), NOW)
    synced = next(c for c in refused.status.conditions if c.type == R.SYNCED)
    assert (synced.status, synced.reason, synced.message) == ("False", R.ROUTER_UNSUPPORTED, f"rollout: {why}")
    assert refused.serving["rollout"].register == [] and refused.serving["rollout"].deregister == []
    j = j.model_copy(update={"status": refused.status})
    between = plan_job(JobObservation(j, pods=[replica("p1")]), NOW).status  # the router is not asked: held
    assert next(c for c in between.conditions if c.type == R.SYNCED).reason == R.ROUTER_UNSUPPORTED
    spoken = plan_job(JobObservation(j, pods=[replica("p1")], serving={"rollout": seen({"p1": 5}, workers={})}), NOW)
    assert next(c for c in spoken.status.conditions if c.type == R.SYNCED).reason == R.APPLIED


def test_a_new_server_at_sglangs_default_version_is_told_to_load_the_trainers_and_the_event_says_why() -> None:
    j = serving_job(replicas=1)
    plan = plan_job(JobObservation(j, pods=[replica("p1", gate=None)], serving={"rollout": seen({"p1": "default"})}),
                    NOW)  # fmt: skip
    assert [(u.pod, u.version) for u in plan.serving["rollout"].updates] == [("p1", 5)]
    said = [e.message for e in plan.events if e.reason == R.WEIGHTS_UPDATE]
    assert said == ["p1 serves 'default': told it to load v5 (/weights/5)"]
    sync = next(c for c in plan.status.conditions if c.type == R.WEIGHTS)
    assert (sync.status, sync.message) == ("False", "rollout: 1 at 'default' (trainer v5, maxStaleness 1)")


@pytest.mark.parametrize(
    ("versions", "policy", "status", "reason"),
    [
        ({"p1": "default", "p2": None}, 0, "False", R.BEHIND),  # trainer v0, maxStaleness 1: still not in sync
        ({"p1": "default"}, 0, "False", R.NOT_LOADED),
        ({"p1": 0}, 0, "True", R.IN_SYNC),
        ({"p1": 7}, 5, "False", R.NOT_LOADED),  # ahead of the trainer: not a version it published
        ({"p1": 5, "p2": 3}, 5, "False", R.BEHIND),
    ],
)
def test_weights_in_sync_is_true_only_when_every_replica_serves_a_published_version_within_staleness(
    versions: dict[str, int | str | None], policy: int, status: str, reason: str
) -> None:
    pods = [replica(p) for p in versions]
    plan = plan_serving("rollout", spec(), len(pods), pods, seen(versions, policy), {}, NOW)
    assert plan.sync is not None and (plan.sync.status, plan.sync.reason) == (status, reason), plan.sync


def test_a_replica_at_the_trainers_version_0_is_not_told_to_load_it_again() -> None:
    plan = plan_serving("rollout", spec(), 1, [replica("p1")], seen({"p1": 0}, 0), {}, NOW)
    assert plan.updates == []


def test_a_refused_write_does_not_hide_an_unsupported_router() -> None:
    j = serving_job(replicas=1)
    observed = replace(seen({"p1": 5}), router_problem=(R.ROUTER_UNSUPPORTED, "no worker API"), workers=None)
    plan = plan_job(JobObservation(j, pods=[replica("p1")], serving={"rollout": observed}), NOW)
    status = with_apply_errors(plan.status, ["Deployment j-rollout: forbidden"], NOW)
    synced = next(c for c in status.conditions if c.type == R.SYNCED)
    assert (synced.reason, synced.message) == (R.ROUTER_UNSUPPORTED,
                                               "rollout: no worker API; Deployment j-rollout: forbidden")  # fmt: skip
    again = with_apply_errors(status, ["Deployment j-rollout: forbidden"], NOW)  # a pass later: said once
    assert next(c for c in again.conditions if c.type == R.SYNCED).message == synced.message


def test_a_router_that_answers_its_listing_with_an_error_marks_synced_false_router_failed() -> None:
    j = serving_job(replicas=1)
    why = "the router at http://10.0.0.9:30000 answered its listing with 401: unauthorized"
    observed = replace(seen({"p1": 5}), router_problem=(R.ROUTER_FAILED, why), workers=None)
    plan = plan_job(JobObservation(j, pods=[replica("p1")], serving={"rollout": observed}), NOW)
    synced = next(c for c in plan.status.conditions if c.type == R.SYNCED)
    assert (synced.status, synced.reason, synced.message) == ("False", R.ROUTER_FAILED, f"rollout: {why}")
