"""sglang-router's worker API, by generation, as its source answers. The router's history was split out of
sgl-project/sglang (sgl-router/, then sgl-model-gateway/) into smg-project/smg; each release is named by
its version-bump commit there (0.1.9 cebdf5e4b, 0.2.1 a74b0b8fe, 0.2.4 c8b385017, 0.3.2 c7f9bf9f5), paths
relative to the router's folder. 0.3.2 is the last sglang-router on PyPI (what hack/kind and the dev extra
install), and tests/contract/test_live_router.py runs it for real."""

from __future__ import annotations

from .replay import Answer, Table

WORKER = "http://10.0.0.5:8000"
UUID = "a0f0a535-9657-4862-8ed4-75608be7c71b"
EMPTY_404 = Answer(404, None, "src/server.rs:90-92 @c7f9bf9f5 (0.3.2): sink_handler, StatusCode::NOT_FOUND, no body")


def v0_3_2(workers: list[tuple[str, str]]) -> Table:
    """0.3.0-0.3.2: workers keyed by UUID (src/core/worker_registry.rs:147-149, reserve_id_for_url 296-298)."""
    listing = {
        "workers": [{"id": wid, "url": url, "model_id": "rlop-tiny", "priority": 50, "cost": 1.0,
                     "worker_type": "regular", "is_healthy": True, "load": 0, "connection_mode": "HTTP",
                     "metadata": {"dp_size": "1", "model_path": "rlop-tiny"}, "disable_health_check": False}
                    for url, wid in workers],
        "total": len(workers),
        "stats": {"prefill_count": 0, "decode_count": 0, "regular_count": len(workers)},
    }  # fmt: skip
    added = {"status": "accepted", "worker_id": UUID, "url": WORKER, "location": f"/workers/{UUID}",
             "message": "Worker addition queued for background processing"}  # fmt: skip
    removed = {"status": "accepted", "worker_id": UUID, "message": "Worker removal queued for background processing"}
    return {
        ("GET", "/workers"): Answer(200, listing, "src/core/worker_service.rs:159-172, 262-282 @c7f9bf9f5"),
        ("POST", "/workers"): Answer(202, added, "src/core/worker_service.rs:95-111, 225-259 @c7f9bf9f5"),
        ("DELETE", f"/workers/{UUID}"): Answer(202, removed, "src/core/worker_service.rs:120-129, 314-336 @c7f9bf9f5"),
        ("GET", "/list_workers"): EMPTY_404,
    }


def v0_2_4(workers: list[str]) -> Table:
    """0.2.0-0.2.4: /workers keyed by url: id == url (src/core/worker.rs:1134-1135 @c8b385017)."""
    rows = [{"id": url, "url": url, "model_id": "rlop-tiny", "worker_type": "regular", "is_healthy": True, "load": 0}
            for url in workers]  # fmt: skip
    stats = {"prefill_count": 0, "decode_count": 0, "regular_count": len(workers)}
    listing = {"workers": rows, "total": len(workers), "stats": stats}
    queued = {"status": "accepted", "worker_id": WORKER, "message": "Worker addition queued for background processing"}
    removal = {"status": "accepted", "worker_id": WORKER, "message": "Worker removal queued for background processing"}
    return {
        ("GET", "/workers"): Answer(200, listing, "src/server.rs:499-513 @c8b385017"),
        ("POST", "/workers"): Answer(202, queued, "src/server.rs:449-497 @c8b385017"),
        ("DELETE", f"/workers/{WORKER}"): Answer(
            202, removal, "src/server.rs:564-590 @c8b385017 (a Path<String>: one segment, percent-decoded)"
        ),
        ("GET", "/list_workers"): Answer(404, None, "src/server.rs:640-660 @bda5d7095: the old routes gone in 0.2.2"),
    }


def v0_1_9(urls: list[str]) -> Table:
    """0.1.5-0.1.9 (and beside /workers in 0.2.0-0.2.1): /list_workers, /add_worker?url=, /remove_worker?url=."""
    return {
        ("GET", "/workers"): Answer(404, None, "src/server.rs:201-203 @cebdf5e4b: no /workers route; sink_handler"),
        ("GET", "/list_workers"): Answer(200, {"urls": urls}, "src/server.rs:135-138 @cebdf5e4b"),
        ("POST", "/add_worker"): Answer(200, text=f"Successfully added worker: {WORKER}", content_type="text/plain",
                                        source="src/server.rs:114-130 @cebdf5e4b; src/routers/router.rs:785"),
        ("POST", "/remove_worker"): Answer(200, text=f"Successfully removed worker: {WORKER}",
                                           content_type="text/plain", source="src/server.rs:149-154 @cebdf5e4b"),
    }  # fmt: skip


def v0_1_4() -> Table:
    """0.1.3-0.1.4: no listing at all (/list_workers came in 0.1.5, #6366): nothing rlop can reconcile."""
    none = Answer(404, text="", source="src/server.rs @55562ee5a: no such route")
    return {("GET", "/workers"): none, ("GET", "/list_workers"): none}


REMOVED_UNKNOWN_0_2_1 = Answer(400, text=f"Worker {WORKER} not found", content_type="text/plain",
                               source="src/core/worker_manager.rs:848 @a74b0b8fe (0.2.1's /remove_worker)")  # fmt: skip
UNKNOWN_UUID_0_3_2 = Answer(404, {"error": f"Worker {UUID} not found", "code": "WORKER_NOT_FOUND"},
                            "src/core/worker_service.rs:314-336 @c7f9bf9f5")  # fmt: skip
