"""Issue 53.3: what reclaim cannot free gets a next step, and every dry run ends with the
command that applies it; each printed command works when pasted.

The post-wipe cluster (spurctl_sim.post_wipe): gpu001-007 hold ids from before the wipe
(above the watermark, or reissued since). The incident: gpu014 holds job 5187, above the
watermark with live processes, which spurctl can only investigate; gpu009 carries a
phantom charge (the repair fixture).
"""

from __future__ import annotations

import shlex
from pathlib import Path

from spurctl_sim import SimCluster, incident
from spurctl_sim import post_wipe as post_wipe_scenario
from tests.cli import run_cli, wait_for
from tests.e2e.test_repair_e2e import phantom, repair


def after(out: str, why: str) -> list[str]:
    """The command printed on the line after the one starting with `why`, as argv."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.lstrip(" -").startswith(why))
    return shlex.split(lines[at + 1])


def pasted(argv: list[str], *extra: str, home: Path | None = None) -> object:
    assert argv[0] == "spurctl"
    return run_cli(*argv[1:], *extra, home=home)


def test_a_wiped_clusters_audit_points_at_the_post_wipe_checklist(tmp_path: Path) -> None:
    with SimCluster(post_wipe_scenario()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        run = run_cli(
            "audit", "--controller", sim.controller_address, "--inventory", str(inventory)
        )
        assert run.returncode == 1, run.stderr
        argv = after(run.stdout, "Ids held on gpu[001-007] are from before a controller wipe")
        assert argv[:5] == ["spurctl", "checklist", "post-wipe", "--nodes", "gpu[001-007]"]
        checklist = run_cli(*argv[1:])
        assert checklist.returncode in (0, 1), checklist.stderr
        assert "Post-wipe agent recycle checklist" in checklist.stdout


def test_what_only_a_drain_holds_back_gets_a_drain_command_in_audit_and_explain(
    tmp_path: Path,
) -> None:
    with SimCluster(incident()) as sim:
        inventory = sim.write_inventories(tmp_path / "inventory.jsonl")
        view = ["--controller", sim.controller_address, "--inventory", str(inventory)]
        # Beside reclaim's command the screen stays one screen: explain carries the drain.
        audit = run_cli("audit", *view, "-w", "gpu[009-011,014]")
        drain = after(audit.stdout, "Drain gpu014 so the scheduler stops dispatching")
        assert drain[:4] == ["spurctl", "drain", "--node", "gpu014"]
        explained = run_cli("explain", "gpu014", *view)
        assert explained.returncode == 0, explained.stderr
        assert after(explained.stdout, "Drain gpu014 so the scheduler") == drain

        journal = ["--journal", str(tmp_path / "journal.jsonl")]
        dry = pasted(drain, "--dry-run", *journal, home=tmp_path / "home")
        assert dry.returncode == 0, dry.stderr  # type: ignore[attr-defined]
        apply = after(dry.stdout, "Send this plan with")  # type: ignore[attr-defined]
        assert apply[:4] == ["spurctl", "drain", "--node", "gpu014"]
        assert "--dry-run" not in apply and apply[-2:] == journal
        sent = pasted(apply, "--yes", home=tmp_path / "home")
        assert sent.returncode == 0, sent.stderr  # type: ignore[attr-defined]
        assert sim.node("gpu014").state_reason.startswith("spurctl: above-watermark-unknown")


def test_a_repair_dry_run_ends_with_the_command_that_carries_it_out(tmp_path: Path) -> None:
    with phantom(tmp_path) as p:
        run = repair(p, "--dry-run")
        assert run.returncode == 0, run.stdout + run.stderr
        apply = after(run.stdout, "Carry out this plan with")
        assert apply[:4] == ["spurctl", "repair", "--node", "gpu009"]
        assert "--dry-run" not in apply and "--conf" in apply and "--wait" in apply
        saved = repair(p, "--dry-run", "-o", str(tmp_path / "plan.json"))
        carry = after(saved.stdout, "Carry out the saved plan with")
        assert carry[:4] == ["spurctl", "repair", "--plan", str(tmp_path / "plan.json")]
        done = run_cli(*carry[1:], "--yes", home=p.home)
        assert done.returncode == 0, done.stdout + done.stderr
        assert [name for name, *_ in p.sim.state.deregistrations] == ["gpu009"]


def test_a_resume_dry_run_ends_with_the_command_that_lifts_it(tmp_path: Path) -> None:
    with phantom(tmp_path) as p:
        view = ["--controller", p.sim.controller_address, "--inventory", str(p.live)]
        journal = ["--journal", str(p.journal)]
        drained = run_cli("drain", "--node", "gpu014", *view, *journal, "--yes", home=p.home)
        assert drained.returncode == 0, drained.stdout + drained.stderr
        p.sim.release("gpu014", 5187)
        wait_for(lambda: '"job_id": 5187' not in p.live.read_text())
        dry = run_cli("resume", "--node", "gpu014", *view, *journal, "--dry-run", home=p.home)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        apply = after(dry.stdout, "Send this plan with")
        assert apply[:4] == ["spurctl", "resume", "--node", "gpu014"]
        lifted = run_cli(*apply[1:], "--yes", home=p.home)
        assert lifted.returncode == 0, lifted.stdout + lifted.stderr
        assert not p.sim.node("gpu014").state_reason
