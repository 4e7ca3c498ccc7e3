"""`repair --plan FILE` holds a saved plan to reclaim's rules (decide.saved_plan.check_view):
one dated ahead of this host's clock is refused whatever --max-inventory-age allows, as
its age proves nothing (issue 48.6: a plan dated 2099 was carried out)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.cli import one_line_error, run_cli
from tests.e2e.test_repair_e2e import Phantom, p, repair, untouched

__all__ = ["p"]  # the fixture


def apply(p: Phantom, plan: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_cli(
        "repair", "--plan", str(plan), "--controller", p.sim.controller_address,
        "--inventory", str(p.live), "--conf", str(p.conf), "--journal", str(p.journal),
        "--tick", "0", "--wait", "5", "--yes", *extra, home=p.home,
    )  # fmt: skip


def dated(plan: Path, taken_at: datetime) -> Path:
    doc = json.loads(plan.read_text())
    doc["taken_at"] = taken_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    plan.write_text(json.dumps(doc))
    return plan


def test_a_repair_plan_dated_2099_is_refused_and_nothing_is_sent(
    p: Phantom, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    assert repair(p, "--dry-run", "-o", str(plan)).returncode == 0
    dated(plan, datetime(2099, 1, 1, tzinfo=UTC))
    before = p.sim.node("gpu009")
    run = apply(p, plan, "--max-inventory-age", "3650d")
    line = one_line_error(run, "refusing the saved plan, nothing sent", "2099-01-01T00:00:00Z")
    assert "ahead of this host's clock" in line
    assert "spurctl repair --node gpu009 --dry-run -o FILE" in line
    untouched(p, before)
    # A plan saved a moment ago by a host whose clock is a little ahead still applies.
    dated(plan, datetime.now(UTC) + timedelta(seconds=20))
    assert apply(p, plan).returncode == 0
    assert p.sim.node("gpu009").alloc.empty
