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
# A commit pinned: kept whatever keep_commits says (the line holds every partition's
# version after it), until a `released` line for it; lines counted, not ordered.
SAVEPOINT = "savepoint"
RELEASED = "released"
COMMIT_ID_FORMAT = "%Y%m%d%H%M%S%f"  # sorts as text in time order
LOGGED_AT_FORMAT = "%Y-%m-%d %H:%M:%S.%f"  # a log line's time, as read and written


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
    """One line of the commit log. `logged_at` (UTC, LOGGED_AT_FORMAT) is when it was
    logged, as read back; None for a line not written yet (then the engine's clock), or
    one whose time is not known."""

    commit_id: str
    action: str
    changes: tuple[PartitionChange, ...] = ()
    logged_at: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TableState:
    """What the log says: each partition's version, the last commit, an unfinished
    commit or rollback (`pending`, its action `pending` or `rolling_back`)."""

    versions: dict[str, str] = field(default_factory=dict)
    last_commit: LogEntry | None = None
    pending: LogEntry | None = None
    last_commit_id: str | None = None
    entries: int = field(default=0, compare=False)  # log lines replayed (compaction reads it)
    # The commits the log still holds, oldest first, rolled back ones left out: the
    # table can be read as it was after each (`versions_after`) while its files are kept.
    history: tuple[LogEntry, ...] = field(default=(), compare=False)
    # Pinned commits (savepoints): commit id -> every partition's version after it.
    savepoints: dict[str, dict[str, str]] = field(default_factory=dict, compare=False)
    # Rolled back commits the log still knows: commit id -> when the rollback was logged
    # (a time between the two showed that commit, whose files are gone: commit_of).
    rolled_back_at: dict[str, str | None] = field(default_factory=dict, compare=False)

    def retained(self, keep: int = 1) -> set[tuple[str, str]]:
        """(path, version) pairs that must keep their files: current ones, and the
        previous ones of the last `keep` commits, so the table can be read (`as_of`) or
        restored as it was after each of its last `keep + 1` commits (1: what
        rollback_last_commit needs).

        Example:
            >>> log = [LogEntry(str(i), COMMITTED, (PartitionChange("d=1", prev, str(i)),))
            ...        for i, prev in ((1, None), (2, "1"), (3, "2"))]
            >>> sorted(replay(log).retained()), sorted(replay(log).retained(keep=2))
            ([('d=1', '2'), ('d=1', '3')], [('d=1', '1'), ('d=1', '2'), ('d=1', '3')])
        """
        kept = set(self.versions.items())
        for commit in self.history[-keep:]:
            kept |= {(c.path, c.previous) for c in commit.changes if c.previous is not None}
        for pinned in self.savepoints.values():
            kept |= set(pinned.items())
        if self.pending is not None:
            kept |= {(c.path, c.current) for c in self.pending.changes if c.current is not None}
        return kept


def committed(state: TableState, entry: LogEntry, logged_at: str | None = None) -> TableState:
    """The state once `entry` (a commit of `state`'s table) is committed, its line logged
    at `logged_at`: what replaying the log would give, without reading it again.

    Example:
        >>> before = replay([LogEntry("1", COMMITTED, (PartitionChange("d=1", None, "1"),))])
        >>> after = committed(before, LogEntry("2", PENDING, (PartitionChange("d=1", "1", "2"),)))
        >>> after.versions, after.last_commit.commit_id, after.pending
        ({'d=1': '2'}, '2', None)
    """
    versions = dict(state.versions)
    _apply(versions, entry.changes, lambda change: change.current)
    done = LogEntry(entry.commit_id, COMMITTED, entry.changes, logged_at)
    last_id = max(entry.commit_id, state.last_commit_id or "")
    history = (*state.history, done)
    return TableState(
        versions,
        done,
        None,
        last_id,
        state.entries + 2,
        history,
        state.savepoints,
        state.rolled_back_at,
    )


def versions_after(state: TableState, commit_id: str) -> dict[str, str]:
    """Each partition's version right after commit `commit_id` (of its history or a savepoint):
    the current versions with every later commit undone, newest first.

    Example:
        >>> log = [LogEntry(str(i), COMMITTED, (PartitionChange(p, prev, str(i)),))
        ...        for i, p, prev in ((1, "d=1", None), (2, "d=2", None), (3, "d=1", "1"))]
        >>> versions_after(replay(log), "2"), versions_after(replay(log), "1")
        ({'d=1': '1', 'd=2': '2'}, {'d=1': '1'})
    """
    if commit_id in state.savepoints:
        return dict(state.savepoints[commit_id])
    ids = [commit.commit_id for commit in state.history]
    if commit_id not in ids:
        raise KeyError(commit_id)
    versions = dict(state.versions)
    for commit in reversed(state.history[ids.index(commit_id) + 1 :]):
        _apply(versions, commit.changes, lambda change: change.previous)
    return versions


