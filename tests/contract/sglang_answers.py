"""SGLang's HTTP answers that rlop reads, by version, transcribed from sgl-project/sglang's source. v0.5.23
is read from its PyPI wheel (sglang-0.5.23; the repository's python/sglang/...). Paths are the
repository's; lines those of the version named."""

from __future__ import annotations

from typing import Any

from .replay import Answer, Table

# python/sglang/srt/managers/io_struct.py:1970-1992 @v0.5.23: UpdateWeightFromDiskReqInput's fields
UPDATE_FIELDS: dict[str, type | tuple[type, ...]] = {
    "model_path": str, "load_format": (str, type(None)), "abort_all_requests": bool,
    "weight_version": (str, type(None)), "is_async": bool, "torch_empty_cache": bool, "keep_pause": bool,
    "recapture_cuda_graph": bool, "token_step": int, "flush_cache": bool, "manifest": (dict, type(None)),
}  # fmt: skip
REQUIRED_UPDATE_FIELDS = {"model_path"}

MODEL_INFO_0_5_23 = "python/sglang/srt/entrypoints/http_server.py:812-846 @v0.5.23"


def model_info_0_5_23(version: str = "default", path: str = "/models/Qwen3-8B") -> dict[str, Any]:
    """GET /model_info: weight_version is tokenizer_manager.config_value("weight_version"), the server arg
    whose default is "default" (python/sglang/srt/arg_groups/fields/serving.py:172-175); model_path and
    served_model_name move to the loaded path after a disk load (tokenizer_manager.py:2365-2369)."""
    return {"model_path": path, "served_model_name": path, "tokenizer_path": path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": version, "load_format": "auto",
            "reasoning_parser": None, "tool_call_parser": None, "disaggregation_mode": "null",
            "has_image_understanding": False, "has_audio_understanding": False, "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"]}  # fmt: skip


def v1_loads(running: list[int], waiting: list[int]) -> dict[str, Any]:
    """GET /v1/loads (python/sglang/srt/entrypoints/v1_loads.py:96-150 @v0.5.23): one LoadSnapshot per
    data-parallel rank, running and waiting apart (python/sglang/srt/managers/load_snapshot.py:196-221)."""
    ranks = [{"timestamp": 0.0, "dp_rank": i, "num_running_reqs": r, "num_waiting_reqs": w,
              "num_waiting_uncached_tokens": 0, "num_used_tokens": 0, "num_total_tokens": 0,
              "num_active_tokens": 0, "num_prealloc_ready_tokens": 0, "max_total_num_tokens": 65536,
              "max_running_requests": 256, "token_usage": 0.0, "gen_throughput": 0.0, "cache_hit_rate": 0.0,
              "utilization": 0.0, "total_prefill_uncached_tokens": 0, "total_prefill_busy_us": 0,
              "decode_moments": None, "queues": {"waiting": w, "grammar": 0, "paused": 0, "retracted": 0,
                                                 "prealloc_ready": 0}}
             for i, (r, w) in enumerate(zip(running, waiting, strict=True))]  # fmt: skip
    return {"timestamp": "2026-12-07T00:00:00+00:00", "version": "0.5.23", "accelerator": "NVIDIA H100",
            "num_accelerators": 1, "loads": ranks}  # fmt: skip


UPDATED = "python/sglang/srt/entrypoints/http_server.py:1300-1325 @v0.5.23 (tokenizer_manager.py:2288-2322)"


def update_ok(version: str) -> Answer:
    message = f"Succeeded to update model weights. Weight version updated to {version}."
    return Answer(200, {"success": True, "message": message, "num_paused_requests": 0}, UPDATED)


UPDATE_FAILED = Answer(400, {"success": False, "message": "Failed to get weights iterator: /weights/9 not found",
                             "num_paused_requests": 0}, UPDATED)  # fmt: skip


def v0_5_23(version: str = "default", running: int = 3, waiting: int = 2) -> Table:
    """SGLang v0.5.23: /model_info, /v1/loads; no /get_weight_version and no /get_load (no route: 404)."""
    return {
        ("GET", "/model_info"): Answer(200, model_info_0_5_23(version), MODEL_INFO_0_5_23),
        ("GET", "/get_model_info"): Answer(200, model_info_0_5_23(version), "http_server.py:802-809 @v0.5.23"),
        ("GET", "/v1/loads"): Answer(200, v1_loads([running], [waiting]), "v1_loads.py:96-150 @v0.5.23"),
        ("POST", "/update_weights_from_disk"): update_ok("7"),
    }


DEPRECATED = ("Endpoint '/get_weight_version' or '/weight_version' is deprecated. Please use '/model_info' "
              "instead.")  # fmt: skip
SLIME_PATCH = "THUDM/slime docker/patch/{}/sglang.patch:{} @624b824a"


def v0_5_9(version: str = "default", running: int = 3, waiting: int = 2) -> Table:
    """SGLang v0.5.9, as the upstream lines slime's patch for it keeps or removes show them (only these are
    transcribed; anything else answers 404): /get_weight_version raises a 404 "deprecated" (http_server.py:574-
    583, the lines the patch removes), /model_info carries weight_version (server_args.weight_version), and
    the scheduler's get_load counts num_reqs = running + waiting (scheduler_metrics_mixin.py:609-620)."""
    info = {"model_path": "/models/Qwen3-8B", "tokenizer_path": "/models/Qwen3-8B", "is_generation": True,
            "preferred_sampling_params": None, "weight_version": version}  # fmt: skip
    load = [{"dp_rank": 0, "num_reqs": running + waiting, "num_waiting_reqs": waiting, "num_tokens": 512,
             "ts_tic": 1.0}]  # fmt: skip
    gone = Answer(404, {"detail": DEPRECATED}, SLIME_PATCH.format("v0.5.9", "825-832"))
    return {
        ("GET", "/model_info"): Answer(200, info, SLIME_PATCH.format("v0.5.9", "825 (hunk: async def model_info)")),
        ("GET", "/get_weight_version"): gone,
        ("GET", "/weight_version"): gone,
        ("GET", "/get_load"): Answer(200, load, SLIME_PATCH.format("v0.5.9", "1562-1612")),
    }


def slime_v0_5_15(version: str = "3") -> Table:
    """slime's build (SGLang v0.5.15.post1 with slime's patches, what slimerl/slime ships): the patch gives
    /get_weight_version back as {"weight_version": model_info()["weight_version"]} (sglang.patch:313-322)."""
    back = Answer(200, {"weight_version": version}, SLIME_PATCH.format("v0.5.15.post1", "313-322"))
    return {**v0_5_9(version), ("GET", "/get_weight_version"): back, ("GET", "/weight_version"): back}
