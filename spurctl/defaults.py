"""Defaults the command line shows in its help, kept apart from the modules that use them.

`spurctl --help` and every command import the CLI, which needs these values for
its options; importing them from `spurctl.usecases.reclaim` cost every command (an audit
too) the import of the reclaim machinery.
"""

# Nodes re-checked and cancelled at once. Each entry is two round trips (GetJob to
# the controller, CancelJob to the agent) and two journal syncs: at ~50 ms each, 32
# at once took ~4 s for 1,000 nodes and 64 takes ~2 s (bench/reclaim_fanout.py).
# 64 is also collect's and ClusterShell's fan-out. Safety does not depend on it:
# every send is re-checked and journaled on its own.
DEFAULT_CONCURRENCY = 64
# `--max-inventory-age`: older evidence is re-collected before anything acts on it.
DEFAULT_MAX_INVENTORY_AGE_S = 600.0
# `reclaim --settle`: the longest a re-collect waits for the cancelled runs to go. spurd
# frees a run that ignores SIGTERM about 7 s after the cancel (5 s grace to SIGKILL, then
# its 2 s monitor tick: docs/spur-facts.md, "The agent's CancelJob"); 15 s leaves room
# for a slow node's collect on top.
DEFAULT_SETTLE_S = 15.0
