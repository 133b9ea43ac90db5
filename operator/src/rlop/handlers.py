"""The kopf shell: indexes that keep slim snapshots of what rlop watches, and triggers for the loop.

No handler here writes anything or returns a value; RLJobs carry no finalizer, so they can be deleted even
while the operator is down (children go with them through owner references).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from typing import Any

import kopf
from prometheus_client import start_http_server

from rlop.api.models import GROUP, PLURAL, VERSION
from rlop.api.names import JOB_LABEL
from rlop.config import Config
from rlop.controller import Controller
from rlop.kube.client import KubeClient
from rlop.kube.lease import Lease
from rlop.plan.observed import ChildInfo, NodeInfo, PodInfo, child_info, node_info, pod_info
from rlop.prom.client import PrometheusClient

log = logging.getLogger("rlop")
OWNED = {JOB_LABEL: kopf.PRESENT}


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: rlop has no change handlers (only indexes and on-event triggers), and kopf would
    otherwise deep-copy every watched object on every event to build a diff that nothing reads."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    cfg: Config = memo.get("config") or Config()
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.posting.enabled = False  # rlop posts its own events, one per decision
    settings.scanning.disabled = True
    if cfg.metrics_port:
        start_http_server(cfg.metrics_port)
    prom = PrometheusClient(cfg.prometheus_url, cfg.prometheus_timeout)
    kube = await KubeClient.connect(cfg.kubeconfig)
    lease = Lease(kube, cfg.lease_namespace, cfg.identity) if cfg.leader_election else None
    memo.controller = Controller(kube, prom, cfg, lease)
    memo.loop_task = asyncio.create_task(memo.controller.run(), name="rlop-reconcile-loop")
    if lease is not None:
        memo.lease_task = asyncio.create_task(lease.run(), name="rlop-lease")
    log.info("rlop started: interval %.1fs", cfg.interval)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    for name in ("loop_task", "lease_task"):
        if (task := memo.get(name)) is not None:
            task.cancel()
    controller = memo.get("controller")
    if controller is not None:
        with contextlib.suppress(TimeoutError):  # the events a pass recorded just before
            await asyncio.wait_for(controller.recorder.flush(), 5)
        if controller.lease is not None:
            await controller.lease.release()
        await controller.kube.close()
        await controller.prom.close()
        await controller.engine.close()


@kopf.on.probe(id="reconcile_loop")
async def loop_alive(memo: Any, **_: Any) -> str:
    """Liveness: fail (and get restarted) if the reconcile loop ever stopped."""
    for name in ("loop_task", "lease_task"):
        if (task := memo.get(name)) is not None and task.done():
            raise RuntimeError(f"{name} stopped")
    return "running"


# ---------------------------------------------------------------- indexes (kopf fills them before triggers)
# Every handler is a coroutine: kopf runs a plain function in its thread pool, a hop per watch event (a
# scale-up of 200 jobs brings thousands of pod events) and a poke of the loop's asyncio.Event from a thread.


def _key(body: kopf.Body) -> tuple[str, str]:
    return body.metadata.namespace or "", body.metadata.name or ""


def _owner(body: kopf.Body) -> tuple[str, str]:
    """The (namespace, RLJob name) a child belongs to."""
    return body.metadata.namespace or "", body.metadata.labels[JOB_LABEL]


@kopf.index(GROUP, VERSION, PLURAL)
async def rljob_index(body: kopf.Body, **_: Any) -> dict[tuple[str, str], Any]:
    return {_key(body): copy.deepcopy(dict(body))}


@kopf.index("pods", labels=OWNED)
async def job_pods(body: kopf.Body, **_: Any) -> dict[tuple[str, str], PodInfo]:
    return {_owner(body): pod_info(body)}


@kopf.index("pods")
async def node_pods(body: kopf.Body, **_: Any) -> dict[str, PodInfo]:
    """Every live pod on the node it is bound (or pinned) to: what each node's capacity carries."""
    info = pod_info(body)
    return {info.on: info} if info.on and not info.terminal else {}


@kopf.index("nodes")
async def node_index(body: kopf.Body, **_: Any) -> dict[str, NodeInfo]:
    info = node_info(body)
    return {info.name: info}


@kopf.index("apps", "v1", "deployments", labels=OWNED)
async def job_deployments(body: kopf.Body, **_: Any) -> dict[tuple[str, str], ChildInfo]:
    return {_owner(body): child_info(body)}


@kopf.index("apps", "v1", "statefulsets", labels=OWNED)
async def job_statefulsets(body: kopf.Body, **_: Any) -> dict[tuple[str, str], ChildInfo]:
    return {_owner(body): child_info(body)}


@kopf.index("networking.k8s.io", "v1", "networkpolicies", labels=OWNED)
async def job_networkpolicies(body: kopf.Body, **_: Any) -> dict[tuple[str, str], ChildInfo]:
    return {_owner(body): child_info(body)}


@kopf.index("v1", "services", labels=OWNED)
async def job_services(body: kopf.Body, **_: Any) -> dict[tuple[str, str], ChildInfo]:
    return {_owner(body): child_info(body)}


# ---------------------------------------------------------------- triggers


@kopf.on.event(GROUP, VERSION, PLURAL)
async def rljob_event(body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    memo.controller.poke(_key(body), kwargs)


@kopf.on.event("pods", labels=OWNED)
@kopf.on.event("apps", "v1", "deployments", labels=OWNED)
@kopf.on.event("apps", "v1", "statefulsets", labels=OWNED)
@kopf.on.event("networking.k8s.io", "v1", "networkpolicies", labels=OWNED)
@kopf.on.event("v1", "services", labels=OWNED)
async def child_event(body: kopf.Body, memo: Any, **kwargs: Any) -> None:
    memo.controller.poke(_owner(body), kwargs)
