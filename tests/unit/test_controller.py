"""The reconcile loop against an in-memory API server (tests/unit/fake_kube.py): what it writes, what it
reports, what it remembers of its own writes. The real API server's side is in tests/integration."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
import yaml

from rlop.api.names import DRAIN_ANNOTATION, DRAIN_REASON_ANNOTATION
from rlop.config import Config
from rlop.controller import Controller
from rlop.dev import REPO
from rlop.expectations import WATCH_LAG, Expectations
from rlop.kube.client import KubeError
from rlop.whatif import what_if

from .builders import job, pod
from .fake_kube import FakeEngine, FakeKube, FakePrometheus

KEY = ("ns", "j")


def _body(**pools: Any) -> dict[str, Any]:
    return job(**pools).model_dump(mode="json", by_alias=True, exclude_none=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _controller(kube: FakeKube, **cfg: Any) -> Controller:
    ctl = Controller(kube, FakePrometheus(), Config(**cfg))
    ctl.expect = Expectations(clock=Clock())
    return ctl


def _pass(ctl: Controller, kube: FakeKube, watched: bool = True, full: bool = False) -> None:
    """One pass; `watched`: the watches have caught up with every write before it."""
    if watched or ctl.indexes is None:
        ctl.indexes = kube.indexes()
    asyncio.run(_reconcile(ctl, [KEY], full))


async def _reconcile(ctl: Controller, keys: list[tuple[str, str]], full: bool = False) -> None:
    """A pass and the events it recorded, posted."""
    await ctl.reconcile_all(keys, full)
    await ctl.recorder.flush()


def _reasons(kube: FakeKube) -> list[str]:
    return [reason for _, reason, _ in kube.events]


def _settled(**pools: Any) -> tuple[FakeKube, Controller]:
    kube = FakeKube()
    kube.put(_body(**pools))
    ctl = _controller(kube)
    _pass(ctl, kube)
    _pass(ctl, kube)
    kube.writes.clear()
    kube.events.clear()
    return kube, ctl


def test_a_first_pass_creates_the_children_and_a_second_writes_nothing() -> None:
    kube = FakeKube()
    kube.put(_body())
    ctl = _controller(kube)
    _pass(ctl, kube)
    applied = {w[1] for w in kube.writes if w[0] == "apply"}
    assert applied == {"StatefulSet/j-trainer", "Service/j-trainer", "Service/j-rollout", "Deployment/j-rollout"}
    assert ("status", "RLJob/j") in kube.writes
    assert _reasons(kube).count("Created") == 4
    kube.writes.clear()
    kube.events.clear()
    _pass(ctl, kube)
    assert kube.writes == [] and kube.events == []


def test_the_status_rlop_wrote_counts_while_the_watch_lags() -> None:
    kube = FakeKube()
    kube.put(_body())
    ctl = _controller(kube)
    _pass(ctl, kube)
    kube.writes.clear()
    _pass(ctl, kube, watched=False)  # the RLJob in the index still has no status: not written again
    assert ("status", "RLJob/j") not in kube.writes
    assert not [w for w in kube.writes if w[0] == "apply"]  # nor the children the watch has not shown


def test_a_refused_write_marks_synced_and_is_reported_once() -> None:
    kube = FakeKube()
    kube.put(_body())
    kube.refuse[("apply", "Deployment/j-rollout")] = KubeError(422, "spec.template: Invalid value")
    ctl = _controller(kube)
    _pass(ctl, kube)
    status = kube.objects[("RLJob", "ns", "j")]["status"]
    synced = next(c for c in status["conditions"] if c["type"] == "Synced")
    assert (status["phase"], synced["status"], synced["reason"]) == ("Error", "False", "ApplyFailed")
    assert "Deployment j-rollout: spec.template: Invalid value" in synced["message"]
    assert "Created Deployment j-rollout" not in [m for _, _, m in kube.events]  # it was not
    assert _reasons(kube).count("Created") == 3 and _reasons(kube).count("ApplyFailed") == 1
    kube.events.clear()
    _pass(ctl, kube)  # the same refusal again: nothing new to say
    assert kube.events == []
    del kube.refuse[("apply", "Deployment/j-rollout")]
    _pass(ctl, kube)
    assert _reasons(kube) == ["Created"]  # what recovered, said once
    assert kube.objects[("RLJob", "ns", "j")]["status"]["phase"] != "Error"


def test_a_hand_edit_is_reverted_with_one_event() -> None:
    kube, ctl = _settled()
    kube.edit("Deployment", "ns", "j-rollout", replicas=7)
    _pass(ctl, kube)  # moments after rlop's own apply, the edit may be the watch lagging: wait and see
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"]["replicas"] == 7
    ctl.expect.clock.now += WATCH_LAG  # type: ignore[attr-defined]
    _pass(ctl, kube)
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"]["replicas"] == 1
    assert _reasons(kube) == ["DriftCorrected"]
    kube.events.clear()
    _pass(ctl, kube)
    assert kube.events == []


def _set_rollout_replicas(kube: FakeKube, replicas: int) -> None:
    body = kube.objects[("RLJob", "ns", "j")]
    body["spec"]["pools"]["rollout"]["replicas"] = replicas
    kube.put(body)


def test_a_change_of_replicas_alone_is_written_through_scale_and_not_again() -> None:
    kube, ctl = _settled()
    _set_rollout_replicas(kube, 3)
    _pass(ctl, kube)
    assert [w for w in kube.writes if w[0] != "status"] == [("scale", "Deployment/j-rollout")]
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"]["replicas"] == 3
    assert _reasons(kube) == ["Updated"]
    kube.writes.clear()
    ctl.expect.clock.now += WATCH_LAG  # type: ignore[attr-defined]
    _pass(ctl, kube)  # the generation the scale left is the one rlop remembers: not taken for a hand edit
    assert kube.writes == []


def test_while_the_watch_lags_behind_a_scale_the_next_is_a_scale_too_and_no_drift() -> None:
    kube, ctl = _settled()
    before = kube.indexes()
    _set_rollout_replicas(kube, 3)
    _pass(ctl, kube)
    _set_rollout_replicas(kube, 4)
    kube.writes.clear()
    kube.events.clear()
    ctl.indexes = {**kube.indexes(), "job_deployments": before["job_deployments"]}  # still 1 replica, generation 1
    _pass(ctl, kube, watched=False)
    assert [w for w in kube.writes if w[0] != "status"] == [("scale", "Deployment/j-rollout")]
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"]["replicas"] == 4
    assert "DriftCorrected" not in _reasons(kube)
    kube.writes.clear()
    _pass(ctl, kube)
    assert kube.writes == []


def test_after_a_restart_children_are_reapplied_once_and_nothing_is_reported() -> None:
    kube, _ = _settled()
    ctl = _controller(kube)  # a new process: no memory of its own writes
    _pass(ctl, kube)
    assert kube.writes == [] and kube.events == []  # the re-applies changed nothing, so nothing is said


def test_a_child_no_longer_implied_is_deleted_and_a_404_counts_as_done() -> None:
    kube, ctl = _settled(reward={"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}})
    body = kube.objects[("RLJob", "ns", "j")]
    del body["spec"]["pools"]["reward"]
    kube.put(body)
    kube.refuse[("delete", "Service/j-reward")] = KubeError(404, "not found")
    kube.refuse[("delete", "Deployment/j-reward")] = KubeError(409, "conflict")
    _pass(ctl, kube)
    deleted = [m for _, r, m in kube.events if r == "Deleted"]
    assert deleted == ["Deleted Service j-reward: no longer implied by the spec"]  # the refused one is not
    assert "ApplyFailed" in _reasons(kube)


def test_a_name_taken_by_an_object_rlop_did_not_create_is_left_alone() -> None:
    kube = FakeKube()
    kube.put(_body())
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 3},
              "metadata": {"name": "j-rollout", "namespace": "ns", "labels": {"rlop.dev/job": "j"}}}  # fmt: skip
    kube.put(theirs)
    ctl = _controller(kube)
    _pass(ctl, kube)
    assert ("apply", "Deployment/j-rollout") not in kube.writes
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"] == {"replicas": 3}
    message = next(m for _, r, m in kube.events if r == "ApplyFailed")
    assert "already exists and was not created by rlop" in message


def test_an_invalid_job_is_reported_and_nothing_is_written() -> None:
    kube = FakeKube()
    body = _body()
    body["spec"]["pools"]["rollout"]["replicas"] = -1  # past the API server's schema (e.g. a broken webhook)
    kube.put(body)
    ctl = _controller(kube)
    _pass(ctl, kube)
    assert [w for w in kube.writes if w[0] == "apply"] == []
    synced = kube.objects[("RLJob", "ns", "j")]["status"]["conditions"][0]
    assert (synced["type"], synced["reason"]) == ("Synced", "InvalidSpec")
    assert "rollout" in synced["message"]
    assert _reasons(kube) == ["InvalidSpec"]
    kube.events.clear()
    _pass(ctl, kube)
    assert kube.events == []


def test_a_full_pass_scales_from_the_metrics_and_holds_without_them() -> None:
    auto = {"minReplicas": 1, "maxReplicas": 5,
            "metrics": [{"query": "q", "target": {"type": "AverageValue", "value": 10}}]}  # fmt: skip
    template = {"spec": {"containers": [{"name": "c", "image": "i"}]}}
    kube, ctl = _settled(rollout={"template": template, "autoscale": auto})
    prom = ctl.prom
    assert isinstance(prom, FakePrometheus)
    prom.answers[("rollout", 0)] = [({}, 30.0)]
    _pass(ctl, kube, full=True)
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"]["replicas"] == 3
    assert next(m for _, r, m in kube.events if r == "ScaledUp").startswith("rollout 1 -> 3")
    kube.events.clear()
    del prom.answers[("rollout", 0)]  # no data: hold, never scale down
    _pass(ctl, kube, full=True)
    assert kube.objects[("Deployment", "ns", "j-rollout")]["spec"]["replicas"] == 3
    assert "MetricsMissing" in _reasons(kube)


def test_losing_the_lease_stops_writes_and_forgets_what_was_written() -> None:
    class Lease:
        leader = True

        def is_leader(self) -> bool:
            return self.leader

    kube = FakeKube()
    kube.put(_body())
    lease = Lease()
    ctl = Controller(kube, FakePrometheus(), Config(), lease)  # type: ignore[arg-type]
    _pass(ctl, kube)
    assert ctl.expect.status(KEY, "uid-1") is not None
    lease.leader = False
    kube.writes.clear()
    assert not ctl.may_act()
    assert ctl.expect.status(KEY, "uid-1") is None


def test_expectations_add_created_pods_and_mark_removed_ones_until_the_watch_lag() -> None:
    clock = Clock()
    expect = Expectations(clock=clock)
    seen = [pod("a", job="j", namespace="ns"), pod("b", job="j", namespace="ns")]
    expect.creating("ns", pod("c", job="j", namespace="ns"))
    expect.creating("ns", pod("x", job="other", namespace="ns"))
    expect.removed("ns", "b")
    got = {p.name: p.deleting for p in expect.pods(seen, job=KEY)}
    assert got == {"a": False, "b": True, "c": False}
    assert {p.name for p in expect.pods(seen)} == {"a", "b", "c", "x"}
    clock.now += WATCH_LAG
    assert {p.name: p.deleting for p in expect.pods(seen, job=KEY)} == {"a": False, "b": False}


def test_a_created_pod_the_watch_showed_and_then_lost_is_not_brought_back() -> None:
    """Once the watch shows a pod rlop created, the watch alone says whether it exists: a pod deleted moments
    after its creation (a rank of a group, force-deleted) must not come back as a ghost of the create."""
    expect = Expectations(clock=Clock())
    expect.creating("ns", pod("g-1-1", job="j", namespace="ns"))
    assert [p.name for p in expect.pods([pod("g-1-1", job="j", namespace="ns", uid="u")], job=KEY)] == ["g-1-1"]
    assert expect.pods([], job=KEY) == []


def test_a_new_pod_that_takes_a_removed_pods_name_is_not_terminating() -> None:
    """A StatefulSet recreates a deleted rank under the same name at once: only the old uid is gone."""
    expect = Expectations(clock=Clock())
    expect.removed("ns", "t-0", uid="old")
    old, new = pod("t-0", namespace="ns", uid="old"), pod("t-0", namespace="ns", uid="new")
    assert [p.deleting for p in expect.pods([old])] == [True]
    assert [p.deleting for p in expect.pods([new])] == [False]


def test_a_pod_marked_draining_stays_marked_while_the_watch_lags() -> None:
    """So the next pass neither marks it again (its drain would restart) nor counts it as placed."""
    clock = Clock()
    expect = Expectations(clock=clock)
    mark = {DRAIN_ANNOTATION: "2026-12-01T00:00:00Z", DRAIN_REASON_ANNOTATION: "scaled down"}
    expect.marked("ns", "s-0", "u1", mark)
    lagging, other = pod("s-0", namespace="ns", uid="u1"), pod("s-0", namespace="ns", uid="u2")
    assert [(p.draining, p.drain_reason) for p in expect.pods([lagging])] == [("2026-12-01T00:00:00Z", "scaled down")]
    assert [p.draining for p in expect.pods([other])] == [""]  # a new pod of that name is not draining
    clock.now += WATCH_LAG
    assert [p.draining for p in expect.pods([lagging])] == [""]


@pytest.mark.parametrize("ok", [True, False])
def test_expectations_of_a_pod_create(ok: bool) -> None:
    expect = Expectations(clock=Clock())
    expect.removed("ns", "p")  # an old pod of that name, deleted
    expect.creating("ns", pod("p", job="j", namespace="ns"))
    expect.created("ns", "p", ok=ok)
    assert [p.name for p in expect.pods([], job=KEY)] == (["p"] if ok else [])


def test_a_weight_load_is_remembered_until_it_ends_and_forgotten_with_the_lease() -> None:
    expect = Expectations(clock=Clock())
    expect.load("ns", "r-0", 3)
    expect.load("other", "r-0", 5)
    assert expect.loading("ns") == {"r-0": 3}
    expect.load("ns", "r-0", 4)  # told a newer version: the end of the older load changes nothing
    expect.loaded("ns", "r-0", 3)
    assert expect.loading("ns") == {"r-0": 4}
    expect.loaded("ns", "r-0", 4)
    assert expect.loading("ns") == {}
    expect.clear()
    assert expect.loading("other") == {}


def test_the_operator_and_rlop_plan_decide_alike_from_the_same_observations() -> None:
    doc = yaml.safe_load((REPO / "examples" / "rljob.yaml").read_text())
    doc["metadata"] = {**doc["metadata"], "namespace": "ns", "uid": "uid-1", "generation": 1}
    kube = FakeKube()
    kube.put(doc)
    key = ("ns", doc["metadata"]["name"])
    ctl = _controller(kube)
    ctl.indexes = kube.indexes()
    asyncio.run(_reconcile(ctl, [key]))  # creates the children; no decision yet
    state = kube.objects[("RLJob", "ns", key[1])]["status"]
    assert isinstance(ctl.prom, FakePrometheus)
    ctl.prom.answers[("rollout", 0)] = [({}, 130.0)]
    ctl.prom.answers[("reward", 0)] = [({}, 40.0)]
    ctl.indexes = kube.indexes()
    asyncio.run(_reconcile(ctl, [key], full=True))
    after = kube.objects[("RLJob", "ns", key[1])]["status"]
    now = datetime.fromisoformat(after["pools"]["rollout"]["lastScaleTime"].replace("Z", "+00:00"))
    dry = what_if(
        doc, {"rollout": [130], "reward": [40]}, state, now, pods={p: {"existing": 0} for p in state["pools"]}
    )
    assert {p: s["desired"] for p, s in dry["state"]["pools"].items()} == {
        p: s["desired"] for p, s in after["pools"].items()
    }
    assert dry["state"]["pools"]["rollout"]["recommendations"] == after["pools"]["rollout"]["recommendations"]


@pytest.mark.parametrize(
    ("state", "served", "reason"),
    [
        ({"running": {"startedAt": "2026-12-04T11:30:00Z"}}, "default", "NotLoaded"),  # a new process: base weights
        ({"terminated": {"exitCode": 137}}, None, "VersionUnknown"),  # down: not answering
    ],
)
def test_a_replica_whose_server_died_or_restarted_is_judged_before_the_next_full_pass(
    state: dict[str, Any], served: str | None, reason: str
) -> None:
    """Kubernetes keeps the weights-current condition across a container restart: the new process would be
    Ready (and routed to) at whatever it serves. The pod's update is enough for rlop to judge it again."""
    weights = {"volume": {"hostPath": {"path": "/w"}}, "maxStaleness": 1}
    rollout = {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}, "port": 8000,
               "weights": weights, "router": {"type": "sglang-router"}}  # fmt: skip
    kube, _ = _settled(rollout=rollout)
    body = kube.objects[("RLJob", "ns", "j")]
    body.setdefault("status", {})["policyVersion"] = 5
    owner = {"kind": "ReplicaSet", "name": "j-rollout-abc", "uid": "rs", "controller": True}
    url = "http://10.0.0.7:8000"
    kube.put(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "j-rollout-abc-1",
                "namespace": "ns",
                "labels": {"rlop.dev/job": "j", "rlop.dev/pool": "rollout"},
                "ownerReferences": [owner],
            },
            "spec": {"containers": [{"name": "c"}]},
            "status": {
                "phase": "Running",
                "podIP": "10.0.0.7",
                "conditions": [
                    {"type": "Ready", "status": "False"},
                    {"type": "ContainersReady", "status": "False"},
                    {
                        "type": "rlop.dev/weights-current",
                        "status": "True",
                        "message": "serves v5 (trainer v5)",
                        "lastTransitionTime": "2026-12-04T11:00:00Z",
                    },
                ],
                "containerStatuses": [{"name": "c", "state": state}],
            },
        }
    )
    router_owner = {**owner, "name": "j-rollout-router-xyz", "uid": "rs2"}
    kube.put({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "j-rollout-router-xyz-1", "namespace": "ns",
        "labels": {"rlop.dev/job": "j", "rlop.dev/pool": "rollout-router"}, "ownerReferences": [router_owner]},
        "spec": {"containers": [{"name": "router"}]}, "status": {"phase": "Running", "podIP": "10.0.0.9",
        "conditions": [{"type": "Ready", "status": "True"}]}})  # fmt: skip
    engine = FakeEngine({url: served} if served is not None else {}, {url: "w7"})
    ctl = Controller(kube, FakePrometheus(), Config(), engine=engine)  # type: ignore[arg-type]
    ctl.expect = Expectations(clock=Clock())
    _pass(ctl, kube)  # a pass for the pod's update, not a full one
    gate = next(c for c in kube.objects[("Pod", "ns", "j-rollout-abc-1")]["status"]["conditions"]
                if c["type"] == "rlop.dev/weights-current")  # fmt: skip
    assert (gate["status"], gate["reason"]) == ("False", reason), gate
    assert ("deregister", "w7") in engine.calls
    assert (("load", f"{url} v5") in engine.calls) == (served is not None)  # told to catch up at once


def test_a_job_is_parsed_again_only_when_its_object_changes() -> None:
    kube, ctl = _settled()
    first = ctl.load(KEY)
    assert first is not None and ctl.load(KEY) is not None
    assert ctl.parse(KEY, first[0]) is ctl.parse(KEY, first[0])  # same resourceVersion: the cached model
    body = kube.objects[("RLJob", "ns", "j")]
    body["spec"]["pools"]["rollout"]["replicas"] = 2
    kube.put(body)
    ctl.indexes = kube.indexes()
    loaded = ctl.load(KEY)
    assert loaded is not None and not isinstance(loaded[1], Exception)
    assert loaded[1].spec.pools.rollout is not None and loaded[1].spec.pools.rollout.replicas == 2
    kube.objects.pop(("RLJob", "ns", "j"))
    ctl.indexes = kube.indexes()
    assert ctl.load(KEY) is None and KEY not in ctl.parsed
