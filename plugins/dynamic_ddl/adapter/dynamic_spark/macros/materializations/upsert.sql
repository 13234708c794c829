{#
    The `upsert` incremental strategy: latest-wins merge by key into a plain
    Parquet table, copy-on-write of the partitions that change (see
    docs/decisions/0006-copy-on-write-upserts.md for the commit protocol).

    Example:
        {{ config(
            materialized='incremental',
            incremental_strategy='upsert',
            unique_key='device_id',
            ordering_field='log_ts',
            partition_by=['state_date'],
            delete_marker='is_deleted',
            on_schema_change='append_new_columns'
        ) }}

    Config:
        unique_key: the record key, one column or a list, required
        ordering_field: the greatest value wins for a key, required
        tie_break: columns deciding between rows with equal ordering values, greatest
            first, e.g. ['_batch_id', '_line_number'] (the raw lineage): a build from
            scratch then keeps the row incremental runs keep. Without it the incoming
            row wins a tie across runs, the greater content within one run
        partition_by: partition columns; only partitions holding a changed key are rewritten
        delete_marker: a boolean column (another type is refused); a winning row with
            true removes its key
        tombstone_days: with delete_marker, how many days after its commit a delete
            is remembered (default 30): an update older than the delete that
            arrives later does not bring the key back; 0 remembers none
        global_key: true when a key's partition can change (an event corrected to
            another day): a key stored in another partition than its new row's
            is found there and moved; reads the key and partition columns of
            the whole table per commit (default false: keys are looked up in the
            batch's partitions only)
        keep_commits: N keeps the files to read the table as it was after each of
            its last N + 1 commits (`as_of`) and to restore it (`rollback_to`);
            default 1 (what rollback_last_commit needs)
        keep_days: D also keeps every commit made in the D days before the last
            one, so the table can be read as of any time in them (default: none)
        partial_updates: true when rows carry some of a key's columns (pivoted
            attributes split across batches): per column, the newest row holding
            a value wins; a NULL keeps the stored value. The stored row keeps one
            ordering value (its newest): use an ordering_field that grows with
            arrival (a batch id), or a late row older than the stored one loses
            even a column whose stored value came from an older row still
        on_schema_change: ignore (default), append_new_columns or fail
        incremental_predicates: stored rows failing them (the table is aliased
            DBT_INTERNAL_DEST) take no part in the merge and are kept as they are

    The `replace_partitions` strategy commits the same way, but the model's rows
    replace the partitions they fall in, whole: a recomputed day is that day's
    new contents (groups that vanished from it are gone), with rollback and
    `changed_since` as for upserts. It needs partition_by only. When
    partition_by is the day alone, a day that `rows_of_changed_days` lists
    and the model finds empty is emptied too.

    Example:
        {{ config(
            materialized='incremental',
            incremental_strategy='replace_partitions',
            partition_by=['event_date']
        ) }}
#}

{#-- dbt-spark's validation, with `upsert` accepted on any file format we write. --#}
{% macro dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) %}
    {%- set strategies = ['append', 'merge', 'insert_overwrite', 'microbatch', 'upsert', 'replace_partitions'] -%}
    {%- if raw_strategy not in strategies -%}
        {%- do exceptions.raise_compiler_error(
            "Invalid incremental strategy provided: " ~ raw_strategy
            ~ "\nExpected one of: '" ~ strategies | join("', '") ~ "'") -%}
    {%- endif -%}
    {%- if raw_strategy == 'merge' and file_format not in ['delta', 'iceberg', 'hudi'] -%}
        {%- do exceptions.raise_compiler_error(
            "Invalid incremental strategy provided: merge\n"
            ~ "merge needs file_format delta, iceberg or hudi; on " ~ file_format
            ~ " use incremental_strategy='upsert' (with unique_key and ordering_field).") -%}
    {%- endif -%}
    {%- if raw_strategy in ['insert_overwrite', 'microbatch'] and target.endpoint -%}
        {%- do exceptions.raise_compiler_error(
            "Invalid incremental strategy provided: " ~ raw_strategy
            ~ "\nYou cannot use this strategy when connecting via endpoint") -%}
    {%- endif -%}
    {%- do return(raw_strategy) -%}
{% endmacro %}


{#-- Commit `source`'s rows into `target`; returns what the commit did. --#}
{% macro dynamic_spark_upsert(source, target) %}
    {%- do return(adapter.upsert_into(source, target, dynamic_spark_upsert_options())) -%}
{% endmacro %}


{#-- Fail, naming the fix, when the model's config or its rows in `source` cannot be
     committed into `target`: checked before a rebuild drops the table. --#}
{% macro dynamic_spark_check_upsert(source, target) %}
    {%- do adapter.check_upsert_source(source, target, dynamic_spark_upsert_options()) -%}
{% endmacro %}


{#-- The model's upsert config, as adapter.upsert_into takes it. --#}
{% macro dynamic_spark_upsert_options() %}
    {%- set options = {
        'model_name': model.name,
        'strategy': config.get('incremental_strategy'),
        'partial_updates': config.get('partial_updates'),
        'unique_key': config.get('unique_key'),
        'ordering_field': config.get('ordering_field'),
        'tie_break': config.get('tie_break'),
        'partition_by': config.get('partition_by'),
        'delete_marker': config.get('delete_marker'),
        'tombstone_days': config.get('tombstone_days'),
        'global_key': config.get('global_key'),
        'keep_commits': config.get('keep_commits'),
        'keep_days': config.get('keep_days'),
        'on_schema_change': config.get('on_schema_change'),
        'incremental_predicates': config.get('predicates') or config.get('incremental_predicates'),
    } -%}
    {%- do return(options) -%}
{% endmacro %}


{#
    Check an upsert model's enforced contract against its SQL, on every run.

    dbt-spark checks a contract only when it creates a table from the SQL;
    an upsert merges from a temporary view instead. The contract describes
    the table, so it lists the two columns each commit adds (_commit_id,
    _commit_ts) besides the model's own.
#}
{% macro dynamic_spark_assert_upsert_contract(sql) %}
    {%- set with_lineage -%}
        select *, cast(null as string) as _commit_id, cast(null as timestamp) as _commit_ts
        from ({{ sql }}) as model_rows
    {%- endset -%}
    {%- do assert_columns_equivalent(with_lineage) -%}
{% endmacro %}
