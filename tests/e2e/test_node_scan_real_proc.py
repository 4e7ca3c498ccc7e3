"""node_scan against the real /proc: a live process carrying SPUR_JOB_ID, found and then gone."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from spurctl.model import Holding
from spurctl.node.node_scan import scan
from tests.unit.test_node_scan import holdings


def test_a_real_process_carrying_spur_job_id_is_found_under_the_real_proc(tmp_path: Path) -> None:
    job_id = 3_999_999_001
    before = datetime.now(UTC)
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(30)"],
        env={**os.environ, "SPUR_JOB_ID": str(job_id), "ROCR_VISIBLE_DEVICES": "5,2"},
    )
    try:
        held: Holding | None = None
        # The child's environment is readable once exec has happened.
        for _ in range(50):
            held = holdings(scan(tmp_path / "nonexistent", Path("/proc"), "here")).get(job_id)
            if held is not None:
                break
            time.sleep(0.05)
        assert held is not None, "the child carrying SPUR_JOB_ID was not found"
        assert child.pid in held.pids
        assert held.gpus == (2, 5)
        assert held.cpus is None and held.memory_mb is None
        assert held.started_at is not None
        # btime has one-second granularity and a clock tick is coarse: allow slack.
        slack = timedelta(seconds=2)
        assert before - slack <= held.started_at <= datetime.now(UTC) + slack
    finally:
        child.kill()
        child.wait(timeout=10)

    after = holdings(scan(tmp_path / "nonexistent", Path("/proc"), "here"))
    assert job_id not in after, "a reaped process must not be reported as holding its job"
