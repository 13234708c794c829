{#- partial_updates: attributes of one (id, log_ts) split across batches each keep
    their latest value (a batch's row carries only the keys it sent). #}
{{ config(
    incremental_strategy='upsert',
    unique_key=['id', 'log_ts'],
    ordering_field='_batch_id',
    partial_updates=true,
    partition_by=['id_bucket'],
    on_schema_change='append_new_columns'
) }}

{#- Keys whose values are cast (try_cast); a value that does not convert keeps its text in _unconverted. -#}
{%- set pivot_types = {'storage_used_gb': 'double', 'notifications_enabled': 'boolean'} -%}
{#- The keys when rendering without a warehouse (dbt parse, sqlfluff). -#}
{%- set default_keys = ['app_version', 'city', 'email', 'first_name', 'language', 'last_name', 'state'] -%}
{#- Keys production models read (dim_users): they take a column first, whatever a flood of other keys does. -#}
{%- set model_keys = default_keys + ['theme', 'subscription_tier'] -%}

{#- The raw batches not taken yet, typed and bucketed: the pivot reads only these. -#}
{%- set attribute_rows -%}
    (
        select
            raw_app_attributes.id,
            {{ event_timestamp('raw_app_attributes.log_ts', 'app_attributes') }} as log_ts,
            cast(pmod(xxhash64(raw_app_attributes.id), 8) as int) as id_bucket,
            raw_app_attributes.record_key,
            raw_app_attributes.record_value,
            raw_app_attributes._batch_id
        from {{ ref('raw_app_attributes') }} as raw_app_attributes
        where {{ unseen_batches(source=ref('raw_app_attributes')) }}
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
        pin=model_keys
    ) }}

)

select * from attributes
