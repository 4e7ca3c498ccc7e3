"""Two wheels from one repository: spurctl, which an admin host installs, has no simulator;
spurctl-sim (sim/) has it, built on that one spurctl release.

Both are built for real (pip, without build isolation: the dev install has the backend, and
no index is reached), each from a copy of what it is built from, so a build/ left in the
checkout by an earlier build cannot add to them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import spurctl
import spurctl_sim
from tests.cli import WORKTREE

BUILD_TIMEOUT = 120
IGNORED = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")


def _wheel(source: Path, out: Path) -> Path:
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-cache-dir", "-q", "-w", str(out), str(source)],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (wheel,) = out.glob("*.whl")
    return wheel


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, zipfile.ZipFile]:
    base = tmp_path_factory.mktemp("wheels")
    root = base / "spurctl"
    root.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(WORKTREE / name, root / name)
    shutil.copytree(WORKTREE / "spurctl", root / "spurctl", ignore=IGNORED)
    # The simulator sits where a checkout has it: a root build that looked for packages
    # everywhere would find it.
    shutil.copytree(WORKTREE / "sim", root / "sim", ignore=IGNORED)
    return {
        "spurctl": zipfile.ZipFile(_wheel(root, base / "dist-spurctl")),
        "spurctl-sim": zipfile.ZipFile(_wheel(root / "sim", base / "dist-sim")),
    }


def _metadata(wheel: zipfile.ZipFile) -> str:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return wheel.read(name).decode()


def test_the_spurctl_wheel_has_no_simulator(wheels: dict[str, zipfile.ZipFile]) -> None:
    names = wheels["spurctl"].namelist()
    assert "spurctl/cli.py" in names and "spurctl/commands/demo.py" in names
    simulator = [n for n in names if "simcluster" in n or "spurctl_sim" in n]
    assert simulator == []
    assert {n.split("/")[0] for n in names} == {"spurctl", f"spurctl-{spurctl.__version__}"
                                                ".dist-info"}  # fmt: skip


def test_the_sim_wheel_has_the_simulator_and_needs_this_spurctl(
    wheels: dict[str, zipfile.ZipFile],
) -> None:
    names = set(wheels["spurctl-sim"].namelist())
    package = WORKTREE / "sim" / "spurctl_sim"
    source = {
        p.relative_to(package.parent).as_posix()
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert source <= names, "files of the simulator missing from its wheel"
    assert "spurctl_sim/__main__.py" in names and "spurctl_sim/py.typed" in names
    assert not [n for n in names if n.startswith("spurctl/")]
    metadata = _metadata(wheels["spurctl-sim"])
    assert re.search(r"^Name: spurctl-sim$", metadata, re.M)
    assert re.findall(r"^Requires-Dist: (.*)$", metadata, re.M) == [
        f"spurctl=={spurctl.__version__}"
    ]


def test_the_simulator_is_versioned_with_spurctl() -> None:
    # sim/pyproject.toml pins spurctl by hand: a spurctl release bump must bump both.
    project = tomllib.loads((WORKTREE / "sim" / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == [f"spurctl=={spurctl.__version__}"]
    assert spurctl_sim.__version__ == spurctl.__version__
