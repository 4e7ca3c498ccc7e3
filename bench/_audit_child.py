"""One measured audit, in a fresh process: the floor, or spurctl's library path.

    python bench/_audit_child.py floor|library CONTROLLER_URL INVENTORY_FILE

Prints one JSON object: seconds spent importing and working, per phase, and
this process's peak RSS. bench/audit_scale.py runs it; it is not a benchmark
on its own.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path

_T0 = time.perf_counter()


def floor(url: str, inventory: Path) -> dict[str, float]:
    """The least any audit must do: the three reads, decoded, and the inventory parsed."""
    import grpc
    from google.protobuf import empty_pb2

    from spurctl.proto import slurm_pb2 as pb
    from spurctl.proto import slurm_pb2_grpc as pb_grpc

    imported = time.perf_counter()
    channel = grpc.insecure_channel(
        url.removeprefix("http://"),
        options=[("grpc.max_receive_message_length", -1)],
    )
    stub = pb_grpc.SlurmControllerStub(channel)
    jobs = stub.GetJobs(pb.GetJobsRequest(), timeout=60)
    nodes = stub.GetNodes(pb.GetNodesRequest(), timeout=60)
    total = stub.GetJobMetrics(empty_pb2.Empty(), timeout=60).total
    read = time.perf_counter()
    docs = [json.loads(line) for line in inventory.read_text().splitlines() if line.strip()]
    decoded = time.perf_counter()
    assert len(jobs.jobs) == total and len(nodes.nodes) and docs
    channel.close()
    return {
        "import_s": imported - _T0,
        "rpc_s": read - imported,
        "inventory_s": decoded - read,
        "work_s": decoded - imported,
    }


def library(url: str, inventory: Path) -> dict[str, float]:
    """What `spurctl audit --inventory FILE --format json` does, phase by phase."""
    import io

    from spurctl.audit import audit, gather
    from spurctl.render.audit import print_audit
    from spurctl.sources.controller import ControllerClient
    from spurctl.sources.inventories import read_view_and_inventories
    from spurctl.sources.settings import connect_settings

    imported = time.perf_counter()
    conn = connect_settings(controller=url, timeout=60.0, home=Path("/nonexistent"))
    with ControllerClient(conn) as client:
        # As `spurctl audit --inventory` does: both sources at once.
        view, holdings = read_view_and_inventories(client, [str(inventory)])
        loaded = time.perf_counter()
        inputs = gather(view, holdings, client=client, not_found_doubt=conn.not_found_doubt())
        report = audit(inputs)
        classified = time.perf_counter()
    out = io.StringIO()
    print_audit(report, "json", file=out)
    rendered = time.perf_counter()
    assert report.findings and view.complete
    return {
        "import_s": imported - _T0,
        "read_s": loaded - imported,
        "classify_s": classified - loaded,
        "render_s": rendered - classified,
        "work_s": rendered - imported,
        "findings": float(len(report.findings)),
    }


def main() -> None:
    mode, url, inventory = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    figures = (floor if mode == "floor" else library)(url, inventory)
    figures["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