def visible_at(commit: LogEntry) -> datetime:
    """When a commit of the history became visible: its `committed` line's time (its
    partitions had moved by then), else (a line of a log compacted before times were
    kept) the time its id encodes, when it started.

    Example:
        >>> visible_at(LogEntry("20261101080000000000", COMMITTED, (), "2026-11-01 08:20:00.0"))
        datetime.datetime(2026, 11, 1, 8, 20)
    """
    if commit.logged_at is None:
        return commit_time(commit.commit_id)
    return datetime.strptime(commit.logged_at, LOGGED_AT_FORMAT)


def commit_at(state: TableState, when: datetime) -> str | None:
    """The commit of `state.history` the table showed at `when`: the last one visible
    by then (None: none was). A commit is visible once logged `committed`, not from
    the time its id encodes (its start: a model may run for minutes before its rows
    move). Savepoints are named by their ids only: the commits between an old
    savepoint and the history are forgotten, so a time among them cannot tell which
    was newest. See rolled_back_over for a commit since rolled back.

    Example:
        >>> state = replay([LogEntry("20261101080000000000", COMMITTED),
        ...                 LogEntry("20261102080000000000", COMMITTED)])
        >>> commit_at(state, datetime(2026, 11, 1, 12)), commit_at(state, datetime(2026, 10, 1))
        ('20261101080000000000', None)
    """
    made = [(visible_at(c), c.commit_id) for c in state.history if visible_at(c) <= when]
    return max(made, default=(None, None))[1]


def rolled_back_over(state: TableState, when: datetime, shown: str | None) -> str | None:
    """A commit since rolled back that the table may have shown at `when`, over the
    commit `shown` (commit_at's answer): made by then, after `shown`, and not yet rolled
    back. Its files are gone, so no read can give what the table showed then.

    Example:
        >>> log = [LogEntry("20261101080000000000", COMMITTED),
        ...        LogEntry("20261101100000000000", COMMITTED),
        ...        LogEntry("20261101100000000000", ROLLED_BACK, (), "2026-11-01 13:00:00.0")]
        >>> state, times = replay(log), [datetime(2026, 11, 1, h) for h in (9, 12, 14)]
        >>> [rolled_back_over(state, when, commit_at(state, when)) for when in times]
        [None, '20261101100000000000', None]
    """
    for commit_id, until in sorted(state.rolled_back_at.items()):
        started = commit_time(commit_id)
        ended = until is not None and when >= datetime.strptime(until, LOGGED_AT_FORMAT)
        if started <= when and not ended and (shown is None or commit_id > shown):
            return commit_id
    return None


def commits_to_keep(state: TableState, keep_commits: int, keep_days: int | None = None) -> int:
    """How many of the newest commits keep their previous versions (TableState.retained):
    `keep_commits`, or more with `keep_days`, so that the table can be read as of any
    time in the `keep_days` days before its last commit: every commit made in them, and
    the one before them (what a time at their start reads). Days count back from the
    last commit, not the clock, so a table no one writes keeps its history.

    Example:
        >>> log = [LogEntry(f"202611{day:02}000000000000", COMMITTED) for day in (1, 5, 8, 9)]
        >>> [commits_to_keep(replay(log), 1, days) for days in (None, 0, 1, 4, 30)]
        [1, 1, 2, 3, 4]
    """
    if not keep_days or state.last_commit_id is None:
        return keep_commits
    start = commit_time(state.last_commit_id) - timedelta(days=keep_days)
    # Made or shown in those days: a commit that started before them and showed in
    # them counts, so the one the table showed at their start is kept (commit_at).
    recent = sum(
        1
        for commit in state.history
        if max(commit_time(commit.commit_id), visible_at(commit)) >= start
    )
    return max(keep_commits, recent)


