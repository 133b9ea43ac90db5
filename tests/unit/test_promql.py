from __future__ import annotations

import math

from rlop.plan.readings import per_pod, reading
from rlop.prom.promql import batch, escape, instantiate, split


def test_label_values_are_escaped() -> None:
    assert escape('a"b') == 'a\\"b'
    assert escape("a\\b") == "a\\\\b"
    assert escape("a\nb") == "a\\nb"
    q = instantiate('up{namespace="{{namespace}}",rljob="{{job}}",pool="{{pool}}"}', 'x"} or vector(1) #', "j\\", "p\n")
    assert q == 'up{namespace="x\\"} or vector(1) #",rljob="j\\\\",pool="p\\n"}'


def test_batch_and_split_round_trip() -> None:
    q = batch(["sum(a)", "sum(b)"])
    assert q == 'label_replace((sum(a)), "rlop_key", "0", "", "") or label_replace((sum(b)), "rlop_key", "1", "", "")'
    samples = [({"rlop_key": "1"}, 2.0), ({"rlop_key": "0", "x": "y"}, 1.0), ({"rlop_key": "9"}, 5.0)]
    assert split(samples, 2) == [[({"x": "y"}, 1.0)], [({}, 2.0)]]


def test_reading_needs_exactly_one_finite_sample() -> None:
    assert reading([({}, 3.0)]).value == 3.0
    assert reading([]).error == "query returned no data"
    assert "2 series" in (reading([({}, 1.0), ({}, 2.0)]).error or "")
    assert reading([({}, math.nan)]).value is None
    assert reading([({}, math.inf)]).value is None


def test_per_pod_values() -> None:
    assert per_pod([({"pod": "a"}, 1.0), ({"pod": "b"}, math.nan), ({}, 3.0)]) == {"a": 1.0}
