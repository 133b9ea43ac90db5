"""Conditions and status bookkeeping (pure): a transition time moves only when a condition flips."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from rlop.api.models import Condition, ConditionStatus

# what a write to a pod does, as the first half of the (what, name) key an Event may need to have succeeded;
# an apply is keyed (kind, name)
COST, DELETE_POD, EVICT, RELEASE = "deletion-cost of pod", "delete of pod", "eviction of pod", "gate release of pod"
MARK = "annotation of pod"  # a drain or checkpoint-now mark
GATE, LOAD = "weights-current condition of pod", "weights update of pod"
REGISTER, DEREGISTER = "router registration of pod", "router deregistration of"


@dataclass(frozen=True)
class Event:
    """A Kubernetes event to post on the RLJob."""

    type: str  # Normal | Warning
    reason: str
    message: str
    needs: tuple[tuple[str, str], ...] = ()  # (kind, name) writes that must succeed for it to be true
    pool: str | None = None  # the pool a scaling event is about


@dataclass(frozen=True)
class ConditionUpdate:
    """A condition as a plan decides it (the times are filled in by set_condition)."""

    type: str
    status: ConditionStatus
    reason: str
    message: str


def set_condition(
    conditions: Sequence[Condition], update: ConditionUpdate, now: datetime, generation: int | None
) -> list[Condition]:
    """Return `conditions` with `update` set; lastTransitionTime is kept unless the status flips."""
    old = find(conditions, update.type)
    since = old.last_transition_time if old is not None and old.status == update.status else now
    new = Condition(
        type=update.type,
        status=update.status,
        reason=update.reason,
        message=update.message[:4096],
        last_transition_time=since,
        observed_generation=generation,
    )
    return [*conditions, new] if old is None else [new if c.type == update.type else c for c in conditions]


def rfc3339(t: datetime) -> str:
    """`t` as Kubernetes writes times (UTC, whole seconds): such strings sort as the times do."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find(conditions: Sequence[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)
