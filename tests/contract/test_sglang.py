"""rlop's engine client against SGLang's and vLLM's answers as their sources give them (tests/contract/
*_answers.py, each answer naming its file and line), served over loopback HTTP: the requests it sends,
what it reads from each answer, and that no malformed answer makes a replica current."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest

from rlop.api import reasons as R
from rlop.api.models import ServingPool
from rlop.engine import EngineClient, EngineError
from rlop.plan.autoscale import Reading
from rlop.plan.observed import PodInfo
from rlop.plan.serving import Probe, ServingObservation, plan_serving

from . import sglang_answers as S
from . import vllm_answers as V
from .replay import Answer, Replay, Table, replay

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


async def probed(table: Table, engine: str = "sglang", versions: bool = True, times: int = 1) -> tuple[Probe, Replay]:
    async with replay(table) as server:
        client = EngineClient()
        try:
            for _ in range(times):
                got = await client.probe(server.url, engine, versions)
        finally:
            await client.close()
    return got, server


def test_upstream_sglang_0_5_23_reports_its_version_at_model_info_and_its_load_at_v1_loads() -> None:
    got, server = run(probed(S.v0_5_23("default", running=3, waiting=2)))
    assert got == Probe("default", 5, "GET /model_info")  # running + waiting: /v1/loads counts them apart
    assert server.asked() == ["GET /model_info", "GET /v1/loads"]
    assert run(probed(S.v0_5_23("7")))[0].version == "7"


def test_sglang_0_5_9_is_read_at_model_info_and_get_load_whose_num_reqs_counts_the_waiting() -> None:
    got, server = run(probed(S.v0_5_9("4", running=3, waiting=2)))
    assert got == Probe("4", 5, "GET /model_info")  # 5, not 5 + 2: num_waiting_reqs is a part of num_reqs
    assert server.asked() == ["GET /model_info", "GET /v1/loads", "GET /get_load"]  # never the deprecated one


def test_slimes_patched_build_answers_model_info_first_and_the_same_version() -> None:
    got, _ = run(probed(S.slime_v0_5_15("3")))
    assert got.version == "3" and got.source == "GET /model_info"


# A server without /model_info that answers /get_weight_version (the reference server's legacy mode; the shape of
# slime's patched endpoint, sglang.patch:313-322): not transcribed from one SGLang release, but the fallback's case.
LEGACY: Table = {
    ("GET", "/get_weight_version"): S.slime_v0_5_15("3")[("GET", "/get_weight_version")],
    ("GET", "/get_load"): S.v0_5_9(running=3, waiting=2)[("GET", "/get_load")],
}


def test_a_server_without_model_info_is_read_at_get_weight_version() -> None:
    got, server = run(probed(LEGACY))
    assert got == Probe("3", 5, "GET /get_weight_version")
    assert server.asked() == ["GET /model_info", "GET /get_weight_version", "GET /v1/loads", "GET /get_load"]


def test_a_deprecated_get_weight_version_is_no_answer_and_says_so() -> None:
    table = {("GET", "/model_info"): Answer(200, {"model_path": "m"}), **{
        k: v for k, v in S.v0_5_9().items() if k[1] == "/get_weight_version"}}  # fmt: skip
    got, _ = run(probed(table))
    assert got.version is None and "GET /get_weight_version: 404 (not served)" in got.error


def test_the_endpoint_that_answered_is_asked_first_next_time() -> None:
    _, server = run(probed(LEGACY, times=2))
    assert server.asked()[4:] == ["GET /get_weight_version", "GET /get_load"]


def test_a_get_load_with_one_entry_per_data_parallel_rank_is_summed() -> None:
    ranks = [{"dp_rank": i, "num_reqs": n, "num_waiting_reqs": 1, "num_tokens": 0} for i, n in enumerate((2, 3))]
    table = {**LEGACY, ("GET", "/get_load"): Answer(200, ranks)}
    assert run(probed(table))[0].load == 5
    many = {**S.v0_5_23(), ("GET", "/v1/loads"): Answer(200, S.v1_loads([1, 2, 3], [0, 1, 0]))}
    assert run(probed(many))[0].load == 7


NOT_JSON = Answer(200, text="<html><body>It works!</body></html>", content_type="text/html")


@pytest.mark.parametrize(
    ("table", "error"),
    [
        ({("GET", "/model_info"): NOT_JSON}, "GET /model_info: 200 but not JSON: '<html>"),
        ({("GET", "/model_info"): Answer(200, {"weight_version": 7})}, "weight_version 7: not a string"),
        ({("GET", "/model_info"): Answer(200, {"weight_version": None})}, "weight_version null: not a string"),
        ({("GET", "/model_info"): Answer(500, {"detail": "boom"})}, "GET /model_info: 500"),
        ({("GET", "/model_info"): Answer(200, [1, 2])}, "GET /get_weight_version: 404"),  # not a dict: no field
        (
            {("GET", "/model_info"): Answer(200, {"model_path": "m"})},
            "GET /model_info: 200 without weight_version; GET /get_weight_version: 404 (not served)",
        ),
        ({}, "GET /model_info: 404 (not served); GET /get_weight_version: 404 (not served)"),  # not SGLang at all
        ({("GET", "/model_info"): Answer(200, text="")}, "200 but not JSON"),
        ({("GET", "/model_info"): Answer(200, text="[" * 100000)}, "200 but not JSON"),  # past the parser's depth
    ],
    ids=["html", "int-version", "null-version", "500", "json-list", "no-field", "nothing", "empty-200", "deep"],
)
def test_a_malformed_answer_is_an_unknown_version_that_says_why_and_never_a_current_replica(
    table: Table, error: str
) -> None:
    got, _ = run(probed(table))
    assert got.version is None and error in got.error, got
    pool = ServingPool.model_validate({"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                                       "replicas": 1, "weights": {"volume": {"emptyDir": {}}}})  # fmt: skip
    pod = PodInfo(name="p1", pool="rollout", ip="10.0.0.1", containers_ready=True, ready=False)
    plan = plan_serving("rollout", pool, 1, [pod], ServingObservation({"p1": got}, None, "", Reading(5)), {},
                        datetime(2026, 12, 7, tzinfo=UTC))  # fmt: skip
    gate = plan.gates["p1"]
    assert (gate.status, gate.reason) == ("False", R.VERSION_UNKNOWN) and error in gate.message
    assert plan.updates == []  # nothing is told to a server that does not say what it serves


def test_a_server_that_does_not_answer_is_unknown() -> None:
    async def refused() -> Probe:
        client = EngineClient()
        try:
            return await client.probe("http://127.0.0.1:9")  # discard: nothing listens
        finally:
            await client.close()

    got = run(refused())
    assert got.version is None and got.load is None and "GET /model_info: no answer" in got.error


@pytest.mark.parametrize(
    "loads",
    [Answer(200, {"loads": "many"}), Answer(200, {"loads": [{"num_running_reqs": -1, "num_waiting_reqs": 0}]}),
     NOT_JSON, Answer(200, {"loads": [{"num_running_reqs": True, "num_waiting_reqs": 0}]}),
     Answer(200, {"loads": []}), Answer(200, {"loads": [{}]}), Answer(200, {"loads": [{"num_running_reqs": 0}]})],
    ids=["not-a-list", "negative", "html", "bool", "no-rank", "empty-rank", "no-waiting"],
)  # fmt: skip
def test_a_malformed_load_is_unknown_not_zero(loads: Answer) -> None:
    got, _ = run(probed({**S.v0_5_23(), ("GET", "/v1/loads"): loads}))
    assert got.version == "default" and got.load is None  # a drain never ends early on a load it could not read


def test_an_empty_get_load_is_unknown_not_zero() -> None:
    got, _ = run(probed({**LEGACY, ("GET", "/get_load"): Answer(200, [])}))
    assert got.load is None


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-3"])
def test_a_vllm_gauge_that_is_no_count_is_an_unknown_load(value: str) -> None:
    text = V.METRICS.replace('vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 0.0',
                             f'vllm:num_requests_waiting{{engine="1",model_name="Qwen/Qwen3-8B"}} {value}')  # fmt: skip
    table = {("GET", "/metrics"): Answer(200, text=text, content_type="text/plain")}
    assert run(probed(table, engine="vllm", versions=False))[0].load is None


def test_vllm_is_asked_its_load_from_metrics_and_nothing_about_weights() -> None:
    got, server = run(probed(V.V0_34_0, engine="vllm", versions=False))
    assert got == Probe(None, V.LOAD)  # waiting_by_reason not counted twice
    assert server.asked() == ["GET /metrics"]


async def loaded(answer: Answer, version: int = 7) -> tuple[Exception | None, Replay]:
    async with replay({("POST", "/update_weights_from_disk"): answer}) as server:
        client = EngineClient()
        try:
            await client.load_weights(server.url, f"/weights/{version}", version)
            error: Exception | None = None
        except EngineError as exc:
            error = exc
        finally:
            await client.close()
    return error, server


def test_a_load_sends_exactly_the_fields_of_update_weight_from_disk_req_input() -> None:
    error, server = run(loaded(S.update_ok("7")))
    assert error is None and server.asked() == ["POST /update_weights_from_disk"]
    body = server.requests[0].body
    assert set(body) <= set(S.UPDATE_FIELDS) and set(body) >= S.REQUIRED_UPDATE_FIELDS, body
    assert all(isinstance(v, S.UPDATE_FIELDS[k]) for k, v in body.items()), body
    assert body == {"model_path": "/weights/7", "weight_version": "7"}  # the version's name: a string


@pytest.mark.parametrize(
    ("answer", "status", "message"),
    [
        (S.UPDATE_FAILED, 400, "Failed to get weights iterator"),
        (Answer(200, {"success": False, "message": "paused"}), 200, "did not say it succeeded: paused"),
        (Answer(200, text="OK", content_type="text/plain"), 200, "did not say it succeeded: 'OK'"),
        (Answer(503, text="", content_type="text/plain"), 503, ""),
    ],
    ids=["400-success-false", "200-success-false", "not-json", "503"],
)
def test_a_load_that_did_not_succeed_is_an_error_with_the_servers_words(
    answer: Answer, status: int, message: str
) -> None:
    error, _ = run(loaded(answer))
    assert isinstance(error, EngineError) and error.status == status and message in error.message
