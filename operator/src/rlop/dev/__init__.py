"""Local, real components for tests, benchmarks and the demo: control plane, Prometheus, the operator."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[4]  # the source checkout these helpers run from
