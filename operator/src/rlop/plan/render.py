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

from rlop.api.models import API_VERSION, KIND, RLJob, Router, SandboxPool, ServingPool, Weights
from rlop.api.names import (
    CHECKPOINT_NOW_ANNOTATION,
    CHECKPOINT_NOW_ENV,
    CHECKPOINT_NOW_VOLUME,
    CHECKPOINT_VOLUME,
    DRAIN_ANNOTATION,
    DRAIN_ENV,
    DRAIN_VOLUME,
    GANG_GATE,
    GROUP_LABEL,
    HARVEST_LABEL,
    HASH_ANNOTATION,
    HOSTNAME,
    JOB_LABEL,
    MANAGED_BY,
    MARK_DIR,
    MEMBERS_SUFFIX,
    PODGROUP_API,
    POOL_LABEL,
    RANK_LABEL,
    RANKS_SUFFIX,
    RESTARTS_ANNOTATION,
    ROUTER_SUFFIX,
    WEIGHTS_GATE,
    WEIGHTS_VOLUME,
)
from rlop.api.pools import HARVESTED, AnyPool, harvested, serving
from rlop.api.pools import pools as all_pools

Manifest = dict[str, Any]


def child_name(job: str, pool: str) -> str:
    return f"{job}-{pool}"


def members_name(job: str, pool: str) -> str:
    """The headless Service whose DNS lists a serving pool's Ready replicas (one name per pod too)."""
    return child_name(job, f"{pool}-{MEMBERS_SUFFIX}")


def router_name(job: str, pool: str) -> str:
    """A serving pool's router: its Deployment, its Service and the pool label of its pods."""
    return child_name(job, f"{pool}-{ROUTER_SUFFIX}")


def ranks_name(job: str, pool: str) -> str:
    """The headless Service that names every rank of a grouped pool, Ready or not (the leaders' DNS)."""
    return child_name(job, f"{pool}-{RANKS_SUFFIX}")


def group_pod_name(job: str, pool: str, group: int, rank: int) -> str:
    return child_name(job, f"{pool}-{group}-{rank}")


def leader_address(job: RLJob, pool: str, spec: ServingPool, group: int) -> str:
    """Where the ranks of a group meet its leader: a name DNS resolves before the leader is Ready."""
    name, ns = job.metadata.name, job.metadata.namespace
    return f"{group_pod_name(name, pool, group, 0)}.{ranks_name(name, pool)}.{ns}.svc:{spec.rendezvous_port}"


def router_url(job: RLJob, pool: str, port: int) -> str:
    return f"http://{router_name(job.metadata.name, pool)}.{job.metadata.namespace}.svc:{port}"


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
    """A digest of the rendering, but its replica count: a change of replicas alone is a scale, written
    through the /scale subresource, not a new rendering."""
    if "replicas" in (manifest.get("spec") or {}):
        manifest = {**manifest, "spec": {k: v for k, v in manifest["spec"].items() if k != "replicas"}}
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
        var = f"RLOP_{kind.name.upper()}"
        if isinstance(spec, ServingPool) and spec.router is not None:  # the router is the pool's entry point
            env.append({"name": f"{var}_URL", "value": router_url(job, kind.name, spec.router.port)})
        elif not kind.headless:  # a headless pool is found by the address of its rank 0
            env.append({"name": f"{var}_URL", "value": f"http://{child_name(name, kind.name)}.{ns}.svc:{spec.port}"})
        if isinstance(spec, ServingPool) and spec.per_replica:
            env.append({"name": f"{var}_MEMBERS", "value": f"{members_name(name, kind.name)}.{ns}.svc"})
            env.append({"name": f"{var}_MEMBERS_PORT", "value": str(spec.port)})  # each replica's server
            if spec.weights is not None and pool != "trainer":  # the trainer's pods do not roll when it changes
                env.append({"name": f"{var}_MAX_STALENESS", "value": str(spec.weights.max_staleness)})
    if dirs := weights_mounts(job, pool):
        env.append({"name": "RLOP_WEIGHTS_DIR", "value": dirs[0][1].mount_path})
    if pool == "trainer":  # world size only here: resizing the gang must not roll the other pools
        index = "metadata.labels['apps.kubernetes.io/pod-index']"
        env.append({"name": "RLOP_TRAINER_REPLICAS", "value": str(pools.trainer.replicas)})
        env.append({"name": "RLOP_TRAINER_RANK", "valueFrom": {"fieldRef": {"fieldPath": index}}})
    return env


