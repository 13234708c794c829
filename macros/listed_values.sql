{#
    A filter keeping rows whose `column` holds one of the values `query`
    returns (its first column), listed as literals: Spark then reads only the
    partitions holding them, where a join or a subquery would read them all.
    `false` when the query returns nothing; `true` without `execute` (parse,
    lint).

    Example:
        where {{ listed_values('_event_date', 'select distinct event_date from ' ~ ref('lnd_device_events'), 'raw_media') }}

    Arguments:
        column: the column filtered (a partition column), required
        query: SQL whose first column gives the values, required
        qualifier: the alias the model gives the filtered table, default none
#}
{% macro listed_values(column, query, qualifier='') -%}
    {%- if not execute -%}
        {{- return('true') -}}
    {%- endif -%}
    {{- return(adapter.listed_values_filter(column, query, qualifier)) -}}
{%- endmacro %}
