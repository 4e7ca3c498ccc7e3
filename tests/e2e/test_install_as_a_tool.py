"""spurctl installed as a tool, not run from a checkout: the README's recipe, run for real.

The README's "Install on an admin host" block is executed line by line (its /opt and
/usr/local/bin moved under the test's directory): the wheel is built from a copy of the
package, installed in a fresh virtual environment (pip takes the runtime dependencies
from the configured index, as the project's own install does), linked where the shipped
systemd unit runs it. That wheel has no simulator: `spurctl demo` says how to add it
(exit 2); the README's next block adds the spurctl-sim wheel, and the demo closes its loop
from there, with no checkout on sys.path. The wheel carries every file of the package.
Docs, --help and the unit name one node_exporter textfile path, and the README the files
`demo --serve` makes.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import WORKTREE, cli_process, lines_of, run_cli

README = WORKTREE / "README.md"
UNIT = WORKTREE / "contrib" / "systemd" / "spurctl-audit.service"
TEXTFILE = "/var/lib/prometheus/node-exporter/spurctl.prom"
# The autopilot writes its own file beside it: two writers of one file would clobber it.
AUTOPILOT_TEXTFILE = "/var/lib/prometheus/node-exporter/spurctl-autopilot.prom"
# How long one step of the recipe may take (building and installing reach the index).
STEP_TIMEOUT = 900


def _block(index: int) -> list[str]:
    """The commands of the README's install section's sh block `index`, comments dropped."""
    text = README.read_text()
    section = text[text.index("\n## Install on an admin host\n") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```sh\n(.*?)```", section, flags=re.S)
    assert len(blocks) > index, "the README's install section lacks an sh block"
    lines = [line.split("  # ")[0].strip() for line in blocks[index].splitlines()]
    return [line for line in lines if line]


def install_block() -> list[str]:
    """The README's runtime install (the venv recipe): the spurctl wheel alone."""
    return _block(0)


def demo_block() -> list[str]:
    """The README's addition of the simulator to that install, and the demo."""
    return _block(2)  # after the install and its pipx form


def pipx_line() -> str:
    text = README.read_text()
    section = text[text.index("\n## Install on an admin host\n") :]
    (line,) = [ln for ln in section.splitlines() if ln.startswith("PIPX_HOME=")]
    return line


@dataclass(frozen=True)
class Installed:
    root: Path  # stands for / in the recipe's paths
    source: Path  # the copy of the package the wheel was built from
    bare: subprocess.CompletedProcess[str]  # `spurctl demo` from the spurctl wheel alone
    demo: subprocess.CompletedProcess[str]  # and with the spurctl-sim wheel added

    @property
    def wheel(self) -> Path:
        (wheel,) = (self.source / "dist").glob("spurctl-*.whl")
        return wheel


def _copy_package(dest: Path) -> Path:
    """What a wheel is built from, away from the worktree (the build writes build/)."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(WORKTREE / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    shutil.copytree(WORKTREE / "spurctl", dest / "spurctl", ignore=ignore)
    shutil.copytree(WORKTREE / "sim", dest / "sim", ignore=ignore)
    return dest


def _environment(root: Path) -> dict[str, str]:
    """The operator's shell: this machine's pip settings and PATH, but nothing of this
    checkout (no PYTHONPATH, no virtual environment) and the recipe's bin directory first."""
    ours = {str(Path(sys.executable).parent), str(WORKTREE)}
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in ours]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
        and not k.startswith(("SPUR_", "SPURCTL_"))
    }
    env.update(
        PATH=os.pathsep.join([str(root / "usr" / "local" / "bin"), *path]),
        XDG_CONFIG_HOME=str(root / "config"),
        XDG_STATE_HOME=str(root / "state"),
        COLUMNS="120",
    )
    return env


