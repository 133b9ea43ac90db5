"""A real Prometheus server on loopback (Debian's `prometheus` package), for tests and the demo.

Scrape targets come from a file (file_sd), so exporters can be added while it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from rlop.dev.cluster import free_port


def prometheus_binary() -> str:
    found = os.environ.get("RLOP_PROMETHEUS") or shutil.which("prometheus")
    if not found:
        raise FileNotFoundError("prometheus is missing: apt-get install prometheus (see .ci/run)")
    return found


@dataclass
class DevPrometheus:
    workdir: Path
    scrape_interval: str = "1s"
    port: int = 0
    targets: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, targets: Sequence[str] = (), timeout: float = 60) -> DevPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.set_targets([*self.targets, *targets])
        config = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": [
                {
                    "job_name": "rlop-dev",
                    "honor_labels": True,
                    "file_sd_configs": [{"files": [str(self.workdir / "targets.json")], "refresh_interval": "1s"}],
                }
            ],
        }
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        log = open(self.workdir / "prometheus.log", "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={self.workdir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=2h",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited; see {self.workdir / 'prometheus.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        raise TimeoutError("prometheus did not become ready")

    def set_targets(self, targets: Sequence[str]) -> None:
        self.targets = list(targets)
        tmp = self.workdir / "targets.json.tmp"
        tmp.write_text(json.dumps([{"targets": self.targets}]))
        tmp.rename(self.workdir / "targets.json")  # atomic: file_sd never reads half a file

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def query(self, promql: str) -> list[tuple[dict[str, str], float]]:
        data = urllib.parse.urlencode({"query": promql}).encode()
        with urllib.request.urlopen(f"{self.url}/api/v1/query", data=data, timeout=5) as r:
            body = json.loads(r.read())
        return [(s["metric"], float(s["value"][1])) for s in body["data"]["result"]]


class Exporter:
    """A real /metrics endpoint whose values the tests set (scraped by the real Prometheus)."""

    LABELS = ("namespace", "rljob", "pool")

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.gauges: dict[str, Any] = {}
        self.port = free_port()
        self.server, self.thread = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def set(self, metric: str, value: float, **labels: str) -> None:
        if metric not in self.gauges:
            self.gauges[metric] = Gauge(metric, metric, list(labels), registry=self.registry)
        self.gauges[metric].labels(**labels).set(value)

    def stop(self) -> None:
        self.server.shutdown()
