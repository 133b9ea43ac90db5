"""The child objects an RLJob implies (pure): one workload and one Service per pool.

Every child has a deterministic name, the ``rlop.dev/job``/``rlop.dev/pool`` labels, a controller owner
reference to the RLJob, and a ``rlop.dev/spec-hash`` annotation of its own rendering, so an unchanged child
is recognised without a write.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from rlop.api.models import API_VERSION, KIND, RLJob
from rlop.api.names import (
    DRAIN_ANNOTATION,
    DRAIN_DIR,
    DRAIN_ENV,
    DRAIN_VOLUME,
    GANG_GATE,
    HARVEST_LABEL,
    HASH_ANNOTATION,
    HOSTNAME,
    JOB_LABEL,
    MANAGED_BY,
    POOL_LABEL,
)
from rlop.api.pools import AnyPool
from rlop.api.pools import pools as all_pools

Manifest = dict[str, Any]


def child_name(job: str, pool: str) -> str:
    return f"{job}-{pool}"


def selector(job: str, pool: str) -> dict[str, str]:
    return {JOB_LABEL: job, POOL_LABEL: pool}


def pool_labels(job: str, pool: str) -> dict[str, str]:
    return {
        **selector(job, pool),
        **MANAGED_BY,
        "app.kubernetes.io/instance": job,
        "app.kubernetes.io/component": pool,
    }


def spec_hash(manifest: Manifest) -> str:
    body = json.dumps(manifest, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def discovery_env(job: RLJob, pool: str) -> list[dict[str, Any]]:
    """Environment variables that let each pool find the others (only pools that exist)."""
    name, ns, pools = job.metadata.name, job.metadata.namespace, job.spec.pools
    env: list[dict[str, Any]] = [
        {"name": "RLOP_JOB", "value": name},
        {"name": "RLOP_NAMESPACE", "value": ns},
        {"name": "RLOP_POOL", "value": pool},
        {
            "name": "RLOP_TRAINER_ADDR",
            "value": f"{child_name(name, 'trainer')}-0.{child_name(name, 'trainer')}.{ns}.svc:{pools.trainer.port}",
        },
    ]
    for kind, spec in all_pools(job):
        if not kind.headless:  # a headless pool is found by the address of its rank 0
            url = f"http://{child_name(name, kind.name)}.{ns}.svc:{spec.port}"
            env.append({"name": f"RLOP_{kind.name.upper()}_URL", "value": url})
    if pool == "trainer":  # world size only here: resizing the gang must not roll the other pools
        index = "metadata.labels['apps.kubernetes.io/pod-index']"
        env.append({"name": "RLOP_TRAINER_REPLICAS", "value": str(pools.trainer.replicas)})
        env.append({"name": "RLOP_TRAINER_RANK", "valueFrom": {"fieldRef": {"fieldPath": index}}})
    return env


def _pod_template(job: RLJob, pool: str, template: Any) -> Manifest:
    """The user's template plus rlop's labels and discovery env (the user's own env vars win)."""
    tpl: Manifest = copy.deepcopy(template.model_dump(mode="json", exclude_none=True))
    meta = tpl.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), **pool_labels(job.metadata.name, pool)}
    ours = discovery_env(job, pool)
    for container in tpl["spec"]["containers"]:
        theirs = container.get("env", [])
        taken = {e["name"] for e in theirs}
        container["env"] = [e for e in ours if e["name"] not in taken] + theirs
    return tpl


