"""The commit log of an upsert table, and what it says about the table's state.

Every partition of an upsert table points at one version of its files, in
the table's version store (`<table>__versions`, partitioned by the table's
partition columns and `_version`, the commit id that wrote them). A commit
is logged twice: `pending` (with each changed partition's previous and new
version) before any partition moves, `committed` once all have. A rollback
is logged the same way: `rolling_back` before any partition moves back,
`rolled_back` once all have. An unfinished commit or rollback is `pending`
in the state, and the next run finishes it. Replaying the log gives, for each partition, the
version it points at: pure data, no engine needed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

CHECKPOINT = "checkpoint"  # the compacted log: every partition's version at a commit
PENDING = "pending"
COMMITTED = "committed"
ROLLING_BACK = "rolling_back"  # a rollback logged before any partition moves back
ROLLED_BACK = "rolled_back"
COMMIT_ID_FORMAT = "%Y%m%d%H%M%S%f"  # sorts as text in time order


@dataclass(frozen=True)
class PartitionChange:
    """One partition moved by a commit.

    `path` is the partition's relative path (`day=2026-11-01`, "" for an
    unpartitioned table). `previous` and `current` are versions (commit ids);
    None for `previous` means the partition did not exist, None for `current`
    means the commit emptied and dropped it.
    """

    path: str
    previous: str | None
    current: str | None


@dataclass(frozen=True)
class LogEntry:
    """One line of the commit log."""

    commit_id: str
    action: str
    changes: tuple[PartitionChange, ...] = ()


@dataclass(frozen=True)
class TableState:
    """What the log says: each partition's version, the last commit, an unfinished
    commit or rollback (`pending`, its action `pending` or `rolling_back`)."""

    versions: dict[str, str] = field(default_factory=dict)
    last_commit: LogEntry | None = None
    pending: LogEntry | None = None
    last_commit_id: str | None = None
    entries: int = field(default=0, compare=False)  # log lines replayed (compaction reads it)

    def retained(self) -> set[tuple[str, str]]:
        """(path, version) pairs that must keep their files: current ones, and the
        previous ones of the last commit (what a rollback returns to)."""
        kept = set(self.versions.items())
        if self.last_commit is not None:
            kept |= {
                (change.path, change.previous)
                for change in self.last_commit.changes
                if change.previous is not None
            }
        if self.pending is not None:
            kept |= {(c.path, c.current) for c in self.pending.changes if c.current is not None}
        return kept


def committed(state: TableState, entry: LogEntry) -> TableState:
    """The state once `entry` (a commit of `state`'s table) is committed: what replaying
    the log would give, without reading it again.

    Example:
        >>> before = replay([LogEntry("1", COMMITTED, (PartitionChange("d=1", None, "1"),))])
        >>> after = committed(before, LogEntry("2", PENDING, (PartitionChange("d=1", "1", "2"),)))
        >>> after.versions, after.last_commit.commit_id, after.pending
        ({'d=1': '2'}, '2', None)
    """
    versions = dict(state.versions)
    _apply(versions, entry.changes, lambda change: change.current)
    done = LogEntry(entry.commit_id, COMMITTED, entry.changes)
    last_id = max(entry.commit_id, state.last_commit_id or "")
    return TableState(versions, done, None, last_id, state.entries + 2)


def changed_partitions(state: TableState, since: str) -> list[str]:
    """Paths of the partitions that changed after commit `since`: those reading a newer
    version. A row's commit id is never newer than its partition's version, so rows
    with `_commit_id > since` are in these partitions only (a compacted log still
    knows every partition's version).

    Example:
        >>> state = TableState({"d=1": "3", "d=2": "5", "d=3": "7"})
        >>> changed_partitions(state, "4")
        ['d=2', 'd=3']
    """
    return sorted(path for path, version in state.versions.items() if version > since)


def replay(entries: Iterable[LogEntry]) -> TableState:
    """The table's state after the log's entries, in commit order.

    Example:
        >>> state = replay([
        ...     LogEntry("1", PENDING, (PartitionChange("d=1", None, "1"),)),
        ...     LogEntry("1", COMMITTED, (PartitionChange("d=1", None, "1"),)),
        ...     LogEntry("2", PENDING, (PartitionChange("d=1", "1", "2"),)),
        ... ])
        >>> state.versions, state.pending.commit_id
        ({'d=1': '1'}, '2')
    """
    order = {CHECKPOINT: 0, PENDING: 1, COMMITTED: 2, ROLLING_BACK: 3, ROLLED_BACK: 4}
    versions: dict[str, str] = {}
    last_commit: LogEntry | None = None
    pending: LogEntry | None = None
    last_id: str | None = None
    count = 0
    for entry in sorted(entries, key=lambda e: (e.commit_id, order[e.action])):
        count += 1
        last_id = entry.commit_id
        if entry.action == CHECKPOINT:
            versions = {c.path: c.current for c in entry.changes if c.current is not None}
            last_commit, pending = None, None
            continue
        if entry.action in (PENDING, ROLLING_BACK):
            pending = entry
            continue
        pending = None
        if entry.action == COMMITTED:
            _apply(versions, entry.changes, lambda change: change.current)
            last_commit = entry
        else:  # rolled back: a commit can be rolled back once, and only the last one
            _apply(versions, entry.changes, lambda change: change.previous)
            last_commit = None
    return TableState(versions, last_commit, pending, last_id, count)


def compacted(state: TableState) -> list[LogEntry]:
    """Log entries that replay to `state` (one without an unfinished commit): a
    checkpoint of the versions before the last commit, then that commit.

    Example:
        >>> log = [LogEntry(str(i), a, (PartitionChange("d=1", prev, str(i)),))
        ...        for i, prev in ((1, None), (2, "1"), (3, "2")) for a in (PENDING, COMMITTED)]
        >>> state = replay(log)
        >>> [(e.commit_id, e.action) for e in compacted(state)]
        [('3', 'checkpoint'), ('3', 'committed')]
        >>> replay(compacted(state)) == state
        True
    """
    if state.pending is not None:
        raise ValueError("a log with an unfinished commit is not compacted")
    last = state.last_commit
    if last is None:
        return [LogEntry(state.last_commit_id or "", CHECKPOINT, _as_changes(state.versions))]
    before = dict(state.versions)
    _apply(before, last.changes, lambda change: change.previous)
    return [
        LogEntry(last.commit_id, CHECKPOINT, _as_changes(before)),
        LogEntry(last.commit_id, COMMITTED, last.changes),
    ]


def _as_changes(versions: dict[str, str]) -> tuple[PartitionChange, ...]:
    return tuple(PartitionChange(path, None, version) for path, version in sorted(versions.items()))


def _apply(versions: dict[str, str], changes: Iterable[PartitionChange], pick) -> None:
    for change in changes:
        version = pick(change)
        if version is None:
            versions.pop(change.path, None)
        else:
            versions[change.path] = version


def next_commit_id(now: datetime, last: str | None) -> str:
    """A commit id from the clock, always after the last one (clocks can step back).

    Example:
        >>> next_commit_id(datetime(2026, 11, 1, 8, 0), "20261101080000000000")
        '20261101080000000001'
    """
    candidate = now.strftime(COMMIT_ID_FORMAT)
    if last is None or candidate > last:
        return candidate
    after = datetime.strptime(last, COMMIT_ID_FORMAT) + timedelta(microseconds=1)
    return after.strftime(COMMIT_ID_FORMAT)


def commit_time(commit_id: str) -> datetime:
    """The timestamp a commit id encodes (what rows carry as `_commit_ts`)."""
    return datetime.strptime(commit_id, COMMIT_ID_FORMAT)
