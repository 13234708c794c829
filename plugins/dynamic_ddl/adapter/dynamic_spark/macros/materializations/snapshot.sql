{#
    Snapshots on plain Parquet: dbt's snapshot, committed by the upsert protocol.

    dbt-spark refuses a snapshot unless the file format is delta, iceberg or
    hudi: its merge is a MERGE statement. Here dbt's own strategies (timestamp
    and check, hard_deletes, dbt_valid_to_current, snapshot_table_column_names)
    build the staging rows as usual; the change they describe is written as
    whole rows (closed rows with their new dbt_valid_to, and the new rows) and
    committed by copy-on-write, keyed by dbt_scd_id (dynamic_ddl/upsert/
    snapshots.py, docs/decisions/0006). The first run is a commit too, so a
    snapshot table has a version store, a commit log, a rollback
    (`rollback_last_commit`) and `changed_since`; a killed run leaves the
    table as it was or converges on the next run.

    Example (snapshots/snp_device_firmware.sql):
        {% snapshot snp_device_firmware %}
        {{ config(unique_key='device_id', strategy='check', check_cols=['firmware_version']) }}
        select device_id, firmware_version from {{ ref('lnd_device_state') }}
        {% endsnapshot %}

    Config, besides dbt's: partition_by (a column of the source whose value
    never changes for a key; each commit rewrites only the partitions holding a
    changed row; default none: the table is rewritten whole per commit).
    file_format delta, iceberg or hudi keeps dbt-spark's MERGE.
