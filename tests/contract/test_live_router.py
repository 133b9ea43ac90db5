"""rlop's client against the real sglang-router 0.3.2 (PyPI sglang-router, the dev extra; the one hack/kind
puts in the workload image), in front of reference rollout servers answering as upstream SGLang does, and
rlop's probe against the reference server in both of its SGLang modes: real processes on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rlop.engine import EngineClient
from rlop.plan.serving import Probe

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "examples" / "workload" / "rlop_workload.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_http(url: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@contextmanager
def process(args: list[str], env: dict[str, str], ready: str) -> Iterator[None]:
    proc = subprocess.Popen(args, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_http(ready)
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def rollout(api: str = "current") -> Iterator[str]:
    port = free_port()
    env = {"RLOP_PORT": str(port), "RLOP_METRICS_PORT": str(free_port()), "RLOP_LOAD_SECONDS": "0",
           "RLOP_SGLANG_API": api}  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with process([sys.executable, str(WORKLOAD), "rollout"], env, f"{url}/health"):
        yield url


@contextmanager
def router() -> Iterator[str]:
    port = free_port()
    args = [sys.executable, "-m", "sglang_router.launch_router", "--host", "127.0.0.1", "--port", str(port),
            "--policy", "round_robin", "--prometheus-host", "127.0.0.1",
            "--prometheus-port", str(free_port())]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with process(args, {}, f"{url}/health"):
        yield url


def generate(router_url: str) -> str:
    request = urllib.request.Request(f"{router_url}/generate", data=b'{"text": "1+1="}',
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as resp:
        return str(json.loads(resp.read())["meta_info"]["weight_version"])


def load(url: str, path: Path, version: int) -> None:
    """Publish version `version` at `path` as the reference trainer does, and load it into the server."""
    env = {**os.environ, "RLOP_POOL": "trainer"}
    code = f"import sys; sys.argv = ['w', 'sandbox']; import runpy; w = runpy.run_path({str(WORKLOAD)!r}); " \
           f"w['save_weights']({str(path)!r}, w['make_weights']({version}))"  # fmt: skip
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    body = json.dumps({"model_path": str(path), "weight_version": str(version)}).encode()
    request = urllib.request.Request(f"{url}/update_weights_from_disk", data=body,
                                     headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert json.loads(resp.read())["success"]


def test_the_real_router_takes_rlops_workers_in_and_out(tmp_path: Path) -> None:
    """Also: replicas whose model_path and served_model_name moved to different checkpoints (SGLang's disk
    load does that) are all routed to, as the router's source says of its default (non-IGW) mode."""
    with rollout() as a, rollout() as b, router() as r:
        load(a, tmp_path / "5", 5)
        load(b, tmp_path / "6", 6)

        async def steps() -> None:
            client = EngineClient()
            try:
                assert await client.workers(r) == {}
                for url in (a, b):
                    await client.register(r, url)  # 202: added in the background
                for _ in range(100):
                    listed = await client.workers(r)
                    if set(listed) == {a, b}:
                        break
                    await asyncio.sleep(0.1)
                assert set(listed) == {a, b} and all(len(w) == 36 for w in listed.values())  # UUIDs
                assert {generate(r) for _ in range(6)} == {"5", "6"}  # round robin over both
                await client.deregister(r, listed[a])
                for _ in range(100):
                    if set(await client.workers(r)) == {b}:
                        break
                    await asyncio.sleep(0.1)
                assert set(await client.workers(r)) == {b}
            finally:
                await client.close()

        asyncio.run(steps())
        assert {generate(r) for _ in range(4)} == {"6"}  # routed to b, the one left


def test_rlops_probe_reads_the_reference_server_in_both_sglang_modes() -> None:
    async def probe(url: str) -> Probe:
        client = EngineClient()
        try:
            return await client.probe(url)
        finally:
            await client.close()

    with rollout("current") as current, rollout("legacy") as legacy:
        assert asyncio.run(probe(current)) == Probe("default", 0, "GET /model_info")
        assert asyncio.run(probe(legacy)) == Probe("default", 0, "GET /get_weight_version")
