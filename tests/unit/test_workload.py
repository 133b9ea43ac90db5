"""The reference workload: its sandbox really runs code, within limits, and stops without a false verdict."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

from prometheus_client import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_METRICS = ("rlop_sandbox_", "rlop_controller_", "rlop_reward_", "rlop_trainer_", "vllm:", "test_")


def workload() -> ModuleType:
    """The module, loaded afresh; the metrics an earlier load registered are dropped (each role registers its
    own in the default registry)."""
    for collector, names in list(REGISTRY._collector_to_names.items()):
        if any(n.startswith(WORKLOAD_METRICS) for n in names):
            REGISTRY.unregister(collector)
    spec = importlib.util.spec_from_file_location("rlop_workload", ROOT / "examples/workload/rlop_workload.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.argv = ["rlop_workload.py", "sandbox"]
    spec.loader.exec_module(module)
    return module


def test_snippets_run_and_their_output_is_checked() -> None:
    w = workload()
    assert w.run_snippet("print(2 + 3)") == (True, "5")
    assert w.run_snippet("raise SystemExit(3)")[0] is False


def test_snippets_are_limited() -> None:
    w = workload()
    assert w.run_snippet("while True: pass", timeout=10) == (False, "")  # CPU limit (2 s) kills it
    ok, _ = w.run_snippet("x = bytearray(1 << 30)")  # 1 GiB > the 256 MiB address-space limit
    assert not ok
    leak = "import os; print(any(k in os.environ for k in ('PATH', 'HOME', 'KUBECONFIG')))"
    assert w.run_snippet(leak) == (True, "False")  # no inherited environment


def _serve(w: ModuleType, role: object, routes: dict[str, str]) -> tuple[str, object]:
    srv = w.server(role, routes, 0)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}", srv


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_a_drained_sandbox_turns_unready_refuses_new_checks_as_infrastructure_and_finishes_its_own(
    tmp_path: Path,
) -> None:
    w = workload()
    mark = tmp_path / "drain"
    mark.write_text("")  # the downward API file of an absent annotation
    box = w.Sandbox(drain_file=str(mark))
    box.check_seconds = 1.5
    url, srv = _serve(w, box, {"/verify": "verify"})
    assert _status(f"{url}/ready") == 200
    inflight: list[dict[str, object]] = []
    t = threading.Thread(target=lambda: inflight.append(w.post(f"{url}/verify", {"code": "print(1)", "expected": "1"})))
    t.start()
    time.sleep(0.3)
    mark.write_text("2026-12-01T00:00:00Z")  # rlop marks the pod
    deadline = time.monotonic() + 5
    while box.ready() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _status(f"{url}/ready") == 503
    try:
        w.post(f"{url}/verify", {"code": "print(1)", "expected": "1"})
        raise AssertionError("a draining sandbox took a new check")
    except urllib.error.HTTPError as e:
        assert e.code == 503 and json.loads(e.read())["infrastructure"] is True
    t.join(10)
    assert inflight == [{"passed": True, "stdout": "1"}]  # the check in flight got its verdict
    srv.shutdown()  # type: ignore[attr-defined]


def test_a_stopped_sandbox_answers_a_check_it_cuts_short_as_infrastructure_not_as_wrong() -> None:
    w = workload()
    box = w.Sandbox(drain_file="")
    box.check_seconds, box.stop_seconds = 30.0, 0.5
    url, srv = _serve(w, box, {"/verify": "verify"})
    got: list[object] = []

    def call() -> None:
        try:
            got.append(w.post(f"{url}/verify", {"code": "print(1)", "expected": "1"}))
        except urllib.error.HTTPError as e:
            got.append((e.code, json.loads(e.read())))

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.5)
    exited: list[int] = []
    box.stop(exit_=exited.append)
    t.join(10)
    assert exited == [0]
    assert got == [(503, {"error": "stopped mid-check: not a verdict", "infrastructure": True})]
    srv.shutdown()  # type: ignore[attr-defined]


def test_the_controller_retries_infrastructure_failures_and_never_scores_them() -> None:
    w = workload()
    sample = {"completion": "print(3)", "expected": "3", "right": True}
    drained = w.Sandbox(drain_file="")
    drained.drain()
    url, srv = _serve(w, drained, {"/verify": "verify"})
    ctl = w.Controller.__new__(w.Controller)  # the check alone, without the load thread
    ctl.checks_total = w.Counter("test_checks", "", [*w.LABELS, "outcome"])
    assert ctl.check(url, sample, attempts=2) is None  # every attempt refused: lost, not False
    drained.draining.clear()  # the replica is back (as another replica behind the Service would be)
    assert ctl.check(url, sample) is True
    counts = {s.labels["outcome"]: s.value for m in ctl.checks_total.collect() for s in m.samples
              if s.name.endswith("_total")}  # fmt: skip
    assert counts == {"retried": 2.0, "lost": 1.0, "scored": 1.0}
    srv.shutdown()  # type: ignore[attr-defined]
