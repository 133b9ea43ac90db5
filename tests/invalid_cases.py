"""The corpus of invalid RLJobs in tests/data/invalid/ (a base RLJob plus one merge patch per case)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).parent / "data" / "invalid"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def cases() -> list[tuple[str, dict[str, Any], list[str]]]:
    base = yaml.safe_load((DATA / "base.yaml").read_text())
    return [(c["name"], merge_patch(base, c["patch"]), c["expect"])
            for c in yaml.safe_load((DATA / "cases.yaml").read_text())]  # fmt: skip


def base() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DATA / "base.yaml").read_text())
    return loaded
