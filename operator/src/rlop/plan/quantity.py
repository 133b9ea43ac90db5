"""Kubernetes resource quantities ("500m", "2Gi", 4) as floats (pure)."""

from __future__ import annotations

import re

_SUFFIXES = {
    "n": 1e-9, "u": 1e-6, "m": 1e-3, "": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}  # fmt: skip


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
MOST = float(2**63 - 1)  # Kubernetes reads a larger quantity (e.g. 1e400, which it accepts) as int64's max


def parse_quantity(value: int | float | str) -> float:
    """Parse a quantity; raises ValueError on anything Kubernetes would refuse."""
    if isinstance(value, int | float):
        return float(value)
    text = value.strip()
    suffix = text[-2:] if text[-2:] in _SUFFIXES else text[-1:] if text[-1:] in _SUFFIXES else ""
    number = text[: len(text) - len(suffix)]
    if not _NUMBER.fullmatch(number):
        raise ValueError(f"not a quantity: {value!r}")
    return max(-MOST, min(float(number) * _SUFFIXES[suffix], MOST))


Resources = dict[str, float]


def add(a: Resources, b: Resources, sign: float = 1.0) -> Resources:
    """Element-wise a + sign*b."""
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0.0) + sign * value
    return out


def fits(request: Resources, free: Resources) -> bool:
    """True when every requested resource is available (a tiny epsilon absorbs float error)."""
    return all(free.get(k, 0.0) + 1e-9 >= v for k, v in request.items() if v > 0)
