"""HTTP to the inference servers of serving pools and to their router. What each answer means is read by
rlop.protocol (pure); this module only asks, in the order upstream's versions need: the weight version from
SGLang's GET /model_info (every current release), else GET /get_weight_version (older and slime-patched
builds); the load from GET /v1/loads, else GET /get_load (SGLang), or vLLM's GET /metrics; the load of new
weights with POST /update_weights_from_disk; the router's workers through whichever worker API it speaks
(sglang-router 0.3's /workers with ids, or the older /list_workers, /add_worker?url=)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any
from urllib.parse import quote

import aiohttp

from rlop import protocol as P
from rlop.plan.serving import Probe, version_name
from rlop.protocol import EngineError

__all__ = ["EngineClient", "EngineError", "gather_probes"]

REMEMBER = 10000  # servers whose endpoints are remembered, at most


class EngineClient:
    def __init__(self, timeout: float = 2.0, load_timeout: float = 600.0, register_timeout: float = 30.0) -> None:
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.load_timeout = aiohttp.ClientTimeout(total=load_timeout)  # loading a checkpoint takes a while
        # a legacy router's /add_worker waits for the worker's /health (which a registered replica passes)
        self.register_timeout = aiohttp.ClientTimeout(total=register_timeout)
        self._session: aiohttp.ClientSession | None = None
        self.found: dict[tuple[str, str], str] = {}  # (server, what) -> the endpoint that answered it last
        self.routers: dict[str, P.RouterApi] = {}  # router -> the worker API it speaks
        # both are hints (what to ask first), keyed by addresses that pods come and go at: forgotten past REMEMBER

    def session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def send(
        self, method: str, url: str, body: Any = None, limit: aiohttp.ClientTimeout | None = None
    ) -> tuple[int, str]:
        """One request: the status and the body's text, whatever the status (0: no answer)."""
        limit = limit or self.timeout
        try:
            async with self.session().request(method, url, json=body, timeout=limit) as resp:
                return resp.status, await resp.text()
        except (aiohttp.ClientError, TimeoutError, UnicodeError, LookupError, ValueError) as exc:
            # LookupError: a charset the body names that Python does not know
            raise EngineError(0, f"{type(exc).__name__}: {exc}") from None

    async def ask(self, url: str, what: str, ways: tuple[P.Way, ...]) -> tuple[Any, str]:
        """The first of `ways` (endpoint, reader) that answers `what`, the one that did last time first: its
        value and the endpoint. A 404 (or an answer without the field) tries the next; any other failure, or
        none left, raises P.Unreadable saying what each answered."""
        last = self.found.get((url, what))
        heard: list[str] = []
        for path, read in sorted(ways, key=lambda w: w[0] != last):
            try:
                status, text = await self.send("GET", f"{url}{path}")
            except EngineError as exc:
                raise P.Unreadable(f"GET {path}: no answer ({exc.message})") from None
            try:
                value = read(status, text)
            except P.Missing as exc:
                heard.append(f"GET {path}: {exc}")
                continue
            except P.Unreadable as exc:
                raise P.Unreadable("; ".join([*heard, f"GET {path}: {exc}"])) from None
            except Exception as exc:  # a reader's blind spot must cost one value, never a pass
                raise P.Unreadable("; ".join([*heard, f"GET {path}: unreadable ({type(exc).__name__})"])) from None
            if len(self.found) >= REMEMBER:
                self.found.clear()
            self.found[(url, what)] = path
            return value, f"GET {path}"
        self.found.pop((url, what), None)
        raise P.Unreadable("; ".join(heard))

    async def probe(self, url: str, engine: str = "sglang", versions: bool = True) -> Probe:
        """What a replica serves (its weight version, unless not `versions`) and how many requests it has."""
        version, source, error = None, "", ""
        if versions:
            try:
                version, source = await self.ask(url, "version", P.VERSION_WAYS)
            except P.Unreadable as exc:
                error = str(exc)
        load: int | None = None
        with contextlib.suppress(P.Unreadable):  # a drain waits for 0; a scale-down picks the least busy
            load, _ = await self.ask(url, "load", P.LOAD_WAYS[engine])
        return Probe(version, load, source, error)

    async def load_weights(self, url: str, model_path: str, version: int) -> None:
        """SGLang's UpdateWeightFromDiskReqInput: the path, and the version's name as weight_version."""
        body = {"model_path": model_path, "weight_version": version_name(version)}
        status, text = await self.send("POST", f"{url}/update_weights_from_disk", body, self.load_timeout)
        P.read_update(status, text)

    async def workers(self, router: str) -> dict[str, str]:
        """The router's workers, url -> the id it removes them by. Raises P.Unreadable for a router that
        speaks no worker API rlop knows, EngineError for one that does not answer."""
        api = self.routers.get(router)  # the one it spoke last first; a router replaced may speak another
        for candidate in sorted(P.RouterApi, key=lambda a: a is not api):
            status, text = await self.send("GET", f"{router}{candidate.listing}")
            try:
                found = P.read_workers(candidate, status, text)
            except P.Missing:
                continue
            if len(self.routers) >= REMEMBER:
                self.routers.clear()
            self.routers[router] = candidate
            return found
        self.routers.pop(router, None)
        raise P.Unreadable(P.unknown_router(router))

    async def register(self, router: str, url: str) -> None:
        api = self.routers.get(router, P.RouterApi.WORKERS)
        if api is P.RouterApi.WORKERS:
            status, text = await self.send("POST", f"{router}/workers", {"url": url})
        else:
            status, text = await self.send("POST", f"{router}/add_worker?url={quote(url, safe='')}",
                                           limit=self.register_timeout)  # fmt: skip
        P.read_change(status, text)

    async def deregister(self, router: str, worker: str) -> None:
        api = self.routers.get(router, P.RouterApi.WORKERS)
        if api is P.RouterApi.WORKERS:
            status, text = await self.send("DELETE", f"{router}/workers/{quote(worker, safe='')}")
        else:
            status, text = await self.send("POST", f"{router}/remove_worker?url={quote(worker, safe='')}")
        P.read_change(status, text)


async def gather_probes(
    engine: EngineClient, targets: dict[str, str], kind: str = "sglang", versions: bool = True
) -> dict[str, Probe]:
    """Probe every replica at once: pod -> its server's url."""
    names = list(targets)
    found = await asyncio.gather(*(engine.probe(targets[n], kind, versions) for n in names))
    return dict(zip(names, found, strict=True))
