"""vLLM's answers that rlop reads, from vllm-project/vllm v0.34.0 (the PyPI wheel vllm-0.34.0). The load:
the scheduler gauges on GET /metrics, one child per (model_name, engine) (vllm/v1/metrics/loggers.py:499,
527-545). vllm:num_requests_waiting_by_reason (loggers.py:547-557) splits the same waiting requests by reason
and must not be counted again."""

from __future__ import annotations

from .replay import Answer

METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 3.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 4.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 0.0
# HELP vllm:num_requests_waiting_by_reason Number of waiting requests by reason.
# TYPE vllm:num_requests_waiting_by_reason gauge
vllm:num_requests_waiting_by_reason{engine="0",model_name="Qwen/Qwen3-8B",reason="capacity"} 4.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="Qwen/Qwen3-8B",reason="deferred"} 0.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.5
"""
LOAD = 3 + 2 + 4 + 0  # running + waiting, every engine

V0_34_0 = {("GET", "/metrics"): Answer(200, text=METRICS, content_type="text/plain",
                                       source="vllm/v1/metrics/loggers.py:499, 527-545 @v0.34.0")}  # fmt: skip
