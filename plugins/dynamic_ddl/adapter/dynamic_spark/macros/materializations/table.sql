{#
    Table materialization that never loses the live table.

    dbt-spark drops a non-Delta table and then builds the new one, so a failed
    build (a SQL error, a Python model that raises) leaves no table at all.
    Here the new table is built under a staging name first; only when it is
    complete is it swapped in by two renames (metadata operations). If the
    build fails, the live table is untouched.
#}
{% materialization table, adapter='dynamic_spark', supported_languages=['sql', 'python'] %}
    {%- set language = model['language'] -%}
    {%- set grant_config = config.get('grants') -%}
    {%- set existing_relation = adapter.get_relation(database=database, schema=schema, identifier=model['alias']) -%}
    {%- set target_relation = api.Relation.create(
        identifier=model['alias'], schema=schema, database=database, type='table'
    ) -%}

    {{ run_hooks(pre_hooks) }}

    {#- dbt lets only the materialization itself submit Python, so the build stays inline. -#}
    {%- set staging_relation = dynamic_spark_staging_relation(target_relation) -%}
    {%- call statement('main', language=language) -%}
        {{ create_table_as(False, staging_relation, compiled_code, language) }}
    {%- endcall -%}
    {% do dynamic_spark_swap_in(staging_relation, target_relation, existing_relation) %}

    {% set should_revoke = should_revoke(existing_relation, full_refresh_mode=True) %}
    {% do apply_grants(target_relation, grant_config, should_revoke) %}
    {% do persist_docs(target_relation, model) %}
    {% do persist_constraints(target_relation, model) %}

    {{ run_hooks(post_hooks) }}

    {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#
    The relation a rebuild writes before it is swapped in: `<name>__dbt_new`,
    emptied first in case a crashed run left one behind (its table, or the
    files of a write killed before it was one).
#}
{% macro dynamic_spark_staging_relation(target_relation) %}
    {%- set staging_relation = target_relation.incorporate(
        path={"identifier": target_relation.identifier ~ '__dbt_new'}
    ) -%}
    {% do adapter.drop_relation(staging_relation) %}
    {% do adapter.clear_staging_folder(staging_relation) %}
    {{ return(staging_relation) }}
{% endmacro %}


{#
    Put a fully built staging table in place of the live relation (see
    DynamicSparkAdapter.swap_in_table), then refresh it: other sessions on a
    shared server may have cached the old files.
#}
{% macro dynamic_spark_swap_in(staging_relation, target_relation, existing_relation) %}
    {% do adapter.swap_in_table(staging_relation, target_relation, existing_relation) %}
    {% call statement('refresh_after_swap') %}refresh table {{ target_relation }}{% endcall %}
{% endmacro %}
