"""Events posted off the reconcile path, as client-go's event broadcaster does.

A pass records its events and goes on; a few workers post them, once a full pass's writes are done (the
decisions first, their explanations after). Events are best effort in Kubernetes: a full queue drops the
event (counted in `rlop_events_dropped_total`), a refused post is logged. The decisions themselves are in
the status, which a pass writes before it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any

from rlop import metrics
from rlop.plan.status import Event

log = logging.getLogger("rlop")

Post = Callable[[Mapping[str, Any], str, str, str], Awaitable[None]]
WORKERS = 4  # posts in flight: enough to keep up with a pass that scales hundreds of jobs, few enough not
# to crowd out the pass's own writes
QUEUED = 10_000


class Recorder:
    def __init__(self, post: Post, workers: int = WORKERS, queued: int = QUEUED) -> None:
        self.post = post
        self.workers = workers
        self.queue: asyncio.Queue[tuple[Mapping[str, Any], Event]] = asyncio.Queue(queued)
        self.free = asyncio.Event()  # cleared while posts wait
        self.free.set()

    def record(self, obj: Mapping[str, Any], event: Event) -> None:
        """Log the event and queue it for posting; never waits."""
        meta = obj["metadata"]
        log.info("%s/%s %s: %s", meta["namespace"], meta["name"], event.reason, event.message)
        try:
            self.queue.put_nowait((obj, event))
        except asyncio.QueueFull:
            metrics.EVENTS_DROPPED.inc()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Posts wait while the body runs: a pass's own writes do not queue behind its events."""
        self.free.clear()
        try:
            yield
        finally:
            self.free.set()

    async def run(self) -> None:
        """Post queued events until cancelled."""
        await asyncio.gather(*(self._work() for _ in range(self.workers)))

    async def flush(self) -> None:
        """Post everything queued now (tests, shutdown)."""
        while not self.queue.empty():
            await self._send(*self.queue.get_nowait())
            self.queue.task_done()

    async def _work(self) -> None:
        while True:
            obj, event = await self.queue.get()
            try:
                await self.free.wait()
                await self._send(obj, event)
            finally:
                self.queue.task_done()

    async def _send(self, obj: Mapping[str, Any], event: Event) -> None:
        try:
            await self.post(obj, event.type, event.reason, event.message)
        except Exception as exc:  # best effort: a refused or failed post never stops the others
            log.warning("Could not post event %s: %s", event.reason, exc)
