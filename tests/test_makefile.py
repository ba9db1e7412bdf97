"""What the Makefile passes to pip, read from `make -n` (prints the commands, runs none, needs no
network): `CPU=1` points the torch install at PyTorch's CPU-only wheel index, the default
leaves pip's own index, and CI's pin (`TORCH_SPEC=torch==2.13.0`, .ci/run) still reaches pip."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _torch_install(tmp_path: Path, *args: str) -> str:
    """The pip line that installs torch when `make -n demo ARGS` sets up a fresh venv."""
    venv = tmp_path / "venv"  # absent: the set-up's commands are printed
    # under `make test TORCH_SPEC=...` (CI) the outer make hands its variables down through
    # MAKEFLAGS and the environment: this make must see only ARGS
    outer = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES", "TORCH_SPEC", "CPU"}
    env = {k: v for k, v in os.environ.items() if k not in outer}
    out = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "demo", f"VENV={venv}", *args],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    (line,) = [x for x in out.splitlines() if "pip install" in x and " -e " not in x]
    return " ".join(line.split())


def test_cpu_1_installs_torch_from_pytorchs_cpu_only_index(tmp_path):
    line = _torch_install(tmp_path, "CPU=1")
    assert CPU_INDEX in line and line.endswith('"torch"')


def test_the_default_install_uses_pips_own_index(tmp_path):
    line = _torch_install(tmp_path)
    assert "--index-url" not in line and line.endswith('"torch"')


def test_cis_pin_reaches_pip_alone_or_with_the_cpu_index(tmp_path):
    pinned = _torch_install(tmp_path, "TORCH_SPEC=torch==2.13.0")
    assert pinned.endswith('"torch==2.13.0"') and "--index-url" not in pinned
    both = _torch_install(tmp_path, "TORCH_SPEC=torch==2.13.0", "CPU=1")
    assert CPU_INDEX in both and both.endswith('"torch==2.13.0"')
    assert "make test TORCH_SPEC=torch==2.13.0" in (ROOT / ".ci/run").read_text()
