"""A loopback HTTP server that answers as an upstream server's source says it does: a table of
(method, path) -> Answer, FastAPI's 404 for anything else, and a record of every request it got."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Answer:
    """What an endpoint answers: a status and a body (JSON, or `text` as it is), and where upstream says so
    (repository, path:line, and the version it holds for)."""

    status: int
    body: Any = None
    source: str = ""
    text: str | None = None  # a body that is not JSON (Prometheus text, an HTML error page, plain text)
    content_type: str = "application/json"


NOT_FOUND = Answer(404, {"detail": "Not Found"}, "FastAPI's default for a route no handler serves")


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any
    raw_path: str  # as sent, before percent-decoding (the path above, as a server's router matches it)


@dataclass
class Replay:
    """The running server: its base url, and the requests it got, in order."""

    url: str
    requests: list[Request] = field(default_factory=list)

    def asked(self) -> list[str]:
        return [f"{r.method} {r.path}" for r in self.requests]


Table = Mapping[tuple[str, str], Answer]


@asynccontextmanager
async def replay(table: Table, missing: Answer = NOT_FOUND) -> AsyncIterator[Replay]:
    server = Replay("")

    async def handle(request: web.Request) -> web.Response:
        raw = await request.text()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        server.requests.append(Request(request.method, request.path, dict(request.query), body,
                                       request.rel_url.raw_path))  # fmt: skip
        answer = table.get((request.method, request.path), missing)
        text = answer.text if answer.text is not None else "" if answer.body is None else json.dumps(answer.body)
        return web.Response(status=answer.status, body=text.encode(), headers={"Content-Type": answer.content_type})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    server.url = f"http://127.0.0.1:{port}"
    try:
        yield server
    finally:
        await runner.cleanup()
