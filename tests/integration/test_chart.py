"""The Helm chart: lint, render, server-side dry-run of every manifest, and the operator running under
the chart's own ServiceAccount and RBAC (proving it is sufficient, and that unneeded verbs are denied)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rlop.api.models import HARVEST_PRIORITY_CLASS
from rlop.dev.cluster import DevCluster, binary
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.prometheus import DevPrometheus, Exporter
from tests.conftest import ROOT, Kubectl, wait_for

pytestmark = pytest.mark.cluster
CHART = ROOT / "charts" / "rlop"
VARIANTS = {
    "defaults": [],
    "everything": ["--set", "prometheus.enabled=true", "--set", "grafanaDashboard.enabled=true",
                   "--set", "metrics.serviceMonitor.enabled=true"],
    "namespaced": ["--set", "watchNamespaces={team-a,team-b}"],
}  # fmt: skip


def helm(*args: str) -> str:
    return subprocess.run([binary("helm"), *args], capture_output=True, text=True, check=True).stdout


def render(*values: str, namespace: str = "rlop-system", release: str = "rlop") -> list[dict[str, Any]]:
    out = helm("template", release, str(CHART), "--namespace", namespace, *values)
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_helm_lint_strict(variant: str) -> None:
    helm("lint", "--strict", str(CHART), *VARIANTS[variant])


def test_values_schema_refuses_typos() -> None:
    out = subprocess.run([binary("helm"), "template", "rlop", str(CHART), "--set", "intervall=3"],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode != 0 and "intervall" in out.stderr


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_rendered_manifest_passes_server_side_dry_run(cluster: DevCluster, variant: str) -> None:
    for ns in ("rlop-system", "team-a", "team-b"):
        cluster.kubectl("create", "namespace", ns, check=False)
    docs = render(*VARIANTS[variant])
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "PriorityClass"} <= kinds
    dry_run = ("apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=helm", "-f", "-")
    cluster.kubectl(*dry_run, stdin=yaml.safe_dump_all(docs))


def test_operator_deployment_is_hardened() -> None:
    deploy = next(d for d in render() if d["kind"] == "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert {p["name"] for p in container["ports"]} == {"metrics", "health"}


def test_rbac_has_no_wildcards() -> None:
    for variant in VARIANTS.values():
        for doc in render(*variant):
            for rule in doc.get("rules", []):
                assert "*" not in rule.get("verbs", []) and "*" not in rule.get("resources", []), rule


def test_the_charts_priority_class_is_the_one_rlop_renders_for() -> None:
    (chart,) = [d for d in render() if d["kind"] == "PriorityClass"]
    chart["metadata"].pop("labels")
    assert chart == HARVEST_PRIORITY_CLASS


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def install_rbac(cluster: DevCluster, docs: list[dict[str, Any]]) -> None:
    """Apply for real what the chart grants its ServiceAccount."""
    cluster.apply([d for d in docs if d["kind"] in RBAC_KINDS])


@pytest.fixture(scope="module")
def chart_sa(cluster: DevCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The chart's ServiceAccount and RBAC installed for real; a kubeconfig with its token."""
    cluster.kubectl("create", "namespace", "rlop-system", check=False)
    install_rbac(cluster, render())
    token = cluster.kubectl("-n", "rlop-system", "create", "token", "rlop", "--duration=2h").stdout.strip()
    yield cluster.kubeconfig_for(token, tmp_path_factory.mktemp("sa") / "kubeconfig")


def can_i(cluster: DevCluster, *args: str) -> bool:
    out = cluster.kubectl("auth", "can-i", "--as=system:serviceaccount:rlop-system:rlop", *args, check=False)
    return out.stdout.strip() == "yes"


@pytest.mark.parametrize(
    "verb",
    [
        ("delete", "nodes"), ("patch", "nodes"), ("get", "secrets", "-A"), ("list", "configmaps", "-A"),
        ("create", "clusterroles"), ("update", "rljobs.rlop.dev", "-A"), ("delete", "rljobs.rlop.dev", "-A"),
        ("create", "pods", "--subresource=exec", "-A"), ("update", "deployments", "-A"),
        ("create", "serviceaccounts", "--subresource=token", "-A"),
    ],
)  # fmt: skip
def test_unneeded_verbs_are_denied(cluster: DevCluster, chart_sa: Path, verb: tuple[str, ...]) -> None:
    assert not can_i(cluster, *verb)


