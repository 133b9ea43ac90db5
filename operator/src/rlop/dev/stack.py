"""A whole local stack for benchmarks, the chaos loop and the demo: the control plane with rlop's CRD and
PriorityClass, an exporter, a Prometheus scraping it, and operator processes; torn down in reverse."""

from __future__ import annotations

from collections.abc import Sequence
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
