"""Slim, immutable snapshots of what the operator observes, built from raw API objects (pure).

Indexes keep these instead of whole objects: less memory, and the planners get exactly what they read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rlop.api.names import (
    CHECKPOINT_NOW_ANNOTATION,
    COST_ANNOTATION,
    DRAIN_ANNOTATION,
    DRAIN_REASON_ANNOTATION,
    GANG_GATE,
    GROUP_LABEL,
    HARVEST_LABEL,
    HASH_ANNOTATION,
    HOSTNAME,
    JOB_LABEL,
    POOL_LABEL,
    RANK_LABEL,
    RESTARTS_ANNOTATION,
    WEIGHTS_GATE,
)
from rlop.plan.quantity import Resources, add, parse_quantity

Raw = Mapping[str, Any]


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: Resources
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    schedulable: bool = True  # Ready and not cordoned
    ready: bool = True


@dataclass(frozen=True)
class Exit:
    """A container's last termination: its current state, else the one before the kubelet restarted it."""

    container: str
    code: int
    reason: str = ""  # e.g. OOMKilled, Error, Completed
    message: str = ""
    finished: str = ""  # RFC 3339, as the kubelet wrote it


@dataclass(frozen=True)
class PodInfo:
    name: str
    namespace: str = "default"
    uid: str = ""
    node: str | None = None
    requests: Resources = field(default_factory=dict)
    phase: str = "Pending"
    ready: bool = False
    gated: bool = False
    deleting: bool = False
    priority: int = 0
    job: str | None = None
    pool: str | None = None
    revision: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    unschedulable: str | None = None
    deletion_cost: int | None = None
    harvest: bool = False  # a sandbox pod rlop placed on idle CPU
    draining: str = ""  # when rlop began draining it (RFC 3339), "" if it is not being drained
    drain_reason: str = ""
    pinned: str | None = None  # the node a required hostname affinity pins it to
    created: str = ""  # creationTimestamp (RFC 3339 sorts as text)
    owner: Owner | None = None  # the controller ownerReference
    index: int | None = None  # a StatefulSet pod's ordinal
    ip: str = ""  # status.podIP
    containers_ready: bool = False  # Ready but for readiness gates
    weights_current: str | None = None  # the status of its rlop.dev/weights-current condition, if any
    weights_message: str = ""  # and its message
    weights_since: str = ""  # and its lastTransitionTime (RFC 3339)
    started: str = ""  # when its newest running container started (RFC 3339; a restart moves it)
    containers: int = 0  # regular containers in its spec
    exits: tuple[Exit, ...] = ()  # of its regular containers
    disruption: str = ""  # the reason of its DisruptionTarget condition (e.g. PreemptionByScheduler)
    checkpoint_now: str = ""  # rlop's checkpoint-now mark on a trainer pod ("" if none)
    group: int | None = None  # a multi-node replica's pod: its group's index
    rank: int | None = None  # and its rank in the group (0: the leader)
    spec_hash: str | None = None  # of the rendering rlop created it from (the pods rlop creates itself)

    @property
    def leads(self) -> bool:
        """Is the pod a replica's server: a pod of its own, or the leader (rank 0) of a group?"""
        return self.rank is None or self.rank == 0

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def on(self) -> str | None:
        """The node the pod is bound to, or pinned to before it is bound."""
        return self.node or self.pinned


@dataclass(frozen=True)
class Owner:
    kind: str
    name: str
    uid: str


@dataclass(frozen=True)
class ChildInfo:
    kind: str
    name: str
    spec_hash: str | None = None
    owner: Owner | None = None  # the controller ownerReference: only children owned by the job are its own
    uid: str | None = None
    version: str | None = None  # what moves when someone changes the spec: generation, else resourceVersion
    replicas: int | None = None
    ready: int = 0
    update_revision: str | None = None
    up_to_date: bool = True
    restarts: int | None = None  # a trainer StatefulSet's: the gang restarts its pod template carries
    scheduled: tuple[str, str, str] | None = None  # a PodGroup's PodGroupScheduled condition: status, reason, message


def _requests(containers: list[Raw]) -> Resources:
    total: Resources = {}
    for c in containers:
        req = dict((c.get("resources") or {}).get("limits") or {})  # limits default the requests
        req.update((c.get("resources") or {}).get("requests") or {})
        total = add(total, {k: parse_quantity(v) for k, v in req.items()})
    return total


def pod_requests(spec: Raw) -> Resources:
    """Effective requests, as the scheduler counts them: containers, init containers, overhead, a pod slot."""
    total = _requests(spec.get("containers") or [])
    for init in spec.get("initContainers") or []:
        for key, value in _requests([init]).items():
            total[key] = max(total.get(key, 0.0), value)
    overhead = {k: parse_quantity(v) for k, v in (spec.get("overhead") or {}).items()}
    return add(add(total, overhead), {"pods": 1.0})


