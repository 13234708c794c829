{#
    A raw column with the values its type could not hold: raw never changes a
    column's type, so when a provider sends values of another type (text in a
    number column, 2.5 in a bigint column, integers beyond 2^53 in a double
    one), each value it cannot hold exactly is kept, as its JSON text, in the
    companion column `<column>__text` (docs/decisions/0005, "Types"). This
    reads the pair as one column of `data_type`: the column's value, else the
    companion's text in that type (NULL when it does not convert). The
    companion may not exist (column_or_null): it appears with the first value
    that needs it.

    Example:
        {{ exact_column(ref('raw_device_events'), 'data_record_id', 'string', 'raw_events') }}

    Arguments:
        relation: the raw or child table, required
        column: the column's name, required
        data_type: the Spark type to read the pair as, required
        alias: how the model refers to the relation, default the relation itself
#}
{% macro exact_column(relation, column, data_type, alias=none) -%}
    {%- set reference = (alias or relation) ~ '.' ~ adapter.quote(column) -%}
    {%- set text = column_or_null(relation, column ~ '__text', 'string', alias) -%}
    coalesce(cast({{ reference }} as {{ data_type }}), try_cast({{ text }} as {{ data_type }}))
{%- endmacro %}
