"""Serving pools whose replicas RL must trust (pure): which version each replica serves and whether that is
current enough to take traffic (the rlop.dev/weights-current readiness gate), which replicas to tell to load
the trainer's newest weights, which to register with the router, and how a scale-down drains replicas
(deregistered, then deleted once idle) instead of killing the requests they are running."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from rlop.api import reasons as R
from rlop.api.models import ServingPool, Weights
from rlop.api.names import LOWEST_COST
from rlop.plan.autoscale import Reading
from rlop.plan.observed import PodInfo
from rlop.plan.status import ConditionUpdate


@dataclass(frozen=True)
class Probe:
    """What a replica's server said this pass (None: it did not say)."""

    version: str | None = None  # the weight_version it reports: an opaque string (SGLang's default "default")
    load: int | None = None  # requests running or waiting (rlop.protocol.LOAD_WAYS: the engine's own count)
    source: str = ""  # the endpoint that reported the version, e.g. "GET /model_info"
    error: str = ""  # why the version is unknown: what answered, and how


def version_name(version: int) -> str:
    """The weight_version rlop sends with a trainer version: its decimal name, as slime sends str(N)."""
    return str(version)


def named(served: str) -> int | None:
    """The trainer version whose name `served` is, or None: it is no name rlop gives (SGLang's "default", or
    "v5", "05", "5.0", " 5"). A match of the names rlop assigns, not a parse: nothing but rlop's own spelling of
    a version counts."""
    if not (served.isascii() and served.isdigit() and len(served) <= 18):
        return None
    n = int(served)
    return n if version_name(n) == served else None


def shown(served: str) -> str:
    """A served version as a message shows it: v5 for rlop's names, else quoted and cut short."""
    n = named(served)
    return f"v{n}" if n is not None else repr(served[:40] + ("..." if len(served) > 40 else ""))


@dataclass(frozen=True)
class ServingObservation:
    """A serving pool as seen in one full pass: its replicas' answers, the router (its pod's address) and its
    workers (url -> id; None when there is no router, or it is not Ready or did not answer) and the
    trainer's version (None: not read)."""

    probes: Mapping[str, Probe] = field(default_factory=dict)
    workers: Mapping[str, str] | None = None
    router: str = ""
    policy: Reading | None = None
    updating: Mapping[str, int] = field(default_factory=dict)  # pod -> version it was told to load, in flight
    # the router answers, but in no worker API rlop speaks (RouterUnsupported) or with an error (RouterFailed)
    router_problem: tuple[str, str] | None = None  # (reason, message)


@dataclass(frozen=True)
class Gate:
    status: str
    reason: str
    message: str
    restamp: bool = False  # written with a new transition time though the status stays (a new process judged)


def restarted(pod: PodInfo) -> bool:
    """Did the replica's server restart since its gate turned True? Kubernetes keeps the condition across a
    container restart, so the pod would be Ready again, and routed to, at whatever the new process serves."""
    return pod.weights_current == "True" and pod.weights_since != "" and pod.started > pod.weights_since


def suspect(pod: PodInfo) -> bool:
    """Is a replica judged current perhaps not serving what it was judged on (its server down, or a new
    process)? Then it is judged again at once, not at the next full pass."""
    return pod.weights_current == "True" and (not pod.containers_ready or restarted(pod)) and not pod.deleting


@dataclass(frozen=True)
class Update:
    pod: str
    url: str  # the replica's server
    version: int
    model_path: str
    catch_up: bool  # more than maxStaleness behind, or serving no version of rlop's (a late joiner, a new server)
    served: str = ""  # what it serves now, as a message shows it


@dataclass(frozen=True)
class ServingPlan:
    replicas: int  # of the pool's Deployment: the target plus the replicas still draining
    gates: dict[str, Gate] = field(default_factory=dict)  # pod -> its weights-current condition, if it changes
    updates: list[Update] = field(default_factory=list)
    register: list[tuple[str, str]] = field(default_factory=list)  # (pod, url) to add to the router
    deregister: list[tuple[str, str, str]] = field(default_factory=list)  # (pod or "", url, worker id)
    drain: list[str] = field(default_factory=list)  # replicas to start draining
    drained: list[tuple[str, str]] = field(default_factory=list)  # (pod, why): drained, to delete now
    costs: dict[str, int] = field(default_factory=dict)  # deletion costs: drained replicas go first
    versions: dict[str, int] | None = None  # replicas per version served (None: not probed this pass)
    sync: ConditionUpdate | None = None  # this pool's part of WeightsInSync (None: nothing new)
    router_problem: tuple[str, str] | None = None  # why rlop cannot reconcile the router (Synced=False)


def url_of(pod: PodInfo, port: int) -> str:
    return f"http://{pod.ip}:{port}"


