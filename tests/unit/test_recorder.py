"""The event recorder: best effort, as the README promises — a full queue drops and counts, a refused post
does not stop the others, a flush posts everything queued."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from rlop import metrics
from rlop.kube.recorder import Recorder
from rlop.plan.status import Event

JOB = {"metadata": {"namespace": "ns", "name": "j"}}


def _dropped() -> float:
    return metrics.EVENTS_DROPPED._value.get()


def test_a_full_queue_drops_and_counts_and_a_refused_post_stops_nothing() -> None:
    posted: list[str] = []

    async def post(obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        if reason == "Refused":
            raise RuntimeError("403: forbidden")
        posted.append(reason)

    async def scenario() -> float:
        recorder = Recorder(post, queued=3)
        before = _dropped()
        for reason in ("Refused", "A", "B", "C", "D"):  # never waits: the last two find the queue full
            recorder.record(JOB, Event("Normal", reason, "m"))
        await recorder.flush()
        return _dropped() - before

    assert asyncio.run(scenario()) == 2
    assert posted == ["A", "B"]


def test_the_workers_post_what_a_pass_records() -> None:
    posted: list[str] = []

    async def post(obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        posted.append(reason)

    async def scenario() -> None:
        recorder = Recorder(post, workers=2)
        task = asyncio.create_task(recorder.run())
        for i in range(10):
            recorder.record(JOB, Event("Normal", f"R{i}", "m"))
        await asyncio.wait_for(recorder.queue.join(), 5)
        task.cancel()

    asyncio.run(scenario())
    assert sorted(posted) == sorted(f"R{i}" for i in range(10))


def test_posts_wait_while_held_and_follow_once_released() -> None:
    posted: list[str] = []

    async def post(obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        posted.append(reason)

    async def scenario() -> list[str]:
        recorder = Recorder(post, workers=2)
        task = asyncio.create_task(recorder.run())
        with recorder.held():
            recorder.record(JOB, Event("Normal", "ScaledUp", "m"))
            await asyncio.sleep(0.05)  # the workers are free to run, and wait
            during = list(posted)
        await asyncio.wait_for(recorder.queue.join(), 5)
        task.cancel()
        return during

    assert asyncio.run(scenario()) == []
    assert posted == ["ScaledUp"]
