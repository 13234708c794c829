"""The tables of an upsert target: the log, the version store and the target itself.

Every statement here may be repeated: a run killed between two of them is
mended by the next run, which creates what is missing and adds only the
columns each table lacks.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    Sql,
    described,
    drop_table,
    property_value,
    recorded_properties,
    set_table_properties,
    table_columns,
    table_exists,
    table_location,
)
from dynamic_ddl.sql_text import location_clause, quoted_identifier
from dynamic_ddl.upsert.commit_log import drop_log, log_ddl
from dynamic_ddl.upsert.spec import (
    COMMIT_ID,
    COMMIT_TS,
    EMPTY,
    VERSION,
    UpsertError,
    UpsertSpec,
    is_reserved,
)

LINEAGE = [(COMMIT_ID, "string"), (COMMIT_TS, "timestamp")]


def refuse_missing_columns(spec: UpsertSpec, source_columns: list[tuple[str, str]]) -> None:
    """UpsertError when a column the config names is not in the model's result (its
    delete marker, which the commit reads apart, names none), the delete marker is not
    boolean, or the result holds a column the commit makes (spec.is_reserved)."""
    # The delete marker is read apart, never a column of the merge: `_deleted` may be one.
    reserved = sorted(n for n, _ in source_columns if is_reserved(n) and n != spec.delete_marker)
    if reserved:
        raise UpsertError(
            f"Upsert into {spec.target}: the model's result has {', '.join(reserved)}, a name"
            " the commit gives its own columns; rename it in the model (an upstream's"
            " _commit_id as _source_commit_id, which changed_since reads)."
        )
    marker = spec.delete_marker
    if marker and marker not in {n for n, _ in source_columns}:
        # Checked before a full refresh drops the table: found by review, a misspelled
        # marker failed the commit only after the drop, and the table was left empty.
        raise UpsertError(
            f"Upsert into {spec.target}: delete_marker {marker!r} is not a column of the"
            " model's result; name it as the model spells it (case included)."
        )
    marker_type = dict(source_columns).get(marker, "boolean") if marker else "boolean"
    if marker_type.lower() not in {"boolean", "void"}:
        # Found by review: a string marker failed the commit on its first value other
        # than true or false, and a number was read as "not 0" (a status code deleted).
        raise UpsertError(
            f"Upsert into {spec.target}: delete_marker {marker!r} is a {marker_type} column;"
            " it must be boolean (true removes the key). Make it one in the model, e.g."
            f" `coalesce(status = 'deleted', false) as {marker}`."
        )
    names = {n.lower() for n, _ in source_columns if n != marker}
    named = (*spec.unique_key, *spec.ranking_columns)
    for column in (*named, *spec.partition_by):
        if column.lower() not in names:
            raise UpsertError(
                f"Upsert into {spec.target}: column {column!r} is not in the model's result;"
                " unique_key, ordering_field, tie_break and partition_by must name its columns."
            )


def ensure_tables(
    sql: Sql, spec: UpsertSpec, source_columns: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Create the log, the version store and the target if missing; add the source's
    new columns (`source_columns`: its (name, type), as table_columns gives them).

    Returns the target's data columns (no lineage, no partition columns).
    """
    sql(log_ddl(spec))
    refuse_missing_columns(spec, source_columns)
    source_columns = [(n, t) for n, t in source_columns if n != spec.delete_marker]
    partitions = {p.lower() for p in spec.partition_by}
    data = [(n, t) for n, t in source_columns if n.lower() not in partitions]
    types = {n.lower(): t for n, t in source_columns}
    partition_columns = [(p, types[p.lower()]) for p in spec.partition_by]
    if not table_exists(sql, spec.target):
        create_tables(sql, spec, data, partition_columns)
        return data
    refuse_recorded_changes(sql, spec)
    stored_columns, stored_by = described(sql, spec.target)
    # Spelled as the table spells them: partition paths (and so the log) use its spelling.
    if list(stored_by) != list(spec.partition_by):
        raise UpsertError(
            f"{spec.target} is partitioned by {stored_by or 'nothing'}, but the model says"
            f" partition_by={list(spec.partition_by)}: change the table's layout in place"
            " with `dbt run-operation repartition --args '{model: <name>, partition_by:"
            " [...]}'`, rebuild it with --full-refresh, or set partition_by as the table"
            " has it (spelled the same)."
        )
    existing = [
        (n, t)
        for n, t in stored_columns
        if n.lower() not in partitions and n not in (COMMIT_ID, COMMIT_TS)
    ]
    known = {n.lower() for n, _ in existing}
    new = [(n, t) for n, t in data if n.lower() not in known]
    if spec.on_schema_change == "fail":
        refuse_schema_change(spec.target, existing, data)
    if new and spec.on_schema_change == "append_new_columns":
        for table in (spec.versions, spec.target):
            add_missing_columns(sql, table, new)
        return existing + new
    return existing


