{#
    Compact a raw model's table and its child tables: the partitions of each
    day older than `after_days` are merged into one per day, and partitions
    holding more files than their size needs are rewritten, into files near
    `target_mb` (dynamic_ddl/ingest/compaction.py). Each row keeps its
    `_batch_id`, so `unseen_batches`, lineage and the line count per batch
    hold as before; readers see the table before or after (a swap); the
    raw model waits on the same lock. A model's `compact_every: N` config
    does the same after every N-th batch, with its `compact_after_days` and
    `compact_target_mb`, which are also this operation's defaults.

    Example:
        dbt run-operation compact --args '{model: raw_device_events}'
        dbt run-operation compact --args '{model: raw_device_events, after_days: 0}'

    Arguments:
        model: the raw model's name, required
        after_days: merge the days older than this many days (0: every day before
            today), default the model's compact_after_days, else 2
        target_mb: the size files are written near, default the model's
            compact_target_mb, else 128
#}
{% macro compact(model, after_days=none, target_mb=none) %}
    {%- set node = dynamic_spark_model_node(model) -%}
    {%- set relation = dynamic_spark_model_relation(model) -%}
    {%- set options = {
        'compact_after_days': node.config.get('compact_after_days') if after_days is none else after_days,
        'compact_target_mb': node.config.get('compact_target_mb') if target_mb is none else target_mb,
        'lock_wait_seconds': node.config.get('lock_wait_seconds'),
    } -%}
    {%- for line in adapter.compact_raw(relation, options) -%}
        {%- do log(line ~ '.', info=True) -%}
    {%- endfor -%}
{% endmacro %}
