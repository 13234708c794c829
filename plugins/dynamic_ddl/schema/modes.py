"""How a topic's schema may change, per JSON path prefix (`schema_mode` of a topic).

    evolve         a new key becomes a column, a value its column's type cannot
                   hold goes to the column's `__text` companion (the default)
    freeze         a batch that brings a new key, or such a value, to a frozen
                   path fails before any table is written, naming the paths; it
                   stays pending, and the next run tries it again
    rescue         a new key gets no column, and such a value stays out of its
                   column: both go to the row's `_overflow` map (the rescued
                   data: path -> JSON text), and the schema never changes
    discard_row    a line that brings a new key, or such a value, goes to
                   `raw_quarantine` whole, with the reason `discard_row`
    discard_value  the row is kept without the value; the value goes to
                   `raw_quarantined_values` with its path, line and reason

    vars:
      raw_topics:
        device_events:
          schema_mode: freeze                   # every path of the topic
        app_events:
          schema_mode: {"*": freeze, _data.extras: evolve}   # per path prefix

In a mapping the longest prefix that matches a path wins, `*` stands for
every other path, and paths no prefix matches evolve. A prefix names a path
as the registry's `json_path` does (`_data.media[].type`). A topic's first
batch sets its schema whatever the mode: a frozen topic starts from it.
Whatever the mode, no value is lost or NULLed: it lands in a column, a
companion, the rescued map or a quarantine table (`Routes` says which).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from dynamic_ddl.schema.naming import JsonPath, display_path
from dynamic_ddl.schema.registry import RegistryEntry, SchemaPlan

EVOLVE = "evolve"
FREEZE = "freeze"
RESCUE = "rescue"
DISCARD_ROW = "discard_row"
DISCARD_VALUE = "discard_value"
MODES = (EVOLVE, FREEZE, RESCUE, DISCARD_ROW, DISCARD_VALUE)
ROUTING_MODES = (RESCUE, DISCARD_ROW, DISCARD_VALUE)  # the schema never changes under them
EVERY_PATH = "*"
SHOWN_PATHS = 20  # a message names this many paths, then counts the rest


class SchemaFrozen(RuntimeError):
    """A batch would change the schema of paths whose mode is `freeze`."""


@dataclass(frozen=True)
class SchemaModes:
    """The mode of every path of a topic: a default and per-prefix exceptions."""

    default: str = EVOLVE
    prefixes: tuple[tuple[str, str], ...] = ()  # (display path prefix, mode)

    @classmethod
    def from_config(cls, value: Any, where: str) -> SchemaModes:
        """`schema_mode` as configured: a mode, or a mapping of path prefix to mode.

        Example:
            >>> SchemaModes.from_config({"*": "freeze", "a.b": "evolve"}, "t").mode_of(("a", "c"))
            'freeze'
        """
        if value is None:
            return cls()
        if isinstance(value, str):
            return cls(default=_mode(value, where))
        if not isinstance(value, dict) or not value:
            raise ValueError(
                f"{where}: schema_mode must be one of {', '.join(MODES)}, or a mapping of"
                f" JSON path prefix to mode, e.g. {{'*': freeze, _data.extras: evolve}}."
            )
        default = _mode(value.get(EVERY_PATH, EVOLVE), where, EVERY_PATH)
        prefixes = []
        for prefix, mode in value.items():
            if prefix == EVERY_PATH:
                continue
            if not isinstance(prefix, str) or not prefix:
                raise ValueError(f"{where}: a schema_mode key must be a JSON path prefix or *.")
            prefixes.append((prefix, _mode(mode, where, prefix)))
        return cls(default, tuple(prefixes))

    def mode_of(self, path: tuple[str, ...]) -> str:
        """The mode of a path: its longest matching prefix's, else the default.

        Example:
            >>> modes = SchemaModes("freeze", (("_data.media", "evolve"),))
            >>> modes.mode_of(("_data", "media", "[]", "x")), modes.mode_of(("_data", "mediax"))
            ('evolve', 'freeze')
        """
        shown = display_path(path)
        matching = [(len(p), mode) for p, mode in self.prefixes if _under(shown, p)]
        return max(matching)[1] if matching else self.default

    @property
    def freezes_anything(self) -> bool:
        return FREEZE in (self.default, *(mode for _, mode in self.prefixes))


@dataclass(frozen=True)
class Routes:
    """Where a batch sends the values that would change its schema, by path (the paths
    of new keys, and of values their column's type cannot hold), per each path's mode.
    Paths not named here evolve (or, frozen, fail the batch)."""

    rescued: frozenset[JsonPath] = frozenset()  # to the row's `_overflow` map
    discarded: frozenset[JsonPath] = frozenset()  # to raw_quarantined_values
    discarding_rows: frozenset[JsonPath] = frozenset()  # the whole line to raw_quarantine

    @property
    def kept_out(self) -> frozenset[JsonPath]:
        """Paths that never get a new column or a text companion this batch."""
        return self.rescued | self.discarded | self.discarding_rows


NO_ROUTES = Routes()  # every path evolves (a topic's first batch, or no mode routes)


def plan_routes(
    modes: SchemaModes, registry: Collection[Any], paths: Collection[JsonPath]
) -> Routes:
    """The routes of a batch's changing `paths` (new keys and conflicting values); none on
    a topic's first batch (`registry` empty), which sets the schema whatever the mode.

    Example:
        >>> modes = SchemaModes.from_config({"*": "rescue", "a": "discard_value"}, "t")
        >>> r = plan_routes(modes, ["an entry"], [("a", "x"), ("b",)])
        >>> sorted(r.rescued), sorted(r.discarded), sorted(r.discarding_rows)
        ([('b',)], [('a', 'x')], [])
    """
    if not registry:
        return NO_ROUTES

    def under(mode: str) -> frozenset[JsonPath]:
        return frozenset(path for path in paths if modes.mode_of(path) == mode)

    return Routes(under(RESCUE), under(DISCARD_VALUE), under(DISCARD_ROW))


def _mode(value: Any, where: str, prefix: str | None = None) -> str:
    if value not in MODES:
        setting = "schema_mode" if prefix is None else f"schema_mode of {prefix!r}"
        raise ValueError(f"{where}: {setting} must be one of {', '.join(MODES)}, not {value!r}.")
    return value


def _under(path: str, prefix: str) -> bool:
    """Whether a display path is the prefix or lies below it (a key or an array's elements)."""
    return path == prefix or path.startswith((prefix + ".", prefix + "[]"))


def frozen_changes(
    plans: dict[str, SchemaPlan],
    registry: list[RegistryEntry],
    modes: SchemaModes,
    incoming: dict[tuple[str, ...], str] | None = None,
) -> list[str]:
    """What a batch's plans change on frozen paths, one line per path; none on a topic's
    first batch (it sets the schema). A type change counts only when a value does not
    fit its column (integers in a double column do); `incoming` names the batch's own
    type at each such path (the plans hold the text type it is parsed as)."""
    if not registry or not modes.freezes_anything:
        return []
    incoming = incoming or {}
    changes = []
    for plan in plans.values():
        new = [entry.json_keys for entry in plan.added] + [leaf.path for leaf in plan.overflow]
        changes += [(path, "new key") for path in new]
        for entry in plan.texts:  # values of another type that the column cannot hold
            values = incoming.get(entry.json_keys, "other")
            changes.append((entry.json_keys, f"{values} values in a {entry.data_type} column"))
    frozen = [(path, what) for path, what in changes if modes.mode_of(path) == FREEZE]
    return sorted(f"{display_path(path)} ({what})" for path, what in frozen)


def frozen_message(table: str, batch_id: str, changes: list[str]) -> str:
    """Why a batch failed on frozen paths, and what to do."""
    shown = ", ".join(changes[:SHOWN_PATHS])
    more = f" and {len(changes) - SHOWN_PATHS} more" if len(changes) > SHOWN_PATHS else ""
    return (
        f"{table}: batch {batch_id} would change frozen paths (schema_mode freeze): "
        f"{shown}{more}. Nothing was written; the batch stays pending and is tried again "
        "by the next run. Fix the feed, or set schema_mode to evolve for these paths in "
        "vars.raw_topics of dbt_project.yml."
    )
