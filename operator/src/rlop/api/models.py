"""The RLJob API (rlop.dev/v1alpha1) as pydantic models: the single source of truth for the CRD.

Field names are snake_case in Python and camelCase on the wire. CEL rules (``x-kubernetes-validations``)
live beside the fields they check, so the API server refuses bad specs with a message naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from rlop.api.names import HARVEST_PRIORITY_CLASS_NAME, RESERVED_PREFIX

GROUP = "rlop.dev"
VERSION = "v1alpha1"
KIND = "RLJob"
PLURAL = "rljobs"
SHORT_NAMES = ["rlj"]
API_VERSION = f"{GROUP}/{VERSION}"

MAX_JOB_NAME = 40  # leaves room for "-<pool>-<ordinal>" suffixes in 63-character child names
JOB_NAME_PATTERN = "^[a-z]([-a-z0-9]*[a-z0-9])?$"  # a DNS-1035 label: Service names must be one


def _cel(*rules: tuple[str, str]) -> dict[str, Any]:
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


class ApiModel(BaseModel):
    """Base: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True, extra="forbid")


class OpenModel(ApiModel):
    """A partial schema of a Kubernetes type: the fields rlop reads are typed, the rest pass through."""

    model_config = ConfigDict(extra="allow")


# ---------------------------------------------------------------- pod template (partial PodTemplateSpec)

Quantity = int | Annotated[str, Field(max_length=64)]  # bounded: CEL's cost estimate needs it
Open = dict[str, Any]  # a Kubernetes object rlop passes through unread
_IS_QUANTITY = "isQuantity(string(self))"
_QUANTITY_MESSAGE = "must be a Kubernetes quantity, e.g. 500m, 2Gi or 1"


def _refuse(rule: str, message: str, **alias: str) -> Any:
    """An optional field whose value must satisfy `rule` (CEL, checked by the API server)."""
    return Field(default=None, json_schema_extra=_cel((rule, message)), **alias)  # type: ignore[call-overload]


def _quantities() -> Any:
    return Field(
        default=None,
        max_length=16,
        json_schema_extra=_cel(("self.all(k, isQuantity(string(self[k])))", f"every value {_QUANTITY_MESSAGE}")),
    )


class ResourceRequirements(OpenModel):
    requests: dict[str, Quantity] | None = _quantities()
    limits: dict[str, Quantity] | None = _quantities()


class ContainerPort(OpenModel):
    container_port: int = Field(ge=1, le=65535)
    name: str | None = Field(default=None, max_length=15)


class Container(OpenModel):
    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    image: str = Field(min_length=1, max_length=1024)
    resources: ResourceRequirements | None = None
    ports: Sequence[ContainerPort] | None = Field(default=None, max_length=32)


class Toleration(OpenModel):
    key: str | None = Field(default=None, max_length=317)
    operator: Literal["Exists", "Equal"] | None = None
    value: str | None = Field(default=None, max_length=63)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None


class PodSpec(OpenModel):
    containers: Sequence[Container] = Field(min_length=1, max_length=16)
    node_selector: dict[str, str] | None = Field(default=None, max_length=32)
    tolerations: list[Toleration] | None = Field(default=None, max_length=32)
    priority_class_name: str | None = Field(default=None, max_length=253)


