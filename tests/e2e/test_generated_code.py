"""The committed generated code must be exactly what scripts/gen_proto.sh emits."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("slurm_pb2.py", "slurm_pb2.pyi", "slurm_pb2_grpc.py")


def test_generated_code_is_not_stale(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHON=sys.executable)
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "gen_proto.sh"), str(tmp_path)],
        check=True,
        env=env,
        timeout=120,
    )
    for name in GENERATED:
        fresh = (tmp_path / name).read_text()
        committed = (ROOT / "spurctl" / "proto" / name).read_text()
        assert fresh == committed, f"{name} is stale: run scripts/gen_proto.sh and commit"
