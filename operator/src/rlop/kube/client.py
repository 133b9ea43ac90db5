"""A thin async Kubernetes client: server-side apply, deletes, status patches, events.

Built on the official client's asyncio ApiClient (auth from kubeconfig or the in-cluster ServiceAccount),
speaking plain JSON dicts: child objects are rendered as camelCase dicts by the planner.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes.aio import client, config
from kubernetes.aio.client.exceptions import ApiException

from rlop.api.names import EVENT_SOURCE, FIELD_MANAGER, PODGROUP_API
from rlop.plan.render import Manifest

# kind -> (API path prefix, plural). Only the kinds rlop touches; RBAC in the chart matches this table.
RESOURCES: dict[str, tuple[str, str]] = {
    "Pod": ("/api/v1", "pods"),
    "Service": ("/api/v1", "services"),
    "Event": ("/api/v1", "events"),
    "Deployment": ("/apis/apps/v1", "deployments"),
    "StatefulSet": ("/apis/apps/v1", "statefulsets"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
    "RLJob": ("/apis/rlop.dev/v1alpha1", "rljobs"),
    "PodGroup": (f"/apis/{PODGROUP_API}", "podgroups"),  # kube-scheduler's gangs (alpha in 1.36)
}


class KubeError(Exception):
    """An API call failed; `status` is the HTTP code, `message` the API server's explanation."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def path(kind: str, namespace: str, name: str | None = None, subresource: str | None = None) -> str:
    prefix, plural = RESOURCES[kind]
    out = f"{prefix}/namespaces/{namespace}/{plural}"
    if name:
        out += f"/{name}"
    if subresource:
        out += f"/{subresource}"
    return out


class KubeClient:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> KubeClient:
        cfg = client.Configuration()
        kubeconfig = kubeconfig or os.environ.get("KUBECONFIG")
        if kubeconfig:
            await config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        else:
            config.load_incluster_config(client_configuration=cfg)
        return cls(client.ApiClient(cfg))

    async def close(self) -> None:
        await self.api.close()

    async def request(
        self,
        method: str,
        url: str,
        body: Any = None,
        query: Mapping[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> Any:
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        try:
            _, full, headers, body, _ = await self.api.param_serialize(
                method,
                url,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = await self.api.call_api(method, full, header_params=headers, body=body)
            data = await resp.read()
        except ApiException as exc:
            raise KubeError(exc.status or 0, _message(exc.body)) from None
        if resp.status >= 400:  # the asyncio client returns error responses instead of raising
            raise KubeError(resp.status, _message(data))
        return json.loads(data) if data else None

    async def apply(self, manifest: Manifest) -> Any:
        """Server-side apply as the `rlop` field manager (idempotent; retakes fields others changed)."""
        meta = manifest["metadata"]
        url = path(manifest["kind"], meta["namespace"], meta["name"])
        query = {"fieldManager": FIELD_MANAGER, "force": "true", "fieldValidation": "Strict"}
        return await self.request("PATCH", url, manifest, query, "application/apply-patch+yaml")

    async def scale(self, kind: str, namespace: str, name: str, replicas: int) -> Any:
        """Set a workload's replicas through its /scale subresource, server-side applied as `rlop`: the API
        server reads, compares and stores far less than for an apply of the whole spec."""
        body = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": namespace},
                "spec": {"replicas": replicas}}  # fmt: skip
        query = {"fieldManager": FIELD_MANAGER, "force": "true"}
        return await self.request("PATCH", path(kind, namespace, name, "scale"), body, query,
                                  "application/apply-patch+yaml")  # fmt: skip

    async def list_objects(self, kind: str, namespace: str, selector: str) -> list[Any]:
        """The objects, each with its kind (a list's items carry none)."""
        found = await self.request("GET", path(kind, namespace), query={"labelSelector": selector})
        return [{**item, "kind": kind} for item in (found or {}).get("items") or []]

    async def serves(self, kind: str) -> bool:
        """Does the API server serve this kind (discovery)?"""
        prefix, plural = RESOURCES[kind]
        try:
            found = await self.request("GET", prefix)
        except KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return any(r.get("name") == plural for r in (found or {}).get("resources") or [])

    async def bound_pods(self) -> list[Any]:
        """Every pod bound to a node, in every namespace."""
        found = await self.request("GET", "/api/v1/pods", query={"fieldSelector": "spec.nodeName!="})
        return list((found or {}).get("items") or [])

    async def get(self, kind: str, namespace: str, name: str) -> Any:
        """The object, or None if there is none."""
        try:
            return await self.request("GET", path(kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def delete(self, kind: str, namespace: str, name: str) -> None:
        await self.request("DELETE", path(kind, namespace, name), {"propagationPolicy": "Background"})

    async def patch_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> Any:
        url = path("RLJob", namespace, name, "status")
        return await self.request("PATCH", url, {"status": status}, None, "application/merge-patch+json")

    async def evict(self, namespace: str, pod: str) -> None:
        """Evict through the Eviction API, so PodDisruptionBudgets are respected (429 when one blocks)."""
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": namespace}}
        await self.request("POST", path("Pod", namespace, pod, "eviction"), body)

    async def annotate_pod(self, namespace: str, pod: str, annotations: Mapping[str, str]) -> None:
        patch = {"metadata": {"annotations": dict(annotations)}}
        await self.request("PATCH", path("Pod", namespace, pod), patch, None, "application/merge-patch+json")

    async def set_pod_condition(
        self, namespace: str, pod: str, type_: str, status: str, reason: str, message: str, flipped: bool
    ) -> None:
        """Set one of a pod's status conditions (e.g. a readiness gate's); its transition time moves only
        when the status flips."""
        condition = {"type": type_, "status": status, "reason": reason, "message": message[:1024]}
        if flipped:
            condition["lastTransitionTime"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"status": {"conditions": [condition]}}
        url = path("Pod", namespace, pod, "status")
        await self.request("PATCH", url, patch, None, "application/strategic-merge-patch+json")

    async def remove_scheduling_gate(self, namespace: str, pod: str, gate: str) -> None:
        patch = {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
        await self.request("PATCH", path("Pod", namespace, pod), patch, None, "application/strategic-merge-patch+json")

    async def event(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Post a core/v1 Event about `obj` (what `kubectl describe` shows)."""
        meta = obj["metadata"]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}", "namespace": meta["namespace"]},
            "involvedObject": {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta.get("uid"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": EVENT_SOURCE},
            "reportingComponent": EVENT_SOURCE,
            "reportingInstance": os.environ.get("HOSTNAME", "rlop"),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        await self.request("POST", path("Event", meta["namespace"]), event)


def _message(body: Any) -> str:
    try:
        return str(json.loads(body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(body)