def weights_mounts(job: RLJob, pool: str) -> list[tuple[str, Weights]]:
    """The serving pools whose weights volume `pool`'s pods mount: the trainer writes every one (one per
    mount path), a serving pool reads its own."""
    if pool == "trainer":
        seen: dict[str, tuple[str, Weights]] = {}
        for name, spec in serving(job):
            if spec.weights is not None:
                seen.setdefault(spec.weights.mount_path, (name, spec.weights))
        return list(seen.values())
    mine = dict(serving(job)).get(pool)
    return [(pool, mine.weights)] if mine is not None and mine.weights is not None else []


def _mount_weights(job: RLJob, pool: str, spec: Manifest) -> None:
    """The checkpoints' volumes: read-write in the trainer, read-only in the serving pool; a serving pod is
    Ready only once rlop has set its readiness gate (it serves a current version)."""
    mounts = weights_mounts(job, pool)
    for source, weights in mounts:
        volume = f"{WEIGHTS_VOLUME}-{source}"
        spec["volumes"] = [v for v in spec.get("volumes", []) if v.get("name") != volume]
        spec["volumes"].append({"name": volume, **copy.deepcopy(weights.volume)})
        for container in spec["containers"]:
            mounts_ = [m for m in container.get("volumeMounts", []) if m.get("name") != volume]
            mount = {"name": volume, "mountPath": weights.mount_path, "readOnly": pool != "trainer"}
            container["volumeMounts"] = [*mounts_, mount]
    if mounts and pool != "trainer":
        gates = [g for g in spec.get("readinessGates", []) if g.get("conditionType") != WEIGHTS_GATE]
        spec["readinessGates"] = [*gates, {"conditionType": WEIGHTS_GATE}]


def _pod_template(job: RLJob, pool: str, template: Any) -> Manifest:
    """The user's template plus rlop's labels, discovery env (the user's own env vars win) and, for the
    trainer and serving pools, the weights volumes."""
    tpl: Manifest = copy.deepcopy(template.model_dump(mode="json", exclude_none=True))
    meta = tpl.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), **pool_labels(job.metadata.name, pool)}
    ours = discovery_env(job, pool)
    for container in tpl["spec"]["containers"]:
        theirs = container.get("env", [])
        taken = {e["name"] for e in theirs}
        container["env"] = [e for e in ours if e["name"] not in taken] + theirs
    _mount_weights(job, pool, tpl["spec"])
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


def podgroup_name(job: str, restarts: int, replicas: int) -> str:
    """The trainer gang's PodGroup: one per gang (a PodGroup's spec is immutable, its minCount the world size)."""
    return child_name(job, f"trainer-{restarts}-{replicas}")