LabelValue = Annotated[str, Field(max_length=63, pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")]
_UNRESERVED = (
    f"self.all(k, !k.startsWith('{RESERVED_PREFIX}'))",
    f"keys under {RESERVED_PREFIX} are reserved for rlop",
)


class ObjectMetaTemplate(ApiModel):
    labels: dict[str, LabelValue] | None = Field(default=None, max_length=64, json_schema_extra=_cel(_UNRESERVED))
    annotations: dict[str, str] | None = Field(default=None, max_length=64, json_schema_extra=_cel(_UNRESERVED))


class PodTemplate(ApiModel):
    """A Kubernetes PodTemplateSpec; fields rlop does not read are passed through unchanged."""

    metadata: ObjectMetaTemplate | None = None
    spec: PodSpec


# ---------------------------------------------------------------- sandbox pod template: what untrusted code may ask
# The fields below are refused at admission (they cannot be made safe); rlop.plan.render.harden forces the rest.
# Together a sandbox pod always meets the `restricted` Pod Security Standard
# (k8s.io/pod-security-admission/policy).

SafeSysctl = Literal[
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
]  # fmt: skip
_NOT_ROOT = ("self != 0", "sandbox pods may not run as root (runAsUser 0): rlop forces runAsNonRoot")
_APPARMOR = "container.apparmor.security.beta.kubernetes.io/"


class Profile(OpenModel):
    """A seccomp or AppArmor profile: never Unconfined."""

    type: Literal["RuntimeDefault", "Localhost"]
    localhost_profile: str | None = Field(default=None, max_length=4096)


class SELinuxOptions(OpenModel):
    user: str | None = _refuse("self == ''", "sandbox pods may not set an SELinux user")
    role: str | None = _refuse("self == ''", "sandbox pods may not set an SELinux role")
    type: Literal["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"] | None = None


class WindowsOptions(OpenModel):
    host_process: bool | None = _refuse("!self", "sandbox pods may not be Windows HostProcess pods")


class Capabilities(OpenModel):
    add: list[str] | None = _refuse("size(self) == 0", "sandbox containers may not add capabilities (rlop drops ALL)")


class _Confinement(OpenModel):
    """What pod and container security contexts share."""

    run_as_user: int | None = _refuse(*_NOT_ROOT)
    seccomp_profile: Profile | None = None
    app_armor_profile: Profile | None = None
    se_linux_options: SELinuxOptions | None = None
    windows_options: WindowsOptions | None = None


class ContainerSecurityContext(_Confinement):
    privileged: bool | None = _refuse("!self", "sandbox containers may not be privileged")
    capabilities: Capabilities | None = None
    proc_mount: Literal["Default"] | None = None


class Sysctl(OpenModel):
    name: SafeSysctl = Field(description="only the sysctls the Pod Security Standards call safe")
    value: str = Field(max_length=1024)


class PodSecurityContext(_Confinement):
    sysctls: list[Sysctl] | None = Field(default=None, max_length=16)


class SandboxContainerPort(ContainerPort):
    host_port: int | None = _refuse("self == 0", "sandbox pods may not use hostPort")


class SandboxContainer(Container):
    ports: Sequence[SandboxContainerPort] | None = Field(default=None, max_length=32)
    security_context: ContainerSecurityContext | None = None


class ProjectedSource(OpenModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            ("!has(self.serviceAccountToken)", "sandbox pods get no service-account token"),
            ("!has(self.podCertificate)", "sandbox pods get no pod certificate"),
        )
    )

    service_account_token: Open | None = None
    pod_certificate: Open | None = None


class ProjectedVolume(OpenModel):
    sources: list[ProjectedSource] | None = Field(default=None, max_length=32)


class Volume(ApiModel):
    """The volume types the restricted Pod Security Standard allows; any other type is refused."""

    name: str = Field(min_length=1, max_length=63)
    config_map: Open | None = None
    csi: Open | None = None
    downward_api: Open | None = Field(default=None, alias="downwardAPI")
    empty_dir: Open | None = None
    ephemeral: Open | None = None
    image: Open | None = None
    persistent_volume_claim: Open | None = None
    projected: ProjectedVolume | None = None
    secret: Open | None = None
    host_path: Open | None = _refuse("false", "sandbox pods may not mount hostPath volumes")


class SandboxPodSpec(PodSpec):
    containers: Sequence[SandboxContainer] = Field(min_length=1, max_length=16)
    init_containers: Sequence[SandboxContainer] | None = Field(default=None, max_length=16)
    ephemeral_containers: list[Open] | None = _refuse("size(self) == 0", "a pod template has no ephemeral containers")
    host_network: bool | None = _refuse("!self", "sandbox pods may not use the host's network namespace")
    host_pid: bool | None = _refuse("!self", "sandbox pods may not share the host's PIDs", alias="hostPID")
    host_ipc: bool | None = _refuse("!self", "sandbox pods may not share the host's IPC", alias="hostIPC")
    automount_service_account_token: bool | None = _refuse(
        "!self", "sandbox pods get no service-account token: leave automountServiceAccountToken unset or false"
    )
    security_context: PodSecurityContext | None = None
    volumes: list[Volume] | None = Field(default=None, max_length=64)


class SandboxMeta(ObjectMetaTemplate):
    annotations: dict[str, str] | None = Field(
        default=None,
        max_length=64,
        json_schema_extra=_cel(
            _UNRESERVED,
            (
                f"self.all(k, !k.startsWith('{_APPARMOR}') || self[k] == 'runtime/default'"
                " || self[k].startsWith('localhost/'))",
                "sandbox pods may not be AppArmor unconfined: runtime/default or localhost/<profile> only",
            ),
        ),
    )


class SandboxPodTemplate(PodTemplate):
    metadata: SandboxMeta | None = None
    spec: SandboxPodSpec


# ---------------------------------------------------------------- autoscaling (HPA v2 semantics)


class MetricTarget(ApiModel):
    type: Literal["Value", "AverageValue"] = Field(
        description="Value: the query result is compared as is; AverageValue: divided by current replicas."
    )
    value: float = Field(
        gt=0,  # an integer 0 passes an OpenAPI `minimum: 1e-9` (compared as integers), hence also the CEL rule
        le=1e15,
        description="a positive target, at least 1e-9 (1n) and at most 1e15",
        json_schema_extra=_cel(("self >= 0.000000001", "must be at least 1e-9")),
    )


def _query(description: str, **default: Any) -> Any:
    """A PromQL template field: only the placeholders rlop fills in may appear."""
    rule = (
        "self.findAll('[{][{][^}]*[}][}]').all(p, p in ['{{namespace}}', '{{job}}', '{{pool}}'])",
        "only {{namespace}}, {{job}} and {{pool}} may be used in a query",
    )
    return Field(min_length=1, max_length=4096, description=description, json_schema_extra=_cel(rule), **default)


class Metric(ApiModel):
    query: str = _query("PromQL. {{namespace}}, {{job}} and {{pool}} are replaced by escaped label values.")
    target: MetricTarget


class ScalingPolicy(ApiModel):
    type: Literal["Pods", "Percent"]
    value: int = Field(ge=1, le=10000)
    period_seconds: int = Field(ge=1, le=1800)


class ScalingRules(ApiModel):
    stabilization_window_seconds: int | None = Field(default=None, ge=0, le=3600)
    select_policy: Literal["Max", "Min", "Disabled"] | None = None
    policies: list[ScalingPolicy] | None = Field(default=None, min_length=1, max_length=8)
    tolerance: float | None = Field(default=None, ge=0, le=1)


class Behavior(ApiModel):
    scale_up: ScalingRules | None = None
    scale_down: ScalingRules | None = None


class Autoscale(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            ("self.minReplicas <= self.maxReplicas", "minReplicas must be <= maxReplicas"),
            (
                "!has(self.fallbackReplicas) || (self.fallbackReplicas >= self.minReplicas"
                " && self.fallbackReplicas <= self.maxReplicas)",
                "fallbackReplicas must lie within [minReplicas, maxReplicas]",
            ),
        )
    )

    min_replicas: int = Field(default=1, ge=0, le=10000)
    max_replicas: int = Field(ge=1, le=10000)
    metrics: list[Metric] = Field(min_length=1, max_length=8)
    deletion_cost_query: str | None = _query(
        default=None,
        description="PromQL returning one series per pod (label `pod`): how busy each pod is. Before a "
        "scale-down the least busy pods get the lowest controller.kubernetes.io/pod-deletion-cost.",
    )
    behavior: Behavior | None = None
    on_metrics_unavailable: Literal["hold"] = Field(
        default="hold", description="Missing data never scales: hold (or go to fallbackReplicas if set)."
    )
    fallback_replicas: int | None = Field(default=None, ge=0, le=10000)


