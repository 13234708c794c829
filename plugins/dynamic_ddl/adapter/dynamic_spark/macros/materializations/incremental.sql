{#
    Incremental materialization: dbt-spark's, with three changes.

    - A first build, a full refresh, or replacing a view builds under a
      staging name and swaps in (see the table materialization), so a failed
      rebuild keeps the live table.
    - Python models run for the new rows into `<name>__dbt_tmp`, a real table
      (a Python model may run in another session, which cannot see temp views);
      it is dropped after the merge.
    - The `upsert` and `replace_partitions` strategies (upsert.sql) commit
      every build, the first one too, through the copy-on-write protocol
      (replace_partitions: the new rows replace the partitions they fall in,
      whole), and check an enforced
      contract on every run. A full refresh builds the model's rows into a
      staging table first, so a failing model keeps the table and its
      history; only then are the old table and its versions replaced.
#}
{% materialization incremental, adapter='dynamic_spark', supported_languages=['sql', 'python'] -%}
    {%- set raw_file_format = config.get('file_format', default='parquet') -%}
    {%- set raw_strategy = config.get('incremental_strategy') or 'append' -%}
    {%- set grant_config = config.get('grants') -%}

    {%- set file_format = dbt_spark_validate_get_file_format(raw_file_format) -%}
    {%- set strategy = dbt_spark_validate_get_incremental_strategy(raw_strategy, file_format) -%}

    {%- set unique_key = config.get('unique_key', none) -%}
    {%- set partition_by = config.get('partition_by', none) -%}
    {%- set language = model['language'] -%}
    {%- set on_schema_change = incremental_validate_on_schema_change(
        config.get('on_schema_change'), default='ignore'
    ) -%}
    {%- set incremental_predicates = config.get('predicates', none) or config.get('incremental_predicates', none) -%}
    {%- set target_relation = this.incorporate(type='table') -%}
    {%- set existing_relation = load_relation(this) -%}
    {%- set tmp_relation = this.incorporate(path={"identifier": this.identifier ~ '__dbt_tmp'}, type='table') -%}
    {%- if language == 'sql' -%}
        {%- set tmp_relation = tmp_relation.include(database=false, schema=false) -%}
    {%- endif -%}

    {%- if strategy in ['insert_overwrite', 'microbatch'] and partition_by -%}
        {%- call statement() -%}
            set spark.sql.sources.partitionOverwriteMode = DYNAMIC
        {%- endcall -%}
    {%- endif -%}

    {{ run_hooks(pre_hooks) }}

    {#-- upsert and replace_partitions commit through the copy-on-write protocol. --#}
    {%- set copy_on_write = strategy in ['upsert', 'replace_partitions'] -%}
    {%- if language == 'sql' and config.get('contract').enforced and copy_on_write -%}
        {% do dynamic_spark_assert_upsert_contract(compiled_code) %}
    {%- endif -%}

    {%- set rebuild = existing_relation is none or existing_relation.is_view or should_full_refresh() -%}
    {%- set upsert_rebuild = copy_on_write and rebuild and existing_relation is not none -%}
    {%- if upsert_rebuild -%}
        {#-- A savepoint keeps its history until released: refuse before building. --#}
        {% do adapter.refuse_rebuild_over_savepoints(target_relation) %}
        {#-- Build first: a model whose SQL fails leaves the table, its versions and its log. --#}
        {%- set staging_relation = dynamic_spark_staging_relation(target_relation) -%}
        {%- call statement('build_staging', language=language) -%}
            {%- if language == 'sql' -%}
                {#-- Not create_table_as: dbt-spark's contract check there knows no commit
                     columns (the contract was checked above, with them). --#}
                create table {{ staging_relation }} using {{ file_format }} as {{ compiled_code }}
            {%- else -%}
                {{ create_table_as(False, staging_relation, compiled_code, language) }}
            {%- endif -%}
        {%- endcall -%}
        {#-- A config or result the commit would refuse fails here, before the drop
             (found by review: a failed rebuild dropped the table and its history). --#}
        {% do dynamic_spark_check_upsert(staging_relation, target_relation) %}
        {#-- Then every upsert build, the first too, is a commit: start from an empty store. --#}
        {%- if existing_relation.is_view -%}
            {% do adapter.drop_relation(existing_relation) %}
        {%- endif -%}
        {% do adapter.drop_upsert_table(target_relation) %}
        {%- set commit = dynamic_spark_upsert(staging_relation, target_relation) -%}
        {%- call noop_statement('main', 'UPSERT ' ~ commit['changed_partitions'] ~ ' partitions') -%}
            -- upsert commit {{ commit['commit_id'] }}
        {%- endcall -%}
        {% do adapter.drop_relation(staging_relation) %}
    {%- elif rebuild and not copy_on_write -%}
        {%- set staging_relation = dynamic_spark_staging_relation(target_relation) -%}
        {%- call statement('main', language=language) -%}
            {{ create_table_as(False, staging_relation, compiled_code, language) }}
        {%- endcall -%}
        {% do dynamic_spark_swap_in(staging_relation, target_relation, existing_relation) %}
        {% do persist_constraints(target_relation, model) %}
    {%- else -%}
        {%- if language == 'python' -%}
            {% do adapter.drop_relation(tmp_relation) %}
            {% do adapter.clear_staging_folder(tmp_relation) %}
        {%- endif -%}
        {%- call statement('create_tmp_relation', language=language) -%}
            {{ create_table_as(True, tmp_relation, compiled_code, language) }}
        {%- endcall -%}
        {%- if copy_on_write -%}
            {%- set commit = dynamic_spark_upsert(tmp_relation, target_relation) -%}
            {%- call noop_statement('main', 'UPSERT ' ~ commit['changed_partitions'] ~ ' partitions') -%}
                -- upsert commit {{ commit['commit_id'] }}
            {%- endcall -%}
        {%- else -%}
            {%- do process_schema_changes(on_schema_change, tmp_relation, existing_relation) -%}
            {%- call statement('main') -%}
                {{ dbt_spark_get_incremental_sql(strategy, tmp_relation, target_relation, existing_relation, unique_key, incremental_predicates) }}
            {%- endcall -%}
        {%- endif -%}
        {%- if language == 'python' -%}
            {% do adapter.drop_relation(tmp_relation) %}
        {%- endif -%}
    {%- endif -%}

    {% set should_revoke = should_revoke(existing_relation, full_refresh_mode) %}
    {% do apply_grants(target_relation, grant_config, should_revoke) %}
    {% do persist_docs(target_relation, model) %}

    {{ run_hooks(post_hooks) }}

    {{ return({'relations': [target_relation]}) }}
{%- endmaterialization %}
