{#- Each run pivots every (id, log_ts) an unseen batch touches from all of its raw
    records, older batches' too (read from the days those batches hold): the newest
    value of each key wins (by batch, file path, line), and the row equals what a
    build from scratch gives (it takes the inbox's files in path order). #}
{{ config(
    incremental_strategy='upsert',
    unique_key=['id', 'log_ts'],
    ordering_field='_batch_id',
    partition_by=['id_bucket'],
    on_schema_change='append_new_columns'
) }}

{#- Keys whose values are cast (try_cast); a value that does not convert keeps its text in _unconverted. -#}
{%- set pivot_types = {'storage_used_gb': 'double', 'notifications_enabled': 'boolean'} -%}
{#- The keys when rendering without a warehouse (dbt parse, sqlfluff). -#}
{%- set default_keys = ['app_version', 'city', 'email', 'first_name', 'language', 'last_name', 'state'] -%}
{#- Keys production models read (dim_users): they take a column first, whatever a flood of other keys does. -#}
{%- set model_keys = default_keys + ['theme', 'subscription_tier'] -%}

{%- set raw = ref('raw_app_attributes') -%}
{%- set batches = unseen_batch_filters(raw) -%}
{%- set id = exact_column(raw, 'id', 'string', 'raw_app_attributes') -%}
{#- Every raw record of the (id, log_ts) the unseen batches touch, typed and bucketed. -#}
{%- set attribute_rows -%}
    (
        with

        typed_records as (
            select
                {{ id }} as id,
                {{ event_timestamp(exact_column(raw, 'log_ts', 'string', 'raw_app_attributes'), 'app_attributes') }} as log_ts,
                cast(pmod(xxhash64({{ id }}), 8) as int) as id_bucket,
                {{ exact_column(raw, 'record_key', 'string', 'raw_app_attributes') }} as record_key,
                {{ exact_column(raw, 'record_value', 'string', 'raw_app_attributes') }} as record_value,
                raw_app_attributes._batch_id,
                raw_app_attributes._source_file,
                raw_app_attributes._line_number,
                raw_app_attributes._slot
            from {{ raw }} as raw_app_attributes
            {#- A record without an id has no row to go to; raw keeps it (found by review:
                one such line failed the id test of every later build). #}
            where {{ batches.committed }} and {{ batches.days }} and {{ id }} is not null
        ),

        touched as (
            select distinct typed_records.id, typed_records.log_ts
            from typed_records
            where {{ batches.unseen }}
        )

        select typed_records.*
        from typed_records
        left semi join touched
            on typed_records.id <=> touched.id and typed_records.log_ts <=> touched.log_ts
    )
{%- endset %}

with

attributes as (

    {{ pivot_key_values(
        attribute_rows,
        group_by=['id', 'log_ts', 'id_bucket'],
        carry=['_batch_id'],
        types=pivot_types,
        max_columns=200,
        default_keys=default_keys,
        pin=model_keys,
        latest_by=['_batch_id', '_source_file', '_line_number']
    ) }}

)

select * from attributes
