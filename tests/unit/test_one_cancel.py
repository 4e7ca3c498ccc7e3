"""decide/one_cancel: a holding the journal records a cancel of is never cancelled again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spurctl.decide.one_cancel import CANCEL_SETTLE, after_cancel

SENT = datetime(2026, 12, 5, 3, 0, tzinfo=UTC)
BEFORE = SENT - timedelta(hours=1)


def test_no_journaled_cancel_leaves_the_holding_to_the_plan() -> None:
    assert after_cancel("gpu1", 7, sent=None, started=BEFORE, collected=SENT) is None


def test_a_run_started_after_the_cancel_is_a_newer_one_never_cancelled() -> None:
    later = SENT + timedelta(seconds=5)
    assert after_cancel("gpu1", 7, sent=SENT, started=later, collected=later) is None


def test_shown_by_an_inventory_before_the_settle_it_waits() -> None:
    for collected in (None, SENT - timedelta(seconds=3), SENT + CANCEL_SETTLE / 2):
        got = after_cancel("gpu1", 7, sent=SENT, started=BEFORE, collected=collected)
        assert got is not None and not got.lingers
        assert "not sent again (one cancel per holding)" in got.why and "gpu1 job 7" in got.why


def test_still_shown_after_the_settle_it_lingers_and_takes_the_drain_path() -> None:
    for started in (BEFORE, None):
        got = after_cancel("gpu1", 7, sent=SENT, started=started, collected=SENT + CANCEL_SETTLE)
        assert got is not None and got.lingers
        assert "no second cancel frees it" in got.why and "drain path" in got.why


def test_the_settle_is_reclaims_default() -> None:
    from spurctl.defaults import DEFAULT_SETTLE_S

    assert CANCEL_SETTLE.total_seconds() == DEFAULT_SETTLE_S
