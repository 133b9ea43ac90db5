"""Invalid RLJobs are refused by the API server itself, with a message naming the field."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Kubectl
from tests.invalid_cases import base, cases

pytestmark = pytest.mark.cluster


def test_the_base_of_the_corpus_is_valid(k: Kubectl) -> None:
    k.apply(base())
    k("delete", "rljob", "bad")


@pytest.mark.parametrize(("name", "job", "expect"), cases(), ids=[c[0] for c in cases()])
def test_invalid_rljob_is_refused_with_the_field_named(
    k: Kubectl, name: str, job: dict[str, Any], expect: list[str]
) -> None:
    out = k.apply(job, check=False)
    assert out.returncode != 0, f"{name} was accepted"
    for text in expect:
        assert text in out.stderr, out.stderr
    assert k.get("rljobs").get("items") == []
