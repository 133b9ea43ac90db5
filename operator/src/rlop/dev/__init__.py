"""Local, real components for tests, benchmarks and the demo: control plane, Prometheus, the operator."""
