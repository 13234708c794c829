{#
    A column of a relation if the relation has it yet, else a typed NULL: for
    attributes a provider adds later (they reach raw and landing as new
    columns), so a model can name them before the first batch that has them.
    Without `execute` (parse, lint) the column itself; in a unit test, where
    the relation is the fixture (a CTE, which has no columns to look up), a
    typed NULL.

    Example:
        {{ column_or_null(ref('raw_device_events'), 'data_network_type', 'string', 'raw_events') }}

    Arguments:
        relation: the relation to look the column up in, required
        column: the column's name, required
        data_type: its Spark type, for the NULL and the cast, required
        alias: how the model refers to the relation, default the relation itself
        in_unit_tests: `null` (default) or `column`, for a column every fixture of
            the relation holds (the upstream had it when the test was written)
#}
{% macro column_or_null(relation, column, data_type, alias=none, in_unit_tests='null') -%}
    {%- set reference = (alias or relation) ~ '.' ~ adapter.quote(column) -%}
    {%- if execute and not relation.schema and in_unit_tests == 'null' -%}
        {{- return('cast(null as ' ~ data_type ~ ')') -}}
    {%- elif execute and relation.schema -%}
        {%- set names = adapter.get_columns_in_relation(relation) | map(attribute='name') | map('lower') | list -%}
        {%- if column | lower not in names -%}
            {{- return('cast(null as ' ~ data_type ~ ')') -}}
        {%- endif -%}
    {%- endif -%}
    {{- return('cast(' ~ reference ~ ' as ' ~ data_type ~ ')') -}}
{%- endmacro %}
