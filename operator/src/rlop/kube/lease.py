"""Leader election on a coordination.k8s.io Lease, so only one of several operator replicas acts.

Every replica watches and plans; only the holder of a valid lease writes. A holder that cannot renew
stops acting at `renewTime + duration - margin`, before any other replica may take the lease over at
`renewTime + duration`: no two replicas act at once (assuming clocks within `margin` of each other).
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from rlop.api.names import LEASE_NAME
from rlop.kube.client import KubeClient, KubeError

log = logging.getLogger("rlop")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _parse(stamp: str | None) -> float:
    if not stamp:
        return 0.0
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Lease:
    def __init__(
        self, kube: KubeClient, namespace: str, identity: str, name: str = LEASE_NAME, duration: float = 15.0
    ) -> None:
        self.kube, self.namespace, self.identity, self.name = kube, namespace, identity, name
        self.duration = duration
        self.margin = duration / 3
        self.valid_until = 0.0  # monotonic time until which this replica may act

    @property
    def url(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def is_leader(self) -> bool:
        return time.monotonic() < self.valid_until

    async def run(self) -> None:
        while True:
            was = self.is_leader()
            try:
                await self.try_acquire_or_renew()
            except (KubeError, OSError) as exc:
                log.warning("Lease %s/%s: %s", self.namespace, self.name, exc)
            if self.is_leader() != was:
                log.info("Lease %s/%s: %s", self.namespace, self.name, "acquired" if not was else "lost")
            await asyncio.sleep(self.margin / 2)

    async def try_acquire_or_renew(self) -> None:
        started = time.monotonic()
        try:
            lease: dict[str, Any] = await self.kube.request("GET", f"{self.url}/{self.name}")
        except KubeError as exc:
            if exc.status != 404:
                raise
            body = self._body({}, transitions=0)
            await self.kube.request("POST", self.url, body)
            self.valid_until = started + self.duration - self.margin
            return
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        expired = time.time() > _parse(spec.get("renewTime")) + float(spec.get("leaseDurationSeconds") or 0)
        if holder != self.identity and not expired:
            self.valid_until = 0.0
            return
        transitions = int(spec.get("leaseTransitions") or 0) + (holder != self.identity)
        body = self._body(
            lease["metadata"], transitions, acquired=spec.get("acquireTime"), keep=holder == self.identity
        )
        try:  # resourceVersion makes this a compare-and-swap: one winner
            await self.kube.request("PUT", f"{self.url}/{self.name}", body)
        except KubeError as exc:
            if exc.status == 409:
                self.valid_until = 0.0
                return
            raise
        self.valid_until = started + self.duration - self.margin

    def _body(
        self, meta: dict[str, Any], transitions: int, acquired: str | None = None, keep: bool = False
    ) -> dict[str, Any]:
        now = _now()
        metadata = {"name": self.name, "namespace": self.namespace}
        if meta.get("resourceVersion"):
            metadata["resourceVersion"] = meta["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.duration),
                "acquireTime": acquired if keep and acquired else now,
                "renewTime": now,
                "leaseTransitions": transitions,
            },
        }

    async def release(self) -> None:
        """Give the lease up on a clean shutdown, so a standby takes over at once."""
        if not self.is_leader():
            return
        self.valid_until = 0.0
        try:
            lease = await self.kube.request("GET", f"{self.url}/{self.name}")
            if (lease.get("spec") or {}).get("holderIdentity") == self.identity:
                lease["spec"]["renewTime"] = "1970-01-01T00:00:00.000000Z"
                await self.kube.request("PUT", f"{self.url}/{self.name}", lease)
        except (KubeError, OSError) as exc:
            log.warning("Lease %s/%s not released: %s", self.namespace, self.name, exc)
