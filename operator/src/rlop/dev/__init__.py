"""Local, real components for tests, benchmarks and the demo: control plane, Prometheus, the operator."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[4]  # the source checkout these helpers run from
DEMO_LABEL = "rlop.dev/demo"  # on the RLJob `rlop demo` applies (the e2e tier removes it on a kept cluster)
