"""`kubectl rlop`: look at RLJobs in any cluster (the `kubectl-rlop` console script is the plugin).

    kubectl rlop top [JOB] [-n NS | -A] [--watch]     pools: ready/desired, metric, reason; sandbox pods per node
    kubectl rlop explain JOB [-n NS]                   the last decisions: pool reasons, conditions, events

It calls `kubectl` itself, so --context/--kubeconfig and the current namespace work as usual.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from rlop.api.names import HARVEST_LABEL, JOB_LABEL
from rlop.top import placements, table


def kubectl(*args: str) -> Any:
    out = subprocess.run(["kubectl", *args, "-o", "json"], capture_output=True, text=True)
    if out.returncode:
        sys.exit(out.stderr.strip())
    return json.loads(out.stdout)


def _scope(args: argparse.Namespace) -> list[str]:
    return ["-A"] if args.all_namespaces else (["-n", args.namespace] if args.namespace else [])


def top(args: argparse.Namespace) -> int:
    while True:
        jobs = [kubectl("get", "rljob", args.job, *_scope(args))] if args.job else kubectl(
            "get", "rljobs", *_scope(args))["items"]  # fmt: skip
        lines = [table(jobs)]
        for job in jobs:
            meta = job["metadata"]
            pods = kubectl(
                "get", "pods", "-n", meta["namespace"], "-l", f"{JOB_LABEL}={meta['name']},{HARVEST_LABEL}=true"
            )
            lines.append(f"{meta['namespace']}/{meta['name']} sandbox pods per node: {placements(pods['items'])}")
        text = "\n".join(lines)
        if not args.watch:
            print(text)
            return 0
        print("\033[2J\033[H" + time.strftime("%H:%M:%S") + "\n" + text, flush=True)
        time.sleep(args.interval)


def explain(args: argparse.Namespace) -> int:
    job = kubectl("get", "rljob", args.job, *_scope(args))
    meta, status = job["metadata"], job.get("status") or {}
    print(f"RLJob {meta['namespace']}/{meta['name']}: {status.get('phase', 'Pending')} "
          f"(generation {meta.get('generation')}, observed {status.get('observedGeneration')})\n")  # fmt: skip
    for pool, st in sorted((status.get("pools") or {}).items()):
        print(f"{pool}: {st.get('ready', 0)}/{st.get('desired', 0)} ready"
              + (f", decision {st['decision']}" if st.get("decision") else "")
              + (f", last scaled {st['lastScaleTime']}" if st.get("lastScaleTime") else ""))  # fmt: skip
        if st.get("reason"):
            print(f"    {st['reason']}")
    print("\nconditions:")
    for c in status.get("conditions", []):
        print(f"  {c['type']:16} {c['status']:6} {c['reason']:22} {c.get('message', '')}")
    events = kubectl("get", "events", "-n", meta["namespace"], "--field-selector",
                     f"involvedObject.name={meta['name']},involvedObject.kind=RLJob")["items"]  # fmt: skip
    print("\nlast decisions:")
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or "")[-args.events :]:
        print(f"  {e.get('lastTimestamp', '')}  {e.get('type', ''):7} {e.get('reason', ''):16} {e.get('message', '')}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="kubectl rlop", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True)
    for name, fn in (("top", top), ("explain", explain)):
        cmd = sub.add_parser(name)
        cmd.add_argument("job", nargs="?" if name == "top" else None)
        cmd.add_argument("-n", "--namespace")
        cmd.add_argument("-A", "--all-namespaces", action="store_true")
        cmd.set_defaults(func=fn)
        if name == "top":
            cmd.add_argument("-w", "--watch", action="store_true")
            cmd.add_argument("--interval", type=float, default=2.0)
        else:
            cmd.add_argument("--events", type=int, default=15)
    args = p.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