def _metadata(job: RLJob, pool: str) -> Manifest:
    return {
        "name": child_name(job.metadata.name, pool),
        "namespace": job.metadata.namespace,
        "labels": pool_labels(job.metadata.name, pool),
        "ownerReferences": [
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": job.metadata.name,
                "uid": job.metadata.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }


def _stamped(manifest: Manifest) -> Manifest:
    manifest["metadata"].setdefault("annotations", {})[HASH_ANNOTATION] = spec_hash(manifest)
    return manifest


def trainer_statefulset(job: RLJob, replicas: int) -> Manifest:
    """Trainers: a StatefulSet whose pods start behind a scheduling gate that rlop lifts for all at once.

    ``OnDelete`` updates: a changed template restarts the whole gang together (rlop deletes the pods),
    never a mix of old and new ranks.
    """
    trainer = job.spec.pools.trainer
    tpl = _pod_template(job, "trainer", trainer.template)
    tpl["spec"]["schedulingGates"] = [{"name": GANG_GATE}]
    tpl["spec"].setdefault("subdomain", child_name(job.metadata.name, "trainer"))
    return _stamped(
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": _metadata(job, "trainer"),
            "spec": {
                "replicas": replicas,
                "serviceName": child_name(job.metadata.name, "trainer"),
                "podManagementPolicy": "Parallel",
                "updateStrategy": {"type": "OnDelete"},
                "selector": {"matchLabels": selector(job.metadata.name, "trainer")},
                "template": tpl,
            },
        }
    )


_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _harden_container(container: Manifest) -> None:
    """Forced in every sandbox container (init containers too): what admission did not already refuse."""
    sec = container.setdefault("securityContext", {})
    sec.update(
        allowPrivilegeEscalation=False, privileged=False, readOnlyRootFilesystem=True, runAsNonRoot=True,
        capabilities={"drop": ["ALL"]},
    )  # fmt: skip
    if sec.get("runAsUser") == 0:
        del sec["runAsUser"]  # the pod's non-root user applies
    resources = container.setdefault("resources", {})
    limits = resources.setdefault("limits", {})
    for key in ("cpu", "memory"):
        if key in resources.get("requests", {}):
            limits.setdefault(key, resources["requests"][key])
    handlers = [container.get(p) for p in _PROBES]
    handlers += (container.get("lifecycle") or {}).values()
    for handler in filter(None, handlers):
        for action in ("httpGet", "tcpSocket"):
            (handler.get(action) or {}).pop("host", None)  # probes reach the pod itself, not other hosts
    mounts = container.setdefault("volumeMounts", [])
    if not any(m.get("mountPath") == "/tmp" for m in mounts):
        mounts.append({"name": "tmp", "mountPath": "/tmp"})


