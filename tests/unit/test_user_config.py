"""config.toml: decoded and validated in one declaration; each mistake is one line
naming the file and the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.sources.user_config import config_path, in_context, load, parse

CONFIG = Path("/etc/xdg/spurctl/config.toml")


def test_every_key_is_read_and_relative_paths_are_the_files_own() -> None:
    config = parse(
        'controller = ["http://ctl1:6817", "http://ctl2:6817"]\n'
        'agent_map = "agents.toml"\n'
        'inventory = ["inv", "/var/lib/spurctl/more.jsonl", "-"]\n'
        'ack_version = "0.8.0"\n'
        'collect_command = "ssh %h spurctl node-inventory"\n',
        CONFIG,
    )
    assert config.controller == "http://ctl1:6817,http://ctl2:6817"
    assert config.agent_map == Path("/etc/xdg/spurctl/agents.toml")
    assert config.inventory == ["/etc/xdg/spurctl/inv", "/var/lib/spurctl/more.jsonl", "-"]
    assert config.ack_version == "0.8.0"
    assert config.collect_command == "ssh %h spurctl node-inventory"
    assert config.collect is None


def test_one_inventory_may_be_a_string_and_home_is_expanded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", "/home/op")
    config = parse('inventory = "~/inv.jsonl"\ncollect = false\n', CONFIG)
    assert config.inventory == ["/home/op/inv.jsonl"]
    assert config.collect is False


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('agent_map = "a.json"\ncontroler = "http://x:6817"\n', [":2:", "unknown key 'controler'"]),
        ('agent_map = "a.json"\n\ncollect = "yes"\n', [":3:", "collect", "Expected `bool"]),
        ('agent_map = "a.json"\ncontroller = [1]\n', [":2:", "controller"]),
        ('agent_map = "a.json"\nagent_map = "b.json"\n', [":2:", "not valid TOML"]),
        ("agent_map = \n", [":1:", "not valid TOML"]),
        ('[controller]\nhosts = ["a"]\n', [":1:", "controller: Expected `str | array | null`"]),
        ('inventory = "inv"\ncollect = true\n', [":2:", "not both"]),
    ],
)
def test_a_mistake_is_one_line_naming_the_file_and_its_line(text: str, words: list[str]) -> None:
    with pytest.raises(SpurctlError) as caught:
        parse(text, CONFIG)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{CONFIG}:"), message
    for word in words:
        assert word in message, (word, message)
    assert "fix it or move it aside" in message


def test_the_file_is_under_xdg_config_home_else_dot_config(tmp_path: Path) -> None:
    assert config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "spurctl" / "config.toml"
    home_default = Path.home() / ".config" / "spurctl" / "config.toml"
    assert config_path({}) == home_default
    assert config_path({"XDG_CONFIG_HOME": "relative/dir"}) == home_default  # XDG: ignored


def test_spurctl_config_names_the_file_instead_and_must_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    named = tmp_path / "cluster-b.toml"
    env = {"SPURCTL_CONFIG": str(named), "XDG_CONFIG_HOME": str(tmp_path)}
    assert config_path(env) == named
    monkeypatch.setenv("SPURCTL_CONFIG", str(named))
    with pytest.raises(SpurctlError, match=r"SPURCTL_CONFIG names .*cluster-b.toml, which does "):
        load()
    named.write_text('agent_map = "agents.json"\n')
    assert load().agent_map == tmp_path / "agents.json"


def test_no_file_is_no_defaults_and_an_unreadable_one_is_an_error(tmp_path: Path) -> None:
    assert load(tmp_path / "absent.toml").file.agent_map is None
    not_text = tmp_path / "binary.toml"
    not_text.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(SpurctlError, match=r"binary\.toml: it is not UTF-8 text"):
        load(not_text)


# -- contexts: several clusters in one file ----------------------------------------

CONTEXTS = (
    "collect = true\n"
    'ack_version = "0.9.1"\n'
    'current_context = "prod"\n'
    "[contexts.prod]\n"
    'controller = "http://ctl-prod:6817"\n'
    'conf = "prod/spur.conf"\n'
    "[contexts.lab]\n"
    'controller = "http://ctl-lab:6817"\n'
    'cluster = "lab-east"\n'
    'inventory = "lab.jsonl"\n'
)


def test_a_context_takes_its_own_keys_over_the_files_and_its_name_is_the_clusters() -> None:
    config = parse(CONTEXTS, CONFIG)
    assert config.contexts == ("prod", "lab")

    prod = in_context(config, None)  # the file's current_context
    assert (prod.context, prod.controller, prod.cluster_name) == (
        "prod",
        "http://ctl-prod:6817",
        "prod",
    )
    assert prod.conf == Path("/etc/xdg/spurctl/prod/spur.conf")
    assert (prod.collect, prod.ack_version) == (True, "0.9.1")  # the file's, for every context

    lab = in_context(config, "lab")
    assert (lab.controller, lab.cluster_name) == ("http://ctl-lab:6817", "lab-east")
    # Where holdings come from is one choice: the context's inventory replaces collect.
    assert (lab.inventory, lab.collect) == (["/etc/xdg/spurctl/lab.jsonl"], None)


def test_without_a_current_context_the_files_own_keys_apply() -> None:
    config = in_context(parse(CONTEXTS.replace('current_context = "prod"\n', ""), CONFIG), None)
    assert (config.context, config.controller, config.collect) == (None, None, True)


def test_an_unknown_context_is_one_line_listing_the_known_ones() -> None:
    with pytest.raises(SpurctlError) as caught:
        in_context(parse(CONTEXTS, CONFIG), "staging")
    assert str(caught.value) == (
        f"--context staging: no such context in {CONFIG}; its contexts: prod, lab"
    )


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('current_context = "dev"\n[contexts.prod]\n', [":1:", "'dev'", "(prod)"]),
        ("[contexts.prod]\ncontroler = 1\n", [":2:", "unknown key 'controler'", "a context's"]),
        ('[contexts.prod]\ninventory = "i"\ncollect = true\n', [":3:", "not both"]),
        ('[contexts.prod]\ncluster = " prod"\n', [":1:", "cluster must be the cluster's name"]),
    ],
)
def test_a_mistake_in_a_context_is_one_line_naming_the_file_and_its_line(
    text: str, words: list[str]
) -> None:
    with pytest.raises(SpurctlError) as caught:
        parse(text, CONFIG)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{CONFIG}:"), message
    for word in words:
        assert word in message, (word, message)
