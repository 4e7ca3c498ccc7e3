"""One node scope for every command: -w repeats are a union, @group through ClusterShell,
-x applied once with the audit's loose name match, and an empty scope a usage error."""

from __future__ import annotations

from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.scope import Scope
from tests.cli import one_line_error, run_cli


def test_repeated_nodes_are_the_union_as_clush_takes_them() -> None:
    scope = Scope.parse(["gpu[1-2]", "gpu5", "gpu2"])
    assert scope.named == {"gpu1", "gpu2", "gpu5"}
    assert scope.hostlist == "gpu[1-2,5]"
    assert scope.words() == ["--nodes", "gpu[1-2,5]"]


def test_no_nodes_is_every_node_less_the_excluded_ones() -> None:
    scope = Scope.parse(None, ["GPU2.cluster.local"])
    assert scope.everything
    assert scope.targets(["gpu1", "gpu2", "gpu3"]) == ["gpu1", "gpu3"]


def test_exclude_matches_either_name_of_a_node() -> None:
    scope = Scope.parse("gpu[1-3]", "gpu2")
    assert scope.leaves_out("gpu2.cluster.local") and scope.leaves_out("GPU2")
    assert not scope.leaves_out("gpu21")
    assert scope.targets([]) == ["gpu1", "gpu3"]


def test_an_exclude_that_leaves_nothing_names_both_options() -> None:
    with pytest.raises(SpurctlError, match=r"^-x gpu\[1-2\] leaves out every node of -w/--nodes"):
        Scope.parse(["gpu1", "gpu2.example"], ["gpu[1-2]"])


@pytest.mark.parametrize(
    ("nodes", "exclude", "says"),
    [
        (["gpu[1-"], None, "-w/--nodes: bad hostlist"),
        (["gpu1,,gpu2"], None, "empty name between commas"),
        (None, ["gpu[3-1]"], "-x/--exclude: bad hostlist"),
        (["@bad group"], None, "is not a group name"),
    ],
)
def test_a_malformed_hostlist_is_one_line_naming_its_option(
    nodes: list[str] | None, exclude: list[str] | None, says: str
) -> None:
    with pytest.raises(SpurctlError, match=says):
        Scope.parse(nodes, exclude)


def _groups(config_home: Path) -> None:
    conf = config_home / "clustershell"
    conf.mkdir(parents=True)
    (conf / "groups.conf").write_text(
        "[Main]\ndefault: local\n[local]\n"
        "map: sed -n 's/^$GROUP:\\(.*\\)/\\1/p' $CFGDIR/groups.txt\n"
        "list: sed -n 's/^\\([0-9A-Za-z_-]*\\):.*/\\1/p' $CFGDIR/groups.txt\n"
    )
    (conf / "groups.txt").write_text("gpus: gpu[001-004]\nbroken: gpu[1-\n")


def test_a_group_resolves_through_clustershells_own_groups_conf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _groups(tmp_path / "config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    scope = Scope.parse(["@gpus", "gpu009"], ["gpu002"])
    assert scope.named == {"gpu001", "gpu002", "gpu003", "gpu004", "gpu009"}
    assert scope.targets([]) == ["gpu001", "gpu003", "gpu004", "gpu009"]
    with pytest.raises(SpurctlError, match=r"^-w/--nodes @nope: ClusterShell's groups name no"):
        Scope.parse("@nope")


def test_an_empty_scope_is_a_usage_error_on_every_command_that_takes_nodes(
    tmp_path: Path,
) -> None:
    for command in ("audit", "nodes", "reclaim", "collect", "journal"):
        run = run_cli(command, "-w", "gpu1", "-x", "GPU1", home=tmp_path / command)
        one_line_error(run, "-x gpu1 leaves out every node")


def test_reclaim_without_nodes_names_the_missing_option_and_both_ways_to_give_them(
    tmp_path: Path,
) -> None:
    said = one_line_error(run_cli("reclaim", "--dry-run", home=tmp_path))
    assert "missing option --node: " in said
    assert "--plan FILE" in said and "spurctl reclaim --help" in said


def test_a_group_no_configuration_of_the_operators_defines_is_one_clear_error(
    tmp_path: Path,
) -> None:
    # ClusterShell installs example groups with itself (@gpu is example[156-159] under
    # the Python prefix): with no groups of the operator's, @gpu named those nodes and
    # collect ran its command on them (issue 53.9).
    run = run_cli("collect", "-w", "@gpu", "--command", "echo %h", home=tmp_path)
    said = one_line_error(run, "-w/--nodes @gpu: no groups are defined")
    assert "example" not in run.stdout + said


def test_spurctls_own_groups_conf_beside_its_config_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _groups(tmp_path / "config")
    (tmp_path / "config" / "clustershell").rename(tmp_path / "config" / "spurctl")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("HOME", str(tmp_path))
    assert Scope.parse("@gpus").named == {"gpu001", "gpu002", "gpu003", "gpu004"}
    with pytest.raises(SpurctlError, match=r"^-w/--nodes @gpu: ClusterShell's groups name no"):
        Scope.parse("@gpu")
