"""The merge of an upsert: the batch's winners against the stored rows it touches, as SQL."""

from __future__ import annotations

from dynamic_ddl.sql_text import quoted_identifier, rows_predicate, sql_literal
from dynamic_ddl.upsert.commits import commit_time
from dynamic_ddl.upsert.spec import COMMIT_ID, COMMIT_TS, TOMBSTONES, VERSION, UpsertSpec


def aligned_source(
    spec: UpsertSpec,
    source: str,
    data: list[tuple[str, str]],
    source_columns: list[tuple[str, str]],
) -> str:
    """The batch as a subquery with the target's columns: NULL for those it lacks.

    An empty text as a partition value is NULL: Spark stores it as the NULL
    partition (Hive's default), where the stored rows are then found.
    """
    present = {name.lower() for name, _ in source_columns}
    columns = [
        quoted_identifier(name)
        if name.lower() in present
        else f"cast(null as {data_type}) as {quoted_identifier(name)}"
        for name, data_type in data
    ]
    texts = {
        name.lower()
        for name, data_type in source_columns
        if data_type.lower().startswith(("string", "varchar", "char"))
    }
    for name in spec.partition_by:
        column = quoted_identifier(name)
        columns.append(f"nullif({column}, '') as {column}" if name.lower() in texts else column)
    if spec.delete_marker:
        columns.append(quoted_identifier(spec.delete_marker))
    return f"(select {', '.join(columns)} from {source})"


def comparable(column: str, data_type: str) -> str:
    """The column as a value SQL can order and compare: maps and variants (which
    cannot be) as their JSON text.

    >>> comparable("tags", "map<string,string>"), comparable("n", "bigint")
    ('to_json(`tags`)', '`n`')
    """
    unorderable = "map<" in data_type.lower() or "variant" in data_type.lower()
    return f"to_json({quoted_identifier(column)})" if unorderable else quoted_identifier(column)


def fingerprints_sql(
    spec: UpsertSpec, relation: str, data: list[tuple[str, str]], where: str
) -> str:
    """Per partition of `relation` (rows matching `where`): its values, then the number
    of rows and two sums of row hashes, which equal for two partitions holding the
    same rows in any order (a multiset's fingerprint; decimal sums cannot overflow)."""
    partitions = ", ".join(quoted_identifier(p) for p in spec.partition_by)
    row = f"struct({', '.join(comparable(n, t) for n, t in data)})"
    return (
        f"select {partitions}, count(*), sum(cast(xxhash64({row}) as decimal(38, 0))),"
        f" sum(cast(hash({row}) as decimal(38, 0))) from {relation} where {where}"
        f" group by {partitions}"
    )


def replacement_sql(
    spec: UpsertSpec, source: str, data: list[tuple[str, str]], commit_id: str, changed: str
) -> str:
    """The batch's rows as the new contents of the partitions they fall in, whole
    (`replace_partitions`), for the partitions matching `changed` (the others would
    get the rows they hold): the columns merge_sql gives, every row new."""
    select_columns = ", ".join(
        quoted_identifier(c) for c in [*(n for n, _ in data), *spec.partition_by]
    )
    new_ts = _commit_ts_literal(commit_id)
    partitions = ", ".join(quoted_identifier(p) for p in spec.partition_by)
    return f"""
select {select_columns}, {sql_literal(commit_id)} as {quoted_identifier(COMMIT_ID)},
    {new_ts} as {quoted_identifier(COMMIT_TS)}, false as _deleted, true as _is_new,
    false as _vacated, true as _changes_partition
from {source}
where {changed}
distribute by {partitions}"""


def _partial_columns(
    spec: UpsertSpec, data: list[tuple[str, str]], key: str
) -> tuple[str, str, str]:
    """For `partial_updates`: window columns `_latest_<i>` (per key, the value of the
    newest row holding one, for each data column but the key and the ordering), the
    output columns taking them, and the merged row's content. Empty strings otherwise."""
    if not spec.partial_updates:
        return "", "", ""
    fixed = {c.lower() for c in [*spec.unique_key, *spec.ranking_columns]}
    ranking = ", ".join(quoted_identifier(c) for c in spec.ranking_columns)
    order = f"struct({ranking}, _incoming)"
    latest, output, content = [], [], []
    for i, (name, data_type) in enumerate(data):
        column = quoted_identifier(name)
        if name.lower() in fixed:
            output.append(column)
            content.append(comparable(name, data_type))
            continue
        latest.append(
            f",\n        max_by({column}, if({column} is null, null, {order}))"
            f" over (partition by {key}) as _latest_{i}"
        )
        output.append(f"_latest_{i} as {column}")
        content.append(comparable(f"_latest_{i}", data_type))
    output += [quoted_identifier(p) for p in spec.partition_by]
    return "".join(latest), ", ".join(output), f"struct({', '.join(content)})"