def kept_commits(state: TableState) -> list[str]:
    """The ids of the commits the table can be read as of, oldest first: its history and
    its savepoints."""
    return sorted({c.commit_id for c in state.history} | set(state.savepoints))


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
    order |= {SAVEPOINT: 5, RELEASED: 5}
    versions: dict[str, str] = {}
    last_commit: LogEntry | None = None
    pending: LogEntry | None = None
    last_id: str | None = None
    history: list[LogEntry] = []
    pins: dict[str, tuple[int, dict[str, str]]] = {}  # savepoint lines less released ones
    rolled_back: set[str] = set()  # no state to read or keep, even under a savepoint
    rolled_back_at: dict[str, str | None] = {}
    checkpoint_at: str | None = None
    count = 0
    for entry in sorted(entries, key=lambda e: (e.commit_id, order[e.action])):
        count += 1
        if entry.action in (SAVEPOINT, RELEASED):
            times, pinned = pins.get(entry.commit_id, (0, {}))
            if entry.action == SAVEPOINT:
                times, pinned = times + 1, _versions_of(entry.changes)
            pins[entry.commit_id] = (times - (entry.action == RELEASED), pinned)
            continue
        last_id = entry.commit_id
        if entry.action == CHECKPOINT:
            versions = _versions_of(entry.changes)
            last_commit, pending, history, rolled_back_at = None, None, [], {}
            checkpoint_at = entry.logged_at
            continue
        if entry.action in (PENDING, ROLLING_BACK):
            pending = entry
            continue
        pending = None
        if entry.action == COMMITTED:
            if checkpoint_at is not None and entry.logged_at == checkpoint_at:
                # Written with its checkpoint by a compaction that did not keep times.
                entry = LogEntry(entry.commit_id, COMMITTED, entry.changes)
            _apply(versions, entry.changes, lambda change: change.current)
            last_commit = entry
            history.append(entry)
        else:  # rolled back: a commit can be rolled back once, and only the last one
            _apply(versions, entry.changes, lambda change: change.previous)
            last_commit = None
            history = [c for c in history if c.commit_id != entry.commit_id]
            rolled_back.add(entry.commit_id)
            rolled_back_at[entry.commit_id] = entry.logged_at
    savepoints = {
        commit: pinned
        for commit, (times, pinned) in pins.items()
        if times > 0 and commit not in rolled_back
    }
    return TableState(
        versions,
        last_commit,
        pending,
        last_id,
        count,
        tuple(history),
        savepoints,
        rolled_back_at,
    )


def compacted(state: TableState, keep: int = 1) -> list[LogEntry]:
    """Log entries that replay to `state` (one without an unfinished commit): a
    checkpoint of the versions before its last `keep + 1` commits, then those commits
    (the ones the table can still be read as of: see TableState.retained) with the
    times they were logged, and a mark of each commit rolled back among them, with
    the time of its rollback (commit_of refuses a time when it showed).

    Example:
        >>> log = [LogEntry(str(i), a, (PartitionChange("d=1", prev, str(i)),))
        ...        for i, prev in ((1, None), (2, "1"), (3, "2")) for a in (PENDING, COMMITTED)]
        >>> state = replay(log)
        >>> [(e.commit_id, e.action) for e in compacted(state)]
        [('2', 'checkpoint'), ('2', 'committed'), ('3', 'committed')]
        >>> replay(compacted(state)) == state
        True
        >>> replay(compacted(state, keep=2)).history == state.history
        True
    """
    if state.pending is not None:
        raise ValueError("a log with an unfinished commit is not compacted")
    pinned = [
        LogEntry(commit, SAVEPOINT, _as_changes(versions))
        for commit, versions in sorted(state.savepoints.items())
    ]
    kept = list(state.history[-(keep + 1) :])
    if state.last_commit is None:  # the last commit was rolled back: it is no state to keep
        kept = []
    if not kept:
        checkpoint = LogEntry(state.last_commit_id or "", CHECKPOINT, _as_changes(state.versions))
        return [checkpoint, *pinned]
    before = dict(state.versions)
    for commit in reversed(kept):
        _apply(before, commit.changes, lambda change: change.previous)
    rolled_back = [
        LogEntry(commit, ROLLED_BACK, (), at)
        for commit, at in sorted(state.rolled_back_at.items())
        if commit > kept[0].commit_id
    ]
    return [
        LogEntry(kept[0].commit_id, CHECKPOINT, _as_changes(before)),
        *(LogEntry(c.commit_id, COMMITTED, c.changes, c.logged_at) for c in kept),
        *rolled_back,
        *pinned,
    ]


def _versions_of(changes: Iterable[PartitionChange]) -> dict[str, str]:
    """Every partition's version, from a checkpoint's or a savepoint's changes."""
    return {c.path: c.current for c in changes if c.current is not None}


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
