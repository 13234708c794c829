"""A lock with a lease per table, in the catalog every engine shares.

A run that changes a raw topic or an upsert target holds the table's lock
for the whole protocol, so two runs (two dbt processes on one Thrift
server, two threads of one process) never interleave their steps.

The lock is a table, `<schema>.<table>__lock`: creating a table is atomic in
the metastore (its name is unique there), and every engine that reads our
tables reaches that metastore through SQL alone (the embedded session, the
Thrift server, Spark Connect). Its properties name the holder (host, process,
a token) and when the lease expires. The holder renews the lease at each step
of its protocol; a holder that is killed stops renewing. A waiting run takes
the lock over when the lease has expired, or at once when the holder was a
process of this host that no longer runs. Take-over renames the stale lock
away first: of two runs taking over at once, only one rename succeeds.

A run that finds the lock held waits (`lock_wait_seconds`), then fails with a
message naming the holder. See docs/decisions/0010-locks-and-interruptions.md
for what the lock does not guarantee.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    Sql,
    database_location,
    drop_table,
    properties_clause,
    recorded_properties,
    rename,
    set_table_properties,
    table_columns,
)
from dynamic_ddl.sql_text import location_clause, quoted_table, string_literal

LOCK_SUFFIX = "__lock"
WAIT_ENV = "DYNAMIC_DDL_LOCK_WAIT_SECONDS"
LEASE_ENV = "DYNAMIC_DDL_LOCK_LEASE_SECONDS"
DEFAULT_WAIT_SECONDS = 600.0
DEFAULT_LEASE_SECONDS = 900.0
POLL_SECONDS = 0.5


class LockTimeout(Exception):
    """Another run held the lock for longer than this run would wait."""


class LockLost(Exception):
    """This run's lease expired and another run took the lock over."""


class NotALock(Exception):
    """A table of the lock's name exists and is not a lock: never taken over (dropped)."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock and until when (seconds since the epoch)."""

    host: str
    pid: int
    token: str
    expires_at: float

    @classmethod
    def me(cls, lease_seconds: float) -> Holder:
        return cls(this_host(), os.getpid(), uuid.uuid4().hex, time.time() + lease_seconds)

    def describe(self) -> str:
        """The holder as a person reads it."""
        left = self.expires_at - time.time()
        return f"process {self.pid} on {self.host} (lease ends in {max(left, 0):.0f} s)"

    def is_stale(self, now: float) -> bool:
        """The lease expired, or the holder is a process of this host that is gone, or
        this process, which no longer holds it (a release that failed)."""
        if now >= self.expires_at:
            return True
        if self.host != this_host():
            return False
        if self.pid == os.getpid():
            with _HELD_LOCK:
                return self.token not in _HELD_TOKENS
        return not _process_runs(self.pid)


