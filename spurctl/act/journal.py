"""The reclaim journal: JSON Lines, appended, never rewritten.

Every cancel gets an `intent` record before it is sent and an `outcome` after;
each record is flushed and fsynced before the next cancel goes out, so after a
crash or Ctrl-C an intent without an outcome says exactly which node to check.
"""

from __future__ import annotations

import getpass
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spurctl.errors import SpurctlError, redact
from spurctl.model import format_time, utcnow


def default_path() -> Path:
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "spurctl" / "journal.jsonl"


def operator_name() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in a container: still record something
        return str(os.getuid())


@dataclass(frozen=True, slots=True)
class Unresolved:
    """An intent the journal never closed: the cancel may or may not have gone out."""

    at: str
    node: str
    job_id: int
    kind: str


class Journal:
    """Append-only, fsynced, thread-safe.

    A record is on disk when `intent`/`outcome` returns. Threads appending at
    the same time share one fsync (group commit): a reclaim of many nodes at
    once would otherwise queue every send behind every other record's fsync.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.operator = operator_name()
        self._lock = threading.Lock()  # orders writes
        self._sync_lock = threading.Lock()  # one fsync at a time
        self._written = 0  # records written and flushed to the OS
        self._synced = 0  # records known to be on disk
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise SpurctlError(
                f"cannot open journal {path}: {exc.strerror}; pass --journal PATH"
            ) from None

    def close(self) -> None:
        self._fh.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _append(self, record: dict[str, Any]) -> None:
        line = redact(json.dumps(record, ensure_ascii=False))
        with self._lock:
            self._fh.write(line + "\n")
            self._fh.flush()
            self._written += 1
            mine = self._written
        with self._sync_lock:
            if self._synced < mine:
                # Every record counted in _written was flushed before it was counted,
                # so this fsync makes all of them durable, ours included.
                with self._lock:
                    covered = self._written
                os.fsync(self._fh.fileno())
                self._synced = covered

    def intent(self, node: str, job_id: int, kind: str) -> None:
        self._append(
            {
                "event": "intent",
                "at": format_time(utcnow()),
                "operator": self.operator,
                "node": node,
                "job_id": job_id,
                "kind": kind,
            }
        )

    def outcome(self, node: str, job_id: int, kind: str, result: str, detail: str) -> None:
        self._append(
            {
                "event": "outcome",
                "at": format_time(utcnow()),
                "operator": self.operator,
                "node": node,
                "job_id": job_id,
                "kind": kind,
                "result": result,
                "detail": detail,
            }
        )


def unresolved(path: Path) -> list[Unresolved]:
    """Intents with no outcome after them (an interrupted or crashed reclaim)."""
    if not path.exists():
        return []
    open_intents: dict[tuple[str, int], Unresolved] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise SpurctlError(f"cannot read journal {path}: {exc.strerror}") from None
    for line in lines:
        try:
            rec = json.loads(line)
            key = (str(rec["node"]), int(rec["job_id"]))
        except (ValueError, KeyError, TypeError):
            continue  # a torn last line from a crash: the intent before it stays open
        if rec.get("event") == "intent":
            open_intents[key] = Unresolved(str(rec.get("at")), key[0], key[1], str(rec.get("kind")))
        elif rec.get("event") == "outcome":
            open_intents.pop(key, None)
    return sorted(open_intents.values(), key=lambda u: (u.at, u.node, u.job_id))
