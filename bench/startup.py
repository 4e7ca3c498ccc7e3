"""Benchmark: how long `spurctl --help` and `spurctl --version` take, from exec to exit.

    python bench/startup.py [--runs 11]

Runs the installed console script beside this interpreter (`.venv/bin/spurctl`)
with this checkout first on PYTHONPATH, so it measures the code here, and
`python -m spurctl` for comparison. Median of --runs after one warm-up run (the
first run after a change also compiles bytecode). Targets: --help
<= 0.45 s, --version <= 0.30 s.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import PYTHON, compile_bytecode, median, run, verdict

TARGETS = {"help": 0.45, "version": 0.30}


def timed(cmd: list[str], runs: int) -> float:
    run(cmd, stdout_to_null=True)  # warm-up: bytecode compiled, files in the page cache
    return median([run(cmd, stdout_to_null=True).wall for _ in range(runs)])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=11)
    args = p.parse_args()
    compile_bytecode()  # measured as installed (_harness.compile_bytecode)
    script = Path(PYTHON).with_name("spurctl")
    if not script.exists():
        print(f"no console script at {script}; install with pip install -e .", file=sys.stderr)
        return 2
    ok = True
    for what, limit in TARGETS.items():
        wall = timed([str(script), f"--{what}"], args.runs)
        via_m = timed([PYTHON, "-m", "spurctl", f"--{what}"], args.runs)
        passed = wall <= limit
        ok &= passed
        print(
            f"startup_{what}: median={wall:.3f}s python_m={via_m:.3f}s runs={args.runs} "
            f"target<={limit:.2f}s {verdict(passed)}"
        )
    cmd_help = timed([str(script), "audit", "--help"], args.runs)
    print(f"startup_audit_help: median={cmd_help:.3f}s runs={args.runs} (no target)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