# ---------------------------------------------------------------- pools

_EXCLUSIVE = ("!(has(self.replicas) && has(self.autoscale))", "replicas and autoscale are mutually exclusive")


class Pool(ApiModel):
    """A pool of identical pods: fixed `replicas` or an `autoscale` block, never both."""

    model_config = ConfigDict(json_schema_extra=_cel(_EXCLUSIVE))

    replicas: int | None = Field(default=None, ge=0, le=10000)
    autoscale: Autoscale | None = None
    port: int = Field(default=8000, ge=1, le=65535, description="Port of the pool's Service.")
    template: PodTemplate


MAX_BACKOFF_SECONDS = 600


class FailurePolicy(ApiModel):
    """What a rank's failure does: the whole gang restarts (a collective cannot go on without a rank)."""

    max_restarts: int = Field(
        default=3,
        ge=0,
        le=1000,
        description="Gang restarts allowed; the failure after the last one makes the job Failed (every pool "
        "scaled to 0, objects kept). A failure is a running rank's pod deleted or Failed, its node lost "
        "(gone or NotReady), or a container terminated with a non-zero exit code (OOMKilled included).",
    )
    backoff_seconds: int = Field(
        default=10,
        ge=0,
        le=MAX_BACKOFF_SECONDS,
        description=f"Wait before the restarted gang is released; doubles with each restart, at most "
        f"{MAX_BACKOFF_SECONDS}s.",
    )

    def backoff(self, restarts: int) -> int:
        """Seconds before restart number `restarts` (1, 2, ...) is released."""
        return int(min(self.backoff_seconds * 2 ** max(0, restarts - 1), MAX_BACKOFF_SECONDS))


