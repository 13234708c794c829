{#
    Key discovery for pivot_key_values (macros/pivot.sql), in its own file so
    that a dbt unit test can override it by name: discovery queries the
    warehouse, which a unit test's input rows are not in.
#}

{#
    The distinct keys of the rows `where` selects, sorted; `default_keys`
    when not executing. One scan of the key column of those rows only.

    Example:
        {% set keys = dynamic_ddl.discover_pivot_keys(ref('raw_app_attributes'), 'record_key', "_batch_id > '7'") %}

    Arguments:
        relation: the key/value rows, required
        key_column: column holding the key, required
        where: SQL filter on the rows, default `true`
        allow: keep only these keys, default all
        deny: leave out these keys, default none
        default_keys: the keys when not executing, default none
#}
{% macro discover_pivot_keys(relation, key_column, where='true', allow=none, deny=[], default_keys=[]) -%}
    {%- if not execute -%}
        {%- set keys = default_keys | unique(case_sensitive=true) | sort(case_sensitive=true) -%}
        {{ return(dynamic_ddl.filter_keys(keys, allow, deny)) }}
    {%- endif -%}
    {%- set query = dynamic_ddl.pivot_discovery_query(relation, key_column, where) -%}
    {%- set found = run_query(query).columns[0].values() | map('string') | sort(case_sensitive=true) -%}
    {{ return(dynamic_ddl.filter_keys(found, allow, deny)) }}
{%- endmacro %}


{# The query discovery runs: the distinct non-null keys of the rows `where` selects. #}
{% macro pivot_discovery_query(relation, key_column, where='true') -%}
    {%- set key = adapter.quote(key_column) -%}
    select distinct pivot_rows.{{ key }}
    from {{ relation }} as pivot_rows
    where ({{ where }}) and pivot_rows.{{ key }} is not null
{%- endmacro %}


{# Keys in `allow` (when given) and not in `deny`, in their order. #}
{% macro filter_keys(keys, allow, deny) -%}
    {{ return(keys | reject('in', deny or []) | select('in', allow if allow is not none else keys) | list) }}
{%- endmacro %}