def test_needed_verbs_are_granted(cluster: DevCluster, chart_sa: Path) -> None:
    needed = [("watch", "nodes"), ("list", "pods", "-A"), ("patch", "rljobs.rlop.dev", "--subresource=status"),
              ("create", "pods", "--subresource=eviction"), ("patch", "deployments"), ("create", "events"),
              ("patch", "deployments", "--subresource=scale"), ("patch", "statefulsets", "--subresource=scale"),
              ("patch", "pods", "--subresource=status")]  # fmt: skip
    for verb in needed:
        assert can_i(cluster, *verb), verb


def test_namespaced_mode_grants_only_the_watched_namespaces(cluster: DevCluster) -> None:
    for ns in ("rlop-ns", "team-a", "team-b"):
        cluster.kubectl("create", "namespace", ns, check=False)
    docs = render("--set", "watchNamespaces={team-a}", "--set", "harvestPriorityClass.create=false",
                  namespace="rlop-ns", release="scoped")  # fmt: skip
    install_rbac(cluster, docs)
    sa = "--as=system:serviceaccount:rlop-ns:scoped-rlop"

    def allowed(*args: str) -> bool:
        return cluster.kubectl("auth", "can-i", sa, *args, check=False).stdout.strip() == "yes"

    assert allowed("patch", "deployments", "-n", "team-a")
    assert not allowed("patch", "deployments", "-n", "team-b")
    assert not allowed("list", "rljobs.rlop.dev", "-A")
    assert allowed("list", "nodes")


def test_the_operator_works_under_the_charts_rbac(
    k: Kubectl, cluster: DevCluster, chart_sa: Path, prometheus: DevPrometheus, exporter: Exporter,
    tmp_path: Path, solo_paused: None,
) -> None:  # fmt: skip
    election = ("--leader-election", "--lease-namespace=rlop-system", "--identity=chart-sa")
    op = OperatorProcess(cluster, prometheus.url, tmp_path, 1.0, *election, kubeconfig=chart_sa).start()
    try:
        exporter.set("test_backlog", 30, namespace=k.ns, rljob="sa", pool="rollout")
        exporter.set("test_node_utilization", 0.0, node="cpu-0")
        query = 'sum(test_backlog{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"})'
        tpl = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "100m"}}}]}}
        requests = {"cpu": "500m", "memory": "256Mi"}
        sandbox = {"spec": {"containers": [{"name": "s", "image": "i", "resources": {"requests": requests}}]}}
        placement = {"nodeSelector": {"kubernetes.io/hostname": "cpu-0"},
                     "utilizationQuery": 'max by (node) (test_node_utilization{node="cpu-0"})'}  # fmt: skip
        metric = {"query": query, "target": {"type": "AverageValue", "value": 10}}
        k.apply({"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": "sa"}, "spec": {"pools": {
            "trainer": {"replicas": 2, "template": tpl},
            "rollout": {"template": tpl, "autoscale": {"minReplicas": 1, "maxReplicas": 5, "metrics": [metric]}},
            "sandbox": {"replicas": 2, "template": sandbox, "placement": placement},
        }}})  # fmt: skip

        def running() -> bool:
            status = (k.get("rljob", "sa") or {}).get("status", {})
            return status.get("phase") == "Running" and status["pools"]["rollout"]["desired"] == 3

        wait_for(running, 60, "Running with rollout scaled to 3 under the chart's RBAC")
        sandbox_pods = k.items("pods", "rlop.dev/pool=sandbox")
        assert len(sandbox_pods) == 2 and all(p["spec"]["nodeName"] == "cpu-0" for p in sandbox_pods)
        k("patch", "rljob", "sa", "--type=merge", "-p", '{"spec":{"pools":{"trainer":{"replicas":1}}}}')
        wait_for(lambda: len(k.items("pods", "rlop.dev/pool=trainer")) == 1, 60, "gang resized")
        k("delete", "rljob", "sa")
        lease = json.loads(cluster.kubectl("-n", "rlop-system", "get", "lease", "rlop-leader", "-o", "json").stdout)
        assert lease["spec"]["holderIdentity"] == "chart-sa"
        log = op.log_path.read_text()
        assert "is forbidden: User" not in log and "APIForbiddenError" not in log, log[-2000:]  # no RBAC denial
        token = yaml.safe_load(chart_sa.read_text())["users"][0]["user"]["token"]
        assert token not in log and token[-16:] not in log and "Bearer" not in log  # no secret ever logged
    finally:
        op.stop()