def refuse_schema_change(
    target: str, stored: list[tuple[str, str]], source: list[tuple[str, str]]
) -> None:
    """UpsertError naming every column the model's result adds, lacks or gives another
    type than `target` stores (on_schema_change='fail', as dbt means it: any change).

    Found by review: only added columns failed; a retyped one was cast into the
    stored type (1.5 stored as 1), and a dropped one written NULL, silently.

    Example:
        >>> stored, source = [("a", "bigint"), ("b", "string")], [("A", "double")]
        >>> refuse_schema_change("s.t", stored, source)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        dynamic_ddl.upsert.spec.UpsertError: ...: lacks b; A is double, stored as bigint. Set ...
    """
    stored_types = {n.lower(): t.lower() for n, t in stored}
    source_types = {n.lower(): t.lower() for n, t in source}
    changes = []
    if added := [n for n, _ in source if n.lower() not in stored_types]:
        changes.append(f"adds {', '.join(added)}")
    if lacked := [n for n, _ in stored if n.lower() not in source_types]:
        changes.append(f"lacks {', '.join(lacked)}")
    changes += [
        f"{n} is {source_types[n.lower()]}, stored as {stored_types[n.lower()]}"
        for n, _ in source
        if n.lower() in stored_types and source_types[n.lower()] != stored_types[n.lower()]
    ]
    if changes:
        raise UpsertError(
            f"The model's result differs from {target}'s columns (on_schema_change='fail'):"
            f" {'; '.join(changes)}. Set on_schema_change='append_new_columns' to add new"
            " columns, or run with --full-refresh."
        )


def create_tables(
    sql: Sql,
    spec: UpsertSpec,
    data: list[tuple[str, str]],
    partition_columns: list[tuple[str, str]],
) -> None:
    """Create the version store, then the target over its empty folder.

    Without a target nothing can read a version, so a store or log entries
    left by a run killed in a first build or a full refresh are dropped first.
    """
    steps.reached("upsert.drop_leftovers")
    drop_table(sql, spec.versions)
    drop_log(sql, spec)
    steps.reached("upsert.create_versions")
    sql(create_sql(spec.versions, data + LINEAGE, [*partition_columns, (VERSION, "string")]))
    location = f"{table_location(sql, spec.versions)}/{EMPTY}"
    steps.reached("upsert.create_target")
    sql(create_sql(spec.target, data + LINEAGE, partition_columns, location))
    set_table_properties(sql, spec.target, wanted_properties(spec))


# The table property naming what a table's rows are unique by (key_signature).
KEY_PROPERTY = "dynamic_ddl.unique_key"
# The table property naming what the rows of a key are ranked by (ranking_signature).
RANKING_PROPERTY = "dynamic_ddl.ranking"
# The table property naming how the model built the rows it holds (UpsertSpec.built_with).
BUILT_WITH_PROPERTY = "dynamic_ddl.rows_built_with"
RECORDED_PROPERTIES = (KEY_PROPERTY, RANKING_PROPERTY, BUILT_WITH_PROPERTY)


def key_signature(spec: UpsertSpec) -> str:
    """What an upsert table's rows are unique by, as its KEY_PROPERTY records it (the
    order of the key's columns is no matter).

    Example:
        >>> key_signature(UpsertSpec("s.t", ("Id", "day"), "ts", global_key=True))
        'day,id global'
    """
    key = ",".join(sorted(k.lower() for k in spec.unique_key))
    return key + (" global" if spec.global_key else "")