class Checkpoint(ApiModel):
    """Where the gang keeps its checkpoints, so a restarted gang resumes instead of starting over."""

    dir: str = Field(
        default="/checkpoints",
        min_length=2,
        max_length=1024,
        pattern="^/",
        description="Mounted here in every trainer container, named by RLOP_CHECKPOINT_DIR.",
    )
    volume: dict[str, Open] = Field(
        min_length=1,
        max_length=1,
        description="One volume source that outlives the pods, e.g. {persistentVolumeClaim: {claimName: ckpt}}.",
    )


class TrainerPool(ApiModel):
    """Gang-scheduled trainers: all `replicas` pods are placed or none start, and they restart together."""

    replicas: int = Field(ge=1, le=4096)
    port: int = Field(default=29500, ge=1, le=65535, description="Rendezvous port (rank 0).")
    failure_policy: FailurePolicy = Field(default_factory=FailurePolicy)
    checkpoint: Checkpoint | None = None
    template: PodTemplate


class ControllerPool(ApiModel):
    """The optional driver of the RL loop: a single pod."""

    port: int = Field(default=8000, ge=1, le=65535)
    template: PodTemplate


DEFAULT_UTILIZATION_QUERY = '1 - avg by (node) (rate(node_cpu_seconds_total{mode="idle"}[1m]))'


class Placement(ApiModel):
    model_config = ConfigDict(
        json_schema_extra=_cel(
            ("self.hysteresis < self.maxNodeUtilization", "hysteresis must be below maxNodeUtilization")
        )
    )

    strategy: Literal["harvest-idle-cpu", "default"] = Field(
        default="harvest-idle-cpu",
        description="harvest-idle-cpu: rlop packs pods onto idle CPU; default: kube-scheduler places them.",
    )
    node_selector: dict[str, str] | None = Field(default=None, max_length=32)
    max_node_utilization: float = Field(
        default=0.7, gt=0, le=1, description="Evict sandbox pods from a node above this CPU utilization."
    )
    hysteresis: float = Field(
        default=0.1, ge=0, le=0.5, description="Place new pods only below maxNodeUtilization - hysteresis."
    )
    reserved_cpu: Quantity = Field(
        default="250m",
        description="CPU left free on every node.",
        json_schema_extra=_cel((_IS_QUANTITY, _QUANTITY_MESSAGE)),
    )
    utilization_window_seconds: int = Field(
        default=60,
        ge=0,
        le=3600,
        description="The range utilizationQuery averages over (its rate window): a new pod's CPU enters it, "
        "and a gone pod's leaves it, gradually over this long. 0: the query is instantaneous.",
    )
    utilization_scrape_seconds: int = Field(
        default=15, ge=0, le=600, description="How old the newest sample behind utilizationQuery may be."
    )
    drain_seconds: int = Field(
        default=30,
        ge=0,
        le=3600,
        description="Before a sandbox pod is evicted (busy node) or scaled down, it is marked draining (the "
        "annotation rlop.dev/drain, which the pod reads at /etc/rlop/drain) and given this long to finish its "
        "checks and stop taking new ones; it is then evicted. 0: at once, unmarked.",
    )
    priority_class_name: str = Field(default=HARVEST_PRIORITY_CLASS_NAME, min_length=1, max_length=253)
    utilization_query: str = _query(
        "PromQL: one series per node (label `node`), CPU utilization in [0, 1].", default=DEFAULT_UTILIZATION_QUERY
    )


