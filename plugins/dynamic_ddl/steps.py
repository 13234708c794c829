"""Named steps of the multi-statement protocols, so a test can interrupt at each one.

Every protocol that changes more than one thing (a raw batch, a ledger
migration, an upsert commit, a rollback, a swap, a lock take-over) calls
`reached("<protocol>.<step>")` at each boundary between its changes. In
production that is a lookup of an unset hook. A test installs a hook that
records the steps of a clean run, then raises (or kills the process) at
each of them in turn: adding a step to a protocol adds it to the test.

The hook can also come from the environment (`DYNAMIC_DDL_KILL_AT=<step>:<n>`),
for a child process to SIGKILL itself at the n-th time it reaches a step.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Hook = Callable[[str], None]
KILL_AT_ENV = "DYNAMIC_DDL_KILL_AT"

_hook: Hook | None = None
_lock = threading.Lock()
_counts: dict[str, int] = {}
_local = threading.local()  # listeners of this thread's steps (a held lock renews its lease)


def reached(step: str) -> None:
    """Mark a boundary between two changes of a protocol."""
    for listener in getattr(_local, "listeners", ()):
        listener(step)
    if _hook is not None:
        _hook(step)
    kill_at = os.environ.get(KILL_AT_ENV)
    if kill_at:
        _kill_if_due(step, kill_at)


def _kill_if_due(step: str, kill_at: str) -> None:
    name, _, nth = kill_at.rpartition(":")
    if name != step:
        return
    with _lock:
        _counts[step] = _counts.get(step, 0) + 1
        due = _counts[step] == int(nth or 1)
    if due:
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def listening(listener: Hook) -> Iterator[None]:
    """Call `listener` at every step this thread reaches inside the block."""
    listeners = getattr(_local, "listeners", ())
    _local.listeners = (*listeners, listener)
    try:
        yield
    finally:
        _local.listeners = listeners


@contextmanager
def hooked(hook: Hook) -> Iterator[None]:
    """Call `hook` at every step reached inside the block (tests only)."""
    global _hook
    previous, _hook = _hook, hook
    try:
        yield
    finally:
        _hook = previous


class Interrupted(BaseException):
    """Raised by `interrupt_at` (a BaseException: nothing may catch it as a failure)."""


def recorder() -> tuple[list[str], Hook]:
    """A hook that records the steps reached, in order, and the list it records into."""
    seen: list[str] = []
    return seen, seen.append


def interrupt_at(index: int) -> Hook:
    """A hook that raises `Interrupted` at the `index`-th step reached (0-based)."""
    count = 0

    def hook(step: str) -> None:
        nonlocal count
        count += 1
        if count == index + 1:
            raise Interrupted(f"interrupted at step {index}: {step}")

    return hook


def interrupt_on(name: str) -> Hook:
    """A hook that raises `Interrupted` when step `name` is reached (a run killed there)."""

    def hook(step: str) -> None:
        if step == name:
            raise Interrupted(f"interrupted at {step}")

    return hook
