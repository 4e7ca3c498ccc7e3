"""The controller-version note in plain words, and how to hide it, wherever it is shown.

A screen (audit's table, the reclaim plan, `nodes`, the checklist on a terminal)
says what this controller frees by itself and what it leaves to spurctl, then
"Hide this note with --ack-version 0.8.0 (or ack_version in the config file).",
whole at 80 columns (wrapped between words, never cut). Pasting that option hides
it, on every command that shows the note: `explain` included, whose text gives the
same short form (issue 53.11: the whole note took 9 lines there). JSON keeps every note.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl_sim import SimCluster, incident
from spurctl_sim import post_wipe as post_wipe_scenario
from tests.cli import run_cli
from tests.e2e.test_narrow_and_piped_e2e import WIDTH, on_screen

HIDE = "Hide this note with --ack-version 0.8.0 (or ack_version in the config file)."
SAYS = (
    "Spur 0.8.0 may free by itself only terminal-held holdings of jobs that ended in the "
    "last hour; the other reclaim findings wait for spurctl reclaim."
)
WHOLE = "cannot tell them apart"  # a phrase of the whole note (explain, JSON)


def shown_note(lines: list[str], label: str = "NOTE:") -> str | None:
    """The note as the screen shows it, its wrapped lines joined; None when it is absent.
    (The checklist quotes it: `> ` in Markdown, rich's bar on a terminal.)"""
    start = [i for i, line in enumerate(lines) if line.lstrip("▌> ").startswith(f"{label} Spur")]
    if not start:
        return None
    assert len(start) == 1, "\n".join(lines)
    words: list[str] = []
    for line in lines[start[0] :]:
        words += line.lstrip("▌> ").split()
        if " ".join(words).endswith("config file)."):
            break
    return " ".join(words).removeprefix(f"{label} ")


def _cli(sim: SimCluster, inventory: Path, *argv: str) -> list[str]:
    return [*argv, "--controller", sim.controller_address, "--inventory", str(inventory)]


@pytest.mark.parametrize(
    ("argv", "label"),
    [
        (["audit"], "NOTE:"),
        (["reclaim", "-w", "gpu003", "--dry-run"], "NOTE:"),
        (["nodes"], "NOTE:"),
    ],
    ids=["audit", "reclaim", "nodes"],
)
def test_at_80_columns_the_note_says_what_it_means_and_how_to_hide_it_whole(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path, argv: list[str], label: str
) -> None:
    sim, inventory, _ = incident_cluster
    status, lines = on_screen(*_cli(sim, inventory, *argv), home=tmp_path / "home")
    assert status in (0, 1), lines
    assert shown_note(lines, label) == f"{SAYS} {HIDE}", "\n".join(lines)
    if argv[0] != "nodes":  # nodes prints plain lines; the terminal wraps them
        # (a command to run next is one line whatever the width: it must paste)
        prose = [line for line in lines if not line.startswith("  spurctl ")]
        assert all(len(line) <= WIDTH for line in prose), "\n".join(lines)
    # Pasting the option it names hides it; the rest of the screen stays.
    _, acked = on_screen(
        *_cli(sim, inventory, *argv), "--ack-version", "0.8.0", home=tmp_path / "home"
    )
    assert shown_note(acked, label) is None and "gpu003" in "\n".join(acked)


def test_the_checklist_on_a_terminal_says_it_too(tmp_path: Path) -> None:
    with SimCluster(post_wipe_scenario()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        argv = _cli(sim, inventory, "checklist", "post-wipe")
        _, lines = on_screen(*argv, home=tmp_path / "home")
        _, acked = on_screen(*argv, "--ack-version", "v0.8.0", home=tmp_path / "home")
    assert shown_note(lines, "NOTE:") == f"{SAYS} {HIDE}", "\n".join(lines)
    assert shown_note(acked, "NOTE:") is None


@pytest.fixture
def old_spur(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    with SimCluster(dataclasses.replace(incident(), version="0.7.2")) as sim:
        yield sim, sim.write_inventories(tmp_path / "inventory.jsonl")


def test_a_spur_older_than_0_8_0_is_said_to_free_nothing_by_itself(
    old_spur: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    sim, inventory = old_spur
    _, lines = on_screen(*_cli(sim, inventory, "audit"), home=tmp_path / "home")
    assert shown_note(lines) == (
        "Spur 0.7.2 frees no holding by itself: every reclaim finding waits for spurctl "
        "reclaim. Hide this note with --ack-version 0.7.2 (or ack_version in the config file)."
    )


def _acknowledging(how: str, home: Path) -> tuple[list[str], dict[str, str]]:
    if how == "option":
        return ["--ack-version", "0.8.0"], {}
    if how == "environment":
        return [], {"SPURCTL_ACK_VERSION": "v0.8.0"}
    config = home / ".config" / "spurctl" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('ack_version = "0.8.0"\n')
    return [], {}


@pytest.mark.parametrize("how", ["option", "environment", "config-file"])
def test_explain_takes_ack_version_and_leaves_the_note_out_of_its_text(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path, how: str
) -> None:
    sim, inventory, _ = incident_cluster
    argv = _cli(sim, inventory, "explain", "gpu003", "4711")
    told = run_cli(*argv, home=tmp_path / "told")
    assert told.returncode == 0, told.stderr
    text = " ".join(told.stdout.split())
    assert f"{SAYS} {HIDE}" in text and WHOLE not in text  # the short form, as on screens

    home = tmp_path / "acked"
    args, env = _acknowledging(how, home)
    acked = run_cli(*argv, *args, home=home, env=env)
    assert acked.returncode == 0, acked.stderr
    assert WHOLE not in " ".join(acked.stdout.split()) and "ack-version" not in acked.stdout
    assert "Reclaim sends:" in acked.stdout  # the decision itself is all there
    doc = json.loads(run_cli(*argv, *args, "--json", home=home, env=env).stdout)
    assert doc["controller"]["version"] == "0.8.0"
    assert any(WHOLE in note for note in doc["notes"])  # a document keeps every note
