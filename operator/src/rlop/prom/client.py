"""An async client of the Prometheus HTTP API that runs ONE request per distinct template per interval."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from rlop import metrics
from rlop.prom.promql import Sample, batch, instantiate, split


@dataclass(frozen=True)
class Request:
    key: Hashable
    template: str
    namespace: str
    job: str
    pool: str


class PromError(Exception):
    def __init__(self, message: str, unreachable: bool) -> None:
        super().__init__(message)
        self.message, self.unreachable = message, unreachable


Result = list[Sample] | PromError


class PrometheusClient:
    def __init__(self, url: str, timeout: float = 3.0, concurrency: int = 8) -> None:
        self.url = url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.limit = asyncio.Semaphore(concurrency)
        self.unbatchable: set[str] = set()  # templates whose batch failed where single queries worked
        self.session: aiohttp.ClientSession | None = None

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()

    async def query(self, promql: str) -> list[Sample]:
        """Instant query; raises PromError (unreachable, or the query's own error)."""
        if self.session is None:
            self.session = aiohttp.ClientSession(timeout=self.timeout)
        started = time.perf_counter()
        try:
            async with self.limit, self.session.post(f"{self.url}/api/v1/query", data={"query": promql}) as resp:
                body: Any = await resp.json(content_type=None)
                status = resp.status
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            metrics.PROM_ERRORS.labels("unreachable").inc()
            raise PromError(f"Prometheus unreachable at {self.url}: {type(exc).__name__}", True) from None
        finally:
            metrics.PROM_SECONDS.observe(time.perf_counter() - started)
        if not isinstance(body, dict):  # e.g. an empty 503 from a proxy in front of a Prometheus not yet up
            metrics.PROM_ERRORS.labels("unreachable").inc()
            raise PromError(f"Prometheus at {self.url} answered HTTP {status} without a JSON body", True)
        if body.get("status") != "success":
            metrics.PROM_ERRORS.labels("query").inc()
            raise PromError(f"{body.get('errorType', 'error')}: {body.get('error', 'unknown')}", False)
        return _samples(body["data"])

    async def read(self, requests: Sequence[Request]) -> dict[Hashable, Result]:
        """Evaluate every request, one HTTP request per distinct template (batched)."""
        by_template: dict[str, list[Request]] = defaultdict(list)
        for r in requests:
            by_template[r.template].append(r)
        results: dict[Hashable, Result] = {}
        await asyncio.gather(*(self._read_template(t, rs, results) for t, rs in by_template.items()))
        return results

    async def _read_template(self, template: str, requests: list[Request], out: dict[Hashable, Result]) -> None:
        by_query: dict[str, list[Hashable]] = defaultdict(list)  # identical instances are asked once
        for r in requests:
            by_query[instantiate(template, r.namespace, r.job, r.pool)].append(r.key)
        queries = list(by_query)
        results: list[Result]
        if len(queries) > 1 and template not in self.unbatchable:
            try:
                results = list(split(await self.query(batch(queries)), len(queries)))
            except PromError as exc:
                results = [exc] * len(queries) if exc.unreachable else await self._singles(template, queries)
        else:
            results = await self._singles(template, queries)
        for query, result in zip(queries, results, strict=True):
            out.update({key: result for key in by_query[query]})

    async def _singles(self, template: str, queries: list[str]) -> list[Result]:
        """One request per instance: isolates the failing ones (and remembers templates that need it)."""
        results = list(await asyncio.gather(*(self._single(q) for q in queries)))
        if len(queries) > 1 and any(not isinstance(r, PromError) for r in results):
            self.unbatchable.add(template)
        return results

    async def _single(self, query: str) -> Result:
        try:
            return await self.query(query)
        except PromError as exc:
            return exc


def _samples(data: dict[str, Any]) -> list[Sample]:
    kind, result = data.get("resultType"), data.get("result")
    if kind == "vector":
        return [(item.get("metric", {}), float(item["value"][1])) for item in result or []]
    if kind == "scalar":
        return [({}, float(result[1]))] if result else []
    raise PromError(f"query must return an instant vector or a scalar, got a {kind}", False)
