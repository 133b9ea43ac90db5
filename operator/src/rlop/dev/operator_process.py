"""The operator as a real process (`python -m rlop run`), for tests, benchmarks and the demo."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from rlop.dev.cluster import DevCluster, free_port


class OperatorProcess:
    """`rlop run` against a dev cluster, with its /metrics and log file."""

    def __init__(
        self,
        cluster: DevCluster,
        prometheus_url: str,
        workdir: Path,
        interval: float = 1.0,
        *extra: str,
        kubeconfig: Path | None = None,
    ) -> None:
        self.cluster, self.prometheus_url, self.interval, self.extra = cluster, prometheus_url, interval, extra
        self.kubeconfig = kubeconfig or cluster.kubeconfig
        self.log_path = workdir / "operator.log"
        self.metrics_port, self.health_port = free_port(), free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> OperatorProcess:
        cmd = [
            sys.executable, "-m", "rlop", "run", f"--kubeconfig={self.kubeconfig}",
            f"--interval={self.interval}", f"--metrics-port={self.metrics_port}",
            f"--liveness=http://127.0.0.1:{self.health_port}/healthz",
            f"--prometheus-url={self.prometheus_url}", "--prometheus-timeout=2", *self.extra,
        ]  # fmt: skip
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if time.monotonic() > deadline:
                raise TimeoutError(f"operator not healthy; see {self.log_path}")
            time.sleep(0.2)
        return self

    def _healthy(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            raise RuntimeError(f"operator exited: {self.log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/healthz", timeout=2) as r:
                return bool(r.status == 200)
        except OSError:
            return False

    def stop(self, kill: bool = False) -> None:
        if self.proc and self.proc.poll() is None:
            (self.proc.kill if kill else self.proc.terminate)()
            self.proc.wait(30)

    def metric(self, name: str, labels: str = "") -> float:
        """Sum of a metric's samples whose label text contains `labels`."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith(name) and line[len(name)] in " {" and labels in line:
                total += float(line.rsplit(" ", 1)[1])
        return total
