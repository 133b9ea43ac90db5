"""The reference workload's sandbox really runs code, within limits."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def workload() -> ModuleType:
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
