"""Conditions and status bookkeeping (pure): a transition time moves only when a condition flips."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from rlop.api.models import Condition, ConditionStatus

READY = "Ready"
GANG = "GangScheduled"
SYNCED = "Synced"
METRICS = "MetricsAvailable"
CAPACITY = "CapacityLimited"
PROBLEM_WHEN_TRUE = (CAPACITY,)  # conditions that are bad news when True (the others when False)


# what a write to a pod does, as the first half of the (what, name) key an Event may need to have succeeded;
# an apply is keyed (kind, name)
COST, DELETE_POD, EVICT, RELEASE = "deletion-cost of pod", "delete of pod", "eviction of pod", "gate release of pod"


@dataclass(frozen=True)
class Event:
    """A Kubernetes event to post on the RLJob."""

    type: str  # Normal | Warning
    reason: str
    message: str
    needs: tuple[tuple[str, str], ...] = ()  # (kind, name) writes that must succeed for it to be true


def set_condition(
    conditions: Sequence[Condition],
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: datetime,
    generation: int | None,
) -> list[Condition]:
    """Return `conditions` with `type_` set; lastTransitionTime is kept unless the status flips."""
    old = next((c for c in conditions if c.type == type_), None)
    since = old.last_transition_time if old is not None and old.status == status else now
    new = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message[:4096],
        last_transition_time=since,
        observed_generation=generation,
    )
    return (
        [c for c in conditions if c.type != type_] + [new]
        if old is None
        else [new if c.type == type_ else c for c in conditions]
    )


def find(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)
