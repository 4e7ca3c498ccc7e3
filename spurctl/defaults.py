"""Defaults the command line shows in its help, kept apart from the modules that use them.

`spurctl --help` and every command import the CLI, which needs these values for
its options; importing them from `spurctl.usecases.reclaim` cost every command (an audit
too) the import of the reclaim machinery.
"""

# Nodes re-checked and cancelled at once: 64 takes ~2 s for 1,000 nodes (bench/reclaim_fanout.py).
# Safety does not depend on it: every send is re-checked and journaled on its own.
DEFAULT_CONCURRENCY = 64
# `--max-inventory-age`: older evidence is re-collected before anything acts on it.
DEFAULT_MAX_INVENTORY_AGE_S = 600.0
# `reclaim --settle`: spurd frees a run that ignores SIGTERM ~7 s after the cancel
# (docs/spur-facts.md, "The agent's CancelJob"); 15 s leaves room for a slow collect.
DEFAULT_SETTLE_S = 15.0
# What an "unknown node" error tells the operator to run to see the controller's node
# names; the command line gives it with the options that read this controller.
NAMES_COMMAND = "spurctl nodes"