def this_host() -> str:
    """This host as a lock names its holders: the host name, and the PID namespace where
    there is one. Containers on one host often share its name (host networking) while
    each has its own process ids: a holder in another namespace is not looked up here,
    where its process cannot be seen, so it is never taken for gone (found by review)."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # e.g. pid:[4026531836]
    except OSError:  # not Linux, or /proc hidden
        return socket.gethostname()
    return f"{socket.gethostname()} {namespace}"


def _process_runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True


@dataclass(frozen=True)
class LockSettings:
    """How long to wait for a held lock, and how long a lease lasts unrenewed."""

    wait_seconds: float = DEFAULT_WAIT_SECONDS
    lease_seconds: float = DEFAULT_LEASE_SECONDS

    @classmethod
    def from_env(cls, wait_seconds: float | None = None) -> LockSettings:
        """Settings from the environment; `wait_seconds` (a model's config) wins."""
        wait = (
            os.environ.get(WAIT_ENV, DEFAULT_WAIT_SECONDS) if wait_seconds is None else wait_seconds
        )
        where = WAIT_ENV if wait_seconds is None else "lock_wait_seconds"
        return cls(
            _seconds(wait, where, zero_allowed=True),
            # A lease of 0 s would let a waiting run take a live holder's lock at once.
            _seconds(os.environ.get(LEASE_ENV, DEFAULT_LEASE_SECONDS), LEASE_ENV),
        )


def _seconds(value: object, name: str, zero_allowed: bool = False) -> float:
    """A number of seconds from a setting or an environment variable, or a ValueError
    naming it.

    Example:
        >>> _seconds("10m", "DYNAMIC_DDL_LOCK_WAIT_SECONDS")
        Traceback (most recent call last):
        ...
        ValueError: DYNAMIC_DDL_LOCK_WAIT_SECONDS must be a number of seconds above 0, not '10m'.
    """
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = math.nan
    if not (seconds >= 0 if zero_allowed else seconds > 0) or math.isinf(seconds):
        least = "0 or more" if zero_allowed else "above 0"
        raise ValueError(f"{name} must be a number of seconds {least}, not {value!r}.")
    return seconds


def lock_table(table: str) -> str:
    return table + LOCK_SUFFIX


_held = threading.local()  # the locks this thread holds: a held lock is taken again at once
_HELD_TOKENS: set[str] = set()  # the run ids of every lock this process holds now
_HELD_LOCK = threading.Lock()


@contextmanager
def held(sql: Sql, table: str, settings: LockSettings | None = None) -> Iterator[Holder]:
    """Hold the lock of `table` inside the block (see the module docstring)."""
    names = getattr(_held, "names", {})
    _held.names = names
    if table in names:
        yield names[table]
        return
    settings = settings or LockSettings.from_env()
    holder = acquire(sql, table, settings)
    names[table] = holder
    renewal = _Renewal(sql, table, holder, settings.lease_seconds)
    try:
        with steps.listening(renewal.on_step):
            yield holder
    finally:
        del names[table]
        with _HELD_LOCK:
            _HELD_TOKENS.discard(holder.token)
        release(sql, table, renewal.holder)


def acquire(
    sql: Sql, table: str, settings: LockSettings, waiting: Callable[[str], None] | None = None
) -> Holder:
    """Take the lock, waiting for a live holder up to `settings.wait_seconds`; `waiting`
    is told once, naming the holder, when this run starts to wait."""
    deadline = time.monotonic() + settings.wait_seconds
    told = waiting is None
    lock = lock_table(table)
    while True:
        me = Holder.me(settings.lease_seconds)
        with _HELD_LOCK:
            _HELD_TOKENS.add(me.token)  # before the create: a holder is never judged stale
        created = False
        try:
            steps.reached("lock.create")
            created = _create(sql, lock, me)
        finally:
            if not created:
                with _HELD_LOCK:
                    _HELD_TOKENS.discard(me.token)
        if created:
            _drop_moved_aside(sql, lock)
            return me
        holder = read_holder(sql, lock)
        if holder is not None and not holder.token and not _is_lock(sql, lock):
            raise NotALock(
                f"{lock} exists and is not a lock (its columns are not `holder`), so"
                f" {table} cannot be locked: rename that table. Names ending in"
                f" {LOCK_SUFFIX} are this project's locks."
            )
        if holder is not None and holder.is_stale(time.time()) and _take_over(sql, lock, holder):
            continue
        who = holder.describe() if holder else "another run"
        if not told:
            waiting(f"{table} is locked by {who}; waiting up to {settings.wait_seconds:.0f} s.")
            told = True
        if time.monotonic() >= deadline:
            raise LockTimeout(
                f"{table} is locked by {who}; waited {settings.wait_seconds:.0f} s. Let that"
                f" run finish, or raise lock_wait_seconds ({WAIT_ENV}). A killed run's lock is"
                " taken over once its lease ends."
            )
        time.sleep(POLL_SECONDS)


def _create(sql: Sql, lock: str, holder: Holder) -> bool:
    """Create the lock table for `holder`; False when it exists already."""
    schema, name = lock.split(".")
    location = f"{database_location(sql, schema)}/_locks/{name}"
    try:
        sql(
            f"create table {quoted_table(lock)} (holder string) using parquet"
            f"{location_clause(location)} tblproperties ({_properties(holder)})"
        )
    except Exception as error:
        if "ALREADY_EXISTS" in str(error).upper():
            return False
        raise
    return True


# The properties naming a lock's holder (_properties).
HOLDER_PROPERTIES = ("holder.host", "holder.pid", "holder.run", "lease.expires_at")


def _properties(holder: Holder) -> str:
    # Not "token": Spark redacts properties whose name holds it (spark.redaction.regex);
    # values are encoded (catalog.property_value): a host named `curly` would be too.
    values = (holder.host, str(holder.pid), holder.token, repr(holder.expires_at))
    return properties_clause(dict(zip(HOLDER_PROPERTIES, values, strict=True)))


def read_holder(sql: Sql, lock: str) -> Holder | None:
    """The holder a lock table names; None when there is no such table."""
    try:
        props = recorded_properties(sql, lock, HOLDER_PROPERTIES)
    except Exception as error:
        if "NOT_FOUND" in str(error).upper() or "NOT FOUND" in str(error).upper():
            return None
        raise
    if "holder.run" not in props:
        return Holder("", 0, "", 0.0)  # no holder named: an expired lease
    return Holder(
        props.get("holder.host", ""),
        int(props.get("holder.pid", "0")),
        props["holder.run"],
        float(props.get("lease.expires_at", "0")),
    )


def _take_over(sql: Sql, lock: str, stale: Holder) -> bool:
    """Move a stale lock out of the way (only one of two racing runs can); whether it
    was moved (else the caller waits as for a live holder, rather than spin)."""
    aside = f"{lock}_{stale.token[:12]}"
    steps.reached("lock.take_over")
    try:
        rename(sql, lock, aside)
    except Exception:
        # Another run moved it first, or the holder released it: try again at once; a
        # lock that cannot be moved at all is waited for, then named, as a live one.
        return read_holder(sql, lock) is None
    moved = read_holder(sql, aside)
    if moved is not None and (moved.token != stale.token or moved.expires_at > stale.expires_at):
        # A new holder's lock was moved (it replaced the stale one meanwhile), or the
        # holder renewed its lease since we read it (found by review: its lock was
        # dropped while it ran on): put it back. If that fails, its holder finds its
        # lease gone at its next renewal and stops.
        with suppress(Exception):
            rename(sql, aside, lock)
        return True
    steps.reached("lock.drop_stale")
    drop_table(sql, aside)
    return True


def _drop_moved_aside(sql: Sql, lock: str) -> None:
    """Drop stale locks a take-over moved aside (`<lock>_<token>`) and was killed before
    dropping: tables of that name whose only column is `holder`. The name alone is not
    enough: `<t>__lock_events` is the child table of a raw table's array `lock_events`."""
    schema, name = lock.split(".")
    pattern = string_literal(f"{name}_*")
    for row in sql(f"show tables in {quoted_table(schema)} like {pattern}"):
        aside = f"{schema}.{row[1]}"
        if row[1].lower().startswith(f"{name}_".lower()) and not row[2] and _is_lock(sql, aside):
            steps.reached("lock.drop_stale")
            drop_table(sql, aside)


def _is_lock(sql: Sql, table: str) -> bool:
    """Whether `table` is a lock table: one column, `holder`."""
    return [name for name, _ in table_columns(sql, table)] == ["holder"]


def release(sql: Sql, table: str, holder: Holder) -> None:
    """Drop the lock when this run still holds it."""
    lock = lock_table(table)
    current = read_holder(sql, lock)
    if current is not None and current.token == holder.token:
        drop_table(sql, lock)


def renew(sql: Sql, table: str, holder: Holder, lease_seconds: float, where: str) -> Holder:
    """Extend `holder`'s lease on `table`'s lock; the holder after. LockLost (saying this
    run stopped at `where`) when the lease ran out and another run took the lock."""
    lock = lock_table(table)
    _refuse_unless_held(sql, lock, holder, where)
    renewed = Holder(holder.host, holder.pid, holder.token, time.time() + lease_seconds)
    set_table_properties(sql, lock, {"lease.expires_at": repr(renewed.expires_at)})
    # Read again: a run that took the lock over between the read and the alter got its
    # lease extended, not ours (found by review: both ran on).
    _refuse_unless_held(sql, lock, holder, where)
    return renewed


def _refuse_unless_held(sql: Sql, lock: str, holder: Holder, where: str) -> None:
    """LockLost, saying this run stopped at `where`, unless `holder` holds `lock`."""
    current = read_holder(sql, lock)
    if current is None or current.token != holder.token:
        who = current.describe() if current else "nobody"
        raise LockLost(
            f"The lease on {lock} ran out and it is now held by {who}; this run"
            f" stopped at {where}. Raise {LEASE_ENV} if a step takes longer than the lease."
        )


class _Renewal:
    """Renews a held lease at protocol steps, once a third of it has passed."""

    def __init__(self, sql: Sql, table: str, holder: Holder, lease_seconds: float):
        self.sql, self.table, self.holder = sql, table, holder
        self.lease_seconds = lease_seconds
        self.renewed_at = time.monotonic()

    def on_step(self, step: str) -> None:
        if step.startswith("lock.") or time.monotonic() - self.renewed_at < self.lease_seconds / 3:
            return
        self.holder = renew(self.sql, self.table, self.holder, self.lease_seconds, step)
        self.renewed_at = time.monotonic()


RUN_LOCK = "dbt_run"  # a dbt run's lock on its schema: `<schema>.dbt_run__lock`


class RunLock:
    """The lock of a whole `dbt run` or `dbt build` on its schema, from on-run-start to
    on-run-end: two runs of the project never interleave, whatever their models do
    (table rebuilds, seeds and hooks hold no lock of their own). The second run waits
    in on-run-start, then fails naming the holder. A thread renews the lease while the
    run lasts; `renew_in(fn)` calls `fn` with a Sql that thread may use."""

    def __init__(self, schema: str, settings: LockSettings, renew_in: Callable):
        self.table = f"{schema}.{RUN_LOCK}"
        self.settings, self.renew_in = settings, renew_in
        self.holder: Holder | None = None
        self.lost: Exception | None = None  # why renewing stopped, if it failed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, sql: Sql, waiting: Callable[[str], None] | None = None) -> Holder:
        self.holder = acquire(sql, self.table, self.settings, waiting)
        self._thread = threading.Thread(target=self._renew, name="run-lock", daemon=True)
        self._thread.start()
        return self.holder

    def _renew(self) -> None:
        while not self._stop.wait(self.settings.lease_seconds / 3):
            try:
                self.renew_in(self._renew_with)
                self.lost = None
            except LockLost as error:  # another run took it over: release() reports it
                self.lost = error
                return
            except Exception as error:  # a server or network hiccup: tried again at the
                self.lost = error  # next third of the lease, two before it runs out

    def _renew_with(self, sql: Sql) -> None:
        holder = self.holder
        if holder is not None and not self._stop.is_set():
            self.holder = renew(sql, self.table, holder, self.settings.lease_seconds, "a model")

    def release(self, sql: Sql) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.holder is not None:
            with _HELD_LOCK:
                _HELD_TOKENS.discard(self.holder.token)
            release(sql, self.table, self.holder)
            self.holder = None
