"""HTTP to the inference servers of serving pools and to their router: the SGLang API slime's external
engines speak (GET /get_weight_version, GET /get_load, POST /update_weights_from_disk) and sglang-router's
worker API (GET/POST /workers, DELETE /workers/{id})."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import aiohttp

from rlop.plan.serving import Probe


class EngineError(Exception):
    """A server refused or did not answer; `status` is its HTTP code (0: no answer)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class EngineClient:
    def __init__(self, timeout: float = 2.0, load_timeout: float = 600.0) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.load_timeout = aiohttp.ClientTimeout(total=load_timeout)  # loading a checkpoint takes a while
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, method: str, url: str, body: Any = None, slow: bool = False) -> Any:
        """One request; `slow`: a checkpoint load, given `load_timeout`."""
        limit = self.load_timeout if slow else self.timeout
        try:
            async with self.session().request(method, url, json=body, timeout=limit) as resp:
                text = await resp.text()
                if resp.status >= 400:
                    raise EngineError(resp.status, text.strip()[:300] or resp.reason or "")
                return json.loads(text) if text.strip() else None
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            raise EngineError(0, f"{type(exc).__name__}: {exc}") from None

    async def probe(self, url: str) -> Probe:
        """The version a replica serves and how many requests it has; None for what it did not say."""
        version: int | None = None
        with contextlib.suppress(*_UNKNOWN):
            version = int((await self.call("GET", f"{url}/get_weight_version"))["weight_version"])
        running: int | None = None
        with contextlib.suppress(*_UNKNOWN):  # a drain waits for 0; a scale-down picks the least busy
            running = _requests(await self.call("GET", f"{url}/get_load"))
        return Probe(version, running)

    async def load_weights(self, url: str, model_path: str, version: int) -> None:
        body = {"model_path": model_path, "weight_version": str(version)}
        out = await self.call("POST", f"{url}/update_weights_from_disk", body, slow=True)
        if isinstance(out, dict) and out.get("success") is False:
            raise EngineError(400, str(out.get("message", "update refused")))

    async def workers(self, router: str) -> dict[str, str] | None:
        """The router's workers, url -> id (None: it did not answer)."""
        try:
            out = await self.call("GET", f"{router}/workers")
        except EngineError:
            return None
        return {w["url"]: w["id"] for w in (out or {}).get("workers", [])}

    async def register(self, router: str, url: str) -> None:
        await self.call("POST", f"{router}/workers", {"url": url})

    async def deregister(self, router: str, worker: str) -> None:
        await self.call("DELETE", f"{router}/workers/{worker}")


_UNKNOWN = (EngineError, KeyError, TypeError, ValueError)  # a failed or malformed answer: the value is unknown


def _requests(load: Any) -> int:
    """Running plus waiting requests from SGLang's /get_load (a list with one entry per data-parallel rank)."""
    ranks = load if isinstance(load, list) else [load]
    return sum(int(r.get("num_reqs", 0)) + int(r.get("num_waiting_reqs", 0)) for r in ranks)


async def gather_probes(engine: EngineClient, targets: dict[str, str]) -> dict[str, Probe]:
    """Probe every replica at once: pod -> its server's url."""
    names = list(targets)
    found = await asyncio.gather(*(engine.probe(targets[n]) for n in names))
    return dict(zip(names, found, strict=True))
