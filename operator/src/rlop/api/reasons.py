"""Every condition type and reason rlop writes, and every event reason it posts (`kubectl describe`)."""

from __future__ import annotations

# condition types
READY = "Ready"
GANG = "GangScheduled"
SYNCED = "Synced"
METRICS = "MetricsAvailable"
CAPACITY = "CapacityLimited"
WEIGHTS = "WeightsInSync"
COMPLETE = "Complete"  # the trainer gang completed: the job Succeeded (as a batch Job says it)
FAILED = "Failed"  # a rank failed with no gang restarts left: the job Failed
PROBLEM_WHEN_TRUE = (CAPACITY, FAILED)  # conditions that are bad news when True (the others when False)

# Ready
ALL_POOLS_READY = "AllPoolsReady"
NOT_READY = "NotReady"

# Synced
APPLIED = "Applied"
APPLY_FAILED = "ApplyFailed"
INVALID_SPEC = "InvalidSpec"
PLANNING_FAILED = "PlanningFailed"
ROUTER_UNSUPPORTED = "RouterUnsupported"  # a pool's router answers in no worker API rlop speaks
# (and ROUTER_FAILED, below: a pool's router answers its listing with an error, e.g. a 401 or a 500)

# GangScheduled
GANG_SUSPENDED = "Suspended"
RESTARTING = "Restarting"
TERMINATING = "Terminating"
CREATING = "Creating"
UPDATING = "Updating"
UNSCHEDULABLE = "Unschedulable"
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
RELEASED = "Released"
SCHEDULED = "Scheduled"
BACKING_OFF = "BackingOff"  # the restarted gang waits out failurePolicy's backoff
FINISHED = "Finished"  # the job Succeeded or Failed: no trainer runs

# Complete and Failed (the condition's reason, and the event's)
COMPLETED = "Completed"
MAX_RESTARTS = "MaxRestartsExceeded"

# a trainer rank's failure (status.trainer.lastFailure.reason)
POD_DELETED = "PodDeleted"
POD_FAILED = "PodFailed"
NODE_LOST = "NodeLost"
OOM_KILLED = "OOMKilled"
EXIT_CODE = "ExitCode"

# MetricsAvailable
VALID_METRICS = "ValidMetrics"
METRICS_MISSING = "MetricsMissing"
PROMETHEUS_UNREACHABLE = "PrometheusUnreachable"

# CapacityLimited (GPUBudget and NoIdleCPU together: GPUBudgetAndNoIdleCPU)
WITHIN_CAPACITY = "WithinCapacity"
GPU_BUDGET = "GPUBudget"
NO_IDLE_CPU = "NoIdleCPU"
UTILIZATION_UNKNOWN = "UtilizationUnknown"  # no CPU utilization data: sandbox pods placed by requests

# WeightsInSync (and the reason of a pod's rlop.dev/weights-current condition)
IN_SYNC = "InSync"
BEHIND = "Behind"  # some replica serves a version more than maxStaleness behind the trainer's
VERSION_UNKNOWN = "VersionUnknown"  # the trainer's version (versionQuery) or a replica's is not known
CURRENT = "Current"
NOT_LOADED = (
    "NotLoaded"  # a replica serves no version rlop assigned ("default": never loaded by rlop), or one unpublished
)
DRAINING = "Draining"
RESTARTED = "Restarted"  # a replica's server restarted since it was judged current: its weights are unknown

# a pool's status.pools.<p>.decision: HPA's reason codes (horizontal.go), plus MetricsUnavailable and GPUBudget
DESIRED_WITHIN_RANGE = "DesiredWithinRange"
SCALE_UP_LIMIT = "ScaleUpLimit"
SCALE_DOWN_LIMIT = "ScaleDownLimit"
TOO_MANY_REPLICAS = "TooManyReplicas"
TOO_FEW_REPLICAS = "TooFewReplicas"
SCALE_UP_STABILIZED = "ScaleUpStabilized"
SCALE_DOWN_STABILIZED = "ScaleDownStabilized"
METRICS_UNAVAILABLE = "MetricsUnavailable"

# events (besides condition changes, posted under the condition's reason)
CREATED = "Created"
UPDATED = "Updated"
DELETED = "Deleted"
DRIFT_CORRECTED = "DriftCorrected"
SCALED_UP = "ScaledUp"
SCALED_DOWN = "ScaledDown"
GANG_RELEASED = "GangReleased"
GANG_RESTART = "GangRestart"
SANDBOX_PLACED = "SandboxPlaced"
SANDBOX_EVICTED = "SandboxEvicted"
SANDBOX_DELETED = "SandboxDeleted"
SANDBOX_DRAINING = "SandboxDraining"
WEIGHTS_UPDATE = "WeightsUpdate"  # rlop told a replica to load a version
WEIGHTS_UPDATE_FAILED = "WeightsUpdateFailed"
ROUTER_ADDED = "RouterAdded"
ROUTER_REMOVED = "RouterRemoved"
ROUTER_FAILED = "RouterFailed"
REPLICA_DRAINING = "ReplicaDraining"
REPLICA_DRAINED = "ReplicaDrained"
GROUP_RELEASED = "GroupReleased"  # a multi-node replica's pods released together
GROUP_RESTART = "GroupRestart"  # a rank of a multi-node replica failed: its whole group is recreated
GROUP_UPDATE = "GroupUpdate"  # a multi-node replica recreated on a changed template
RANK_FAILED = "RankFailed"  # a rank of the running gang failed: the whole gang restarts
CHECKPOINT_NOW = "CheckpointRequested"  # a drain began on a trainer node: the gang was told to checkpoint

# condition reasons that are worth a Warning even on a job's first pass
PROBLEMS = (
    INSUFFICIENT_CAPACITY, UNSCHEDULABLE, APPLY_FAILED, PROMETHEUS_UNREACHABLE, METRICS_MISSING, GPU_BUDGET,
    NO_IDLE_CPU, GPU_BUDGET + "And" + NO_IDLE_CPU, UTILIZATION_UNKNOWN, GPU_BUDGET + "And" + UTILIZATION_UNKNOWN,
    ROUTER_UNSUPPORTED, ROUTER_FAILED,
)  # fmt: skip
# condition reasons an event of their own already explains
EXPLAINED = (RELEASED, RESTARTING, APPLIED, COMPLETED, MAX_RESTARTS)
