"""Invalid RLJobs are refused by the API server itself, with a message naming the field."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import Kubectl
from tests.invalid_cases import base, cases

pytestmark = pytest.mark.cluster


def test_the_base_of_the_corpus_is_valid(k: Kubectl) -> None:
    k.apply(base())
    k("delete", "rljob", "bad")


@pytest.mark.parametrize(("name", "job", "expect"), cases(), ids=[c[0] for c in cases()])
def test_invalid_rljob_is_refused_with_the_field_named(
    k: Kubectl, name: str, job: dict[str, Any], expect: list[str]
) -> None:
    out = k.apply(job, check=False)
    assert out.returncode != 0, f"{name} was accepted"
    for text in expect:
        assert text in out.stderr, out.stderr
    assert k.get("rljobs").get("items") == []


def test_what_only_the_api_server_of_a_child_can_tell_is_reported_and_isolated(k: Kubectl, operator: Any) -> None:
    """A label key the RLJob schema passes but a Deployment refuses: Synced=False on that job only."""
    from tests.conftest import wait_for

    bad = base()
    bad["metadata"]["name"] = "bad-labels"
    bad["spec"]["pools"]["rollout"]["template"]["metadata"] = {"labels": {"not a valid key!": "x"}}
    good = base()
    good["metadata"]["name"] = "good"
    good["spec"]["pools"]["rollout"] = {"replicas": 1, "template": good["spec"]["pools"]["rollout"]["template"]}
    good["spec"]["pools"]["sandbox"]["placement"] = {"strategy": "default"}
    k.apply(bad)
    k.apply(good)

    def synced(name: str) -> dict[str, Any]:
        conds = ((k.get("rljob", name) or {}).get("status") or {}).get("conditions", [])
        return next((c for c in conds if c["type"] == "Synced"), {})

    cond = wait_for(lambda: synced("bad-labels").get("status") == "False" and synced("bad-labels"), 60, "Synced=False")
    assert cond["reason"] == "ApplyFailed" and "spec.template.labels" in cond["message"], cond
    assert k.get("rljob", "bad-labels")["status"]["phase"] == "Error"
    time.sleep(3)
    events = k.events("bad-labels")
    assert sum(e["reason"] == "ApplyFailed" for e in events) == 1  # once, not every pass
    assert "Created Deployment bad-labels-rollout" not in [e["message"] for e in events]  # it was not
    wait_for(lambda: (k.get("rljob", "good") or {}).get("status", {}).get("phase") == "Running", 60, "good job runs")
    assert k.get("statefulset", "bad-labels-trainer") is not None  # the bad job's other pools keep working
