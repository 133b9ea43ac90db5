"""Well-known names: the labels, annotations, gate, field manager and PriorityClass rlop reads and writes."""

from __future__ import annotations

RESERVED_PREFIX = "rlop.dev/"  # label and annotation keys no template may set
JOB_LABEL = "rlop.dev/job"  # which RLJob a child or pod is for (ownership is the controller ownerReference)
POOL_LABEL = "rlop.dev/pool"
GROUP_LABEL = "rlop.dev/group"  # on the pods of a multi-node replica (nodesPerReplica > 1): its group index
RANK_LABEL = "rlop.dev/rank"  # and the pod's rank in it (rank 0 leads: it serves, the others join it)
HARVEST_LABEL = "rlop.dev/harvest"  # "true" on sandbox pods rlop placed on idle CPU
DEMO_LABEL = "rlop.dev/demo"  # on the RLJob `rlop demo` applies (the e2e tier removes it on a kept cluster)
HASH_ANNOTATION = "rlop.dev/spec-hash"  # of a child's own rendering
PODGROUP_API = "scheduling.k8s.io/v1alpha2"  # kube-scheduler's native gangs: PodGroup, pods' spec.schedulingGroup
GANG_GATE = "rlop.dev/gang"  # the scheduling gate trainer pods are created behind
DRAIN_ANNOTATION = "rlop.dev/drain"  # on a sandbox pod being drained: since when (RFC 3339)
DRAIN_REASON_ANNOTATION = "rlop.dev/drain-reason"  # why it is drained
MARK_DIR = "/etc/rlop"  # where a pod sees rlop's marks on it (downward API files, updated in place)
DRAIN_VOLUME = "rlop-drain"  # the downward API volume that carries a harvested sandbox pod's drain mark
DRAIN_ENV = "RLOP_DRAIN_FILE"  # the variable naming that file (MARK_DIR/drain) in each container
CHECKPOINT_NOW_ANNOTATION = "rlop.dev/checkpoint-now"  # on trainer pods: checkpoint now (since when, and why)
CHECKPOINT_NOW_VOLUME = "rlop-checkpoint-now"  # the downward API volume that carries it to the trainers
CHECKPOINT_NOW_ENV = "RLOP_CHECKPOINT_NOW_FILE"  # the variable naming that file (MARK_DIR/checkpoint-now)
CHECKPOINT_VOLUME = "rlop-checkpoint"  # the trainer's checkpoint volume (trainer.checkpoint)
RESTARTS_ANNOTATION = "rlop.dev/restarts"  # on the trainer pod template: the gang restarts so far
COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
HOSTNAME = "kubernetes.io/hostname"
MANAGED_BY = {"app.kubernetes.io/managed-by": "rlop"}
FIELD_MANAGER = "rlop"
EVENT_SOURCE = "rlop"  # the component of the Events rlop posts
LEASE_NAME = "rlop-leader"  # the Lease several operator replicas elect their leader with
HARVEST_PRIORITY_CLASS_NAME = "rlop-harvest"
WEIGHTS_GATE = "rlop.dev/weights-current"  # readiness gate of serving pods with weights: True once current
WEIGHTS_VOLUME = "rlop-weights"  # the volume carrying a serving pool's checkpoints (suffixed with the pool)
ROUTER_SUFFIX = "router"  # a serving pool's router: child `<job>-<pool>-router`, pool label `<pool>-router`
RANKS_SUFFIX = "ranks"  # a grouped pool's headless Service naming every rank, Ready or not: `<job>-<pool>-ranks`
MEMBERS_SUFFIX = "members"  # a serving pool's headless Service of Ready replicas: `<job>-<pool>-members`
LOWEST_COST = -2147483648  # the deletion cost of a drained replica: the ReplicaSet removes it first
