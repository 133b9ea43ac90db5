"""The pool registry is the one list of pool kinds: every consumer covers every kind in it, so a kind added
to the table (and to `Pools`) that some consumer misses fails here."""

from __future__ import annotations

from datetime import UTC, datetime

from rlop.api.crd import rljob_crd
from rlop.api.models import Pools
from rlop.api.pools import KINDS, POOL_NAMES, autoscaled
from rlop.plan.autoscale import Reading
from rlop.plan.job import base_replicas
from rlop.plan.render import child_name, discovery_env, render
from rlop.plan.scaling import plan_scaling

from .builders import container, job

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def every_pool(strategy: str = "default"):  # type: ignore[no-untyped-def]
    auto = {"maxReplicas": 9, "metrics": [{"query": "q", "target": {"type": "Value", "value": 1}}]}
    tpl = {"spec": {"containers": [container(requests={"cpu": 1, "memory": "1Gi"})]}}
    extra = {k.name: {"template": tpl} for k in KINDS if k.name not in ("trainer", "rollout")}
    for k in KINDS:
        if k.may_autoscale:
            extra[k.name] = {"template": tpl, "autoscale": auto}
    extra["sandbox"]["placement"] = {"strategy": strategy}
    return job(**extra)


def test_the_registry_and_the_model_agree() -> None:
    assert tuple(Pools.model_fields) == POOL_NAMES


def test_every_consumer_covers_every_pool_kind() -> None:
    j = every_pool()
    replicas = base_replicas(j)
    assert tuple(replicas) == POOL_NAMES
    objects = {(m["kind"], m["metadata"]["name"]): m for m in render(j, replicas)}
    env = {e["name"] for e in discovery_env(j, "trainer")}
    for kind in KINDS:
        name = child_name("j", kind.name)
        assert (kind.workload, name) in objects, kind
        service = objects[("Service", name)]
        assert (service["spec"].get("clusterIP") == "None") == kind.headless, kind
        assert kind.headless or f"RLOP_{kind.name.upper()}_URL" in env, kind
    scaled = [name for name, _, _ in autoscaled(j)]
    assert scaled == [k.name for k in KINDS if k.may_autoscale]
    readings = {(name, 0): Reading(4.0) for name in scaled}
    decision = plan_scaling(j, replicas, [], readings, {}, NOW)
    assert all(decision.replicas[name] == 4 for name in scaled), decision.replicas
    columns = {c["name"] for c in rljob_crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert {k.name.capitalize() for k in KINDS if k.column} <= columns


def test_a_harvested_pool_renders_no_workload() -> None:
    j = every_pool("harvest-idle-cpu")
    objects = {(m["kind"], m["metadata"]["name"]) for m in render(j, base_replicas(j))}
    for kind in KINDS:
        assert ((kind.workload, child_name("j", kind.name)) in objects) != kind.may_harvest, kind