def podgroup(job: RLJob, name: str, min_count: int) -> Manifest:
    """A gang for kube-scheduler (scheduling.k8s.io/v1alpha2): its pods are placed all together or not at all."""
    meta = _metadata(job, "trainer")
    meta["name"] = name
    return _stamped({"apiVersion": PODGROUP_API, "kind": "PodGroup", "metadata": meta,
                     "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}})  # fmt: skip


def trainer_statefulset(job: RLJob, replicas: int, restarts: int = 0, native: bool = False) -> Manifest:
    """Trainers: a StatefulSet whose pods start behind a scheduling gate that rlop lifts for all at once.

    ``OnDelete`` updates: a changed template restarts the whole gang together (rlop deletes the pods),
    never a mix of old and new ranks. A gang restart after a failure is such a change: the template carries
    the restart count (annotation and RLOP_RESTART_COUNT), the checkpoint volume and the checkpoint-now mark.
    `native`: kube-scheduler places the gang (its pods name their PodGroup); rlop's gate then only waits for
    every rank to exist and for a restart's backoff.
    """
    trainer = job.spec.pools.trainer
    tpl = _pod_template(job, "trainer", trainer.template)
    spec = tpl["spec"]
    spec["schedulingGates"] = [{"name": GANG_GATE}]
    if native:
        spec["schedulingGroup"] = {"podGroupName": podgroup_name(job.metadata.name, restarts, replicas)}
    spec.setdefault("subdomain", child_name(job.metadata.name, "trainer"))
    tpl["metadata"].setdefault("annotations", {})[RESTARTS_ANNOTATION] = str(restarts)
    ours = [{"name": "RLOP_RESTART_COUNT", "value": str(restarts)}]
    if (ckpt := trainer.checkpoint) is not None:
        ours.append({"name": "RLOP_CHECKPOINT_DIR", "value": ckpt.dir})
        spec["volumes"] = [v for v in spec.get("volumes", []) if v.get("name") != CHECKPOINT_VOLUME]
        spec["volumes"].append({"name": CHECKPOINT_VOLUME, **copy.deepcopy(ckpt.volume)})
    for container in spec["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] not in {o["name"] for o in ours}] + ours
        if ckpt is not None:
            mounts = [m for m in container.get("volumeMounts", []) if m.get("name") != CHECKPOINT_VOLUME]
            container["volumeMounts"] = [*mounts, {"name": CHECKPOINT_VOLUME, "mountPath": ckpt.dir}]
    _mark_file(spec, CHECKPOINT_NOW_VOLUME, "checkpoint-now", CHECKPOINT_NOW_ANNOTATION, CHECKPOINT_NOW_ENV)
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


def sandbox_template(job: RLJob, sandbox: SandboxPool) -> Manifest:
    return harden(_pod_template(job, HARVESTED, sandbox.template), sandbox.placement.priority_class_name
                  if sandbox.placement.strategy == "harvest-idle-cpu" else None)  # fmt: skip


def sandbox_pod(job: RLJob, sandbox: SandboxPool, name: str, node: str) -> Manifest:
    """A harvested sandbox pod, pinned to `node` by a required hostname affinity (the scheduler still
    checks the fit, and preempts it for any normal-priority pod)."""
    tpl = sandbox_template(job, sandbox)
    meta = _metadata(job, "sandbox")
    meta["name"] = name
    meta["labels"] = {**tpl.get("metadata", {}).get("labels", {}), HARVEST_LABEL: "true"}
    if tpl.get("metadata", {}).get("annotations"):
        meta["annotations"] = dict(tpl["metadata"]["annotations"])
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
    tpl["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}  # fmt: skip
    _mark_file(tpl["spec"], DRAIN_VOLUME, "drain", DRAIN_ANNOTATION, DRAIN_ENV)
    return _stamped({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tpl["spec"]})


def _mark_file(spec: Manifest, volume: str, file: str, annotation: str, env: str) -> None:
    """Let every container read one of rlop's marks on its pod (`annotation`, empty until rlop sets it) at
    MARK_DIR/`file`, a downward API file the kubelet updates in place, named by `env`; a container that
    mounts something else at MARK_DIR keeps it, and gets neither. (One mark per pod: the volume is MARK_DIR.)"""
    item = {"path": file, "fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}}
    volumes = [v for v in spec.get("volumes", []) if v.get("name") != volume]
    spec["volumes"] = [*volumes, {"name": volume, "downwardAPI": {"items": [item]}}]
    for container in spec["containers"]:
        mounts = [m for m in container.get("volumeMounts", []) if m.get("name") != volume]
        container["volumeMounts"] = mounts
        if any(m.get("mountPath") == MARK_DIR for m in mounts):
            continue
        mounts.append({"name": volume, "mountPath": MARK_DIR, "readOnly": True})  # not subPath: never updated
        vars_ = [e for e in container.get("env", []) if e.get("name") != env]
        container["env"] = [*vars_, {"name": env, "value": f"{MARK_DIR}/{file}"}]


def pool_deployment(job: RLJob, pool: str, spec: AnyPool, replicas: int) -> Manifest:
    template = sandbox_template(job, spec) if isinstance(spec, SandboxPool) else _pod_template(job, pool, spec.template)
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


def pool_service(
    job: RLJob, pool: str, port: int, headless: bool, members: bool = False, leaders: bool = False
) -> Manifest:
    """The pool's Service; a headless one names every pod, ready or not (ranks find each other), except a
    serving pool's `members` Service: its DNS lists only the Ready replicas (those serving current weights),
    each also under its own name, `<a-b-c-d>.<job>-<pool>-members.<namespace>.svc` (its IP, dashed).
    `leaders`: the pool's replicas are groups, and only their leaders (rank 0) serve."""
    chosen = selector(job.metadata.name, pool) | ({RANK_LABEL: "0"} if leaders else {})
    spec: Manifest = {
        "selector": chosen,
        "ports": [{"name": "main", "port": port, "targetPort": port, "protocol": "TCP"}],
    }
    if headless:
        spec |= {"clusterIP": "None", "publishNotReadyAddresses": not members}
    meta = _metadata(job, pool)
    if members:
        meta["name"] = members_name(job.metadata.name, pool)
    return _stamped({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})


def ranks_service(job: RLJob, pool: str, spec: ServingPool) -> Manifest:
    """Every rank of a grouped pool by name, `<pod>.<job>-<pool>-ranks.<namespace>.svc`, before it is Ready:
    the workers reach their leader's rendezvous port while it waits for them."""
    ports = [{"name": "rendezvous", "port": spec.rendezvous_port, "targetPort": spec.rendezvous_port,
              "protocol": "TCP"}]  # fmt: skip
    body = {"selector": selector(job.metadata.name, pool), "ports": ports, "clusterIP": "None",
            "publishNotReadyAddresses": True}  # fmt: skip
    meta = _metadata(job, pool)
    meta["name"] = ranks_name(job.metadata.name, pool)
    return _stamped({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": body})


def group_pod(job: RLJob, pool: str, spec: ServingPool, group: int, rank: int) -> Manifest:
    """One rank of a multi-node replica: created by rlop behind the gang gate (its group is released together
    or not at all), one per node (a required anti-affinity among the group's pods), named for its leader's
    DNS; only the leader carries the weights readiness gate (it alone is probed and loaded)."""
    name = job.metadata.name
    template = spec.worker_template if rank > 0 and spec.worker_template is not None else spec.template
    tpl = _pod_template(job, pool, template)
    pod = tpl["spec"]
    if rank > 0:
        pod["readinessGates"] = [g for g in pod.get("readinessGates", []) if g.get("conditionType") != WEIGHTS_GATE]
        if not pod["readinessGates"]:
            del pod["readinessGates"]
    pod["schedulingGates"] = [{"name": GANG_GATE}]
    pod["hostname"] = group_pod_name(name, pool, group, rank)
    pod["subdomain"] = ranks_name(name, pool)
    ours = [
        {"name": "RLOP_GROUP_INDEX", "value": str(group)},
        {"name": "RLOP_GROUP_RANK", "value": str(rank)},
        {"name": "RLOP_GROUP_SIZE", "value": str(spec.nodes_per_replica)},
        {"name": "RLOP_GROUP_LEADER_ADDRESS", "value": leader_address(job, pool, spec, group)},
    ]
    for container in pod["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] not in {o["name"] for o in ours}] + ours
    labels = {GROUP_LABEL: str(group), RANK_LABEL: str(rank)}
    apart = {"labelSelector": {"matchLabels": selector(name, pool) | {GROUP_LABEL: str(group)}},
             "topologyKey": HOSTNAME}  # fmt: skip
    anti = pod.setdefault("affinity", {}).setdefault("podAntiAffinity", {})
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = [
        *anti.get("requiredDuringSchedulingIgnoredDuringExecution", []), apart]  # fmt: skip
    meta = _metadata(job, pool)
    meta["name"] = group_pod_name(name, pool, group, rank)
    meta["labels"] = {**tpl["metadata"]["labels"], **labels}
    if tpl["metadata"].get("annotations"):
        meta["annotations"] = dict(tpl["metadata"]["annotations"])
    return _stamped({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod})


ROUTER_METRICS_PORT = 29000
_ROUTER_RESOURCES = {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}


def router_deployment(job: RLJob, pool: str, spec: ServingPool, router: Router) -> Manifest:
    """sglang-router (`router`, the pool's) in front of a serving pool, started with no workers: rlop
    registers the Ready, current replicas. Hardened like a sandbox pod (no token, privilege or writable root)."""
    name, role = job.metadata.name, f"{pool}-{ROUTER_SUFFIX}"
    args = ["--host", "0.0.0.0", "--port", str(router.port), "--policy", router.policy,
            "--prometheus-host", "0.0.0.0", "--prometheus-port", str(ROUTER_METRICS_PORT)]  # fmt: skip
    container = {
        "name": "router",
        "image": router.image or spec.template.spec.containers[0].image,
        "command": ["python3", "-m", "sglang_router.launch_router", *args],
        "env": [{"name": "HOME", "value": "/tmp"}],
        "ports": [{"containerPort": router.port, "name": "http"},
                  {"containerPort": ROUTER_METRICS_PORT, "name": "metrics"}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": router.port}, "periodSeconds": 2},
        "resources": (router.resources.model_dump(mode="json", exclude_none=True) if router.resources
                      else copy.deepcopy(_ROUTER_RESOURCES)),
    }  # fmt: skip
    first = spec.template.spec.model_dump(mode="json", exclude_none=True)["containers"][0]
    if "imagePullPolicy" in first and router.image is None:
        container["imagePullPolicy"] = first["imagePullPolicy"]
    scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": str(ROUTER_METRICS_PORT)}
    tpl = harden({"metadata": {"labels": pool_labels(name, role), "annotations": scrape},
                  "spec": {"containers": [container]}})  # fmt: skip
    meta = _metadata(job, role)
    return _stamped({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
        "replicas": 0 if job.stopped else 1, "strategy": {"type": "Recreate"},
        "selector": {"matchLabels": selector(name, role)}, "template": tpl}})  # fmt: skip


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


def render(job: RLJob, replicas: Mapping[str, int], restarts: int = 0, native: bool = False) -> list[Manifest]:
    """All children of `job`, given the replica count chosen for each pool and the gang restarts so far;
    `native`: the trainer gang is kube-scheduler's (a PodGroup)."""
    out = []
    for kind, spec in all_pools(job):
        if kind.workload == "StatefulSet":
            out.append(trainer_statefulset(job, replicas[kind.name], restarts, native))
            if native and replicas[kind.name] > 0:
                name = podgroup_name(job.metadata.name, restarts, replicas[kind.name])
                out.append(podgroup(job, name, replicas[kind.name]))
        elif isinstance(spec, ServingPool) and spec.grouped:  # rlop creates each group's pods itself
            out.append(ranks_service(job, kind.name, spec))
        elif not (kind.may_harvest and harvested(job)):  # harvested pods are placed one by one, not here
            out.append(pool_deployment(job, kind.name, spec, replicas[kind.name]))
        leaders = isinstance(spec, ServingPool) and spec.grouped
        out.append(pool_service(job, kind.name, spec.port, headless=kind.headless, leaders=leaders))
        if isinstance(spec, ServingPool) and spec.per_replica:
            out.append(pool_service(job, kind.name, spec.port, headless=True, members=True, leaders=leaders))
            if (router := spec.router) is not None:
                role = f"{kind.name}-{ROUTER_SUFFIX}"
                out += [router_deployment(job, kind.name, spec, router), pool_service(job, role, router.port, False)]
    pools = job.spec.pools
    if pools.sandbox is not None and pools.sandbox.egress == "deny":
        out.append(sandbox_egress_policy(job))
    return out
