"""Benchmark: one audit of the same large cluster behind each Spur release's controller.

    python bench/audit_releases.py                    # 20,000 nodes, 200,000 jobs
    python bench/audit_releases.py --nodes 5000 --releases v0.8.0,0.9-0.11
    python bench/audit_releases.py --shape striped --repeat 1   # issue 49's cluster

Issue 40 item 1: release v0.8.0 has no GetJobsRequest.nodes (it skips the field and
answers every job of the state), so an audit that split its running jobs by node
sent it 2,149 GetJobs requests in 240 s and never finished; a 0.9 controller takes
a few seconds. spurctl now reads a controller that says 0.8.0 by job-id range.

For each release (`--releases`, names of spurctl_sim.releases) the same
`scenarios.large(N nodes, 10N jobs, 5N holdings)`, with real-sized JobInfo records
and inventories for half the nodes, is served by bench/preencoded_controller.py
`--release R` in its own process, on its port that refuses answers over spurctld's
32 MiB as tonic does. Against it, `python -m spurctl audit --inventory FILE
--format json` runs once unmeasured (filling the controller's answer cache) and
then `--repeat` times, each with a deadline (`--deadline`, killed past it). Per
release: the requests the controller served one audit (GetJobs and all, from its
`spurctl.bench.Counters/Take`), the GetJobs answer bytes and an estimate of what
spurctld spent on them (`TakeWork`: job-map entries visited, id comparisons), the
median wall and CPU seconds and peak RSS, and whether the view was complete.
Then one verdict line: every release's audit complete, with the same findings
(node, job, kind and action: a REQUEUED job is PENDING at v0.8.0, which has no such
state, and both are not-started), and a comparable number of GetJobs requests (at
most COMPARABLE times the fewest, plus SLACK).

`--shape striped` serves issue 49's cluster instead (spurctl_sim.striped_scenario:
ids 1..10N, odd ones COMPLETED, even ones RUNNING on one node each, every node
inventoried, a stale terminal holding on one node in twenty).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, Run, compile_bytecode, env, serve, verdict

DEFAULT_RELEASES = "v0.8.0,0.9-0.11"
COMPARABLE = 2.0
SLACK = 20  # issue 49: at most twice the fewest GetJobs, plus 20


def audit(ready: dict[str, Any], deadline: float) -> tuple[Run, bool]:
    """The CLI audit against the capped port: its run, and whether the deadline killed it."""
    cmd = [PYTHON, "-m", "spurctl", "audit", "--controller", ready["capped"],
           "--inventory", ready["inventory"], "--format", "json"]  # fmt: skip
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env())
        timer = threading.Timer(deadline, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        rc = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        run = Run(
            wall,
            usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss * 1024,
            rc,
            out.read().decode(),
            err.read().decode(errors="replace"),
        )
    return run, wall >= deadline and rc < 0


def served(address: str, what: str = "Take") -> dict[str, int]:
    """The requests the controller served since the last call (preencoded_controller), or
    with `what` "TakeWork" the GetJobs bytes it sent and what spurctld would have spent."""
    with grpc.insecure_channel(address.removeprefix("http://")) as channel:
        take = channel.unary_unary(f"/spurctl.bench.Counters/{what}")
        answer: bytes = take(b"", timeout=30)
    return dict(json.loads(answer))


def measure(release: str, nodes: int, repeat: int, deadline: float, shape: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="spurctl-bench-") as tmp:
        args = ["--nodes", str(nodes), "--jobs", str(10 * nodes), "--held", str(5 * nodes),
                "--release", release, "--shape", shape]  # fmt: skip
        if shape == "striped":
            args += ["--inventoried", "1"]  # issue 49: every node inventoried
        with serve(Path(tmp), *args, script="preencoded_controller.py") as ready:
            served(ready["capped"])  # what starting it asked
            served(ready["capped"], "TakeWork")
            warm, _ = audit(ready, deadline)
            warm_requests = served(ready["capped"])
            served(ready["capped"], "TakeWork")
            runs, counts, works, killed = [], [], [], False
            for _ in range(repeat):
                run, cut = audit(ready, deadline)
                counts.append(served(ready["capped"]))
                works.append(served(ready["capped"], "TakeWork"))
                runs.append(run)
                killed |= cut
    ranked = sorted(range(len(runs)), key=lambda i: runs[i].wall)
    middle = ranked[len(ranked) // 2]
    return {
        "release": release,
        "ready": ready,
        "warm": warm,
        "warm_requests": warm_requests,
        "run": runs[middle],
        "requests": counts[middle],
        "work": works[middle],
        "killed": killed,
    }


def findings(run: Run) -> tuple[bool, list[tuple[Any, ...]]]:
    doc = json.loads(run.stdout)
    rows = sorted((f["node"], f["job_id"] or 0, f["kind"], f["action"]) for f in doc["findings"])
    return bool(doc["view"]["complete"]), rows


def report(m: dict[str, Any]) -> dict[str, Any] | None:
    run, requests, ready = m["run"], m["requests"], m["ready"]
    name = m["release"]
    getjobs = requests.get("get_jobs", 0)
    if m["killed"] or run.rc not in (0, 1):
        why = "killed at the deadline" if m["killed"] else run.error()
        print(
            f"audit_release: release={name} version={ready['version']} nodes={ready['nodes']} "
            f"jobs={ready['jobs']} failed ({why}) getjobs={getjobs} wall={run.wall:.1f}s"
        )
        return None
    complete, rows = findings(run)
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()[:12]
    work = m["work"]
    print(
        f"audit_release: release={name} version={ready['version']} nodes={ready['nodes']} "
        f"jobs={ready['jobs']} getjobs={getjobs} requests={sum(requests.values())} "
        f"getjobs_mb={work.get('getjobs_bytes', 0) / 1e6:.1f} "
        f"map_entries={work.get('map_entries', 0):.3g} "
        f"id_compares={work.get('id_compares', 0):.3g} "
        f"wall={run.wall:.2f}s cpu={run.cpu:.2f}s rss={run.peak_rss / 2**20:.0f}MiB "
        f"complete={str(complete).lower()} findings={len(rows)} digest={digest} "
        f"by_method={json.dumps(requests, sort_keys=True)}"
    )
    return {"complete": complete, "rows": rows, "getjobs": getjobs}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3, help="runs per release; the median counts")
    p.add_argument("--releases", default=DEFAULT_RELEASES, help="release names, comma-separated")
    p.add_argument("--deadline", type=float, default=240.0, help="seconds before a run is killed")
    p.add_argument(
        "--shape", choices=("large", "striped"), default="large",
        help="striped: issue 49's cluster, every node inventoried",
    )  # fmt: skip
    args = p.parse_args()
    compile_bytecode()
    results = []
    for release in args.releases.split(","):
        m = measure(release, args.nodes, args.repeat, args.deadline, args.shape)
        results.append(report(m))
        sys.stdout.flush()
    done = [r for r in results if r is not None]
    ok = len(done) == len(results) and all(r["complete"] for r in done)
    same = ok and all(r["rows"] == done[0]["rows"] for r in done)
    fewest = min((r["getjobs"] for r in done), default=0)
    comparable = ok and all(r["getjobs"] <= COMPARABLE * max(fewest, 1) + SLACK for r in done)
    print(
        f"audit_releases: nodes={args.nodes} shape={args.shape} releases={args.releases} "
        f"complete={str(ok).lower()} same_findings={str(same).lower()} "
        f"getjobs={[r['getjobs'] for r in done]} "
        f"target comparable<={COMPARABLE:g}x+{SLACK} {verdict(ok and same and comparable)}"
    )
    return 0 if ok and same and comparable else 1


if __name__ == "__main__":
    sys.exit(main())
