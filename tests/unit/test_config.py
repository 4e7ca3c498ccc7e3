"""Connection settings resolve as Spur's own CLI does, and secrets stay secret."""

import os
import re
from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.sources.settings import (
    SpurConf,
    controller_urls,
    load_agent_map,
    load_conf,
    resolve_jwt_key,
    resolve_token,
)


def write_token(home: Path, mode: int, value: str = "tok-abc") -> Path:
    (home / ".spur").mkdir()
    path = home / ".spur" / "token"
    path.write_text(value + "\n")
    os.chmod(path, mode)
    return path


def test_token_file_with_mode_0600_is_used(tmp_path: Path) -> None:
    write_token(tmp_path, 0o600)
    assert resolve_token(None, tmp_path) == "tok-abc"


def test_token_file_readable_by_others_is_ignored_with_a_warning(tmp_path: Path) -> None:
    write_token(tmp_path, 0o644)
    warnings: list[str] = []
    assert resolve_token(None, tmp_path, warnings.append) is None
    assert len(warnings) == 1
    assert "chmod 600" in warnings[0]
    assert "tok-abc" not in warnings[0]


def test_flag_token_wins_over_file(tmp_path: Path) -> None:
    write_token(tmp_path, 0o600)
    assert resolve_token("from-flag", tmp_path) == "from-flag"


def test_no_token_anywhere_is_none(tmp_path: Path) -> None:
    assert resolve_token(None, tmp_path) is None


def test_controller_from_conf_hosts_and_listen_port(tmp_path: Path) -> None:
    conf_path = tmp_path / "spur.conf"
    conf_path.write_text(
        'cluster_name = "c"\n[controller]\nhosts = ["ctl1", "ctl2"]\n'
        'listen_addr = "0.0.0.0:7817"\n[network]\nagent_port = 7818\n'
        '[auth]\njwt_key = "k3y-secret"\n'
    )
    conf = load_conf(conf_path)
    assert controller_urls(None, conf) == ["http://ctl1:7817", "http://ctl2:7817"]
    assert conf.agent_port == 7818
    assert resolve_jwt_key(None, conf) == "k3y-secret"
    # The flag (or SPUR_CONTROLLER_ADDR) wins over spur.conf.
    assert controller_urls("https://a:1,b", conf) == ["https://a:1", "http://b:6817"]


def test_default_controller_is_localhost() -> None:
    from spurctl.sources.settings import SpurConf

    assert controller_urls(None, SpurConf()) == ["http://localhost:6817"]


def test_explicit_conf_that_is_missing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(SpurctlError, match=r"cannot read spur\.conf"):
        load_conf(tmp_path / "nope.conf")


def test_malformed_conf_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "spur.conf"
    bad.write_text("[controller\n")
    with pytest.raises(SpurctlError, match=re.escape(str(bad))):
        load_conf(bad)


def test_bad_controller_address_is_refused() -> None:
    from spurctl.sources.settings import SpurConf

    with pytest.raises(SpurctlError, match="bad controller address"):
        controller_urls("ftp://x", SpurConf())


def test_agent_map_json_and_toml(tmp_path: Path) -> None:
    j = tmp_path / "map.json"
    j.write_text('{"gpu017": "10.0.0.17:6818"}')
    t = tmp_path / "map.toml"
    t.write_text('gpu018 = "10.0.0.18:6818"\n')
    assert load_agent_map(j) == {"gpu017": "10.0.0.17:6818"}
    assert load_agent_map(t) == {"gpu018": "10.0.0.18:6818"}


def test_agent_map_that_is_not_a_map_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "map.json"
    bad.write_text('["gpu017"]')
    with pytest.raises(SpurctlError, match="must map node names"):
        load_agent_map(bad)
    with pytest.raises(SpurctlError, match="cannot read --agent-map"):
        load_agent_map(tmp_path / "missing.json")


def test_jwt_key_file_empty_or_missing(tmp_path: Path) -> None:
    from spurctl.sources.settings import SpurConf

    empty = tmp_path / "key"
    empty.write_text("\n")
    with pytest.raises(SpurctlError, match="is empty"):
        resolve_jwt_key(empty, SpurConf())
    with pytest.raises(SpurctlError, match="cannot read --jwt-key-file"):
        resolve_jwt_key(tmp_path / "missing", SpurConf())


def _token(admin: bool) -> str:
    import jwt

    return jwt.encode({"sub": "alice", "admin": admin}, "k" * 32, algorithm="HS256")


def test_not_found_is_proof_only_when_owner_only_visibility_is_ruled_out(tmp_path: Path) -> None:
    from spurctl.sources.settings import Connection, SpurConf

    unknown = SpurConf()
    owner_only = SpurConf(job_info_visibility="owner_only")
    redacted = SpurConf(job_info_visibility="redacted")
    # No credential, or an admin's: GetJob sees every job, NOT_FOUND means untracked.
    assert Connection(("http://c:1",), token=None, conf=unknown).not_found_doubt() is None
    assert (
        Connection(("http://c:1",), token=_token(True), conf=owner_only).not_found_doubt() is None
    )
    # A user's credential under a visibility setting spurctl cannot see or that hides jobs.
    doubt = Connection(("http://c:1",), token=_token(False), conf=unknown).not_found_doubt()
    assert doubt is not None and "admin token" in doubt
    assert Connection(("http://c:1",), token=_token(False), conf=owner_only).not_found_doubt()
    assert Connection(("http://c:1",), token=_token(False), conf=redacted).not_found_doubt() is None


