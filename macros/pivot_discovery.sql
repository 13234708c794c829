{#
    Key discovery for pivot_key_values (macros/pivot.sql), in its own file so
    that a dbt unit test can override it by name: discovery queries the
    warehouse, which a unit test's input rows are not in.
#}

{#
    The distinct keys of the rows `where` selects, best first: the `pinned`
    keys, then the keys the most rows carry, then key order; at most
    `limit` of them (keys past it go to `_overflow`, never lost), so a flood
    of keys neither evicts the keys models use nor floods the dbt process.
    `default_keys` when not executing. One aggregate over the key column of
    those rows only.

    Example:
        {% set keys = dynamic_ddl.discover_pivot_keys(ref('raw_app_attributes'), 'record_key', "_batch_id > '7'") %}

    Arguments:
        relation: the key/value rows, required
        key_column: column holding the key, required
        where: SQL filter on the rows, default `true`
        allow: keep only these keys, default all
        deny: leave out these keys, default none
        default_keys: the keys when not executing, default none
        pinned: keys ranked first whatever their count, default none
        limit: the most keys returned, default 10000
#}
{% macro discover_pivot_keys(
    relation, key_column, where='true', allow=none, deny=[], default_keys=[], pinned=[], limit=10000
) -%}
    {%- if not execute -%}
        {%- set keys = default_keys | unique(case_sensitive=true) | sort(case_sensitive=true) -%}
        {{ return(dynamic_ddl.filter_keys(keys, allow, deny)) }}
    {%- endif -%}
    {%- set query = dynamic_ddl.pivot_discovery_query(
        relation, key_column, where, allow, deny, pinned, limit) -%}
    {%- set found = run_query(query).columns[0].values() | map('string') | list -%}
    {{ return(found) }}
{%- endmacro %}


{#
    The query discovery runs: the non-null keys of the rows `where` selects
    (in `allow` when given, not in `deny`), ranked, at most `limit`. A key of
    more than 1,024 characters gets no column (its values stay in `_overflow`):
    each key fed to a column is written twice into the model's SQL, and lines of
    up to `max_line_bytes` could make that SQL hundreds of MB (found by review).
#}
{% macro pivot_discovery_query(
    relation, key_column, where='true', allow=none, deny=[], pinned=[], limit=10000
) -%}
    {%- set key = adapter.quote(key_column) -%}
    select pivot_rows.{{ key }}
    from {{ relation }} as pivot_rows
    where ({{ where }}) and pivot_rows.{{ key }} is not null
        and char_length(pivot_rows.{{ key }}) <= 1024
    {%- if allow is not none %}
        and pivot_rows.{{ key }} in ({{ dynamic_ddl.pivot_literals(allow) }})
    {%- endif %}
    {%- if deny %}
        and pivot_rows.{{ key }} not in ({{ dynamic_ddl.pivot_literals(deny) }})
    {%- endif %}
    group by pivot_rows.{{ key }}
    order by
        {%- if pinned %}
        pivot_rows.{{ key }} in ({{ dynamic_ddl.pivot_literals(pinned) }}) desc,
        {%- endif %}
        count(*) desc, pivot_rows.{{ key }}
    limit {{ limit | int }}
{%- endmacro %}


{# Keys as a comma-separated list of string literals; `null` for none (matches nothing). #}
{% macro pivot_literals(keys) -%}
    {%- for key in keys -%}
        {{ dynamic_ddl.pivot_literal(key) }}{{ ', ' if not loop.last }}
    {%- else -%}
        null
    {%- endfor -%}
{%- endmacro %}


{# Keys in `allow` (when given) and not in `deny`, in their order. #}
{% macro filter_keys(keys, allow, deny) -%}
    {{ return(keys | reject('in', deny or []) | select('in', allow if allow is not none else keys) | list) }}
{%- endmacro %}
