"""A mistake in config.toml is one line naming the file and, where one can be named, the
line it is on: never `:None`. Whatever the file quotes into that line (an escape
sequence, a line break written as a TOML escape) is written out, not acted on, so the
error stays one line on the operator's terminal."""

from __future__ import annotations

from pathlib import Path

from tests.cli import one_line_error, run_cli
from tests.e2e.test_config_defaults import write_config


def test_both_sources_set_in_a_dotted_context_key_name_the_line_not_none(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = write_config(
        home,
        'controller = "http://ctl:6817"\n'
        'contexts.lab.inventory = "/srv/inv.jsonl"\n'
        "contexts.lab.collect = true\n",
    )
    line = one_line_error(run_cli("audit", home=home), "set inventory or collect")
    assert ":None" not in line
    assert f"{config}:3: set inventory or collect = true, not both" in line


def test_a_context_name_no_line_can_be_found_for_names_the_file_alone(tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = write_config(home, '[contexts."b\\u001b[31mRED"]\ncluster = "lab"\n')
    line = one_line_error(run_cli("audit", home=home), "a context's name must be a plain word")
    assert ":None" not in line
    assert line.startswith(f"spurctl: error: {config}: a context's name")
    assert "\x1b" not in line and "\\x1b[31mRED" in line


def test_a_line_break_a_value_carries_stays_inside_the_one_error_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, 'conf = "/etc/spur\\u001b[2J/spur.conf\\nspurctl: error: forged"\n')
    run = run_cli("audit", home=home)
    line = one_line_error(run, "cannot read spur.conf")
    assert "\x1b" not in run.stderr and "\\x1b[2J" in line
    assert "\\nspurctl: error: forged" in line


def test_a_controller_with_an_unclosed_bracket_is_a_bad_address_not_an_internal_error(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_config(home, 'controller = "ctl1\\u001b[31m"\n')
    line = one_line_error(run_cli("audit", home=home), "bad controller address")
    assert "\\x1b[31m" in line and "internal error" not in line
    one_line_error(run_cli("audit", "--controller", "http://[ctl1"), "bad controller")
