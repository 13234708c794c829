"""The tables of an upsert target: the log, the version store and the target itself.

Every statement here may be repeated: a run killed between two of them is
mended by the next run, which creates what is missing and adds only the
columns each table lacks.
"""

from __future__ import annotations

from dynamic_ddl import steps
from dynamic_ddl.catalog import (
    Sql,
    described,
    drop_table,
    table_columns,
    table_exists,
    table_location,
)
from dynamic_ddl.sql_text import location_clause, quoted_identifier, quoted_table, string_literal
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
    refuse_another_key(sql, spec)
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
    _record_key(sql, spec)


# The table property naming what a table's rows are unique by (key_signature).
KEY_PROPERTY = "dynamic_ddl.unique_key"


def key_signature(spec: UpsertSpec) -> str:
    """What an upsert table's rows are unique by, as its KEY_PROPERTY records it (the
    order of the key's columns is no matter).

    Example:
        >>> key_signature(UpsertSpec("s.t", ("Id", "day"), "ts", global_key=True))
        'day,id global'
    """
    key = ",".join(sorted(k.lower() for k in spec.unique_key))
    return key + (" global" if spec.global_key else "")


def refuse_another_key(sql: Sql, spec: UpsertSpec) -> None:
    """UpsertError when the table was built with another unique_key or global_key than
    the model says: a coarser key kept one row per new key in the partitions a commit
    touched and duplicates elsewhere (found by review). A table built before keys were
    recorded takes the model's."""
    stored = _recorded_key(sql, spec.target)
    if stored is None:
        _record_key(sql, spec)
    elif stored != key_signature(spec):
        raise UpsertError(
            f"{spec.target} holds rows unique by {stored or 'partition (replace_partitions)'},"
            f" but the model says {key_signature(spec) or 'none'} (unique_key, global_key):"
            " rebuild it with --full-refresh, or set them as the table was built."
        )


def carry_key(sql: Sql, table: str, new: str) -> None:
    """Give `new`, a definition about to replace `table` (a repartition's), the key
    `table` records (found by review: without it, the next run took the model's key,
    whatever it had become)."""
    stored = _recorded_key(sql, table)
    if stored is not None:
        _set_key(sql, new, stored)


def _recorded_key(sql: Sql, table: str) -> str | None:
    properties = {row[0]: row[1] for row in sql(f"show tblproperties {quoted_table(table)}")}
    return properties.get(KEY_PROPERTY)


def _record_key(sql: Sql, spec: UpsertSpec) -> None:
    _set_key(sql, spec.target, key_signature(spec))


def _set_key(sql: Sql, table: str, value: str) -> None:
    sql(
        f"alter table {quoted_table(table)} set tblproperties"
        f" ({string_literal(KEY_PROPERTY)} = {string_literal(value)})"
    )


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
