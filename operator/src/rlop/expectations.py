"""rlop's memory of its own writes until the watches show them (kube-controller-manager's
ControllerExpectations habit): the status it last wrote, the version each apply left, pods it created,
removed or marked draining moments ago, the weight loads it started and that still run, and the sandbox
writes refused in the last full pass. Memory only
corrects what is observed; dropping it all (a restart, a change of leader) costs one re-apply of unchanged
children."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from rlop.api.models import RLJobStatus
from rlop.api.names import CHECKPOINT_NOW_ANNOTATION, DRAIN_ANNOTATION, DRAIN_REASON_ANNOTATION
from rlop.plan.harvest import JobKey
from rlop.plan.job import ChildKey
from rlop.plan.observed import ChildInfo, PodInfo

WATCH_LAG = 10.0  # seconds to trust our own write over a watch that has not caught up
PodKey = tuple[str, str]  # (namespace, name)


class Refusal(NamedTuple):
    """A write the API server (or rlop) refused: the child or write kind, its name, and why."""

    kind: str
    name: str
    why: str


@dataclass(frozen=True)
class Applied:
    digest: str  # the spec-hash applied
    at: float  # monotonic time of the apply
    version: str | None  # the child's spec version the write left (generation, or resourceVersion)
    replicas: int | None  # the replicas it set


class Expectations:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.clear()

    def clear(self) -> None:
        self._status: dict[JobKey, tuple[str | None, RLJobStatus]] = {}
        self._applied: dict[JobKey, dict[ChildKey, Applied]] = {}
        self._created: dict[PodKey, tuple[PodInfo, float]] = {}
        self._removed: dict[PodKey, tuple[str, float]] = {}  # -> (uid, when)
        self._marked: dict[PodKey, tuple[str, Mapping[str, str], float]] = {}  # -> (uid, annotations, when)
        self._refused: dict[JobKey, list[Refusal]] = {}
        self._loading: dict[PodKey, int] = {}  # -> the weight version rlop told the replica to load

    def forget_job(self, key: JobKey) -> None:
        """The job is gone: its children go with it (owner references)."""
        for memory in (self._status, self._applied, self._refused):
            memory.pop(key, None)

    # ---------------------------------------------------------------- status

    def status(self, key: JobKey, uid: str | None) -> RLJobStatus | None:
        """The status rlop last wrote for this very job (not one deleted and re-created with its name)."""
        written_uid, status = self._status.get(key, (None, None))
        return status if written_uid == uid else None

    def wrote_status(self, key: JobKey, uid: str | None, status: RLJobStatus) -> None:
        self._status[key] = (uid, status)

    # ---------------------------------------------------------------- children

    def applied(self, key: JobKey, child: ChildKey, digest: str, version: str | None, replicas: int | None) -> None:
        """rlop applied (or scaled) a child: `digest` is its rendering's spec-hash."""
        self._applied.setdefault(key, {})[child] = Applied(digest, self.clock(), version, replicas)

    def children(self, key: JobKey, watched: Mapping[ChildKey, ChildInfo]) -> dict[ChildKey, ChildInfo]:
        """Children as the watch shows them, corrected by rlop's writes of moments ago that it has not shown
        yet: seen as written (not written again, nor taken for a hand edit), and not yet observed by their
        own controller either."""
        mine, now, out = self._applied.get(key, {}), self.clock(), dict(watched)
        for child, seen in watched.items():
            a = mine.get(child)
            if a is not None and now - a.at < WATCH_LAG and a.version != seen.version:
                replicas = seen.replicas if a.replicas is None else a.replicas
                out[child] = replace(seen, spec_hash=a.digest, version=a.version, replicas=replicas, up_to_date=False)
        return out

    def versions(self, key: JobKey, children: Iterable[ChildKey]) -> dict[ChildKey, str]:
        """The spec version rlop's own last write left on each child it remembers writing."""
        mine = self._applied.get(key, {})
        return {c: a.version for c in children if (a := mine.get(c)) is not None and a.version}

    # ---------------------------------------------------------------- pods

    def creating(self, namespace: str, pod: PodInfo) -> None:
        """A pod a plan will create: counted from now on, until the watch shows it."""
        self._created[(namespace, pod.name)] = (pod, self.clock())

    def created(self, namespace: str, name: str, ok: bool) -> None:
        if ok:
            self._removed.pop((namespace, name), None)  # the same name again, a new pod
        else:
            self._created.pop((namespace, name), None)  # a refused pod does not exist

    def removed(self, namespace: str, name: str, uid: str = "") -> None:
        """A pod deleted or evicted: terminating from now on, whatever the watch still shows (a new pod
        that takes its name, as a StatefulSet's does, is not: its uid differs)."""
        self._removed[(namespace, name)] = (uid, self.clock())
        self._created.pop((namespace, name), None)

    def marked(self, namespace: str, name: str, uid: str, mark: Mapping[str, str]) -> None:
        """A pod marked draining, or told to checkpoint: so it stays, whatever the watch still shows (a drain
        begins once, a checkpoint is asked for once)."""
        self._marked[(namespace, name)] = (uid, mark, self.clock())

    def pods(self, watched: Sequence[PodInfo], job: JobKey | None = None) -> list[PodInfo]:
        """Pods as the watch shows them, corrected by rlop's own writes the watch has not shown yet
        (with `job`, only the pods created for that job are added)."""
        now = self.clock()
        self._created = {k: v for k, v in self._created.items() if now - v[1] < WATCH_LAG}
        self._removed = {k: v for k, v in self._removed.items() if now - v[1] < WATCH_LAG}
        self._marked = {k: v for k, v in self._marked.items() if now - v[2] < WATCH_LAG}

        def gone(p: PodInfo) -> bool:
            uid, _ = self._removed.get((p.namespace, p.name), (None, 0.0))
            return _same(uid, p)

        def marked(p: PodInfo) -> PodInfo:
            uid, mark, _ = self._marked.get((p.namespace, p.name), (None, {}, 0.0))
            if not _same(uid, p):
                return p
            if DRAIN_ANNOTATION in mark and not p.draining:
                p = replace(p, draining=mark[DRAIN_ANNOTATION], drain_reason=mark.get(DRAIN_REASON_ANNOTATION, ""))
            if CHECKPOINT_NOW_ANNOTATION in mark:
                p = replace(p, checkpoint_now=mark[CHECKPOINT_NOW_ANNOTATION])
            return p

        seen = {(p.namespace, p.name) for p in watched}
        for known in seen & set(self._created):  # shown: from now on the watch says whether it still exists
            del self._created[known]
        out = [replace(p, deleting=True) if gone(p) else marked(p) for p in watched]
        for (ns, name), (pod, _) in self._created.items():
            if (ns, name) not in seen and (ns, name) not in self._removed and (job is None or (ns, pod.job) == job):
                out.append(pod)
        return out

    # ---------------------------------------------------------------- weight loads

    def load(self, namespace: str, pod: str, version: int) -> None:
        """rlop told a serving replica to load `version` (the load runs in the background)."""
        self._loading[(namespace, pod)] = version

    def loaded(self, namespace: str, pod: str, version: int) -> None:
        """That load ended (done or failed): the replica's own answer is what counts now."""
        if self._loading.get((namespace, pod)) == version:
            del self._loading[(namespace, pod)]

    def loading(self, namespace: str) -> dict[str, int]:
        """The namespace's replicas with a load still running: pod -> version."""
        return {pod: v for (ns, pod), v in self._loading.items() if ns == namespace}

    # ---------------------------------------------------------------- refusals

    def hold(self, key: JobKey, refusals: Sequence[Refusal]) -> None:
        """Sandbox writes are tried in full passes only: their refusals stand until the next one."""
        self._refused[key] = list(refusals)

    def held(self, key: JobKey) -> list[Refusal]:
        return list(self._refused.get(key, ()))


def _same(uid: str | None, pod: PodInfo) -> bool:
    """Is `pod` the one rlop wrote to (uid None: it wrote to none of that name; an unknown uid matches)?"""
    return uid is not None and (not uid or not pod.uid or uid == pod.uid)
