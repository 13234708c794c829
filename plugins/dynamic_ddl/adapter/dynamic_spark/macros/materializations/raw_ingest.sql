{#
    Raw ingestion: a Python model that commits its own batches.

    A raw model does not return a table for dbt to write: it appends new
    inbox files to its raw table, child tables, quarantine, schema registry
    and file ledger, batch by batch and exactly once (dynamic_ddl.ingest.job).
    This materialization hands the model its settings, built from
    `vars.raw_topics.<topic>` (the topic is the model name without `raw_`)
    and `vars.inbox_dir`, and runs it. Nothing is dropped or rebuilt, so
    `--full-refresh` changes nothing here.
#}
{% materialization raw_ingest, adapter='dynamic_spark', supported_languages=['python'] %}
    {%- set target_relation = api.Relation.create(
        identifier=model['alias'], schema=schema, database=database, type='table'
    ) -%}
    {%- set settings = dynamic_spark_raw_ingest_settings(model, schema) -%}

    {{ run_hooks(pre_hooks) }}

    {% do adapter.create_schema(target_relation) %}
    {% do adapter.create_bookkeeping_tables(schema) %}
    {%- call statement('main', language='python') -%}
        {{ dynamic_spark_py_raw_ingest(compiled_code, settings) }}
    {%- endcall -%}
    {% call statement('refresh_raw') %}refresh table {{ target_relation }}{% endcall %}

    {% do persist_docs(target_relation, model) %}

    {{ run_hooks(post_hooks) }}

    {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}


{#
    The settings a raw model runs with: the topic's entry in vars.raw_topics
    (its schema_mode, hints and time_formats overridden by the same keys in
    the model's meta), the inbox, the limits in vars.raw_limits, and where
    to write.
#}
{% macro dynamic_spark_raw_ingest_settings(model, schema) %}
    {%- set name = model['alias'] -%}
    {%- if not name.startswith('raw_') -%}
        {{ exceptions.raise_compiler_error(
            "Raw model '" ~ name ~ "' must be named raw_<topic>, "
            ~ "with the topic configured in vars.raw_topics of dbt_project.yml."
        ) }}
    {%- endif -%}
    {%- set topic = name[4:] -%}
    {%- set topics = var('raw_topics', {}) -%}
    {%- if topic not in topics -%}
        {{ exceptions.raise_compiler_error(
            "Topic '" ~ topic ~ "' (model " ~ name ~ ") is not in vars.raw_topics of dbt_project.yml. "
            ~ "Add it: raw_topics: {" ~ topic ~ ": {record_key: [json.path], event_time: json.path}}."
        ) }}
    {%- endif -%}
    {%- set entry = topics[topic] -%}
    {#- Schema control the model's own meta sets wins over the topic's entry
        (dynamic_ddl/ingest/raw_models.py, OVERRIDABLE). -#}
    {%- set meta = config.get('meta') or {} -%}
    {%- set overridden = [] -%}
    {%- set control = {} -%}
    {%- for key in adapter.raw_overridable_settings() -%}
        {%- if meta.get(key) is not none -%}
            {%- do overridden.append(key) -%}
            {%- do control.update({key: meta[key]}) -%}
        {%- else -%}
            {%- do control.update({key: entry.get(key)}) -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set record_key = entry['record_key'] -%}
    {%- if record_key is string -%}{%- set record_key = [record_key] -%}{%- endif -%}
    {%- set settings = {
        'topic': topic,
        'topic_settings': entry.keys() | list,
        'record_key': record_key,
        'event_time': entry['event_time'],
        'pinned_paths': entry.get('pinned_paths', []),
        'event_time_format': entry.get('event_time_format'),
        'keep_raw_json': entry.get('keep_raw_json', false),
        'schema_mode': control['schema_mode'],
        'hints': control['hints'],
        'time_formats': control['time_formats'],
        'overridden': overridden,
        'inbox_dir': var('inbox_dir', 'data/inbox'),
        'schema': schema,
        'table': name,
        'lock_wait_seconds': config.get('lock_wait_seconds'),
        'compact_every': config.get('compact_every'),
        'compact_after_days': config.get('compact_after_days'),
        'compact_target_mb': config.get('compact_target_mb'),
    } -%}
    {%- do settings.update(var('raw_limits', {})) -%}
    {{ return(settings) }}
{% endmacro %}


{% macro dynamic_spark_py_raw_ingest(compiled_code, settings) -%}
# dynamic_spark: model code starts on the next line
{{ compiled_code }}


# --- Written by the dynamic_spark adapter: hand the model its settings, run it. --- #
import json as _json

config_dict["raw_ingest"] = _json.loads({{ settings | tojson | tojson }})
dbt = dbtObj(spark.table)
model(dbt, spark)
{%- endmacro %}


{#
    The ledger, registry and quarantine tables of the target schema, created
    if missing. Called by the project's on-run-start hook as well, so their
    source tests find them before any raw model has run.
#}
{% macro create_ingestion_tables() %}
    {%- if execute -%}
        {% call statement('create_ingestion_schema') %}create schema if not exists {{ target.schema }}{% endcall %}
        {% do adapter.create_bookkeeping_tables(target.schema) %}
    {%- endif -%}
{% endmacro %}


{#
    Every topic of vars.raw_topics has its raw model: the model files are
    generated from that config (`make topics`, dynamic_ddl/ingest/raw_models.py),
    so a topic added without running it would be skipped without a word.
    Fails the run naming the topics and the command, and so does a raw model
    generated by an older version (no meta.raw_topic). Called in on-run-start.
#}
{% macro check_raw_topics() %}
    {%- if execute -%}
        {%- set topics = var('raw_topics', {}) -%}
        {%- set models = [] -%}
        {%- set stale = [] -%}
        {%- for node in graph.nodes.values() if node.resource_type == 'model' -%}
            {%- do models.append(node.name) -%}
            {%- if node.name.startswith('raw_') and node.name[4:] in topics
                and node.config.materialized == 'raw_ingest'
                and 'raw_topic' not in (node.config.meta or {}) -%}
                {%- do stale.append(node.name) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set problems = [] -%}
        {%- set missing = [] -%}
        {%- for topic in topics if ('raw_' ~ topic) not in models -%}
            {%- do missing.append(topic) -%}
        {%- endfor -%}
        {%- if missing -%}
            {%- do problems.append("Topics in vars.raw_topics without a raw model: " ~ missing | join(', ')) -%}
        {%- endif -%}
        {%- if stale -%}
            {%- do problems.append("Raw models written by an older `make topics`: " ~ stale | join(', ')
                ~ " (their meta would override their topics' schema control)") -%}
        {%- endif -%}
        {%- if problems -%}
            {{ exceptions.raise_compiler_error(
                problems | join('. ') ~ ". Run `make topics` (python -m dynamic_ddl.ingest topics)"
                ~ " to write python_models/raw/raw_<topic>.py for each, then run again."
            ) }}
        {%- endif -%}
    {%- endif -%}
{% endmacro %}
