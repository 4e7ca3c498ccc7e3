"""`-o json` is the kubectl/squeue reflex for `--format json`: refused with one usage line
unless a file of that name exists or it is written as a path; `--json` is the short form
of `--format json` wherever `--format` is taken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spurctl_sim import SimCluster
from tests.cli import dead_url, one_line_error, run_cli


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["audit"], "json"),
        (["audit"], "csv"),
        (["audit"], "prometheus"),
        (["audit"], "markdown"),
        (["checklist", "post-wipe"], "json"),
    ],
)
def test_a_format_name_given_to_o_is_one_usage_line_and_no_file(
    command: list[str], name: str, tmp_path: Path
) -> None:
    run = run_cli(*command, "--controller", dead_url(), "-o", name, cwd=tmp_path)
    line = one_line_error(run)
    assert line == f"spurctl: error: `-o` takes a file; did you mean `--format {name}`?"
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a temp file


def test_a_format_the_command_lacks_is_named_with_the_way_to_write_such_a_file(
    tmp_path: Path,
) -> None:
    snap = run_cli("snapshot", "--controller", dead_url(), "-o", "json", cwd=tmp_path)
    line = one_line_error(snap, "has no --format json", "-o ./json")
    assert "did you mean" not in line
    csv = run_cli("checklist", "post-wipe", "--controller", dead_url(), "-o", "csv", cwd=tmp_path)
    one_line_error(csv, "has no --format csv", "-o ./csv")


def test_a_path_or_an_existing_file_of_that_name_is_written(
    lone_controller: SimCluster, tmp_path: Path
) -> None:
    inventory = lone_controller.write_inventories(tmp_path / "inventory.jsonl")
    base = ("audit", "--controller", lone_controller.controller_address)
    base += ("--inventory", str(inventory))
    as_path = run_cli(*base, "-o", "./json", cwd=tmp_path)
    assert as_path.returncode == 1, as_path.stderr
    assert "findings:" in (tmp_path / "json").read_text()  # the table, in a file named json
    (tmp_path / "csv").write_text("old\n")
    existing = run_cli(*base, "--format", "csv", "-o", "csv", cwd=tmp_path)
    assert existing.returncode == 1, existing.stderr
    assert (tmp_path / "csv").read_text().startswith("node,")


def test_json_is_short_for_format_json_on_every_command_that_takes_format(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    sim, inventory, agents = incident_cluster
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    inv = ("--inventory", str(inventory))
    commands = {
        "spurctl.audit/v1": ["audit", *inv],
        "spurctl.explain/v1": ["explain", "gpu003", *inv],
        "spurctl.reclaim/v1": [
            "reclaim", "--node", "gpu003", "--dry-run", "--agent-map", str(agents), *inv,
        ],
        "spurctl.journal-runs/v1": ["journal"],
        "spurctl.checklist/v1": ["checklist", "post-wipe", *inv],
    }  # fmt: skip
    home = tmp_path / "home"
    for schema, argv in commands.items():
        short = run_cli(*argv, "--json", env=env, home=home)
        long = run_cli(*argv, "--format", "json", env=env, home=home)
        assert short.returncode == long.returncode, (argv, short.stderr, long.stderr)
        short_doc, long_doc = json.loads(short.stdout), json.loads(long.stdout)
        assert short_doc["schema"] == long_doc["schema"] == schema
        assert short_doc.keys() == long_doc.keys()


def test_json_beside_another_format_is_a_usage_error(tmp_path: Path) -> None:
    run = run_cli("audit", "--controller", dead_url(), "--json", "--format", "csv")
    one_line_error(run, "--json is --format json", "--format csv")
    table = run_cli("journal", "--json", "--format", "table", home=tmp_path)
    one_line_error(table, "--json is --format json")


# Other tools' -o words: kubectl's (`wide`, `yaml`, `name`, `jsonpath=...`,
# `custom-columns=...`) and sinfo's/squeue's format strings (`%N %T`).
FOREIGN = ["wide", "yaml", "name", "jsonpath={.items[*].node}", "custom-columns=N:.node", "%N %T"]


@pytest.mark.parametrize("word", FOREIGN)
@pytest.mark.parametrize(
    "command",
    [["audit"], ["checklist", "post-wipe"], ["snapshot"], ["collect", "-w", "gpu001"]],
    ids=["audit", "checklist", "snapshot", "collect"],
)
def test_another_tools_output_format_given_to_o_is_refused_with_what_to_type(
    command: list[str], word: str, tmp_path: Path
) -> None:
    run = run_cli(*command, "--controller", dead_url(), "-o", word, cwd=tmp_path)
    line = one_line_error(run, "`-o` takes a file", "give `-o ")
    assert f"`{word}` is " in line
    assert list(tmp_path.iterdir()) == []  # nothing written: no ./wide to find later
    if command == ["audit"] and word == "wide":
        assert "spurctl audit prints its whole table without it" in line
    if command == ["audit"] and word == "%N %T":
        assert "--format csv" in line and "`-o './%N %T'`" in line


def test_node_inventory_refuses_a_kubectl_word_too(tmp_path: Path) -> None:
    run = run_cli("node-inventory", "--proc-root", str(tmp_path), "-o", "yaml", cwd=tmp_path)
    one_line_error(run, "kubectl's -o yaml", "-o ./yaml")
    assert list(tmp_path.iterdir()) == []


def test_every_o_file_ends_with_one_stderr_line_saying_what_was_written_where(
    incident_cluster: tuple[SimCluster, Path, Path], tmp_path: Path
) -> None:
    from spurctl_sim import node_line

    sim, inventory, _ = incident_cluster
    env = {"SPUR_CONTROLLER_ADDR": sim.controller_address}
    inv = ("--inventory", str(inventory))
    home = tmp_path / "home"
    fake = tmp_path / "fake"
    fake.mkdir()
    written = {
        # A path spelled as a format word is a file: ./wide is written, and said.
        "./wide": (["audit", *inv], "wrote the audit (table, 14 findings) to wide"),
        "audit.json": (
            ["audit", *inv, "--json", "--action", "reclaim"],
            "wrote the audit (json, 9 findings of 14) to audit.json",
        ),
        "recycle.md": (
            ["checklist", "post-wipe", *inv],
            "wrote the post-wipe checklist (markdown, 2 nodes to recycle) to recycle.md",
        ),
        "inv.jsonl": (
            ["collect", "-w", "gpu[001-003]", "--command", node_line.command(inventory)],
            "wrote 3 inventories (JSON Lines) to inv.jsonl",
        ),
        "node.json": (
            ["node-inventory", "--cgroup-root", str(fake), "--proc-root", str(fake),
             "--hostname", "gpu017"],
            "wrote gpu017's inventory (0 held) to node.json",
        ),
        "snap.json": (["snapshot"], " to snap.json"),
    }  # fmt: skip
    for name, (argv, said) in written.items():
        run = run_cli(*argv, "-o", name, env=env, home=home, cwd=tmp_path)
        assert run.returncode in (0, 1), (argv, run.stderr)
        assert run.stdout == "", (argv, run.stdout)
        assert (tmp_path / name).stat().st_size > 0
        last = run.stderr.splitlines()[-1]
        assert last.endswith(said) if name == "snap.json" else last == said, (argv, run.stderr)