def test_conf_without_visibility_key_states_nothing_and_leaves_not_found_in_doubt(
    tmp_path: Path,
) -> None:
    # A spur.conf without the key (a login node's copy) cannot vouch for
    # the controller's setting, which may be owner_only: it used to read as "redacted".
    from spurctl.sources.settings import Connection

    conf_path = tmp_path / "spur.conf"
    conf_path.write_text('cluster_name = "c"\n')
    conf = load_conf(conf_path)
    assert conf.job_info_visibility is None
    doubt = Connection(("http://c:1",), token=_token(False), conf=conf).not_found_doubt()
    assert doubt is not None and "no spur.conf states job_info_visibility" in doubt
    explicit = tmp_path / "explicit.conf"
    explicit.write_text('[controller]\njob_info_visibility = "Redacted"\n')
    assert load_conf(explicit).job_info_visibility == "redacted"
    assert (
        Connection(("http://c:1",), token=_token(False), conf=load_conf(explicit)).not_found_doubt()
        is None
    )


def test_a_root_credential_proves_not_found_like_an_admin() -> None:
    import jwt

    from spurctl.sources.settings import Connection, SpurConf

    root = jwt.encode({"sub": "root"}, "k" * 32, algorithm="HS256")
    owner_only = SpurConf(job_info_visibility="owner_only")
    assert Connection(("http://c:1",), token=root, conf=owner_only).not_found_doubt() is None
    odd = SpurConf(job_info_visibility="owner-only")  # not a setting: proves nothing
    assert Connection(("http://c:1",), token=_token(False), conf=odd).not_found_doubt()


# -- bad input that used to slip through ---------------------------------------------


@pytest.mark.parametrize("value", ["true", "false", "6818.0", '"6818"', "0", "70000"])
def test_an_agent_port_that_is_not_a_port_number_is_refused(tmp_path: Path, value: str) -> None:
    conf_path = tmp_path / "spur.conf"
    conf_path.write_text(f"[network]\nagent_port = {value}\n")
    with pytest.raises(SpurctlError, match=r"\[network\] agent_port must be a port number") as err:
        load_conf(conf_path)
    assert str(conf_path) in str(err.value)


def test_a_key_file_others_can_read_gets_one_warning_and_is_still_used(tmp_path: Path) -> None:
    key = tmp_path / "jwt.key"
    key.write_text("cluster-key-1234\n")
    for mode, expected in ((0o600, 0), (0o640, 1), (0o604, 1)):
        os.chmod(key, mode)
        warnings: list[str] = []
        assert resolve_jwt_key(key, SpurConf(), warnings.append) == "cluster-key-1234"
        assert len(warnings) == expected, warnings
        for w in warnings:
            assert f"chmod 600 {key}" in w and f"mode {mode:04o}" in w
            assert "cluster-key-1234" not in w and "\n" not in w


def test_a_spur_conf_holding_jwt_key_that_others_can_read_gets_one_warning(tmp_path: Path) -> None:
    conf_path = tmp_path / "spur.conf"
    for text, mode, expected in (
        ('[auth]\njwt_key = "k3y-secret"\n', 0o644, 1),
        ('[auth]\njwt_key = "k3y-secret"\n', 0o600, 0),
        ('[auth]\nmode = "required"\n', 0o644, 0),  # no key in it: nothing to protect
    ):
        conf_path.write_text(text)
        os.chmod(conf_path, mode)
        warnings: list[str] = []
        load_conf(conf_path, warnings.append)
        assert len(warnings) == expected, warnings
        for w in warnings:
            assert "jwt_key" in w and f"chmod 600 {conf_path}" in w and "k3y-secret" not in w


@pytest.mark.parametrize(
    ("content", "key", "warned"),
    [
        (b"cluster-key", "cluster-key", False),
        (b"cluster-key\n", "cluster-key", False),  # echo's newline: no TOML string holds it
        (b"cluster-key\r\n", "cluster-key", False),
        (b" cluster-key\t\n", " cluster-key\t", True),  # spurd would use these bytes too
        (b"cluster-key\n\n", "cluster-key\n", True),
    ],
)
def test_a_key_file_is_read_as_spurd_reads_jwt_key_but_for_one_line_ending(
    tmp_path: Path, content: bytes, key: str, warned: bool
) -> None:
    path = tmp_path / "jwt.key"
    path.write_bytes(content)
    path.chmod(0o600)
    warnings: list[str] = []
    assert resolve_jwt_key(path, SpurConf(), warnings.append) == key
    assert bool(warnings) is warned, warnings
    assert all("whitespace" in w and "cluster-key" not in w for w in warnings)


def test_a_key_file_that_is_not_utf8_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "jwt.key"
    path.write_bytes(b"\xff\xfekey")
    with pytest.raises(SpurctlError, match="not UTF-8 text"):
        resolve_jwt_key(path, SpurConf())
