"""Issue 43 item 9, through the real CLI: one style.

- one label per severity on every screen (WARNING: what to weigh, NOTE: what informs;
  nodes said `Note:`, reclaim `NOTE:` for what audit called `WARNING:`), and one
  stderr prefix printed by one function (tests/unit/test_one_style.py);
- one table style (no box, lowercase headings) and one time format on screen
  (`2026-12-02 14:47 UTC`; nodes printed RFC 3339, explain seconds);
- --help lists the options in their groups (Nodes, Holdings, Connection, Output)
  instead of one flat list, and `-h` is the help wherever it is not --no-header.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import on_screen, run_cli
from tests.reclaim import reclaim_args

NOT_AUDITED = "1 node in scope has no inventory and was not audited: gpu024"
VERSION = "Spur 0.8.0 may free by itself only terminal-held"
SCREEN_TIME = re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d UTC\b")
RFC3339 = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d")
BOX = re.compile("[┃━│┏┡┗┌└─]")


def test_every_screen_labels_a_warning_and_a_note_alike(incident_cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sim, inventory, agent_map = incident_cluster
    home = tmp_path / "home"
    kept = [ln for ln in inventory.read_text().splitlines() if '"gpu024"' not in ln]
    inventory = tmp_path / "without-gpu024.jsonl"
    inventory.write_text("".join(f"{ln}\n" for ln in kept))
    view = ["-w", "gpu[003,024]", "--controller", sim.controller_address,
            "--inventory", str(inventory)]  # fmt: skip
    screens = {
        "audit": on_screen("audit", *view, home=home, width=160)[1],
        "nodes": on_screen("nodes", *view, home=home, width=160)[1],
        "reclaim": on_screen(
            *reclaim_args(sim, inventory, agent_map, tmp_path / "j.jsonl", node="gpu[003,024]"),
            "--dry-run", home=home, width=160,
        )[1],
    }  # fmt: skip
    for name, lines in screens.items():
        (warning,) = [ln for ln in lines if NOT_AUDITED in ln]
        assert warning.startswith(f"WARNING: {NOT_AUDITED}"), (name, warning)
        (note,) = [ln for ln in lines if VERSION in ln]
        assert note.startswith(f"NOTE: {VERSION}"), (name, note)
        assert not [ln for ln in lines if ln.lower().startswith(("note: ", "warning: "))
                    and not ln.startswith(("NOTE: ", "WARNING: "))]  # fmt: skip


def test_one_table_style_and_one_time_format_on_every_screen(  # type: ignore[no-untyped-def]
    incident_cluster, tmp_path: Path
) -> None:
    sim, inventory, agent_map = incident_cluster
    home = tmp_path / "home"
    journal = tmp_path / "journal.jsonl"
    source = ["--controller", sim.controller_address, "--inventory", str(inventory)]
    assert run_cli(*reclaim_args(sim, inventory, agent_map, journal, node="gpu012"),
                   home=home).returncode == 1  # fmt: skip
    screens = {
        "audit": on_screen("audit", *source, home=home, width=160)[1],
        "nodes": on_screen("nodes", *source, home=home, width=160)[1],
        "explain": on_screen("explain", "gpu003", "4711", *source, home=home, width=160)[1],
        "journal": on_screen("journal", "--journal", str(journal), home=home, width=160)[1],
        "reclaim": on_screen(*reclaim_args(sim, inventory, agent_map, journal), "--dry-run",
                             home=home, width=160)[1],
    }  # fmt: skip
    run_id = next(ln.split()[0] for ln in screens["journal"] if re.match(r"\d{8}T", ln))
    screens["journal --run"] = on_screen(
        "journal", "--journal", str(journal), "--run", run_id, home=home, width=160
    )[1]
    for name, lines in screens.items():
        text = "\n".join(lines)
        # Commands printed to paste may carry an RFC 3339 --started-at: not a shown time.
        shown = "\n".join(ln for ln in lines if not ln.lstrip().startswith("spurctl "))
        assert SCREEN_TIME.search(text), (name, text)
        assert not RFC3339.search(shown), (name, text)
        assert not BOX.search(text), (name, text)
    headings = {
        "audit": ["node", "job", "kind", "action", "live", "reason"],
        "nodes": ["node", "state", "jobs", "held", "agent", "inv-age", "findings"],
        "journal": ["run", "when", "operator", "cluster", "command", "nodes", "outcomes"],
        "reclaim": ["node", "job", "kind", "agent", "will", "stop", "why"],
        "journal --run": ["at", "command", "step", "node", "job", "kind", "result", "detail"],
    }
    for name, words in headings.items():
        assert words in [ln.split() for ln in screens[name]], (name, screens[name])


SECTIONS = {
    "Nodes": ["-w, --nodes, --node HOSTLIST", "-x, --exclude HOSTLIST"],
    "Holdings": ["--inventory FILE|DIR|-", "--collect", "--node-timeout SECONDS"],
    "Connection": ["--controller URL", "--conf FILE", "--token TOKEN", "--timeout SECONDS"],
    "Output": ["--format", "--json", "-o, --output FILE", "-h, --no-header"],
}


def _sections(page: str) -> dict[str, list[str]]:
    """Each heading of a help page (`Nodes:`) and the option lines under it."""
    out: dict[str, list[str]] = {}
    current = None
    for line in page.splitlines():
        if re.fullmatch(r"[A-Z][A-Za-z]*:", line):
            current = line[:-1]
            out[current] = []
        elif current and line.startswith("  -"):
            out[current].append(line.strip())
    return out


def test_help_lists_the_options_in_their_groups(tmp_path: Path) -> None:
    page = run_cli("audit", "--help", home=tmp_path).stdout
    sections = _sections(page)
    assert list(sections) == ["Options", "Nodes", "Holdings", "Connection", "Output"], page
    for heading, options in SECTIONS.items():
        for option in options:
            assert any(line.startswith(option) for line in sections[heading]), (option, heading)
    assert any(line.startswith("--kind KIND") for line in sections["Options"])
    # Every command that takes the shared groups lists them so.
    for command in (["reclaim"], ["nodes"], ["checklist", "post-wipe"], ["explain"]):
        shown = _sections(run_cli(*command, "--help", home=tmp_path).stdout)
        assert {"Nodes", "Connection"} <= set(shown) or command == ["explain"], command
        assert "Connection" in shown, command


COMMANDS = [
    [], ["snapshot"], ["explain"], ["reclaim"], ["journal"], ["checklist"],
    ["checklist", "post-wipe"], ["node-inventory"], ["collect"], ["demo"], ["node-release"],
]  # fmt: skip


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) or "spurctl" for c in COMMANDS])
def test_h_is_the_help_wherever_it_is_not_no_header(command: list[str], tmp_path: Path) -> None:
    short = run_cli(*command, "-h", home=tmp_path)
    long = run_cli(*command, "--help", home=tmp_path)
    assert short.returncode == long.returncode == 0, short.stderr
    assert short.stdout == long.stdout and short.stdout.startswith("Usage: spurctl")
    assert "-h, --help" in short.stdout


def test_audit_and_nodes_keep_h_as_no_header_as_sinfo_and_squeue(tmp_path: Path) -> None:
    for command in ("audit", "nodes"):
        page = run_cli(command, "--help", home=tmp_path).stdout
        assert "-h, --no-header" in page and "-h, --help" not in page
        # -h is no help there: it runs the command (here against nothing: one error line).
        ran = run_cli(command, "-h", "--controller", "http://127.0.0.1:9", home=tmp_path)
        assert ran.returncode == 2 and ran.stdout == "", ran.stdout
