"""`spurctl autopilot` under tracemalloc: what its process holds, compared between rounds.

Run by `autopilot_rounds.py --trace FILE` in place of `python -m spurctl`; the arguments
are spurctl's. At each round named in SPURCTL_BENCH_TRACE_ROUNDS (e.g. "5,100,1000"),
once the round is over and a full gc has run, it appends to the file named by
SPURCTL_BENCH_TRACE_FILE: the traced total, the allocation sites that grew most since
the first such round and since the previous one (file:line, KiB, blocks), and the
Python object counts by type that changed. Nothing in spurctl is changed for it: the
round method is wrapped from outside. Tracing slows a round some 2-3x; the figures of
a traced run are for finding what is kept, not for the memory target.
"""

from __future__ import annotations

import gc
import os
import sys
import tracemalloc
from collections import Counter
from pathlib import Path

FRAMES = 4
TOP = 25


def _types() -> Counter[str]:
    return Counter(type(o).__name__ for o in gc.get_objects())


def _holders(sites: list[str]) -> Counter[str]:
    """Who holds the live objects allocated at `sites` ("file.py:line"): the containers
    the collector tracks, by type, with a sample of what they hold."""
    out: Counter[str] = Counter()
    for holder in gc.get_objects():
        for obj in gc.get_referents(holder):
            tb = tracemalloc.get_object_traceback(obj)
            if tb is None:
                continue
            where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}"
            if where in sites:
                out[f"{where} {type(obj).__name__} {repr(obj)[:60]} in "
                    f"{type(holder).__name__} {repr(holder)[:100]}"] += 1  # fmt: skip
    return out


def main() -> None:
    out = Path(os.environ["SPURCTL_BENCH_TRACE_FILE"])
    wanted = {int(r) for r in os.environ["SPURCTL_BENCH_TRACE_ROUNDS"].split(",")}
    tracemalloc.start(FRAMES)
    from spurctl.usecases import autopilot

    plain = autopilot._Pilot.round
    marks: list[tuple[int, tracemalloc.Snapshot, Counter[str]]] = []
    noise = [tracemalloc.__file__, __file__]

    def traced(self: object, n: int, *args: object, **kwargs: object) -> object:
        report = plain(self, n, *args, **kwargs)  # type: ignore[arg-type]
        if n in wanted:
            held, _ = tracemalloc.get_traced_memory()
            freed = gc.collect()  # what was garbage in cycles no collection had reached yet
            filters = [tracemalloc.Filter(False, f) for f in noise]
            snap = tracemalloc.take_snapshot().filter_traces(filters)
            types = _types()
            traced_now, peak = tracemalloc.get_traced_memory()
            with out.open("a") as f:
                f.write(
                    f"== round {n}: traced {traced_now >> 10} KiB (peak {peak >> 10} KiB); "
                    f"before gc.collect() {held >> 10} KiB, {freed} objects in cycles freed; "
                    f"full collections so far {gc.get_stats()[2]['collections']}\n"
                )
                against = [("first", marks[0])] if marks else []
                if len(marks) > 1:
                    against.append(("previous", marks[-1]))
                for label, (r0, s0, t0) in against:
                    f.write(f"-- since round {r0} ({label}): top {TOP} by size growth\n")
                    for st in snap.compare_to(s0, "traceback")[:TOP]:
                        frames = " <- ".join(f"{fr.filename.rsplit('/', 2)[-1]}:{fr.lineno}"
                                             for fr in reversed(st.traceback))  # fmt: skip
                        f.write(f"  {st.size_diff / 1024:+9.1f} KiB {st.count_diff:+7d} blocks"
                                f"  {frames}\n")  # fmt: skip
                    grew = {k: types[k] - t0.get(k, 0) for k in types | t0}
                    moved = sorted(((d, k) for k, d in grew.items() if d), reverse=True)
                    f.write(f"-- object counts since round {r0}: "
                            + ", ".join(f"{k} {d:+d}" for d, k in moved[:15]) + "\n")  # fmt: skip
                sites = os.environ.get("SPURCTL_BENCH_TRACE_WHO", "")
                if sites and n == max(wanted):
                    for what, count in _holders(sites.split(",")).most_common(20):
                        f.write(f"-- held: {count} x {what}\n")
                f.flush()
            marks.append((n, snap, types))
            del marks[1:-1]  # keep the first and the latest only
        return report

    autopilot._Pilot.round = traced  # type: ignore[method-assign]
    sys.argv = ["spurctl", *sys.argv[1:]]
    from spurctl.cli import entry

    entry()


if __name__ == "__main__":
    main()
