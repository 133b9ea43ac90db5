"""What upstream's servers answer, read strictly (pure: a status and a body in, a value or a reason out).
The endpoints and shapes come from SGLang, sglang-router and vLLM's sources; tests/contract/ holds an answer
transcribed from each, naming its file and line."""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families


class EngineError(Exception):
    """A server refused or did not answer; `status` is its HTTP code (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Missing(Exception):
    """This endpoint does not say it (a 404, or an answer without the field): ask the next one."""


class Unreadable(Exception):
    """No endpoint said it: what each answered, for a condition or an event."""


Reader = Callable[[int, str], Any]
Way = tuple[str, Reader]  # (path, its reader)


def _cut(text: str, n: int = 80) -> str:
    text = text.strip()
    return repr(text[:n] + ("..." if len(text) > n else ""))


def _json(status: int, text: str) -> Any:
    """The JSON of a 200; Missing for a 404 (the endpoint is not served); Unreadable for anything else."""
    if status == 404:
        raise Missing("404 (not served)")
    if status != 200:
        raise Unreadable(f"{status} {_cut(text)}")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth
        raise Unreadable(f"200 but not JSON: {_cut(text)}") from None


def _version_field(status: int, text: str) -> str:
    """{"weight_version": "..."}: SGLang's ServerArgs.weight_version, a string ("default" until a load names one)."""
    body = _json(status, text)
    if not isinstance(body, dict) or "weight_version" not in body:
        raise Missing("200 without weight_version")
    version = body["weight_version"]
    if not isinstance(version, str):
        raise Unreadable(f"200 with weight_version {json.dumps(version)[:40]}: not a string")
    return version


# the weight version: /model_info first (SGLang reports weight_version there since before it deprecated
# /get_weight_version: a 404 "deprecated. Please use '/model_info'" from v0.5.9, no route later), then the
# endpoint older and slime-patched builds serve
VERSION_WAYS: tuple[Way, ...] = (("/model_info", _version_field), ("/get_weight_version", _version_field))


def _count(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Unreadable(f"200 with {name} {json.dumps(value)[:40]}: not a count")
    return value


def _v1_loads(status: int, text: str) -> int:
    """SGLang's GET /v1/loads: {"loads": [one LoadSnapshot per data-parallel rank]}, running and waiting
    requests apart (num_running_reqs, num_waiting_reqs)."""
    body = _json(status, text)
    ranks = body.get("loads") if isinstance(body, dict) else None
    fields = ("num_running_reqs", "num_waiting_reqs")  # LoadSnapshot.to_dict always has both
    if (
        not isinstance(ranks, list)
        or not ranks
        or not all(isinstance(r, dict) and set(fields) <= set(r) for r in ranks)
    ):
        raise Unreadable(f"200 without a load per rank: {_cut(text)}")
    return sum(_count(r[f], f) for r in ranks for f in fields)


def _get_load(status: int, text: str) -> int:
    """SGLang's GET /get_load: a list, one entry per data-parallel rank, whose num_reqs already counts the
    waiting requests (num_waiting_reqs is a part of it, not more)."""
    body = _json(status, text)
    ranks = body if isinstance(body, list) else [body]
    if not ranks or not all(isinstance(r, dict) and "num_reqs" in r for r in ranks):
        raise Unreadable(f"200 without num_reqs: {_cut(text)}")
    return sum(_count(r["num_reqs"], "num_reqs") for r in ranks)


VLLM_LOAD = ("vllm:num_requests_running", "vllm:num_requests_waiting")


def _vllm_metrics(status: int, text: str) -> int:
    """vLLM's GET /metrics (Prometheus text): requests running plus waiting, over every engine and model."""
    if status != 200:
        raise Missing(f"{status} {_cut(text)}") if status == 404 else Unreadable(f"{status} {_cut(text)}")
    try:
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples if s.name in VLLM_LOAD]
    except (ValueError, TypeError, IndexError) as exc:
        raise Unreadable(f"200 but not Prometheus text: {exc}") from None
    if not samples:
        raise Unreadable(f"200 without {' or '.join(VLLM_LOAD)}")
    if not all(math.isfinite(s.value) and s.value >= 0 for s in samples):
        raise Unreadable(f"200 with a load that is not a count: {[s.value for s in samples][:4]}")
    return round(sum(s.value for s in samples))


LOAD_WAYS: dict[str, tuple[Way, ...]] = {
    "sglang": (("/v1/loads", _v1_loads), ("/get_load", _get_load)),
    "vllm": (("/metrics", _vllm_metrics),),
}


def read_update(status: int, text: str) -> None:
    """POST /update_weights_from_disk's answer, {success, message, num_paused_requests}: 200 when loaded,
    400 with success false when not. Raises EngineError unless it says it loaded."""
    try:
        body = json.loads(text) if text.strip() else None
    except (ValueError, RecursionError):
        body = None
    said = body.get("message") if isinstance(body, dict) else None
    message = str(said)[:300] if said is not None else _cut(text, 300)
    if status >= 400:
        raise EngineError(status, message)
    if not isinstance(body, dict) or body.get("success") is not True:
        raise EngineError(status, f"the load did not say it succeeded: {message}")


class RouterApi(enum.Enum):
    """The worker APIs of sglang-router (no version says which it speaks: `listing` tells, 404 where not):
    WORKERS, 0.2.0 on: GET /workers lists {id, url} (id the url in 0.2.x, a UUID from 0.3.0), POST /workers
    {url} is queued (202), DELETE /workers/{id}; LEGACY, 0.1.5 to 0.2.1: GET /list_workers {"urls"}, POST
    /add_worker?url= (waits for the worker's /health), POST /remove_worker?url=. 0.2.0 and 0.2.1 speak both."""

    WORKERS = "/workers"
    LEGACY = "/list_workers"

    @property
    def listing(self) -> str:
        return self.value


def read_workers(api: RouterApi, status: int, text: str) -> dict[str, str]:
    """A router's listing, url -> the id it removes a worker by (the url itself for routers keyed by url).
    Missing: the router does not speak `api`."""
    if status == 404:
        raise Missing("404")
    if status != 200:
        raise EngineError(status, _cut(text))
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise Missing("not JSON") from None
    if api is RouterApi.WORKERS:
        rows = body.get("workers") if isinstance(body, dict) else None
        if not isinstance(rows, list) or not all(isinstance(w, dict) and isinstance(w.get("url"), str) for w in rows):
            raise Missing("no list of workers with urls")
        return {w["url"]: str(w.get("id") or w["url"]) for w in rows}
    urls = body.get("urls") if isinstance(body, dict) else None
    if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
        raise Missing("no list of urls")
    return {u: u for u in urls}


def unknown_router(router: str) -> str:
    apis = " or ".join(f"GET {a.listing}" for a in RouterApi)
    return (f"the router at {router} speaks no worker API rlop knows (neither {apis} lists its workers): "
            "sglang-router 0.3.x and the older /list_workers routers are supported")  # fmt: skip


def read_change(status: int, text: str) -> None:
    """A router's answer to adding or removing a worker: 2xx (POST /workers answers 202, added in the
    background; whether it was is seen in the next listing). A worker the router does not know is gone
    already: 0.3's 404 WORKER_NOT_FOUND, 0.2.0-0.2.1's /remove_worker 400 "Worker <url> not found" (a 404 here).
    Raises EngineError otherwise."""
    if 200 <= status < 300:
        return
    if status == 400 and text.strip().endswith("not found"):
        status = 404
    raise EngineError(status, text.strip()[:300])
