"""Prometheus: pure PromQL templating/batching and a thin async HTTP client."""