_REQUESTED = (
    "has(c.resources) && has(c.resources.requests) && 'cpu' in c.resources.requests && 'memory' in c.resources.requests"
)
_REQUESTS = (
    f"self.template.spec.containers.all(c, {_REQUESTED}) && (!has(self.template.spec.initContainers)"
    f" || self.template.spec.initContainers.all(c, {_REQUESTED}))",
    "every sandbox container and init container must set resources.requests.cpu and resources.requests.memory",
)


class SandboxPool(Pool):
    """CPU-only code verifiers, packed onto idle CPU; requests are mandatory."""

    model_config = ConfigDict(json_schema_extra=_cel(_EXCLUSIVE, _REQUESTS))

    template: SandboxPodTemplate
    placement: Placement = Field(default_factory=Placement)
    egress: Literal["deny", "allow"] = Field(
        default="deny", description="deny: a NetworkPolicy blocks all egress from sandbox pods (untrusted code)."
    )


# ---------------------------------------------------------------- serving pools (rollout, reward)

_DEFAULT_VERSION_QUERY = 'max(rlop_policy_version{namespace="{{namespace}}",rljob="{{job}}",pool="trainer"})'


class Weights(ApiModel):
    """How the pool's replicas get the trainer's weights, and how current they must be to take traffic."""

    mode: Literal["disk"] = Field(
        default="disk",
        description="disk: the trainer writes versioned checkpoints to `volume`; rlop tells each replica to load "
        "the newest (SGLang's POST /update_weights_from_disk, weight_version the version's decimal name) and "
        "reads back what it serves (GET /model_info, else /get_weight_version). (push, a fan-out by rlop with "
        "membership epochs, is designed, not built.)",
    )
    volume: dict[str, Open] = Field(
        min_length=1,
        max_length=1,
        description="A volume source (e.g. {persistentVolumeClaim: {claimName: ckpt}} or hostPath): mounted "
        "read-write in the trainer pods and read-only in this pool's pods.",
    )
    mount_path: str = Field(default="/weights", min_length=2, max_length=1024, pattern="^/")
    model_path: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="The path of version {{version}} inside the pods (default: <mountPath>/{{version}}).",
        json_schema_extra=_cel(
            (
                "self.findAll('[{][{][^}]*[}][}]').all(p, p == '{{version}}')",
                "only {{version}} may be used in modelPath",
            )
        ),
    )
    version_query: str = _query(
        "PromQL: the trainer's newest published policy version (one series).", default=_DEFAULT_VERSION_QUERY
    )
    max_staleness: int = Field(
        default=1,
        ge=0,
        le=1000000,
        description="A replica more than this many versions behind the trainer is not Ready (readiness gate "
        "rlop.dev/weights-current) and takes no traffic until it has caught up.",
    )

    def path_of(self, version: int) -> str:
        template = self.model_path or f"{self.mount_path.rstrip('/')}/{{{{version}}}}"
        return template.replace("{{version}}", str(version))


class Router(ApiModel):
    type: Literal["sglang-router"] = Field(
        description="sglang-router (PyPI sglang-router, `python3 -m sglang_router.launch_router`): rlop registers "
        "only Ready, weight-current replicas with it and deregisters them before they are removed."
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="An image with sglang-router installed (default: the pool's first container's image; "
        "SGLang's images ship it).",
    )
    port: int = Field(default=30000, ge=1, le=65535)
    policy: Literal["round_robin", "random", "cache_aware", "power_of_two"] = "round_robin"
    resources: ResourceRequirements | None = None