def ranking_signature(spec: UpsertSpec) -> str:
    """What the rows of a key are ranked by, as a table's RANKING_PROPERTY records it:
    the ordering field, then the tie-break columns (their order matters).

    Example:
        >>> ranking_signature(UpsertSpec("s.t", ("id",), "Log_TS", tie_break=("seq",)))
        'log_ts,seq'
    """
    return ",".join(c.lower() for c in spec.ranking_columns)


def wanted_properties(spec: UpsertSpec) -> dict[str, str]:
    """The table properties a commit of `spec` records: its key, its ranking (none with
    `replace_partitions`), and how its model built the rows (`built_with`)."""
    recorded = {KEY_PROPERTY: key_signature(spec)}
    if spec.ranking_columns:
        recorded[RANKING_PROPERTY] = ranking_signature(spec)
    if spec.built_with:
        recorded[BUILT_WITH_PROPERTY] = recorded_build(spec.built_with)
    return recorded


# A metastore may keep a table property's value in up to 4,000 characters (as Spark
# splits a schema's JSON): notes longer than that stored (hex) are recorded by digest.
LONGEST_RECORDED = 3_900


def recorded_build(built_with: str) -> str:
    """UpsertSpec.built_with as a table records it: itself, or its SHA-256 when too long.

    Example:
        >>> recorded_build('[{"max_columns": 2}]'), recorded_build("x" * 4000)[:7]
        ('[{"max_columns": 2}]', 'sha256:')
    """
    if len(property_value(built_with)) <= LONGEST_RECORDED:  # as stored: hex
        return built_with
    return "sha256:" + hashlib.sha256(built_with.encode()).hexdigest()


def build_note(macro: str, settings: dict[str, Any], ordered: set[str]) -> str:
    """One note of how a model builds rows, as UpsertSpec.built_with holds it: `macro`
    and its settings, those None left out (so that a setting a macro gains later, None
    by default, changes no table's note), lists sorted but those named `ordered` (so
    that only an order that matters counts).

    Example:
        >>> build_note("pivot", {"pin": ["b", "a"], "latest_by": ["y", "x"], "allow": None},
        ...            {"latest_by"})
        '{"latest_by": ["y", "x"], "macro": "pivot", "pin": ["a", "b"]}'
    """

    def plain(value: Any) -> Any:
        return json.loads(json.dumps(value, sort_keys=True, default=str))

    noted: dict[str, Any] = {"macro": macro}
    for name, value in settings.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)) and name not in ordered:
            value = sorted(plain(list(value)), key=lambda v: json.dumps(v, sort_keys=True))
        noted[name] = plain(value)
    return json.dumps(noted, sort_keys=True)


def built_with(notes: set[str]) -> str:
    """UpsertSpec.built_with from a model's notes (each a JSON object), in one order.

    Example:
        >>> built_with({'{"b": 1}', '{"a": [2]}'})
        '[{"a": [2]}, {"b": 1}]'
    """
    return f"[{', '.join(sorted(notes))}]" if notes else ""


def changed_builds(stored: str, wanted: str) -> str:
    """What differs between two built_with values, for a message: the notes only the
    table was built with, then those only the model now builds with.

    Example:
        >>> changed_builds('[{"max_columns": 200}, {"topic": "t"}]',
        ...                '[{"max_columns": 300}, {"topic": "t"}]')
        'built with {"max_columns": 200}; now {"max_columns": 300}'
    """
    if stored.startswith("sha256:") or wanted.startswith("sha256:"):
        return "the notes are too long to show"
    old, new = json.loads(stored or "[]"), json.loads(wanted or "[]")
    gone = [json.dumps(n, sort_keys=True) for n in old if n not in new]
    came = [json.dumps(n, sort_keys=True) for n in new if n not in old]
    if not came:
        return f"built with {', '.join(gone)}, which the model no longer notes"
    if not gone:
        return f"the model now also notes {', '.join(came)}"
    return f"built with {', '.join(gone)}; now {', '.join(came)}"


