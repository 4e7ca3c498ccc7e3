"""The journal and its lock never follow a link they did not expect, and never write into a
file spurctl did not create (issue 39.2). Real files in a temporary directory throughout.

- a lock that is a link (symbolic or hard) to another file leaves that file as it was;
- the lock is the journal's real file's: a run reaching it through a link meets the
  lock of a run that named it directly, and refuses with that run's pid;
- a --journal whose first line is not a journal record is refused, not appended to.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from spurctl.act import journal as journal_module
from spurctl.act.journal import Journal, journal_lock
from spurctl.errors import SpurctlError
from spurctl.sources.journal_records import records, unresolved

PASSWD = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"


def passwd_like(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "passwd"
    path.parent.mkdir()
    path.write_text(PASSWD)
    path.chmod(0o644)
    return path


def one_line(err: pytest.ExceptionInfo[SpurctlError], *words: str) -> str:
    text = str(err.value)
    assert "\n" not in text
    for word in words:
        assert word in text, (word, text)
    return text


def test_a_lock_that_is_a_symlink_to_a_passwd_like_file_leaves_that_file_unchanged(
    tmp_path: Path,
) -> None:
    target = passwd_like(tmp_path)
    journal = tmp_path / "state" / "journal.jsonl"
    journal.parent.mkdir()
    lock = journal.with_name("journal.jsonl.lock")
    lock.symlink_to(target)

    with pytest.raises(SpurctlError) as err:
        Journal(journal)
    one_line(err, str(lock), "symbolic link", "--journal")
    with pytest.raises(SpurctlError), journal_lock(journal):
        pass
    assert target.read_text() == PASSWD
    assert not journal.exists()  # refused before the journal was touched


def test_a_lock_that_is_a_hard_link_or_holds_other_text_is_left_as_it_is(tmp_path: Path) -> None:
    target = passwd_like(tmp_path)
    journal = tmp_path / "journal.jsonl"
    lock = tmp_path / "journal.jsonl.lock"
    os.link(target, lock)
    with pytest.raises(SpurctlError) as err:
        Journal(journal)
    one_line(err, "not a lock spurctl wrote", "hard links")
    assert target.read_text() == PASSWD

    os.unlink(lock)
    lock.write_text("not a pid\n")
    with pytest.raises(SpurctlError) as err:
        Journal(journal)
    one_line(err, "not a lock spurctl wrote", "something other than a pid")
    assert lock.read_text() == "not a pid\n"


def test_a_stale_lock_spurctl_wrote_is_taken_over(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    (tmp_path / "journal.jsonl.lock").write_text("424242\n")  # a run that died
    with Journal(journal) as j:
        j.intent("gpu017", 1, "terminal-held")
    assert (tmp_path / "journal.jsonl.lock").read_text() == f"{os.getpid()}\n"


def _held_by_other(lock: Path, pid: int) -> int:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{pid}\n".encode())
    return fd


def test_a_run_reaching_the_journal_through_a_symlink_meets_the_first_runs_lock(
    tmp_path: Path,
) -> None:
    real = tmp_path / "a" / "journal.jsonl"
    real.parent.mkdir()
    real.touch(mode=0o600)
    link = tmp_path / "b" / "journal.jsonl"
    link.parent.mkdir()
    link.symlink_to(real)
    assert journal_module.lock_path(link) == journal_module.lock_path(real)

    fd = _held_by_other(real.with_name("journal.jsonl.lock"), 424242)
    try:
        with pytest.raises(SpurctlError) as err:
            Journal(link)
        one_line(err, "in use by another spurctl run", "pid 424242")
    finally:
        os.close(fd)
    assert not (tmp_path / "b" / "journal.jsonl.lock").exists()
    # One process: the same lock whichever name it is reached by (re-entrant, one run id).
    with journal_lock(real), Journal(link) as through_link, Journal(real) as direct:
        assert through_link.run == direct.run
        through_link.intent("gpu017", 1, "terminal-held")
    assert [(u.node, u.job_id) for u in unresolved(real)] == [("gpu017", 1)]


def test_a_journal_link_to_nothing_is_refused_and_nothing_is_created(tmp_path: Path) -> None:
    link = tmp_path / "journal.jsonl"
    target = tmp_path / "elsewhere" / "cron.d" / "job"
    link.symlink_to(target)
    with pytest.raises(SpurctlError) as err:
        Journal(link)
    one_line(err, "a link to", "does not exist")
    assert not target.parent.exists()


def test_a_journal_whose_first_line_is_not_a_record_is_refused_not_appended_to(
    tmp_path: Path,
) -> None:
    target = passwd_like(tmp_path)
    with pytest.raises(SpurctlError) as err:
        Journal(target)
    one_line(err, str(target), "not a spurctl journal", "--journal")
    with pytest.raises(SpurctlError, match="not a spurctl journal"):
        records(target)
    with pytest.raises(SpurctlError, match="not a spurctl journal"):
        unresolved(target)
    assert target.read_text() == PASSWD


@pytest.mark.parametrize(
    "start",
    [
        b"",  # created, never written
        b'{"schema": "spurctl.journal/v1", "run": "20261202T1000',  # a crash mid-record
        b'{"event": "intent", "node": "gpu017", "job_id": 1, "at": "x"}\n',  # before schemas
    ],
    ids=["empty", "torn-first-record", "pre-schema"],
)
def test_a_journal_spurctl_began_is_appended_to(tmp_path: Path, start: bytes) -> None:
    path = tmp_path / "journal.jsonl"
    path.write_bytes(start)
    with Journal(path) as j:
        j.intent("gpu018", 2, "terminal-held")
    assert path.read_bytes().startswith(start)
    assert ("gpu018", 2) in [(u.node, u.job_id) for u in unresolved(path, warn=lambda _: None)]


def test_a_device_is_not_a_journal(tmp_path: Path) -> None:
    link = tmp_path / "journal.jsonl"
    link.symlink_to("/dev/null")
    with pytest.raises(SpurctlError) as err:
        Journal(link)
    one_line(err, "not a regular file")


# -- the path's directories (issue 48.6): no file is created where a link points -------

NOBODY = 65534


def test_a_parent_directory_that_is_a_link_to_nothing_is_refused_and_nothing_is_created(
    tmp_path: Path,
) -> None:
    (tmp_path / "state").symlink_to(tmp_path / "elsewhere" / "cron.d")
    journal = tmp_path / "state" / "spurctl" / "journal.jsonl"
    for opening in (lambda: Journal(journal), lambda: journal_lock(journal).__enter__()):
        with pytest.raises(SpurctlError) as err:
            opening()
        one_line(err, str(tmp_path / "state"), "a link to", "does not exist", "--journal")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a directory to another user")
def test_a_parent_link_to_a_directory_another_user_owns_is_refused(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, NOBODY, NOBODY)
    (tmp_path / "state").symlink_to(theirs)
    journal = tmp_path / "state" / "journal.jsonl"
    with pytest.raises(SpurctlError) as err:
        Journal(journal)
    one_line(err, str(tmp_path / "state"), f"a directory of uid {NOBODY}", "--journal")
    assert list(theirs.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a link to another user")
def test_a_parent_link_another_user_owns_is_refused_even_to_a_directory_of_mine(
    tmp_path: Path,
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    link = tmp_path / "state"
    link.symlink_to(mine)
    os.lchown(link, NOBODY, NOBODY)
    with pytest.raises(SpurctlError) as err:
        Journal(link / "journal.jsonl")
    one_line(err, str(link), f"a link owned by uid {NOBODY}")
    assert list(mine.iterdir()) == []


def test_links_of_my_own_along_the_path_are_followed(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "state").symlink_to("real")  # relative, as `ln -s real state` makes it
    (tmp_path / "real" / "up").symlink_to("..")
    journal = tmp_path / "state" / "up" / "real" / "journal.jsonl"
    with Journal(journal) as j:
        j.intent("gpu017", 1, "terminal-held")
    assert (tmp_path / "real" / "journal.jsonl").is_file()


@pytest.mark.parametrize("where", ["/", "dir", "."])
def test_a_directory_is_no_journal(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "dir").mkdir()
    with pytest.raises(SpurctlError) as err:
        Journal(Path(where))
    one_line(err, "is a directory, not a regular file", "--journal FILE")