_VLLM_WEIGHTS = (
    "!has(self.weights) || self.engine != 'vllm'",
    "weights is supported with engine sglang only: rlop loads a checkpoint with SGLang's POST "
    "/update_weights_from_disk and reads its weight_version from GET /model_info; vLLM serves a disk reload and "
    "a weight version only on its development endpoints (VLLM_SERVER_DEV_MODE=1): leave weights out and let "
    "the framework sync vLLM's weights",
)


GPU = "nvidia.com/gpu"  # the accelerator the GPU budget counts


def _claims(template: str) -> str:
    """CEL: does a container of `template` request (or limit) a GPU?"""
    return (
        f"{template}.spec.containers.exists(c, has(c.resources) && ((has(c.resources.requests) && "
        f"'{GPU}' in c.resources.requests) || (has(c.resources.limits) && '{GPU}' in c.resources.limits)))"
    )


_GROUPS = (
    ("!has(self.workerTemplate) || self.nodesPerReplica > 1", "workerTemplate needs nodesPerReplica > 1"),
    (
        f"!has(self.workerTemplate) || !({_claims('self.template')}) || {_claims('self.workerTemplate')}",
        f"workerTemplate must request the accelerator the leader's template requests ({GPU}): every rank of "
        "a multi-node replica holds its share of the model",
    ),
    ("self.nodesPerReplica == 1 || self.rendezvousPort != self.port", "rendezvousPort must differ from port"),
)


class ServingPool(Pool):
    """Inference replicas behind one entry point: per-replica identity, weight versions, a router, drains."""

    model_config = ConfigDict(json_schema_extra=_cel(_EXCLUSIVE, _VLLM_WEIGHTS, *_GROUPS))

    nodes_per_replica: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Pods (one per node) of one replica: an engine spanning nodes, as SGLang's --nnodes. A "
        "replica of more is a group: rank 0 (the leader, `template`) serves, is probed, loaded and routed to; "
        "ranks 1.. (`workerTemplate`) join it at RLOP_GROUP_LEADER_ADDRESS. Its pods start together (a gang), "
        "and any of them failing recreates them all. replicas, minReplicas, maxReplicas and the status count "
        "groups; the GPU budget counts every pod.",
    )
    worker_template: PodTemplate | None = Field(
        default=None, description="The pod template of ranks 1.. of a group (default: `template`)."
    )
    rendezvous_port: int = Field(
        default=20000,
        ge=1,
        le=65535,
        description="The leader's port its ranks meet at: RLOP_GROUP_LEADER_ADDRESS is <leader's DNS name>:<this> "
        "(SGLang's --dist-init-addr).",
    )

    engine: Literal["sglang", "vllm"] = Field(
        default="sglang",
        description="The inference server the replicas run, for what rlop asks them: sglang (SGLang: weights, "
        "the load by GET /v1/loads or /get_load), vllm (vLLM: the load by GET /metrics; no weights).",
    )
    weights: Weights | None = None
    router: Router | None = None
    drain_seconds: int = Field(
        default=60,
        ge=0,
        le=3600,
        description="Scale-down with a router or weights: the replica leaves the router (and turns NotReady) "
        "first, and is deleted once its requests reach 0 (the engine's load) or after this long.",
    )

    @property
    def grouped(self) -> bool:
        """Is a replica a group of pods (nodesPerReplica > 1), which rlop creates itself?"""
        return self.nodes_per_replica > 1

    @property
    def per_replica(self) -> bool:
        """Does rlop track each replica (weights or a router): a members Service, readiness, drains."""
        return self.weights is not None or self.router is not None


class Pools(ApiModel):
    trainer: TrainerPool
    rollout: ServingPool
    reward: ServingPool | None = None
    sandbox: SandboxPool | None = None
    controller: ControllerPool | None = None


class Budget(ApiModel):
    gpus: int | None = Field(default=None, ge=0, le=100000, description="GPUs shared by all pools.")


class RLJobSpec(ApiModel):
    suspend: bool = False
    budget: Budget | None = None
    pools: Pools


# ---------------------------------------------------------------- status