def harden(tpl: Manifest, priority_class: str | None = None) -> Manifest:
    """Lock a sandbox pod template down to the `restricted` Pod Security Standard: untrusted code runs
    there. What cannot be forced safe (host namespaces, hostPath, privileged, ...) the CRD refuses."""
    spec = tpl["spec"]
    spec.update(
        automountServiceAccountToken=False, enableServiceLinks=False, hostNetwork=False, hostPID=False, hostIPC=False
    )
    ctx = spec.setdefault("securityContext", {})
    ctx["runAsNonRoot"] = True
    if (ctx.get("seccompProfile") or {}).get("type") != "Localhost":
        ctx["seccompProfile"] = {"type": "RuntimeDefault"}
    if ctx.get("runAsUser") in (None, 0):
        ctx["runAsUser"] = 65532
    ctx.setdefault("runAsGroup", 65532)
    if priority_class:
        spec["priorityClassName"] = priority_class
    volumes = spec.setdefault("volumes", [])
    if not any(v.get("name") == "tmp" for v in volumes):
        volumes.append({"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}})
    for container in [*spec["containers"], *spec.get("initContainers", [])]:  # ephemeral ones: refused
        _harden_container(container)
    return tpl


def sandbox_template(job: RLJob) -> Manifest:
    sandbox = job.spec.pools.sandbox
    assert sandbox is not None
    return harden(_pod_template(job, "sandbox", sandbox.template), sandbox.placement.priority_class_name
                  if sandbox.placement.strategy == "harvest-idle-cpu" else None)  # fmt: skip


def sandbox_pod(job: RLJob, name: str, node: str) -> Manifest:
    """A harvested sandbox pod, pinned to `node` by a required hostname affinity (the scheduler still
    checks the fit, and preempts it for any normal-priority pod)."""
    tpl = sandbox_template(job)
    meta = _metadata(job, "sandbox")
    meta["name"] = name
    meta["labels"] = {**tpl.get("metadata", {}).get("labels", {}), HARVEST_LABEL: "true"}
    if tpl.get("metadata", {}).get("annotations"):
        meta["annotations"] = dict(tpl["metadata"]["annotations"])
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
    tpl["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    _drain_mark(tpl["spec"])
    return _stamped({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tpl["spec"]})


def _drain_mark(spec: Manifest) -> None:
    """Let every container read the pod's drain mark (rlop.dev/drain, empty until rlop drains the pod) at
    DRAIN_DIR/drain, a downward API file the kubelet updates in place, named by RLOP_DRAIN_FILE; a container
    that mounts something else at DRAIN_DIR keeps it, and gets neither."""
    item = {"path": "drain", "fieldRef": {"fieldPath": f"metadata.annotations['{DRAIN_ANNOTATION}']"}}
    volumes = [v for v in spec.get("volumes", []) if v.get("name") != DRAIN_VOLUME]
    spec["volumes"] = [*volumes, {"name": DRAIN_VOLUME, "downwardAPI": {"items": [item]}}]
    for container in spec["containers"]:
        mounts = [m for m in container.get("volumeMounts", []) if m.get("name") != DRAIN_VOLUME]
        container["volumeMounts"] = mounts
        if any(m.get("mountPath") == DRAIN_DIR for m in mounts):
            continue
        mounts.append({"name": DRAIN_VOLUME, "mountPath": DRAIN_DIR, "readOnly": True})
        env = [e for e in container.get("env", []) if e.get("name") != DRAIN_ENV]
        container["env"] = [*env, {"name": DRAIN_ENV, "value": f"{DRAIN_DIR}/drain"}]


def pool_deployment(job: RLJob, pool: str, spec: AnyPool, replicas: int) -> Manifest:
    template = sandbox_template(job) if pool == "sandbox" else _pod_template(job, pool, spec.template)
    return _stamped(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _metadata(job, pool),
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": selector(job.metadata.name, pool)},
                "template": template,
            },
        }
    )


def pool_service(job: RLJob, pool: str, port: int, headless: bool) -> Manifest:
    spec: Manifest = {
        "selector": selector(job.metadata.name, pool),
        "ports": [{"name": "main", "port": port, "targetPort": port, "protocol": "TCP"}],
    }
    if headless:  # ranks find each other by stable DNS names, ready or not
        spec |= {"clusterIP": "None", "publishNotReadyAddresses": True}
    return _stamped({"apiVersion": "v1", "kind": "Service", "metadata": _metadata(job, pool), "spec": spec})


def sandbox_egress_policy(job: RLJob) -> Manifest:
    """Sandbox pods run untrusted code: deny all their egress (they still answer their callers)."""
    spec = {
        "podSelector": {"matchLabels": selector(job.metadata.name, "sandbox")},
        "policyTypes": ["Egress"],
        "egress": [],
    }
    meta = _metadata(job, "sandbox")
    meta["name"] = f"{meta['name']}-egress"
    return _stamped({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta, "spec": spec})


def harvests(job: RLJob) -> bool:
    """Does rlop place this job's sandbox pods itself (on idle CPU)?"""
    sandbox = job.spec.pools.sandbox
    return sandbox is not None and sandbox.placement.strategy == "harvest-idle-cpu"


def render(job: RLJob, replicas: Mapping[str, int]) -> list[Manifest]:
    """All children of `job`, given the replica count chosen for each pool."""
    out = []
    for kind, spec in all_pools(job):
        if kind.workload == "StatefulSet":
            out.append(trainer_statefulset(job, replicas[kind.name]))
        elif not (kind.may_harvest and harvests(job)):  # harvested pods are placed one by one, not here
            out.append(pool_deployment(job, kind.name, spec, replicas[kind.name]))
        out.append(pool_service(job, kind.name, spec.port, headless=kind.headless))
    pools = job.spec.pools
    if pools.sandbox is not None and pools.sandbox.egress == "deny":
        out.append(sandbox_egress_policy(job))
    return out
