"""Which Spur the cluster runs: the note for a controller that may predate its own reclaim."""

from __future__ import annotations

import pytest

from spurctl.releases import Filters, filters_for, spur_version_note
from spurctl.render.common import spur_version


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("0.8.0", "0.8.0"),
        ("v0.8.0", "0.8.0"),
        ("0.8.0-dev+4cc3da8", "0.8.0"),
        ("0.8", "0.8.0"),
        ("0.7.3", "older"),
        ("0.5.1", "older"),
        ("0.8.1", None),
        ("0.9.1", None),
        ("1.0.0", None),
        ("", None),
        ("test", None),
    ],
)
def test_the_note_says_which_findings_this_controller_reclaims_by_itself(
    version: str, expected: str | None
) -> None:
    note = spur_version_note(version)
    if expected is None:
        assert note is None  # a later Spur has #623: its heartbeat clears all three
        return
    assert note is not None
    assert "no Spur clears agent-orphan" in note
    assert "without a credential" in note and "#641" in note
    if expected == "0.8.0":
        # v0.8.0 has #580 and #583: held terminal jobs are cleared on the heartbeat while
        # still in memory; #623 (the other two kinds) came on main on 2026-08-16 and in
        # 0.9.0 (2026-08-24), so only a main build of those eight days says 0.8.0 with it.
        assert "release v0.8.0 clears terminal-held by itself" in note
        assert "only while the job is still in its memory: #583" in note
        assert "terminal_job_retention_secs (3600 s by default)" in note
        assert "an older terminal holding is never reclaimed by v0.8.0 itself" in note
        assert "active-elsewhere and below-watermark-unknown need spurctl" in note
        assert "unless this is a main build from 2026-08-16 to 08-24, which has #623" in note
        assert "0.9.0, 2026-08-24, ships it with #624, #584, #613 and #594" in note
        assert "every later release has it" in note
        assert "the version string cannot tell them apart" in note
        assert "nothing clears" not in note
        assert "still says" not in note  # main has said 0.9.0 and later since 2026-08-24
    else:
        assert (
            "nothing clears terminal-held, active-elsewhere and below-watermark-unknown by "
            "itself, so all of them need spurctl"
        ) in note
        assert "predates Spur's own heartbeat reclaim (#580" in note
        assert "#623 in 0.9.0" in note
        assert "cannot tell them apart" not in note


def test_the_kinds_the_notes_name_are_the_reclaim_kinds() -> None:
    from spurctl.decide.actions import ACTIONS
    from spurctl.model import Action
    from spurctl.releases import RECLAIMED_BY_580, RECLAIMED_BY_623

    assert set(RECLAIMED_BY_623) == {k for k, a in ACTIONS.items() if a is Action.RECLAIM}
    assert set(RECLAIMED_BY_580) < set(RECLAIMED_BY_623)


def test_the_header_always_says_which_spur() -> None:
    assert spur_version("0.8.0") == "Spur 0.8.0"
    assert spur_version("") == "Spur version not reported"


@pytest.mark.parametrize(
    ("version", "nodes"),
    [
        ("0.8.0", False),  # release v0.8.0 lacks #628/#629; main builds said 0.8.0 too
        ("v0.8.0", False),
        ("0.8.0-dev+4cc3da8", False),
        ("0.7.0", False),
        ("", False),
        ("a custom build", False),
        ("0.9.0", True),
        ("0.11.2", True),
        ("1.0.0", True),
    ],
)
def test_getjobs_filters_are_trusted_only_from_0_9_0(version: str, nodes: bool) -> None:
    # GetJobsRequest.nodes (#628) and JobState REQUEUED (#629) came with 0.9.0: a
    # controller without them skips the field and drops the state, filtering nothing.
    assert filters_for(version) == Filters(nodes=nodes, requeued=nodes)
