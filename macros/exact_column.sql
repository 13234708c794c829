{#
    A raw column with the values its type could not hold: raw never changes a
    column's type, so when a provider sends values of another type (text in a
    number column, 2.5 in a bigint column, integers beyond 2^53 in a double
    one), each value it cannot hold exactly is kept, as its JSON text, in the
    companion column `<column>__text` (docs/decisions/0005, "Types"). This
    reads the pair as one column of `data_type`: the column's value, else the
    companion's text, in that type (NULL when it does not convert), each as a
    build from scratch reads it from the column of the union type (where the
    pair is one double or string column). Either may not exist yet: the
    companion appears with the first value that needs it, and the column with
    the first batch that sends the attribute (a NULL until then, as
    column_or_null gives).

    Example:
        {{ exact_column(ref('raw_device_events'), 'data_record_id', 'string', 'raw_events') }}

    Arguments:
        relation: the raw or child table, required
        column: the column's name, required
        data_type: the Spark type to read the pair as, required
        alias: how the model refers to the relation, default the relation itself
#}
{% macro exact_column(relation, column, data_type, alias=none) -%}
    {%- set value, text = dynamic_ddl.column_and_text(relation, column, alias) -%}
    {%- set read = dynamic_ddl.read_as(value, data_type) if value else none -%}
    {%- set kept = dynamic_ddl.read_as(text, data_type) if text else none -%}
    {{- dynamic_ddl.first_of([read, kept], data_type) -}}
{%- endmacro %}


{#-- A value (a column, or a companion's text) in `data_type`, NULL when it does not
    convert. An integer or boolean type also reads a number written as a double (`2.0`,
    `55.5`, `4.0E9`) as Spark casts a double: 55.5 reads 55 and true, as a build from
    scratch reads it from the union type's (double or string) column. --#}
{% macro read_as(expression, data_type) -%}
    {%- set direct = 'try_cast(' ~ expression ~ ' as ' ~ data_type ~ ')' -%}
    {%- set through_double = ['tinyint', 'smallint', 'int', 'integer', 'bigint', 'long', 'boolean'] -%}
    {%- if data_type | lower not in through_double -%}
        {{- return(direct) -}}
    {%- endif -%}
    {{- return('coalesce(' ~ direct ~ ', try_cast(try_cast(' ~ expression ~ ' as double) as '
        ~ data_type ~ '))') -}}
{%- endmacro %}


{#-- The references to a column and to its text companion (none for one the relation
    lacks), from one look at its columns; in a unit test, where the relation is the
    fixture (a CTE, whose columns cannot be looked up), the column alone. --#}
{% macro column_and_text(relation, column, alias=none) -%}
    {%- set qualifier = (alias or relation) ~ '.' -%}
    {%- set value = qualifier ~ adapter.quote(column) -%}
    {%- set text = qualifier ~ adapter.quote(column ~ '__text') -%}
    {%- if execute and not relation.schema -%}
        {{- return((value, none)) -}}
    {%- elif execute -%}
        {%- set names = adapter.get_columns_in_relation(relation) | map(attribute='name') | map('lower') | list -%}
        {#- No columns: a table not built yet, or one a killed swap hid (named). -#}
        {%- if not names -%}
            {%- do adapter.refuse_a_hidden_table(relation) -%}
        {%- endif -%}
        {%- set has_text = (column ~ '__text') | lower in names -%}
        {{- return((value if column | lower in names else none, text if has_text else none)) -}}
    {%- endif -%}
    {{- return((value, text)) -}}
{%- endmacro %}


{#-- The first of these expressions that is not NULL (unset ones left out); a typed NULL
    when none is set. --#}
{% macro first_of(expressions, data_type) -%}
    {%- set set = expressions | reject('none') | list -%}
    {%- if not set -%}
        {{- return('cast(null as ' ~ data_type ~ ')') -}}
    {%- elif set | length == 1 -%}
        {{- return(set[0]) -}}
    {%- endif -%}
    {{- return('coalesce(' ~ set | join(', ') ~ ')') -}}
{%- endmacro %}