#}
{% materialization snapshot, adapter='dynamic_spark' %}
    {%- set file_format = config.get('file_format') or 'parquet' -%}
    {%- set merge_format = file_format in ['delta', 'iceberg', 'hudi'] -%}
    {%- set grant_config = config.get('grants') -%}
    {%- set columns = config.get('snapshot_table_column_names') or get_snapshot_table_column_names() -%}

    {%- set target_relation_exists, target_relation = get_or_create_relation(
        database=none, schema=model.schema, identifier=model.get('alias', model.get('name')), type='table'
    ) -%}
    {%- if not target_relation.is_table -%}
        {% do exceptions.relation_wrong_type(target_relation, 'table') %}
    {%- endif -%}
    {%- if not adapter.check_schema_exists(model.database, model.schema) -%}
        {% do create_schema(model.schema) %}
    {%- endif -%}

    {{ run_hooks(pre_hooks, inside_transaction=False) }}
    {{ run_hooks(pre_hooks, inside_transaction=True) }}

    {%- set strategy_macro = strategy_dispatch(config.get('strategy')) -%}
    {%- set strategy = strategy_macro(
        model, "snapshotted_data", "source_data", model['config'], target_relation_exists
    ) -%}

    {%- if not target_relation_exists -%}
        {%- set build_or_select_sql = build_snapshot_table(strategy, model['compiled_code']) -%}
        {{ check_time_data_types(build_or_select_sql) }}
        {%- if merge_format -%}
            {%- call statement('main') -%}
                {{ create_table_as(False, target_relation, build_or_select_sql) }}
            {%- endcall -%}
        {%- else -%}
            {%- set rows_relation = dynamic_spark_snapshot_rows(target_relation, build_or_select_sql) -%}
            {% do dynamic_spark_snapshot_commit(rows_relation, target_relation, columns) %}
        {%- endif -%}
    {%- else -%}
        {{ adapter.assert_valid_snapshot_target_given_strategy(target_relation, columns, strategy) }}
        {%- set build_or_select_sql = snapshot_staging_table(strategy, sql, target_relation) -%}
        {{ check_time_data_types(build_or_select_sql) }}
        {%- set staging_table = spark_build_snapshot_staging_table(strategy, sql, target_relation) -%}
        {%- set missing_columns = adapter.get_missing_columns(staging_table, target_relation)
            | rejectattr('name', 'in', dynamic_spark_snapshot_staging_only(strategy))
            | list -%}
        {%- if merge_format -%}
            {% do create_columns(target_relation, missing_columns) %}
            {%- set insert_cols = [] -%}
            {%- for column in adapter.get_columns_in_relation(staging_table)
                | rejectattr('name', 'in', dynamic_spark_snapshot_staging_only(strategy)) -%}
                {%- do insert_cols.append(adapter.quote(column.name)) -%}
            {%- endfor -%}
            {%- call statement('main') -%}
                {{ snapshot_merge_sql(target=target_relation, source=staging_table, insert_cols=insert_cols) }}
            {%- endcall -%}
        {%- else -%}
            {#-- A column new in the source: the commit adds it to the table and its store. --#}
            {%- set changes_sql = adapter.snapshot_changes_sql(
                target_relation, staging_table, columns, config.get('dbt_valid_to_current'),
                missing_columns) -%}
            {%- set rows_relation = dynamic_spark_snapshot_rows(target_relation, changes_sql) -%}
            {% do dynamic_spark_snapshot_commit(rows_relation, target_relation, columns) %}
        {%- endif -%}
    {%- endif -%}

    {%- set should_revoke = should_revoke(target_relation_exists, full_refresh_mode=False) -%}
    {% do apply_grants(target_relation, grant_config, should_revoke=should_revoke) %}
    {% do persist_docs(target_relation, model) %}

    {{ run_hooks(post_hooks, inside_transaction=True) }}
    {{ adapter.commit() }}
    {%- if staging_table is defined -%}
        {% do post_snapshot(staging_table) %}
    {%- endif -%}
    {{ run_hooks(post_hooks, inside_transaction=False) }}

    {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#-- The columns dbt's snapshot staging adds for its own use (dbt_change_type, dbt_unique_key[_<n>]). --#}
{% macro dynamic_spark_snapshot_staging_only(strategy) %}
    {%- set names = ['dbt_change_type', 'dbt_unique_key'] -%}
    {%- if strategy.unique_key is not string -%}
        {%- for key in strategy.unique_key -%}
            {%- do names.append('dbt_unique_key_' ~ loop.index) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(names + names | map('upper') | list) }}
{% endmacro %}


{#-- A temporary view `<snapshot>__dbt_rows` of `sql`: the rows one snapshot commit writes. --#}
{% macro dynamic_spark_snapshot_rows(target_relation, sql) %}
    {%- set rows_relation = api.Relation.create(
        identifier=target_relation.identifier ~ '__dbt_rows', type='view'
    ) -%}
    {%- call statement('snapshot_rows') -%}
        {{ create_table_as(True, rows_relation, sql) }}
    {%- endcall -%}
    {{ return(rows_relation) }}
{% endmacro %}


{#-- Commit a snapshot's rows into its table: an upsert keyed by dbt_scd_id. --#}
{% macro dynamic_spark_snapshot_commit(rows_relation, target_relation, columns) %}
    {#-- Rows sharing a dbt_scd_id would be merged into one: refuse them, as MERGE does.
         A partition value '' is stored as NULL (Spark keeps both in one partition), so
         where the next run's staging compares the column (unique_key, or check_cols of
         the check strategy), it would take the row for changed or its key for gone:
         refuse it too, in the same query. --#}
    {%- set scd_id = adapter.quote(columns.dbt_scd_id) -%}
    {%- set partition_by = config.get('partition_by') or [] -%}
    {%- set partition_by = [partition_by] if partition_by is string else partition_by -%}
    {%- set keys = config.get('unique_key') or [] -%}
    {%- set keys = ([keys] if keys is string else keys) | map('lower') | list -%}
    {%- set check_cols = config.get('check_cols') or [] -%}
    {%- set checked = check_cols if check_cols is not string else [check_cols] -%}
    {%- set checked = checked | map('lower') | list -%}
    {%- set empty_checks = [] -%}
    {%- for column in partition_by -%}
        {%- if column | lower in keys or (config.get('strategy') == 'check'
                and ('all' in checked or column | lower in checked)) -%}
            {%- do empty_checks.append("cast(" ~ adapter.quote(column) ~ " as string) = ''") -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set found = run_query(
        'select count(*) - count(distinct ' ~ scd_id ~ '), count_if('
        ~ (empty_checks | join(' or ') or 'false') ~ ') from ' ~ rows_relation
    ) -%}
    {%- set repeated, empty = found.columns[0].values()[0], found.columns[1].values()[0] -%}
    {%- if repeated > 0 -%}
        {%- do exceptions.raise_compiler_error(
            "Snapshot " ~ target_relation ~ ": " ~ repeated ~ " rows share a dbt_scd_id with"
            ~ " another: the source holds unique_key '" ~ config.get('unique_key')
            ~ "' more than once for one updated_at. Make the key unique in the snapshot's query.") -%}
    {%- endif -%}
    {%- if empty > 0 -%}
        {%- do exceptions.raise_compiler_error(
            "Snapshot " ~ target_relation ~ ": " ~ empty ~ " rows hold '' in a partition_by"
            ~ " column the snapshot compares (" ~ partition_by | join(', ') ~ "), which Spark"
            ~ " stores as NULL: the next run would take them for changed. Select"
            ~ " nullif(<column>, '') (or another value) in the snapshot's query.") -%}
    {%- endif -%}
    {%- set options = {
        'strategy': 'upsert',
        'unique_key': columns.dbt_scd_id,
        'ordering_field': columns.dbt_updated_at,
        'partition_by': config.get('partition_by'),
        'keep_commits': config.get('keep_commits'),
        'keep_days': config.get('keep_days'),
        'on_schema_change': 'append_new_columns',
    } -%}
    {%- set commit = adapter.upsert_into(rows_relation, target_relation, options) -%}
    {%- call noop_statement('main', 'SNAPSHOT ' ~ commit['changed_partitions'] ~ ' partitions') -%}
        -- snapshot commit {{ commit['commit_id'] }}
    {%- endcall -%}
    {%- call statement('drop_snapshot_rows') -%}
        drop view if exists {{ rows_relation }}
    {%- endcall -%}
{% endmacro %}


{#
    The relation's columns, as dbt's other adapters return them. dbt-spark's
    macro returns the raw `describe extended` table instead, so dbt's snapshot
    staging (hard_deletes='new_record') found none of the target's columns and
    wrote each deletion record with NULL in every source column.
#}
{% macro dynamic_spark__get_columns_in_relation(relation) %}
    {{ return(adapter.get_columns_in_relation(relation)) }}
{% endmacro %}
