from __future__ import annotations

import pytest

from rlop.plan.quantity import fits, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [("500m", 0.5), ("2", 2.0), (3, 3.0), ("1Gi", 2**30), ("1G", 1e9), ("1e3", 1000.0), ("100Ki", 102400.0),
     ("0.5", 0.5), ("250u", 250e-6), ("1E", 1e18), ("1e400", 2**63 - 1), ("9" * 60 + "E", 2**63 - 1),
     (".5", 0.5), ("+2", 2.0)],
)  # fmt: skip
def test_parse_quantity(text: str | int, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


@pytest.mark.parametrize("bad", ["", "abc", "1x", "nan", "inf", "Infinity", "1GB", "one", "1 e3", "0x10"])
def test_parse_quantity_refuses_garbage(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_fits() -> None:
    assert fits({"cpu": 1.0}, {"cpu": 1.0})
    assert not fits({"cpu": 1.5}, {"cpu": 1.0})
    assert not fits({"nvidia.com/gpu": 1.0}, {"cpu": 8.0})
    assert fits({"nvidia.com/gpu": 0.0}, {})