def test_namespaced_mode_runs_under_its_roles(
    cluster: DevCluster, prometheus: DevPrometheus, tmp_path: Path, solo_paused: None
) -> None:
    """watchNamespaces={team-x}: the operator acts there under its Role, and leaves other namespaces alone."""
    for ns in ("rlop-scoped", "team-x", "team-y"):
        cluster.kubectl("create", "namespace", ns, check=False)
    docs = render("--set", "watchNamespaces={team-x}", "--set", "harvestPriorityClass.create=false",
                  namespace="rlop-scoped", release="nsmode")  # fmt: skip
    install_rbac(cluster, docs)
    token = cluster.kubectl("-n", "rlop-scoped", "create", "token", "nsmode-rlop", "--duration=1h").stdout.strip()
    kubeconfig = cluster.kubeconfig_for(token, tmp_path / "kubeconfig")
    args = ("--namespace=team-x", "--leader-election", "--lease-namespace=rlop-scoped", "--identity=scoped")
    op = OperatorProcess(cluster, prometheus.url, tmp_path, 1.0, *args, kubeconfig=kubeconfig).start()
    tpl = {"spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "50m"}}}]}}
    pools = {"trainer": {"replicas": 1, "template": tpl}, "rollout": {"replicas": 2, "template": tpl}}
    job = {"apiVersion": "rlop.dev/v1alpha1", "kind": "RLJob", "metadata": {"name": "scoped"}, "spec": {"pools": pools}}
    try:
        for ns in ("team-x", "team-y"):
            cluster.kubectl("-n", ns, "apply", "-f", "-", stdin=yaml.safe_dump(job))

        def phase(ns: str) -> str | None:
            out = cluster.kubectl("-n", ns, "get", "rljob", "scoped", "-o", "jsonpath={.status.phase}")
            return out.stdout or None

        wait_for(lambda: phase("team-x") == "Running", 60, "the watched namespace's job Running")
        assert phase("team-y") is None  # not ours

        # pods in a namespace it does not watch still take capacity: a gang that cannot fit is held
        hog = {"containers": [{"name": "h", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}
        for i in range(2):
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"hog-{i}"}, "spec": hog}
            cluster.kubectl("-n", "team-y", "apply", "-f", "-", stdin=yaml.safe_dump(pod))
        bound = "jsonpath={.items[*].spec.nodeName}"
        wait_for(lambda: len(cluster.kubectl("-n", "team-y", "get", "pods", "-o", bound).stdout.split()) == 2, 30,
                 "the GPU hogs bound")  # fmt: skip
        gpu = {"spec": {"containers": [{"name": "t", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
        gang = {
            **job,
            "metadata": {"name": "gang"},
            "spec": {"pools": {**pools, "trainer": {"replicas": 1, "template": gpu}}},
        }
        cluster.kubectl("-n", "team-x", "apply", "-f", "-", stdin=yaml.safe_dump(gang))

        def gang_reason() -> str:
            path = 'jsonpath={.status.conditions[?(@.type=="GangScheduled")].reason}'
            return cluster.kubectl("-n", "team-x", "get", "rljob", "gang", "-o", path).stdout

        wait_for(lambda: gang_reason() == "InsufficientCapacity", 60, "the gang held: the GPUs are taken")
        cluster.kubectl("-n", "team-y", "delete", "pod", "hog-0", "hog-1", "--grace-period=0", "--force")
        wait_for(lambda: gang_reason() == "Scheduled", 60, "the gang released once the GPUs are free")
        log = op.log_path.read_text()
        assert "is forbidden: User" not in log and "APIForbiddenError" not in log, log[-2000:]
    finally:
        op.stop()
        for ns in ("team-x", "team-y"):
            cluster.kubectl("-n", ns, "delete", "rljob", "scoped", "gang", "--wait=false", check=False)
        cluster.kubectl("-n", "team-y", "delete", "pod", "hog-0", "hog-1", "--grace-period=0", "--force", check=False)
