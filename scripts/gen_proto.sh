#!/usr/bin/env bash
# Regenerate spurctl/proto/slurm_pb2{,_grpc}.py and slurm_pb2.pyi from slurm.proto.
# The output is committed; tests/e2e/test_generated_code.py fails when it is stale.
# Usage: scripts/gen_proto.sh [OUTDIR]   (default: spurctl/proto)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$here/spurctl/proto}
py=${PYTHON:-python3}
"$py" -m grpc_tools.protoc -I "$here/spurctl/proto" \
  --python_out="$out" --pyi_out="$out" --grpc_python_out="$out" \
  "$here/spurctl/proto/slurm.proto"
# grpc_tools writes a top-level import; make it relative so the package is importable.
sed -i 's/^import slurm_pb2 as slurm__pb2$/from . import slurm_pb2 as slurm__pb2/' "$out/slurm_pb2_grpc.py"
