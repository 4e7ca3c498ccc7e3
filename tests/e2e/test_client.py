"""The controller client over real gRPC: failover, deadlines, leader-following, scoped views.

Each test stands up simulated spurctld instances on loopback (no agents: the
client never talks to them) and points spurctl.sources.controller.ControllerClient at them,
or runs the real CLI where the rule is the CLI's (the 0600 token file).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spurctl.errors import SpurctlError
from spurctl.sources import credentials as auth
from spurctl.sources.controller import ControllerClient
from spurctl.sources.settings import Connection
from spurctl_sim import SimCluster, incident
from tests.cli import dead_url, run_cli, stderr_lines
from tests.live import KEY

OTHER_KEY = "some-other-cluster-key-0123456789"
ALL_JOBS = 22


def client(*urls: str, token: str | None = None, timeout: float = 5.0) -> ControllerClient:
    return ControllerClient(Connection(controllers=tuple(urls), token=token, timeout=timeout))


def failure_of(c: ControllerClient) -> str:
    with pytest.raises(SpurctlError) as info, c:
        c.view()
    message = str(info.value)
    assert "\n" not in message
    return message


# -- an endpoint that is down or slow --------------------------------------------------------


def test_an_unreachable_controller_is_named_with_why_it_failed() -> None:
    url = dead_url()
    message = failure_of(client(url))
    assert url in message
    assert "connection refused" in message
    assert "--controller" in message  # and how to fix it


def test_a_controller_name_that_does_not_resolve_says_so() -> None:
    url = "http://spurctld.invalid:6817"  # .invalid never resolves (RFC 2606)
    message = failure_of(client(url, timeout=2.0))
    assert f"{url}: unreachable (cannot resolve the host name)" in message


def test_a_slow_controller_fails_at_the_deadline_not_later() -> None:
    with SimCluster(incident(), agents=False, controller_latency=3.0) as slow:
        url = slow.controller_address
        started = time.monotonic()
        message = failure_of(client(url, timeout=0.3))
        elapsed = time.monotonic() - started
    assert elapsed < 2.0
    assert url in message
    assert "no answer within 0.3 s" in message and "--timeout" in message


def test_reads_fail_over_past_a_dead_and_a_slow_endpoint(lone_controller: SimCluster) -> None:
    dead = dead_url()
    with SimCluster(incident(), agents=False, controller_latency=3.0) as slow:
        c = client(dead, slow.controller_address, lone_controller.controller_address, timeout=0.3)
        with c:
            view = c.view(everything=True)
            assert c.address == lone_controller.controller_address
    assert len(view.jobs) == ALL_JOBS and view.complete
    assert view.address == lone_controller.controller_address


def test_once_an_endpoint_answers_the_next_read_goes_to_it_first(
    lone_controller: SimCluster,
) -> None:
    with SimCluster(incident(), agents=False, controller_latency=3.0) as slow:
        c = client(slow.controller_address, lone_controller.controller_address, timeout=0.3)
        with c:
            c.ping()
            started = time.monotonic()
            for _ in range(5):
                c.ping()
            # Five reads that each re-tried the slow endpoint first would take 1.5 s.
            assert time.monotonic() - started < 1.0


def test_when_every_endpoint_is_down_each_is_named() -> None:
    first, second = dead_url(), dead_url()
    message = failure_of(client(first, second))
    assert message.startswith("no controller endpoint answered Ping")
    assert first in message and second in message


# -- a follower controller ----------------------------------------------------------------------


def test_a_follower_serves_reads_without_a_redirect(lone_controller: SimCluster) -> None:
    with SimCluster(
        incident(), agents=False, follower_of=lone_controller.controller_address
    ) as follower:
        with client(follower.controller_address) as c:
            view = c.view(everything=True)
            assert c.address == follower.controller_address
        assert len(view.jobs) == ALL_JOBS
        assert follower.refusals == []


# -- credentials --------------------------------------------------------------------------------


def test_a_credential_scopes_getjobs_so_the_view_is_incomplete(
    secured_controller: SimCluster,
) -> None:
    with client(secured_controller.controller_address, token=auth.mint(KEY, "alice")) as c:
        view = c.view()
    assert {j.user for j in view.jobs.values()} == {"alice"}
    assert view.jobs_total == ALL_JOBS > len(view.jobs)
    assert not view.complete


def test_even_an_admin_credential_is_scoped(secured_controller: SimCluster) -> None:
    with client(
        secured_controller.controller_address, token=auth.mint(KEY, "ops", admin=True)
    ) as c:
        view = c.view()
    assert len(view.jobs) == 0 and view.jobs_total == ALL_JOBS
    assert not view.complete


def test_getjob_confirms_other_users_jobs_and_not_found_only_for_untracked_ids(
    secured_controller: SimCluster,
) -> None:
    with client(
        secured_controller.controller_address, token=auth.mint(KEY, "ops", admin=True)
    ) as c:
        confirmed = c.confirm([4712, 4388, 5187, 4702])
    assert confirmed[4388] is None and confirmed[5187] is None  # aged out; never issued
    assert confirmed[4712] is not None and confirmed[4712].nodelist == "gpu[016-017]"
    assert confirmed[4702] is not None and confirmed[4702].state.terminal


@pytest.mark.parametrize(
    ("token", "problem", "fix"),
    [
        (None, "credential missing", "--token"),
        (auth.mint(KEY, "alice", now=time.time() - 3600), "credential expired", "fresh token"),
        (auth.mint(OTHER_KEY, "alice"), "signed with the wrong key", "jwt_key"),
    ],
    ids=["missing", "expired", "wrong-key"],
)
def test_a_rejected_credential_says_whether_it_is_missing_expired_or_signed_wrongly(
    secured_controller: SimCluster, token: str | None, problem: str, fix: str
) -> None:
    message = failure_of(client(secured_controller.controller_address, token=token))
    assert secured_controller.controller_address in message
    assert problem in message and fix in message
    if token:
        assert token not in message


# -- the 0600 rule for ~/.spur/token, end to end --------------------------------------------------


def write_token_file(home: Path, token: str, mode: int) -> Path:
    path = home / ".spur" / "token"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def test_a_token_file_only_its_owner_can_read_is_used(
    secured_controller: SimCluster, tmp_path: Path
) -> None:
    inventory = secured_controller.write_inventories(tmp_path / "inventory.jsonl")
    write_token_file(tmp_path / "home", auth.mint(KEY, "alice"), 0o600)
    proc = run_cli(
        "audit",
        "--controller",
        secured_controller.controller_address,
        "--inventory",
        str(inventory),
        "--format",
        "json",
        home=tmp_path / "home",
    )
    assert proc.returncode == 1, proc.stderr  # findings: the audit ran, with alice's credential
    assert stderr_lines(proc) == []
    assert '"complete": false' in proc.stdout  # scoped to alice: the token was sent


def test_a_token_file_others_can_read_is_ignored_with_a_warning(
    secured_controller: SimCluster, tmp_path: Path
) -> None:
    inventory = secured_controller.write_inventories(tmp_path / "inventory.jsonl")
    path = write_token_file(tmp_path / "home", auth.mint(KEY, "alice"), 0o644)
    proc = run_cli(
        "audit",
        "--controller",
        secured_controller.controller_address,
        "--inventory",
        str(inventory),
        home=tmp_path / "home",
    )
    warning, error = stderr_lines(proc)
    assert warning.startswith("spurctl: warning: ignoring") and str(path) in warning
    assert "mode 0644" in warning and f"chmod 600 {path}" in warning
    # Ignored, so nothing was sent: the controller saw no credential at all.
    assert proc.returncode == 2 and "credential missing" in error


def test_a_scoped_read_is_not_complete_when_by_state_does_not_count_every_job() -> None:
    # A controller whose JobMetrics leaves by_state out: the scoped answer holds none of
    # the active jobs, and nothing can show it; without the guard 0 of 0 reads complete.
    from collections import Counter

    with SimCluster(incident(), agents=False, auth="required", jwt_key=KEY) as sim:
        total = len(sim.state.jobs)
        sim.state.metrics = lambda: (total, Counter())  # type: ignore[method-assign]
        with client(sim.controller_address, token=auth.mint(KEY, "ops", admin=True)) as c:
            view = c.view()
    assert view.bounded and view.active_read == 0
    assert not view.complete
    assert any("by_state does not count every job" in n for n in view.read_notes)


# -- an answer that is not Spur's ------------------------------------------------------------


@pytest.fixture
def not_spurctld() -> Iterator[str]:
    """A gRPC server on loopback answering every SlurmController call with bytes that
    no protobuf message decodes from (a truncated varint)."""
    from concurrent import futures

    import grpc

    def answer(_request: bytes, _context: object) -> bytes:
        return b"\x08\xff\xff"

    handler = grpc.method_handlers_generic_handler(
        "slurm.SlurmController",
        {
            name: grpc.unary_unary_rpc_method_handler(answer)
            for name in ("Ping", "GetJobs", "GetJob", "GetNodes", "GetJobMetrics")
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop(grace=None).wait(timeout=5)


def test_an_answer_that_does_not_decode_is_one_line_naming_the_endpoint(
    not_spurctld: str,
) -> None:
    from spurctl.proto import slurm_pb2 as pb

    with client(not_spurctld) as c:
        with pytest.raises(SpurctlError) as sent_later:
            c.read_later("GetNodes", pb.GetNodesRequest())()
        message = failure_of(c)  # the view's first call, read at once
    later = str(sent_later.value)
    assert "\n" not in later
    assert f"controller {not_spurctld} failed GetNodes: its answer is not Spur's" in later
    assert "check that" in later and "spurctld's address" in later
    assert not_spurctld in message
