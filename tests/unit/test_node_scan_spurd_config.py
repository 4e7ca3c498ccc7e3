"""What the node's spurd was started with, read from its own process (issue 49.4, 50.4).

spurd takes its stepd state directory from `--state-dir` (env `SPUR_STEPD_STATE_DIR`),
else its spur.conf's `[controller] state_dir`, else /var/spool/spur; its spur.conf from
`-f/--config` (default /etc/spur/spur.conf); its controller from `--controller` (env
`SPUR_CONTROLLER_ADDR`). Spur's Ansible roles run it with `<spur_home>/agent-state`, and
a spurd run as a service user makes its session directories that user's. Fixture trees
as in test_node_scan_sessions.py: a supervisor whose own command line cannot be read
(so nothing but spurd says where its sessions are), and, as root, files chowned to
spurd's user.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from spurctl.holdings import SessionBinding
from spurctl.node import agent_config
from spurctl.node.node_files import ignore
from tests.unit.test_node_scan_layouts import by_id
from tests.unit.test_node_scan_sessions import StepdNode

SPURD = 2201
SERVICE_UID = 4242  # spurd's own user, as the Ansible roles' `spur` user


def spurd(node: StepdNode, *args: str, env: dict[str, str] | None = None, uid: int = 0) -> None:
    """spurd's command line, environment and /proc/<pid>/status as the kernel shows them."""
    d = node.proc / str(SPURD)
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in ("/usr/sbin/spurd", *args)))
    (d / "environ").write_bytes(b"".join(f"{k}={v}\0".encode() for k, v in (env or {}).items()))
    (d / "status").write_text(f"Name:\tspurd\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")


def session_elsewhere(node: StepdNode, state: Path, owner: int | None = None) -> None:
    """Job 4711's live batch session under `state`; its supervisor's argv unreadable."""
    node.supervisor(4900, 1400, 4711, 2)
    (node.proc / "4900" / "cmdline").unlink()
    session = node.descriptor(4711, 2, pid=4900, ticks=1400, state=state)
    if owner is not None:
        for path in (state / "runtime", session, session / "descriptor.json"):
            os.chown(path, owner, owner)


def bound(node: StepdNode) -> SessionBinding | None:
    h = by_id(node.scan_sessions()).get(4711)
    return None if h is None or not h.sessions else h.sessions[0].binding


def test_the_state_dir_on_spurds_command_line_is_read(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    spurd(node, "--controller", "http://ctl:6817", "--state-dir", "/opt/spur/agent-state")
    session_elsewhere(node, tmp_path / "opt" / "spur" / "agent-state")
    assert bound(node) is SessionBinding.LIVE


def test_the_state_dir_in_spurds_environment_is_read(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    spurd(node, env={"SPUR_STEPD_STATE_DIR": "/srv/spur/agent-state"})
    session_elsewhere(node, tmp_path / "srv" / "spur" / "agent-state")
    assert bound(node) is SessionBinding.LIVE


def test_the_state_dir_of_the_spur_conf_spurd_reads_is_read(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    conf = tmp_path / "etc" / "spur" / "node.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text('cluster_name = "alpha"\n[controller]\nstate_dir = "/data/spur"\n')
    spurd(node, "-f", "/etc/spur/node.conf")
    session_elsewhere(node, tmp_path / "data" / "spur")
    assert bound(node) is SessionBinding.LIVE


def test_the_command_line_wins_over_the_environment_and_the_spur_conf(tmp_path: Path) -> None:
    conf = tmp_path / "etc" / "spur" / "spur.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text('cluster_name = "alpha"\n[controller]\nstate_dir = "/data/spur"\n')
    node = StepdNode(tmp_path)
    spurd(node, "--state-dir=/cli", env={"SPUR_STEPD_STATE_DIR": "/env"})
    said = agent_config.read(node.proc, SPURD, tmp_path, ignore)
    assert said.state_dir == tmp_path / "cli" and said.cluster == "alpha"
    spurd(node, env={"SPUR_STEPD_STATE_DIR": "/env"})
    assert agent_config.read(node.proc, SPURD, tmp_path, ignore).state_dir == tmp_path / "env"
    spurd(node)
    said = agent_config.read(node.proc, SPURD, tmp_path, ignore)
    assert said.state_dir == tmp_path / "data" / "spur"


def test_a_spur_conf_spurd_would_not_load_gives_nothing(tmp_path: Path) -> None:
    # No cluster_name: spur-core's validate refuses it and spurd runs on its defaults.
    conf = tmp_path / "etc" / "spur" / "spur.conf"
    conf.parent.mkdir(parents=True)
    node = StepdNode(tmp_path)
    spurd(node)
    for text in ('[controller]\nstate_dir = "/data/spur"\n', "cluster_name = [", "\xff"):
        conf.write_bytes(text.encode("latin-1"))
        said = agent_config.read(node.proc, SPURD, tmp_path, ignore)
        assert said.cluster is None and said.state_dir == tmp_path / "var" / "spool" / "spur"


@pytest.mark.skipif(os.geteuid() != 0, reason="handing files to another user needs root")
def test_sessions_owned_by_spurds_own_user_are_read_and_no_other_users(tmp_path: Path) -> None:
    node = StepdNode(tmp_path)
    spurd(node, "--state-dir", "/home/spur/agent-state", uid=SERVICE_UID)
    state = tmp_path / "home" / "spur" / "agent-state"
    session_elsewhere(node, state, owner=SERVICE_UID)
    assert bound(node) is SessionBinding.LIVE
    # Files of a user spurd does not run as are refused, with who owns them.
    for path in (state / "runtime", *state.glob("runtime/*"), *state.glob("runtime/*/*")):
        os.chown(path, SERVICE_UID + 1, SERVICE_UID + 1)
    (refusal,) = node.scan_sessions().session_refusals
    assert f"owned by uid {SERVICE_UID + 1}" in refusal.why and bound(node) is None


def test_a_spur_conf_that_is_a_fifo_is_not_waited_on(tmp_path: Path) -> None:
    # spurd's -f names any path; opening a FIFO would wait for a writer for ever.
    conf = tmp_path / "etc" / "spur" / "spur.conf"
    conf.parent.mkdir(parents=True)
    os.mkfifo(conf)
    node = StepdNode(tmp_path)
    spurd(node)
    said: list[agent_config.AgentConfig] = []
    reader = threading.Thread(
        target=lambda: said.append(agent_config.read(node.proc, SPURD, tmp_path, ignore)),
        daemon=True,
    )
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # let the stuck open() return before failing
        os.close(os.open(conf, os.O_WRONLY | os.O_NONBLOCK))
    assert said, "reading spurd's settings waited on the FIFO"
    assert said[0].cluster is None
    assert said[0].state_dir == tmp_path / "var" / "spool" / "spur"
