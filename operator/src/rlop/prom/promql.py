"""PromQL templates (pure): escaped substitution, batching many instances into one query, and splitting
the batched result back per instance.

A template may use ``{{namespace}}``, ``{{job}}`` and ``{{pool}}`` inside double-quoted label matchers;
values are escaped for PromQL strings. All instances of one template are evaluated in ONE request:
``label_replace((q1), "rlop_key", "0", "", "") or label_replace((q2), "rlop_key", "1", "", "") or ...``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
