{#
    The value of `expression` at the greatest `order_by` among the rows where
    it is not NULL: the latest known value of an attribute that only some
    reports carry (an aggregate, for a `group by`).

    Example:
        {{ latest_value('reports.city', 'reports.log_ts') }} as city

    Arguments:
        expression: the attribute, required
        order_by: what orders the reports (a time), required
#}
{% macro latest_value(expression, order_by) -%}
    max_by({{ expression }}, if({{ expression }} is not null, {{ order_by }}, null))
{%- endmacro %}