def refuse_recorded_changes(sql: Sql, spec: UpsertSpec) -> None:
    """UpsertError when the table was built with another unique_key or global_key than
    the model says: a coarser key kept one row per new key in the partitions a commit
    touched and duplicates elsewhere (found by review). Likewise when the model ranks a
    key's rows by another ordering_field or tie_break: the rows kept so far won under the
    old ranking and those they beat are gone, so a build from scratch would keep others;
    and a tombstone keeps its key, ordering and partition values only, so under a new
    ranking it ranked NULL and any older update brought its key back. And when the model
    builds its rows another way than the table's were built (`built_with`: a pivot's
    arguments, event time formats), or notes nothing where it did: an incremental run
    would leave the rows landed before as they were, beside new ones built the new way.

    What a table does not record yet (built before it was recorded) is the model's
    from this commit on.
    """
    stored = recorded_properties(sql, spec.target, RECORDED_PROPERTIES)
    wanted = wanted_properties(spec)
    key = stored.get(KEY_PROPERTY)
    if key is not None and key != wanted[KEY_PROPERTY]:
        raise UpsertError(
            f"{spec.target} holds rows unique by {key or 'partition (replace_partitions)'},"
            f" but the model says {wanted[KEY_PROPERTY] or 'none'} (unique_key, global_key):"
            " rebuild it with --full-refresh, or set them as the table was built."
        )
    rebuild = f"`dbt build --full-refresh -s {spec.model_name or spec.target.split('.')[-1]}+`"
    ranking, ranked = stored.get(RANKING_PROPERTY), wanted.get(RANKING_PROPERTY)
    if ranking is not None and ranked is not None and ranking != ranked:
        deletes = " (and a remembered delete holds no value of new columns)"
        raise UpsertError(
            f"{spec.target} keeps the latest row of each key ranked by {ranking}, but the"
            f" model ranks by {ranked} (ordering_field, tie_break): the rows kept so far"
            f" won under the old ranking{deletes if spec.keeps_tombstones else ''}, so"
            " incremental runs would differ from a build from scratch. Rebuild it and what"
            f" reads it, {rebuild}, or set them back."
        )
    built, builds = stored.get(BUILT_WITH_PROPERTY), wanted.get(BUILT_WITH_PROPERTY, "")
    if built is not None and built != builds:
        raise UpsertError(
            f"{spec.target}'s rows were built another way than the model builds them now"
            f" ({changed_builds(built, builds)}): the rows landed before would stay as they"
            f" were beside new ones. Rebuild it and what reads it, {rebuild}, or set them"
            " back."
        )
    set_table_properties(sql, spec.target, {k: v for k, v in wanted.items() if k not in stored})


def carry_recorded(sql: Sql, table: str, new: str) -> None:
    """Give `new`, a definition about to replace `table` (a repartition's), what `table`
    records of its key, ranking and build (found by review: without it, the next run took the
    model's key, whatever it had become)."""
    set_table_properties(sql, new, recorded_properties(sql, table, RECORDED_PROPERTIES))


def add_missing_columns(sql: Sql, table: str, columns: list[tuple[str, str]]) -> None:
    """`ADD COLUMNS` for those of `columns` the table lacks (none: no statement)."""
    have = {n.lower() for n, _ in table_columns(sql, table)}
    missing = [(n, t) for n, t in columns if n.lower() not in have]
    if missing:
        steps.reached("upsert.add_columns")
        added = ", ".join(f"{quoted_identifier(n)} {t}" for n, t in missing)
        sql(f"alter table {table} add columns ({added})")


def create_sql(
    table: str,
    columns: list[tuple[str, str]],
    partitions: list[tuple[str, str]],
    location: str | None = None,
) -> str:
    """`CREATE TABLE IF NOT EXISTS` of a Parquet table, partition columns last."""
    body = ", ".join(f"{quoted_identifier(n)} {t}" for n, t in [*columns, *partitions])
    partitioned = (
        f" partitioned by ({', '.join(quoted_identifier(n) for n, _ in partitions)})"
        if partitions
        else ""
    )
    where = location_clause(location) if location else ""
    return f"create table if not exists {table} ({body}) using parquet{partitioned}{where}"
