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
# `--command` of --collect and `spurctl collect`: here, not in sources/collect.py, which
# every command's options would otherwise import (~6 ms) for this one string.
DEFAULT_COMMAND = "ssh -o BatchMode=yes %h spurctl node-inventory"
# `--remote-command` of a gateway tree (--topology): here for the same reason, so that
# every command's options need not import sources/tree.py (~2.5 ms with its dataclasses).
DEFAULT_REMOTE_COMMAND = "spurctl node-inventory"
# What an "unknown node" error tells the operator to run to see the controller's node
# names; the command line gives it with the options that read this controller.
NAMES_COMMAND = "spurctl nodes"
# spurd heartbeats every 30 s (crates/spurd/src/reporter.rs `heartbeat_loop`); a node whose
# record `repair` removed registers again at its next heartbeat: `--wait` allows two.
HEARTBEAT_S = 30.0
DEFAULT_REJOIN_WAIT_S = 2 * HEARTBEAT_S
# `repair --tick`: after spurctl's drain, how long the scheduler (a 1 s loop by default,
# `[scheduler] interval_secs`) gets to land a dispatch it had already decided, before the
# node is read again.
DEFAULT_TICK_S = 5.0
# `--lock-wait` of reclaim, drain, resume and repair: how long a run waits for the
# journal's lock (an autopilot holds it only while a round acts, a few seconds) before it
# refuses; two of the autopilot's default 30 s intervals.
DEFAULT_LOCK_WAIT_S = 60.0
