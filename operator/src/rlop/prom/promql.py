"""PromQL templates (pure): escaped substitution, batching many instances into one query, and reading
results back.

A template may use ``{{namespace}}``, ``{{job}}`` and ``{{pool}}`` inside double-quoted label matchers;
values are escaped for PromQL strings. All instances of one template are evaluated in ONE request:
``label_replace((q1), "rlop_key", "0", "", "") or label_replace((q2), "rlop_key", "1", "", "") or ...``
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rlop.plan.autoscale import Reading

KEY_LABEL = "rlop_key"
Sample = tuple[Mapping[str, str], float]


def escape(value: str) -> str:
    """Escape a label value for a double-quoted PromQL string."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")


def instantiate(template: str, namespace: str, job: str, pool: str) -> str:
    out = template
    for name, value in (("namespace", namespace), ("job", job), ("pool", pool)):
        out = out.replace("{{" + name + "}}", escape(value))
    return out


def batch(queries: Sequence[str]) -> str:
    return " or ".join(f'label_replace(({q}), "{KEY_LABEL}", "{i}", "", "")' for i, q in enumerate(queries))


def split(samples: Sequence[Sample], count: int) -> list[list[Sample]]:
    """Results of a batched query, back per instance (by the rlop_key label)."""
    out: list[list[Sample]] = [[] for _ in range(count)]
    for labels, value in samples:
        key = labels.get(KEY_LABEL, "")
        if key.isdigit() and int(key) < count:
            out[int(key)].append(({k: v for k, v in labels.items() if k != KEY_LABEL}, value))
    return out


def reading(samples: Sequence[Sample]) -> Reading:
    """One metric value from a query's result: exactly one finite sample, or why not."""
    if not samples:
        return Reading(None, "query returned no data")
    if len(samples) > 1:
        return Reading(None, f"query returned {len(samples)} series; aggregate it, e.g. sum(...)")
    value = samples[0][1]
    if not math.isfinite(value):
        return Reading(None, f"query returned {value}")
    return Reading(value)


def per_pod(samples: Sequence[Sample]) -> dict[str, float]:
    """Values of a per-pod query by its `pod` label (non-finite values are dropped)."""
    return {labels["pod"]: v for labels, v in samples if "pod" in labels and math.isfinite(v)}