def stored_tombstones(
    spec: UpsertSpec, select_columns: str, commit_id: str, tombstones: list[tuple]
) -> str:
    """A union branch of the merge's candidates: the remembered deletes of the
    partitions the batch touches (`tombstones`: their values, then the tombstone
    version of the version each partition reads), within the horizon."""
    if not spec.keeps_tombstones or not tombstones:
        return ""
    commit, commit_ts = quoted_identifier(COMMIT_ID), quoted_identifier(COMMIT_TS)
    where = rows_predicate([*spec.partition_by, VERSION], tombstones)
    horizon = f"{_commit_ts_literal(commit_id)} - interval {int(spec.tombstone_days)} days"
    return f"""
        union all
        select {select_columns}, {commit}, {commit_ts}, true as _deleted, false as _incoming
        from {spec.versions} where {where} and {commit_ts} >= {horizon}"""


def moved_keys_sql(spec: UpsertSpec, source: str, commit_id: str) -> str:
    """The distinct partition values of the target's rows (and, with tombstones, its
    remembered deletes within the horizon) whose key has a row of the batch
    (`source`) in another partition: where a key moving partitions must leave.

    Reads the key and partition columns of every partition (Hudi's global
    simple index does the same); the batch's partitions are found without it.
    """
    partitions = [quoted_identifier(p) for p in spec.partition_by]
    keys = [quoted_identifier(k) for k in spec.unique_key]
    columns = ", ".join([*partitions, *keys])
    stored = f"select {columns} from {spec.target}"
    if spec.keeps_tombstones:
        horizon = f"{_commit_ts_literal(commit_id)} - interval {int(spec.tombstone_days)} days"
        stored += (
            f" union all select {columns} from {spec.versions}"
            f" where endswith({VERSION}, {sql_literal(TOMBSTONES)})"
            f" and {quoted_identifier(COMMIT_TS)} >= {horizon}"
        )
    same_key = " and ".join(f"stored.{k} <=> batch.{k}" for k in keys)
    same_partition = " and ".join(f"stored.{p} <=> batch.{p}" for p in partitions)
    here = ", ".join(f"stored.{p}" for p in partitions)
    return (
        f"select distinct {here} from ({stored}) as stored"
        f" left semi join {source} as batch on {same_key} and not ({same_partition})"
    )


def _commit_ts_literal(commit_id: str) -> str:
    return f"timestamp {sql_literal(commit_time(commit_id).isoformat(sep=' '))}"


