"""`rlop demo`: a local cluster, the operator and the example RLJob, with a live table of its pools."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from rlop.dev.cluster import DevCluster, default_nodes
from rlop.top import table

ROOT = Path(__file__).resolve().parents[3]


def run(workdir: Path, duration: float, job_file: Path) -> int:
    print(f"starting a local control plane in {workdir} (etcd, kube-apiserver, scheduler, kwok) ...")
    cluster = DevCluster(workdir / "cluster").start(default_nodes())
    operator = None
    try:
        cluster.install_rlop(ROOT / "crds")
        log = open(workdir / "operator.log", "wb")  # noqa: SIM115 - the child owns it
        operator = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rlop",
                "run",
                f"--kubeconfig={cluster.kubeconfig}",
                "--interval=1",
                "--metrics-port=0",
                "--liveness=",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        cluster.kubectl("apply", "-f", str(job_file))
        print(f"export KUBECONFIG={cluster.kubeconfig}   # to look around while the demo runs\n")
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            jobs = json.loads(cluster.kubectl("get", "rljobs", "-A", "-o", "json").stdout)["items"]
            print("\033[2J\033[H" + time.strftime("%H:%M:%S") + "\n" + table(jobs), flush=True)
            time.sleep(2)
    except KeyboardInterrupt:
        pass
    finally:
        if operator is not None:
            operator.terminate()
            operator.wait(30)
        cluster.stop()
    return 0