def _run(line: str, cwd: Path, env: Mapping[str, str], timeout: float) -> str:
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", line],
        cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, f"{line}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    """The README's recipe run under a fresh root: its wheel, venv, link and demo."""
    base = tmp_path_factory.mktemp("install")
    root = base / "root"
    (root / "usr" / "local" / "bin").mkdir(parents=True)
    (root / "opt").mkdir()
    source = _copy_package(base / "checkout")
    env = _environment(root)

    def demo() -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        proc = subprocess.run(
            ["spurctl", "demo"], cwd=base, env=env, capture_output=True, text=True,
            timeout=180, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert time.monotonic() - started < 180
        return proc

    def run_block(lines: list[str]) -> None:
        for line in lines:
            moved = (
                line.replace("/opt/", f"{root}/opt/")
                .replace("/usr/local/bin", f"{root}/usr/local/bin")
                .replace("python3 ", f"{shlex.quote(sys.executable)} ", 1)
            )
            if moved != "spurctl demo":  # what the operator runs: kept apart, below
                _run(moved, source, env, STEP_TIMEOUT)

    run_block(install_block())
    bare = demo()
    run_block(demo_block())
    yield Installed(root, source, bare, demo())


def test_the_readme_recipe_installs_the_wheel_and_the_demo_closes_its_loop(
    installed: Installed,
) -> None:
    assert "spurctl demo" not in install_block()
    assert demo_block()[-1] == "spurctl demo"
    # The admin host's wheel alone: no simulator, and demo says how to add it.
    bare = installed.bare
    assert bare.returncode == 2 and bare.stdout == "", bare.stdout + bare.stderr
    (line,) = bare.stderr.splitlines()
    assert line.startswith("spurctl: error: spurctl demo needs the simulated cluster"), line
    assert "pipx inject spurctl" in line
    demo = installed.demo
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "Traceback" not in demo.stderr
    assert "Reclaim plan:" in demo.stdout and "sent (" in demo.stdout

    # The command that ran is the link in the unit's directory, into the fresh venv, and
    # the package it imports is the wheel's, not this checkout's.
    link = installed.root / "usr" / "local" / "bin" / "spurctl"
    venv = installed.root / "opt" / "spurctl"
    assert link.is_symlink() and link.resolve() == (venv / "bin" / "spurctl").resolve()
    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import spurctl, spurctl_sim; print(spurctl.__file__, spurctl_sim.__file__)"],
        cwd=installed.root, env=_environment(installed.root), capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert where.returncode == 0, where.stderr
    for module in where.stdout.split():
        assert Path(module).is_relative_to(venv), where.stdout
        assert not Path(module).is_relative_to(WORKTREE)


def test_the_wheel_carries_every_file_of_the_package(installed: Installed) -> None:
    packaged = {
        name for name in zipfile.ZipFile(installed.wheel).namelist() if name.startswith("spurctl/")
    }
    source = {
        p.relative_to(installed.source).as_posix()
        for p in (installed.source / "spurctl").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert source - packaged == set(), "files of the package missing from the wheel"
    assert {"spurctl/py.typed", "spurctl/proto/slurm.proto"} <= packaged


def test_the_installed_command_is_where_the_systemd_unit_runs_it() -> None:
    (exec_start,) = re.findall(r"^ExecStart=(\S+)", UNIT.read_text(), re.M)
    assert exec_start == "/usr/local/bin/spurctl"
    assert any(line.endswith(f" {exec_start}") for line in install_block())  # the link
    assert "PIPX_BIN_DIR=/usr/local/bin" in pipx_line()


def _prom_paths(text: str) -> set[str]:
    return set(re.findall(r"(/\S*?\.prom)\b", text))


def test_docs_help_and_the_unit_name_one_textfile_path(tmp_path: Path) -> None:
    texts = {
        str(path.relative_to(WORKTREE)): path.read_text()
        for path in [
            README,
            *sorted((WORKTREE / "docs").glob("*.md")),
            *sorted(p for p in (WORKTREE / "contrib").rglob("*") if p.is_file()),
        ]
    }
    help_text = run_cli("audit", "--help", home=tmp_path, env={"COLUMNS": "200"})
    assert help_text.returncode == 0, help_text.stderr
    texts["spurctl audit --help"] = help_text.stdout
    found = {where: _prom_paths(text) for where, text in texts.items() if _prom_paths(text)}
    assert {"README.md", "spurctl audit --help", str(UNIT.relative_to(WORKTREE))} <= set(found)
    assert all(paths <= {TEXTFILE, AUTOPILOT_TEXTFILE} for paths in found.values()), found
    autopilot = ("docs/autopilot.md", "contrib/systemd/spurctl-autopilot.service")
    assert all(found[where] == {AUTOPILOT_TEXTFILE} for where in autopilot), found
    assert all(
        TEXTFILE in paths and AUTOPILOT_TEXTFILE not in paths
        for where, paths in found.items()
        if where not in autopilot and "autopilot" not in where
    ), found
    # The unit may write only there.
    assert f"ReadWritePaths={Path(TEXTFILE).parent}" in UNIT.read_text()


def test_the_readme_names_the_files_demo_serve_makes(tmp_path: Path) -> None:
    with cli_process("demo", "--serve", home=tmp_path, cwd=WORKTREE) as proc:
        assert proc.stdout is not None
        lines = lines_of(proc.stdout)
        printed: list[str] = []
        deadline = time.monotonic() + 60
        while not printed or not printed[-1].startswith("Serving"):
            printed.append(lines.get(timeout=max(deadline - time.monotonic(), 0.1)))
        banner = "".join(printed)
        found = re.search(r"^Files in (\S+), removed on exit:$", banner, re.M)
        assert found is not None, banner
        directory = Path(found[1])
        made = {p.name for p in directory.iterdir()}
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    listed = set(re.findall(rf"^\s+\w[\w .]*:\s+{re.escape(str(directory))}/(\S+)", banner, re.M))
    assert listed == {
        "inventories.jsonl", "agents.json", "jwt.key", "spur.conf", "config.toml", "journal.jsonl"
    }  # fmt: skip
    # The journal is made by the first command that writes one (config.toml names it).
    assert listed - {"journal.jsonl"} <= made

    text = README.read_text()
    try_it = text[text.index("\n## Try it\n") : text.index("\n## Install on an admin host\n")]
    assert all(f"`{name}`" in try_it for name in listed), try_it
    # The README's commands against the demo use its file names, as the demo's do.
    (explain,) = re.findall(r"^spurctl explain .*$", text, re.M)
    files = [w for w in shlex.split(explain) if "." in w and not w.startswith("-")]
    assert files and set(files) <= listed, files
    commands = [ln.strip() for ln in printed if ln.strip().startswith("spurctl ")]
    named = {Path(w).name for c in commands for w in shlex.split(c) if w.startswith("/")}
    assert "inventories.jsonl" in named