def _since(mark: str) -> datetime | None:
    try:
        return datetime.strptime(mark, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def drains(spec: ServingPool) -> bool:
    """Is a scale-down a drain? Only when something routes by readiness (a router, or the weights gate)."""
    return spec.drain_seconds > 0 and spec.per_replica


def _drain_done(pod: PodInfo, probe: Probe | None, registered: bool, now: datetime, grace: int) -> str | None:
    """Why a draining replica may be deleted now, or None while it may still be serving requests."""
    if not pod.ip:
        return "it never served"
    since = _since(pod.draining)
    if since is None or (now - since).total_seconds() >= grace:
        return f"drained for {grace}s"
    if registered:
        return None  # still in the router: deregister first
    if probe is not None and probe.load == 0:
        return "no request left running"
    return None


def _victims(active: Sequence[PodInfo], n: int, probes: Mapping[str, Probe], busy: Mapping[str, float]) -> list[str]:
    """The `n` replicas to drain: those serving nothing first (not ready), then the least busy (the
    deletion-cost query, else the running requests), then the newest."""

    def key(p: PodInfo) -> tuple[bool, float, float, str]:
        load = (probes.get(p.name) or Probe()).load
        return p.ready, busy.get(p.name, 0.0), float("inf") if load is None else float(load), _desc(p.created)

    return [p.name for p in sorted(active, key=key)[:n]]


def _desc(text: str) -> str:
    """Sorts `text` (a timestamp) newest first."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def _gate(pod: PodInfo, probe: Probe, policy: int | None, staleness: int) -> Gate | None:
    """The replica's weights-current condition (None: hold what it has, the trainer's version is unknown).
    Current means serving the name of a version the trainer published, at most `staleness` behind the newest.
    A server that does not answer is not current whatever the trainer's version: it may come back as a new
    process at its base weights, and must not turn Ready before it is judged."""
    if pod.draining:
        return Gate("False", R.DRAINING, "draining: removed from the router before it is deleted")
    if probe.version is None:
        trainer = f" (trainer v{policy})" if policy is not None else ""
        why = f": {probe.error}" if probe.error else ""
        return Gate("False", R.VERSION_UNKNOWN, f"does not report its weight version{trainer}{why}")
    if policy is None:
        return None
    served, n = shown(probe.version), named(probe.version)
    via = f"; {probe.source}" if probe.source else ""
    if n is None:
        return Gate("False", R.NOT_LOADED, f"serves {served}, not a version rlop assigned (trainer v{policy}{via})")
    if n > policy:
        return Gate("False", R.NOT_LOADED, f"serves {served}, which the trainer has not published (trainer "
                    f"v{policy}{via})")  # fmt: skip
    if n >= policy - staleness:
        return Gate("True", R.CURRENT, f"serves {served} (trainer v{policy}{via})")
    return Gate("False", R.BEHIND, f"serves {served}, trainer v{policy}: more than {staleness} behind{via}")


def plan_serving(
    pool: str,
    spec: ServingPool,
    target: int,
    pods: Sequence[PodInfo],
    seen: ServingObservation | None,
    busy: Mapping[str, float],
    now: datetime,
    claimed: bool = False,
) -> ServingPlan:
    """One serving pool's plan. `seen` is None between full passes (nothing was probed): drains hold, the
    Deployment keeps the target plus the replicas still draining, and a WeightsInSync=True `claimed` by the
    job is withdrawn if a replica appeared since the last probe."""
    live = [p for p in pods if p.pool == pool and not p.deleting and not p.terminal]
    draining = [p for p in live if p.draining]
    active = [p for p in live if not p.draining]
    probes = seen.probes if seen is not None else {}
    workers = seen.workers if seen is not None else None
    registered = set(workers or ())
    unheard = spec.router is not None and seen is not None and workers is None  # the router did not answer

    drained: list[tuple[str, str]] = []
    drain: list[str] = []
    if drains(spec):
        for p in draining:  # between full passes nothing is probed: only the grace period ends a drain
            listed = unheard or url_of(p, spec.port) in registered  # unheard: it may still route to it
            why = _drain_done(p, probes.get(p.name), listed, now, spec.drain_seconds)
            if why is not None:
                drained.append((p.name, why))
        drain = _victims(active, len(active) - target, probes, busy) if len(active) > target else []
        unready = {p.name for p in active if not p.ip}
        drained += [(name, "it never served") for name in drain if name in unready]
        drain = [name for name in drain if name not in unready]
    finished = {name for name, _ in drained}
    still = sum(1 for p in draining if p.name not in finished)
    replicas = target + still + len(drain) if drains(spec) else target
    costs = {name: LOWEST_COST for name in drain + [n for n, _ in drained]}
    costs = {n: c for n, c in costs.items() if next(p for p in live if p.name == n).deletion_cost != c}
    if seen is None:
        sync = _unjudged(pool, spec, active) if claimed else None
        return ServingPlan(replicas, drain=drain, drained=drained, costs=costs, sync=sync)

    weights = spec.weights
    policy = seen.policy.value if seen.policy is not None else None
    version = int(policy) if policy is not None else None
    gates: dict[str, Gate] = {}
    current: dict[str, bool] = {}
    updates: list[Update] = []
    for p in live:
        probe = probes.get(p.name) or Probe()
        if weights is None:
            current[p.name] = True
            continue
        leaving = p.draining or p.name in drain
        gate = _gate(replace(p, draining=p.draining or ("now" if leaving else "")), probe, version,
                     weights.max_staleness)  # fmt: skip
        if restarted(p):  # judge the new process: the condition's time must be after its start
            gate = (replace(gate, restamp=True) if gate is not None
                    else Gate("False", R.RESTARTED, "restarted; the trainer's version is unknown", True))  # fmt: skip
        if gate is not None and (gate.restamp or (gate.status, gate.message) != (p.weights_current, p.weights_message)):
            gates[p.name] = gate
        current[p.name] = (gate.status if gate else p.weights_current) == "True"
        served = named(probe.version) if probe.version is not None else None
        if (
            leaving
            or not p.ip
            or version is None
            or probe.version is None
            or (served is not None and served >= version)
        ):
            continue  # (a version ahead of the trainer's is held, not taken back: the trainer's reading may lag)
        if seen.updating.get(p.name, -1) < version:  # not told already (that load is still running)
            stale = served is None or served < version - weights.max_staleness
            updates.append(Update(p.name, url_of(p, spec.port), version, weights.path_of(version), stale,
                                  shown(probe.version)))  # fmt: skip

    register: list[tuple[str, str]] = []
    deregister: list[tuple[str, str, str]] = []
    if spec.router is not None and workers is not None:
        wanted = {url_of(p, spec.port): p.name for p in active
                  if p.ip and p.containers_ready and current[p.name] and p.name not in drain}  # fmt: skip
        by_url = {url_of(p, spec.port): p.name for p in live if p.ip}
        register = sorted((pod, url) for url, pod in wanted.items() if url not in workers)
        deregister = sorted((by_url.get(url, ""), url, wid) for url, wid in workers.items() if url not in wanted)

    served_versions = [probes[p.name].version for p in active if p.name in probes]
    versions = dict(Counter(v[:64] for v in served_versions if v is not None)) if weights is not None else None
    sync = _sync(pool, weights, version, seen.policy, active, probes) if weights is not None else None
    return ServingPlan(replicas, gates, updates, register, deregister, drain, drained, costs, versions, sync,
                       seen.router_problem)  # fmt: skip


def _sync(
    pool: str, weights: Weights, policy: int | None, reading: Reading | None, active: Sequence[PodInfo],
    probes: Mapping[str, Probe],
) -> ConditionUpdate:  # fmt: skip
    """This pool's part of WeightsInSync: how many replicas serve which version, against the trainer's."""
    if policy is None:
        why = reading.error if reading is not None and reading.error else "not read"
        return ConditionUpdate(R.WEIGHTS, "Unknown", R.VERSION_UNKNOWN, f"{pool}: trainer version unknown: {why}")
    counts = Counter((probes.get(p.name) or Probe()).version for p in active)

    def index(v: str | None) -> int | None:  # a version of rlop's, or None
        return named(v) if v is not None else None

    def order(item: tuple[str | None, int]) -> tuple[int, str]:  # unknown and not rlop's first, then by version
        n = index(item[0])
        return (-1 if n is None else n, item[0] or "")

    parts = ", ".join(
        f"{n} at {shown(v) if v is not None else 'unknown'}" for v, n in sorted(counts.items(), key=order)
    )
    sources = sorted({probe.source for p in active if (probe := probes.get(p.name)) and probe.source})
    read = f"; read at {', '.join(sources)}" if sources else ""
    message = f"{pool}: {parts or 'no replica'} (trainer v{policy}, maxStaleness {weights.max_staleness}{read})"
    low = policy - weights.max_staleness
    behind = [v for v in counts.elements() if v is None or ((n := index(v)) is not None and n < low)]
    unassigned = [v for v in counts.elements() if v is not None and ((n := index(v)) is None or n > policy)]
    if behind:  # behind, or not answering
        return ConditionUpdate(R.WEIGHTS, "False", R.BEHIND, message)
    if unassigned:  # "default", or a version the trainer has not published
        return ConditionUpdate(R.WEIGHTS, "False", R.NOT_LOADED, message)
    return ConditionUpdate(R.WEIGHTS, "True", R.IN_SYNC, message)


def _unjudged(pool: str, spec: ServingPool, active: Sequence[PodInfo]) -> ConditionUpdate | None:
    """Between full passes nothing is probed, but a replica that appeared since the last one (no gate yet) is
    not known to serve current weights: the pool cannot be claimed in sync until it is checked."""
    if spec.weights is None:
        return None
    new = [p for p in active if p.weights_current is None]
    if not new:
        return None
    message = f"{pool}: {len(new)} of {len(active)} replicas not checked yet (new since the last probe)"
    return ConditionUpdate(R.WEIGHTS, "False", R.BEHIND, message)


def combine(parts: Sequence[ConditionUpdate]) -> ConditionUpdate | None:
    """One WeightsInSync condition from every pool's part: the worst status, every pool's message."""
    if not parts:
        return None
    order = {"False": 0, "Unknown": 1, "True": 2}
    worst = min(parts, key=lambda c: order[c.status])
    return ConditionUpdate(R.WEIGHTS, worst.status, worst.reason, "; ".join(c.message for c in parts))
