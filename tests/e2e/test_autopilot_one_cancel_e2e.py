"""One agent cancel per holding, from a live autopilot as from a manual reclaim.

spurd frees a cancelled run only at its monitor's next tick (2 s), or after the SIGKILL
grace (5 s more) for one that ignores SIGTERM (docs/spur-facts.md, "The agent's
CancelJob"). Rounds in that time still see the holding, its processes live: the
autopilot must not cancel it again. A holding an inventory taken well after the
cancel still shows is one no cancel frees: it takes the drain path, never a second
cancel.
"""

from __future__ import annotations

import json
import signal
from datetime import timedelta
from pathlib import Path
from typing import Any

from spurctl.model import parse_time
from spurctl_sim.fleet_scenario import node_name, strand
from spurctl_sim.state import CancelTiming
from tests.cli import cli_process, lines_of, run_cli, wait_for
from tests.e2e.test_autopilot_e2e import autopilot_records, rounds_of, running_fleet


def _agent_cancels(sim: Any, node: str) -> int:
    return len([c for c in sim.cancels if c.node == node])


def test_rounds_while_spurd_frees_a_cancelled_run_do_not_cancel_it_again(
    tmp_path: Path,
) -> None:
    node = node_name(3)
    with running_fleet(tmp_path, 20, agents=[node]) as f:
        # spurd's timing at half: the run ignores SIGTERM, so it is freed 3.5 s after the
        # cancel, while rounds every 0.3 s see it held, its processes live.
        f.sim.state.cancel_timing = CancelTiming().scaled(0.5)
        f.sim.state.ignores_sigterm.add((node, 3))
        strand(f.sim, 3)
        with cli_process(*f.args("--interval", "0.3", "--grace", "0"), home=f.home) as pilot:
            assert pilot.stdout is not None
            lines = lines_of(pilot.stdout)
            rounds: list[dict[str, Any]] = []

            def freed_and_seen() -> bool:
                while not lines.empty():
                    rounds.append(json.loads(lines.get_nowait()))
                return not f.sim.holdings(node) and bool(rounds) and not rounds[-1]["findings"]

            wait_for(freed_and_seen, timeout=60)
            pilot.send_signal(signal.SIGTERM)
            assert pilot.wait(timeout=30) == 0
        assert _agent_cancels(f.sim, node) == 1, [(c.node, c.job_id) for c in f.sim.cancels]
        sent = [c for r in rounds for c in r["calls"]]
        assert [(c["action"], c["node"]) for c in sent] == [("reclaim", node)]
        # The rounds between the cancel and spurd's release said why nothing went out.
        after = [r for r in rounds if r["findings"] and not r["calls"]][1:]
        assert after and all(r["waiting"].get("cancel-sent") == 1 for r in after), after
        assert f.sim.node(node).state_reason == ""  # freed by its cancel: not drained


def test_a_holding_still_shown_well_after_its_cancel_is_drained_not_cancelled_again(
    tmp_path: Path,
) -> None:
    node = node_name(5)
    with running_fleet(tmp_path, 20, agents=[node]) as f:
        strand(f.sim, 5)
        [held] = f.sim.holdings(node)
        first = run_cli(*f.args("--grace", "0", "--rounds", "1"), home=f.home)
        assert first.returncode == 0, first.stderr
        assert [c["node"] for c in rounds_of(first.stdout)[0]["calls"]] == [node]
        # The run lives on after its cancel (processes stuck in the kernel, say) ...
        f.sim.hold(node, held)
        # ... and the cancel went out a minute before the inventory that shows it.
        lines = f.journal.read_text().splitlines()
        moved = []
        for line in lines:
            rec = json.loads(line)
            if rec.get("node") == node:
                at = parse_time(rec["at"])
                assert at is not None
                rec["at"] = (at - timedelta(minutes=1)).isoformat().replace("+00:00", "Z")
            moved.append(json.dumps(rec))
        f.journal.write_text("\n".join(moved) + "\n")
        wait_for(lambda: f'"{node}"' in f.live.read_text(), timeout=30)
        again = run_cli(*f.args("--grace", "0", "--rounds", "1"), home=f.home)
        assert again.returncode == 0, again.stderr
        [r] = rounds_of(again.stdout)
        assert [(c["action"], c["node"]) for c in r["calls"]] == [("drain", node)], json.dumps(r)
        assert _agent_cancels(f.sim, node) == 1
        assert "cancel unconfirmed" in f.sim.node(node).state_reason
        intents = [x for x in autopilot_records(f.journal) if x["event"] == "intent"]
        assert [x.get("action", "reclaim") for x in intents] == ["reclaim", "drain"]  # one cancel
