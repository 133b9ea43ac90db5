"""rlop's router client against each generation of sglang-router's worker API, as its source answers
(tests/contract/router_answers.py): which API it detects, what it sends to list, add and remove a worker, and
a clear refusal of a router it cannot reconcile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from rlop.engine import EngineClient, EngineError
from rlop.protocol import Unreadable

from . import router_answers as A
from .replay import Answer, Replay, Table, replay

Steps = Callable[[EngineClient, str], Awaitable[Any]]


def run(table: Table, steps: Steps) -> tuple[Any, Replay]:
    async def go() -> tuple[Any, Replay]:
        async with replay(table) as server:
            client = EngineClient()
            try:
                return await steps(client, server.url), server
            finally:
                await client.close()

    return asyncio.run(go())


async def cycle(client: EngineClient, router: str) -> dict[str, str]:
    """List, add a worker, remove the one listed: what a pass of rlop does."""
    found = await client.workers(router)
    await client.register(router, A.WORKER)
    for worker in found.values():
        await client.deregister(router, worker)
    return found


@pytest.mark.parametrize(
    ("table", "listed", "asked"),
    [
        (A.v0_3_2([(A.WORKER, A.UUID)]), {A.WORKER: A.UUID},
         ["GET /workers", "POST /workers", f"DELETE /workers/{A.UUID}"]),
        (A.v0_2_4([A.WORKER]), {A.WORKER: A.WORKER},
         ["GET /workers", "POST /workers", f"DELETE /workers/{A.WORKER}"]),
        (A.v0_1_9([A.WORKER]), {A.WORKER: A.WORKER},
         ["GET /workers", "GET /list_workers", "POST /add_worker", "POST /remove_worker"]),
    ],
    ids=["0.3.2-uuid", "0.2.4-url-keyed", "0.1.9-legacy"],
)  # fmt: skip
def test_each_router_generation_is_detected_and_spoken_to_in_its_own_api(
    table: Table, listed: dict[str, str], asked: list[str]
) -> None:
    found, server = run(table, cycle)
    assert found == listed and server.asked() == asked
    removed = server.requests[-1].raw_path
    assert removed.count("/") == (1 if "remove_worker" in removed else 2)  # the id is one path segment
    if "POST /workers" in asked:
        assert next(r.body for r in server.requests if r.method == "POST") == {"url": A.WORKER}
    else:  # the legacy routes take the url as a query parameter
        assert [r.query for r in server.requests if r.method == "POST"] == [{"url": A.WORKER}] * 2


def test_the_detected_api_is_remembered() -> None:
    async def twice(client: EngineClient, router: str) -> None:
        await client.workers(router)
        await client.workers(router)

    _, server = run(A.v0_1_9([]), twice)
    assert server.asked() == ["GET /workers", "GET /list_workers", "GET /list_workers"]


def test_a_router_with_no_worker_api_rlop_knows_is_refused_in_words() -> None:
    async def listing(client: EngineClient, router: str) -> str:
        with pytest.raises(Unreadable) as caught:
            await client.workers(router)
        return str(caught.value)

    said, _ = run(A.v0_1_4(), listing)
    assert "speaks no worker API rlop knows" in said and "GET /workers" in said and "GET /list_workers" in said
    html = {("GET", "/workers"): Answer(200, text="<html/>", content_type="text/html"),
            ("GET", "/list_workers"): Answer(200, {"workers": 3})}  # fmt: skip
    assert "speaks no worker API" in run(html, listing)[0]


def test_a_router_that_fails_to_list_did_not_answer_and_is_not_refused() -> None:
    async def listing(client: EngineClient, router: str) -> int:
        with pytest.raises(EngineError) as caught:
            await client.workers(router)
        return caught.value.status

    assert run({("GET", "/workers"): Answer(500, {"error": "x"})}, listing)[0] == 500


@pytest.mark.parametrize(
    ("table", "worker"),
    [({**A.v0_3_2([]), ("DELETE", f"/workers/{A.UUID}"): A.UNKNOWN_UUID_0_3_2}, A.UUID),
     ({**A.v0_1_9([]), ("POST", "/remove_worker"): A.REMOVED_UNKNOWN_0_2_1}, A.WORKER)],
    ids=["0.3.2", "0.2.1-legacy"],
)  # fmt: skip
def test_removing_a_worker_the_router_no_longer_has_is_a_404_which_rlop_takes_as_done(
    table: Table, worker: str
) -> None:
    async def remove(client: EngineClient, router: str) -> int:
        await client.workers(router)
        with pytest.raises(EngineError) as caught:
            await client.deregister(router, worker)
        return caught.value.status

    assert run(table, remove)[0] == 404
