"""A watch's rounds without the screen, one way or the other (for bench/watch_isolation.py).

    python bench/_watch_driver.py forked|in-process INTERVAL ROUNDS CONTROLLER INVENTORY

`forked`: the product's way, each round's audit in a child (usecases.audit.watch_rounds,
isolate=True). `in-process`: each round in this process (isolate=False), then
gc.collect() and glibc's malloc_trim(0) before the next, the best an in-process
watch could do to hand memory back. Prints "round N" as each round ends.
"""

from __future__ import annotations

import ctypes
import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from spurctl.scope import Scope
from spurctl.sources.inventories import Sources
from spurctl.sources.settings import Connection
from spurctl.usecases.audit import round_imports, watch_rounds


def main() -> int:
    mode, interval, rounds, controller, inventory = sys.argv[1:6]
    src = Sources(Scope(), [inventory], False, "", 1)
    conn = Connection(controllers=(controller,), timeout=60.0)
    round_imports(src)
    trim = ctypes.CDLL("libc.so.6").malloc_trim

    def between(_: object) -> None:
        if mode == "in-process":
            gc.collect()
            trim(0)

    each = watch_rounds(
        src, conn, interval=float(interval), rounds=int(rounds),
        before_round=between, isolate=mode == "forked",
    )  # fmt: skip
    for r in each:
        if r.error is not None:
            print(f"error {r.error}", flush=True)
            return 1
        print(f"round {r.number}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
