"""What each Spur release does that spurctl must know, read from its version string.

`PingResponse.version` is spurctld's crate version (`CARGO_PKG_VERSION`, no git
sha): the only thing a controller says about itself. Two things hang on it
(docs/spur-facts.md, "Releases differ"):

- what GetJobs can filter: `nodes` (field 7, #628) and the REQUEUED state (12,
  #629) came with 0.9.0. A controller without them skips the unknown field and
  drops the unknown state, so the filter silently filters nothing;
- what the controller reclaims by itself on a heartbeat: #580 (terminal jobs) is
  in release v0.8.0, #623 (the whole predicate) in 0.9.0 and every later release.

A third hangs on it too: what a heartbeat timeout leaves of a drain's reason. Release
v0.8.0 and every older one replace an admin hold's reason with `Not responding` and keep
its lock (cluster.rs `apply_health_actions`); #624 (main 2026-08-16, 0.9.0) keeps the
hold's own reason.

"0.8.0" is the one ambiguous string: release v0.8.0 (2026-08-11) and every build
of main until 0.9.0 (2026-08-24) report it, and main gained #628 (2026-08-13),
#623 (2026-08-16) and #629 (2026-08-18) in between. spurctl takes it at its
weakest: no `nodes` filter, no REQUEUED state, no #623.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from spurctl.model import Kind

Version = tuple[int, int, int]

_VERSION = re.compile(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?")
# The last version string a controller without #623, #628 and #629 may report.
AMBIGUOUS = (0, 8, 0)
LAST_VERSION_WITHOUT_RECLAIM = AMBIGUOUS
# What each Spur reclaims by itself on a heartbeat (docs/spur-facts.md, "The controller's
# own reclaim"): release v0.8.0 has #580; #623, in 0.9.0, made it the whole predicate.
RECLAIMED_BY_580 = (Kind.TERMINAL_HELD,)
RECLAIMED_BY_623 = (Kind.TERMINAL_HELD, Kind.ACTIVE_ELSEWHERE, Kind.BELOW_WATERMARK_UNKNOWN)


def parse_version(version: str) -> Version | None:
    """(major, minor, patch) of a version string (`v0.8.0`, `0.8`, `0.8.0-dev+4cc3da8`);
    None when it does not begin as a version number."""
    m = _VERSION.match(version or "")
    if m is None:
        return None
    return int(m[1]), int(m[2]), int(m[3] or 0)


@dataclass(frozen=True, slots=True)
class Filters:
    """What a controller's GetJobs is known to filter on.

    `nodes`: GetJobsRequest.nodes (field 7). `requeued`: the REQUEUED state in
    `states`; where it is unknown, `states=[REQUEUED]` alone answers every job, so
    REQUEUED is only ever asked for beside a state every release knows.
    """

    nodes: bool
    requeued: bool


def filters_for(version: str) -> Filters:
    """What GetJobs filters at `version`: both from 0.9.0 on; neither for 0.8.0 (release
    v0.8.0 lacks them), anything older, or a string that is not a version number."""
    parsed = parse_version(version)
    known = parsed is not None and parsed > AMBIGUOUS
    return Filters(nodes=known, requeued=known)


def replaces_hold_reason(version: str) -> bool:
    """Whether a controller of `version` may replace a drain's reason with `Not responding`
    when the node's heartbeat times out, keeping the lock (before #624): 0.8.0 and older,
    or a string that is not a version number (taken at its weakest, as filters_for does)."""
    parsed = parse_version(version)
    return parsed is None or parsed <= AMBIGUOUS


def _kinds(kinds: Iterable[Kind]) -> str:
    names = [k.value for k in kinds]
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]


_NEVER = (
    "no Spur clears agent-orphan (spurd no longer tracks it, so never reports it) or "
    "anything spurctl only investigates"
)


def spur_version_note(version: str) -> str | None:
    """Which reclaim findings a controller of `version` clears by itself and which need
    spurctl; None for a later version (it has #623), or one that does not read as a
    version number."""
    parsed = parse_version(version)
    if parsed is None or parsed > LAST_VERSION_WITHOUT_RECLAIM:
        return None
    shown = version.strip()
    if parsed < LAST_VERSION_WITHOUT_RECLAIM:
        return (
            f"Spur {shown} predates Spur's own heartbeat reclaim (#580, first released in "
            f"v0.8.0; #623 in 0.9.0): nothing clears {_kinds(RECLAIMED_BY_623)} by "
            "itself, so all of them need spurctl (or an operator); "
            f"{_NEVER}; and its agents accept cancels without a credential (agent "
            "authentication arrived in Aug 2026, #641)"
        )
    after_580 = [k for k in RECLAIMED_BY_623 if k not in RECLAIMED_BY_580]
    return (
        f"Spur {shown} is release v0.8.0 or a build of main from before 0.9.0, and the "
        "version string cannot tell them apart: release v0.8.0 clears "
        f"{_kinds(RECLAIMED_BY_580)} by itself on the node's next heartbeat (#580), but only "
        "while the job is still in its memory: #583 drops a terminal job "
        "terminal_job_retention_secs (3600 s by default) after it ends, so an older terminal "
        f"holding is never reclaimed by v0.8.0 itself; {_kinds(after_580)} need spurctl "
        "unless this is a main build from 2026-08-16 to 08-24, which has #623 (release "
        "v0.8.0 lacks it; 0.9.0, 2026-08-24, ships it with #624, #584, #613 and #594, and "
        f"every later release has it); {_NEVER}; v0.8.0's agents accept cancels "
        "without a credential (agent authentication arrived in Aug 2026, #641, and even "
        "then spurd's default `permissive` mode lets an anonymous one through)"
    )


def spur_version_line(version: str) -> str | None:
    """spur_version_note as a screen shows it, one short paragraph in plain words: what
    this controller reclaims by itself and what it leaves to spurctl, then how to hide
    it (hide_hint)."""
    parsed = parse_version(version)
    if spur_version_note(version) is None or parsed is None:
        return None
    shown = version.strip()
    if parsed < LAST_VERSION_WITHOUT_RECLAIM:
        said = (
            f"Spur {shown} frees no holding by itself: every reclaim finding waits for "
            "spurctl reclaim."
        )
    else:
        # Release v0.8.0's #580, bounded by #583's retention (3600 s by default).
        said = (
            f"Spur {shown} may free by itself only terminal-held holdings of jobs that "
            "ended in the last hour; the other reclaim findings wait for spurctl reclaim."
        )
    return f"{said} {hide_hint(version)}"


def hide_hint(version: str) -> str:
    """How to hide the version note: by acknowledging this version."""
    return (
        f"Hide this note with --ack-version {version.strip()} (or ack_version in the config file)."
    )