def merge_sql(
    spec: UpsertSpec,
    source: str,
    data: list[tuple[str, str]],
    commit_id: str,
    affected: list[tuple],
    tombstones: list[tuple] = (),
) -> str:
    """The winners of the batch against the stored rows of the partitions it touches.

    One ranking per key over the batch's rows and the stored row: the
    greatest ordering value wins, then the greatest tie-break values
    (`spec.tie_break`), then an incoming row over the stored one, then the
    greater content (a deterministic tie-break within the batch).
    Contents are the row's data values, compared natively after the shuffle
    (cheaper than shuffling a JSON text of each row; maps and variants as
    JSON).
    An incoming winner identical to the stored row keeps the stored row (and
    its commit); an incoming delete marker removes a stored key. With
    tombstones (`spec.keeps_tombstones`) a winning delete stays as a row with
    `_deleted` (stored as the partition's tombstone version), so it also
    beats older rows of later batches; without, a delete of a key never
    stored is ignored. `affected` lists the batch's partitions
    (values), a literal filter so the target's other partitions are never
    listed or read; stored rows failing the spec's predicates are kept as
    they are. Columns: the target's, plus `_is_new` (the row changes the
    partition), `_deleted` (the key is removed) and, for a partitioned
    table, `_changes_partition` (its partition has a new row).

    With `spec.moves_keys` a key is ranked across partitions (`affected`
    then also lists the partitions where the batch's keys are stored): a
    stored row that loses to a row of another partition is output with
    `_vacated` (never written), so that its partition changes too. The row's
    partition is then part of its content.

    Rows are shuffled by partition only: one exchange serves the ranking per
    key and the flag per partition, and each partition's new version is
    written by one task (one file rather than one per shuffle task). With
    `moves_keys` the ranking needs a shuffle by key first (two exchanges).
    """
    scope = [] if spec.moves_keys else list(spec.partition_by)
    key = ", ".join(quoted_identifier(k) for k in [*scope, *spec.unique_key])
    select_columns = ", ".join(
        quoted_identifier(c) for c in [*(n for n, _ in data), *spec.partition_by]
    )
    values = [comparable(n, t) for n, t in data]
    if spec.moves_keys:
        values += [quoted_identifier(p) for p in spec.partition_by]
    content = f"struct({', '.join(values)})"
    by_content = ", ".join(f"{v} desc" for v in values)
    latest, output, merged_content = _partial_columns(spec, data, key)
    deleted = (
        f"coalesce(cast({quoted_identifier(spec.delete_marker)} as boolean), false)"
        if spec.delete_marker
        else "false"
    )
    commit, commit_ts = quoted_identifier(COMMIT_ID), quoted_identifier(COMMIT_TS)
    ordering = quoted_identifier(spec.ordering_field)
    touched = rows_predicate(spec.partition_by, affected) if spec.partition_by else "true"
    stored = f"{spec.target} as DBT_INTERNAL_DEST where {touched}"
    matched = " and ".join(f"({p})" for p in spec.predicates) or "true"
    kept = (
        f"""
union all
select {select_columns}, {commit}, {commit_ts}, false as _deleted, false as _is_new,
    false as _vacated
from {stored} and not coalesce({matched}, false)"""
        if spec.predicates
        else ""
    )
    new_ts = _commit_ts_literal(commit_id)
    remembered = stored_tombstones(spec, select_columns, commit_id, list(tombstones))
    stored_delete, same_delete = "", "false"
    partitions = ", ".join(quoted_identifier(p) for p in spec.partition_by)
    if spec.keeps_tombstones:  # a delete repeated in a later batch changes nothing
        # ... in the same partition: one sent to another keeps its tombstone there.
        place, same_place = "", ""
        if spec.moves_keys:
            place = f", 'p', struct({partitions})"
            same_place = f" and struct({partitions}) <=> _stored_delete.p"
        stored_delete = (
            f",\n        max(if(not _incoming and _deleted, named_struct('o', {ordering},"
            f" 'c', {commit}, 't', {commit_ts}{place}), null))"
            f" over (partition by {key}) as _stored_delete"
        )
        # Only against a stored delete: with none, a NULL ordering matched the NULL of
        # the missing one, and the delete was kept as unchanged with no commit id
        # (found by review).
        same_delete = (
            f"_incoming and _deleted and _stored_content is null"
            f" and _stored_delete is not null and {ordering} <=> _stored_delete.o{same_place}"
        )
    if spec.partial_updates:  # a stored winner may take newer values from older rows
        unchanged = f"not _deleted and {merged_content} <=> _stored_content"
        stored_kept, is_new = "false", "not _unchanged"
    else:
        unchanged = (
            f"(_incoming and not _deleted and {content} <=> _stored_content) or ({same_delete})"
        )
        stored_kept, is_new = "not _incoming", "_incoming and not _unchanged"
        output = select_columns
    kept_commit = (
        "coalesce(_stored_commit, _stored_delete.c)" if stored_delete else "_stored_commit"
    )
    kept_ts = (
        "coalesce(_stored_commit_ts, _stored_delete.t)" if stored_delete else "_stored_commit_ts"
    )
    forgotten = "" if spec.keeps_tombstones else " and not (_deleted and _stored_content is null)"
    # Ranked per key across partitions, rows are shuffled by key first.
    by_partition = f"\ndistribute by {partitions}" if scope else ""
    ranking = "".join(f"{quoted_identifier(c)} desc nulls last, " for c in spec.ranking_columns)
    order = f"{ranking}_incoming desc, {by_content}"
    winner_at, vacated = "", "false"
    if spec.moves_keys:  # a stored row that loses to a row of another partition
        winner_at = (
            f",\n        first_value(struct({partitions})) over (partition by {key}"
            f" order by {order}) as _winner_at"
        )
        vacated = (
            f"_rank > 1 and not _incoming and not _deleted"
            f" and not struct({partitions}) <=> _winner_at"
        )
    merged = f"""
with
candidates as (
    select * from (
        select {select_columns}, cast(null as string) as {commit},
            cast(null as timestamp) as {commit_ts}, {deleted} as _deleted, true as _incoming
        from {source}
        union all
        select {select_columns}, {commit}, {commit_ts}, false as _deleted, false as _incoming
        from {stored} and {matched}{remembered}
    ){by_partition}
),
ranked as (
    select *,
        row_number() over (partition by {key} order by {order}) as _rank{winner_at},
        max(if(_incoming or _deleted, null, {content})) over (partition by {key})
            as _stored_content,
        max(if(_incoming or _deleted, null, {commit})) over (partition by {key})
            as _stored_commit,
        max(if(_incoming or _deleted, null, {commit_ts})) over (partition by {key})
            as _stored_commit_ts{stored_delete}{latest}
    from candidates
),
winners as (
    select *, _rank = 1 and ({unchanged}) as _unchanged, {vacated} as _vacated
    from ranked
    where (_rank = 1{forgotten}) or ({vacated})
)
select {output},
    case when _vacated or {stored_kept} then {commit} when _unchanged then {kept_commit}
        else {sql_literal(commit_id)} end as {commit},
    case when _vacated or {stored_kept} then {commit_ts} when _unchanged then {kept_ts}
        else {new_ts} end as {commit_ts},
    _deleted, _vacated or ({is_new}) as _is_new, _vacated
from winners{kept}"""
    if not partitions:
        return merged
    return f"""
select *, max(_is_new) over (partition by {partitions}) as _changes_partition
from ({merged}
)"""
