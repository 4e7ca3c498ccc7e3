"""One measured audit, in a fresh process: the floor, spurctl's library path, or the cap probe.

    python bench/_audit_child.py floor|library|probe CONTROLLER_URL [INVENTORY_FILE]

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
from typing import Any

_T0 = time.perf_counter()


def _stub(url: str) -> tuple[Any, Any]:
    import grpc

    from spurctl.proto import slurm_pb2_grpc as pb_grpc

    channel = grpc.insecure_channel(
        url.removeprefix("http://"),
        options=[("grpc.max_receive_message_length", -1)],
    )
    return channel, pb_grpc.SlurmControllerStub(channel)


def floor(url: str, inventory: Path) -> dict[str, float]:
    """The least any audit must do: every job and node downloaded and decoded, from a
    controller without a size cap, and every inventory line json-decoded."""
    from spurctl.proto import slurm_pb2 as pb

    channel, stub = _stub(url)
    imported = time.perf_counter()
    jobs = stub.GetJobs(pb.GetJobsRequest(), timeout=120)
    nodes = stub.GetNodes(pb.GetNodesRequest(), timeout=120)
    read = time.perf_counter()
    with inventory.open() as lines:
        docs = [json.loads(line) for line in lines if line.strip()]
    decoded = time.perf_counter()
    assert len(jobs.jobs) and len(nodes.nodes) and docs
    channel.close()
    return {
        "import_s": imported - _T0,
        "rpc_s": read - imported,
        "inventory_s": decoded - read,
        "work_s": decoded - imported,
        "jobs": float(len(jobs.jobs)),
    }


def probe(url: str) -> dict[str, object]:
    """One unfiltered GetJobs: answered (with its size) or refused (with the status)."""
    import grpc

    from spurctl.proto import slurm_pb2 as pb

    channel, stub = _stub(url)
    try:
        answer = stub.GetJobs(pb.GetJobsRequest(), timeout=120)
    except grpc.RpcError as exc:
        return {"refused": True, "code": exc.code().name, "details": exc.details()}
    finally:
        channel.close()
    return {"refused": False, "bytes": answer.ByteSize(), "jobs": len(answer.jobs)}


def library(url: str, inventory: Path) -> dict[str, float]:
    """What `spurctl audit --inventory FILE --format json` does, phase by phase."""
    import io

    from spurctl.audit_view import audit, gather
    from spurctl.render.audit import print_audit
    from spurctl.render.environment import Environment
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
    print_audit(report, "json", Environment(), file=out)
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
    mode, url = sys.argv[1], sys.argv[2]
    figures: dict[str, object]
    if mode == "probe":
        figures = probe(url)
    elif mode == "floor":
        figures = dict(floor(url, Path(sys.argv[3])))
    else:
        try:
            figures = dict(library(url, Path(sys.argv[3])))
        except Exception as exc:  # the bench reports it in one line and goes on
            print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
            sys.exit(3)
    figures["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
