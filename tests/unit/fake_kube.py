"""An in-memory API server for Controller unit tests: it keeps what is applied (a no-op apply writes
nothing, as server-side apply), refuses what a test tells it to, and builds the indexes kopf's watches
would hold."""

from __future__ import annotations

import copy
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from rlop.api.names import JOB_LABEL
from rlop.kube.client import KubeError
from rlop.plan.observed import child_info, node_info, pod_info
from rlop.plan.serving import Probe
from rlop.prom.client import Request, Result

ObjKey = tuple[str, str, str]  # (kind, namespace, name)
CHILD_INDEX = {
    "Deployment": "job_deployments",
    "StatefulSet": "job_statefulsets",
    "Service": "job_services",
    "NetworkPolicy": "job_networkpolicies",
}


class FakeKube:
    def __init__(self) -> None:
        self.objects: dict[ObjKey, dict[str, Any]] = {}
        self.refuse: dict[tuple[str, str], KubeError] = {}  # (verb, "Kind/name") -> the error to raise
        self.writes: list[tuple[str, str]] = []  # (verb, "Kind/name") of every write that changed something
        self.events: list[tuple[str, str, str]] = []  # (type, reason, message)
        self.revision = 0

    def _call(self, verb: str, kind: str, name: str) -> None:
        error = self.refuse.get((verb, f"{kind}/{name}"))
        if error is not None:
            raise error

    def _bump(self, obj: dict[str, Any]) -> None:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)

    def put(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create or replace an object as a user would (no field manager involved)."""
        out = copy.deepcopy(dict(obj))
        meta = out["metadata"]
        meta.setdefault("uid", f"uid-{out['kind']}-{meta['name']}")
        if out["kind"] not in ("Service", "Pod", "Node"):
            meta["generation"] = meta.get("generation", 0) + 1
        self._bump(out)
        self.objects[(out["kind"], meta.get("namespace", ""), meta["name"])] = out
        return out

    def edit(self, kind: str, namespace: str, name: str, **spec: Any) -> None:
        """A hand edit of a child's spec (kubectl scale, set image, ...)."""
        obj = self.objects[(kind, namespace, name)]
        obj["spec"].update(spec)
        self.put(obj)

    async def apply(self, manifest: Mapping[str, Any]) -> Any:
        kind, meta = manifest["kind"], manifest["metadata"]
        self._call("apply", kind, meta["name"])
        key = (kind, meta["namespace"], meta["name"])
        old = self.objects.get(key)
        if (
            old is not None
            and all(old.get(f) == manifest.get(f) for f in ("spec", "data"))
            and all(old["metadata"].get(f) == meta.get(f) for f in ("labels", "annotations", "ownerReferences"))
        ):
            return copy.deepcopy(old)  # nothing changes: no write, no new version
        new = copy.deepcopy(dict(manifest))
        if old is not None:
            new["metadata"] = {**old["metadata"], **new["metadata"]}
            new["status"] = old.get("status")
        self.writes.append(("apply", f"{kind}/{meta['name']}"))
        return copy.deepcopy(self.put(new))

    async def scale(self, kind: str, namespace: str, name: str, replicas: int) -> Any:
        self._call("scale", kind, name)
        obj = self.objects.get((kind, namespace, name))
        if obj is None:
            raise KubeError(404, f'{kind.lower()}s "{name}" not found')
        if obj["spec"].get("replicas") != replicas:
            obj["spec"]["replicas"] = replicas
            self.put(obj)
            self.writes.append(("scale", f"{kind}/{name}"))
        meta = obj["metadata"]  # a Scale carries no generation
        return {"kind": "Scale", "metadata": {"name": name, "resourceVersion": meta["resourceVersion"]},
                "spec": {"replicas": replicas}}  # fmt: skip

    async def get(self, kind: str, namespace: str, name: str) -> Any:
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    async def serves(self, kind: str) -> bool:
        return False  # no kube-scheduler gangs here: rlop's own fit check

    async def list_objects(self, kind: str, namespace: str, selector: str) -> list[Any]:
        return [copy.deepcopy(o) for (k, ns, _), o in self.objects.items() if k == kind and ns == namespace]

    async def bound_pods(self) -> list[Any]:
        return [o for (kind, _, _), o in self.objects.items() if kind == "Pod" and o["spec"].get("nodeName")]

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        self._call("delete", kind, name)
        if self.objects.pop((kind, namespace, name), None) is None:
            raise KubeError(404, f'{kind.lower()}s "{name}" not found')
        self.writes.append(("delete", f"{kind}/{name}"))

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> Any:
        self._call("patch_status", "RLJob", name)
        obj = self.objects[("RLJob", namespace, name)]
        obj["status"] = _merge(obj.get("status") or {}, status)
        self._bump(obj)
        self.writes.append(("status", f"RLJob/{name}"))
        return copy.deepcopy(obj)

    async def evict(self, namespace: str, pod: str) -> None:
        self._call("evict", "Pod", pod)
        await self.delete("Pod", namespace, pod)

    async def annotate_pod(self, namespace: str, pod: str, annotations: Mapping[str, str]) -> None:
        self._call("annotate", "Pod", pod)
        self.objects[("Pod", namespace, pod)]["metadata"].setdefault("annotations", {}).update(annotations)
        self.writes.append(("annotate", f"Pod/{pod}"))

    async def remove_scheduling_gate(self, namespace: str, pod: str, gate: str) -> None:
        self._call("release", "Pod", pod)
        spec = self.objects[("Pod", namespace, pod)]["spec"]
        spec["schedulingGates"] = [g for g in spec.get("schedulingGates") or [] if g["name"] != gate]
        self.writes.append(("release", f"Pod/{pod}"))

    async def set_pod_condition(
        self, namespace: str, pod: str, type_: str, status: str, reason: str, message: str, flipped: bool
    ) -> None:
        self._call("condition", "Pod", pod)
        conditions = self.objects[("Pod", namespace, pod)].setdefault("status", {}).setdefault("conditions", [])
        old = next((c for c in conditions if c["type"] == type_), {})
        since = "2026-12-04T12:00:00Z" if flipped else old.get("lastTransitionTime")
        conditions[:] = [c for c in conditions if c["type"] != type_]
        conditions.append({"type": type_, "status": status, "reason": reason, "message": message,
                           "lastTransitionTime": since})  # fmt: skip
        self.writes.append(("condition", f"Pod/{pod}"))

    async def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    async def close(self) -> None:
        pass

    def indexes(self) -> dict[str, dict[Hashable, list[Any]]]:
        """What kopf's indexes hold once every watch has caught up (as rlop.handlers builds them)."""
        out: dict[str, dict[Hashable, list[Any]]] = {
            name: {} for name in ("rljob_index", "job_pods", "node_pods", "node_index", *CHILD_INDEX.values())
        }
        for (kind, ns, name), obj in self.objects.items():
            job = (ns, (obj["metadata"].get("labels") or {}).get(JOB_LABEL))
            if kind == "RLJob":
                out["rljob_index"][(ns, name)] = [copy.deepcopy(obj)]
            elif kind == "Node":
                out["node_index"][name] = [node_info(obj)]
            elif kind == "Pod":
                info = pod_info(obj)
                if job[1]:
                    out["job_pods"].setdefault(job, []).append(info)
                if info.on and not info.terminal:
                    out["node_pods"].setdefault(info.on, []).append(info)
            elif kind in CHILD_INDEX and job[1]:
                out[CHILD_INDEX[kind]].setdefault(job, []).append(child_info(obj))
        return out


class FakePrometheus:
    """Answers each job's queries with what a test sets per query key (pool, metric index); unset: no data."""

    def __init__(self) -> None:
        self.answers: dict[Hashable, Result] = {}

    async def read(self, requests: Sequence[Request]) -> dict[Hashable, Result]:
        return {r.key: self.answers.get(r.key[2], []) for r in requests}  # type: ignore[index]

    async def close(self) -> None:
        pass


def _merge(old: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (null removes)."""
    out = dict(old)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class FakeEngine:
    """Serving replicas and their router, as rlop.engine.EngineClient reaches them: each url serves a version
    (missing: no answer); the router's workers are url -> id."""

    def __init__(self, served: Mapping[str, str], workers: Mapping[str, str]) -> None:
        self.served = dict(served)
        self.workers_ = dict(workers)
        self.calls: list[tuple[str, str]] = []

    async def probe(self, url: str, engine: str = "sglang", versions: bool = True) -> Probe:
        return Probe(self.served.get(url), 0 if url in self.served else None, "GET /model_info")

    async def workers(self, router: str) -> dict[str, str]:
        return dict(self.workers_)

    async def register(self, router: str, url: str) -> None:
        self.calls.append(("register", url))
        self.workers_[url] = f"w-{url}"

    async def deregister(self, router: str, worker: str) -> None:
        self.calls.append(("deregister", worker))
        self.workers_ = {u: w for u, w in self.workers_.items() if w != worker}

    async def load_weights(self, url: str, model_path: str, version: int) -> None:
        self.calls.append(("load", f"{url} v{version}"))
