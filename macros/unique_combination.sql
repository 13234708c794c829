{#
    Generic test: no two rows share the same values in `columns`.
    (dbt packages cannot be fetched here, so the project carries its own.)

    Example:
        data_tests:
          - unique_combination:
              arguments:
                columns: [device_model, capture_date]

    Arguments:
        columns: the columns that together identify a row, required
#}
{% test unique_combination(model, columns) %}

    select
        {% for column in columns %}{{ adapter.quote(column) }}{{ ", " if not loop.last }}{% endfor %},
        count(*) as row_count

    from {{ model }}

    group by {% for column in columns %}{{ adapter.quote(column) }}{{ ", " if not loop.last }}{% endfor %}

    having count(*) > 1

{% endtest %}
