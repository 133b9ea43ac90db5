"""A short seeded variant of the crash-safety loop (the full one: `make chaos`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlop.dev.cluster import DevCluster
from rlop.dev.prometheus import DevPrometheus, Exporter
from tests.chaos import one_run, report

pytestmark = pytest.mark.cluster


def test_kill_9_mid_flight_converges_with_no_anomalies(
    cluster: DevCluster, prometheus: DevPrometheus, exporter: Exporter, solo_paused: None, tmp_path: Path
) -> None:
    runs = [one_run(cluster, prometheus.url, exporter, tmp_path, seed, jobs=8) for seed in (11, 12, 13)]
    print("\n" + report(runs))
    assert all(r.converged_s is not None for r in runs), [r.anomalies for r in runs]
    assert sum(len(r.anomalies) for r in runs) == 0
