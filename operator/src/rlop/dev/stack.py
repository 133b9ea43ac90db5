"""A whole local stack for benchmarks, the chaos loop and the demo: the control plane with rlop's CRD and
PriorityClass, an exporter, a Prometheus scraping it, and operator processes; torn down in reverse."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from rlop.dev.cluster import DevCluster, NodeSpec, default_nodes
from rlop.dev.operator_process import OperatorProcess
from rlop.dev.prometheus import DevPrometheus, Exporter


class Stack:
    def __init__(
        self,
        workdir: Path,
        nodes: Sequence[NodeSpec] | None = None,
        scrape_interval: str = "1s",
        targets: Sequence[str] = (),
        timeout: float = 300,
    ) -> None:
        self.workdir = workdir
        self.cluster = DevCluster(workdir / "cluster").start(default_nodes() if nodes is None else nodes, timeout)
        self.exporter = Exporter()
        self.prometheus: DevPrometheus | None = None
        self.operators: list[OperatorProcess] = []
        try:
            self.cluster.install_rlop()
            self.prometheus = DevPrometheus(workdir / "prometheus", scrape_interval).start(
                [self.exporter.target, *targets]
            )
        except BaseException:
            self.close()
            raise

    def operator(self, interval: float = 1.0, *args: str) -> OperatorProcess:
        assert self.prometheus is not None
        op = OperatorProcess(self.cluster, self.prometheus.url, self.workdir, interval, *args).start()
        self.operators.append(op)
        return op

    def close(self) -> None:
        for op in self.operators:
            op.stop()
        if self.prometheus is not None:
            self.prometheus.stop()
        self.exporter.stop()
        self.cluster.stop()

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.close()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile by nearest rank (nan for no values)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


TICK = os.sysconf("SC_CLK_TCK")


def cpu_rss(pids: Mapping[str, int]) -> tuple[float, float]:
    """CPU seconds so far and RSS (MiB) of these processes, together."""
    cpu = rss = 0.0
    for pid in pids.values():
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu += (int(fields[11]) + int(fields[12])) / TICK
        status = Path(f"/proc/{pid}/status").read_text()
        rss += int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024
    return cpu, rss


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy (every core, /proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK
