{#
    Generic test (a warning in this project): rows whose event time is there
    but could not be read, so they have no `_event_date` (in a timestamp
    column, such a time is kept in its `__text` companion). Such rows are kept
    (raw keeps the text); the fix is the topic's `event_time_format` or
    `time_formats` in vars.raw_topics, or a word with the feed's owner.

    Example:
        data_tests:
          - readable_event_times:
              arguments:
                event_time_column: data_log_ts
              config:
                severity: warn

    Arguments:
        event_time_column: the raw column of the topic's event time, required
#}
{% test readable_event_times(model, event_time_column) %}
    {#- A timestamp column keeps what it cannot hold in its text companion. -#}
    {%- set text = column_or_null(model, event_time_column ~ '__text', 'string', 'unreadable') %}

    select
        unreadable._source_file,
        unreadable._batch_id,
        coalesce(
            cast(unreadable.{{ adapter.quote(event_time_column) }} as string), {{ text }}
        ) as event_time

    from {{ model }} as unreadable

    where
        unreadable._event_date is null
        and (
            unreadable.{{ adapter.quote(event_time_column) }} is not null
            or {{ text }} is not null
        )

{% endtest %}
