"""A terminal table of RLJob pools: desired/ready replicas (groups, for multi-node pools, with their pods per
replica), last metric and the reason (pure rendering)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from rlop.api import reasons as R
from rlop.api.names import WEIGHTS_GATE

COLUMNS = ("JOB", "POOL", "READY", "DESIRED", "PODS/REPLICA", "METRIC", "REASON")


def rows(jobs: Iterable[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for job in jobs:
        name = f"{job['metadata']['namespace']}/{job['metadata']['name']}"
        status = job.get("status") or {}
        for pool, st in sorted((status.get("pools") or {}).items()):
            metric = st.get("lastMetric")
            out.append((
                name, pool, str(st.get("ready", 0)), str(st.get("desired", 0)), str(st.get("nodesPerReplica", 1)),
                "-" if metric is None else f"{metric:g}", st.get("reason") or "",
            ))  # fmt: skip
        ready = next((c for c in status.get("conditions") or [] if c["type"] == R.READY), None)
        if ready and ready["status"] != "True":
            out.append((name, "-", "", "", "", "", f"{status.get('phase', '')}: {ready['message']}"))
    return out


def table(jobs: Iterable[Mapping[str, Any]], width: int = 160) -> str:
    data = [COLUMNS, *rows(jobs)]
    widths = [max(len(r[i]) for r in data) for i in range(len(COLUMNS) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in data]
    return "\n".join(line[:width] for line in lines)


def placements(pods: Iterable[Mapping[str, Any]]) -> str:
    """Sandbox pods per node, e.g. "cpu-1: 4, cpu-2: 2"."""
    live = (p for p in pods if not p["metadata"].get("deletionTimestamp"))
    count = Counter(p["spec"].get("nodeName") or "(pending)" for p in live)
    return ", ".join(f"{node}: {n}" for node, n in sorted(count.items())) or "none"


def replica_versions(jobs: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]) -> str:
    """The trainer's policy version and what each serving replica says it serves (its weights-current
    condition), e.g. "trainer v5; grpo-math-rollout-7d9f-x2: serves v5 (trainer v5)"."""
    policies = [f"trainer v{j['status']['policyVersion']}" for j in jobs if "policyVersion" in (j.get("status") or {})]
    lines = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        gate = next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == WEIGHTS_GATE), None)
        if gate is not None and not pod["metadata"].get("deletionTimestamp"):
            lines.append(f"{pod['metadata']['name']}: {gate.get('message') or gate['status']}")
    return "; ".join(policies + lines) or "none"
