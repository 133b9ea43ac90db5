"""`rlop`: run the operator, print the CRD, and manage a local development cluster."""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rlop.config import Config

CHECKOUT_ONLY = (
    "rlop {command} runs from a checkout of the rlop repository (pip install -e .): it builds clusters with the "
    "checkout's hack/ scripts, so it is not part of the operator's wheel or image"
)


def _taken(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the servers do: TIME_WAIT is free
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def _run(args: argparse.Namespace) -> int:
    liveness = urlsplit(args.liveness) if args.liveness else None
    for flag, host, port in (("--metrics-port", "0.0.0.0", args.metrics_port),
                             ("--liveness", liveness and liveness.hostname, liveness and liveness.port)):  # fmt: skip
        if port and _taken(host or "0.0.0.0", port):
            print(
                f"rlop: port {port} ({flag}) is taken, perhaps by another operator: choose another (0 turns it off)",
                file=sys.stderr,
            )
            return 2
    if args.kubeconfig:  # before kubernetes is imported: it reads KUBECONFIG once, at import
        os.environ["KUBECONFIG"] = args.kubeconfig
    import kopf

    import rlop.handlers  # noqa: F401 - registers the handlers

    cfg = Config(
        interval=args.interval,
        prometheus_url=args.prometheus_url,
        prometheus_timeout=args.prometheus_timeout,
        metrics_port=args.metrics_port,
        concurrency=args.concurrency,
        gang_scheduler=args.gang_scheduler,
        kubeconfig=args.kubeconfig,
        leader_election=args.leader_election,
        lease_namespace=args.lease_namespace,
        identity=args.identity,
        namespaced=bool(args.namespace),
    )
    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.PLAIN)
    if not args.verbose:  # kopf reports every trigger handler call; rlop logs its decisions itself
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    kopf.run(
        standalone=True,
        clusterwide=not args.namespace,
        namespaces=args.namespace or (),
        liveness_endpoint=args.liveness or None,
        memo=kopf.Memo(config=cfg),
    )
    return 0


def _crd(args: argparse.Namespace) -> int:
    from rlop.api.crd import rljob_crd_yaml

    sys.stdout.write(rljob_crd_yaml())
    return 0


def _dev_cluster(args: argparse.Namespace) -> int:
    from rlop.dev.cluster import DevCluster, default_nodes, describe  # see main(): checkout only

    workdir = Path(args.dir).absolute()
    if args.action == "up":
        cluster = DevCluster(workdir).start(default_nodes(args.gpu_nodes, args.cpu_nodes))
        try:
            cluster.install_rlop()
        except BaseException:
            cluster.stop()  # nothing left running behind a failure
            raise
        print(json.dumps(describe(cluster), indent=2))
        print(f"\nexport KUBECONFIG={cluster.kubeconfig}", file=sys.stderr)
    elif args.action == "down":
        if (workdir / "state.json").exists():
            DevCluster.load(workdir).stop()
    else:
        print(f"export KUBECONFIG={DevCluster.load(workdir).kubeconfig}")
    return 0


def _plan(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    import yaml

    from rlop.whatif import PlanInputError, parse_now, what_if

    def load(flag: str, path: str | None) -> Any:
        if path is None:
            return None
        try:
            text = Path(path).read_text()
            return yaml.safe_load(text) if flag == "-f" else json.loads(text)
        except (OSError, ValueError, yaml.YAMLError) as exc:
            raise PlanInputError(f"{flag} {path}: {str(exc).splitlines()[0]}") from None

    try:
        now = datetime.now(UTC) if args.now is None else parse_now(args.now)
        out = what_if(
            load("-f", args.file) or {}, load("--metrics", args.metrics) or {}, load("--state", args.state), now,
            load("--nodes", args.nodes), load("--replicas", args.replicas), load("--pods", args.pods),
        )  # fmt: skip
    except PlanInputError as exc:
        print(f"rlop plan: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from rlop.dev import REPO, demo  # see main(): checkout only

    job = Path(args.file) if args.file else REPO / "examples" / "rljob.yaml"
    return demo.run(Path(args.dir).absolute(), args.duration, job)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rlop", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run the operator")
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    run.add_argument("-n", "--namespace", action="append", help="watch only these namespaces (repeatable)")
    defaults = Config()
    run.add_argument("--interval", type=float, default=defaults.interval, help="seconds between full passes")
    run.add_argument("--prometheus-url", default=defaults.prometheus_url)
    run.add_argument("--prometheus-timeout", type=float, default=defaults.prometheus_timeout)
    run.add_argument("--metrics-port", type=int, default=defaults.metrics_port, help="0 turns /metrics off")
    run.add_argument("--liveness", default=defaults.liveness, help="'' turns the probe off")
    run.add_argument("--concurrency", type=int, default=defaults.concurrency, help="jobs written at once")
    run.add_argument(
        "--gang-scheduler",
        choices=["auto", "rlop"],
        default=defaults.gang_scheduler,
        help="auto: kube-scheduler places trainer gangs where it serves PodGroups; rlop: rlop's fit check",
    )
    run.add_argument("--leader-election", action="store_true",
                     help="act only while holding the rlop-leader Lease (for several replicas)")  # fmt: skip
    run.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", defaults.lease_namespace),
                     help="default: $POD_NAMESPACE (set by the chart), else default")  # fmt: skip
    run.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}")
    run.add_argument("-v", "--verbose", action="store_true")
    run.set_defaults(func=_run)

    crd = sub.add_parser("crd", help="print the RLJob CustomResourceDefinition")
    crd.set_defaults(func=_crd)

    plan = sub.add_parser("plan", help="print the autoscaler's decision for an RLJob file, without a cluster")
    plan.add_argument("-f", "--file", required=True, help="RLJob YAML")
    plan.add_argument("--metrics", help='JSON: {"<pool>": [value per metric]}')
    plan.add_argument("--state", help="JSON: the RLJob status, or a whole earlier output of rlop plan (to chain)")
    plan.add_argument("--now", help="RFC 3339 time (UTC if no zone) or Unix seconds (default: now)")
    plan.add_argument("--replicas", help='JSON: {"<pool>": current replicas} (default: the state\'s)')
    plan.add_argument("--pods", help='JSON: {"<pool>": {"existing": n, "ready": m}} (default: all, all ready)')
    plan.add_argument("--nodes", help="JSON: candidate nodes with utilization, for sandbox placement")
    plan.set_defaults(func=_plan)

    demo = sub.add_parser("demo", help="a local cluster, the operator and an RLJob, live")
    demo.add_argument("--dir", default=".rlop/demo")
    demo.add_argument("--duration", type=float, default=0, help="seconds (default: the phases' own, 225 s)")
    demo.add_argument("-f", "--file", help="RLJob YAML (default: the checkout's examples/rljob.yaml)")
    demo.set_defaults(func=_demo)

    dev = sub.add_parser("dev", help="local development helpers")
    devsub = dev.add_subparsers(dest="what", required=True)
    cluster = devsub.add_parser("cluster", help="a local control plane with simulated nodes")
    cluster.add_argument("action", choices=["up", "down", "env"])
    cluster.add_argument("--dir", default=".rlop/cluster")
    cluster.add_argument("--gpu-nodes", type=int, default=2)
    cluster.add_argument("--cpu-nodes", type=int, default=4)
    cluster.set_defaults(func=_dev_cluster)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command in ("demo", "dev"):
        try:
            import rlop.dev  # noqa: F401
        except ImportError:
            print(f"rlop: {CHECKOUT_ONLY.format(command=args.command)}", file=sys.stderr)
            return 2
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
