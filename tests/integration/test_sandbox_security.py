"""Sandbox pods run untrusted, model-generated code: whatever the template asks (within what admission
accepts), every sandbox pod rlop creates passes the `restricted` Pod Security Standard, enforced by the
real API server's PodSecurity admission in a namespace labelled for it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from rlop.api.models import RLJob
from rlop.plan.render import pool_deployment, sandbox_pod
from tests.conftest import Kubectl, Operator, wait_for
from tests.invalid_cases import base, merge_patch

pytestmark = pytest.mark.cluster

REQUESTS = {"requests": {"cpu": "1", "memory": "1Gi"}}
WEAK = {"runAsNonRoot": False, "allowPrivilegeEscalation": True, "readOnlyRootFilesystem": False,
        "capabilities": {"drop": []}}  # fmt: skip
PROBE = {"httpGet": {"host": "169.254.169.254", "path": "/latest/meta-data", "port": 80}}

# Templates admission accepts that would each break `restricted` if rlop passed them through.
HOSTILE: dict[str, dict[str, Any]] = {
    "bare": {"containers": [{"name": "sandbox", "image": "img", "resources": REQUESTS}]},
    "weakened-everywhere": {
        "serviceAccountName": "powerful",
        "automountServiceAccountToken": False,
        "hostNetwork": False,
        "securityContext": {"runAsNonRoot": False, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{"name": "init", "image": "img", "resources": REQUESTS, "securityContext": WEAK}],
        "containers": [
            {
                "name": "sandbox",
                "image": "img",
                "resources": REQUESTS,
                "securityContext": {**WEAK, "capabilities": {"add": [], "drop": ["NET_RAW"]}},
                "livenessProbe": PROBE,
                "readinessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 22}},
                "lifecycle": {"preStop": PROBE},
                "ports": [{"containerPort": 8000, "hostPort": 0}],
            }
        ],
        "volumes": [
            {"name": "cfg", "configMap": {"name": "c"}},
            {"name": "scratch", "emptyDir": {}},
            {"name": "bundle", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
        ],
    },
    "localhost-profiles": {
        "securityContext": {
            "seccompProfile": {"type": "Localhost", "localhostProfile": "sandbox.json"},
            "appArmorProfile": {"type": "Localhost", "localhostProfile": "sandbox"},
            "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65000"}],
        },
        "containers": [
            {
                "name": "sandbox",
                "image": "img",
                "resources": REQUESTS,
                "securityContext": {"seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"}},
            }
        ],
    },
}


def hostile_job(case: str, strategy: str, name: str = "hostile") -> dict[str, Any]:
    sandbox = {"replicas": 2, "placement": {"strategy": strategy}, "template": {"spec": HOSTILE[case]}}
    return merge_patch(base(), {"metadata": {"name": name}, "spec": {"pools": {"sandbox": sandbox}}})


def as_pod(template: dict[str, Any], name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {**template.get("metadata", {}), "name": name},
            "spec": template["spec"]}  # fmt: skip


@pytest.fixture
def restricted(k: Kubectl) -> Kubectl:
    k.cluster.kubectl("label", "namespace", k.ns, "pod-security.kubernetes.io/enforce=restricted")
    k("create", "serviceaccount", "powerful")  # the hostile template asks for it; its token never mounts
    return k


def dry_run(k: Kubectl, pod: dict[str, Any]) -> str:
    out = k("create", "--dry-run=server", "-f", "-", stdin=yaml.safe_dump(pod), check=False)
    return out.stderr if out.returncode else ""


def test_the_namespace_really_enforces_restricted(restricted: Kubectl) -> None:
    pod = as_pod({"spec": HOSTILE["bare"]}, "unhardened")
    assert "violates PodSecurity" in dry_run(restricted, pod)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_every_sandbox_pod_rlop_renders_passes_restricted(restricted: Kubectl, case: str) -> None:
    """Both ways rlop makes sandbox pods, from the RLJob as the API server stored it (after defaulting)."""
    for strategy in ("harvest-idle-cpu", "default"):
        restricted.apply(hostile_job(case, strategy))  # accepted: nothing here is refused at admission
        job = RLJob.model_validate(restricted.get("rljob", "hostile"))
        pods = {
            "harvested": sandbox_pod(job, job.spec.pools.sandbox, "hostile-sandbox-x", "node-0"),
            "deployed": as_pod(
                copy.deepcopy(pool_deployment(job, "sandbox", job.spec.pools.sandbox, 1))["spec"]["template"],
                "hostile-sandbox-y",
            ),
        }
        for how, pod in pods.items():
            assert dry_run(restricted, pod) == "", f"{case} ({strategy}, {how})"


def test_the_operator_creates_hostile_sandbox_pods_that_pass_restricted(
    restricted: Kubectl, operator: Operator
) -> None:
    """End to end: the ReplicaSet controller creates the sandbox pods; PodSecurity admits every one."""
    job = hostile_job("weakened-everywhere", "default", name="enforced")
    job["spec"]["pools"]["rollout"] = {"replicas": 0, "template": job["spec"]["pools"]["rollout"]["template"]}
    restricted.apply(job)
    pods = wait_for(lambda: len(p := restricted.items("pods", "rlop.dev/pool=sandbox")) == 2 and p, 60,
                    "2 sandbox pods admitted")  # fmt: skip
    for pod in pods:
        ctx = pod["spec"]["initContainers"][0]["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"] == {"drop": ["ALL"]}
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert "host" not in pod["spec"]["containers"][0]["livenessProbe"]["httpGet"]
