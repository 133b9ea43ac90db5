"""The operator's wheel (what the image installs): rlop's own code only; the checkout-only commands say so."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

from rlop.dev import REPO


def test_the_wheel_leaves_out_the_dev_helpers_and_rlop_demo_explains(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
        check=True,
    )
    wheel = next(tmp_path.glob("rlop-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "rlop/controller.py" in names and "rlop/cli.py" in names
    assert not [n for n in names if n.startswith("rlop/dev/")]
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    run = f"import sys; sys.path.insert(0, {str(site)!r}); from rlop.cli import main; sys.exit(main(['demo']))"
    out = subprocess.run([sys.executable, "-S", "-c", run], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2
    assert "runs from a checkout of the rlop repository" in out.stderr
