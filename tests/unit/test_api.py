"""The API models, the generated CRD and the repository layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from rlop.api.crd import rljob_crd, rljob_crd_yaml
from rlop.api.models import RLJob
from rlop.plan.job import base_replicas
from rlop.plan.render import render

ROOT = Path(__file__).resolve().parents[2]


def test_operator_folder_is_not_a_package() -> None:
    # a top-level package named `operator` would shadow the standard library
    assert not (ROOT / "operator" / "__init__.py").exists()


def test_committed_crds_match_the_models() -> None:
    generated = rljob_crd_yaml()
    assert (ROOT / "crds" / "rljobs.rlop.dev.yaml").read_text() == generated, "run `make crd`"
    assert (ROOT / "charts" / "rlop" / "crds" / "rljobs.rlop.dev.yaml").read_text() == generated, "run `make crd`"


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        out.append((path, node))
        for key, value in node.items():
            out += _walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _walk(value, f"{path}[{i}]")
    return out


def test_crd_schema_is_structural() -> None:
    schema = rljob_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    forbidden = {"$ref", "$defs", "anyOf", "oneOf", "allOf", "const", "uniqueItems", "title", "definitions"}
    for path, node in _walk(schema):
        if path.endswith(".properties") or path.endswith(".x-kubernetes-validations"):
            continue
        assert not forbidden & node.keys(), f"{path}: {forbidden & node.keys()}"
        assert node.get("type") != "null", path
        assert not ("properties" in node and "additionalProperties" in node), path
        if "properties" in node or "items" in node:
            assert "type" in node, f"{path} has no type"


def test_crd_has_status_subresource_columns_and_cel_rules() -> None:
    version = rljob_crd()["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    columns = [c["name"] for c in version["additionalPrinterColumns"]]
    assert columns[:5] == ["Phase", "Trainer", "Rollout", "Reward", "Sandbox"]
    text = yaml.safe_dump(version)
    assert "minReplicas <= self.maxReplicas" in text
    assert "mutually exclusive" in text


def test_example_rljob_parses() -> None:
    job = RLJob.model_validate(yaml.safe_load((ROOT / "examples" / "rljob.yaml").read_text()))
    assert job.spec.pools.trainer.replicas == 2
    assert job.spec.pools.sandbox is not None
    assert job.spec.pools.sandbox.placement.strategy == "harvest-idle-cpu"


def _job(**pools: Any) -> dict[str, Any]:
    base = {"trainer": {"replicas": 1, "template": {"spec": {"containers": [{"name": "t", "image": "x"}]}}}}
    base["rollout"] = {"template": {"spec": {"containers": [{"name": "r", "image": "x"}]}}}
    return {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": "j"},
            "spec": {"pools": {**base, **pools}}}  # fmt: skip


def test_unknown_fields_are_refused_and_pod_template_fields_pass_through() -> None:
    with pytest.raises(ValidationError):
        RLJob.model_validate(_job(bogus={}))
    tpl = {"spec": {"containers": [{"name": "r", "image": "x", "command": ["a"]}], "hostNetwork": False}}
    job = RLJob.model_validate(_job(rollout={"template": tpl}))
    dumped = job.spec.pools.rollout.template.model_dump(mode="json", exclude_none=True)
    assert dumped["spec"]["hostNetwork"] is False
    assert dumped["spec"]["containers"][0]["command"] == ["a"]


def test_the_version_is_the_same_everywhere() -> None:
    """pyproject's version is the chart's version and appVersion (the operator image's tag)."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]["version"]
    chart = yaml.safe_load((root / "charts" / "rlop" / "Chart.yaml").read_text())
    assert project == chart["version"] == chart["appVersion"]


def test_the_slime_example_parses_and_renders() -> None:
    body = yaml.safe_load((ROOT / "examples" / "frameworks" / "slime-rljob.yaml").read_text())
    job = RLJob.model_validate(body)
    rollout = job.spec.pools.rollout
    assert rollout.weights is not None and rollout.router is not None and rollout.autoscale is None
    assert rollout.weights.path_of(7) == "/weights/sync/7"
    names = {(m["kind"], m["metadata"]["name"]) for m in render(job, base_replicas(job))}
    assert ("Deployment", "slime-qwen3-4b-rollout-router") in names
