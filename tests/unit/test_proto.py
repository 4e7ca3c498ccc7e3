"""The committed generated code must be exactly what scripts/gen_proto.sh emits."""

import os
import subprocess
import sys
from pathlib import Path

from spurctl.proto import slurm_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("slurm_pb2.py", "slurm_pb2.pyi", "slurm_pb2_grpc.py")


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen_proto.sh"), str(tmp_path)], check=True, env=env
    )
    for name in GENERATED:
        fresh = (tmp_path / name).read_text()
        committed = (ROOT / "spurctl" / "proto" / name).read_text()
        assert fresh == committed, f"{name} is stale: run scripts/gen_proto.sh and commit"


def test_field_numbers_match_spur_wire_contract() -> None:
    # A few numbers whose drift would silently misread real controllers.
    job = pb.JobInfo.DESCRIPTOR.fields_by_name
    assert job["state"].number == 7
    assert job["submit_time"].number == 10
    assert job["nodelist"].number == 23
    assert job["resources"].number == 40
    assert job["array_task_id"].number == 51
    node = pb.NodeInfo.DESCRIPTOR.fields_by_name
    assert node["alloc_resources"].number == 11
    assert node["slurmd_start_time"].number == 32
    assert node["labels"].number == 51
    assert pb.JobState.Value("JOB_REQUEUED") == 12
    assert pb.NodeState.Value("NODE_SUSPENDED") == 8
    services = pb.DESCRIPTOR.services_by_name
    assert pb.DESCRIPTOR.package == "slurm"
    assert "CancelJob" in services["SlurmAgent"].methods_by_name
    assert "GetJobMetrics" in services["SlurmController"].methods_by_name
