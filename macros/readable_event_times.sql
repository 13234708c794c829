{#
    Generic test (a warning in this project): rows whose event time is there
    but could not be read, so they have no `_event_date`. Such rows are kept
    (raw keeps the text); the fix is the topic's `event_time_format` in
    vars.raw_topics, or a word with the feed's owner.

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

    select
        unreadable._source_file,
        unreadable._batch_id,
        unreadable.{{ adapter.quote(event_time_column) }} as event_time

    from {{ model }} as unreadable

    where
        unreadable._event_date is null
        and unreadable.{{ adapter.quote(event_time_column) }} is not null

{% endtest %}
