"""rlop converges on what it observes: hand edits of its children are reverted (with an event), and
objects it did not create are never touched, even when they carry its labels or take a child's name."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.conftest import Kubectl, Operator, wait_for
from tests.invalid_cases import base, merge_patch

pytestmark = pytest.mark.cluster


def job(name: str = "conv") -> dict[str, Any]:
    rollout = {"replicas": 1, "autoscale": None}
    sandbox = {"replicas": 1, "placement": {"strategy": "default"}, "egress": "deny"}
    return merge_patch(
        base(), {"metadata": {"name": name}, "spec": {"pools": {"rollout": rollout, "sandbox": sandbox}}}
    )


def synced(k: Kubectl, name: str) -> dict[str, Any]:
    conds = ((k.get("rljob", name) or {}).get("status") or {}).get("conditions", [])
    return next((c for c in conds if c["type"] == "Synced"), {})


def applied(k: Kubectl, name: str) -> None:
    """Create the job and wait until its children are applied."""
    k.apply(job(name))
    wait_for(lambda: synced(k, name).get("status") == "True" and k.get("deployment", f"{name}-rollout"), 60,
             "children applied")  # fmt: skip


def reasons(k: Kubectl, name: str) -> list[str]:
    return [e["reason"] for e in k.events(name)]


def test_hand_edits_of_children_are_reverted_with_an_event(k: Kubectl, operator: Operator) -> None:
    k.apply(job())
    wait_for(lambda: synced(k, "conv").get("status") == "True" and k.get("networkpolicy", "conv-sandbox-egress"),
             60, "children applied")  # fmt: skip
    k("patch", "networkpolicy", "conv-sandbox-egress", "--type=merge", "-p", json.dumps({"spec": {"egress": [{}]}}))
    k("set", "image", "deployment/conv-rollout", "rollout=evil")
    k("scale", "deployment/conv-sandbox", "--replicas=4")
    k("scale", "statefulset/conv-trainer", "--replicas=5")

    def reverted() -> bool:
        netpol, roll = k.get("networkpolicy", "conv-sandbox-egress"), k.get("deployment", "conv-rollout")
        sandbox, sts = k.get("deployment", "conv-sandbox"), k.get("statefulset", "conv-trainer")
        return (
            netpol["spec"].get("egress", []) == []
            and roll["spec"]["template"]["spec"]["containers"][0]["image"] == "img"
            and sandbox["spec"]["replicas"] == 1
            and sts["spec"]["replicas"] == 1
        )

    wait_for(reverted, 30, "every hand edit reverted")
    drift = [e["message"] for e in k.events("conv") if e["reason"] == "DriftCorrected"]
    for child in ("NetworkPolicy conv-sandbox-egress", "Deployment conv-rollout", "Deployment conv-sandbox",
                  "StatefulSet conv-trainer"):  # fmt: skip
        assert any(child in m for m in drift), (child, drift)
    # ranks beyond the world size never had their gang gate lifted
    for pod in k.items("pods", "rlop.dev/pool=trainer"):
        if int(pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"]) >= 1:
            assert pod["spec"].get("schedulingGates"), pod["metadata"]["name"]
    time.sleep(3)  # steady again: no more corrections
    before = len(drift)
    time.sleep(3)
    assert sum(r == "DriftCorrected" for r in reasons(k, "conv")) == before


def test_a_change_of_replicas_alone_is_one_scale_write_and_the_template_is_untouched(
    k: Kubectl, operator: Operator
) -> None:
    applied(k, "sc")
    time.sleep(2)
    before, scales = k.get("deployment", "sc-rollout"), operator.metric("rlop_api_writes_total", 'kind="scale"')
    k("patch", "rljob", "sc", "--type=merge", "-p", json.dumps({"spec": {"pools": {"rollout": {"replicas": 3}}}}))
    wait_for(lambda: k.get("deployment", "sc-rollout")["spec"]["replicas"] == 3, 30, "the rollout scaled to 3")
    time.sleep(3)  # a pass that took the scale for a hand edit would re-apply now
    after = k.get("deployment", "sc-rollout")
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1  # one write, as rlop expects
    assert after["spec"]["template"] == before["spec"]["template"]
    assert after["metadata"]["annotations"] == before["metadata"]["annotations"]  # the same rendering
    shown = json.loads(k("get", "deployment", "sc-rollout", "-o", "json", "--show-managed-fields").stdout)
    assert any(f.get("subresource") == "scale" and f["manager"] == "rlop" for f in shown["metadata"]["managedFields"])
    assert operator.metric("rlop_api_writes_total", 'kind="scale"') == scales + 1
    events = [(e["reason"], e["message"]) for e in k.events("sc")]
    assert ("Updated", "Updated Deployment sc-rollout: replicas 1 -> 3") in events, events
    assert "DriftCorrected" not in reasons(k, "sc")


def test_objects_rlop_did_not_create_are_never_touched(k: Kubectl, operator: Operator) -> None:
    mine = {"rlop.dev/job": "own", "rlop.dev/pool": "tensorboard"}
    k.apply({"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": "own-tensorboard", "labels": mine},
             "spec": {"replicas": 1, "selector": {"matchLabels": mine},
                      "template": {"metadata": {"labels": mine},
                                   "spec": {"containers": [{"name": "tb", "image": "tb"}]}}}})  # fmt: skip
    k.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "own-rollout"},
             "spec": {"selector": {"app": "mine"}, "ports": [{"port": 1234}]}})  # fmt: skip
    k.apply(job("own"))
    cond = wait_for(lambda: synced(k, "own").get("status") == "False" and synced(k, "own"), 60, "Synced=False")
    assert "Service own-rollout already exists" in cond["message"], cond
    wait_for(lambda: k.get("statefulset", "own-trainer"), 30, "the other children are created")
    time.sleep(3)
    svc = k.get("service", "own-rollout")
    assert svc["spec"]["selector"] == {"app": "mine"} and not svc["metadata"].get("ownerReferences"), svc
    assert k.get("deployment", "own-tensorboard") is not None  # labelled as rlop's, but not owned: kept
    events = k.events("own")
    assert not any("Service own-rollout" in e["message"] and e["reason"] == "Created" for e in events), events
    assert sum(e["reason"] == "ApplyFailed" for e in events) == 1  # once, not every pass


def test_edits_made_while_rlop_was_down_are_reverted_and_fields_it_does_not_set_stay(
    k: Kubectl, operator: Operator
) -> None:
    applied(k, "down")
    operator.stop()
    try:
        k("scale", "deployment/down-rollout", "--replicas=3")
        k("rollout", "restart", "deployment/down-sandbox")  # a template annotation rlop does not set
        k("label", "service", "down-rollout", "rlop.dev/job-")  # rlop's own label removed
    finally:
        operator.start()

    def converged() -> bool:
        svc = k.get("service", "down-rollout")
        return (
            k.get("deployment", "down-rollout")["spec"]["replicas"] == 1
            and svc["metadata"]["labels"].get("rlop.dev/job") == "down"
        )

    wait_for(converged, 30, "the edit made while rlop was down reverted, its label back")
    assert any("Deployment down-rollout" in e["message"] for e in k.events("down") if e["reason"] == "DriftCorrected")
    time.sleep(3)
    annotations = k.get("deployment", "down-sandbox")["spec"]["template"]["metadata"].get("annotations", {})
    assert "kubectl.kubernetes.io/restartedAt" in annotations  # not rlop's field: kept
