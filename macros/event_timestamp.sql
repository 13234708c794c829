{#
    The timestamp of an event time, read as the raw layer reads it
    (dynamic_ddl/schema/event_time.py): the topic's `event_time_format` and
    `time_formats`, epoch seconds or milliseconds, ISO 8601, then the common text formats;
    NULL when none reads it. One definition for raw, Python and SQL models. The
    formats are those the raw model runs with: its own meta's `time_formats`
    where it overrides the topic's entry in vars (found by review: landing read
    other formats than raw, and an incremental run missed rows a full refresh kept).

    Example:
        {{ event_timestamp('raw_events.data_log_ts', 'device_events') }}

    Arguments:
        expression: SQL of the event time value (any type), required
        topic: the topic in vars.raw_topics whose formats apply, default none
#}
{% macro event_timestamp(expression, topic=none) -%}
    {%- set topics = var('raw_topics', {}) -%}
    {%- set entry = topics[topic] if topic and topic in topics else {} -%}
    {%- set chosen = {'formats': entry.get('time_formats')} -%}
    {%- if execute and topic -%}
        {#- A unit test's graph holds no nodes: the topic's entry applies there. -#}
        {%- for node in graph.get('nodes', {}).values()
            if node.resource_type == 'model' and node.alias == 'raw_' ~ topic
            and (node.config.meta or {}).get('time_formats') is not none -%}
            {%- do chosen.update({'formats': node.config.meta['time_formats']}) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- set declared = chosen['formats'] or [] -%}
    {%- if declared is string -%}{%- set declared = [declared] -%}{%- endif -%}
    {%- set formats = [entry.get('event_time_format')] + declared -%}
    {#- An upsert model's table records them: a run reading times another way is
        refused, naming --full-refresh (rows dated before would stay). -#}
    {%- if execute and topic and model is defined and model.get('resource_type') == 'model' -%}
        {%- do adapter.note_rows_built_with(
            this, 'event_timestamp', {'topic': topic, 'formats': formats}, ordered=['formats']) -%}
    {%- endif -%}
    {{ adapter.event_timestamp_sql(expression, formats) }}
{%- endmacro %}
