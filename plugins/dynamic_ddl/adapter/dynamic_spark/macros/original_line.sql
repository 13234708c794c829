{#
    The original JSON line of a raw, child or quarantine row, read from the
    inbox (the raw archive) by the row's lineage, after checking the file
    against the checksum the ledger recorded when its batch read it. A file
    changed or removed since fails with a message that says so. Logs the
    line and returns it.

    Example:
        dbt run-operation original_line --args
            '{source_file: /data/inbox/device_events/dt=2026-11-01/part-0.json, line_number: 7,
              batch_id: 20261101T000500Z-3f2a9c1d}'

    Arguments:
        source_file: the row's `_source_file` (`source_file` in quarantine)
        line_number: the row's `_line_number` (`line_number` in quarantine)
        batch_id: the row's `_batch_id`; needed when several batches took a line of this
            number (a file rewritten in place, or grown after a last line with no line end)
        schema: the schema of the raw tables and their ledger, default the target's
#}
{% macro original_line(source_file, line_number, batch_id=none, schema=none) -%}
    {%- set line = adapter.original_line(
        schema or target.schema, source_file, line_number, batch_id
    ) -%}
    {{ log(line, info=True) }}
    {{ return(line) }}
{%- endmacro %}