def pod_info(body: Raw) -> PodInfo:
    meta, spec, status = body.get("metadata") or {}, body.get("spec") or {}, body.get("status") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    scheduled = conditions.get("PodScheduled") or {}
    unschedulable = scheduled.get("message") if scheduled.get("reason") == "Unschedulable" else None
    return PodInfo(
        name=meta.get("name", ""),
        namespace=meta.get("namespace", "default"),
        uid=meta.get("uid", ""),
        node=spec.get("nodeName") or None,
        requests=pod_requests(spec),
        phase=status.get("phase", "Pending"),
        ready=(conditions.get("Ready") or {}).get("status") == "True",
        gated=any(g.get("name") == GANG_GATE for g in spec.get("schedulingGates") or []),
        deleting=bool(meta.get("deletionTimestamp")),
        priority=int(spec.get("priority") or 0),
        job=labels.get(JOB_LABEL),
        pool=labels.get(POOL_LABEL),
        revision=labels.get("controller-revision-hash"),
        node_selector=dict(spec.get("nodeSelector") or {}),
        tolerations=tuple(spec.get("tolerations") or ()),
        unschedulable=unschedulable,
        deletion_cost=_int(annotations.get(COST_ANNOTATION)),
        harvest=labels.get(HARVEST_LABEL) == "true",
        draining=annotations.get(DRAIN_ANNOTATION, ""),
        drain_reason=annotations.get(DRAIN_REASON_ANNOTATION, ""),
        pinned=_pinned_host(spec),
        created=meta.get("creationTimestamp") or "",
        owner=controller_owner(meta),
        index=_int(labels.get("apps.kubernetes.io/pod-index")),
        ip=status.get("podIP") or "",
        containers_ready=(conditions.get("ContainersReady") or {}).get("status") == "True",
        weights_current=(conditions.get(WEIGHTS_GATE) or {}).get("status"),
        weights_message=(conditions.get(WEIGHTS_GATE) or {}).get("message") or "",
        weights_since=(conditions.get(WEIGHTS_GATE) or {}).get("lastTransitionTime") or "",
        started=_started(status),
        containers=len(spec.get("containers") or []),
        exits=tuple(e for c in status.get("containerStatuses") or [] if (e := _exit(c)) is not None),
        disruption=(conditions.get("DisruptionTarget") or {}).get("reason") or ""
        if (conditions.get("DisruptionTarget") or {}).get("status") == "True"
        else "",
        checkpoint_now=annotations.get(CHECKPOINT_NOW_ANNOTATION, ""),
        group=_int(labels.get(GROUP_LABEL)),
        rank=_int(labels.get(RANK_LABEL)),
        spec_hash=annotations.get(HASH_ANNOTATION),
    )


def _started(status: Raw) -> str:
    """When the pod's newest running container started ("" if none runs)."""
    running = [(c.get("state") or {}).get("running") or {} for c in status.get("containerStatuses") or []]
    return max((r.get("startedAt") or "" for r in running), default="")


def _exit(container: Raw) -> Exit | None:
    state = container.get("state") or {}
    ended = state.get("terminated") or (container.get("lastState") or {}).get("terminated")
    if not ended:
        return None
    code = ended.get("exitCode")
    return Exit(container.get("name", ""), int(code) if isinstance(code, int) else -1, ended.get("reason") or "",
                (ended.get("message") or "")[:256], ended.get("finishedAt") or "")  # fmt: skip


def controller_owner(meta: Raw) -> Owner | None:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            return Owner(ref.get("kind", ""), ref.get("name", ""), ref.get("uid", ""))
    return None


def owned_by(owner: Owner | None, uid: str | None) -> bool:
    """Is `owner` (a controller ownerReference) the object with this uid?"""
    return owner is not None and owner.uid == uid


def version(body: Raw) -> str | None:
    """A child's spec version: its generation, or (Services have none) its resourceVersion."""
    meta = body.get("metadata") or {}
    generation = meta.get("generation")
    return f"g{generation}" if generation else meta.get("resourceVersion")


def next_generation(version: str | None) -> str | None:
    """The spec version a change of replicas leaves on a child at `version` (a /scale write's answer
    carries no generation); None if `version` is not a generation."""
    return f"g{int(version[1:]) + 1}" if version and version.startswith("g") else None


def _pinned_host(spec: Raw) -> str | None:
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in required.get("nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("key") == HOSTNAME and expr.get("operator") == "In" and len(expr.get("values") or []) == 1:
                return str(expr["values"][0])
    return None


def _condition(status: Raw, type_: str) -> tuple[str, str, str] | None:
    found = next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)
    return None if found is None else (found.get("status", ""), found.get("reason", ""), found.get("message", ""))


def _int(text: str | None) -> int | None:
    try:
        return None if text is None else int(text)
    except ValueError:
        return None


def node_info(body: Raw) -> NodeInfo:
    meta, spec, status = body.get("metadata") or {}, body.get("spec") or {}, body.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    taints = tuple(
        Taint(t.get("key", ""), t.get("value", ""), t.get("effect", "NoSchedule")) for t in spec.get("taints") or []
    )
    return NodeInfo(
        name=meta.get("name", ""),
        allocatable={k: parse_quantity(v) for k, v in (status.get("allocatable") or {}).items()},
        labels=dict(meta.get("labels") or {}),
        taints=taints,
        schedulable=ready and not spec.get("unschedulable", False),
        ready=ready,
    )


def child_info(body: Raw) -> ChildInfo:
    meta, spec, status = body.get("metadata") or {}, body.get("spec") or {}, body.get("status") or {}
    generation, observed = meta.get("generation"), status.get("observedGeneration")
    return ChildInfo(
        kind=body.get("kind", ""),
        name=meta.get("name", ""),
        spec_hash=(meta.get("annotations") or {}).get(HASH_ANNOTATION),
        owner=controller_owner(meta),
        uid=meta.get("uid"),
        version=version(body),
        replicas=spec.get("replicas"),
        ready=int(status.get("readyReplicas") or 0),
        update_revision=status.get("updateRevision"),
        up_to_date=generation is None or observed == generation,
        restarts=_int(
            (((spec.get("template") or {}).get("metadata") or {}).get("annotations") or {}).get(RESTARTS_ANNOTATION)
        ),
        scheduled=_condition(status, "PodGroupScheduled"),
    )
