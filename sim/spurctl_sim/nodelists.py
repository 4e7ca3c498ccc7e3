"""The nodes a simulated job's nodelist names, as spurctld reads them.

What the cluster's state (state.py) and a spurd restart (restarts.py) both ask of
a job, so it sits below them both.
"""

from __future__ import annotations

import re
from functools import lru_cache

from spurctl import spur_hostlist
from spurctl.model import Job

_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.-]+")


# The most names the simulated controller reads in one nodelist: spurctld keeps a job's
# allocated nodes as names, so a longer list is one no real controller could have placed.
SIM_NODELIST_CAP = 100_000


@lru_cache(maxsize=1 << 16)
def expand(nodelist: str) -> frozenset[str]:
    """The node names of a nodelist as spurctld reads it (spur-core `expand`); empty for
    an empty one. ValueError when Spur cannot read it, or it names more than
    SIM_NODELIST_CAP nodes."""
    name = nodelist.strip(spur_hostlist.WHITESPACE)
    if not name:
        return frozenset()
    if _PLAIN_NAME.fullmatch(name):  # one plain name: nothing to read
        return frozenset((name,))
    try:
        size = spur_hostlist.size(nodelist)
        if size > SIM_NODELIST_CAP:
            raise ValueError(f"nodelist {nodelist!r} names {size:,} nodes")
        return frozenset(spur_hostlist.expand(nodelist))
    except spur_hostlist.BadNodelist as exc:
        raise ValueError(f"malformed hostlist {nodelist!r}: {exc}") from None


def allocated(job: Job) -> frozenset[str]:
    """The nodes a job's nodelist names, as GetJobs' `nodes` filter matches them (none
    for a malformed one: spurctld keeps allocated nodes as names, never a bad list)."""
    try:
        return expand(job.nodelist)
    except ValueError:
        return frozenset()