ConditionStatus = Literal["True", "False", "Unknown"]
Phase = Literal["Pending", "Running", "Suspended", "Error", "Succeeded", "Failed"]
FINISHED: tuple[Phase, ...] = ("Succeeded", "Failed")  # terminal: every pool at 0, the objects kept


class Condition(ApiModel):
    type: str = Field(max_length=64)
    status: ConditionStatus
    reason: str = Field(max_length=128)
    message: str = Field(default="", max_length=4096)
    last_transition_time: datetime | None = None
    observed_generation: int | None = None


class Recommendation(ApiModel):
    """A replica count the autoscaler recommended, last at `until` (unset: the newest, recommended at every
    pass since, up to the pool's previous pass)."""

    replicas: int
    until: datetime | None = None


class ScaleEvent(ApiModel):
    time: datetime
    change: int  # +n scaled up, -n scaled down


class PoolStatus(ApiModel):
    desired: int = 0
    ready: int = 0
    replicas: str = Field(default="0/0", description="ready/desired, for display")
    reason: str | None = Field(default=None, max_length=1024)
    decision: str | None = Field(
        default=None, max_length=64, description="the autoscaler's reason code, as HPA names them (e.g. ScaleUpLimit)"
    )
    last_scale_time: datetime | None = None
    last_metric: float | None = Field(default=None, description="the metric value behind the last decision")
    recommendations: list[Recommendation] | None = Field(
        default=None,
        max_length=8192,  # per window, one a second at the most: 2 x 3601 + 1 for the longest windows
        description="stabilization-window history: only what a window can still use (survives restarts)",
    )
    nodes_per_replica: int | None = Field(
        default=None, description="multi-node pools: pods per replica (desired and ready count groups)"
    )
    versions: dict[str, int] | None = Field(
        default=None, max_length=64, description="serving pools with weights: replicas per weight version served"
    )
    scale_events: list[ScaleEvent] | None = Field(
        default=None,
        max_length=4096,  # one per direction a second at the most, for the longest period (1800 s)
        description="rate-limit history inside the longest policy period (survives restarts)",
    )


class RankFailure(ApiModel):
    """A failure of one rank of the running gang."""

    time: datetime
    reason: str = Field(max_length=64, description="PodDeleted, PodFailed, NodeLost, OOMKilled or ExitCode")
    pod: str = Field(max_length=253)
    rank: int | None = None
    message: str = Field(default="", max_length=1024)


class TrainerStatus(ApiModel):
    restarts: int = Field(default=0, description="gang restarts so far (RLOP_RESTART_COUNT of the running gang)")
    started: datetime | None = Field(default=None, description="when the running gang was released")
    revision: str | None = Field(
        default=None, max_length=128, description="the StatefulSet revision of the running gang"
    )
    last_failure: RankFailure | None = None


class RLJobStatus(ApiModel):
    phase: Phase = "Pending"
    observed_generation: int | None = None
    trainer: TrainerStatus | None = None
    policy_version: int | None = Field(default=None, description="the trainer's newest published weight version")
    pools: dict[str, PoolStatus] = Field(default_factory=dict, max_length=8)
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


class ObjectMeta(OpenModel):
    name: str
    namespace: str = "default"
    uid: str | None = None
    generation: int | None = None


HARVEST_PRIORITY_CLASS = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": HARVEST_PRIORITY_CLASS_NAME},
    "value": -10,
    "preemptionPolicy": "Never",
    "globalDefault": False,
    "description": "rlop sandbox pods on harvested idle CPU: any normal pod may preempt them; they preempt no one.",
}


class RLJob(BaseModel):
    """The whole resource, as the operator reads it."""

    model_config = ConfigDict(validate_by_name=True, serialize_by_alias=True)

    api_version: Literal["rlop.dev/v1alpha1"] = Field(default="rlop.dev/v1alpha1", alias="apiVersion")
    kind: Literal["RLJob"] = "RLJob"
    metadata: ObjectMeta
    spec: RLJobSpec
    status: RLJobStatus | None = None

    @property
    def stopped(self) -> bool:
        """Suspended, or finished (Succeeded or Failed): every pool at 0 replicas, nothing autoscaled."""
        return self.spec.suspend or (self.status is not None and self.status.phase in FINISHED)
